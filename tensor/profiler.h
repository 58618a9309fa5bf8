// profiler.h - where the time goes, as spans on a timeline per thread:
// recording (the script between syncs), syncs, compiles (with the cache tier
// that served them), each kernel of a plan (named by the Lua lines of the
// ops fused into it), BLAS products and convolutions. Written as Chrome
// trace-event JSON (opens in Perfetto or chrome://tracing), and summed into
// a table of the top kernels (tensor.profile_report()). The trace is text:
// interp/ writes it to a file, through the program's safe file writer
// (interp/file_bytes.h), since tensor/ opens no files by name.
//
//   profiler::start();
//   { profiler::Span span("kernel", name); ...run... span.set_work(bytes, flops); }
//   std::vector<profiler::Event> events = profiler::stop();
//   std::string json = chrome_trace(events);   // interp/ writes it to a file
//
// Off (the default), a span costs one relaxed atomic load.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lazylua::profiler {

struct Event {
  const char* category = "";  // "record", "sync", "compile", "kernel", "blas", "library" ...
  std::string name;
  std::string detail;  // shown as args.detail: shapes, the cache tier, Lua lines
  int64_t start_ns = 0;
  int64_t duration_ns = 0;
  uint32_t thread = 0;  // small numbers in order of first use
  int64_t bytes = 0;    // memory the span read and wrote, when known
  int64_t flops = 0;    // floating-point operations, when known
};

namespace detail {
extern std::atomic<bool> active;
}
inline bool active() {
  return detail::active.load(std::memory_order_relaxed);
}

int64_t now_ns();

// Starts collecting (clearing what an earlier run left).
void start();
// Stops and returns the events, in start order per thread.
std::vector<Event> stop();
// Which profile is running: changes with every start().
uint32_t profile_number();
// Whether start() was called without stop().
inline bool running() {
  return active();
}

void add(Event event);

// Records [construction, destruction) when the profiler is on.
class Span {
 public:
  // Views, so that a span made while the profiler is off builds no string.
  explicit Span(const char* category, std::string_view name = {}, std::string_view detail = {}) {
    if (!active()) return;
    on_ = true;
    event_.category = category;
    event_.name = name;
    event_.detail = detail;
    event_.start_ns = now_ns();
  }
  ~Span() {
    if (!on_) return;
    event_.duration_ns = now_ns() - event_.start_ns;
    add(std::move(event_));
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;
  bool on() const { return on_; }
  void set_work(int64_t bytes, int64_t flops) {
    event_.bytes = bytes;
    event_.flops = flops;
  }
  void set_name(std::string name) {
    if (on_) event_.name = std::move(name);
  }
  void set_detail(std::string detail) {
    if (on_) event_.detail = std::move(detail);
  }

 private:
  bool on_ = false;
  Event event_;
};

// What the calling thread is working for (a plan step's ops and Lua lines),
// named in the spans made meanwhile below the step (a BLAS call): set for a
// scope by Label. Empty when none.
const std::string& current_label();
const std::string* current_label_pointer();  // null when none
class Label {
 public:
  explicit Label(const std::string* label);  // null: no change
  ~Label();
  Label(const Label&) = delete;
  Label& operator=(const Label&) = delete;

 private:
  const std::string* previous_;
  bool set_;
};

// The events as Chrome trace-event JSON ("X" events, microseconds, one
// track per thread, named).
std::string chrome_trace(const std::vector<Event>& events);

// A text table of the kernels (kernel, blas and library spans) by total
// time: calls, total ms, % of all kernel time, achieved GB/s and GFLOP/s,
// and the name (which holds the Lua lines). At most `rows` rows.
std::string kernel_table(const std::vector<Event>& events, int rows = 20);

}  // namespace lazylua::profiler
