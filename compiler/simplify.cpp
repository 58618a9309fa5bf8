// simplify.cpp - algebraic simplification as a table of rules: for each op,
// the rules that may replace an instruction of that op, tried in order. A
// rule returns the new program's instruction that holds the same value, or
// nothing; it may append one instruction (the Rewriter drops a rewrite that
// appends more, so no rule grows a program).
#include "compiler/simplify.h"

#include <cmath>

#include "compiler/rewriter.h"

namespace lazylua::compiler {
namespace {

using RuleResult = std::optional<int>;

// ---- Building replacements ----

int emit(Rewriter& rewriter, Op op, uint8_t sub_op, DType dtype, const Shape& shape,
         std::vector<int> inputs, const Attrs& attrs, SourceLocation location) {
  Instruction instruction;
  instruction.op = op;
  instruction.sub_op = sub_op;
  instruction.dtype = dtype;
  instruction.shape = shape;
  instruction.inputs = std::move(inputs);
  instruction.attrs = attrs;
  instruction.location = location;
  return rewriter.emit(std::move(instruction));
}

int reshaped(Rewriter& rewriter, int value, const Shape& shape, SourceLocation location) {
  const Instruction& source = rewriter.at(value);
  if (source.shape == shape) return value;
  return emit(rewriter, Op::reshape, 0, source.dtype, shape, {value}, {}, location);
}

// `value` cast to `dtype` and broadcast to `shape`, each only if needed.
// The caller knows that value's shape broadcasts to `shape`.
int converted(Rewriter& rewriter, int value, DType dtype, const Shape& shape,
              SourceLocation location) {
  if (rewriter.at(value).dtype != dtype) {
    value = emit(rewriter, Op::cast, 0, dtype, rewriter.at(value).shape, {value}, {}, location);
  }
  if (rewriter.at(value).shape != shape) {
    value = emit(rewriter, Op::expand, 0, dtype, shape, {value}, {}, location);
  }
  return value;
}

int converted_like(Rewriter& rewriter, int value, const Instruction& instruction) {
  return converted(rewriter, value, instruction.dtype, instruction.shape, instruction.location);
}

bool is_view(Op op) {
  return op == Op::reshape || op == Op::permute || op == Op::slice || op == Op::select ||
         op == Op::expand;
}

// The value of a constant seen through views (expand(constant) ...).
std::optional<Array> constant_through_views(const Rewriter& rewriter, int index) {
  for (;;) {
    const Instruction& instruction = rewriter.at(index);
    if (instruction.op == Op::constant) return constant_element(instruction);
    if (!is_view(instruction.op)) return std::nullopt;
    index = instruction.inputs[0];
  }
}

double as_double(const Array& element) {
  return ops::cast(element, DType::f64).data<double>()[0];
}

// ---- Binary ops with a constant operand: the rules are data ----

enum class Side : uint8_t { left, right, either };

// When a rule is exact, given the compute dtype, the dtype of the other
// operand x and the constant c converted to the compute dtype.
enum class Exact : uint8_t {
  always,
  integer,         // integer or bool compute only
  adds_zero,       // x + c: -0 + (+0) is +0, so floats need c = -0 or an x that is never -0
  subtracts_zero,  // x - c: x - (-0) is x + 0
};

bool is_exact(Exact exact, DType compute, DType x_dtype, double constant) {
  const bool integer = !is_floating(compute);
  const bool x_never_negative_zero = !is_floating(x_dtype);
  switch (exact) {
    case Exact::always:
      return true;
    case Exact::integer:
      return integer;
    case Exact::adds_zero:
      return integer || x_never_negative_zero || std::signbit(constant);
    case Exact::subtracts_zero:
      return integer || x_never_negative_zero || !std::signbit(constant);
  }
  return false;
}

// op(x, c) is x (cast to the result dtype, broadcast to the result shape)
// when c, in the compute dtype, equals `constant`.
struct IdentityRule {
  BinaryOp op;
  Side constant_side;
  double constant;
  Exact exact;
};
const IdentityRule kIdentityRules[] = {
    {BinaryOp::mul, Side::either, 1, Exact::always},          // NaN*1, -0*1 keep their bits
    {BinaryOp::div, Side::right, 1, Exact::always},           // x/1 is exact in IEEE
    {BinaryOp::add, Side::either, 0, Exact::adds_zero},       //
    {BinaryOp::sub, Side::right, 0, Exact::subtracts_zero},   //
    {BinaryOp::floordiv, Side::right, 1, Exact::integer},     // floats: floor(x/1) is not x
    {BinaryOp::pow, Side::right, 1, Exact::integer},          // floats: pow takes shortcuts
    {BinaryOp::logical_and, Side::either, 1, Exact::always},  // = (x != 0) = cast(x, bool)
    {BinaryOp::logical_or, Side::either, 0, Exact::always},   //
    {BinaryOp::logical_xor, Side::either, 0, Exact::always},  //
};

// op(x, c) is `result` everywhere when c, in the compute dtype, equals
// `constant`.
struct AbsorbingRule {
  BinaryOp op;
  Side constant_side;
  double constant;
  double result;
  Exact exact;
};
const AbsorbingRule kAbsorbingRules[] = {
    {BinaryOp::mul, Side::either, 0, 0, Exact::integer},  // floats: NaN*0 = NaN, -1*0 = -0
    {BinaryOp::mod, Side::right, 1, 0, Exact::integer},   // floats: 0.5 % 1 = 0.5
    {BinaryOp::pow, Side::right, 0, 1, Exact::always},    // pow(NaN, 0) = 1 too
    {BinaryOp::logical_and, Side::either, 0, 0, Exact::always},
    {BinaryOp::logical_or, Side::either, 1, 1, Exact::always},
};

// A binary instruction whose operand on one side is a constant.
struct ConstantOperand {
  int constant;   // the constant operand (possibly expanded)
  int other;      // the other operand
  double value;   // the constant converted to the compute dtype
  DType compute;  // the dtype the op computes in
};

std::optional<ConstantOperand> constant_operand(const Rewriter& rewriter,
                                                const Instruction& instruction, int side) {
  const std::optional<Array> element = constant_through_views(rewriter, instruction.inputs[side]);
  if (!element) return std::nullopt;
  const auto op = static_cast<BinaryOp>(instruction.sub_op);
  const DType promoted =
      promote(rewriter.at(instruction.inputs[0]).dtype, rewriter.at(instruction.inputs[1]).dtype);
  const DType compute = ops::binary_compute_dtype(op, promoted);
  return ConstantOperand{instruction.inputs[side], instruction.inputs[1 - side],
                         as_double(ops::cast(*element, compute)), compute};
}

// The constant operands of `instruction` allowed by `side` (right first).
std::vector<ConstantOperand> constant_operands(const Rewriter& rewriter,
                                               const Instruction& instruction, Side side) {
  std::vector<ConstantOperand> found;
  for (int k : {1, 0}) {
    if (side == Side::left && k == 1) continue;
    if (side == Side::right && k == 0) continue;
    if (auto operand = constant_operand(rewriter, instruction, k)) found.push_back(*operand);
  }
  return found;
}

RuleResult drop_identity_operand(Rewriter& rewriter, const Instruction& instruction) {
  for (const IdentityRule& rule : kIdentityRules) {
    if (static_cast<uint8_t>(rule.op) != instruction.sub_op) continue;
    for (const ConstantOperand& operand :
         constant_operands(rewriter, instruction, rule.constant_side)) {
      if (operand.value != rule.constant) continue;
      if (!is_exact(rule.exact, operand.compute, rewriter.at(operand.other).dtype, operand.value)) {
        continue;
      }
      return converted_like(rewriter, operand.other, instruction);
    }
  }
  return std::nullopt;
}

RuleResult absorb(Rewriter& rewriter, const Instruction& instruction) {
  for (const AbsorbingRule& rule : kAbsorbingRules) {
    if (static_cast<uint8_t>(rule.op) != instruction.sub_op) continue;
    for (const ConstantOperand& operand :
         constant_operands(rewriter, instruction, rule.constant_side)) {
      if (operand.value != rule.constant) continue;
      if (!is_exact(rule.exact, operand.compute, rewriter.at(operand.other).dtype, operand.value)) {
        continue;
      }
      const Array result = ops::full(
          Shape{}, ops::Scalar::from_integer(static_cast<int64_t>(rule.result)), instruction.dtype);
      // The constant operand itself when it already holds the result.
      const Instruction& constant = rewriter.at(operand.constant);
      const bool reusable =
          constant.dtype == instruction.dtype &&
          element_bits(*constant_through_views(rewriter, operand.constant)) == element_bits(result);
      const int value =
          reusable ? operand.constant : rewriter.constant(result, instruction.location);
      return converted_like(rewriter, value, instruction);
    }
  }
  return std::nullopt;
}

// 0 - x = -x for integers. Not for floats: +0 - (+0) is +0, and while
// -0 - x is -x in value, neg flips the sign bit of a NaN and subtraction
// does not.
RuleResult negate_from_zero(Rewriter& rewriter, const Instruction& instruction) {
  if (instruction.sub_op != static_cast<uint8_t>(BinaryOp::sub)) return std::nullopt;
  const std::optional<ConstantOperand> operand = constant_operand(rewriter, instruction, 0);
  if (!operand || operand->value != 0 || is_floating(operand->compute)) return std::nullopt;
  const Shape shape = rewriter.at(operand->other).shape;  // a copy: emitting moves instructions
  const int x = converted(rewriter, operand->other, operand->compute, shape, instruction.location);
  const int negated = emit(rewriter, Op::unary, static_cast<uint8_t>(UnaryOp::neg),
                           operand->compute, shape, {x}, {}, instruction.location);
  return converted_like(rewriter, negated, instruction);
}

// ---- Unary ops and casts ----

// --x = x, not not x = (x != 0).
RuleResult cancel_involution(Rewriter& rewriter, const Instruction& instruction) {
  const auto op = static_cast<UnaryOp>(instruction.sub_op);
  if (traits(op).algebra != OpAlgebra::involution) return std::nullopt;
  const Instruction& inner = rewriter.at(instruction.inputs[0]);
  if (inner.op != Op::unary || inner.sub_op != instruction.sub_op) return std::nullopt;
  return converted_like(rewriter, inner.inputs[0], instruction);
}

// f(f(x)) = f(x).
RuleResult collapse_idempotent(Rewriter& rewriter, const Instruction& instruction) {
  const auto op = static_cast<UnaryOp>(instruction.sub_op);
  if (traits(op).algebra != OpAlgebra::idempotent) return std::nullopt;
  const Instruction& inner = rewriter.at(instruction.inputs[0]);
  if (inner.op != Op::unary || inner.sub_op != instruction.sub_op) return std::nullopt;
  return converted_like(rewriter, instruction.inputs[0], instruction);
}

// Whether every value of `from` is exactly a value of `to`.
bool holds_every_value(DType from, DType to) {
  if (from == to || from == DType::boolean) return true;
  if (from == DType::i32) return to == DType::i64 || to == DType::f64;
  return from == DType::f32 && to == DType::f64;
}

// cast to x's own dtype = x; cast(cast(x, wider), t) = cast(x, t): the
// conversions depend only on the value.
RuleResult simplify_cast(Rewriter& rewriter, const Instruction& instruction) {
  const Instruction& input = rewriter.at(instruction.inputs[0]);
  if (input.dtype == instruction.dtype) return instruction.inputs[0];
  if (input.op != Op::cast || !holds_every_value(rewriter.at(input.inputs[0]).dtype, input.dtype)) {
    return std::nullopt;
  }
  return converted_like(rewriter, input.inputs[0], instruction);
}

// ---- Views ----

// reshape to the same shape = x; reshape(reshape(x)) = reshape(x).
RuleResult simplify_reshape(Rewriter& rewriter, const Instruction& instruction) {
  const Instruction& input = rewriter.at(instruction.inputs[0]);
  if (input.shape == instruction.shape) return instruction.inputs[0];
  if (input.op != Op::reshape) return std::nullopt;
  return reshaped(rewriter, input.inputs[0], instruction.shape, instruction.location);
}

// expand to the same shape = x; expand(expand(x)) = expand(x).
RuleResult simplify_expand(Rewriter& rewriter, const Instruction& instruction) {
  const Instruction& input = rewriter.at(instruction.inputs[0]);
  if (input.shape == instruction.shape) return instruction.inputs[0];
  if (input.op != Op::expand) return std::nullopt;
  return converted_like(rewriter, input.inputs[0], instruction);
}

// The identity order = x; permute(permute(x, p), q) = permute(x, p∘q).
RuleResult simplify_permute(Rewriter& rewriter, const Instruction& instruction) {
  const int rank = instruction.shape.rank();
  auto is_identity = [rank](const int64_t* order) {
    for (int i = 0; i < rank; i++) {
      if (order[i] != i) return false;
    }
    return true;
  };
  const int64_t* outer = instruction.attrs.values;
  if (is_identity(outer)) return instruction.inputs[0];
  const Instruction& input = rewriter.at(instruction.inputs[0]);
  if (input.op != Op::permute) return std::nullopt;
  // Output dim i is the inner permute's dim outer[i], which is x's dim
  // inner[outer[i]].
  Attrs order;
  for (int i = 0; i < rank; i++) order.values[i] = input.attrs.values[outer[i]];
  if (is_identity(order.values)) return input.inputs[0];
  return emit(rewriter, Op::permute, 0, instruction.dtype, instruction.shape, {input.inputs[0]},
              order, instruction.location);
}

// A slice of the whole extent = x; slice(slice(x)) along one dim = one slice.
RuleResult simplify_slice(Rewriter& rewriter, const Instruction& instruction) {
  const int64_t dim = instruction.attrs.values[0];
  const int64_t start = instruction.attrs.values[1];
  const int64_t length = instruction.attrs.values[2];
  const Instruction& input = rewriter.at(instruction.inputs[0]);
  if (start == 0 && length == input.shape[static_cast<int>(dim)]) return instruction.inputs[0];
  if (input.op != Op::slice || input.attrs.values[0] != dim) return std::nullopt;
  return emit(rewriter, Op::slice, 0, instruction.dtype, instruction.shape, {input.inputs[0]},
              Attrs{dim, input.attrs.values[1] + start, length}, instruction.location);
}

// ---- Reductions of copies ----

// max/min/any/all of n >= 1 equal values is that value (any/all: its
// truth). sum and prod of a single value x are exact as 0 + x and 1 * x,
// except a float sum (0 + -0 = +0). mean never: (0 + -0) / 1 = +0, and a
// float sum of n copies is not n*x.
RuleResult reduce_over_copies(Rewriter& rewriter, const Instruction& instruction) {
  const auto op = static_cast<ReduceOp>(instruction.sub_op);
  const int dim = static_cast<int>(instruction.attrs.values[0]);
  const bool keepdim = instruction.attrs.values[1] != 0;
  const int input = instruction.inputs[0];
  const Instruction& reduced = rewriter.at(input);
  const bool idempotent =
      op == ReduceOp::max || op == ReduceOp::min || op == ReduceOp::any || op == ReduceOp::all;
  const bool single_is_exact =
      idempotent || op == ReduceOp::prod || (op == ReduceOp::sum && !is_floating(reduced.dtype));
  const int64_t copies = dim < 0 ? numel(reduced.shape) : reduced.shape[dim];
  if (copies == 1 && single_is_exact) {
    const int value = reshaped(rewriter, input, instruction.shape, instruction.location);
    return converted_like(rewriter, value, instruction);
  }
  if (!idempotent || copies < 1 || reduced.op != Op::expand) return std::nullopt;
  const int source = reduced.inputs[0];
  const Instruction& x = rewriter.at(source);
  if (dim < 0) {
    // Reduce x instead: the same values, visited in another order, which
    // decides the result only for float max/min (max(+0, -0) is the later).
    const bool order_free = op == ReduceOp::any || op == ReduceOp::all || !is_floating(x.dtype);
    if (!order_free || numel(x.shape) < 1) return std::nullopt;
    if (keepdim && x.shape.rank() != reduced.shape.rank()) return std::nullopt;
    Instruction smaller = instruction;
    smaller.inputs = {source};
    return rewriter.emit(std::move(smaller));
  }
  // The reduced dim must be one the expand broadcast: new, or extent 1 in x.
  const int lead = reduced.shape.rank() - x.shape.rank();
  if (dim >= lead && x.shape[dim - lead] != 1) return std::nullopt;
  int value = source;
  if (dim >= lead && !keepdim) {
    Shape dropped = x.shape;
    dropped.erase(dim - lead);
    value = reshaped(rewriter, source, dropped, instruction.location);
  }
  return converted_like(rewriter, value, instruction);
}

// ---- where ----

// where(c, x, x) = x; where(constant, a, b) = a or b.
RuleResult simplify_where(Rewriter& rewriter, const Instruction& instruction) {
  const int a = instruction.inputs[1];
  const int b = instruction.inputs[2];
  if (a == b) return converted_like(rewriter, a, instruction);
  const std::optional<Array> condition = constant_through_views(rewriter, instruction.inputs[0]);
  if (!condition) return std::nullopt;
  const bool truth = as_double(ops::cast(*condition, DType::boolean)) != 0;
  return converted_like(rewriter, truth ? a : b, instruction);
}

// ---- The table ----

struct Rule {
  Op op;
  RuleResult (*apply)(Rewriter&, const Instruction&);
};
const Rule kRules[] = {
    {Op::binary, drop_identity_operand},  // x*1, 1*x, x+0, x-0, x/1, x//1, x^1, x and true ...
    {Op::binary, absorb},                 // integer x*0, x%1, x^0, x and false, x or true
    {Op::binary, negate_from_zero},       // 0 - x
    {Op::unary, cancel_involution},       // --x, not not x
    {Op::unary, collapse_idempotent},     // abs(abs(x)), floor(floor(x)) ...
    {Op::cast, simplify_cast},            // same dtype, widening chains
    {Op::reshape, simplify_reshape},      // same shape, chains
    {Op::expand, simplify_expand},        // same shape, chains
    {Op::permute, simplify_permute},      // identity, double transpose
    {Op::slice, simplify_slice},          // whole extent, chains
    {Op::reduce, reduce_over_copies},     // expand-then-reduce, extent-1 reductions
    {Op::where, simplify_where},          // equal branches, constant condition
};

}  // namespace

Program simplify(const Program& program) {
  Rewriter rewriter(program);
  for (int i = 0; i < rewriter.source_size(); i++) {
    bool replaced = false;
    if (!program.instructions[i].is_leaf()) {
      const Instruction instruction = rewriter.renamed(i);
      for (const Rule& rule : kRules) {
        if (rule.op != instruction.op) continue;
        const int mark = rewriter.size();
        if (rewriter.accept(i, mark, rule.apply(rewriter, instruction))) {
          replaced = true;
          break;
        }
      }
    }
    if (!replaced) rewriter.copy(i);
  }
  return rewriter.finish();
}

}  // namespace lazylua::compiler
