// memory_plan.h - where a plan's slots live while it runs: each slot is
// dropped after its last use, and slots whose lives do not overlap share a
// buffer, so a run's peak memory tracks what is live (docs/architecture.md
// §5, step 7), not the sum of every intermediate.
//
// Example (lower.cpp, and the disk cache's loader, plan_record.cpp):
//   plan.memory = plan_memory(plan);   // once per plan; every run reads it
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lazylua::compiler {

struct Plan;

struct MemoryPlan {
  // Per slot: the shared buffer it is a view of (from offset 0), or -1 when
  // it gets memory of its own: the run's inputs and outputs, and values that
  // a library, reference or scan step returns in an array of its making.
  std::vector<int> buffer_of_slot;
  // Per shared buffer: its size, the largest of its slots'.
  std::vector<int64_t> buffer_bytes;
  // Per step: the slots, and the shared buffers, that no later step uses:
  // the run lets go of them once the step is done. Outputs are never among
  // them.
  std::vector<std::vector<int>> slots_released_after;
  std::vector<std::vector<int>> buffers_released_after;
  // The bytes of the slots that share buffers, all summed (what a run
  // without the plan would hold at its end).
  int64_t shared_slot_bytes = 0;

  bool planned(size_t slots, size_t steps) const {
    return buffer_of_slot.size() == slots && slots_released_after.size() == steps;
  }
  int64_t shared_bytes() const;
  std::string summary() const;  // one line for LAZYLUA_DEBUG=2
};

// Liveness of the plan's slots (first and last step that names each), and a
// best-fit assignment of the slots a kernel or matrix product fills to
// shared buffers, by those intervals. Scan bodies have their own plans
// (lowered, or read, separately) and so their own memory plans.
MemoryPlan plan_memory(const Plan& plan);

}  // namespace lazylua::compiler
