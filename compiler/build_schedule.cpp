// build_schedule.cpp - the toolchain time estimate and the wait rule
// (build_schedule.h).
#include "compiler/build_schedule.h"

#include <algorithm>
#include <mutex>
#include <string_view>

#include "compiler/toolchain.h"

namespace lazylua::compiler {
namespace {

// GCC 12 at -O2 on an idle core (measured on resnet18's and a transformer's
// sources): ~0.3 s for a file of one small kernel (the includes and kernel
// math, which every part compiles), then ~30 us per byte of kernel code.
constexpr double kCommonSeconds = 0.3;
constexpr double kSecondsPerKernelByte = 30e-6;
// The link of several parts into one object.
constexpr double kLinkSeconds = 0.05;

std::mutex calibration_mutex;
double calibration = 1.0;  // observed / estimated, of the recent builds

}  // namespace

double expected_toolchain_seconds(const std::string& source, int parallelism) {
  const std::string_view mark(kSourcePartMark);
  const size_t first = source.find(mark);
  const size_t kernel_bytes = first == std::string::npos ? 0 : source.size() - first;
  const size_t parts = split_source_part_count(source, parallelism);
  double seconds = kCommonSeconds + kSecondsPerKernelByte * static_cast<double>(kernel_bytes) /
                                        static_cast<double>(parts);
  if (parts > 1) seconds += kLinkSeconds;
  std::lock_guard lock(calibration_mutex);
  return seconds * calibration;
}

void record_toolchain_seconds(double expected, double seconds) {
  if (expected <= 0 || seconds <= 0) return;
  std::lock_guard lock(calibration_mutex);
  // expected already carries the old calibration: the ratio corrects it.
  // Half the weight to the newest build: the load of a shared machine
  // changes, and one odd build should not swing the estimate far.
  const double observed = calibration * seconds / expected;
  calibration = std::clamp(0.5 * calibration + 0.5 * observed, 0.05, 50.0);
}

double expected_remaining_seconds(double expected, double elapsed) {
  return elapsed <= expected ? expected - elapsed : elapsed - expected;
}

bool wait_for_build_is_shorter(double remaining_build_seconds, double interpreted_seconds) {
  return interpreted_seconds > 0 && remaining_build_seconds < interpreted_seconds;
}

double longest_build_wait_seconds(double interpreted_seconds) {
  return 2 * interpreted_seconds;
}

}  // namespace lazylua::compiler
