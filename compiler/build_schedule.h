// build_schedule.h - when a run of a graph whose native code is still being
// built waits for it rather than running on the reference interpreter again
// (docs/architecture.md §5, "While a graph compiles ...").
//
// Example (native_executor.cpp):
//   entry.toolchain_expected = expected_toolchain_seconds(source);  // compile thread
//   ...
//   if (wait_for_build_is_shorter(remaining, last_interpreted_seconds)) wait();
//
// Nearly all of a cold compile is the C compiler (resnet18: 1.7 ms of
// passes and codegen, then ~1 s of CPU in cc), and its time follows the size
// of the generated kernels. The estimate is that size times a rate that each
// finished build recalibrates, so it follows this machine and its load.
#pragma once

#include <cstddef>
#include <string>

namespace lazylua::compiler {

// Seconds the toolchain is expected to take on `source` (a generated file,
// whose kernels are marked by kSourcePartMark), compiled as
// split_source(source, parallelism) cuts it.
double expected_toolchain_seconds(const std::string& source, int parallelism);

// Calibrates the estimate with a build that took `seconds` for the source
// expected_toolchain_seconds gave `expected` for. Thread-safe.
void record_toolchain_seconds(double expected, double seconds);

// The seconds a build expected to take `expected` seconds has left after
// `elapsed`. Past its estimate, the estimate was wrong (a loaded machine, a
// first build before any calibration): it is then expected to run over by
// as much again as it already has.
double expected_remaining_seconds(double expected, double elapsed);

// A run of a graph seen before whose build is expected to end in
// `remaining_build_seconds`: true when waiting for it is shorter than running
// the graph on the reference interpreter once more (its last such run took
// `interpreted_seconds`; 0 = none yet, never wait). Waiting also leaves the
// cores to the compiler, which the interpreter's threads would share.
bool wait_for_build_is_shorter(double remaining_build_seconds, double interpreted_seconds);

// The runs of a graph that may take the reference interpreter while its
// build is under way; the run after them waits for the build whatever it
// costs (interruptible). A graph run that often is a loop's body or a model
// called again and again: from here on its calls are native, at a known
// call, rather than interpreted for as long as the build happens to take
// (an imported CNN at batch 1 ran 30 interpreted calls in a 0.8 s build).
constexpr int kInterpretedRunsBeforeWaiting = 2;

// How long a wait that wait_for_build_is_shorter allowed may last before
// the run gives up and takes the interpreter after all (the estimate was
// wrong): a run then costs at most three interpreted runs, and the runs
// after it do not wait for that build again.
double longest_build_wait_seconds(double interpreted_seconds);

}  // namespace lazylua::compiler
