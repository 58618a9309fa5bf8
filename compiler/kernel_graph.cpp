// kernel_graph.cpp - views as index arithmetic, and the expression DAG of a
// kernel.
#include "compiler/kernel_graph.h"

namespace lazylua::compiler {

bool Affine::invariant() const {
  for (int64_t c : coef) {
    if (c != 0) return false;
  }
  return true;
}

IndexMap identity_map(const Shape& shape) {
  IndexMap map(shape.rank());
  for (int d = 0; d < shape.rank(); d++) {
    map[d].coef.assign(shape.rank(), 0);
    if (shape[d] != 1) map[d].coef[d] = 1;
  }
  return map;
}

bool is_view(Op op) {
  return op == Op::reshape || op == Op::permute || op == Op::slice || op == Op::select ||
         op == Op::expand;
}

bool is_elementwise(const Instruction& instruction) {
  switch (instruction.op) {
    case Op::unary:
    case Op::binary:
    case Op::where:
    case Op::cast:
    case Op::clamp:
    case Op::constant:
      return true;
    default:
      return false;
  }
}

bool is_indexed_read(Op op) {
  return op == Op::gather || op == Op::index_select;
}

bool scatter_covers_lines(const Program& program, const Instruction& instruction) {
  const Shape& out = instruction.shape;
  const Shape& index = program.instructions[instruction.inputs[1]].shape;
  const int dim = static_cast<int>(instruction.attrs.values[0]);
  if (out.rank() == 0 || index.rank() != out.rank()) return false;
  for (int d = 0; d < out.rank(); d++) {
    if (d != dim && index[d] != out[d]) return false;
  }
  // An index into an empty dim is out of range, which only a visit of
  // its element (none here) would find.
  return !(out[dim] == 0 && numel(index) > 0);
}

bool scatter_is_inlined(const Program& program, const Instruction& instruction) {
  const Shape& index = program.instructions[instruction.inputs[1]].shape;
  return scatter_covers_lines(program, instruction) &&
         index[static_cast<int>(instruction.attrs.values[0])] <= kScatterInlineTerms;
}

bool reshape_is_view(const Layout& layout, const Shape& from, const Shape& to) {
  Array input;
  input.shape = from;
  input.strides = layout.strides;
  input.offset = layout.offset;
  return input.try_reshape_view(to).shape == to;
}

bool reshape_is_squeeze(const Shape& from, const Shape& to) {
  Shape a, b;
  for (int64_t extent : from) {
    if (extent != 1) a.push_back(extent);
  }
  for (int64_t extent : to) {
    if (extent != 1) b.push_back(extent);
  }
  return a == b;
}

Layout layout_of(const Program& program, const std::vector<bool>& materialized,
                 const std::vector<Layout>& layouts, int i) {
  const auto& instructions = program.instructions;
  const Instruction& instruction = instructions[i];
  if (materialized[i]) return {i, 0, contiguous_strides(instruction.shape)};
  if (!is_view(instruction.op) || !layouts[instruction.inputs[0]].defined()) return {};
  const Layout& source = layouts[instruction.inputs[0]];
  // A meta array (no buffer) does the stride arithmetic of eager views.
  Array input;
  input.shape = instructions[instruction.inputs[0]].shape;
  input.strides = source.strides;
  input.offset = source.offset;
  Array view;
  const int64_t* attrs = instruction.attrs.values;
  switch (instruction.op) {
    case Op::permute: {
      Shape shape;
      Strides strides;
      for (int d = 0; d < input.rank(); d++) {
        shape.push_back(input.shape[static_cast<int>(attrs[d])]);
        strides.push_back(input.strides[static_cast<int>(attrs[d])]);
      }
      view = input.view_as(shape, strides, input.offset);
      break;
    }
    case Op::slice:
      view = input.narrowed(static_cast<int>(attrs[0]), attrs[1], attrs[2]);
      break;
    case Op::select:
      view = input.selected(static_cast<int>(attrs[0]), attrs[1]);
      break;
    case Op::expand:
      view = input.expanded(instruction.shape);
      break;
    case Op::reshape:
      // Failure is an empty Array, whose shape only matches a 0-d target,
      // and a 0-d target always succeeds.
      view = input.try_reshape_view(instruction.shape);
      if (view.shape != instruction.shape) return {};
      break;
    default:
      return {};
  }
  return {source.base, view.offset, view.strides};
}

std::vector<Layout> compute_layouts(const Program& program, const std::vector<bool>& materialized) {
  std::vector<Layout> layouts(program.instructions.size());
  for (size_t i = 0; i < layouts.size(); i++) {
    layouts[i] = layout_of(program, materialized, layouts, static_cast<int>(i));
  }
  return layouts;
}

KernelGraph::KernelGraph(const Program& program, const std::vector<Layout>& layouts,
                         const Shape& dims)
    : program_(program), layouts_(layouts), dims_(dims) {}

Affine KernelGraph::normalized(Affine affine) const {
  affine.coef.resize(dims_.rank(), 0);
  for (int d = 0; d < dims_.rank(); d++) {
    if (dims_[d] == 1) affine.coef[d] = 0;
  }
  return affine;
}

IndexMap KernelGraph::broadcast(const IndexMap& map, const Shape& out, const Shape& in) const {
  IndexMap result(in.rank());
  const int lead = out.rank() - in.rank();
  for (int d = 0; d < in.rank(); d++) {
    result[d] = in[d] == 1 ? normalized(Affine{}) : map[lead + d];
  }
  return result;
}

bool KernelGraph::view_input(const Instruction& view, const Shape& input_shape, const IndexMap& map,
                             IndexMap* result) const {
  const int64_t* attrs = view.attrs.values;
  switch (view.op) {
    case Op::permute:
      result->assign(input_shape.rank(), Affine{});
      for (int d = 0; d < input_shape.rank(); d++) (*result)[attrs[d]] = map[d];
      return true;
    case Op::slice:
      *result = map;
      (*result)[attrs[0]].constant += attrs[1];
      return true;
    case Op::select:
      *result = map;
      result->insert(result->begin() + attrs[0], normalized(Affine{attrs[1], {}}));
      return true;
    case Op::expand:
      *result = broadcast(map, view.shape, input_shape);
      return true;
    case Op::reshape: {
      if (!reshape_is_squeeze(input_shape, view.shape)) return false;
      result->assign(input_shape.rank(), normalized(Affine{}));
      int out = 0;
      for (int d = 0; d < input_shape.rank(); d++) {
        if (input_shape[d] == 1) continue;
        while (view.shape[out] == 1) out++;
        (*result)[d] = map[out++];
      }
      return true;
    }
    default:
      return false;
  }
}

Affine KernelGraph::offset_of(const Layout& layout, const IndexMap& map) const {
  Affine offset = normalized(Affine{layout.offset, {}});
  for (size_t d = 0; d < map.size(); d++) {
    const int64_t stride = layout.strides[static_cast<int>(d)];
    offset.constant += stride * map[d].constant;
    for (int k = 0; k < dims_.rank(); k++) offset.coef[k] += stride * map[d].coef[k];
  }
  return normalized(offset);
}

int KernelGraph::add(KernelNode node, const IndexMap& map, bool memoize) {
  std::vector<int64_t> key;
  for (const Affine& affine : map) {
    key.push_back(affine.constant);
    key.insert(key.end(), affine.coef.begin(), affine.coef.end());
  }
  const int id = static_cast<int>(nodes_.size());
  nodes_.push_back(std::move(node));
  if (memoize) memo_[{nodes_.back().instruction, std::move(key)}] = id;
  return id;
}

void KernelGraph::add_root(int root, int node) {
  roots_[root] = node;
}

int KernelGraph::value(int instruction, const IndexMap& map) {
  return evaluate(instruction, map, true);
}

int KernelGraph::compute(int instruction, const IndexMap& map) {
  return evaluate(instruction, map, false);
}

// Every read of a slot goes through here (a gather checks the same in
// indexed_read), so that a kernel never loads from a slot it writes
// (docs/architecture.md §5, "Schedule / fuse"). A kernel computes all of an
// element's values, then stores them: a load of a root's slot would see
// what the slot held before the kernel ran (uninitialized memory, or the
// element another iteration wrote). So a read of a root at the element
// being written is the root's own node (the value in a register), whatever
// chain of views led there (a permute of extent-1 dims and a flatten come
// back to the identity), and a read anywhere else marks the kernel as
// reading its own output, which fusion refuses (can_join) and codegen
// asserts against.
int KernelGraph::read(int instruction, int base, const Affine& offset, const IndexMap& map,
                      bool memoize) {
  auto root = roots_.find(base);
  if (root != roots_.end()) {
    Affine identity = normalized(Affine{0, {}});
    const Strides strides = contiguous_strides(dims_);
    for (int d = 0; d < dims_.rank(); d++) identity.coef[d] = dims_[d] == 1 ? 0 : strides[d];
    if (offset == identity) return root->second;
    reads_own_output = true;
  }
  KernelNode node;
  node.kind = KernelNode::Kind::read;
  node.instruction = instruction;
  node.dtype = program_.instructions[instruction].dtype;
  node.base = base;
  node.offset = offset;
  node.invariant = offset.invariant();
  return add(std::move(node), map, memoize);
}

int KernelGraph::evaluate(int instruction, const IndexMap& map, bool use_layout) {
  std::vector<int64_t> key;
  for (const Affine& affine : map) {
    key.push_back(affine.constant);
    key.insert(key.end(), affine.coef.begin(), affine.coef.end());
  }
  if (use_layout) {
    auto found = memo_.find({instruction, key});
    if (found != memo_.end()) return found->second;
  }

  const Instruction& in = program_.instructions[instruction];
  const Layout& layout = layouts_[instruction];
  if (use_layout && layout.defined()) {
    return read(instruction, layout.base, offset_of(layout, map), map, true);
  }
  if (in.op == Op::constant) {
    KernelNode node;
    node.kind = KernelNode::Kind::constant;
    node.instruction = instruction;
    node.dtype = in.dtype;
    node.invariant = true;
    return add(std::move(node), map, true);
  }
  if (is_view(in.op)) {
    IndexMap input_map;
    const Instruction& source = program_.instructions[in.inputs[0]];
    if (!view_input(in, source.shape, map, &input_map)) {
      // A reshape of memory (the root of a kernel that copies it): read
      // the input's data through the reshaped strides.
      const Layout& input_layout = layouts_[in.inputs[0]];
      LAZYLUA_ASSERT(input_layout.defined() &&
                     reshape_is_view(input_layout, source.shape, in.shape));
      Array input;
      input.shape = source.shape;
      input.strides = input_layout.strides;
      input.offset = input_layout.offset;
      const Array view = input.try_reshape_view(in.shape);
      return read(instruction, input_layout.base,
                  offset_of({input_layout.base, view.offset, view.strides}, map), map, use_layout);
    }
    const int id = value(in.inputs[0], input_map);
    if (use_layout) memo_[{instruction, key}] = id;
    return id;
  }
  if (is_indexed_read(in.op)) return indexed_read(instruction, map, use_layout);
  if (in.op == Op::scatter_add) return scatter(instruction, map, use_layout);
  LAZYLUA_ASSERT(is_elementwise(in));
  KernelNode node;
  node.kind = KernelNode::Kind::compute;
  node.instruction = instruction;
  node.dtype = in.dtype;
  node.invariant = true;
  for (int input : in.inputs) {
    const int id = value(input, broadcast(map, in.shape, program_.instructions[input].shape));
    node.inputs.push_back(id);
    node.invariant = node.invariant && nodes_[id].invariant;
  }
  // A root's compute node stands for the same value as reads of its slot.
  return add(std::move(node), map, use_layout || !layout.defined());
}

// gather: out[i] = in[i with dim replaced by index[i] - 1];
// index_select: out[i] = in[i with dim replaced by index[i[dim]] - 1].
int KernelGraph::indexed_read(int instruction, const IndexMap& map, bool use_layout) {
  const Instruction& in = program_.instructions[instruction];
  const int source = in.inputs[0], index = in.inputs[1];
  const int dim = static_cast<int>(in.attrs.values[0]);
  const Layout& layout = layouts_[source];
  LAZYLUA_ASSERT(layout.defined());
  if (roots_.count(layout.base)) reads_own_output = true;
  const IndexMap index_map = in.op == Op::gather                              ? map
                             : program_.instructions[index].shape.rank() == 0 ? IndexMap{}
                                                                              : IndexMap{map[dim]};
  IndexMap source_map = map;
  source_map[dim] = normalized(Affine{});
  KernelNode node;
  node.kind = KernelNode::Kind::gather;
  node.instruction = instruction;
  node.dtype = in.dtype;
  node.base = layout.base;
  node.offset = offset_of(layout, source_map);
  node.index_stride = layout.strides[dim];
  node.index_extent = program_.instructions[source].shape[dim];
  node.inputs.push_back(value(index, index_map));
  node.invariant = node.offset.invariant() && nodes_[node.inputs[0]].invariant;
  return add(std::move(node), map, use_layout || !layouts_[instruction].defined());
}

// scatter_add with every term of the element's line tested in the eager
// order (row-major over the index: along the dim), so float sums round
// exactly as eager mode's.
int KernelGraph::scatter(int instruction, const IndexMap& map, bool use_layout) {
  const Instruction& in = program_.instructions[instruction];
  const int dim = static_cast<int>(in.attrs.values[0]);
  const Shape& index_shape = program_.instructions[in.inputs[1]].shape;
  KernelNode node;
  node.kind = KernelNode::Kind::compute;
  node.instruction = instruction;
  node.dtype = in.dtype;
  node.offset = normalized(map[dim]);
  node.index_extent = in.shape[dim];
  node.inputs.push_back(value(in.inputs[0], map));
  node.invariant = nodes_[node.inputs[0]].invariant && node.offset.invariant();
  for (int64_t k = 0; k < index_shape[dim]; k++) {
    IndexMap term = map;
    term[dim] = normalized(Affine{k, {}});
    for (int input : {in.inputs[1], in.inputs[2]}) {
      const int id = value(input, term);
      node.inputs.push_back(id);
      node.invariant = node.invariant && nodes_[id].invariant;
    }
  }
  return add(std::move(node), map, use_layout || !layouts_[instruction].defined());
}

std::vector<int> reachable(const KernelGraph& graph, const std::vector<int>& values) {
  std::vector<bool> needed(graph.nodes().size(), false);
  std::vector<int> stack(values.begin(), values.end());
  while (!stack.empty()) {
    const int id = stack.back();
    stack.pop_back();
    if (needed[id]) continue;
    needed[id] = true;
    for (int input : graph.node(id).inputs) stack.push_back(input);
  }
  std::vector<int> ids;
  for (size_t id = 0; id < needed.size(); id++) {
    if (needed[id]) ids.push_back(static_cast<int>(id));
  }
  return ids;
}

std::map<int, bool> reads_at_written_element(const KernelGraph& graph,
                                             const std::vector<int>& values, const Affine& write) {
  std::map<int, bool> reads;
  for (int id : reachable(graph, values)) {
    const KernelNode& node = graph.node(id);
    const bool gather = node.kind == KernelNode::Kind::gather;
    if (node.kind != KernelNode::Kind::read && !gather) continue;
    auto [entry, added] = reads.emplace(node.base, true);
    entry->second = entry->second && !gather && node.offset == write;
  }
  return reads;
}

}  // namespace lazylua::compiler
