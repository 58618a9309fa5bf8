// embed_api_test.cpp - the C API of include/lazylua.h (and its C++ wrapper)
// as a host uses it: errors, sandbox, memory limit, interrupts, several
// interpreters, zero-copy buffers, bad inputs.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "lazylua.h"
#include "lazylua.hpp"

namespace {

// Each test gets fresh interpreters, closed at the end.
class EmbedTest : public ::testing::Test {
 protected:
  lazylua_interpreter* open(const lazylua_options* options = nullptr) {
    lazylua_interpreter* interpreter = nullptr;
    EXPECT_EQ(lazylua_open(options, &interpreter), LAZYLUA_OK);
    opened_.push_back(interpreter);
    return interpreter;
  }
  void TearDown() override {
    for (lazylua_interpreter* interpreter : opened_) lazylua_close(interpreter);
  }
  std::string message(lazylua_interpreter* interpreter) {
    return lazylua_error_message(interpreter);
  }
  // The number a chunk `return`s through a global (run_string has no results).
  double number(lazylua_interpreter* interpreter, const char* expression) {
    const std::string chunk = std::string("result_ = ") + expression;
    EXPECT_EQ(lazylua_run_string(interpreter, chunk.c_str(), nullptr), LAZYLUA_OK)
        << message(interpreter);
    lazylua_value value;
    EXPECT_EQ(lazylua_get_global(interpreter, "result_", &value), LAZYLUA_OK);
    if (value.type == LAZYLUA_TYPE_INTEGER) return static_cast<double>(value.as.integer);
    EXPECT_EQ(value.type, LAZYLUA_TYPE_NUMBER);
    return value.as.number;
  }

 private:
  std::vector<lazylua_interpreter*> opened_;
};

TEST_F(EmbedTest, FeedsHostBufferAndReadsTensorBack) {
  lazylua_interpreter* lua = open();
  ASSERT_EQ(lazylua_run_string(lua, "function affine(x, a, b) return x * a + b end", "=model"),
            LAZYLUA_OK);
  const double input[2][2] = {{1, 2}, {3, 4}};
  const int64_t shape[2] = {2, 2};
  lazylua_tensor* x = nullptr;
  ASSERT_EQ(lazylua_tensor_from_buffer(lua, LAZYLUA_F64, input, shape, 2, &x), LAZYLUA_OK);
  lazylua_value arguments[3] = {lazylua_tensor_value(x), lazylua_integer(3), lazylua_number(0.5)};
  lazylua_value result;
  ASSERT_EQ(lazylua_call(lua, "affine", arguments, 3, &result, 1), LAZYLUA_OK) << message(lua);
  ASSERT_EQ(result.type, LAZYLUA_TYPE_TENSOR);
  int rank = 0;
  int64_t extents[4] = {};
  lazylua_dtype dtype;
  ASSERT_EQ(lazylua_tensor_info(result.as.tensor, &dtype, &rank, extents, 4), LAZYLUA_OK);
  EXPECT_EQ(dtype, LAZYLUA_F64);
  EXPECT_EQ(rank, 2);
  EXPECT_EQ(extents[0], 2);
  EXPECT_EQ(extents[1], 2);
  double output[4];
  ASSERT_EQ(lazylua_tensor_read(lua, result.as.tensor, LAZYLUA_F64, output, sizeof output),
            LAZYLUA_OK);
  EXPECT_EQ(output[0], 3.5);
  EXPECT_EQ(output[1], 6.5);
  EXPECT_EQ(output[2], 9.5);
  EXPECT_EQ(output[3], 12.5);
  // Read as another dtype: converted.
  int32_t as_integers[4];
  ASSERT_EQ(
      lazylua_tensor_read(lua, result.as.tensor, LAZYLUA_I32, as_integers, sizeof as_integers),
      LAZYLUA_OK);
  EXPECT_EQ(as_integers[3], 12);
  lazylua_tensor_free(result.as.tensor);
  lazylua_tensor_free(x);
}

TEST_F(EmbedTest, CallsReturnNumbersStringsAndSeveralResults) {
  lazylua_interpreter* lua = open();
  ASSERT_EQ(lazylua_run_string(lua,
                               "model = {} function model.describe(n, s) "
                               "return n * 2, s .. '!', nil, {} end",
                               nullptr),
            LAZYLUA_OK);
  lazylua_value arguments[2] = {lazylua_integer(21), lazylua_string("hi")};
  lazylua_value results[5];
  ASSERT_EQ(lazylua_call(lua, "model.describe", arguments, 2, results, 5), LAZYLUA_OK)
      << message(lua);
  EXPECT_EQ(results[0].type, LAZYLUA_TYPE_INTEGER);
  EXPECT_EQ(results[0].as.integer, 42);
  ASSERT_EQ(results[1].type, LAZYLUA_TYPE_STRING);
  EXPECT_EQ(std::string(results[1].as.string.data, results[1].as.string.length), "hi!");
  EXPECT_EQ(results[2].type, LAZYLUA_TYPE_NIL);
  EXPECT_EQ(results[3].type, LAZYLUA_TYPE_OTHER);
  EXPECT_EQ(results[4].type, LAZYLUA_TYPE_NIL);  // missing results are nil

  const lazylua_value pi = lazylua_number(3.25);
  ASSERT_EQ(lazylua_set_global(lua, "pi", &pi), LAZYLUA_OK);
  EXPECT_EQ(number(lua, "pi * 2"), 6.5);
}

TEST_F(EmbedTest, LuaErrorGivesMessageWithTracebackAndInterpreterStaysUsable) {
  lazylua_interpreter* lua = open();
  ASSERT_EQ(lazylua_run_string(lua,
                               "local function inner() error('boom in inner') end\n"
                               "function outer() inner() end\n",
                               "=model"),
            LAZYLUA_OK);
  EXPECT_EQ(lazylua_call(lua, "outer", nullptr, 0, nullptr, 0), LAZYLUA_ERROR_RUNTIME);
  const std::string text = message(lua);
  EXPECT_NE(text.find("model:1: boom in inner"), std::string::npos) << text;
  EXPECT_NE(text.find("stack traceback:"), std::string::npos) << text;
  EXPECT_NE(text.find("in function 'outer'"), std::string::npos) << text;

  // Tensor errors (shapes that do not broadcast) too.
  EXPECT_EQ(lazylua_run_string(lua, "local y = tensor.ones(2, 3) + tensor.ones(4)", "=shapes"),
            LAZYLUA_ERROR_RUNTIME);
  EXPECT_NE(message(lua).find("shapes:1:"), std::string::npos) << message(lua);

  EXPECT_EQ(lazylua_run_string(lua, "this is not lua", "=bad"), LAZYLUA_ERROR_SYNTAX);
  EXPECT_EQ(lazylua_run_file(lua, "/nonexistent/model.lua"), LAZYLUA_ERROR_FILE);
  EXPECT_EQ(number(lua, "(tensor.ones(4) * 2):sum():item()"), 8.0);
}

int host_add(lazylua_interpreter* lua, void* user_data, const lazylua_value* arguments,
             int argument_count, lazylua_value* results, int result_capacity) {
  ++*static_cast<int*>(user_data);
  if (argument_count != 2 || arguments[0].type == LAZYLUA_TYPE_STRING) {
    return lazylua_raise(lua, "host_add wants two numbers");
  }
  double sum = 0;
  for (int i = 0; i < 2; i++) {
    sum += arguments[i].type == LAZYLUA_TYPE_INTEGER ? static_cast<double>(arguments[i].as.integer)
                                                     : arguments[i].as.number;
  }
  results[0] = lazylua_number(sum);
  return result_capacity > 0 ? 1 : 0;
}

// A host function that gets a tensor, reads it (a sync inside a call) and
// returns a new tensor made from a host buffer.
int host_double(lazylua_interpreter* lua, void*, const lazylua_value* arguments, int argument_count,
                lazylua_value* results, int) {
  if (argument_count != 1 || arguments[0].type != LAZYLUA_TYPE_TENSOR) {
    return lazylua_raise(lua, "host_double wants a tensor");
  }
  float values[3];
  if (lazylua_tensor_read(lua, arguments[0].as.tensor, LAZYLUA_F32, values, sizeof values) !=
      LAZYLUA_OK) {
    return lazylua_raise(lua, lazylua_error_message(lua));
  }
  for (float& value : values) value *= 2;
  const int64_t shape[1] = {3};
  lazylua_tensor* doubled = nullptr;
  if (lazylua_tensor_from_buffer(lua, LAZYLUA_F32, values, shape, 1, &doubled) != LAZYLUA_OK) {
    return lazylua_raise(lua, lazylua_error_message(lua));
  }
  results[0] = lazylua_tensor_value(doubled);
  return 1;
}

TEST_F(EmbedTest, HostFunctionsAreCalledAndTheirErrorsAreLuaErrors) {
  lazylua_interpreter* lua = open();
  int calls = 0;
  ASSERT_EQ(lazylua_register_function(lua, "host_add", host_add, &calls), LAZYLUA_OK);
  ASSERT_EQ(lazylua_register_function(lua, "host_double", host_double, nullptr), LAZYLUA_OK);
  EXPECT_EQ(number(lua, "host_add(2, 0.5)"), 2.5);
  EXPECT_EQ(number(lua, "host_double(tensor.new({1, 2, 3}) + 1):sum():item()"), 18.0);
  // A host error is a Lua error: pcall catches it, with the caller's line.
  EXPECT_EQ(number(lua,
                   "(function() local ok, e = pcall(host_add, 'x')\n"
                   "return (not ok and e:find('host_add wants two numbers', 1, true)) and 1 or 0 "
                   "end)()"),
            1.0);
  EXPECT_EQ(lazylua_run_string(lua, "\n host_add('x')", "=caller"), LAZYLUA_ERROR_RUNTIME);
  EXPECT_NE(message(lua).find("caller:2: host_add wants two numbers"), std::string::npos)
      << message(lua);
  EXPECT_NE(message(lua).find("stack traceback:"), std::string::npos);
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(number(lua, "host_add(1, 1)"), 2.0);
}

TEST_F(EmbedTest, SandboxDeniesFilesProcessesAndCModules) {
  lazylua_options options;
  lazylua_options_init(&options);
  options.sandbox = 1;
  lazylua_interpreter* sandboxed = open(&options);
  EXPECT_EQ(lazylua_run_string(sandboxed, "io.open('/etc/passwd')", nullptr),
            LAZYLUA_ERROR_RUNTIME);
  EXPECT_NE(message(sandboxed).find("io"), std::string::npos) << message(sandboxed);
  EXPECT_EQ(lazylua_run_string(sandboxed, "os.execute('true')", nullptr), LAZYLUA_ERROR_RUNTIME);
  EXPECT_EQ(number(sandboxed,
                   "(io == nil and debug == nil and os.execute == nil and os.getenv == nil "
                   "and package.loadlib == nil and loadfile == nil and dofile == nil "
                   "and tensor.save == nil) and 1 or 0"),
            1.0);
  // Safe parts stay: os.time, string, tensors.
  EXPECT_GT(number(sandboxed, "os.time()"), 0.0);
  EXPECT_EQ(number(sandboxed, "tensor.arange(4):sum():item()"), 6.0);
  // No C modules and no Lua files through require.
  EXPECT_EQ(lazylua_run_string(sandboxed, "require 'lfs'", nullptr), LAZYLUA_ERROR_RUNTIME);
  // Bytecode is refused (it can crash the VM).
  EXPECT_EQ(
      number(sandboxed, "select(2, load(string.dump(function() end))):find('binary') and 1 or 0"),
      1.0);

  // The same script is allowed without the sandbox.
  lazylua_interpreter* open_interpreter = open();
  EXPECT_EQ(number(open_interpreter, "(io.open ~= nil and os.execute ~= nil) and 1 or 0"), 1.0);
}

TEST_F(EmbedTest, MemoryLimitTurnsHugeAllocationsIntoMemoryErrors) {
  lazylua_options options;
  lazylua_options_init(&options);
  options.memory_limit = size_t{64} << 20;
  lazylua_interpreter* lua = open(&options);
  // A Lua string of 1 GiB.
  EXPECT_EQ(lazylua_run_string(lua, "local s = string.rep('x', 1 << 30)", nullptr),
            LAZYLUA_ERROR_MEMORY);
  EXPECT_NE(message(lua).find("not enough memory"), std::string::npos) << message(lua);
  // A tensor of 400 MB, materialized by a sync.
  EXPECT_EQ(lazylua_run_string(lua,
                               "local t = tensor.zeros(100000000)\n"
                               "t:add_(1)\n"
                               "tensor.sync(t)\n",
                               "=huge"),
            LAZYLUA_ERROR_MEMORY)
      << message(lua);
  // The message names the tensor, the total it would make and the limit.
  EXPECT_NE(message(lua).find("a tensor of 381.5 MiB would bring the interpreter to"),
            std::string::npos)
      << message(lua);
  EXPECT_NE(message(lua).find("past its memory limit of 64.0 MiB ("), std::string::npos)
      << message(lua);
  // A copy of a host buffer over the limit.
  std::vector<float> big(size_t{20} << 20);  // 80 MB
  const int64_t shape[1] = {static_cast<int64_t>(big.size())};
  lazylua_tensor* tensor = nullptr;
  EXPECT_EQ(lazylua_tensor_from_buffer(lua, LAZYLUA_F32, big.data(), shape, 1, &tensor),
            LAZYLUA_ERROR_MEMORY);
  EXPECT_EQ(tensor, nullptr);
  // Still usable, and small work fits.
  EXPECT_EQ(number(lua, "#string.rep('x', 1000)"), 1000.0);
  EXPECT_EQ(number(lua, "(tensor.ones(1000) * 3):sum():item()"), 3000.0);

  // Without a limit the same tensor is fine.
  lazylua_interpreter* unlimited = open();
  EXPECT_EQ(lazylua_tensor_from_buffer(unlimited, LAZYLUA_F32, big.data(), shape, 1, &tensor),
            LAZYLUA_OK);
}

TEST_F(EmbedTest, MemoryLimitCountsOnlyLiveTensors) {
  lazylua_options options;
  lazylua_options_init(&options);
  options.memory_limit = size_t{64} << 20;
  for (const char* eager : {"false", "true"}) {
    lazylua_interpreter* lua = open(&options);
    ASSERT_EQ(
        lazylua_run_string(lua, (std::string("tensor.set_eager(") + eager + ")").c_str(), nullptr),
        LAZYLUA_OK);
    // 12 GB made in 4 MB tensors, one alive at a time: well under 64 MB, if
    // the collector frees the dead ones in time.
    EXPECT_EQ(
        lazylua_run_string(lua, "for i = 1, 3000 do local t = tensor.ones(1000000) end", "=loop"),
        LAZYLUA_OK)
        << eager << ": " << message(lua);
    // 40 MB dropped (still uncollected), then 48 MB asked for: the budget
    // collects before it refuses.
    EXPECT_EQ(lazylua_run_string(lua,
                                 "local keep = {}\n"
                                 "for i = 1, 10 do keep[i] = tensor.ones(1000000) end\n"
                                 "keep = nil\n"
                                 "big = tensor.ones(12000000)\n"
                                 "assert(big:sum():item() == 12000000)\n"
                                 "big = nil",
                                 "=drop"),
              LAZYLUA_OK)
        << eager << ": " << message(lua);
    // What is really alive still counts.
    EXPECT_EQ(lazylua_run_string(lua,
                                 "local keep = {}\n"
                                 "for i = 1, 20 do keep[i] = tensor.ones(1000000) end",
                                 "=live"),
              LAZYLUA_ERROR_MEMORY)
        << eager;
    // The total in use says the live tensors, not this one, leave no room.
    EXPECT_NE(message(lua).find("a tensor of 3.8 MiB would bring the interpreter to 6"),
              std::string::npos)
        << message(lua);
    EXPECT_EQ(number(lua, "tensor.ones(1000):sum():item()"), 1000.0);
  }
}

TEST_F(EmbedTest, InterruptFromAnotherThreadStopsInfiniteLoops) {
  lazylua_interpreter* lua = open();
  for (const char* loop : {"while true do end",
                           // A script catching the interrupt is stopped again.
                           "while true do pcall(function() while true do end end) end"}) {
    std::atomic<bool> finished{false};
    std::thread interrupter([&] {
      while (!finished) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        lazylua_interrupt(lua);
      }
    });
    const lazylua_status status = lazylua_run_string(lua, loop, "=loop");
    finished = true;
    interrupter.join();
    EXPECT_EQ(status, LAZYLUA_ERROR_INTERRUPTED) << loop;
    EXPECT_NE(message(lua).find("interrupted!"), std::string::npos) << message(lua);
  }
  // An interrupt with nothing running is ignored; the next call runs fine.
  lazylua_interrupt(lua);
  EXPECT_EQ(number(lua, "1 + 1"), 2.0);
  lazylua_interrupt(nullptr);
}

// Runs `chunk`, interrupting it from another thread every 50 ms until it
// returns. A chunk that ignores the interrupts for 20 s ends the process:
// it would hang the test otherwise.
lazylua_status run_interrupted(lazylua_interpreter* lua, const char* chunk) {
  std::atomic<bool> finished{false};
  std::thread interrupter([&] {
    for (int tries = 0; !finished; tries++) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      lazylua_interrupt(lua);
      if (tries == 400) {
        std::fprintf(stderr, "FAIL: an interrupt cannot stop: %s\n", chunk);
        std::_Exit(1);
      }
    }
  });
  const lazylua_status status = lazylua_run_string(lua, chunk, "=loop");
  finished = true;
  interrupter.join();
  return status;
}

TEST_F(EmbedTest, InterruptStopsBusyLoopsInsideCoroutines) {
  lazylua_interpreter* lua = open();
  ASSERT_EQ(lazylua_run_string(
                lua, "gen = coroutine.wrap(function() while true do coroutine.yield(1) end end)",
                nullptr),
            LAZYLUA_OK);
  for (const char* loop :
       {"coroutine.wrap(function() while true do end end)()",
        "coroutine.resume(coroutine.create(function() while true do end end))",
        "coroutine.wrap(function() coroutine.wrap(function() while true do end end)() end)()",
        // The resumer catches the inner coroutine's error and loops on.
        "coroutine.wrap(function()\n"
        "  while true do coroutine.resume(coroutine.create(function() while true do end end)) end\n"
        "end)()",
        // A pcall in the main thread catches it; the next coroutine is stopped too.
        "while true do pcall(coroutine.wrap(function() while true do end end)) end",
        // Deeply nested.
        "local function nest(n) if n == 0 then while true do end end\n"
        "  return coroutine.wrap(nest)(n - 1) end\n"
        "nest(20)",
        // A coroutine made by an earlier call.
        "while true do gen() end"}) {
    EXPECT_EQ(run_interrupted(lua, loop), LAZYLUA_ERROR_INTERRUPTED) << loop;
    EXPECT_NE(message(lua).find("interrupted!"), std::string::npos) << message(lua);
  }
  // Afterwards, coroutines run without an interrupt hook (it would slow
  // every instruction), and work as before.
  EXPECT_EQ(number(lua,
                   "select(2, coroutine.resume(coroutine.create(function()\n"
                   "  return debug.gethook() == nil and 1 or 0 end)))"),
            1.0);
  EXPECT_EQ(number(lua, "coroutine.wrap(function() coroutine.yield(5) end)()"), 5.0);
}

TEST_F(EmbedTest, InterpretersDoNotSeeEachOthersGlobalsOrTensors) {
  lazylua_interpreter* first = open();
  lazylua_interpreter* second = open();
  ASSERT_EQ(lazylua_run_string(first, "secret = 42; shared = tensor.ones(3) * 7", nullptr),
            LAZYLUA_OK);
  EXPECT_EQ(number(second, "(secret == nil and shared == nil) and 1 or 0"), 1.0);
  // Each has its own tensor context: metrics count separately.
  EXPECT_EQ(number(first, "shared:sum():item()"), 21.0);
  EXPECT_EQ(number(second, "tensor.metrics().syncs"), 0.0);
  EXPECT_GT(number(first, "tensor.metrics().syncs"), 0.0);
  // A tensor handle of one interpreter is refused by the other.
  lazylua_value value;
  ASSERT_EQ(lazylua_get_global(first, "shared", &value), LAZYLUA_OK);
  ASSERT_EQ(value.type, LAZYLUA_TYPE_TENSOR);
  EXPECT_EQ(lazylua_set_global(second, "stolen", &value), LAZYLUA_ERROR_ARGUMENT);
  float out[3];
  EXPECT_EQ(lazylua_tensor_read(second, value.as.tensor, LAZYLUA_F32, out, sizeof out),
            LAZYLUA_ERROR_ARGUMENT);
  ASSERT_EQ(lazylua_tensor_read(first, value.as.tensor, LAZYLUA_F32, out, sizeof out), LAZYLUA_OK);
  EXPECT_EQ(out[2], 7.0f);

  // Both run at once on two threads, each with its own results.
  double results[2] = {};
  std::thread threads[2];
  lazylua_interpreter* both[2] = {first, second};
  for (int i = 0; i < 2; i++) {
    threads[i] = std::thread([&, i] {
      const std::string chunk =
          "local acc = tensor.zeros(64)\n"
          "for step = 1, 200 do acc:add_(" +
          std::to_string(i + 1) +
          ") tensor.mark_step() end\n"
          "total = acc:sum():item()";
      if (lazylua_run_string(both[i], chunk.c_str(), nullptr) != LAZYLUA_OK) return;
      lazylua_value total;
      if (lazylua_get_global(both[i], "total", &total) == LAZYLUA_OK) {
        results[i] = total.as.number;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(results[0], 64 * 200 * 1.0);
  EXPECT_EQ(results[1], 64 * 200 * 2.0);
}

struct ReleaseCounter {
  std::atomic<int> calls{0};
  void* last = nullptr;
};

void count_release(void* data, void* user_data) {
  auto* counter = static_cast<ReleaseCounter*>(user_data);
  counter->last = data;
  counter->calls++;
}

TEST_F(EmbedTest, ZeroCopyBufferIsReleasedExactlyOnceWhenCollected) {
  lazylua_interpreter* lua = open();
  std::vector<float> memory = {1, 2, 3, 4};
  const int64_t shape[1] = {4};
  ReleaseCounter counter;
  lazylua_tensor* wrapped = nullptr;
  ASSERT_EQ(lazylua_tensor_wrap_buffer(lua, LAZYLUA_F32, memory.data(), shape, 1, count_release,
                                       &counter, &wrapped),
            LAZYLUA_OK);
  // Lua reads the host memory itself, without a copy.
  const lazylua_value value = lazylua_tensor_value(wrapped);
  ASSERT_EQ(lazylua_set_global(lua, "w", &value), LAZYLUA_OK);
  memory[0] = 10;  // (not allowed by the contract once shared; here only to prove no copy)
  EXPECT_EQ(number(lua, "w:sum():item()"), 19.0);
  EXPECT_EQ(number(lua, "w[2]:item()"), 2.0);
  lazylua_tensor_free(wrapped);
  EXPECT_EQ(counter.calls, 0);  // Lua still holds it
  ASSERT_EQ(lazylua_run_string(lua, "w = nil collectgarbage() collectgarbage()", nullptr),
            LAZYLUA_OK);
  EXPECT_EQ(counter.calls, 1);
  EXPECT_EQ(counter.last, memory.data());

  // A buffer Lua still holds is released by lazylua_close, once.
  lazylua_interpreter* other = nullptr;  // closed here, not by TearDown
  ASSERT_EQ(lazylua_open(nullptr, &other), LAZYLUA_OK);
  ReleaseCounter at_close;
  lazylua_tensor* held = nullptr;
  ASSERT_EQ(lazylua_tensor_wrap_buffer(other, LAZYLUA_F32, memory.data(), shape, 1, count_release,
                                       &at_close, &held),
            LAZYLUA_OK);
  const lazylua_value held_value = lazylua_tensor_value(held);
  ASSERT_EQ(lazylua_set_global(other, "kept", &held_value), LAZYLUA_OK);
  ASSERT_EQ(lazylua_run_string(other, "view = kept:narrow(1, 2, 2) * 2", nullptr), LAZYLUA_OK);
  lazylua_close(other);
  EXPECT_EQ(at_close.calls, 1);
  EXPECT_EQ(counter.calls, 1);

  // Bad arguments still release the buffer (the host gave it away).
  ReleaseCounter refused;
  const int64_t negative[1] = {-1};
  EXPECT_EQ(lazylua_tensor_wrap_buffer(lua, LAZYLUA_F32, memory.data(), negative, 1, count_release,
                                       &refused, &held),
            LAZYLUA_ERROR_ARGUMENT);
  EXPECT_EQ(refused.calls, 1);
}

TEST_F(EmbedTest, BadInputsGiveErrorStatusesNotCrashes) {
  lazylua_interpreter* lua = open();
  float data[2] = {1, 2};
  const int64_t shape[1] = {2};
  lazylua_tensor* tensor = nullptr;
  lazylua_value value = lazylua_nil();

  EXPECT_EQ(lazylua_open(nullptr, nullptr), LAZYLUA_ERROR_ARGUMENT);
  EXPECT_EQ(lazylua_run_string(nullptr, "x = 1", nullptr), LAZYLUA_ERROR_ARGUMENT);
  EXPECT_EQ(lazylua_run_string(lua, nullptr, nullptr), LAZYLUA_ERROR_ARGUMENT);
  EXPECT_EQ(lazylua_run_file(lua, nullptr), LAZYLUA_ERROR_ARGUMENT);
  EXPECT_EQ(lazylua_call(lua, nullptr, nullptr, 0, nullptr, 0), LAZYLUA_ERROR_ARGUMENT);
  EXPECT_EQ(lazylua_call(lua, "no_such_function", nullptr, 0, nullptr, 0), LAZYLUA_ERROR_ARGUMENT);
  EXPECT_NE(message(lua).find("no_such_function"), std::string::npos);
  EXPECT_EQ(lazylua_call(lua, "string.nope.deeper", nullptr, 0, nullptr, 0),
            LAZYLUA_ERROR_ARGUMENT);
  ASSERT_EQ(lazylua_run_string(lua, "not_a_function = 5", nullptr), LAZYLUA_OK);
  EXPECT_EQ(lazylua_call(lua, "not_a_function", nullptr, 0, nullptr, 0), LAZYLUA_ERROR_ARGUMENT);
  EXPECT_EQ(lazylua_call(lua, "print", nullptr, 1, nullptr, 0), LAZYLUA_ERROR_ARGUMENT);
  lazylua_value bad = lazylua_nil();
  bad.type = static_cast<lazylua_type>(99);
  EXPECT_EQ(lazylua_call(lua, "print", &bad, 1, nullptr, 0), LAZYLUA_ERROR_ARGUMENT);
  bad = lazylua_tensor_value(nullptr);
  EXPECT_EQ(lazylua_call(lua, "print", &bad, 1, nullptr, 0), LAZYLUA_ERROR_ARGUMENT);
  EXPECT_EQ(lazylua_call(lua, "print", nullptr, 0, nullptr, -1), LAZYLUA_ERROR_ARGUMENT);
  EXPECT_EQ(lazylua_get_global(lua, nullptr, &value), LAZYLUA_ERROR_ARGUMENT);
  EXPECT_EQ(lazylua_get_global(lua, "x", nullptr), LAZYLUA_ERROR_ARGUMENT);
  EXPECT_EQ(lazylua_set_global(lua, "x", nullptr), LAZYLUA_ERROR_ARGUMENT);
  EXPECT_EQ(lazylua_register_function(lua, "f", nullptr, nullptr), LAZYLUA_ERROR_ARGUMENT);

  EXPECT_EQ(lazylua_tensor_from_buffer(lua, LAZYLUA_F32, data, shape, 1, nullptr),
            LAZYLUA_ERROR_ARGUMENT);
  EXPECT_EQ(lazylua_tensor_from_buffer(lua, LAZYLUA_F32, nullptr, shape, 1, &tensor),
            LAZYLUA_ERROR_ARGUMENT);
  EXPECT_EQ(
      lazylua_tensor_from_buffer(lua, static_cast<lazylua_dtype>(42), data, shape, 1, &tensor),
      LAZYLUA_ERROR_ARGUMENT);
  EXPECT_EQ(lazylua_tensor_from_buffer(lua, LAZYLUA_F32, data, nullptr, 1, &tensor),
            LAZYLUA_ERROR_ARGUMENT);
  EXPECT_EQ(lazylua_tensor_from_buffer(lua, LAZYLUA_F32, data, shape, 9, &tensor),
            LAZYLUA_ERROR_ARGUMENT);
  const int64_t too_big[2] = {int64_t{1} << 40, int64_t{1} << 40};
  EXPECT_EQ(lazylua_tensor_from_buffer(lua, LAZYLUA_F32, data, too_big, 2, &tensor),
            LAZYLUA_ERROR_ARGUMENT);
  EXPECT_EQ(tensor, nullptr);

  ASSERT_EQ(lazylua_tensor_from_buffer(lua, LAZYLUA_F32, data, shape, 1, &tensor), LAZYLUA_OK);
  float small[1];
  EXPECT_EQ(lazylua_tensor_read(lua, tensor, LAZYLUA_F32, small, sizeof small),
            LAZYLUA_ERROR_ARGUMENT);
  EXPECT_EQ(lazylua_tensor_read(lua, nullptr, LAZYLUA_F32, small, sizeof small),
            LAZYLUA_ERROR_ARGUMENT);
  EXPECT_EQ(lazylua_tensor_read(lua, tensor, LAZYLUA_F32, nullptr, 8), LAZYLUA_ERROR_ARGUMENT);
  EXPECT_EQ(lazylua_tensor_info(nullptr, nullptr, nullptr, nullptr, 0), LAZYLUA_ERROR_ARGUMENT);
  EXPECT_EQ(lazylua_tensor_numel(nullptr), 0);
  EXPECT_EQ(lazylua_tensor_retain(nullptr), nullptr);
  lazylua_tensor_free(nullptr);
  lazylua_close(nullptr);
  EXPECT_STREQ(lazylua_error_message(nullptr), "");
  EXPECT_STREQ(lazylua_status_name(LAZYLUA_ERROR_MEMORY), "memory error");
  EXPECT_EQ(lazylua_dtype_size(LAZYLUA_F64), 8u);
  EXPECT_EQ(lazylua_dtype_size(static_cast<lazylua_dtype>(42)), 0u);
  // After all that, it still works.
  EXPECT_EQ(number(lua, "(tensor.ones(2) + 1):sum():item()"), 4.0);
}

TEST_F(EmbedTest, CacheDirectoryOptionKeepsCompiledGraphsThere) {
  const std::string directory =
      ::testing::TempDir() + "lazylua-embed-cache-" + std::to_string(::getpid());
  lazylua_options options;
  lazylua_options_init(&options);
  options.cache_directory = directory.c_str();
  options.threads = 1;
  lazylua_interpreter* lua = open(&options);
  ASSERT_EQ(lazylua_run_string(lua, "x = tensor.ones(100) * 3 + 1 tensor.sync(x)", nullptr),
            LAZYLUA_OK);
  // The background compile has been asked for; the directory is made at once.
  EXPECT_EQ(std::system(("test -d " + directory).c_str()), 0);
  EXPECT_EQ(number(lua, "x:sum():item()"), 400.0);
  std::system(("rm -rf " + directory).c_str());
}

TEST(EmbedCppTest, WrapperRunsCallsAndThrowsWithMessages) {
  lazylua::api::Interpreter lua;
  lua.register_function("host_scale", [](lazylua::api::Interpreter&,
                                         const std::vector<lazylua::api::Value>& arguments) {
    if (arguments.size() != 1) throw std::runtime_error("host_scale wants one number");
    return std::vector<lazylua::api::Value>{arguments[0].number() * 10};
  });
  lua.run("function predict(x) return (x * host_scale(0.5) + 1):sum(1) end");
  std::vector<double> input = {1, 2, 3, 4};
  lazylua::api::Tensor x = lua.tensor_from(input.data(), {2, 2});
  const std::vector<double> output = lua.call("predict", {x})[0].tensor().read<double>();
  ASSERT_EQ(output.size(), 2u);
  EXPECT_EQ(output[0], 22.0);  // 6 + 16
  EXPECT_EQ(output[1], 32.0);  // 11 + 21
  lua.set_global("name", "lazylua");
  EXPECT_EQ(lua.global("name").string(), "lazylua");
  try {
    lua.run("host_scale()");
    FAIL() << "expected an error";
  } catch (const lazylua::api::Error& error) {
    EXPECT_EQ(error.status(), LAZYLUA_ERROR_RUNTIME);
    EXPECT_NE(std::string(error.what()).find("host_scale wants one number"), std::string::npos);
  }
  int released = 0;
  {
    std::vector<float> memory = {1, 2, 3};
    lazylua::api::Tensor wrapped = lua.wrap<float>(memory.data(), {3}, [&](float*) { released++; });
    EXPECT_EQ(lua.call("tensor.sum", {wrapped})[0].tensor().read<float>()[0], 6.0f);
  }
  lua.run("collectgarbage() collectgarbage()");
  EXPECT_EQ(released, 1);
}

// A process no launcher started is the one rank of its own job, for the host
// and for its scripts alike, and no MPI starts. (tests/dist/ runs ranks.)
TEST_F(EmbedTest, DistInfoWithoutALauncher) {
  if (std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK")) GTEST_SKIP();
  int rank = -1, size = -1;
  ASSERT_EQ(lazylua_dist_info(&rank, &size), LAZYLUA_OK);
  EXPECT_EQ(rank, 0);
  EXPECT_EQ(size, 1);
  EXPECT_EQ(lazylua_dist_info(nullptr, &size), LAZYLUA_ERROR_ARGUMENT);
  lazylua_dist_abort(3);  // not a job of two: returns
  lazylua_interpreter* lua = open();
  ASSERT_EQ(lazylua_run_string(lua,
                               "local dist = require 'lazylua.dist'\n"
                               "assert(dist.rank() == 0 and dist.size() == 1)\n"
                               "assert(not dist.is_initialized())\n"
                               "local t = tensor.new({1, 2})\n"
                               "assert(dist.all_reduce(t) == t and t[2]:item() == 2)",
                               nullptr),
            LAZYLUA_OK)
      << message(lua);
}

}  // namespace
