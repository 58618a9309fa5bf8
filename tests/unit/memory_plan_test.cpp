// memory_plan_test.cpp - the memory plan of a plan (compiler/memory_plan.h):
// slots whose lives overlap never share a buffer, inputs, outputs and the
// values a library, reference or scan step returns are never shared, every
// slot but the outputs is let go after its last step, and a chain of
// values needs two buffers, not one per value. Plans are written by hand.
#include <gtest/gtest.h>

#include <algorithm>

#include "compiler/plan.h"

namespace lazylua::compiler {
namespace {

Slot f32_slot(int64_t elements, int input_index = -1) {
  return Slot{DType::f32, Shape{elements}, -1, input_index};
}

Step kernel(std::vector<int> reads, int writes) {
  Step step;
  step.kind = Step::Kind::kernel;
  step.slots = std::move(reads);
  step.slots.push_back(writes);
  step.written = {writes};
  return step;
}

// Slot 0 is the input; step i reads slot i and writes slot i + 1; the last
// slot is the output.
Plan chain(int values) {
  Plan plan;
  plan.slots.push_back(f32_slot(1000, 0));
  for (int i = 0; i < values; i++) {
    plan.slots.push_back(f32_slot(1000));
    plan.steps.push_back(kernel({i}, i + 1));
  }
  plan.outputs = {values};
  return plan;
}

TEST(MemoryPlan, AChainOfValuesTakesTwoBuffers) {
  const Plan plan = chain(20);
  const MemoryPlan memory = plan_memory(plan);
  ASSERT_TRUE(memory.planned(plan.slots.size(), plan.steps.size()));
  EXPECT_EQ(memory.buffer_bytes.size(), 2u);
  EXPECT_EQ(memory.shared_bytes(), 2 * 4000);
  EXPECT_EQ(memory.shared_slot_bytes, 19 * 4000);  // slots 1..19
  EXPECT_EQ(memory.buffer_of_slot[0], -1);         // the input
  EXPECT_EQ(memory.buffer_of_slot[20], -1);        // the output
  for (int s = 1; s < 20; s++) {
    // Slot s lives through steps s-1 and s: its neighbours overlap it.
    EXPECT_NE(memory.buffer_of_slot[s], memory.buffer_of_slot[s + 1 < 20 ? s + 1 : s - 1]);
    // It is let go after step s, which reads it last.
    const auto& released = memory.slots_released_after[static_cast<size_t>(s)];
    EXPECT_NE(std::find(released.begin(), released.end(), s), released.end());
  }
  for (const auto& released : memory.slots_released_after) {
    EXPECT_EQ(std::find(released.begin(), released.end(), 20), released.end());
  }
}

TEST(MemoryPlan, OverlappingLivesNeverShare) {
  // a (slot 1) is read by the last step; b, c, d come and go meanwhile.
  Plan plan;
  plan.slots = {f32_slot(10, 0), f32_slot(10), f32_slot(40),
                f32_slot(10),    f32_slot(10), f32_slot(10)};
  plan.steps = {kernel({0}, 1), kernel({0}, 2), kernel({2}, 3), kernel({3}, 4), kernel({1, 4}, 5)};
  plan.outputs = {5};
  const MemoryPlan memory = plan_memory(plan);
  const auto& buffer = memory.buffer_of_slot;
  EXPECT_NE(buffer[1], buffer[2]);
  EXPECT_NE(buffer[1], buffer[3]);
  EXPECT_NE(buffer[1], buffer[4]);
  EXPECT_NE(buffer[2], buffer[3]);
  EXPECT_NE(buffer[3], buffer[4]);
  // d (slot 4) starts after b's last step: it takes b's buffer (40 floats).
  EXPECT_EQ(buffer[4], buffer[2]);
  EXPECT_EQ(memory.buffer_bytes[static_cast<size_t>(buffer[2])], 160);
}

TEST(MemoryPlan, ValuesOtherStepsReturnAreNotShared) {
  Plan plan = chain(4);
  // Step 1 becomes an eager kernel: slot 2 is the array it returns.
  plan.steps[1].kind = Step::Kind::reference;
  plan.steps[1].written.clear();
  const MemoryPlan memory = plan_memory(plan);
  EXPECT_EQ(memory.buffer_of_slot[2], -1);
  EXPECT_GE(memory.buffer_of_slot[1], 0);
  EXPECT_GE(memory.buffer_of_slot[3], 0);
  // Still let go after its last use.
  const auto& released = memory.slots_released_after[2];
  EXPECT_NE(std::find(released.begin(), released.end(), 2), released.end());
}

TEST(MemoryPlan, ASlotNamedAtSeveralOffsetsLivesFromFirstToLast) {
  // Two steps write halves of slot 2 (as a cat does), a third reads it;
  // slot 1 is read by the first step only and could be reused by slot 3.
  Plan plan;
  plan.slots = {f32_slot(8, 0), f32_slot(8), f32_slot(8), f32_slot(8)};
  plan.steps = {kernel({0}, 1), kernel({1}, 2), kernel({0}, 2), kernel({2}, 3)};
  plan.outputs = {3};
  const MemoryPlan memory = plan_memory(plan);
  EXPECT_NE(memory.buffer_of_slot[1], memory.buffer_of_slot[2]);
  const auto& released = memory.slots_released_after[2];
  EXPECT_EQ(std::find(released.begin(), released.end(), 2), released.end());
  const auto& last = memory.slots_released_after[3];
  EXPECT_NE(std::find(last.begin(), last.end(), 2), last.end());
}

}  // namespace
}  // namespace lazylua::compiler
