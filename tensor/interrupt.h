// interrupt.h - stopping long tensor work when the host asks (Ctrl-C in the
// CLI, lazylua_interrupt in an embedding host).
//
// Lua's own interrupt is a hook that raises "interrupted!" at the next Lua
// instruction, which never comes while a sync runs a big graph, a kernel
// loops over 50M elements or the C compiler builds a graph. So the host also
// sets an atomic flag, and the long loops look at it every few milliseconds:
// between the nodes of a graph and the steps of a plan, between slices of
// every parallel_for (thread_pool.cpp), per scan iteration, and while waiting
// for the C compiler (compiler/toolchain.cpp kills it). check_interrupt()
// then throws Interrupted, which the Lua binding turns into the Lua error
// "interrupted!" at the line that synced.
//
// The flag is per interpreter, not per process: the thread that runs an
// interpreter makes its flag current (InterruptScope, like MemoryBudgetScope)
// and a parallel job carries its caller's flag to the pool's workers, so an
// interrupt for one interpreter never stops another's kernels. A thread with
// no current flag (the background compile thread, a Lua state lazylua did
// not create) is never interrupted.
#pragma once

#include <atomic>
#include <exception>

namespace lazylua {

// What check_interrupt() throws. Not an Error: executors do not turn it into
// an ExecutionError (which would mark the sync's tensors failed for good),
// so the tensors of an interrupted sync stay pending and a later sync
// computes them.
class Interrupted : public std::exception {
 public:
  const char* what() const noexcept override { return "interrupted!"; }
};

using InterruptFlag = std::atomic<bool>;

// The flag the work on this thread obeys (null: none).
const InterruptFlag* current_interrupt_flag();

// Makes `flag` current on this thread for its lifetime (null: nothing may
// interrupt the work inside, e.g. a step that must not stop half-way).
class InterruptScope {
 public:
  explicit InterruptScope(const InterruptFlag* flag);
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

 private:
  const InterruptFlag* previous_;
};

// True if the current flag is set.
bool interrupt_requested();

// Throws Interrupted if the current flag is set. A thread-local load and an
// atomic load: cheap enough for every slice of a few hundred microseconds.
void check_interrupt();

}  // namespace lazylua
