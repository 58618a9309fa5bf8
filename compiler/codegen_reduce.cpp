// codegen_reduce.cpp - reduction and softmax kernels, with their producers
// fused into the reads.
//
// Float reductions (and softmax's max and sum) follow the one float order
// of tensor/kernels/reduce_order.h, as the eager kernels do, so every tier
// gives the same bits: blocks of kFoldBlock values folded in vector lanes
// (ll_sum_f32 ...), block results merged as a binary counter
// (ll_sum_f32_push / _total), in the logical order of the values whatever
// the layout. Column reductions emulate the lanes with rows of
// accumulators. Everything else (integer sums wrap in uint64_t, max/min let
// NaN win, any/all count truth) matches the eager reduce kernel exactly.
#include <algorithm>
#include <bit>

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

  // Float sums and products: the order of the steps changes the bits.
  bool ordered() const { return kind_ == Kind::float_sum || kind_ == Kind::float_product; }
  // C expression: a merged with b (a on the left, as the order says).
  std::string combine(const std::string& a, const std::string& b) const {
    switch (kind_) {
      case Kind::float_sum:
        return fmt::format("(({}) + ({}))", a, b);
      case Kind::float_product:
        return fmt::format("(({}) * ({}))", a, b);
      default:
        return fmt::format("{}({}, {})", op_ == ReduceOp::max ? "LL_MAX" : "LL_MIN", a, b);
    }
  }

  const char* accumulator_type() const {
    switch (kind_) {
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
        return fmt::format("{} += {};\n", acc, v);
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

// The most outputs a float column sum or product folds at once: it keeps
// order lanes (32 f32, 16 f64) and counter levels of rows of them on the
// stack (64 KiB of lanes).
constexpr int64_t kOrderedColumnBlock = 512;
// Lanes of the float order (reduce_order.h's kLanes): 4 vectors of 32 bytes.
int order_lanes(DType dtype) {
  return 4 * 32 / dtype_size(dtype);
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

}  // namespace

int64_t reduce_partial_count(int64_t total) {
  return std::max<int64_t>(1, ceil_div(total, kReduceChunk));
}

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
  // Float folds: a block's result pushed onto the counter of the order.
  auto push = [&](const std::string& index, const std::string& part) {
    return fmt::format("{}_push(level, &depth, {}, {});\n", fold.fold_function(), index, part);
  };
  const std::string counter = fmt::format("{} level[64];\nint depth = 0;\n", element_type);
  const std::string counted = fmt::format("{}_total(level, depth)", fold.fold_function());

  if (full) {
    collapse({value}, {}, reduced, false);
    if (dims_.empty()) {
      dims_.push_back({1, true, {}});
      loop_variable_.push_back("");
    }
    const int last = static_cast<int>(dims_.size()) - 1;
    const int64_t partials = reduce_partial_count(total);
    std::string bases, row, before, after;
    if (fold.folds_blocks()) {
      // Blocks of kFoldBlock positions in row-major order; a chunk is a
      // power-of-two number of them (a complete subtree of the order).
      static_assert(kReduceChunk % kFoldBlock == 0 &&
                    ((kReduceChunk / kFoldBlock) & (kReduceChunk / kFoldBlock - 1)) == 0);
      const bool direct = last == 0 && direct_along(last);
      before = counter + "int64_t blocks = 0;\n";
      if (direct) {
        loop_variable_[last] = "s0";
        const std::string body = emit_values({value}, &bases);
        row = fmt::format(
            "for (int64_t s0 = x0; s0 < x1; s0 += {0}) {{\n"
            "const int64_t sn = x1 - s0 < {0} ? x1 - s0 : {0};\n",
            kFoldBlock);
        row +=
            push("blocks++", fmt::format("{}(&{}[{}], sn)", fold.fold_function(),
                                         pointer_of(value_node.base, false),
                                         index_of(value_node.offset, fmt::format("b{}", value))));
        row += "}\n";
      } else {
        // Gathered into tmp across the runs of the walk.
        loop_variable_[last] = "(x + s)";
        const std::string body = emit_values({value}, &bases);
        before += "int64_t filled = 0;\n";
        row = fmt::format(
            "for (int64_t x = x0; x < x1;) {{\n"
            "const int64_t m = x1 - x < {0} - filled ? x1 - x : {0} - filled;\n"
            "for (int64_t s = 0; s < m; ++s) {{\n{1}tmp[filled + s] = {2};\n}}\n"
            "filled += m;\nx += m;\n"
            "if (filled == {0}) {{\n",
            kFoldBlock, body, element);
        row += push("blocks++", fmt::format("{}(tmp, {})", fold.fold_function(), kFoldBlock));
        row += "filled = 0;\n}\n}\n";
        after = "if (filled > 0) " +
                push("blocks++", fmt::format("{}(tmp, filled)", fold.fold_function()));
      }
      after += fmt::format("const {} acc = {};\n", acc_type, counted);
    } else {
      before = fmt::format("{} acc = {};\n", acc_type, fold.identity());
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
    code += "for (int64_t it = begin; it < end; ++it) {\n" + before;
    if (total > 0) {
      code += walk(0, last, fmt::format("it * {}", kReduceChunk),
                   fmt::format("(it + 1) * {0} < {1} ? (it + 1) * {0} : {1}", kReduceChunk, total),
                   bases, row);
    }
    code += after;
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
    std::string final_code;
    if (fold.folds_blocks()) {
      final_code = counter + fmt::format("for (int64_t i = 0; i < {}; ++i) {{\n", partials);
      final_code += push("i", fmt::format("{}[i]", partial_in)) + "}\n";
      final_code += fmt::format("const {} acc = {};\n", acc_type, counted);
    } else {
      final_code = fmt::format("{} acc = {};\n", acc_type, fold.identity());
      final_code += fmt::format("for (int64_t i = 0; i < {}; ++i) {{\n", partials);
      final_code += fold.merge_partial("acc", fmt::format("{}[i]", partial_in));
      final_code += "}\n";
    }
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
  // Column reductions: the outputs in blocks of `block`, one block an
  // iteration; `row` computes outputs [x0, x1) in the scratch `scratch`
  // declares.
  const auto emit_column_blocks = [&](const std::string& scratch, int64_t block,
                                      const std::string& row) {
    code = scratch + "for (int64_t it = begin; it < end; ++it) {\n";
    code += walk(0, last_kept, fmt::format("it * {}", block),
                 fmt::format("(it + 1) * {0} < {1} ? (it + 1) * {0} : {1}", block, outputs), bases,
                 row);
    code += "}\n";
    finish(code, ceil_div(outputs, block),
           std::max<int64_t>(1, kGrainElements / (block * std::max<int64_t>(n, 1))), instruction);
  };
  if (columns && fold.ordered() && n > 0) {
    // The float order with whole rows at a time (as the eager kernel):
    // row k of a block goes into lane row k % lanes, the lane rows merge
    // as ll_sum_f32's vectors do (empty lanes skipped: exact), block rows
    // merge by the counter.
    loop_variable_[reduce_dim] = "k";
    const int lanes = order_lanes(fold.element());
    const int width = lanes / 4;
    const int64_t block =
        std::clamp<int64_t>(ceil_div(ceil_div(outputs, 4), 64) * 64, 64, kOrderedColumnBlock);
    const int levels = std::bit_width(static_cast<uint64_t>(ceil_div(n, kFoldBlock))) + 1;
    const std::string body = emit_values({value}, &bases);
    bases += fmt::format("const int64_t w = {};\n", base_of(write));
    auto rows = [&](const std::string& target, const std::string& other) {
      return fmt::format("for (int64_t j = 0; j < x1 - x0; ++j) {0}[j] = {1};\n", target,
                         fold.combine(target + "[j]", other + "[j]"));
    };
    std::string row = "int depth = 0;\n";
    row += fmt::format(
        "for (int64_t k0 = 0, b = 0; k0 < {0}; k0 += {1}, ++b) {{\n"
        "const int64_t kn = {0} - k0 < {1} ? {0} - k0 : {1};\n"
        "const int used = kn < {2} ? (int)kn : {2};\n"
        "for (int l = 0; l < used; ++l)\n"
        "for (int64_t j = 0; j < x1 - x0; ++j) lanes[l * {3} + j] = {4};\n"
        "for (int64_t k = k0; k < k0 + kn; ++k) {{\n"
        "{5}* restrict a = lanes + ((k - k0) % {2}) * {3};\n"
        "for (int64_t x = x0; x < x1; ++x) {{\n{6}a[x - x0] = {7};\n}}\n}}\n",
        n, kFoldBlock, lanes, block, fold.identity(), element_type, body,
        fold.combine("a[x - x0]", element));
    row += fmt::format("for (int e = 0; e < {} && e < used; ++e) {{\n", width);
    row += fmt::format("{0}* restrict le = lanes + e * {1};\n", element_type, block);
    row += fmt::format("if ({} + e < used) ", width) +
           rows("le", fmt::format("(lanes + ({} + e) * {})", width, block));
    row += fmt::format("if ({} + e < used) {{\n", 2 * width);
    row +=
        fmt::format("{0}* restrict r = lanes + ({1} + e) * {2};\n", element_type, 2 * width, block);
    row += fmt::format("if ({} + e < used) ", 3 * width) +
           rows("r", fmt::format("(lanes + ({} + e) * {})", 3 * width, block));
    row += rows("le", "r") + "}\n";
    row += "if (e > 0) " + rows("lanes", "le") + "}\n";
    row += fmt::format("{}* part = lanes;\n", element_type);
    row += fmt::format(
        "for (int64_t c = b; c & 1; c >>= 1) {{\n--depth;\n"
        "{0}* restrict lv = level + depth * {1};\n",
        element_type, block);
    row += rows("lv", "part") + "part = lv;\n}\n";
    row += fmt::format(
        "if (part != level + depth * {0})\n"
        "for (int64_t j = 0; j < x1 - x0; ++j) level[depth * {0} + j] = part[j];\n"
        "++depth;\n}}\n",
        block);
    row += fmt::format(
        "for (int d = depth - 2; d >= 0; --d) {{\n{0}* restrict lv = level + d * {1};\n",
        element_type, block);
    row += rows("lv", fmt::format("(level + (d + 1) * {})", block)) + "}\n";
    row += fmt::format("for (int64_t x = x0; x < x1; ++x) {}[{}] = {};\n", out, out_index,
                       fold.finish("level[x - x0]"));
    emit_column_blocks(fmt::format("{0} lanes[{1}];\n{0} level[{2}];\n", element_type,
                                   lanes * block, levels * block),
                       block, row);
    return;
  }
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
    emit_column_blocks(fmt::format("{} acc[{}];\n", acc_type, block), block, row);
    return;
  }

  // Lines: each output folds its reduced elements; floats in blocks of the
  // float order (short lines too: the order, not the length, sets the
  // bits), gathered into tmp unless read straight from memory.
  const int64_t group = std::max<int64_t>(1, kChunk / std::max<int64_t>(n, 1));
  std::string row;
  if (fold.folds_blocks()) {
    const bool direct = direct_along(reduce_dim);
    loop_variable_[reduce_dim] = direct ? "k0" : "(k0 + k)";
    const std::string body = emit_values({value}, &bases);
    row += counter;
    row += fmt::format(
        "for (int64_t k0 = 0, b = 0; k0 < {0}; k0 += {1}, ++b) {{\n"
        "const int64_t kn = {0} - k0 < {1} ? {0} - k0 : {1};\n",
        n, kFoldBlock);
    if (direct) {
      row += push("b", fmt::format("{}(&{}[{}], kn)", fold.fold_function(),
                                   pointer_of(value_node.base, false),
                                   index_of(value_node.offset, fmt::format("b{}", value))));
    } else {
      row += "for (int64_t k = 0; k < kn; ++k) {\n" + body + "tmp[k] = " + element + ";\n}\n";
      row += push("b", fold.fold_function() + "(tmp, kn)");
    }
    row += "}\n";
    row += fmt::format("const {} acc = {};\n", acc_type, counted);
  } else {
    row += fmt::format("{} acc = {};\n", acc_type, fold.identity());
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
