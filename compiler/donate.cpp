// donate.cpp - which outputs a plan computes into donated input buffers.
//
// An optimizer step reads each weight and writes its new value: with the
// weight's buffer donated (Graph::donated), the kernel that writes the new
// value can write it over the old one, so a step allocates no new memory
// for its parameters and the weights stay where the caches have them.
#include <algorithm>

#include "compiler/codegen.h"

namespace lazylua::compiler {

namespace {

bool contains(const std::vector<int>& values, int value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

}  // namespace

// An output takes over a donated input's slot when, in the first plan:
//  - the output is written by an elementwise kernel that reads the input
//    only at the element it is writing (or not at all), so each element
//    is read before it is overwritten;
//  - no later step reads the input, and the input is not itself an output;
//  - no step from that kernel on can fail: a failed run is repeated by
//    the reference interpreter, which needs the inputs as they were.
std::vector<int> choose_donors(const Program& program, const Plan& plan) {
  if (std::none_of(program.donated.begin(), program.donated.end(), [](bool d) { return d; })) {
    return {};
  }
  const int step_count = static_cast<int>(plan.steps.size());
  // fallible_from[k]: some step at k or later can fail.
  std::vector<bool> fallible_from(step_count + 1, false);
  for (int k = step_count - 1; k >= 0; k--) {
    const Step& step = plan.steps[k];
    fallible_from[k] = fallible_from[k + 1] || step.can_fail ||
                       step.kind == Step::Kind::reference || step.kind == Step::Kind::library;
  }
  // last_use[slot]: the last step that uses the slot;
  // first_write[slot]: the first step that writes it (cat writes a slot in
  // several steps: all of them then write the donor's memory).
  std::vector<int> last_use(plan.slots.size(), -1), first_write(plan.slots.size(), -1);
  for (int k = 0; k < step_count; k++) {
    for (int slot : plan.steps[k].slots) last_use[slot] = k;
    for (int slot : plan.steps[k].written) {
      if (first_write[slot] < 0) first_write[slot] = k;
    }
  }
  std::vector<int> output_slots = plan.outputs;
  std::vector<int> donor(program.instructions.size(), -1);
  std::vector<bool> taken(plan.slots.size(), false);
  bool any = false;
  for (int k = 0; k < step_count; k++) {
    const Step& step = plan.steps[k];
    if (step.kind != Step::Kind::kernel || fallible_from[k]) continue;
    for (int written : step.written) {
      const Slot& out = plan.slots[written];
      if (out.input_index >= 0 || first_write[written] != k) continue;
      if (!contains(output_slots, written)) continue;
      for (size_t s = 0; s < plan.slots.size(); s++) {
        const Slot& in = plan.slots[s];
        const int slot = static_cast<int>(s);
        if (in.input_index < 0 || taken[s] || !program.donated[in.input_index]) continue;
        if (in.dtype != out.dtype || in.shape != out.shape) continue;
        if (contains(output_slots, slot) || last_use[s] > k) continue;
        if (last_use[s] == k && !contains(step.same_element_reads, slot)) continue;
        donor[out.instruction] = in.instruction;
        taken[s] = true;
        any = true;
        break;
      }
    }
  }
  if (!any) return {};
  return donor;
}

}  // namespace lazylua::compiler
