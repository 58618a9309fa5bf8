// embed_sandbox_test.cpp - what an untrusted script in the embedding
// sandbox cannot do to its host: escape lazylua_interrupt through an xpcall
// message handler, a finalizer or a long pattern match, or grow past the
// memory limit with pending lazy operations.
#include <gtest/gtest.h>

#include <strings.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "interp/sandbox_patterns.h"
#include "lazylua.h"

namespace {

using Clock = std::chrono::steady_clock;

// Peak resident memory of this process (VmHWM), in KiB.
long peak_rss_kib() {
  FILE* status = std::fopen("/proc/self/status", "r");
  if (!status) return 0;
  char line[256];
  long kib = 0;
  while (std::fgets(line, sizeof line, status)) {
    if (std::strncmp(line, "VmHWM:", 6) == 0) kib = std::strtol(line + 6, nullptr, 10);
  }
  std::fclose(status);
  return kib;
}

class EmbedSandboxTest : public ::testing::Test {
 protected:
  lazylua_interpreter* open(bool sandbox, size_t memory_limit = 0) {
    lazylua_options options;
    lazylua_options_init(&options);
    options.sandbox = sandbox ? 1 : 0;
    options.memory_limit = memory_limit;
    lazylua_interpreter* interpreter = nullptr;
    EXPECT_EQ(lazylua_open(&options, &interpreter), LAZYLUA_OK);
    opened_.push_back(interpreter);
    return interpreter;
  }
  void TearDown() override {
    for (lazylua_interpreter* interpreter : opened_) lazylua_close(interpreter);
  }
  static std::string message(lazylua_interpreter* interpreter) {
    return lazylua_error_message(interpreter);
  }
  // Runs `chunk` and returns `expression`'s value as a string ("" on error).
  static std::string value(lazylua_interpreter* interpreter, const char* chunk) {
    const std::string source = std::string("result_ = tostring((function() ") + chunk + " end)())";
    if (lazylua_run_string(interpreter, source.c_str(), "=value") != LAZYLUA_OK) {
      ADD_FAILURE() << chunk << ": " << message(interpreter);
      return "";
    }
    lazylua_value result;
    EXPECT_EQ(lazylua_get_global(interpreter, "result_", &result), LAZYLUA_OK);
    return result.type == LAZYLUA_TYPE_STRING ? result.as.string.data : "";
  }

 private:
  std::vector<lazylua_interpreter*> opened_;
};

// Runs `chunk`, interrupts it once after 200 ms and returns the status and
// how long the call took after the interrupt. A chunk the interrupt cannot
// stop ends the process after 10 s (it would hang the test otherwise).
lazylua_status run_and_interrupt(lazylua_interpreter* lua, const char* chunk, double* latency_ms) {
  std::atomic<bool> finished{false};
  std::atomic<Clock::rep> interrupted_at{0};
  std::thread interrupter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    interrupted_at = Clock::now().time_since_epoch().count();
    lazylua_interrupt(lua);
    for (int waited = 0; !finished; waited++) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (waited == 1000) {
        std::fprintf(stderr, "FAIL: an interrupt cannot stop: %s\n", chunk);
        std::_Exit(1);
      }
    }
  });
  const lazylua_status status = lazylua_run_string(lua, chunk, "=chunk");
  const auto returned_at = Clock::now();
  finished = true;
  interrupter.join();
  const Clock::time_point interrupt{Clock::duration(interrupted_at.load())};
  *latency_ms = std::chrono::duration<double, std::milli>(returned_at - interrupt).count();
  return status;
}

const char* const kHandlerLoops[] = {
    "xpcall(error, function() while true do end end)",
    "local function loop() while true do end end\n"
    "local results = {xpcall(loop, loop)}\n"
    "while true do end",
    "local function loop() while true do end end\n"
    "while true do xpcall(loop, loop) end",
    // The handler of an xpcall inside a coroutine, and nested xpcalls.
    "coroutine.wrap(function() xpcall(error, function() while true do end end) end)()",
    "xpcall(function() xpcall(error, function() while true do end end) end,\n"
    "       function() while true do end end)",
};

TEST_F(EmbedSandboxTest, InterruptStopsLoopingMessageHandlers) {
  for (const bool sandbox : {true, false}) {
    lazylua_interpreter* lua = open(sandbox);
    for (const char* chunk : kHandlerLoops) {
      double latency_ms = 0;
      EXPECT_EQ(run_and_interrupt(lua, chunk, &latency_ms), LAZYLUA_ERROR_INTERRUPTED) << chunk;
      EXPECT_NE(message(lua).find("interrupted!"), std::string::npos) << message(lua);
      EXPECT_LT(latency_ms, 2000.0) << chunk;
      // The interpreter goes on working.
      EXPECT_EQ(value(lua, "return 40 + 2"), "42");
    }
  }
}

TEST_F(EmbedSandboxTest, XpcallBehavesAsLuasOwn) {
  lazylua_interpreter* lua = open(true);
  EXPECT_EQ(
      value(lua,
            "local ok, sum, word = xpcall(function(a, b) return a + b, 'k' end, error, 2, 3)\n"
            "return tostring(ok) .. ' ' .. sum .. ' ' .. word"),
      "true 5 k");
  EXPECT_EQ(value(lua,
                  "local ok, handled = xpcall(error, function(m) return 'handled: ' .. m end,\n"
                  "                           'boom', 0)\n"
                  "return tostring(ok) .. ' ' .. handled"),
            "false handled: boom");
  // A handler that errors itself: Lua's own outcome (an error object).
  EXPECT_EQ(value(lua, "return (xpcall(error, function() error('again') end))"), "false");
  EXPECT_EQ(value(lua,
                  "local ok, m = pcall(xpcall, print)\n"
                  "return m:find(\"bad argument #2 to 'xpcall'\", 1, true) and 'refused' or m"),
            "refused");
  // Yields across xpcall, as with Lua's own.
  EXPECT_EQ(value(lua,
                  "local step = coroutine.wrap(function()\n"
                  "  return xpcall(function() coroutine.yield(7) return 8 end, error) end)\n"
                  "local first = step()\n"
                  "local ok, second = step()\n"
                  "return first .. ' ' .. tostring(ok) .. ' ' .. second"),
            "7 true 8");
}

TEST_F(EmbedSandboxTest, SandboxRefusesFinalizersWhichInterruptsCannotReach) {
  lazylua_interpreter* lua = open(true);
  for (const char* chunk :
       {"setmetatable({}, {__gc = function() while true do end end}); collectgarbage()",
        // A non-nil placeholder marks the object too; the function would come later.
        "local mt = {__gc = false}; setmetatable({}, mt)\n"
        "mt.__gc = function() while true do end end; collectgarbage()"}) {
    double latency_ms = 0;
    EXPECT_EQ(run_and_interrupt(lua, chunk, &latency_ms), LAZYLUA_ERROR_RUNTIME) << chunk;
    EXPECT_NE(message(lua).find("chunk:1: setmetatable: __gc metamethods are not allowed in the "
                                "sandbox"),
              std::string::npos)
        << message(lua);
  }
  // A __gc added after setmetatable does not mark the object (Lua 5.4):
  // nothing loops, the call ends by itself.
  EXPECT_EQ(value(lua,
                  "local mt = {}; setmetatable({}, mt)\n"
                  "mt.__gc = function() while true do end end\n"
                  "collectgarbage(); collectgarbage(); return 'done'"),
            "done");
  // Everything else about setmetatable is Lua's own.
  EXPECT_EQ(value(lua, "return setmetatable({}, {__index = {x = 3}}).x"), "3");
  EXPECT_EQ(value(lua,
                  "local t = setmetatable({}, {__metatable = 'locked'})\n"
                  "local ok, m = pcall(setmetatable, t, {}); return m"),
            "cannot change a protected metatable");
  EXPECT_EQ(value(lua, "local ok, m = pcall(setmetatable, 1, {}); return m"),
            "bad argument #1 to 'setmetatable' (table expected, got number)");
  EXPECT_EQ(value(lua, "local t = {}; return tostring(setmetatable(t, nil) == t)"), "true");
  // Outside the sandbox a host's scripts keep their finalizers.
  lazylua_interpreter* trusted = open(false);
  EXPECT_EQ(value(trusted,
                  "ran = false; setmetatable({}, {__gc = function() ran = true end})\n"
                  "collectgarbage(); collectgarbage(); return ran"),
            "true");
}

TEST_F(EmbedSandboxTest, PendingOperationsCountAgainstTheMemoryLimit) {
  if (const char* eager = std::getenv("LAZYLUA_EAGER")) {
    for (const char* on : {"1", "true", "yes", "on"}) {
      if (strcasecmp(eager, on) == 0) GTEST_SKIP() << "eager mode records no operations";
    }
  }
  const size_t limit = size_t{64} << 20;
  lazylua_interpreter* lua = open(true, limit);
  const long peak_before = peak_rss_kib();
  // A million pending ops held about 1.3 GB before they were charged.
  const lazylua_status status = lazylua_run_string(
      lua, "local t = tensor.ones(1); for i = 1, 1000000 do t = t + 1 end", "=chain");
  // The error is the node's own: the Lua heap still had room to raise it.
  EXPECT_EQ(status, LAZYLUA_ERROR_MEMORY) << message(lua);
  EXPECT_NE(message(lua).find("recording another operation would bring the interpreter past its "
                              "memory limit of 64.0 MiB"),
            std::string::npos)
      << message(lua);
  const long grown_mib = (peak_rss_kib() - peak_before) / 1024;
  std::printf("peak RSS grew by %ld MiB under a 64 MiB limit\n", grown_mib);
  EXPECT_LT(grown_mib, 160) << "the pending graph grew far past the limit";

  // Pending ops kept in a table count too.
  EXPECT_EQ(lazylua_run_string(lua,
                               "local b, keep = tensor.ones(4), {}\n"
                               "for i = 1, 200000 do keep[i] = (b * i + 1):tanh() end",
                               "=kept"),
            LAZYLUA_ERROR_MEMORY)
      << message(lua);

  // Dropped graphs give their charge back: the interpreter works, and
  // long chains that sync now and then fit.
  EXPECT_EQ(
      value(lua,
            "collectgarbage()\n"
            "local t = tensor.ones(1)\n"
            "for i = 1, 20000 do t = t + 1; if i % 1000 == 0 then tensor.mark_step() end end\n"
            "return t:item()"),
      "20001.0");
}

TEST_F(EmbedSandboxTest, KernelIntermediatesCountAgainstTheMemoryLimit) {
  lazylua_interpreter* lua = open(true, size_t{64} << 20);
  // The 5000 x 5000 product (100 MB of f32) is an intermediate of a graph
  // whose result is one number; the executor's buffer for it is charged.
  EXPECT_EQ(lazylua_run_string(
                lua, "x = tensor.ones(5000, 1):matmul(tensor.ones(1, 5000)):sum():item()", "=mm"),
            LAZYLUA_ERROR_MEMORY)
      << message(lua);
  EXPECT_EQ(value(lua, "return tensor.ones(500, 1):matmul(tensor.ones(1, 500)):sum():item()"),
            "250000.0");
}

TEST_F(EmbedSandboxTest, LongPatternMatchesAreRefusedAndShortOnesRun) {
  lazylua_interpreter* lua = open(true);
  struct Case {
    const char* chunk;
    const char* function;
  };
  const Case refused[] = {
      {"local s = string.rep('a', 3000); return s:find('.-.-.-.-b')", "string.find"},
      {"return (string.rep('a', 200000):gsub('a-a-a-b', ''))", "string.gsub"},
      {"return string.match(string.rep('a', 50000), '(a*)b')", "string.match"},
      {"for w in string.rep('x', 100000):gmatch('x*y') do end", "string.gmatch"},
      // A malformed tail is reported only when the matcher reaches it.
      {"return string.rep('a', 3000):find('.-.-.-.-b[')", "string.find"},
      {"return string.rep('(', 100000):find('%b()')", "string.find"},
      {"return string.rep('a', 10000000):find(string.rep('a', 100000) .. 'b', 1, true)",
       "string.find"},
  };
  for (const Case& test : refused) {
    const auto start = Clock::now();
    EXPECT_EQ(lazylua_run_string(lua, test.chunk, "=match"), LAZYLUA_ERROR_RUNTIME) << test.chunk;
    const double elapsed_ms =
        std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    EXPECT_LT(elapsed_ms, 2000.0) << test.chunk;
    EXPECT_NE(message(lua).find(std::string("match:1: ") + test.function +
                                ": the pattern may take too long on a subject of"),
              std::string::npos)
        << message(lua);
  }
  // Ordinary matching gives Lua's results, also on long subjects with
  // patterns that cannot backtrack far.
  EXPECT_EQ(value(lua, "return select(1, ('hello world'):gsub('o', '0'))"), "hell0 w0rld");
  EXPECT_EQ(value(lua, "local k, v = ('key=value'):match('^(%w+)=(%w+)$'); return k .. v"),
            "keyvalue");
  EXPECT_EQ(value(lua,
                  "local n = 0; for w in ('one two three'):gmatch('%a+') do n = n + #w end\n"
                  "return n"),
            "11");
  EXPECT_EQ(value(lua, "return ('a.b'):find('.', 1, true)"), "2");
  EXPECT_EQ(value(lua, "return string.find('abc', 'b()')"), "2");
  EXPECT_EQ(value(lua, "return (string.rep('word  ', 200000):gsub('%s+', ' '):len())"), "1000000");
  EXPECT_EQ(value(lua,
                  "local n = 0\n"
                  "for k, v in string.rep('key=value ', 50000):gmatch('(%w+)=(%w+)') do\n"
                  "  n = n + 1 end\n"
                  "return n"),
            "50000");
  EXPECT_EQ(value(lua, "return (string.rep('ab', 100000):find('[^a]b'))"), "nil");
  // Bad arguments still get Lua's own errors.
  EXPECT_EQ(lazylua_run_string(lua, "string.find({}, 'a')", "=bad"), LAZYLUA_ERROR_RUNTIME);
  EXPECT_NE(message(lua).find("bad argument #1 to 'find'"), std::string::npos) << message(lua);
  EXPECT_EQ(lazylua_run_string(lua, "string.find('abc', '[a')", "=bad"), LAZYLUA_ERROR_RUNTIME);
  EXPECT_NE(message(lua).find("malformed pattern"), std::string::npos) << message(lua);

  // Matching that is allowed stays interruptible between calls.
  double latency_ms = 0;
  EXPECT_EQ(run_and_interrupt(lua,
                              "local s = string.rep('a', 2000)\n"
                              "while true do s:find('a*b') end",
                              &latency_ms),
            LAZYLUA_ERROR_INTERRUPTED);
  EXPECT_LT(latency_ms, 2000.0);
}

// The bound is never below the work Lua's matcher does: the quadratic and
// exponential shapes, counted by hand.
TEST(PatternWorkBound, CoversTheMatchersWorstCases) {
  const std::string as(1000, 'a');
  // 'a*b' unanchored: each of the ~n starts scans the run and tries 'b' at
  // each stop: n^2/2 single matches at least.
  EXPECT_GE(lazylua::pattern_work_bound(as.data(), as.size(), "a*b", 3, true), 1000.0 * 1000 / 2);
  // Anchored: one start, n + 1 stops.
  EXPECT_GE(lazylua::pattern_work_bound(as.data(), as.size(), "^a*b", 4, true), 1000.0);
  EXPECT_LT(lazylua::pattern_work_bound(as.data(), as.size(), "^a*b", 4, true), 1e5);
  // Three lazy repetitions before a failing item: about n^4/24 steps.
  EXPECT_GE(lazylua::pattern_work_bound(as.data(), as.size(), "a-a-a-b", 7, true), 1e12 / 24);
  // In gmatch '^' is a plain character, not an anchor.
  EXPECT_GE(lazylua::pattern_work_bound(as.data(), as.size(), "^a*b", 4, false), 1000.0);
  // A repetition with only closing captures after it ends each match:
  // linear in the subject.
  EXPECT_LT(lazylua::pattern_work_bound(as.data(), as.size(), "(a+)", 4, true), 1e4 + 100);
  // On a subject long enough for the runs to matter, the runs of the class
  // bound the stops: 'b*c' where b never occurs is linear.
  const std::string long_as(100000, 'a');
  EXPECT_LT(lazylua::pattern_work_bound(long_as.data(), long_as.size(), "b*c", 3, true), 1e6);
  EXPECT_GT(lazylua::pattern_work_bound(long_as.data(), long_as.size(), "a*c", 3, true), 1e9);
}

}  // namespace
