// kernel_graph.h - what one kernel computes, as index arithmetic.
//
// A kernel loops over an index space (its "dims": the shape of what it
// writes, or of what it reduces). Every value it needs is an instruction
// evaluated at an IndexMap: an affine function from the kernel's loop
// indices to that instruction's multi-index. Views and broadcasts only
// change the map (permute swaps rows, slice adds a constant, expand zeroes
// a row), so they cost no memory traffic; a value that lives in a slot is a
// read at an affine element offset. The KernelGraph is the resulting
// expression DAG, shared by fusion (can two roots share a loop?) and code
// generation (which turns it into C).
#pragma once

#include <map>
#include <utility>
#include <vector>

#include "compiler/program.h"

namespace lazylua::compiler {

// constant + sum over d of coef[d] * index[d], index being the kernel's
// loop indices. Coefficients of extent-1 dims are kept at 0.
struct Affine {
  int64_t constant = 0;
  std::vector<int64_t> coef;

  bool operator==(const Affine& other) const = default;
  bool invariant() const;  // the same value at every index
};

// An instruction's multi-index as functions of the kernel's indices: one
// Affine per dim of the instruction.
using IndexMap = std::vector<Affine>;

// The map of the kernel's own dims onto an instruction of the same shape.
IndexMap identity_map(const Shape& shape);

// Where an instruction's value can be read straight from memory: the slot
// of instruction `base` (always contiguous) through a strided view of it.
struct Layout {
  int base = -1;  // the materialized instruction whose slot holds the data
  int64_t offset = 0;
  Strides strides;
  bool defined() const { return base >= 0; }
};

// The layout of every instruction, given which are materialized: their own
// slot for those, a view of one for view ops over a layout (a reshape only
// when the strides allow it, as Array::try_reshape_view), else undefined.
std::vector<Layout> compute_layouts(const Program& program, const std::vector<bool>& materialized);
// The layout of instruction i alone, given the layouts of its inputs.
Layout layout_of(const Program& program, const std::vector<bool>& materialized,
                 const std::vector<Layout>& layouts, int i);

// True when `to` has the extents of `from` but for extent-1 dims: such a
// reshape is index arithmetic on any value, even one never stored.
bool reshape_is_squeeze(const Shape& from, const Shape& to);

// True when the data of `layout` (an instruction of shape `from`) can be
// read as shape `to` by strides alone.
bool reshape_is_view(const Layout& layout, const Shape& from, const Shape& to);

// True for the instructions a kernel computes element by element from
// their inputs (unary, binary, where, cast, clamp, constants).
bool is_elementwise(const Instruction& instruction);
bool is_view(Op op);
// gather and index_select: a read of their input (which must have a
// layout) at a position taken from the index along one dim.
bool is_indexed_read(Op op);
// scatter_add whose index has the output's extents in every other dim:
// each output line along the dim gets the terms of one index line.
bool scatter_covers_lines(const Program& program, const Instruction& instruction);
// ... with few enough terms to test them all per output element: computed
// element by element (inlined); else a kernel adds each line's terms.
bool scatter_is_inlined(const Program& program, const Instruction& instruction);
// The most index terms an inlined scatter_add tests per output element.
constexpr int64_t kScatterInlineTerms = 8;

struct KernelNode {
  // gather: a read of `base` at `offset` + (inputs[0] - 1) * index_stride,
  // the 1-based position inputs[0] checked against [1, index_extent].
  enum class Kind { read, constant, compute, gather };
  Kind kind = Kind::compute;
  int instruction = -1;  // the value this node is (read: the instruction whose layout is read)
  DType dtype = DType::f32;
  // read: the slot of `base` at an element offset.
  int base = -1;
  Affine offset;
  // compute: the input nodes, in the instruction's input order.
  std::vector<int> inputs;
  bool invariant = false;  // the same at every index: computed once per call
  // gather: as above. A compute node of scatter_add: inputs are the base,
  // then (index, src) per term; `offset` is the output's position along
  // the scattered dim, index_extent that dim's extent.
  int64_t index_stride = 0;
  int64_t index_extent = 0;
};

class KernelGraph {
 public:
  // `dims`: the kernel's index space.
  KernelGraph(const Program& program, const std::vector<Layout>& layouts, const Shape& dims);

  // The node of `instruction` at `map` (memoized). The instruction must be
  // readable (a layout), elementwise, a view or a constant.
  int value(int instruction, const IndexMap& map);
  // The same, but computing `instruction` from its inputs even when it has
  // a slot: what a kernel that writes it does.
  int compute(int instruction, const IndexMap& map);

  // Declares that this kernel writes instruction `root` (dims-shaped,
  // contiguous) as node `node`: later reads of its slot at the identity
  // use the node; reads at another offset set `reads_own_output`.
  void add_root(int root, int node);
  // Moves a read's (or gather's) offset by -delta: its pointer moves by
  // +delta (Step::byte_offsets).
  void shift_read(int id, int64_t delta) { nodes_[id].offset.constant -= delta; }

  const Shape& dims() const { return dims_; }
  const std::vector<KernelNode>& nodes() const { return nodes_; }
  const KernelNode& node(int id) const { return nodes_[id]; }
  // A read of a slot this kernel writes, somewhere else than the element
  // being written: the kernel cannot be one loop.
  bool reads_own_output = false;

  // The map of an input of an elementwise instruction of shape `out`: the
  // input's dims are aligned to the right and extent-1 dims broadcast.
  IndexMap broadcast(const IndexMap& map, const Shape& out, const Shape& in) const;
  // The map of a view's input, or false for a reshape that is not squeeze-like.
  bool view_input(const Instruction& view, const Shape& input_shape, const IndexMap& map,
                  IndexMap* result) const;
  // The element offset of a read of `layout` at `map`.
  Affine offset_of(const Layout& layout, const IndexMap& map) const;

 private:
  int add(KernelNode node, const IndexMap& map, bool memoize);
  int evaluate(int instruction, const IndexMap& map, bool use_layout);
  // `instruction` read from the slot of `base` at `offset`: the one place
  // that makes read nodes, and that checks reads of this kernel's roots.
  int read(int instruction, int base, const Affine& offset, const IndexMap& map, bool memoize);
  int indexed_read(int instruction, const IndexMap& map, bool use_layout);
  int scatter(int instruction, const IndexMap& map, bool use_layout);
  Affine normalized(Affine affine) const;

  const Program& program_;
  const std::vector<Layout>& layouts_;
  Shape dims_;
  std::vector<KernelNode> nodes_;
  std::map<std::pair<int, std::vector<int64_t>>, int> memo_;
  std::map<int, int> roots_;  // base instruction -> node
};

// The nodes `values` depend on, in creation order (inputs first).
std::vector<int> reachable(const KernelGraph& graph, const std::vector<int>& values);

// The slots (by the instruction that owns them, Layout::base) that the
// nodes `values` depend on read, each with whether every read of it is at
// `write` (the element a kernel writing `values` at `write` stores): such a
// slot's memory may take the kernel's output (donation, donate.cpp), since
// each element is read before it is overwritten. A gather's read never is.
std::map<int, bool> reads_at_written_element(const KernelGraph& graph,
                                             const std::vector<int>& values, const Affine& write);

}  // namespace lazylua::compiler
