// embed_interrupt_test.cpp - lazylua_interrupt while the interpreter is
// inside a long sync (tensor/interrupt.h): the call returns
// LAZYLUA_ERROR_INTERRUPTED soon after, the interpreter goes on working,
// and another interpreter's sync on another thread is not disturbed.
//
// The graphs run on the reference interpreter (LAZYLUA_COMPILE=off) and
// would take tens of seconds if not stopped; the bounds are generous
// (seconds) for a loaded machine.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "lazylua.h"

namespace {

using Clock = std::chrono::steady_clock;

// A graph of 1200 elementwise ops on 50M floats (about a minute on 2
// cores), and a small pending tensor synced with it by mark_step. The host
// function ready() tells the host that the sync is about to start.
const char* const kLongSync =
    "x = tensor.ones(50000000, {dtype = 'f32'})\n"
    "y = x\n"
    "for i = 1, 400 do y = (y * 1.0001 + 0.5):sqrt() end\n"
    "small = tensor.ones(3) * 2\n"
    "ready()\n"
    "tensor.mark_step()\n";

int set_ready(lazylua_interpreter* /*interpreter*/, void* user_data,
              const lazylua_value* /*arguments*/, int /*argument_count*/,
              lazylua_value* /*results*/, int /*result_capacity*/) {
  static_cast<std::atomic<bool>*>(user_data)->store(true);
  return 0;
}

class EmbedInterruptTest : public ::testing::Test {
 protected:
  // An interpreter whose graphs run on the reference interpreter (the
  // executor reads LAZYLUA_COMPILE when the interpreter opens), with a
  // host function ready() that sets *ready.
  lazylua_interpreter* open(std::atomic<bool>* ready) {
    const char* before = std::getenv("LAZYLUA_COMPILE");
    const std::string saved = before ? before : "";
    setenv("LAZYLUA_COMPILE", "off", 1);
    lazylua_interpreter* interpreter = nullptr;
    EXPECT_EQ(lazylua_open(nullptr, &interpreter), LAZYLUA_OK);
    if (before) {
      setenv("LAZYLUA_COMPILE", saved.c_str(), 1);
    } else {
      unsetenv("LAZYLUA_COMPILE");
    }
    opened_.push_back(interpreter);
    EXPECT_EQ(lazylua_register_function(interpreter, "ready", set_ready, ready), LAZYLUA_OK);
    return interpreter;
  }
  void TearDown() override {
    for (lazylua_interpreter* interpreter : opened_) lazylua_close(interpreter);
  }

 private:
  std::vector<lazylua_interpreter*> opened_;
};

// Waits (60 s at most) for `ready`, then a little longer so that the sync
// is well under way.
void wait_until_syncing(const std::atomic<bool>& ready) {
  const auto give_up = Clock::now() + std::chrono::seconds(60);
  while (!ready && Clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
}

double milliseconds_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

TEST_F(EmbedInterruptTest, InterruptStopsALongSyncAndTheInterpreterGoesOn) {
  std::atomic<bool> ready{false};
  lazylua_interpreter* lua = open(&ready);
  std::atomic<Clock::rep> interrupted_at{0};
  std::thread interrupter([&] {
    wait_until_syncing(ready);
    interrupted_at = Clock::now().time_since_epoch().count();
    lazylua_interrupt(lua);
  });
  const lazylua_status status = lazylua_run_string(lua, kLongSync, "=long");
  const auto returned_at = Clock::now();
  interrupter.join();
  EXPECT_EQ(status, LAZYLUA_ERROR_INTERRUPTED) << lazylua_error_message(lua);
  EXPECT_NE(std::string(lazylua_error_message(lua)).find("long:6: interrupted!"), std::string::npos)
      << lazylua_error_message(lua);
  const Clock::time_point interrupt{Clock::duration(interrupted_at.load())};
  const double latency = std::chrono::duration<double, std::milli>(returned_at - interrupt).count();
  std::printf("interrupt to return: %.1f ms\n", latency);
  EXPECT_LT(latency, 5000.0) << "the sync ran on after the interrupt";

  // The same interpreter works, and what the interrupted sync was to
  // compute is still pending (not failed): a later sync computes it.
  ASSERT_EQ(lazylua_run_string(lua, "small_sum = small:sum():item()", "=after"), LAZYLUA_OK)
      << lazylua_error_message(lua);
  lazylua_value value;
  ASSERT_EQ(lazylua_get_global(lua, "small_sum", &value), LAZYLUA_OK);
  ASSERT_EQ(value.type, LAZYLUA_TYPE_NUMBER);
  EXPECT_EQ(value.as.number, 6.0);
  // No interrupt is left over for the next call.
  ASSERT_EQ(lazylua_run_string(lua, "y = nil; x = (x * 2):sum():item()", "=next"), LAZYLUA_OK)
      << lazylua_error_message(lua);
}

TEST_F(EmbedInterruptTest, InterruptingOneInterpreterLeavesAnotherRunning) {
  std::atomic<bool> first_ready{false}, second_ready{false};
  lazylua_interpreter* first = open(&first_ready);
  lazylua_interpreter* second = open(&second_ready);
  // Several seconds of exact f64 work: y stays all ones.
  const char* const kSecond =
      "local x = tensor.ones(4000000, {dtype = 'f64'})\n"
      "local y = x\n"
      "for i = 1, 400 do y = y * 2 - x end\n"
      "ready()\n"
      "total = y:sum():item()\n";
  lazylua_status second_status = LAZYLUA_OK;
  double second_ms = 0;
  std::thread second_thread([&] {
    const auto start = Clock::now();
    second_status = lazylua_run_string(second, kSecond, "=second");
    second_ms = milliseconds_since(start);
  });
  std::thread interrupter([&] {
    wait_until_syncing(first_ready);
    const auto give_up = Clock::now() + std::chrono::seconds(60);
    while (!second_ready && Clock::now() < give_up)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    lazylua_interrupt(first);
  });
  const lazylua_status first_status = lazylua_run_string(first, kLongSync, "=first");
  interrupter.join();
  second_thread.join();
  std::printf("second interpreter's run: %.0f ms\n", second_ms);
  EXPECT_EQ(first_status, LAZYLUA_ERROR_INTERRUPTED) << lazylua_error_message(first);
  ASSERT_EQ(second_status, LAZYLUA_OK) << lazylua_error_message(second);
  lazylua_value total;
  ASSERT_EQ(lazylua_get_global(second, "total", &total), LAZYLUA_OK);
  ASSERT_EQ(total.type, LAZYLUA_TYPE_NUMBER);
  EXPECT_EQ(total.as.number, 4000000.0);
}

}  // namespace
