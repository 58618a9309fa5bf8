// fold_constants.cpp - constant folding: tracks the instructions whose every
// element is one known value, and replaces those whose value is 0, -0 or 1.
#include "compiler/fold_constants.h"

#include <cstring>

#include "compiler/rewriter.h"

namespace lazylua::compiler {
namespace {

// Reductions, joins and indexing are evaluated on whole (broadcast) inputs
// only up to this many elements per input and output.
constexpr int64_t kEvaluationLimit = 4096;

// For each instruction of the new program: the 0-d value every one of its
// elements holds, when known at compile time.
using Known = std::vector<std::optional<Array>>;

// Unary and binary ops whose kernels compute every element exactly or
// correctly rounded (IEEE +, -, *, /, sqrt; comparisons; rounding): one
// element evaluated now is what every element gives at run time. The
// transcendental functions use approximations whose scalar and vector code
// may differ in the last bit, and pow takes shortcuts: those are not folded.
// The fold column of elementwise_ops.h.
bool is_exact_unary(UnaryOp op) {
  return traits(op).fold == OpFold::exact;
}

bool is_exact_binary(BinaryOp op) {
  return traits(op).fold == OpFold::exact;
}

// Runs the eager kernel; an Error (an integer division by zero, an index
// out of range) leaves the instruction to fail at run time, as eager would.
std::optional<Array> evaluate_or_nothing(const Instruction& instruction,
                                         const std::vector<Array>& inputs) {
  try {
    return evaluate_instruction(instruction, inputs);
  } catch (const Error&) {
    return std::nullopt;
  }
}

// The element all of `array`'s elements equal bit for bit, if any.
std::optional<Array> uniform_element(const Array& array) {
  if (array.numel() == 0) return std::nullopt;
  const Array dense = contiguous(array);
  const size_t size = static_cast<size_t>(dtype_size(array.dtype));
  const char* bytes = static_cast<const char*>(dense.raw_data());
  for (int64_t i = 1; i < array.numel(); i++) {
    if (std::memcmp(bytes, bytes + static_cast<size_t>(i) * size, size) != 0) return std::nullopt;
  }
  Array element = Array::empty(Shape{}, array.dtype);
  std::memcpy(element.raw_data(), bytes, size);
  return element;
}

// Evaluates an op that is not elementwise on its inputs broadcast to their
// shapes. Only for inputs of 0, -0 and 1: sums, products and means of
// those are exact whatever order a kernel adds in.
std::optional<Array> evaluate_whole(const Instruction& instruction, const Rewriter& rewriter,
                                    const std::vector<Array>& elements) {
  if (numel(instruction.shape) > kEvaluationLimit) return std::nullopt;
  std::vector<Array> inputs;
  for (size_t k = 0; k < elements.size(); k++) {
    const Shape& shape = rewriter.at(instruction.inputs[k]).shape;
    if (numel(shape) > kEvaluationLimit || !is_constant_value(elements[k])) return std::nullopt;
    inputs.push_back(contiguous(ops::expand(elements[k], shape)));
  }
  const std::optional<Array> result = evaluate_or_nothing(instruction, inputs);
  return result ? uniform_element(*result) : std::nullopt;
}

// max/min of n >= 1 copies of a value is the value, any/all its truth.
std::optional<Array> reduce_copies(const Instruction& instruction, const Rewriter& rewriter,
                                   const Array& element) {
  const auto op = static_cast<ReduceOp>(instruction.sub_op);
  const Shape& input_shape = rewriter.at(instruction.inputs[0]).shape;
  const int64_t dim = instruction.attrs.values[0];
  const int64_t copies = dim < 0 ? numel(input_shape) : input_shape[static_cast<int>(dim)];
  if (copies < 1) return std::nullopt;
  if (op == ReduceOp::max || op == ReduceOp::min) return element;
  if (op == ReduceOp::any || op == ReduceOp::all) {
    return ops::reduce(op, element, std::nullopt, false);
  }
  return std::nullopt;
}

std::optional<Array> known_value(const Instruction& instruction, const Rewriter& rewriter,
                                 const Known& known) {
  if (instruction.op == Op::constant) return constant_element(instruction);
  if (instruction.is_leaf()) return std::nullopt;
  std::vector<Array> elements;
  for (int input : instruction.inputs) {
    if (!known[input]) return std::nullopt;
    elements.push_back(*known[input]);
  }
  Instruction one_element = instruction;
  one_element.shape = Shape{};
  switch (instruction.op) {
    case Op::reshape:
    case Op::permute:
    case Op::slice:
    case Op::select:
    case Op::expand:
      return elements[0];
    case Op::unary:
      if (!is_exact_unary(static_cast<UnaryOp>(instruction.sub_op))) return std::nullopt;
      return evaluate_or_nothing(one_element, elements);
    case Op::binary:
      if (!is_exact_binary(static_cast<BinaryOp>(instruction.sub_op))) return std::nullopt;
      return evaluate_or_nothing(one_element, elements);
    case Op::where:
    case Op::cast:
    case Op::clamp:
      return evaluate_or_nothing(one_element, elements);
    case Op::reduce:
      if (auto value = reduce_copies(instruction, rewriter, elements[0])) return value;
      return evaluate_whole(instruction, rewriter, elements);
    case Op::arg_reduce:
    case Op::argsort:
    case Op::cumsum:
    case Op::cat:
    case Op::gather:
    case Op::index_select:
    case Op::slice_update:
    case Op::select_update:
      return evaluate_whole(instruction, rewriter, elements);
    default:
      // softmax and matmul: exp approximations and BLAS summation order.
      return std::nullopt;
  }
}

// The instruction that holds `value` in place of `instruction`: an input
// that already does, the constant, or the constant expanded to the shape.
std::optional<int> folded(Rewriter& rewriter, const Instruction& instruction, const Array& value,
                          const Known& known) {
  if (instruction.shape.rank() == 0) return rewriter.constant(value, instruction.location);
  for (int input : instruction.inputs) {
    const Instruction& candidate = rewriter.at(input);
    if (candidate.dtype == instruction.dtype && candidate.shape == instruction.shape &&
        known[input] && element_bits(*known[input]) == element_bits(value)) {
      return input;
    }
  }
  if (instruction.op == Op::expand && rewriter.at(instruction.inputs[0]).op == Op::constant) {
    return std::nullopt;  // already in folded form
  }
  Instruction expand;
  expand.op = Op::expand;
  expand.dtype = instruction.dtype;
  expand.shape = instruction.shape;
  expand.inputs = {rewriter.constant(value, instruction.location)};
  expand.location = instruction.location;
  return rewriter.emit(std::move(expand));
}

}  // namespace

Program fold_constants(const Program& program) {
  Rewriter rewriter(program);
  Known known;
  for (int i = 0; i < rewriter.source_size(); i++) {
    const int mark = rewriter.size();
    std::optional<Array> value;
    if (program.instructions[i].is_leaf()) {
      rewriter.copy(i);
    } else {
      const Instruction instruction = rewriter.renamed(i);
      value = known_value(instruction, rewriter, known);
      const bool replaced = value && is_constant_value(*value) &&
                            rewriter.accept(i, mark, folded(rewriter, instruction, *value, known));
      if (!replaced) rewriter.copy(i);
    }
    // Knowledge about what this step appended (a copy, or a constant and
    // its expand).
    for (int k = static_cast<int>(known.size()); k < rewriter.size(); k++) {
      const bool is_this = k == rewriter.value_of(i) && !program.instructions[i].is_leaf();
      known.push_back(is_this ? value : known_value(rewriter.at(k), rewriter, known));
    }
  }
  return rewriter.finish();
}

}  // namespace lazylua::compiler
