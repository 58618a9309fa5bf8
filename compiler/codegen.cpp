// codegen.cpp - the Plan of a fused program: slots, steps, and the C source
// of its kernels (the elementwise form and the writer they all share; the
// reduction and softmax forms are in codegen_reduce.cpp).
#include "compiler/codegen.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>

#include "compiler/codegen_c.h"
#include "compiler/codegen_writer.h"
#include "compiler/kernel_math_source.h"
#include "compiler/toolchain.h"

namespace lazylua::compiler {

const char* kernel_math_source() {
  return kKernelMathSource;
}

const std::string& common_source_text() {
  static const std::string* text =
      new std::string(std::string(codegen_prelude()) + kKernelMathSource);
  return *text;
}

KernelWriter::KernelWriter(const Program& program, const std::vector<int>& slot_of,
                           const std::vector<Layout>& layouts, Plan& plan, std::string name_prefix)
    : program_(program),
      slot_of_(slot_of),
      layouts_(layouts),
      plan_(plan),
      name_prefix_(std::move(name_prefix)) {}

void KernelWriter::start(const Shape& dims) {
  graph_ = std::make_unique<KernelGraph>(program_, layouts_, dims);
  dims_.clear();
  loop_variable_.clear();
  arguments_.clear();
  written_.clear();
  byte_offsets_.clear();
  emitted_.clear();
  checked_.clear();
  prologue_.clear();
  same_element_reads_.clear();
}

int KernelWriter::argument(int slot, bool written) {
  for (size_t k = 0; k < arguments_.size(); k++) {
    if (arguments_[k] == slot) {
      written_[k] = written_[k] || written;
      return static_cast<int>(k);
    }
  }
  arguments_.push_back(slot);
  written_.push_back(written);
  byte_offsets_.push_back(0);
  return static_cast<int>(arguments_.size()) - 1;
}

std::string KernelWriter::pointer(int slot, bool written) {
  return fmt::format("p{}", argument(slot, written));
}

std::string KernelWriter::pointer_of(int instruction, bool written) {
  LAZYLUA_ASSERT(slot_of_[instruction] >= 0);
  return pointer(slot_of_[instruction], written);
}

namespace {

std::string variable(int node) {
  return fmt::format("v{}", node);
}

// Nodes whose code uses an affine of the loop indices (`offset`): reads,
// gathers and the position of a scatter_add.
bool has_offset(const KernelGraph& graph, int id) {
  const KernelNode& node = graph.node(id);
  return node.kind == KernelNode::Kind::read || node.kind == KernelNode::Kind::gather ||
         (node.kind == KernelNode::Kind::compute && node.instruction >= 0 &&
          !node.offset.coef.empty());
}

// cond ? a : b, of `dtype`, without a branch where that keeps loops vectorizable.
std::string select_code(DType dtype, const std::string& condition, const std::string& a,
                        const std::string& b) {
  if (dtype == DType::boolean) {
    return fmt::format("((uint8_t)(({0} & {1}) | (({0} ^ 1) & {2})))", condition, a, b);
  }
  return fmt::format("lzk_select_{}({}, {}, {})", dtype_name(dtype), condition, a, b);
}

}  // namespace

void KernelWriter::collapse(const std::vector<int>& values, const std::vector<Affine>& writes,
                            const std::vector<bool>& reduced, bool keep_reduced) {
  std::vector<Affine> accesses = writes;
  for (int id : reachable(*graph_, values)) {
    if (has_offset(*graph_, id) && !graph_->node(id).invariant) {
      accesses.push_back(graph_->node(id).offset);
    }
  }
  const Shape& dims = graph_->dims();
  // Built from the innermost dim outwards: an outer dim joins the group
  // inside it when every access steps over it as over the group's end.
  std::vector<LoopDim> groups;
  for (int d = dims.rank() - 1; d >= 0; d--) {
    const bool alone = keep_reduced && reduced[d];
    if (dims[d] == 1 && !alone) continue;
    if (!groups.empty() && !alone) {
      LoopDim& group = groups.back();
      bool fits = group.reduced == reduced[d] && !(keep_reduced && group.reduced);
      for (const Affine& access : accesses) {
        fits = fits && access.coef[d] == access.coef[group.members.back()] * group.extent;
      }
      if (fits) {
        group.extent *= dims[d];
        group.members.insert(group.members.begin(), d);
        continue;
      }
    }
    groups.push_back({dims[d], reduced[d], {d}});
  }
  dims_.assign(groups.rbegin(), groups.rend());
  loop_variable_.assign(dims_.size(), "");
}

int64_t KernelWriter::coefficient(const Affine& affine, int g) const {
  const LoopDim& dim = dims_[g];
  return dim.members.empty() ? 0 : affine.coef[dim.members.back()];
}

std::string KernelWriter::base_of(const Affine& affine) const {
  std::string code = fmt::format("{}", affine.constant);
  for (size_t g = 0; g < dims_.size(); g++) {
    const int64_t c = coefficient(affine, static_cast<int>(g));
    if (c != 0 && loop_variable_[g].empty()) code += fmt::format(" + i{} * {}", g, c);
  }
  return code;
}

std::string KernelWriter::index_of(const Affine& affine, const std::string& base) const {
  std::string code = base;
  for (size_t g = 0; g < dims_.size(); g++) {
    const int64_t c = coefficient(affine, static_cast<int>(g));
    if (c == 0 || loop_variable_[g].empty()) continue;
    code += c == 1 ? fmt::format(" + {}", loop_variable_[g])
                   : fmt::format(" + {} * {}", loop_variable_[g], c);
  }
  return code;
}

std::string KernelWriter::emit_values(const std::vector<int>& values, std::string* bases) {
  emitted_.resize(graph_->nodes().size(), false);
  const std::vector<int> ids = reachable(*graph_, values);
  for (int id : ids) {
    if (!graph_->node(id).invariant || emitted_[id]) continue;
    prologue_ += node_code(id);
    emitted_[id] = true;
  }
  std::string body;
  for (int id : ids) {
    if (emitted_[id]) continue;
    const KernelNode& node = graph_->node(id);
    if (has_offset(*graph_, id) && !node.offset.invariant()) {
      *bases += fmt::format("const int64_t b{} = {};\n", id, base_of(node.offset));
    }
    body += node_code(id);
  }
  return body;
}

std::string KernelWriter::node_code(int id) {
  const KernelNode& node = graph_->node(id);
  const char* type = c_type(node.dtype);
  const std::string name = variable(id);
  if (node.kind == KernelNode::Kind::read) {
    const std::string index = node.invariant ? fmt::format("{}", node.offset.constant)
                                             : index_of(node.offset, fmt::format("b{}", id));
    const std::string load = fmt::format("{}[{}]", pointer_of(node.base, false), index);
    // Any nonzero byte of a bool input is true.
    const std::string value =
        node.dtype == DType::boolean ? fmt::format("((uint8_t)({} != 0))", load) : load;
    return fmt::format("const {} {} = {};\n", type, name, value);
  }
  if (node.kind == KernelNode::Kind::gather) return gather_code(id);
  const Instruction& instruction = program_.instructions[node.instruction];
  if (instruction.op == Op::scatter_add) return scatter_code(id);
  if (node.kind == KernelNode::Kind::constant) {
    // A zero is hidden from the C compiler (LZK_OPAQUE in the prelude says why).
    if (instruction.constant.value == 0) {
      return fmt::format("{} {} = {};\nLZK_OPAQUE({});\n", type, name,
                         c_literal(node.dtype, instruction.constant), name);
    }
    return fmt::format("const {} {} = {};\n", type, name,
                       c_literal(node.dtype, instruction.constant));
  }
  auto input = [&](int k) { return variable(node.inputs[k]); };
  auto input_dtype = [&](int k) { return graph_->node(node.inputs[k]).dtype; };
  std::string value;
  switch (instruction.op) {
    case Op::unary: {
      const auto op = static_cast<UnaryOp>(instruction.sub_op);
      value = traits(op).dtypes == OpDtypes::any
                  ? c_unary(op, input_dtype(0), input(0))
                  : c_unary(op, node.dtype, c_convert(input_dtype(0), node.dtype, input(0)));
      break;
    }
    case Op::binary: {
      const auto op = static_cast<BinaryOp>(instruction.sub_op);
      const DType compute = ops::binary_compute_dtype(op, promote(input_dtype(0), input_dtype(1)));
      const std::string a = c_convert(input_dtype(0), compute, input(0));
      const std::string b = c_convert(input_dtype(1), compute, input(1));
      if ((op == BinaryOp::floordiv || op == BinaryOp::mod) && !is_floating(compute)) {
        return division_code(id, op, compute, a, b);
      }
      if (op == BinaryOp::pow && !is_floating(compute)) {
        // Eager mode raises for a negative exponent unless the base is 1 or -1.
        const char* compute_type = c_type(compute);
        std::string code = fmt::format("const {} x{} = {};\nconst {} y{} = {};\n", compute_type, id,
                                       a, compute_type, id, b);
        code += flag(node.instruction, KernelError::negative_integer_power,
                     fmt::format("(y{0} < 0) & (x{0} != 1) & (x{0} != -1)", id));
        code += fmt::format(
            "const {} v{} = {};\n", c_type(node.dtype), id,
            c_convert(compute, node.dtype,
                      c_binary(op, compute, fmt::format("x{}", id), fmt::format("y{}", id))));
        return code;
      }
      value = c_binary(effective_binary_op(op, compute), compute, a, b);
      break;
    }
    case Op::where: {
      const std::string condition = c_convert(input_dtype(0), DType::boolean, input(0));
      const std::string a = c_convert(input_dtype(1), node.dtype, input(1));
      const std::string b = c_convert(input_dtype(2), node.dtype, input(2));
      // Selects by masks: a ?: between computed values can become a branch.
      value = select_code(node.dtype, condition, a, b);
      break;
    }
    case Op::cast: {
      value = c_convert(input_dtype(0), node.dtype, input(0));
      const DType from = input_dtype(0);
      if (!is_floating(from) || is_floating(node.dtype) || node.dtype == DType::boolean) break;
      // A value with no integer value is an error, as in eager mode.
      const std::string fits =
          fmt::format("ll_{}_fits_{}({})", dtype_name(from), dtype_name(node.dtype), input(0));
      return flag(node.instruction, KernelError::no_integer_value, "!" + fits) +
             fmt::format("const {} {} = {};\n", type, name, value);
    }
    case Op::clamp:
      return clamp_code(id);
    default:
      LAZYLUA_ASSERT(false);
  }
  return fmt::format("const {} {} = {};\n", type, name, value);
}

// Integer // and %: a zero divisor sets the instruction's error flag (the
// kernel returns its code after the loop) and is replaced by 1, so the loop
// neither traps nor branches.
std::string KernelWriter::division_code(int id, BinaryOp op, DType compute, const std::string& a,
                                        const std::string& b) {
  const int instruction = graph_->node(id).instruction;
  const char* type = c_type(compute);
  std::string code = fmt::format("const {} d{} = {};\n", type, id, b);
  code += flag(instruction,
               op == BinaryOp::floordiv ? KernelError::integer_divide_by_zero
                                        : KernelError::integer_modulo_by_zero,
               fmt::format("d{} == 0", id));
  const std::string divisor = fmt::format("(d{0} == 0 ? ({1})1 : d{0})", id, type);
  code += fmt::format("const {} v{} = {};\n", type, id, c_binary(op, compute, a, divisor));
  return code;
}

std::string KernelWriter::flag(int instruction, KernelError error, const std::string& condition) {
  checked_.emplace(instruction, error);
  return fmt::format("e{} |= (uint8_t)({});\n", instruction, condition);
}

// A read at a position from an index (gather, index_select): a position
// outside [1, extent] sets the error flag and reads position 1 instead, so
// the loop never reads outside the input.
std::string KernelWriter::gather_code(int id) {
  const KernelNode& node = graph_->node(id);
  const std::string q = fmt::format("q{}", id);
  std::string code = fmt::format("const int64_t {} = (int64_t){};\n", q, variable(node.inputs[0]));
  const std::string bad = fmt::format("({0} < 1) | ({0} > {1})", q, node.index_extent);
  code += flag(node.instruction, KernelError::index_out_of_range, bad);
  const std::string offset = node.offset.invariant()
                                 ? fmt::format("{}", node.offset.constant)
                                 : index_of(node.offset, fmt::format("b{}", id));
  const std::string load =
      fmt::format("{}[{} + ({} ? 0 : {} - 1) * {}]", pointer_of(node.base, false), offset, bad, q,
                  node.index_stride);
  const std::string value =
      node.dtype == DType::boolean ? fmt::format("((uint8_t)({} != 0))", load) : load;
  return code + fmt::format("const {} {} = {};\n", c_type(node.dtype), variable(id), value);
}

// scatter_add at one output element: the base, plus each term whose
// position is this element's, in the index's order (as eager mode adds).
std::string KernelWriter::scatter_code(int id) {
  const KernelNode& node = graph_->node(id);
  const DType type = node.dtype;
  const char* t = c_type(type);
  const std::string position = node.offset.invariant()
                                   ? fmt::format("{}", node.offset.constant)
                                   : index_of(node.offset, fmt::format("b{}", id));
  std::string code = fmt::format("const int64_t j{} = {};\n", id, position);
  code +=
      fmt::format("{} s{} = {};\n", t, id,
                  c_convert(graph_->node(node.inputs[0]).dtype, type, variable(node.inputs[0])));
  const BinaryOp add = effective_binary_op(BinaryOp::add, type);
  for (size_t k = 1; k + 1 < node.inputs.size(); k += 2) {
    const std::string q = fmt::format("q{}_{}", id, k / 2);
    code += fmt::format("const int64_t {} = (int64_t){};\n", q, variable(node.inputs[k]));
    code += flag(node.instruction, KernelError::index_out_of_range,
                 fmt::format("({0} < 1) | ({0} > {1})", q, node.index_extent));
    const std::string src =
        c_convert(graph_->node(node.inputs[k + 1]).dtype, type, variable(node.inputs[k + 1]));
    const std::string sum = c_binary(add, type, fmt::format("s{}", id), src);
    code += fmt::format(
        "s{0} = {1};\n", id,
        select_code(type, fmt::format("{} - 1 == j{}", q, id), sum, fmt::format("s{}", id)));
  }
  return code + fmt::format("const {0} v{1} = s{1};\n", t, id);
}

// clamp(x, low, high) as the eager op: integer bounds of an integer tensor
// clamp exactly (saturated to the type); otherwise the bounds are doubles
// converted like clamp_kernel does (a NaN bound makes a float result NaN;
// integer tensors never get one). The bounds are 0-d, so their conversion
// goes to the prologue.
std::string KernelWriter::clamp_code(int id) {
  const KernelNode& node = graph_->node(id);
  const Instruction& instruction = program_.instructions[node.instruction];
  const DType type = node.dtype;
  const char* t = c_type(type);
  const KernelNode& x = graph_->node(node.inputs[0]);
  const std::string value = c_convert(x.dtype, type, variable(node.inputs[0]));
  const bool has_low = instruction.sub_op & 1, has_high = instruction.sub_op & 2;
  const DType low_dtype = graph_->node(node.inputs[1]).dtype;
  const DType high_dtype = graph_->node(node.inputs[2]).dtype;
  const bool exact = !is_floating(type) && (!has_low || low_dtype == DType::i64) &&
                     (!has_high || high_dtype == DType::i64);
  const std::string low = variable(node.inputs[1]), high = variable(node.inputs[2]);
  const std::string lowest = type == DType::f32   ? "(-(float)INFINITY)"
                             : type == DType::f64 ? "(-(double)INFINITY)"
                             : type == DType::i32 ? "INT32_MIN"
                                                  : "INT64_MIN";
  const std::string highest = type == DType::f32   ? "((float)INFINITY)"
                              : type == DType::f64 ? "((double)INFINITY)"
                              : type == DType::i32 ? "INT32_MAX"
                                                   : "INT64_MAX";
  std::string prep;
  if (exact) {
    auto bound = [&](const std::string& v) {
      return type == DType::i32
                 ? fmt::format(
                       "({0} < INT32_MIN ? INT32_MIN : {0} > INT32_MAX ? INT32_MAX : "
                       "(int32_t){0})",
                       v)
                 : v;
    };
    prep += fmt::format("const {} L{} = {};\n", t, id, has_low ? bound(low) : lowest);
    prep += fmt::format("const {} H{} = {};\n", t, id, has_high ? bound(high) : highest);
  } else {
    const std::string name = dtype_name(type);
    auto bound = [&](bool present, const std::string& v, DType dtype, const char* kind,
                     const std::string& absent) {
      if (!present) return absent;
      const std::string d = c_convert(dtype, DType::f64, v);
      const std::string converted = is_floating(type)
                                        ? fmt::format("lzk_bound_{}({})", name, d)
                                        : fmt::format("lzk_{}_bound_{}({})", kind, name, d);
      return is_floating(type) ? converted
                               : fmt::format("(isnan({}) ? {} : {})", d, absent, converted);
    };
    prep +=
        fmt::format("const {} L{} = {};\n", t, id, bound(has_low, low, low_dtype, "low", lowest));
    prep += fmt::format("const {} H{} = {};\n", t, id,
                        bound(has_high, high, high_dtype, "high", highest));
  }
  std::string code;
  if (exact) {
    code = fmt::format("const {0} r{1} = {2} > L{1} ? {2} : L{1};\n", t, id, value);
    code += fmt::format("const {0} v{1} = r{1} < H{1} ? r{1} : H{1};\n", t, id);
  } else if (is_floating(type)) {
    const char* select = type == DType::f32 ? "lzk_select_f32" : "lzk_select_f64";
    code = fmt::format("const {0} r{1} = {3}({2} < L{1} || L{1} != L{1}, L{1}, {2});\n", t, id,
                       value, select);
    code += fmt::format("const {0} v{1} = {2}(r{1} > H{1} || H{1} != H{1}, H{1}, r{1});\n", t, id,
                        select);
  } else {
    code = fmt::format("const {0} r{1} = {2} < L{1} ? L{1} : {2};\n", t, id, value);
    code += fmt::format("const {0} v{1} = r{1} > H{1} ? H{1} : r{1};\n", t, id);
  }
  if (node.invariant) return prep + code;
  prologue_ += prep;
  return code;
}

std::string KernelWriter::walk(int first, int last, const std::string& begin,
                               const std::string& end, const std::string& bases,
                               const std::string& row) const {
  const int64_t inner = dims_[last].extent;
  std::string code = "{\n";
  code += fmt::format("int64_t f = {};\nconst int64_t f_end = {};\n", begin, end);
  code += fmt::format("int64_t x0 = f % {};\n", inner);
  if (last > first) {
    code += fmt::format("int64_t r = f / {};\n", inner);
    for (int g = last - 1; g > first; g--) {
      code += fmt::format("int64_t i{0} = r % {1};\nr /= {1};\n", g, dims_[g].extent);
    }
    code += fmt::format("int64_t i{} = r;\n", first);
  }
  code += "while (f < f_end) {\n";
  code += fmt::format("const int64_t x1 = x0 + ({0} - x0 < f_end - f ? {0} - x0 : f_end - f);\n",
                      inner);
  code += bases;
  code += row;
  code += "f += x1 - x0;\nx0 = 0;\n";
  if (last > first) {
    int open = 0;
    for (int g = last - 1; g > first; g--, open++) {
      code += fmt::format("if (++i{0} == {1}) {{\ni{0} = 0;\n", g, dims_[g].extent);
    }
    code += fmt::format("++i{};\n", first);
    code += std::string(open, '}') + (open ? "\n" : "");
  }
  code += "}\n}\n";
  return code;
}

void KernelWriter::finish(const std::string& body, int64_t iterations, int64_t grain,
                          int instruction) {
  const std::string name = fmt::format("{}{}", name_prefix_, plan_.kernel_count++);
  std::string parameters, casts;
  for (size_t k = 0; k < arguments_.size(); k++) {
    const char* type = c_type(plan_.slots[arguments_[k]].dtype);
    parameters += fmt::format("{}{}* restrict p{}, ", written_[k] ? "" : "const ", type, k);
    casts += fmt::format("({}{}*)buffers[{}], ", written_[k] ? "" : "const ", type, k);
  }
  std::string flags, errors;
  for (const auto& [checked, error] : checked_) {
    flags += fmt::format("uint8_t e{} = 0;\n", checked);
    errors += fmt::format("if (e{}) return {};\n", checked, error_code(checked, error));
  }
  // Kernels of identical text (the updates of same-shaped parameters, the
  // layers of an unrolled stack) are one C function: the compiler's time
  // goes by distinct kernels, not by steps.
  std::string text = fmt::format("({}int64_t begin, int64_t end) {{\n", parameters) + flags +
                     prologue_ + body + errors + "return 0;\n}\n";
  auto [known, added] = functions_by_text_.emplace(std::move(text), name);
  if (added) {
    plan_.function_count++;
    std::string& source = plan_.source;
    source += kSourcePartMark;  // where the toolchain may cut the file (toolchain.h)
    source += fmt::format("\nLZK_INLINE int {}_run", name) + known->first;
    source += fmt::format("int {0}(char* const* buffers, int64_t begin, int64_t end) {{\n", name);
    source += fmt::format("  return {}_run({}begin, end);\n}}\n", name, casts);
  }

  Step step;
  step.kind = Step::Kind::kernel;
  step.function = known->second;
  step.iterations = iterations;
  step.grain = std::max<int64_t>(1, grain);
  step.slots = arguments_;
  if (std::any_of(byte_offsets_.begin(), byte_offsets_.end(), [](int64_t b) { return b != 0; })) {
    step.byte_offsets = byte_offsets_;
  }
  step.instruction = instruction;
  for (size_t k = 0; k < arguments_.size(); k++) {
    if (written_[k]) step.written.push_back(arguments_[k]);
  }
  step.same_element_reads = std::move(same_element_reads_);
  step.can_fail = !checked_.empty();
  plan_.steps.push_back(std::move(step));
}

// ---- elementwise kernels ----

void KernelWriter::elementwise(const std::vector<int>& roots) {
  const Shape& shape = program_.instructions[roots[0]].shape;
  if (numel(shape) == 0) return nothing(roots);
  start(shape);
  const IndexMap identity = identity_map(shape);
  std::vector<int> values;
  for (int root : roots) {
    const int node = graph_->compute(root, identity);
    graph_->add_root(root, node);
    values.push_back(node);
  }
  // Fusion joined these roots only if none is read where it is not being
  // written (Fuser::can_join builds this same graph); a load of such an
  // element would see the slot before the store (KernelGraph::read).
  LAZYLUA_ASSERT(!graph_->reads_own_output);
  Affine write{0, std::vector<int64_t>(shape.rank(), 0)};
  const Strides strides = contiguous_strides(shape);
  for (int d = 0; d < shape.rank(); d++) write.coef[d] = shape[d] == 1 ? 0 : strides[d];
  // The slots read only at the element being written: every read of the
  // element happens before its store, in any loop order.
  // (donate.cpp asks the same of the graph, by instruction, before codegen.)
  std::map<int, bool> same_element;
  for (const auto& [base, only_same] : reads_at_written_element(*graph_, values, write)) {
    auto [entry, added] = same_element.emplace(slot_of_[base], true);
    entry->second = entry->second && only_same;
  }
  for (const auto& [slot, only_same] : same_element) {
    if (only_same) same_element_reads_.push_back(slot);
  }
  loop(values, roots, write, roots[0]);
}

// The lowest constant offset of the reads of each slot (but `written`)
// goes into the slot's pointer, so that copies of different parts of one
// tensor (a cat of its slices) have one text. Only for reads that step
// forwards along every dim: the moved pointer then stays at or before every
// element they read, at one some read reads.
void KernelWriter::move_read_pointers(const std::vector<int>& values, int written) {
  std::map<int, std::vector<int>> reads;  // slot -> its read and gather nodes
  for (int id : reachable(*graph_, values)) {
    const KernelNode& node = graph_->node(id);
    if (node.kind != KernelNode::Kind::read && node.kind != KernelNode::Kind::gather) continue;
    if (slot_of_[node.base] != written) reads[slot_of_[node.base]].push_back(id);
  }
  for (const auto& [slot, ids] : reads) {
    int64_t lowest = INT64_MAX;
    bool forwards = true;
    for (int id : ids) {
      const Affine& offset = graph_->node(id).offset;
      lowest = std::min(lowest, offset.constant);
      for (int64_t c : offset.coef) forwards = forwards && c >= 0;
    }
    if (!forwards || lowest <= 0) continue;
    for (int id : ids) graph_->shift_read(id, lowest);
    const int k = argument(slot, false);
    byte_offsets_[k] = lowest * dtype_size(plan_.slots[slot].dtype);
  }
}

// One flat pass over the kernel's dims: values[k] is stored into the slot
// of targets[k] at `write` (an element offset over the kernel's dims).
void KernelWriter::loop(const std::vector<int>& values, const std::vector<int>& targets,
                        const Affine& given_write, int instruction, bool movable_write) {
  Affine write = given_write;
  const Shape& shape = graph_->dims();
  const int64_t total = numel(shape);
  collapse(values, {write}, std::vector<bool>(shape.rank(), false), false);
  if (dims_.empty()) {
    dims_.push_back({1, false, {}});
    loop_variable_.push_back("");
  }
  const int last = static_cast<int>(dims_.size()) - 1;
  loop_variable_[last] = "x";
  const int across = transposed_dim(values);
  if (across >= 0) {
    // The transposed dim goes just outside the innermost one, for tiles.
    const LoopDim moved = dims_[across];
    dims_.erase(dims_.begin() + across);
    dims_.insert(dims_.end() - 1, moved);
    loop_variable_[last - 1] = "t";
  }

  if (movable_write) move_read_pointers(values, slot_of_[targets[0]]);
  std::string bases;
  const std::string body = emit_values(values, &bases);
  // The reads have their pointers now: a target slot among them is read and
  // written through one pointer, which then cannot move.
  const int target_slot = slot_of_[targets[0]];
  if (movable_write && targets.size() == 1 && write.constant != 0 &&
      std::find(arguments_.begin(), arguments_.end(), target_slot) == arguments_.end()) {
    const int k = argument(target_slot, true);
    byte_offsets_[k] = write.constant * dtype_size(program_.instructions[targets[0]].dtype);
    write.constant = 0;
  }
  bases += fmt::format("const int64_t w = {};\n", base_of(write));
  std::vector<std::string> results;
  for (size_t k = 0; k < targets.size(); k++) {
    const DType dtype = program_.instructions[targets[k]].dtype;
    results.push_back(c_convert(graph_->node(values[k]).dtype, dtype, variable(values[k])));
  }
  if (across >= 0) return finish_tiled(bases, body, targets, results, write, instruction);
  std::string row = "for (int64_t x = x0; x < x1; ++x) {\n" + body;
  for (size_t k = 0; k < targets.size(); k++) {
    row += fmt::format("{}[{}] = {};\n", pointer_of(targets[k], true), index_of(write, "w"),
                       results[k]);
  }
  row += "}\n";
  const int64_t iterations = (total + kChunk - 1) / kChunk;
  const std::string end = fmt::format("end * {0} < {1} ? end * {0} : {1}", kChunk, total);
  finish(walk(0, last, fmt::format("begin * {}", kChunk), end, bases, row), iterations,
         kGrainElements / kChunk, instruction);
}

// A collapsed dim along which some read is contiguous while it strides
// along the innermost dim (a transpose): such loops go in tiles, else every
// read of a long row touches a new cache line and often a new page (26x
// slower than a copy at 4096 x 4096). -1 when there is none or it is not
// worth it.
int KernelWriter::transposed_dim(const std::vector<int>& values) const {
  const int last = static_cast<int>(dims_.size()) - 1;
  if (last < 1 || dims_[last].extent < kTileMinimum) return -1;
  for (int id : reachable(*graph_, values)) {
    const KernelNode& node = graph_->node(id);
    if (node.kind != KernelNode::Kind::read || node.invariant) continue;
    const int64_t inner = coefficient(node.offset, last);
    if (inner == 0 || inner == 1 || inner == -1) continue;
    for (int g = 0; g < last; g++) {
      if (coefficient(node.offset, g) == 1 && dims_[g].extent >= kTileMinimum) return g;
    }
  }
  return -1;
}

// The loop in tiles of kTile x kTileRow over the last two dims (t, x),
// one tile per iteration. Within a tile the values are computed along t
// (where the transposed reads are contiguous: each cache line they touch
// is used up at once) into a small buffer, which is then written out along
// x. Without the buffer, the lines of a tile often share one L1 set (rows
// a power of two apart) and evict each other.
void KernelWriter::finish_tiled(const std::string& bases, const std::string& body,
                                const std::vector<int>& targets,
                                const std::vector<std::string>& results, const Affine& write,
                                int instruction) {
  const int last = static_cast<int>(dims_.size()) - 1;
  const int64_t rows = dims_[last - 1].extent, cols = dims_[last].extent;
  const int64_t row_tiles = (rows + kTile - 1) / kTile;
  const int64_t col_tiles = (cols + kTileRow - 1) / kTileRow;
  int64_t outer = 1;
  for (int g = 0; g < last - 1; g++) outer *= dims_[g].extent;
  std::string code;
  for (size_t k = 0; k < targets.size(); k++) {
    code += fmt::format("{} tile{}[{}][{}];\n", c_type(program_.instructions[targets[k]].dtype), k,
                        kTileRow, kTile);
  }
  code += "for (int64_t it = begin; it < end; ++it) {\n";
  code += fmt::format("int64_t r = it;\nconst int64_t cx = r % {0};\nr /= {0};\n", col_tiles);
  code += fmt::format("const int64_t ct = r % {0};\nr /= {0};\n", row_tiles);
  for (int g = last - 2; g >= 0; g--) {
    code += fmt::format("const int64_t i{0} = r % {1};\nr /= {1};\n", g, dims_[g].extent);
  }
  code += fmt::format(
      "const int64_t t0 = ct * {0}, t1 = t0 + {0} < {1} ? t0 + {0} : {1};\n"
      "const int64_t x0 = cx * {2}, x1 = x0 + {2} < {3} ? x0 + {2} : {3};\n",
      kTile, rows, kTileRow, cols);
  code += bases;
  code += "for (int64_t x = x0; x < x1; ++x) {\nfor (int64_t t = t0; t < t1; ++t) {\n" + body;
  for (size_t k = 0; k < targets.size(); k++) {
    code += fmt::format("tile{}[x - x0][t - t0] = {};\n", k, results[k]);
  }
  code += "}\n}\nfor (int64_t t = t0; t < t1; ++t) {\nfor (int64_t x = x0; x < x1; ++x) {\n";
  for (size_t k = 0; k < targets.size(); k++) {
    code += fmt::format("{}[{}] = tile{}[x - x0][t - t0];\n", pointer_of(targets[k], true),
                        index_of(write, "w"), k);
  }
  code += "}\n}\n}\n";
  const int64_t tile = kTile * kTileRow;
  finish(code, outer * row_tiles * col_tiles, std::max<int64_t>(1, kGrainElements / tile),
         instruction);
}

// A value with no elements: a kernel that does nothing still makes the
// executor allocate its slot (an executor allocates a slot when a step uses it).
void KernelWriter::nothing(const std::vector<int>& roots) {
  start(Shape{});
  for (int root : roots) argument(slot_of_[root], true);
  finish("", 0, 1, roots[0]);
}

// cat, slice_update and select_update: a kernel per part, each writing its
// region of the output (the base of an update first, then the new values).
void KernelWriter::assemble(int instruction) {
  const Instruction& out = program_.instructions[instruction];
  if (numel(out.shape) == 0) return nothing({instruction});
  const Strides strides = contiguous_strides(out.shape);
  const int dim = static_cast<int>(out.attrs.values[0]);
  // Writes `input` (broadcast to `region`) from `first` along `dim`; a
  // selected region (select_update) has no `dim`.
  auto part = [&](int input, const Shape& region, int64_t first, bool selected) {
    if (numel(region) == 0) return;
    start(region);
    const Shape& input_shape = program_.instructions[input].shape;
    const int value =
        graph_->value(input, graph_->broadcast(identity_map(region), region, input_shape));
    Affine write{first * strides[dim], std::vector<int64_t>(region.rank(), 0)};
    for (int d = 0; d < region.rank(); d++) {
      const int out_dim = selected && d >= dim ? d + 1 : d;
      write.coef[d] = region[d] == 1 ? 0 : strides[out_dim];
    }
    loop({value}, {instruction}, write, instruction, true);
  };
  if (out.op == Op::cat) {
    int64_t offset = 0;
    for (int input : out.inputs) {
      const Shape& shape = program_.instructions[input].shape;
      part(input, shape, offset, false);
      offset += shape[dim];
    }
    return;
  }
  part(out.inputs[0], out.shape, 0, false);
  if (out.op == Op::slice_update) {
    Shape region = out.shape;
    region[dim] = program_.instructions[out.inputs[1]].shape[dim];
    part(out.inputs[1], region, out.attrs.values[1], false);
  } else {
    Shape region = out.shape;
    region.erase(dim);
    part(out.inputs[1], region, out.attrs.values[1], true);
  }
}

// ---- the plan ----

namespace {

// A scan: the body gets its own optimized program and plan (lowered by the
// driver), whose kernels join this plan's source; the step lists the scan's
// inputs, its packed value and the outputs used (each a view the step sets).
Step scan_step(const Program& program, int root, const std::vector<int>& slot_of,
               const std::string& prefix, Plan& plan, const ScanLowering& lower_scan) {
  const Instruction& instruction = program.instructions[root];
  auto scan = std::make_shared<ScanPlan>(
      lower_scan(instruction.body, fmt::format("{}s{}_", prefix, plan.steps.size())));
  plan.source += scan->plan.source;
  plan.kernel_count += scan->plan.kernel_count;
  plan.function_count += scan->plan.function_count;
  Step step;
  step.kind = Step::Kind::scan;
  step.instruction = root;
  step.can_fail = true;  // the body may (and eager steps in it may)
  for (int input : instruction.inputs) step.slots.push_back(slot_of[input]);
  step.slots.push_back(slot_of[root]);
  for (size_t i = 0; i < program.instructions.size(); i++) {
    const Instruction& part = program.instructions[i];
    if (part.op != Op::scan_output || part.inputs[0] != root || slot_of[i] < 0) continue;
    step.slots.push_back(slot_of[i]);
    step.parts.push_back(static_cast<int>(part.attrs.values[0]));
  }
  step.written.assign(step.slots.begin() + static_cast<long>(instruction.inputs.size()),
                      step.slots.end());
  step.scan = std::move(scan);
  return step;
}

std::string describe(const Program& program, int instruction) {
  const Instruction& in = program.instructions[instruction];
  return fmt::format("{}:{}{}", in.name(), dtype_name(in.dtype), shape_string(in.shape));
}

std::atomic<uint64_t> generated_plans{0};  // generate_plan_count()

}  // namespace

uint64_t generate_plan_count() {
  return generated_plans.load();
}

Plan generate_plan(const Program& program, const Fusion& fusion, const std::vector<int>& donor,
                   const std::string& prefix, bool standalone, const ScanLowering& lower_scan) {
  generated_plans++;
  Plan plan;
  std::vector<int> slot_of(program.instructions.size(), -1);
  for (size_t i = 0; i < program.instructions.size(); i++) {
    if (!fusion.materialized[i]) continue;
    const Instruction& instruction = program.instructions[i];
    if (!donor.empty() && donor[i] >= 0) continue;  // below: its donor may come later
    slot_of[i] = static_cast<int>(plan.slots.size());
    plan.slots.push_back(
        {instruction.dtype, instruction.shape, static_cast<int>(i), instruction.input_index});
  }
  for (size_t i = 0; i < donor.size(); i++) {
    if (donor[i] >= 0) slot_of[i] = slot_of[donor[i]];
  }
  const std::vector<Layout> layouts = compute_layouts(program, fusion.materialized);
  KernelWriter writer(program, slot_of, layouts, plan, prefix);
  std::string summary;
  for (const FusedStep& fused : fusion.steps) {
    const size_t first_step = plan.steps.size();
    switch (fused.lowering) {
      case Lowering::inlined:
        writer.elementwise(fused.roots);
        break;
      case Lowering::reduce:
        writer.reduce(fused.roots[0]);
        break;
      case Lowering::softmax:
        writer.softmax(fused.roots[0]);
        break;
      case Lowering::arg_reduce:
        writer.arg_reduce(fused.roots[0]);
        break;
      case Lowering::cumsum:
        writer.cumsum(fused.roots[0]);
        break;
      case Lowering::scatter:
        writer.scatter(fused.roots[0]);
        break;
      case Lowering::assemble:
        writer.assemble(fused.roots[0]);
        break;
      case Lowering::matmul:
      case Lowering::library:
      case Lowering::reference: {
        const int root = fused.roots[0];
        Step step;
        step.kind = fused.lowering == Lowering::matmul    ? Step::Kind::matmul
                    : fused.lowering == Lowering::library ? Step::Kind::library
                                                          : Step::Kind::reference;
        step.instruction = root;
        const std::vector<int>& inputs = program.instructions[root].inputs;
        for (size_t k = 0; k < inputs.size(); k++) {
          const int source = fused.lowering == Lowering::matmul && slot_of[inputs[k]] < 0
                                 ? blas_transposed_source(program, inputs[k])
                                 : -1;
          if (source >= 0) step.transposed_inputs |= static_cast<uint8_t>(1u << k);
          step.slots.push_back(slot_of[source >= 0 ? source : inputs[k]]);
        }
        for (EpilogueStage stage : fused.epilogue) {  // operands: instruction -> input
          if (stage.operand >= 0) {
            const Instruction& operand = program.instructions[stage.operand];
            if (operand.op == Op::constant) {
              const double value = operand.constant.value;
              stage.operand = value == 1            ? EpilogueStage::kConstantOne
                              : std::signbit(value) ? EpilogueStage::kConstantMinusZero
                                                    : EpilogueStage::kConstantZero;
            } else {
              step.slots.push_back(slot_of[stage.operand]);
              stage.operand = static_cast<int>(step.slots.size()) - 1;
            }
          }
          step.epilogue.push_back(stage);
        }
        step.slots.push_back(slot_of[fused.written()]);
        plan.steps.push_back(std::move(step));
        break;
      }
      case Lowering::scan:
        plan.steps.push_back(scan_step(program, fused.roots[0], slot_of, prefix, plan, lower_scan));
        break;
      case Lowering::input:
      case Lowering::scan_part:
        break;
    }
    if (plan.steps.size() == first_step) continue;
    for (size_t k = first_step; k < plan.steps.size(); k++) {
      if (plan.steps[k].kind == Step::Kind::kernel) plan.steps[k].roots = fused.roots;
    }
    const char* kind = runner_name(fused.lowering);
    std::string roots;
    for (int root : fused.roots) roots += (roots.empty() ? "" : ",") + describe(program, root);
    summary += fmt::format("{}{}({})", summary.empty() ? "" : " ", kind, roots);
  }
  for (int output : program.outputs) plan.outputs.push_back(slot_of[output]);
  if (standalone && plan.kernel_count > 0) {
    plan.source = common_source_text() + plan.source;
  }
  plan.summary =
      fmt::format("{} steps, {} kernels ({} functions): {}", plan.steps.size(), plan.kernel_count,
                  plan.function_count, summary.empty() ? "-" : summary);
  return plan;
}

}  // namespace lazylua::compiler
