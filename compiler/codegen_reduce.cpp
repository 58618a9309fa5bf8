// codegen_reduce.cpp - reduction and softmax kernels, with their producers
// fused into the reads.
//
// Float sums fold blocks of kFoldBlock values in 32 vector lanes
// (ll_sum_f32, kernel_math.h) and add the block sums in double: error ~ 32 ulp-sized
// steps per block instead of n, well inside eager's pairwise bound. Column
// sums of f32 accumulate in double directly. Everything else (integer sums
// wrap in uint64_t, max/min let NaN win, any/all count truth) matches the
// eager reduce kernel exactly.
#include <algorithm>

#include "compiler/codegen_c.h"
#include "compiler/codegen_writer.h"

namespace lazylua::compiler {
namespace {

// How one reduction op folds values of one dtype.
class Reduction {
 public:
  Reduction(ReduceOp op, DType input, DType output, int64_t count)
      : op_(op), input_(input), output_(output), count_(count) {
    const bool floating = is_floating(element());
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::mean:
        kind_ = floating ? Kind::float_sum : Kind::integer_sum;
        break;
      case ReduceOp::prod:
        kind_ = floating ? Kind::float_product : Kind::integer_product;
        break;
      case ReduceOp::max:
      case ReduceOp::min:
        if (input == DType::boolean) {
          kind_ = op == ReduceOp::max ? Kind::any : Kind::all;
        } else {
          kind_ = floating ? Kind::float_extreme : Kind::integer_extreme;
        }
        break;
      case ReduceOp::any:
        kind_ = Kind::any;
        break;
      case ReduceOp::all:
        kind_ = Kind::all;
        break;
    }
  }

  // The dtype of the values folded: mean converts ints to its float
  // output first, any/all fold truth values, the others the input.
  DType element() const {
    if (op_ == ReduceOp::mean) return output_;
    if (op_ == ReduceOp::any || op_ == ReduceOp::all) return DType::boolean;
    return input_;
  }
  std::string element_of(DType dtype, const std::string& v) const {
    return c_convert(dtype, element(), v);
  }

  // Float reductions fold blocks with a vectorized ll_ fold (kernel_math.h).
  bool folds_blocks() const {
    return kind_ == Kind::float_sum || kind_ == Kind::float_product || kind_ == Kind::float_extreme;
  }
  std::string fold_function() const {
    const char* name = kind_ == Kind::float_sum       ? "sum"
                       : kind_ == Kind::float_product ? "prod"
                       : op_ == ReduceOp::max         ? "max"
                                                      : "min";
    return fmt::format("ll_{}_{}", name, dtype_name(element()));
  }

  const char* accumulator_type() const {
    switch (kind_) {
      case Kind::float_sum:
        return "double";
      case Kind::integer_sum:
      case Kind::integer_product:
        return "uint64_t";
      case Kind::any:
      case Kind::all:
        return "uint8_t";
      default:
        return c_type(element());
    }
  }
  DType partial_dtype() const {
    switch (kind_) {
      case Kind::float_sum:
        return DType::f64;
      case Kind::integer_sum:
      case Kind::integer_product:
        return DType::i64;
      case Kind::any:
      case Kind::all:
        return DType::boolean;
      default:
        return element();
    }
  }
  std::string identity() const {
    const bool is_max = op_ == ReduceOp::max;
    switch (kind_) {
      case Kind::float_sum:
      case Kind::integer_sum:
      case Kind::any:
        return "0";
      case Kind::float_product:
      case Kind::integer_product:
      case Kind::all:
        return "1";
      case Kind::float_extreme:
        return fmt::format("({}(({})INFINITY))", is_max ? "-" : "", c_type(element()));
      case Kind::integer_extreme:
        if (element() == DType::i32) return is_max ? "INT32_MIN" : "INT32_MAX";
        return is_max ? "INT64_MIN" : "INT64_MAX";
    }
    return "0";
  }

  // `acc` updated with one value `v` of the element dtype.
  std::string merge(const std::string& acc, const std::string& v) const {
    switch (kind_) {
      case Kind::float_sum:
        return fmt::format("{} += (double)({});\n", acc, v);
      case Kind::integer_sum:
        return fmt::format("{} += (uint64_t)(int64_t)({});\n", acc, v);
      case Kind::float_product:
        return fmt::format("{} *= {};\n", acc, v);
      case Kind::integer_product:
        return fmt::format("{} *= (uint64_t)(int64_t)({});\n", acc, v);
      case Kind::float_extreme:
        return fmt::format("{0} = {2}({0}, {1});\n", acc, v,
                           op_ == ReduceOp::max ? "LL_MAX" : "LL_MIN");
      case Kind::integer_extreme:
        return fmt::format("{0} = {1} {2} {0} ? {1} : {0};\n", acc, v,
                           op_ == ReduceOp::max ? ">" : "<");
      case Kind::any:
        return fmt::format("{} |= {};\n", acc, v);
      case Kind::all:
        return fmt::format("{} &= {};\n", acc, v);
    }
    return "";
  }
  // `acc` updated with another accumulator (a fold of a block, a partial).
  std::string merge_partial(const std::string& acc, const std::string& partial) const {
    switch (kind_) {
      case Kind::float_sum:
        return fmt::format("{} += (double)({});\n", acc, partial);
      case Kind::integer_sum:
        return fmt::format("{} += (uint64_t)({});\n", acc, partial);
      case Kind::integer_product:
        return fmt::format("{} *= (uint64_t)({});\n", acc, partial);
      default:
        return merge(acc, partial);
    }
  }
  std::string finish(const std::string& acc) const {
    if (op_ == ReduceOp::mean) {
      return fmt::format("({})({} / (double){})", c_type(output_), acc, count_);
    }
    return fmt::format("({})({})", c_type(output_), acc);
  }

 private:
  enum class Kind {
    float_sum,
    integer_sum,
    float_product,
    integer_product,
    float_extreme,
    integer_extreme,
    any,
    all
  };
  ReduceOp op_;
  DType input_, output_;
  int64_t count_;
  Kind kind_ = Kind::any;
};

// Lines shorter than this are folded value by value.
constexpr int64_t kShortLine = 64;

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

}  // namespace

void KernelWriter::reduce(int instruction) {
  const Instruction& reduction = program_.instructions[instruction];
  const int input = reduction.inputs[0];
  const Instruction& source = program_.instructions[input];
  const Shape& shape = source.shape;
  const int64_t outputs = numel(reduction.shape);
  if (outputs == 0) return nothing({instruction});
  const auto op = static_cast<ReduceOp>(reduction.sub_op);
  const int64_t dim = reduction.attrs.values[0];
  const bool full = dim < 0 || shape.rank() == 0;
  const int64_t total = numel(shape);
  const int64_t count = full ? total : shape[static_cast<int>(dim)];
  const Reduction fold(op, source.dtype, reduction.dtype, count);
  const char* acc_type = fold.accumulator_type();
  const char* element_type = c_type(fold.element());

  start(shape);
  const int value = graph_->value(input, identity_map(shape));
  const DType value_dtype = graph_->node(value).dtype;
  const std::string element = fold.element_of(value_dtype, fmt::format("v{}", value));
  // The value read straight from memory, contiguous along the fold: the
  // folds read the slot itself instead of a copy in `tmp`.
  const KernelNode& value_node = graph_->node(value);
  auto direct_along = [&](int g) {
    return value_node.kind == KernelNode::Kind::read && !value_node.invariant &&
           value_dtype == fold.element() && coefficient(value_node.offset, g) == 1;
  };

  std::vector<bool> reduced(shape.rank(), full);
  if (!full) reduced[dim] = true;
  // Where the output element goes: the kept dims of the input, contiguous.
  Affine write{0, std::vector<int64_t>(shape.rank(), 0)};
  if (!full) {
    Shape kept = shape;
    kept.erase(static_cast<int>(dim));
    const Strides strides = contiguous_strides(kept);
    for (int d = 0, k = 0; d < shape.rank(); d++) {
      if (d == dim) continue;
      write.coef[d] = shape[d] == 1 ? 0 : strides[k];
      k++;
    }
  }
  std::string declarations;
  if (fold.folds_blocks()) declarations = fmt::format("{} tmp[{}];\n", element_type, kFoldBlock);

  if (full) {
    collapse({value}, {}, reduced, false);
    if (dims_.empty()) {
      dims_.push_back({1, true, {}});
      loop_variable_.push_back("");
    }
    const int last = static_cast<int>(dims_.size()) - 1;
    const int64_t partials = std::max<int64_t>(1, ceil_div(total, kReduceChunk));
    std::string bases, row;
    if (fold.folds_blocks()) {
      const bool direct = direct_along(last);
      loop_variable_[last] = direct ? "s0" : "(s0 + s)";
      const std::string body = emit_values({value}, &bases);
      row = fmt::format(
          "for (int64_t s0 = x0; s0 < x1; s0 += {0}) {{\n"
          "const int64_t sn = x1 - s0 < {0} ? x1 - s0 : {0};\n",
          kFoldBlock);
      if (direct) {
        row += fold.merge_partial(
            "acc",
            fmt::format("{}(&{}[{}], sn)", fold.fold_function(), pointer_of(value_node.base, false),
                        index_of(value_node.offset, fmt::format("b{}", value))));
      } else {
        row += "for (int64_t s = 0; s < sn; ++s) {\n" + body + "tmp[s] = " + element + ";\n}\n";
        row += fold.merge_partial("acc", fold.fold_function() + "(tmp, sn)");
      }
      row += "}\n";
    } else {
      loop_variable_[last] = "x";
      const std::string body = emit_values({value}, &bases);
      row = "for (int64_t x = x0; x < x1; ++x) {\n" + body + fold.merge("acc", element) + "}\n";
    }
    // With several chunks, each writes a partial and one small kernel then
    // folds them in order (the result does not depend on the threads).
    int partial_slot = -1;
    if (partials > 1) {
      partial_slot = static_cast<int>(plan_.slots.size());
      plan_.slots.push_back({fold.partial_dtype(), Shape{partials}, -1, -1});
    }
    const std::string target =
        partials > 1 ? pointer(partial_slot, true) : pointer_of(instruction, true);
    std::string code = declarations;
    code += "for (int64_t it = begin; it < end; ++it) {\n";
    code += fmt::format("{} acc = {};\n", acc_type, fold.identity());
    if (total > 0) {
      code += walk(0, last, fmt::format("it * {}", kReduceChunk),
                   fmt::format("(it + 1) * {0} < {1} ? (it + 1) * {0} : {1}", kReduceChunk, total),
                   bases, row);
    }
    if (partials == 1) {
      code += fmt::format("{}[0] = {};\n}}\n", target, fold.finish("acc"));
      finish(code, 1, 1, instruction);
      return;
    }
    code += fmt::format("{}[it] = ({})acc;\n}}\n", target, c_type(fold.partial_dtype()));
    finish(code, partials, 1, instruction);
    start(Shape{});
    const std::string partial_in = pointer(partial_slot, false);
    const std::string final_out = pointer_of(instruction, true);
    std::string final_code = fmt::format("{} acc = {};\n", acc_type, fold.identity());
    final_code += fmt::format("for (int64_t i = 0; i < {}; ++i) {{\n", partials);
    final_code += fold.merge_partial("acc", fmt::format("{}[i]", partial_in));
    final_code += "}\n";
    final_code += fmt::format("{}[0] = {};\n", final_out, fold.finish("acc"));
    finish(final_code, 1, 1, instruction);
    return;
  }

  collapse({value}, {write}, reduced, true);
  // Kept dims first (in order), the reduced one last.
  std::stable_partition(dims_.begin(), dims_.end(), [](const LoopDim& d) { return !d.reduced; });
  if (dims_.size() == 1) dims_.insert(dims_.begin(), {1, false, {}});
  loop_variable_.assign(dims_.size(), "");
  const int reduce_dim = static_cast<int>(dims_.size()) - 1;
  const int last_kept = reduce_dim - 1;
  loop_variable_[last_kept] = "x";
  const int64_t n = dims_[reduce_dim].extent;

  // Columns when neighbouring outputs are neighbours in memory and the
  // reduced elements are not.
  bool columns = false, contiguous_reduce = false;
  for (size_t id = 0; id < graph_->nodes().size(); id++) {
    const KernelNode& node = graph_->node(static_cast<int>(id));
    if (node.kind != KernelNode::Kind::read || node.invariant) continue;
    columns = columns || coefficient(node.offset, last_kept) == 1;
    contiguous_reduce = contiguous_reduce || coefficient(node.offset, reduce_dim) == 1;
  }
  columns = columns && !contiguous_reduce && dims_[last_kept].extent > 1;

  std::string bases, code = declarations;
  const std::string out = pointer_of(instruction, true);
  const std::string out_index = index_of(write, "w");
  if (columns) {
    loop_variable_[reduce_dim] = "k";
    const int64_t block =
        std::clamp<int64_t>(ceil_div(ceil_div(outputs, 4), 64) * 64, 64, kColumnBlock);
    const std::string body = emit_values({value}, &bases);
    bases += fmt::format("const int64_t w = {};\n", base_of(write));
    std::string row;
    row += fmt::format("for (int64_t x = x0; x < x1; ++x) acc[x - x0] = {};\n", fold.identity());
    row += fmt::format("for (int64_t k = 0; k < {}; ++k) {{\n", n);
    row += "for (int64_t x = x0; x < x1; ++x) {\n" + body + fold.merge("acc[x - x0]", element);
    row += "}\n}\n";
    row += fmt::format("for (int64_t x = x0; x < x1; ++x) {}[{}] = {};\n", out, out_index,
                       fold.finish("acc[x - x0]"));
    // One block of outputs per iteration: a run of the walk fits `acc`.
    code = fmt::format("{} acc[{}];\n", acc_type, block);
    code += "for (int64_t it = begin; it < end; ++it) {\n";
    code += walk(0, last_kept, fmt::format("it * {}", block),
                 fmt::format("(it + 1) * {0} < {1} ? (it + 1) * {0} : {1}", block, outputs), bases,
                 row);
    code += "}\n";
    finish(code, ceil_div(outputs, block),
           std::max<int64_t>(1, kGrainElements / (block * std::max<int64_t>(n, 1))), instruction);
    return;
  }

  // Lines: each output folds its reduced elements; short lines one by one
  // (a vector fold of a few values costs more than it saves).
  const int64_t group = std::max<int64_t>(1, kChunk / std::max<int64_t>(n, 1));
  std::string row = fmt::format("{} acc = {};\n", acc_type, fold.identity());
  if (fold.folds_blocks() && n >= kShortLine) {
    const bool direct = direct_along(reduce_dim);
    loop_variable_[reduce_dim] = direct ? "k0" : "(k0 + k)";
    const std::string body = emit_values({value}, &bases);
    row += fmt::format(
        "for (int64_t k0 = 0; k0 < {0}; k0 += {1}) {{\n"
        "const int64_t kn = {0} - k0 < {1} ? {0} - k0 : {1};\n",
        n, kFoldBlock);
    if (direct) {
      row += fold.merge_partial(
          "acc",
          fmt::format("{}(&{}[{}], kn)", fold.fold_function(), pointer_of(value_node.base, false),
                      index_of(value_node.offset, fmt::format("b{}", value))));
    } else {
      row += "for (int64_t k = 0; k < kn; ++k) {\n" + body + "tmp[k] = " + element + ";\n}\n";
      row += fold.merge_partial("acc", fold.fold_function() + "(tmp, kn)");
    }
    row += "}\n";
  } else {
    loop_variable_[reduce_dim] = "k";
    const std::string body = emit_values({value}, &bases);
    row += fmt::format("for (int64_t k = 0; k < {}; ++k) {{\n", n);
    row += body + fold.merge("acc", element) + "}\n";
  }
  row += fmt::format("{}[{}] = {};\n", out, out_index, fold.finish("acc"));
  bases += fmt::format("const int64_t w = {};\n", base_of(write));
  row = "for (int64_t x = x0; x < x1; ++x) {\n" + row + "}\n";
  code += walk(0, last_kept, fmt::format("begin * {}", group),
               fmt::format("end * {0} < {1} ? end * {0} : {1}", group, outputs), bases, row);
  finish(code, ceil_div(outputs, group),
         std::max<int64_t>(1, kGrainElements / (group * std::max<int64_t>(n, 1))), instruction);
}

// Softmax over the last dim, one row at a time: the input (with its fused
// producers) is computed into the output row, then the row is folded for
// its max, exponentiated and summed, and scaled, all while it is in cache.
void KernelWriter::softmax(int instruction) {
  const Instruction& softmax = program_.instructions[instruction];
  const int input = softmax.inputs[0];
  const Shape& shape = softmax.shape;
  const int64_t total = numel(shape);
  if (total == 0) return nothing({instruction});
  const bool log = softmax.attrs.values[1] != 0;
  const DType type = softmax.dtype;
  const char* t = c_type(type);
  const char* f = dtype_name(type);

  start(shape);
  const int value = graph_->value(input, identity_map(shape));
  std::vector<bool> reduced(shape.rank(), false);
  reduced[shape.rank() - 1] = true;
  Affine write{0, std::vector<int64_t>(shape.rank(), 0)};
  const Strides strides = contiguous_strides(shape);
  // The row's start: the last dim's coefficient stays 0 (rows are contiguous).
  for (int d = 0; d + 1 < shape.rank(); d++) write.coef[d] = shape[d] == 1 ? 0 : strides[d];
  collapse({value}, {write}, reduced, true);
  if (dims_.size() == 1) dims_.insert(dims_.begin(), {1, false, {}});
  loop_variable_.assign(dims_.size(), "");
  const int row_dim = static_cast<int>(dims_.size()) - 1;
  loop_variable_[row_dim - 1] = "x";
  loop_variable_[row_dim] = "k";
  const int64_t n = dims_[row_dim].extent;
  const int64_t rows = total / n;

  std::string bases;
  const std::string body = emit_values({value}, &bases);
  bases += fmt::format("const int64_t w = {};\n", base_of(write));
  std::string row = "for (int64_t x = x0; x < x1; ++x) {\n";
  row += fmt::format("{}* restrict y = {} + ({});\n", t, pointer_of(instruction, true),
                     index_of(write, "w"));
  // The input row: read in place when it is a contiguous row of memory,
  // else computed (with its fused producers) into the output row first.
  const KernelNode& source = graph_->node(value);
  const bool direct = source.kind == KernelNode::Kind::read && !source.invariant &&
                      source.dtype == type && coefficient(source.offset, row_dim) == 1;
  if (direct) {
    loop_variable_[row_dim] = "0";
    row += fmt::format("const {}* restrict r = &{}[{}];\n", t, pointer_of(source.base, false),
                       index_of(source.offset, fmt::format("b{}", value)));
    loop_variable_[row_dim] = "k";
  } else {
    const std::string x = c_convert(source.dtype, type, fmt::format("v{}", value));
    row += fmt::format("for (int64_t k = 0; k < {}; ++k) {{\n{}y[k] = {};\n}}\n", n, body, x);
    row += fmt::format("const {}* r = y;\n", t);
  }
  // The rest of the row is kernel_math.h's, as the eager kernel's: the same bits.
  row += fmt::format("ll_softmax_row_{}(r, y, {}, {});\n", f, n, log ? 1 : 0);
  row += "}\n";
  const int64_t group = std::max<int64_t>(1, kChunk / n);
  std::string code =
      walk(0, row_dim - 1, fmt::format("begin * {}", group),
           fmt::format("end * {0} < {1} ? end * {0} : {1}", group, rows), bases, row);
  finish(code, ceil_div(rows, group), std::max<int64_t>(1, kGrainElements / (group * n)),
         instruction);
}

}  // namespace lazylua::compiler
