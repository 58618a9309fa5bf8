// profiler.cpp - the span collector and its two outputs (profiler.h).
#include "profiler.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <string_view>

namespace lazylua::profiler {

namespace detail {
std::atomic<bool> active{false};
}

namespace {

std::mutex mutex;
std::vector<Event> events;
int64_t origin_ns = 0;
std::atomic<uint32_t> next_thread{0};
// Bumped by start(), so that a thread numbers itself again in a new run.
std::atomic<uint32_t> generation{0};

uint32_t this_thread_number() {
  thread_local uint32_t number = 0;
  thread_local uint32_t numbered_in = ~0u;
  const uint32_t now = generation.load(std::memory_order_relaxed);
  if (numbered_in != now) {
    numbered_in = now;
    number = next_thread++;
  }
  return number;
}

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      out += fmt::format("\\u{:04x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

bool is_kernel(const Event& e) {
  const std::string_view category = e.category;
  // "matmul" steps are left out: the "blas" spans inside them count.
  return category == "kernel" || category == "blas" || category == "library" ||
         category == "reference";
}

thread_local const std::string* label = nullptr;
const std::string kNoLabel;

}  // namespace

uint32_t profile_number() {
  return generation.load(std::memory_order_relaxed);
}

const std::string* current_label_pointer() {
  return label;
}

const std::string& current_label() {
  return label ? *label : kNoLabel;
}

Label::Label(const std::string* text) : previous_(label), set_(text != nullptr) {
  if (set_) label = text;
}

Label::~Label() {
  if (set_) label = previous_;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void start() {
  std::lock_guard lock(mutex);
  events.clear();
  origin_ns = now_ns();
  next_thread = 0;
  generation++;
  this_thread_number();  // the thread that starts is track 0
  detail::active.store(true, std::memory_order_relaxed);
}

std::vector<Event> stop() {
  detail::active.store(false, std::memory_order_relaxed);
  std::lock_guard lock(mutex);
  std::vector<Event> taken = std::move(events);
  events.clear();
  for (Event& e : taken) {
    // A span that began before start() (the script's time since a sync
    // made before it) is cut at the start.
    if (e.start_ns < origin_ns) {
      e.duration_ns = std::max<int64_t>(0, e.duration_ns - (origin_ns - e.start_ns));
      e.start_ns = origin_ns;
    }
    e.start_ns -= origin_ns;
  }
  std::stable_sort(taken.begin(), taken.end(),
                   [](const Event& a, const Event& b) { return a.start_ns < b.start_ns; });
  return taken;
}

void add(Event event) {
  event.thread = this_thread_number();
  std::lock_guard lock(mutex);
  if (!detail::active.load(std::memory_order_relaxed)) return;
  events.push_back(std::move(event));
}

std::string chrome_trace(const std::vector<Event>& list) {
  std::vector<std::string> objects;
  uint32_t threads = 0;
  for (const Event& e : list) threads = std::max(threads, e.thread + 1);
  for (uint32_t t = 0; t < threads; t++) {
    objects.push_back(fmt::format(
        "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":{},\"args\":{{\"name\":{}}}}}",
        t, json_string(t == 0 ? "lua" : fmt::format("lazylua thread {}", t))));
  }
  for (const Event& e : list) {
    std::string args;
    if (!e.detail.empty()) args += "\"detail\":" + json_string(e.detail);
    if (e.bytes > 0) args += fmt::format("{}\"bytes\":{}", args.empty() ? "" : ",", e.bytes);
    if (e.flops > 0) args += fmt::format("{}\"flops\":{}", args.empty() ? "" : ",", e.flops);
    objects.push_back(fmt::format(
        "{{\"name\":{},\"cat\":{},\"ph\":\"X\",\"pid\":1,\"tid\":{},\"ts\":{:.3f},\"dur\":{:.3f},"
        "\"args\":{{{}}}}}",
        json_string(e.name), json_string(e.category), e.thread,
        static_cast<double>(e.start_ns) / 1000, static_cast<double>(e.duration_ns) / 1000, args));
  }
  std::string text = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  for (size_t k = 0; k < objects.size(); k++) {
    text += objects[k] + (k + 1 < objects.size() ? ",\n" : "\n");
  }
  text += "]}\n";
  return text;
}

std::string kernel_table(const std::vector<Event>& list, int rows) {
  struct Total {
    const char* category;
    int64_t calls = 0, ns = 0, bytes = 0, flops = 0;
  };
  std::map<std::string, Total> by_name;
  int64_t all_ns = 0;
  for (const Event& e : list) {
    if (!is_kernel(e)) continue;
    Total& total = by_name[e.name];
    total.category = e.category;
    total.calls++;
    total.ns += e.duration_ns;
    total.bytes += e.bytes;
    total.flops += e.flops;
    all_ns += e.duration_ns;
  }
  std::vector<std::pair<std::string, Total>> sorted(by_name.begin(), by_name.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
  std::string text = fmt::format("{:>6} {:>10} {:>6} {:>8} {:>8}  {}\n", "calls", "total ms", "%",
                                 "GB/s", "GFLOP/s", "kernel (Lua lines or ONNX nodes)");
  int shown = 0;
  for (const auto& [name, total] : sorted) {
    if (shown++ == rows) break;
    const double seconds = static_cast<double>(total.ns) * 1e-9;
    const std::string rate =
        total.bytes > 0 && seconds > 0
            ? fmt::format("{:.1f}", static_cast<double>(total.bytes) / seconds * 1e-9)
            : "-";
    const std::string flops =
        total.flops > 0 && seconds > 0
            ? fmt::format("{:.1f}", static_cast<double>(total.flops) / seconds * 1e-9)
            : "-";
    text += fmt::format(
        "{:>6} {:>10.3f} {:>6.1f} {:>8} {:>8}  {}\n", total.calls, seconds * 1e3,
        all_ns > 0 ? 100.0 * static_cast<double>(total.ns) / static_cast<double>(all_ns) : 0.0,
        rate, flops, name);
  }
  if (sorted.empty()) text += "(no kernels ran while profiling)\n";
  return text;
}

}  // namespace lazylua::profiler
