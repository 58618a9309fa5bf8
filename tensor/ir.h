// ir.h - the lazy IR: one node type, one list of ops.
//
// Every tensor op a script performs in lazy mode becomes a Node. Nodes are
// immutable once built (but for the cached result of a sync), reference
// counted, and carry the Lua line that recorded them. A graph is whatever
// the live tensors reach.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "array.h"
#include "eager_ops.h"
#include "memory_budget.h"
#include "object_pool.h"
#include "x_enum.h"

namespace lazylua {

// The ops of the IR. Unary, binary and reduce nodes carry the exact
// operation in `sub_op` (a UnaryOp, BinaryOp or ReduceOp). The comment says
// what `attrs` hold.
// A table, one row an op with its comment aligned:
// clang-format off
#define LAZYLUA_IR_OPS(X)                                                                      \
  X(parameter)     /* materialized data (`data`): an input of the graph */                     \
  X(scalar)        /* a Lua number: a scalar input of the graph (`scalar`) */                  \
  X(constant)      /* 0 or 1, baked into the graph (`scalar`) */                               \
  X(unary)         /* sub_op: UnaryOp */                                                       \
  X(binary)        /* sub_op: BinaryOp; inputs of any dtypes, promoted as ops::binary does */  \
  X(where)         /* (cond, a, b) */                                                          \
  X(cast)          /* to the node's dtype */                                                   \
  X(clamp)         /* (x, low, high) with scalar bounds; sub_op: 1 has low, 2 has high */      \
  X(reduce)        /* sub_op: ReduceOp; attrs: dim (-1: all), keepdim */                       \
  X(arg_reduce)    /* sub_op: 1 max, 0 min; attrs: dim (-1: all), keepdim */                   \
  X(softmax)       /* attrs: dim, log */                                                       \
  X(cumsum)        /* attrs: dim */                                                            \
  X(matmul)        /* (a, b), both of the node's dtype */                                      \
  X(reshape)       /* to the node's shape */                                                   \
  X(permute)       /* attrs: the order of the input dims */                                    \
  X(slice)         /* attrs: dim, start, length (narrow) */                                    \
  X(select)        /* attrs: dim, index (drops dim) */                                         \
  X(expand)        /* to the node's shape (broadcast) */                                       \
  X(slice_update)  /* (base, value): base with a slice replaced; attrs: dim, start */          \
  X(select_update) /* (base, value): base with one index replaced; attrs: dim, index */        \
  X(cat)           /* (inputs...); attrs: dim */                                               \
  X(gather)        /* (input, index); attrs: dim */                                            \
  X(index_select)  /* (input, index); attrs: dim */                                            \
  X(scatter_add)   /* (base, index, src): base plus src added at index; attrs: dim */          \
  X(conv)          /* (x, weight [, bias]); sub_op: spatial rank 1-3; attrs: groups, then */  \
                   /* per spatial dim stride, dilation, pads packed (ops::conv_window_*) */   \
  X(conv_grad_input)  /* (grad_y, weight [, bias]) -> grad_x of the node's shape, also the */  \
                      /* transposed conv; sub_op, attrs: as conv */                            \
  X(conv_grad_weight) /* (grad_y, x) -> grad_weight of the node's shape; as conv */            \
  X(max_pool2d)      /* (x); attrs: window */                                                  \
  X(max_pool2d_grad) /* (grad_y, x) -> grad_x; attrs: window */                                \
  X(argsort)       /* (x) -> i64 1-based stable positions; attrs: dim, descending */          \
  X(collective)    /* (x [, previous]): all-reduce or broadcast among the ranks of an MPI */  \
                   /* job; sub_op: CollectiveOp; attrs: root; `previous` only orders */       \
                   /* the calls (collectives.h) */                                            \
  X(scan)          /* (carries, xs, captured): Node::body run attrs[4] times; the value is */  \
                   /* every output packed as bytes; attrs: counts of carries, xs, captured, */ \
                   /* ys, then length, reverse (see scan.h) */                                 \
  X(scan_output)   /* (scan): output attrs[0] of a scan, a view at byte attrs[1] */
// clang-format on

LAZYLUA_X_ENUM(Op, uint8_t, LAZYLUA_IR_OPS)

const char* op_name(Op op);
// The name of one operation ("add", "sum", "log_softmax"...): the sub-op's
// for unary, binary and reduce ops, else the op's, as Node::name() gives it.
const char* op_name(Op op, uint8_t sub_op, const int64_t* attrs);

// Where a node was recorded: an interned chunk name and a line; line 0
// means the chunk is a whole label ("?" for unknown, or a library's name
// for the op, as "model.onnx: node 'fc' (Gemm)" of an imported model).
struct SourceLocation {
  const char* chunk = "?";
  int line = 0;
};
// "train.lua:12" (Lua's short_src style), or the label.
std::string location_string(const SourceLocation& location);

class Node;
using NodeRef = Ref<Node>;
struct ScanBody;

class Node : public RefCounted {
 public:
  LAZYLUA_POOLED_OBJECT
  Op op;
  uint8_t sub_op = 0;
  DType dtype;
  Shape shape;
  std::vector<NodeRef> inputs;
  int64_t attrs[kMaxDims] = {};
  ops::Scalar scalar;  // scalar and constant nodes
  Array data;          // parameter nodes
  SourceLocation location;
  uint64_t local_hash = 0;  // op, sub_op, attrs, dtype, shape (and a constant's value)
  uint64_t hash = 0;        // local_hash and the inputs' hashes: the whole expression
  // Nodes are numbered in the order they are made (node_serial): a recorded
  // call (call_replay.h) tells the nodes it made from the older ones it read.
  uint64_t serial = 0;

  // Once a sync has computed this node, its value; later syncs treat the
  // node as a parameter instead of recomputing it.
  Array result;
  Ref<ScanBody> body;  // scan nodes: the loop body (scan.h)
  // The memory limit this node is charged to while it lives (set when a
  // script records it under one: memory_budget.h, make_node).
  Ref<MemoryBudget> budget;

  // Scratch for graph extraction (Context::extract): the epoch of the last walk
  // that reached this node and its position in that walk's order.
  uint64_t visit_epoch = 0;
  int32_t visit_index = -1;

  Node();  // out of line: ScanBody is complete only in ir.cpp
  // Destroys chains of inputs without recursion (see ir.cpp).
  ~Node();

  // A human-readable name of this node's operation ("add", "sum", ...).
  const char* name() const;
  bool is_leaf() const { return op == Op::parameter || op == Op::scalar || op == Op::constant; }
  // A parameter with no data: an input of a scan body (sub_op 1; attrs[0]
  // is its input number).
  bool is_placeholder() const { return op == Op::parameter && sub_op == 1; }
};

// Op-specific integers of a node (see LAZYLUA_IR_OPS).
struct Attrs {
  int64_t values[kMaxDims] = {};
  Attrs() = default;
  Attrs(std::initializer_list<int64_t> list);
  Attrs(const int64_t* begin, int count);
};

// Builds a node and computes its hash. The caller (tensor.cpp) has already
// validated shapes and dtypes with the op rules. Under a memory limit
// (current_memory_budget) the node is charged an estimate of its size, so
// that a script piling up pending ops meets the limit: it throws Error
// when the limit refuses (make_scalar too).
NodeRef make_node(Op op, uint8_t sub_op, DType dtype, const Shape& shape,
                  std::vector<NodeRef> inputs, const Attrs& attrs, SourceLocation location);
NodeRef make_parameter(Array data, SourceLocation location);
// A node doing what `node` (not a leaf) does (op, attrs, scan body) on
// other inputs of the same shapes and dtypes, located at `location`.
NodeRef copy_node(const Node& node, std::vector<NodeRef> inputs, SourceLocation location);
// The serial of the last node made (Node::serial).
uint64_t node_serial();
// A Lua number: 0 and 1 become constants, anything else a scalar input.
NodeRef make_scalar(ops::Scalar value, DType dtype, SourceLocation location);

// How many of a node's attrs its op reads (the rest may hold anything);
// input_rank is the rank of its first input (a permute's order has one
// entry per dim). Hashes and CSE compare just these.
int attr_count(Op op, int input_rank);

// Combines a word into a 64-bit hash (used for node hashes and graph keys).
uint64_t hash_mix(uint64_t hash, uint64_t word);

// Computes a node's value from its inputs' values with the eager kernels:
// the reference interpreter's one step, and the compiler's fallback.
Array evaluate_node(const Node& node, const std::vector<Array>& inputs);

}  // namespace lazylua
