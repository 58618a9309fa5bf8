// donate.cpp - which outputs a plan computes into donated input buffers.
//
// An optimizer step reads each weight and writes its new value: with the
// weight's buffer donated (Graph::donated), the kernel that writes the new
// value can write it over the old one, so a step allocates no new memory
// for its parameters and the weights stay where the caches have them.
#include <algorithm>
#include <map>
#include <set>

#include "compiler/codegen.h"

namespace lazylua::compiler {

namespace {

// Slots one can take over another's memory: dtype and extents.
std::vector<int64_t> key_of(const Slot& slot) {
  std::vector<int64_t> key{static_cast<int64_t>(slot.dtype)};
  key.insert(key.end(), slot.shape.begin(), slot.shape.end());
  return key;
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
  std::vector<bool> is_output(plan.slots.size(), false);
  for (int slot : plan.outputs) is_output[slot] = true;
  // The donated inputs, by the step after which nothing reads them; a pool
  // per dtype and shape of those free at the current step, lowest slot
  // first. (A scan of every slot for every output made a mark_step of
  // 10,000 values quadratic, issue 12.)
  std::vector<std::vector<int>> freed_after(step_count + 1);
  for (size_t s = 0; s < plan.slots.size(); s++) {
    const Slot& in = plan.slots[s];
    if (in.input_index < 0 || !program.donated[in.input_index] || is_output[s]) continue;
    freed_after[last_use[s] + 1].push_back(static_cast<int>(s));
  }
  std::map<std::vector<int64_t>, std::set<int>> free;
  std::vector<int> donor(program.instructions.size(), -1);
  std::vector<bool> taken(plan.slots.size(), false);
  bool any = false;
  for (int k = 0; k < step_count; k++) {
    for (int slot : freed_after[k]) {
      if (!taken[slot]) free[key_of(plan.slots[slot])].insert(slot);
    }
    const Step& step = plan.steps[k];
    if (step.kind != Step::Kind::kernel || fallible_from[k]) continue;
    for (int written : step.written) {
      const Slot& out = plan.slots[written];
      if (out.input_index >= 0 || first_write[written] != k) continue;
      if (!is_output[written]) continue;
      // The lowest free slot of the output's type, or one this very step
      // reads last, only at the element it writes.
      int chosen = -1;
      auto pool = free.find(key_of(out));
      if (pool != free.end() && !pool->second.empty()) chosen = *pool->second.begin();
      for (int slot : step.same_element_reads) {
        const Slot& in = plan.slots[slot];
        if (in.input_index < 0 || taken[slot] || !program.donated[in.input_index]) continue;
        if (is_output[slot] || last_use[slot] != k || key_of(in) != key_of(out)) continue;
        if (chosen < 0 || slot < chosen) chosen = slot;
      }
      if (chosen < 0) continue;
      if (pool != free.end()) pool->second.erase(chosen);
      donor[out.instruction] = plan.slots[chosen].instruction;
      taken[chosen] = true;
      any = true;
    }
  }
  if (!any) return {};
  return donor;
}

}  // namespace lazylua::compiler
