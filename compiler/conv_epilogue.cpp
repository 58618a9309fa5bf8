// conv_epilogue.cpp - see conv_epilogue.h.
#include "compiler/conv_epilogue.h"

#include <optional>

#include "tensor/eager_ops.h"

namespace lazylua::compiler {

namespace {

// The clamp that instruction `i` applies to `value`, if it is one: relu, or
// maximum/minimum of `value` and a 0-d f32 leaf (a parameter, a scalar or
// the constant 0 or 1), of value's shape and dtype.
std::optional<EpilogueStage> stage_of(const Program& program, int i, int value) {
  const Instruction& instruction = program.instructions[i];
  const Instruction& source = program.instructions[value];
  if (instruction.dtype != DType::f32 || instruction.shape != source.shape) return std::nullopt;
  if (instruction.op == Op::unary) {
    if (static_cast<UnaryOp>(instruction.sub_op) != UnaryOp::relu) return std::nullopt;
    return EpilogueStage{ConvEpilogue::Kind::relu, true, -1};
  }
  if (instruction.op != Op::binary) return std::nullopt;
  const auto op = static_cast<BinaryOp>(instruction.sub_op);
  if (op != BinaryOp::maximum && op != BinaryOp::minimum) return std::nullopt;
  const bool value_first = instruction.inputs[0] == value;
  const int other = instruction.inputs[value_first ? 1 : 0];
  if (other == value) return std::nullopt;  // maximum(x, x)
  const Instruction& bound = program.instructions[other];
  if (!bound.is_leaf() || bound.dtype != DType::f32 || bound.shape.rank() != 0) {
    return std::nullopt;
  }
  const auto kind =
      op == BinaryOp::maximum ? ConvEpilogue::Kind::maximum : ConvEpilogue::Kind::minimum;
  return EpilogueStage{kind, value_first, other};
}

// Who uses each instruction: how many distinct instructions (or program
// outputs), and the last instruction among them (-1: none, when a program
// output has no other use).
struct Uses {
  std::vector<int> count, last;
};

// x * sigmoid(x), as PyTorch exports SiLU (ONNX's Sigmoid and Mul): `value`
// used by exactly a sigmoid and a mul, the sigmoid used only by that mul,
// of the sigmoid and `value` in either order. Returns the mul; the sigmoid
// lives inside the mul's kernel unless `materialized` says otherwise.
std::optional<int> silu_of(const Program& program, const Uses& uses,
                           const std::vector<bool>& materialized, int value) {
  if (uses.count[value] != 2 || uses.last[value] < 0) return std::nullopt;
  const int product = uses.last[value];
  const Instruction& mul = program.instructions[product];
  const Instruction& source = program.instructions[value];
  if (mul.op != Op::binary || static_cast<BinaryOp>(mul.sub_op) != BinaryOp::mul ||
      mul.dtype != DType::f32 || mul.shape != source.shape) {
    return std::nullopt;
  }
  // `value` is an operand of the mul (its last user); the sigmoid is the other.
  const int sigmoid = mul.inputs[0] == value ? mul.inputs[1] : mul.inputs[0];
  if (sigmoid == value) return std::nullopt;  // x * x
  const Instruction& gate = program.instructions[sigmoid];
  if (gate.op != Op::unary || static_cast<UnaryOp>(gate.sub_op) != UnaryOp::sigmoid ||
      gate.inputs[0] != value || gate.dtype != DType::f32 || gate.shape != source.shape ||
      uses.count[sigmoid] != 1 || uses.last[sigmoid] != product || materialized[sigmoid]) {
    return std::nullopt;
  }
  return product;
}

}  // namespace

void fold_conv_epilogues(const Program& program, Fusion& fusion) {
  const int count = static_cast<int>(program.instructions.size());
  Uses uses{std::vector<int>(count, 0), std::vector<int>(count, -1)};
  for (int i = 0; i < count; i++) {
    for (int input : program.instructions[i].inputs) {
      if (uses.last[input] == i) continue;
      uses.count[input]++;
      uses.last[input] = i;
    }
  }
  for (int output : program.outputs) uses.count[output]++;
  // The kernel step that writes each value alone.
  std::vector<int> kernel_of(count, -1);
  for (size_t k = 0; k < fusion.steps.size(); k++) {
    const FusedStep& step = fusion.steps[k];
    if (step.lowering == Lowering::inlined && step.roots.size() == 1) {
      kernel_of[step.roots[0]] = static_cast<int>(k);
    }
  }
  std::vector<bool> folded(fusion.steps.size(), false);
  for (FusedStep& step : fusion.steps) {
    const int conv = step.roots[0];
    if (step.lowering != Lowering::library || program.instructions[conv].op != Op::conv ||
        program.instructions[conv].dtype != DType::f32) {
      continue;
    }
    std::vector<EpilogueStage> stages;
    int value = conv;
    while (static_cast<int>(stages.size()) < ConvEpilogue::kMaxStages) {
      std::optional<EpilogueStage> stage;
      int next = uses.last[value];
      if (uses.count[value] == 1 && next >= 0) {
        stage = stage_of(program, next, value);
      } else if (const std::optional<int> product =
                     silu_of(program, uses, fusion.materialized, value)) {
        stage = EpilogueStage{ConvEpilogue::Kind::silu, true, -1};
        next = *product;
      }
      if (!stage) break;
      stages.push_back(*stage);
      value = next;
      if (kernel_of[value] >= 0 || fusion.materialized[value]) break;
    }
    // The chain must end at a value a kernel writes alone; the values
    // before it live only inside that kernel.
    if (stages.empty() || kernel_of[value] < 0) continue;
    folded[kernel_of[value]] = true;
    fusion.materialized[conv] = false;
    step.epilogue = std::move(stages);
    step.output = value;
  }
  std::vector<FusedStep> kept;
  for (size_t k = 0; k < fusion.steps.size(); k++) {
    if (!folded[k]) kept.push_back(std::move(fusion.steps[k]));
  }
  fusion.steps = std::move(kept);
}

Array evaluate_library_step(const Step& step, const Instruction& instruction,
                            const std::vector<Array>& inputs) {
  if (step.epilogue.empty()) return evaluate_instruction(instruction, inputs);
  ConvEpilogue epilogue;
  for (const EpilogueStage& stage : step.epilogue) {
    ConvEpilogue::Stage& resolved = epilogue.stages[epilogue.count++];
    resolved.kind = stage.kind;
    resolved.value_first = stage.value_first;
    resolved.operand = stage.operand >= 0 ? *inputs[stage.operand].data<float>()
                                          : EpilogueStage::constant_value(stage.operand);
  }
  const bool has_bias = instruction.inputs.size() > 2;
  return ops::conv(inputs[0], inputs[1], has_bias ? &inputs[2] : nullptr,
                   ops::conv_window_from_attrs(instruction.sub_op, instruction.attrs.values),
                   epilogue);
}

}  // namespace lazylua::compiler
