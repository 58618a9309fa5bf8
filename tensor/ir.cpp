// ir.cpp - building, hashing and evaluating IR nodes.
#include "ir.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "collectives.h"
#include "eager_ops.h"
#include "error.h"
#include "scan.h"
#include "sorting.h"

namespace lazylua {
namespace {

uint64_t mix(uint64_t hash, uint64_t word) {
  return hash_mix(hash, word);
}

// What a recorded node costs: the pooled block (object_pool.h rounds to 64
// bytes) and the malloc'd block of a typical inputs vector. Its shape,
// attrs and arrays are inline; a parameter's data is a buffer, charged on
// its own.
constexpr int64_t kRecordedNodeBytes = (sizeof(Node) + 63) / 64 * 64 + 32;

// What nodes leave free of a memory limit for the Lua heap: room to raise
// the error that refuses them, and to run the finalizers that free the
// tensors afterwards (Lua skips a finalizer for good when it cannot
// allocate for the call, and the graph it held would stay charged).
int64_t lua_reserve(const MemoryBudget& budget) {
  return std::min<int64_t>(budget.limit() / 16, int64_t{1} << 20);
}

// Charges a new node to the current memory limit, if any: refused unless
// the reserve stays free too (charged with the node, given back at once).
// A full collection first frees nodes that only dead tensors held (as for
// buffers, try_charge_or_reclaim); what is left is the script's own.
void charge_recorded_node(Node& node) {
  MemoryBudget* budget = current_memory_budget();
  if (!budget) return;
  const int64_t reserve = lua_reserve(*budget);
  const bool charged = budget->try_charge_or_reclaim(kRecordedNodeBytes + reserve);
  if (charged) budget->give_back(reserve);
  if (!charged) {
    const auto mib = [](int64_t bytes) { return static_cast<double>(bytes) / 1048576.0; };
    fail(
        "not enough memory: recording another operation would bring the interpreter past its "
        "memory limit of {:.1f} MiB ({:.1f} MiB in use); pending operations hold memory until a "
        "sync (tensor.mark_step) computes them",
        mib(budget->limit()), mib(budget->used()));
  }
  node.budget = budget;
}

}  // namespace

int attr_count(Op op, int input_rank) {
  switch (op) {
    case Op::reduce:
    case Op::arg_reduce:
    case Op::softmax:
    case Op::select:
    case Op::slice_update:
    case Op::select_update:
    case Op::argsort:
      return 2;
    case Op::slice:
      return 3;
    case Op::conv:
    case Op::conv_grad_input:
    case Op::conv_grad_weight:
      return input_rank - 1;  // groups, then one per spatial dim
    case Op::scan:
    case Op::max_pool2d:
    case Op::max_pool2d_grad:
      return 6;
    case Op::scan_output:
      return 2;
    case Op::cumsum:
    case Op::collective:
    case Op::cat:
    case Op::gather:
    case Op::index_select:
    case Op::scatter_add:
      return 1;
    case Op::permute:
      return input_rank;
    default:
      return 0;
  }
}

// A 64-bit mixing step (the finalizer of splitmix64): each combined word
// changes every bit of the hash.
uint64_t hash_mix(uint64_t hash, uint64_t word) {
  uint64_t z = hash ^ (word + 0x9e3779b97f4a7c15ULL + (hash << 6) + (hash >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

namespace {

uint64_t double_bits(double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

void compute_hash(Node& node) {
  uint64_t hash = mix(static_cast<uint64_t>(node.op), node.sub_op);
  hash = mix(hash, static_cast<uint64_t>(node.dtype));
  hash = mix(hash, static_cast<uint64_t>(node.shape.rank()));
  for (int64_t extent : node.shape) hash = mix(hash, static_cast<uint64_t>(extent));
  const int input_rank = node.inputs.empty() ? 0 : node.inputs[0]->shape.rank();
  for (int i = 0; i < attr_count(node.op, input_rank); i++) {
    hash = mix(hash, static_cast<uint64_t>(node.attrs[i]));
  }
  // Constants are part of the program; scalars and data are its inputs.
  if (node.op == Op::constant) hash = mix(hash, double_bits(node.scalar.value));
  node.local_hash = hash;
  for (const NodeRef& input : node.inputs) hash = mix(hash, input->hash);
  node.hash = hash;
}

}  // namespace

const char* op_name(Op op) {
  return kOpNames[static_cast<int>(op)];
}

// A script that records a million dependent ops before syncing builds a
// chain a million nodes deep; releasing it recursively would overflow the
// stack. The outermost destructor drains a worklist instead: nested ones
// only hand their inputs over.
Node::Node() = default;

namespace {

// The worklist keeps its capacity across calls: most nodes die one by one,
// and a fresh vector each time cost a malloc. Its state is trivially
// destructible, so a node another thread-exit destructor releases late
// still finds it; the owner below frees the vector when the thread ends (a
// host thread running scripts may come and go: the vector, as large as the
// longest chain released, was leaked with each), and after that a late
// destructor drains into a vector of its own.
thread_local std::vector<NodeRef>* t_worklist = nullptr;
thread_local bool t_draining = false;
thread_local bool t_thread_exiting = false;

struct WorklistOwner {
  bool registered = false;
  ~WorklistOwner() {
    t_thread_exiting = true;
    delete t_worklist;  // empty: draining finishes before a destructor returns
    t_worklist = nullptr;
  }
};
thread_local WorklistOwner t_worklist_owner;

}  // namespace

Node::~Node() {
  if (budget) budget->give_back(kRecordedNodeBytes);
  // Inputs whose last reference this was are queued and destroyed in the
  // outermost destructor's loop, not by recursion.
  if (t_draining) {
    for (NodeRef& input : inputs) {
      if (input) t_worklist->push_back(std::move(input));
    }
    return;
  }
  std::vector<NodeRef> late;
  if (!t_worklist) {
    if (t_thread_exiting) {
      t_worklist = &late;
    } else {
      t_worklist_owner.registered = true;  // its destructor now runs when the thread ends
      t_worklist = new std::vector<NodeRef>();
    }
  }
  for (NodeRef& input : inputs) {
    if (input) t_worklist->push_back(std::move(input));
  }
  t_draining = true;
  while (!t_worklist->empty()) {
    NodeRef node = std::move(t_worklist->back());
    t_worklist->pop_back();
    node.reset();
  }
  t_draining = false;
  if (t_worklist == &late) t_worklist = nullptr;
}

const char* op_name(Op op, uint8_t sub_op, const int64_t* attrs) {
  switch (op) {
    case Op::unary:
      return unary_op_name(static_cast<UnaryOp>(sub_op));
    case Op::binary:
      return binary_op_name(static_cast<BinaryOp>(sub_op));
    case Op::reduce:
      return reduce_op_name(static_cast<ReduceOp>(sub_op));
    case Op::arg_reduce:
      return sub_op ? "argmax" : "argmin";
    case Op::softmax:
      return attrs[1] ? "log_softmax" : "softmax";
    case Op::collective:
      return collective_op_name(static_cast<CollectiveOp>(sub_op));
    case Op::conv:
    case Op::conv_grad_input:
    case Op::conv_grad_weight: {
      // "conv2d", "conv2d_grad_input"...: the rank is in sub_op.
      static const char* const kNames[3][4] = {
          {"conv", "conv1d", "conv2d", "conv3d"},
          {"conv_grad_input", "conv1d_grad_input", "conv2d_grad_input", "conv3d_grad_input"},
          {"conv_grad_weight", "conv1d_grad_weight", "conv2d_grad_weight", "conv3d_grad_weight"}};
      const int kind = op == Op::conv ? 0 : op == Op::conv_grad_input ? 1 : 2;
      return kNames[kind][sub_op <= 3 ? sub_op : 0];
    }
    default:
      return op_name(op);
  }
}

const char* Node::name() const {
  return op_name(op, sub_op, attrs);
}

std::string location_string(const SourceLocation& location) {
  if (location.line == 0) return location.chunk;
  return fmt::format("{}:{}", location.chunk, location.line);
}

Attrs::Attrs(std::initializer_list<int64_t> list) {
  LAZYLUA_ASSERT(list.size() <= static_cast<size_t>(kMaxDims));
  std::copy(list.begin(), list.end(), values);
}

Attrs::Attrs(const int64_t* begin, int count) {
  LAZYLUA_ASSERT(count <= kMaxDims);
  std::copy(begin, begin + count, values);
}

namespace {
// Relaxed: a serial only orders the nodes one thread records against the
// ones that existed before (call_replay.cpp), never against other threads.
std::atomic<uint64_t> g_node_serial{0};
}  // namespace

uint64_t node_serial() {
  return g_node_serial.load(std::memory_order_relaxed);
}

NodeRef make_node(Op op, uint8_t sub_op, DType dtype, const Shape& shape,
                  std::vector<NodeRef> inputs, const Attrs& attrs, SourceLocation location) {
  NodeRef node(new Node);
  charge_recorded_node(*node);
  node->serial = g_node_serial.fetch_add(1, std::memory_order_relaxed) + 1;
  node->op = op;
  node->sub_op = sub_op;
  node->dtype = dtype;
  node->shape = shape;
  node->inputs = std::move(inputs);
  std::copy(attrs.values, attrs.values + kMaxDims, node->attrs);
  node->location = location;
  compute_hash(*node);
  return node;
}

NodeRef copy_node(const Node& node, std::vector<NodeRef> inputs, SourceLocation location) {
  LAZYLUA_ASSERT(!node.is_leaf());  // a leaf's hash covers its value: make_scalar, make_parameter
  NodeRef copy = make_node(node.op, node.sub_op, node.dtype, node.shape, std::move(inputs),
                           Attrs(node.attrs, kMaxDims), location);
  copy->scalar = node.scalar;
  copy->body = node.body;
  if (node.body) {
    copy->local_hash = hash_mix(copy->local_hash, node.body->hash);
    copy->hash = hash_mix(copy->hash, node.body->hash);
  }
  return copy;
}

NodeRef make_parameter(Array data, SourceLocation location) {
  const Array contiguous_data = contiguous(data);
  NodeRef node = make_node(Op::parameter, 0, data.dtype, data.shape, {}, {}, location);
  node->data = contiguous_data;
  return node;
}

NodeRef make_scalar(ops::Scalar value, DType dtype, SourceLocation location) {
  // The value converts to `dtype` when the graph runs, exactly as a fill
  // would (0.5 into bool is true).
  const bool special = value.value == 0 || value.value == 1;
  NodeRef node(new Node);
  charge_recorded_node(*node);
  node->op = special ? Op::constant : Op::scalar;
  node->dtype = dtype;
  node->scalar = value;
  node->location = location;
  compute_hash(*node);
  return node;
}

Array evaluate_node(const Node& node, const std::vector<Array>& in) {
  const int64_t* a = node.attrs;
  auto optional_dim = [](int64_t dim) {
    return dim < 0 ? std::nullopt : std::optional<int>(static_cast<int>(dim));
  };
  switch (node.op) {
    case Op::parameter:
      return node.data;
    case Op::scalar:
    case Op::constant:
      return ops::full(Shape{}, node.scalar, node.dtype);
    case Op::unary:
      return ops::unary(static_cast<UnaryOp>(node.sub_op), in[0]);
    case Op::binary:
      return ops::binary(static_cast<BinaryOp>(node.sub_op), in[0], in[1]);
    case Op::where:
      return ops::where(in[0], in[1], in[2]);
    case Op::cast:
      return ops::cast(in[0], node.dtype);
    case Op::clamp: {
      auto bound = [&](int bit, const Array& value) -> std::optional<ops::Scalar> {
        if (!(node.sub_op & bit)) return std::nullopt;
        if (value.dtype == DType::i64) return ops::Scalar::from_integer(value.data<int64_t>()[0]);
        return ops::Scalar::from_double(ops::cast(value, DType::f64).data<double>()[0]);
      };
      return ops::clamp(in[0], bound(1, in[1]), bound(2, in[2]));
    }
    case Op::reduce:
      return ops::reduce(static_cast<ReduceOp>(node.sub_op), in[0], optional_dim(a[0]), a[1]);
    case Op::arg_reduce:
      return ops::arg_max_min(node.sub_op, in[0], optional_dim(a[0]), a[1]);
    case Op::softmax:
      return ops::softmax(in[0], static_cast<int>(a[0]), a[1]);
    case Op::cumsum:
      return ops::cumsum(in[0], static_cast<int>(a[0]));
    case Op::matmul:
      return ops::matmul(in[0], in[1]);
    case Op::reshape:
      return ops::reshape(in[0], node.shape);
    case Op::permute: {
      std::vector<int> order(a, a + in[0].rank());
      return ops::permute(in[0], order);
    }
    case Op::slice:
      return ops::narrow(in[0], static_cast<int>(a[0]), a[1], a[2]);
    case Op::select:
      return ops::select(in[0], static_cast<int>(a[0]), a[1]);
    case Op::expand:
      return ops::expand(in[0], node.shape);
    case Op::slice_update:
    case Op::select_update: {
      Array out = Array::empty(in[0].shape, in[0].dtype);
      copy_kernel(in[0], out);
      const int dim = static_cast<int>(a[0]);
      const Array target = node.op == Op::slice_update ? out.narrowed(dim, a[1], in[1].shape[dim])
                                                       : out.selected(dim, a[1]);
      copy_kernel(in[1], target);
      return out;
    }
    case Op::cat:
      return ops::cat(in, static_cast<int>(a[0]));
    case Op::gather:
      return ops::gather(in[0], static_cast<int>(a[0]), in[1]);
    case Op::index_select:
      return ops::index_select(in[0], static_cast<int>(a[0]), in[1]);
    case Op::scatter_add:
      return ops::scatter_add(in[0], static_cast<int>(a[0]), in[1], in[2]);
    case Op::conv:
      return ops::conv(in[0], in[1], in.size() > 2 ? &in[2] : nullptr,
                       ops::conv_window_from_attrs(node.sub_op, a));
    case Op::conv_grad_input:
      return ops::conv_grad_input(in[0], in[1], in.size() > 2 ? &in[2] : nullptr, node.shape,
                                  ops::conv_window_from_attrs(node.sub_op, a));
    case Op::conv_grad_weight:
      return ops::conv_grad_weight(in[0], in[1], node.shape,
                                   ops::conv_window_from_attrs(node.sub_op, a));
    case Op::max_pool2d:
      return ops::max_pool2d(in[0], ops::window_from_attrs(a));
    case Op::max_pool2d_grad:
      return ops::max_pool2d_grad(in[0], in[1], ops::window_from_attrs(a));
    case Op::argsort:
      return ops::argsort(in[0], static_cast<int>(a[0]), a[1] != 0);
    case Op::collective:
      return ops::collective(in[0], static_cast<CollectiveOp>(node.sub_op), static_cast<int>(a[0]),
                             in[1], in[2]);
    case Op::scan:
      return evaluate_scan(node, in);
    case Op::scan_output:
      return scan_output_view(in[0], node.dtype, node.shape, a[1]);
  }
  LAZYLUA_ASSERT(false);
}

}  // namespace lazylua
