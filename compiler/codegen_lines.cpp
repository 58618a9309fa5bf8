// codegen_lines.cpp - kernels that walk lines along one dim in order:
// argmax/argmin (the first best position of each line) and cumsum (the
// running sum of each line), with their producers fused into the reads.
//
// Both follow the eager kernels exactly: an arg-reduction keeps the first
// position of the best value, NaN beating everything but an earlier NaN
// (tensor/kernels/reduce.cpp); cumsum accumulates floats in double and
// integers in wrapping uint64_t, element by element in line order
// (tensor/kernels/softmax.cpp). Every line is walked by one thread, so the
// results are the same bits whatever the thread count.
#include <algorithm>

#include "compiler/codegen_c.h"
#include "compiler/codegen_writer.h"

namespace lazylua::compiler {
namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// C expression: `x` beats the best so far `b` (eager's `beats`).
std::string beats(bool is_max, DType dtype, const std::string& x, const std::string& b) {
  const std::string better = fmt::format("({} {} {})", x, is_max ? ">" : "<", b);
  if (!is_floating(dtype)) return better;
  return fmt::format("({0} | (({1} != {1}) & ({2} == {2})))", better, x, b);
}

// The element offsets of a contiguous value of shape `shape` over kernel
// dims of the same rank, skipping `skipped` (-1: none) as a reduced dim.
Affine contiguous_write(const Shape& shape, int skipped) {
  Affine write{0, std::vector<int64_t>(shape.rank(), 0)};
  Shape kept = shape;
  if (skipped >= 0) kept.erase(skipped);
  const Strides strides = contiguous_strides(kept);
  for (int d = 0, k = 0; d < shape.rank(); d++) {
    if (d == skipped) continue;
    write.coef[d] = shape[d] == 1 ? 0 : strides[k];
    k++;
  }
  return write;
}

}  // namespace

// Collapses the kernel's dims around reduced dim `dim` (kept dims first,
// then the reduced one, alone) and names the loop variables: x along the
// last kept dim, `inner` along the reduced one.
void KernelWriter::line_dims(int value, const Affine& write, int dim, const std::string& inner) {
  std::vector<bool> reduced(graph_->dims().rank(), false);
  reduced[dim] = true;
  collapse({value}, {write}, reduced, true);
  std::stable_partition(dims_.begin(), dims_.end(), [](const LoopDim& d) { return !d.reduced; });
  if (dims_.size() == 1) dims_.insert(dims_.begin(), {1, false, {}});
  loop_variable_.assign(dims_.size(), "");
  loop_variable_[dims_.size() - 2] = "x";
  loop_variable_[dims_.size() - 1] = inner;
}

void KernelWriter::arg_reduce(int instruction) {
  const Instruction& arg = program_.instructions[instruction];
  const int input = arg.inputs[0];
  const Shape& shape = program_.instructions[input].shape;
  const int64_t outputs = numel(arg.shape);
  if (outputs == 0) return nothing({instruction});
  const bool is_max = arg.sub_op != 0;
  const int64_t dim = arg.attrs.values[0];
  const bool full = dim < 0 || shape.rank() == 0;
  const DType dtype = program_.instructions[input].dtype;
  const char* t = c_type(dtype);
  start(shape);
  const std::string out = pointer_of(instruction, true);
  const int value = graph_->value(input, identity_map(shape));
  const std::string v = fmt::format("v{}", value);
  std::string bases;
  if (full) {
    // One pass in row-major order: the walk's flat position is the
    // position eager mode reports.
    collapse({value}, {}, std::vector<bool>(shape.rank(), true), false);
    if (dims_.empty()) {
      dims_.push_back({1, true, {}});
      loop_variable_.push_back("");
    }
    const int last = static_cast<int>(dims_.size()) - 1;
    loop_variable_[last] = "x";
    const std::string body = emit_values({value}, &bases);
    std::string row = "for (int64_t x = x0; x < x1; ++x) {\n" + body;
    row += fmt::format("const int better = (f + (x - x0) == 0) | {};\n",
                       beats(is_max, dtype, v, "best"));
    row += fmt::format("best = better ? {} : best;\nat = better ? f + (x - x0) : at;\n}}\n", v);
    std::string code = fmt::format("{} best = 0;\nint64_t at = 0;\n", t);
    code += walk(0, last, "0", fmt::format("{}", numel(shape)), bases, row);
    code += fmt::format("{}[0] = at + 1;\n", out);
    finish(code, 1, 1, instruction);
    return;
  }
  const Affine write = contiguous_write(shape, static_cast<int>(dim));
  line_dims(value, write, static_cast<int>(dim), "k");
  const int reduce_dim = static_cast<int>(dims_.size()) - 1;
  const int64_t n = dims_[reduce_dim].extent;
  const std::string body = emit_values({value}, &bases);
  bases += fmt::format("const int64_t w = {};\n", base_of(write));
  std::string row = "for (int64_t x = x0; x < x1; ++x) {\n";
  row += fmt::format("{} best = 0;\nint64_t at = 0;\n", t);
  row += fmt::format("for (int64_t k = 0; k < {}; ++k) {{\n", n) + body;
  row += fmt::format("const int better = (k == 0) | {};\n", beats(is_max, dtype, v, "best"));
  row += fmt::format("best = better ? {} : best;\nat = better ? k : at;\n}}\n", v);
  row += fmt::format("{}[{}] = at + 1;\n}}\n", out, index_of(write, "w"));
  const int64_t group = std::max<int64_t>(1, kChunk / std::max<int64_t>(n, 1));
  const std::string code =
      walk(0, reduce_dim - 1, fmt::format("begin * {}", group),
           fmt::format("end * {0} < {1} ? end * {0} : {1}", group, outputs), bases, row);
  finish(code, ceil_div(outputs, group),
         std::max<int64_t>(1, kGrainElements / (group * std::max<int64_t>(n, 1))), instruction);
}

void KernelWriter::cumsum(int instruction) {
  const Instruction& sums = program_.instructions[instruction];
  const int input = sums.inputs[0];
  const Shape& shape = sums.shape;
  const int64_t total = numel(shape);
  if (total == 0) return nothing({instruction});
  const DType in_type = program_.instructions[input].dtype, out_type = sums.dtype;
  const bool floating = is_floating(in_type);
  const char* acc_type = floating ? "double" : "uint64_t";
  start(shape);
  const std::string out = pointer_of(instruction, true);
  const int value = graph_->value(input, identity_map(shape));
  const std::string widened =
      floating ? fmt::format("(double)v{}", value) : fmt::format("(uint64_t)(int64_t)v{}", value);
  std::string bases;
  if (shape.rank() == 0) {
    dims_.assign(1, {1, false, {}});
    loop_variable_.assign(1, "");
    const std::string body = emit_values({value}, &bases);
    finish(bases + body +
               fmt::format("{}[0] = {};\n", out,
                           c_convert(in_type, out_type, fmt::format("v{}", value))),
           1, 1, instruction);
    return;
  }
  const int dim = static_cast<int>(sums.attrs.values[0]);
  const Affine write = contiguous_write(shape, -1);
  line_dims(value, write, dim, "k");
  const int reduce_dim = static_cast<int>(dims_.size()) - 1;
  const int last_kept = reduce_dim - 1;
  const int64_t n = dims_[reduce_dim].extent;
  const int64_t lines = total / n;
  const char* out_t = c_type(out_type);
  // Columns (a row of running sums, vectorized along the outputs) when
  // neighbouring lines are neighbours in memory.
  const bool columns = coefficient(write, last_kept) == 1 && dims_[last_kept].extent > 1;
  const std::string body = emit_values({value}, &bases);
  bases += fmt::format("const int64_t w = {};\n", base_of(write));
  const std::string target = fmt::format("{}[{}]", out, index_of(write, "w"));
  if (columns) {
    const int64_t block =
        std::clamp<int64_t>(ceil_div(ceil_div(lines, 4), 64) * 64, 64, kColumnBlock);
    std::string row = "for (int64_t x = x0; x < x1; ++x) acc[x - x0] = 0;\n";
    row += fmt::format("for (int64_t k = 0; k < {}; ++k) {{\n", n);
    row += "for (int64_t x = x0; x < x1; ++x) {\n" + body;
    row +=
        fmt::format("acc[x - x0] += {};\n{} = ({})acc[x - x0];\n}}\n}}\n", widened, target, out_t);
    std::string code = fmt::format("{} acc[{}];\n", acc_type, block);
    code += "for (int64_t it = begin; it < end; ++it) {\n";
    code +=
        walk(0, last_kept, fmt::format("it * {}", block),
             fmt::format("(it + 1) * {0} < {1} ? (it + 1) * {0} : {1}", block, lines), bases, row);
    code += "}\n";
    finish(code, ceil_div(lines, block),
           std::max<int64_t>(1, kGrainElements / (block * std::max<int64_t>(n, 1))), instruction);
    return;
  }
  std::string row = fmt::format("for (int64_t x = x0; x < x1; ++x) {{\n{} acc = 0;\n", acc_type);
  row += fmt::format("for (int64_t k = 0; k < {}; ++k) {{\n", n) + body;
  row += fmt::format("acc += {};\n{} = ({})acc;\n}}\n}}\n", widened, target, out_t);
  const int64_t group = std::max<int64_t>(1, kChunk / n);
  const std::string code =
      walk(0, last_kept, fmt::format("begin * {}", group),
           fmt::format("end * {0} < {1} ? end * {0} : {1}", group, lines), bases, row);
  finish(code, ceil_div(lines, group), std::max<int64_t>(1, kGrainElements / (group * n)),
         instruction);
}

// scatter_add of many terms, one output line (along the dim) at a time:
// the line is set to the base, then each term of the index line is added
// at its position, in order (eager mode's order for every element).
void KernelWriter::scatter(int instruction) {
  const Instruction& scatter = program_.instructions[instruction];
  const Shape& shape = scatter.shape;
  const int64_t total = numel(shape);
  if (total == 0) return nothing({instruction});
  const int dim = static_cast<int>(scatter.attrs.values[0]);
  const DType type = scatter.dtype;
  const int64_t terms = program_.instructions[scatter.inputs[1]].shape[dim];
  start(shape);
  const std::string out = pointer_of(instruction, true);
  const IndexMap identity = identity_map(shape);
  // The same kernel dim runs over the output line (j) and over the index
  // line (k): index and src have the output's extents in the other dims.
  const int base = graph_->value(scatter.inputs[0], identity);
  const int index = graph_->value(scatter.inputs[1], identity);
  const int src = graph_->value(scatter.inputs[2], identity);
  const Affine write = contiguous_write(shape, -1);
  collapse(
      {base, index, src}, {write},
      [&] {
        std::vector<bool> reduced(shape.rank(), false);
        reduced[dim] = true;
        return reduced;
      }(),
      true);
  std::stable_partition(dims_.begin(), dims_.end(), [](const LoopDim& d) { return !d.reduced; });
  if (dims_.size() == 1) dims_.insert(dims_.begin(), {1, false, {}});
  loop_variable_.assign(dims_.size(), "");
  const int line_dim = static_cast<int>(dims_.size()) - 1;
  loop_variable_[line_dim - 1] = "x";
  loop_variable_[line_dim] = "j";
  const int64_t n = dims_[line_dim].extent;
  std::string bases;
  const std::string base_body = emit_values({base}, &bases);
  const std::string base_target = fmt::format("{}[{}]", out, index_of(write, "w"));
  // The terms: their own copies of any value also in the base's code.
  for (size_t id = 0; id < emitted_.size(); id++) {
    if (!graph_->node(static_cast<int>(id)).invariant) emitted_[id] = false;
  }
  loop_variable_[line_dim] = "k";
  std::string term_bases;
  const std::string term_body = emit_values({index, src}, &term_bases);
  bases += fmt::format("const int64_t w = {};\n", base_of(write));
  Affine line_start = write;
  line_start.coef[dim] = 0;
  const std::string slot =
      fmt::format("{}[{} + (q - 1) * {}]", out, index_of(line_start, "w"), write.coef[dim]);
  std::string row = "for (int64_t x = x0; x < x1; ++x) {\n";
  row += fmt::format("for (int64_t j = 0; j < {}; ++j) {{\n", n) + base_body;
  row += fmt::format("{} = {};\n}}\n", base_target,
                     c_convert(graph_->node(base).dtype, type, fmt::format("v{}", base)));
  row += fmt::format("for (int64_t k = 0; k < {}; ++k) {{\n", terms) + term_bases + term_body;
  row += fmt::format("const int64_t q = (int64_t)v{};\n", index);
  row += flag(instruction, KernelError::index_out_of_range,
              fmt::format("(q < 1) | (q > {})", shape[dim]));
  const std::string value = c_convert(graph_->node(src).dtype, type, fmt::format("v{}", src));
  row += fmt::format("if (q >= 1 && q <= {}) {} = {};\n}}\n}}\n", shape[dim], slot,
                     c_binary(effective_binary_op(BinaryOp::add, type), type, slot, value));
  const int64_t lines = total / n;
  const int64_t group = std::max<int64_t>(1, kChunk / std::max<int64_t>(n + terms, 1));
  const std::string code =
      walk(0, line_dim - 1, fmt::format("begin * {}", group),
           fmt::format("end * {0} < {1} ? end * {0} : {1}", group, lines), bases, row);
  finish(code, ceil_div(lines, group),
         std::max<int64_t>(1, kGrainElements / (group * std::max<int64_t>(n + terms, 1))),
         instruction);
}

}  // namespace lazylua::compiler
