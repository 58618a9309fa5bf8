// memory_plan.cpp - slot liveness and buffer sharing for a plan (memory_plan.h).
#include "compiler/memory_plan.h"

#include <algorithm>
#include <numeric>

#include "compiler/plan.h"

namespace lazylua::compiler {
namespace {

// The slots a step fills. A kernel lists them; a matrix product, a library
// and a reference step write their last slot; a scan its packed value and
// its parts (everything after its inputs).
std::vector<int> written_slots(const Step& step) {
  switch (step.kind) {
    case Step::Kind::kernel:
    case Step::Kind::scan:
      return step.written;
    case Step::Kind::matmul:
    case Step::Kind::library:
    case Step::Kind::reference:
      return step.slots.empty() ? std::vector<int>{} : std::vector<int>{step.slots.back()};
  }
  return {};
}

struct Interval {
  int first = -1;  // the first step that names the slot
  int last = -1;   // the last one
};

}  // namespace

int64_t MemoryPlan::shared_bytes() const {
  return std::accumulate(buffer_bytes.begin(), buffer_bytes.end(), int64_t{0});
}

std::string MemoryPlan::summary() const {
  const auto shared_slots =
      std::count_if(buffer_of_slot.begin(), buffer_of_slot.end(), [](int b) { return b >= 0; });
  return fmt::format("{} slots share {} buffers: {:.1f} MiB for {:.1f} MiB of values", shared_slots,
                     buffer_bytes.size(), static_cast<double>(shared_bytes()) / 1048576.0,
                     static_cast<double>(shared_slot_bytes) / 1048576.0);
}

MemoryPlan plan_memory(const Plan& plan) {
  const size_t slot_count = plan.slots.size();
  const int step_count = static_cast<int>(plan.steps.size());
  MemoryPlan memory;
  memory.buffer_of_slot.assign(slot_count, -1);
  memory.slots_released_after.resize(plan.steps.size());
  memory.buffers_released_after.resize(plan.steps.size());

  // A slot lives from the first step that names it (reading or writing, at
  // any byte offset) to the last: two slots whose intervals share a step
  // never share memory, so no step reads a buffer it writes through
  // another slot.
  std::vector<Interval> lives(slot_count);
  // Slots that only kernels and matrix products fill: the executor makes
  // their memory, so it may hand them a shared buffer. A library,
  // reference or scan step returns an array of its own (a matrix product
  // computes straight into the memory it is given).
  std::vector<bool> filled_by_executor(slot_count, true);
  for (int i = 0; i < step_count; i++) {
    const Step& step = plan.steps[static_cast<size_t>(i)];
    for (int s : step.slots) {
      Interval& life = lives[static_cast<size_t>(s)];
      if (life.first < 0) life.first = i;
      life.last = i;
    }
    const bool executor_fills = step.kind == Step::Kind::kernel || step.kind == Step::Kind::matmul;
    if (!executor_fills) {
      for (int s : written_slots(step)) filled_by_executor[static_cast<size_t>(s)] = false;
    }
  }
  std::vector<bool> is_output(slot_count, false);
  for (int s : plan.outputs) {
    if (s >= 0) is_output[static_cast<size_t>(s)] = true;
  }

  std::vector<int> shared_slots;
  for (size_t s = 0; s < slot_count; s++) {
    const Interval& life = lives[s];
    if (life.last < 0 || is_output[s]) continue;
    memory.slots_released_after[static_cast<size_t>(life.last)].push_back(static_cast<int>(s));
    const Slot& slot = plan.slots[s];
    const int64_t bytes = numel(slot.shape) * static_cast<int64_t>(dtype_size(slot.dtype));
    if (slot.input_index < 0 && filled_by_executor[s] && bytes > 0) {
      shared_slots.push_back(static_cast<int>(s));
    }
  }

  // Best fit by first use: a slot takes the smallest free buffer that holds
  // it, else the largest free one (which grows), else a new buffer. A
  // buffer is free from the step after its current slot's last use.
  std::stable_sort(shared_slots.begin(), shared_slots.end(), [&lives](int a, int b) {
    return lives[static_cast<size_t>(a)].first < lives[static_cast<size_t>(b)].first;
  });
  std::vector<int> buffer_free_after;  // per buffer: the last step of its current slot
  for (int s : shared_slots) {
    const Interval& life = lives[static_cast<size_t>(s)];
    const Slot& slot = plan.slots[static_cast<size_t>(s)];
    const int64_t bytes = numel(slot.shape) * static_cast<int64_t>(dtype_size(slot.dtype));
    memory.shared_slot_bytes += bytes;
    int fitting = -1, largest = -1;
    for (size_t b = 0; b < buffer_free_after.size(); b++) {
      if (buffer_free_after[b] >= life.first) continue;
      const int64_t size = memory.buffer_bytes[b];
      if (size >= bytes &&
          (fitting < 0 || size < memory.buffer_bytes[static_cast<size_t>(fitting)]))
        fitting = static_cast<int>(b);
      if (largest < 0 || size > memory.buffer_bytes[static_cast<size_t>(largest)])
        largest = static_cast<int>(b);
    }
    int chosen = fitting >= 0 ? fitting : largest;
    if (chosen < 0) {
      chosen = static_cast<int>(memory.buffer_bytes.size());
      memory.buffer_bytes.push_back(0);
      buffer_free_after.push_back(-1);
    }
    const auto b = static_cast<size_t>(chosen);
    memory.buffer_bytes[b] = std::max(memory.buffer_bytes[b], bytes);
    buffer_free_after[b] = life.last;
    memory.buffer_of_slot[static_cast<size_t>(s)] = chosen;
  }
  for (size_t b = 0; b < buffer_free_after.size(); b++) {
    memory.buffers_released_after[static_cast<size_t>(buffer_free_after[b])].push_back(
        static_cast<int>(b));
  }
  return memory;
}

}  // namespace lazylua::compiler
