// lower_test.cpp - the lowering driver (compiler/lower.h): codegen runs once
// per compile, donations are chosen before it as the plan's steps allow,
// and a plan survives the disk cache's record (compiler/plan_record.h).
#include "codegen_test_util.h"
#include "compiler/plan_record.h"

namespace lazylua::compiler {
namespace {

// A program whose inputs are all donated (as after in-place updates of
// every input tensor), lowered as recorded.
Program all_donated(Program program) {
  program.donated.assign(static_cast<size_t>(program.input_count), true);
  return program;
}

// The run input whose buffer output k is computed in, or -1.
int output_donor(const Plan& plan, int k) {
  return plan.slots[plan.outputs[k]].input_index;
}

// The input number of the only parameter of `shape` and `dtype`.
int input_of(const Program& program, const Shape& shape, DType dtype) {
  int found = -1;
  for (const Instruction& instruction : program.instructions) {
    if (instruction.op != Op::parameter || instruction.shape != shape) continue;
    if (instruction.dtype != dtype) continue;
    EXPECT_EQ(found, -1) << "two parameters of one type";
    found = instruction.input_index;
  }
  return found;
}

// Each test suite needs its own fixture class (Codegen's is per file).
class Lower : public Codegen {};

TEST_F(Lower, GeneratesCodeOnceWithItsDonations) {
  const Tensor w = data({64}), g = data({64});
  const Program program = all_donated(
      record({binary(BinaryOp::sub, w, binary(BinaryOp::mul, g, number(0.5)))}).program);
  const uint64_t before = generate_plan_count();
  const Lowered lowered = lower(program, {.optimize = false});
  EXPECT_EQ(generate_plan_count() - before, 1u);
  // The update is written over an input it reads only where it writes.
  EXPECT_GE(output_donor(lowered.plan, 0), 0);
}

TEST_F(Lower, NoDonationBeforeAStepThatCanFail) {
  const Tensor w = data({64}), g = data({64});
  const Tensor a = data({8}, DType::i32), b = data({8}, DType::i32);
  const Tensor update = binary(BinaryOp::sub, w, g);
  const Tensor quotient = binary(BinaryOp::floordiv, a, b);  // may divide by zero
  // The division runs after the update: a failure would rerun the graph
  // on the reference interpreter, which needs w as it was.
  const Plan after = lower(all_donated(record({update, quotient}).program), {}).plan;
  EXPECT_EQ(output_donor(after, 0), -1);
  // Run first, it leaves the update free to take w's buffer.
  const Plan before = lower(all_donated(record({quotient, update}).program), {}).plan;
  EXPECT_GE(output_donor(before, 1), 0);
}

TEST_F(Lower, ReductionInChunksFoldsIntoAnInputItsChunksRead) {
  // sum(x * s) over more than one chunk: the chunks read s, a second
  // kernel folds their partials into the output, which may then take s's
  // buffer (the choice is made before codegen: it must know the two steps).
  const int64_t n = 200000;
  ASSERT_GT(reduce_partial_count(n), 1);
  const Tensor x = data({n}), s = data({});
  const Recorded recorded =
      record({reduce(ReduceOp::sum, binary(BinaryOp::mul, x, s), std::nullopt, false)});
  const Lowered lowered = lower(all_donated(recorded.program), {});
  ASSERT_EQ(count_steps(lowered.plan, Step::Kind::kernel), 2);
  EXPECT_EQ(output_donor(lowered.plan, 0), input_of(lowered.program, Shape{}, DType::f32));
}

// ---- plan records ----

void expect_same_plan(const Plan& a, const Plan& b) {
  ASSERT_EQ(a.slots.size(), b.slots.size());
  for (size_t s = 0; s < a.slots.size(); s++) {
    EXPECT_EQ(a.slots[s].dtype, b.slots[s].dtype);
    EXPECT_EQ(a.slots[s].shape, b.slots[s].shape);
    EXPECT_EQ(a.slots[s].instruction, b.slots[s].instruction);
    EXPECT_EQ(a.slots[s].input_index, b.slots[s].input_index);
  }
  ASSERT_EQ(a.steps.size(), b.steps.size());
  for (size_t k = 0; k < a.steps.size(); k++) {
    const Step& x = a.steps[k];
    const Step& y = b.steps[k];
    EXPECT_EQ(x.kind, y.kind);
    EXPECT_EQ(x.function, y.function);
    EXPECT_EQ(x.iterations, y.iterations);
    EXPECT_EQ(x.grain, y.grain);
    EXPECT_EQ(x.slots, y.slots);
    EXPECT_EQ(x.byte_offsets, y.byte_offsets);
    EXPECT_EQ(x.instruction, y.instruction);
    EXPECT_EQ(x.written, y.written);
    EXPECT_EQ(x.roots, y.roots);
    EXPECT_EQ(x.same_element_reads, y.same_element_reads);
    EXPECT_EQ(x.can_fail, y.can_fail);
    EXPECT_EQ(x.transposed_inputs, y.transposed_inputs);
    EXPECT_EQ(x.parts, y.parts);
    ASSERT_EQ(x.epilogue.size(), y.epilogue.size());
    for (size_t e = 0; e < x.epilogue.size(); e++) {
      EXPECT_EQ(x.epilogue[e].kind, y.epilogue[e].kind);
      EXPECT_EQ(x.epilogue[e].value_first, y.epilogue[e].value_first);
      EXPECT_EQ(x.epilogue[e].operand, y.epilogue[e].operand);
    }
  }
  EXPECT_EQ(a.outputs, b.outputs);
  EXPECT_EQ(a.kernel_count, b.kernel_count);
  EXPECT_EQ(a.function_count, b.function_count);
  EXPECT_EQ(a.summary, b.summary);
}

// A convolution and the clamp after it, as the ONNX importer records Clip:
// maximum, then minimum, with 0-d f32 bounds; `low` may come first.
Tensor clipped_conv(const Tensor& x, const Tensor& weight, const Tensor& low, const Tensor& high,
                    bool low_first = false) {
  const Tensor y = conv(x, weight, nullptr, ConvWindow{});
  const Tensor raised =
      low_first ? binary(BinaryOp::maximum, low, y) : binary(BinaryOp::maximum, y, low);
  return binary(BinaryOp::minimum, raised, high);
}

TEST_F(Lower, ConvolutionTakesTheClampAfterIt) {
  const Tensor x = data({2, 3, 6, 6}, DType::f32, 3, true), weight = data({4, 3, 3, 3});
  const Tensor low = data({}), high = data({});
  for (bool low_first : {false, true}) {
    const Plan& plan = check(record({clipped_conv(x, weight, low, high, low_first)}), 0, 0);
    ASSERT_EQ(plan.steps.size(), 1u);
    const Step& step = plan.steps[0];
    EXPECT_EQ(step.kind, Step::Kind::library);
    ASSERT_EQ(step.epilogue.size(), 2u);
    EXPECT_EQ(step.epilogue[0].kind, ConvEpilogue::Kind::maximum);
    EXPECT_EQ(step.epilogue[0].value_first, !low_first);
    EXPECT_EQ(step.epilogue[1].kind, ConvEpilogue::Kind::minimum);
    EXPECT_EQ(step.slots.size(), 5u);  // x, weight, the two bounds, the output
  }
  // relu, then a maximum with a bound: two stages.
  const Tensor activated = unary(UnaryOp::relu, conv(x, weight, nullptr, ConvWindow{}));
  const Plan& relu_plan = check(record({binary(BinaryOp::maximum, activated, low)}), 0, 0);
  ASSERT_EQ(relu_plan.steps.size(), 1u);
  EXPECT_EQ(relu_plan.steps[0].epilogue.size(), 2u);
  // The convolution's value is an output too: it keeps its slot and the
  // clamp its kernel.
  const Tensor y = conv(x, weight, nullptr, ConvWindow{});
  const Plan& shared = check(record({y, unary(UnaryOp::relu, y)}), 0, 0);
  EXPECT_EQ(count_steps(shared, Step::Kind::kernel), 1);
  for (const Step& step : shared.steps) EXPECT_TRUE(step.epilogue.empty());
  // A convolution that is an output and nothing else (no user to look at:
  // the sanitizer build caught the fold reading before the instructions).
  const Plan& alone = check(record({conv(x, weight, nullptr, ConvWindow{})}), 0, 0);
  ASSERT_EQ(alone.steps.size(), 1u);
  EXPECT_TRUE(alone.steps[0].epilogue.empty());
}

class PlanRecord : public Codegen {
 protected:
  // Kernels, a BLAS call with a transposed operand, a cat (byte offsets),
  // a reduction, an eager step and a convolution with its clamp folded in,
  // with a donation.
  Program canonical() {
    const Tensor a = data({16, 8}), b = data({16, 8}), c = data({4, 8});
    const Tensor product = matmul(binary(BinaryOp::mul, a, b), transpose(c, 0, 1));
    const Tensor joined = cat({a, b, a}, 0);
    const Tensor total = reduce(ReduceOp::sum, binary(BinaryOp::add, joined, number(1)), 1, false);
    const Tensor eager = softmax(b, 0, false);  // no kernel over dim 0
    const Tensor clipped = clipped_conv(data({1, 2, 5, 5}), data({3, 2, 3, 3}), data({}), data({}));
    return all_donated(
        record({product, total, eager, binary(BinaryOp::add, a, number(1)), clipped}).program);
  }
};

TEST_F(PlanRecord, RoundTripGivesTheSamePlan) {
  const Program program = canonical();
  const Lowered lowered = lower(program);
  ASSERT_GT(lowered.plan.kernel_count, 0);
  ASSERT_TRUE(std::any_of(lowered.plan.steps.begin(), lowered.plan.steps.end(),
                          [](const Step& step) { return step.epilogue.size() == 2; }));
  const std::string bytes = serialize_plan(program, lowered.program, lowered.plan);
  ASSERT_FALSE(bytes.empty());
  Program optimized;
  Plan plan;
  ASSERT_TRUE(deserialize_plan(bytes, program, &optimized, &plan));
  EXPECT_EQ(optimized.text(), lowered.program.text());
  EXPECT_EQ(optimized.donated, lowered.program.donated);
  expect_same_plan(plan, lowered.plan);
  EXPECT_TRUE(plan.source.empty());  // the object holds the code
}

TEST_F(PlanRecord, AnotherProgramIsRejected) {
  const Program program = canonical();
  const Lowered lowered = lower(program);
  const std::string bytes = serialize_plan(program, lowered.program, lowered.plan);
  Program changed = program;
  changed.donated[0] = !changed.donated[0];
  ASSERT_NE(canonical_hash(changed), canonical_hash(program));
  Program optimized;
  Plan plan;
  EXPECT_FALSE(deserialize_plan(bytes, changed, &optimized, &plan));
  // A program of other shapes too.
  const Tensor x = data({3, 5});
  const Program other = record({binary(BinaryOp::add, x, number(1))}).program;
  EXPECT_FALSE(deserialize_plan(bytes, other, &optimized, &plan));
}

TEST_F(PlanRecord, DamagedBytesAreRejectedWithoutCrashing) {
  const Program program = canonical();
  const Lowered lowered = lower(program);
  const std::string bytes = serialize_plan(program, lowered.program, lowered.plan);
  Program optimized;
  Plan plan;
  for (size_t size = 0; size < bytes.size(); size++) {
    EXPECT_FALSE(deserialize_plan(bytes.substr(0, size), program, &optimized, &plan)) << size;
  }
  // Each byte changed: any result but a crash or an index out of range
  // (the sanitizer build checks those); a plan that loads has every slot
  // index in range.
  for (size_t at = 0; at < bytes.size(); at++) {
    std::string garbled = bytes;
    garbled[at] = static_cast<char>(garbled[at] ^ 0x5a);
    if (!deserialize_plan(garbled, program, &optimized, &plan)) continue;
    for (const Step& step : plan.steps) {
      for (int slot : step.slots) EXPECT_LT(static_cast<size_t>(slot), plan.slots.size()) << at;
    }
  }
  std::mt19937 random(7);
  for (int k = 0; k < 100; k++) {
    std::string noise(bytes.size(), '\0');
    for (char& c : noise) c = static_cast<char>(random());
    EXPECT_FALSE(deserialize_plan(noise, program, &optimized, &plan));
  }
}

}  // namespace
}  // namespace lazylua::compiler
