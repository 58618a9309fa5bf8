// autograd.h - reverse-mode gradients over tensor ops (docs/architecture.md §6).
//
// Each differentiable op here runs the plain op of tensor.h and, when an
// input requires a gradient (and grad mode is on), gives the result a
// GradNode: the IR op it computed (an OpCall), the inputs, and the values
// the op's gradient rule will read. The rules are one table keyed by IR op
// (autograd_rules.cpp), written with the same tensor ops, so in lazy mode
// backward is recorded too and the forward pass, the backward pass and the
// optimizer update of a training step become one graph. An API call made of
// several IR ops (transpose is a permute, stack a cat of unsqueezes)
// records the gradients of those ops. The engine (backward) walks the
// GradNodes from a root in reverse topological order, sums the gradients
// that reach each node, and adds those that reach leaves (tensors that
// require grad and were not computed by a recorded op) into their `grad`.
//
// Saved values are snapshots: the IR node of the value in lazy mode, which
// later in-place ops cannot change; in eager mode the data, with the
// buffer's version checked when backward uses it. A tensor that requires a
// gradient cannot be written in place while grad mode is on (the gradient of
// the ops that read its old value would be wrong); optimizers update
// parameters inside no_grad.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "tensor.h"

namespace lazylua {

// An op as autograd records it: the IR op, its sub-op and attrs, as a Node
// of ir.h has them. Eager mode records no nodes, but the same descriptor
// names what it computed.
struct OpCall {
  Op op;
  uint8_t sub_op = 0;
  Attrs attrs = {};
  static OpCall of(const Node& node);
};

namespace autograd {

// A value backward may need: its shape and dtype always; when the rule
// reads it (`kept`), the IR node in lazy mode (immutable), or the data and
// its buffer's version in eager mode.
struct Saved {
  bool kept = false;
  NodeRef node;
  Array data;
  uint32_t version = 0;
  Shape shape;
  DType dtype = DType::f32;
};

}  // namespace autograd

struct GradNode : public RefCounted {
  OpCall call;                 // the op: its gradient rule, its name in messages
  std::vector<Tensor> inputs;  // null where no gradient is needed
  // Per input of the op, then its result: what the rule reads. Cleared
  // (`freed`) once backward has run through the node.
  std::vector<autograd::Saved> saved;
  autograd::Saved result;
  bool freed = false;
  // A node with several results (a scan): TensorImpl::grad_output says
  // which one a tensor is, and backward_multi gets all their gradients
  // (null for those that got none).
  int outputs = 1;
  std::function<std::vector<Tensor>(const std::vector<Tensor>& grads)> backward_multi;
  uint64_t visit_epoch = 0;

  const char* name() const { return op_name(call.op, call.sub_op, call.attrs.values); }
};

namespace autograd {

// Grad mode of the tensor's context (tensor.no_grad turns it off).
bool grad_enabled(const Context* context);
void set_grad_enabled(Context* context, bool enabled);

// Marks a leaf as needing a gradient. Only floating tensors can; a tensor
// computed by a recorded op cannot change its mind (use detach()).
void set_requires_grad(const Tensor& t, bool required);
// The same value without a gradient history (shares memory with t).
Tensor detach(const Tensor& t);
// Accumulates d(root)/d(leaf) into every leaf that requires grad. `grad` is
// d(something)/d(root); none means 1 for a single-element root.
void backward(const Tensor& root, std::optional<Tensor> grad);
// Raises an error if writing `self` in place (from `source`, if given)
// would break a gradient.
void check_in_place(const Tensor& self, const char* op, const Tensor& source = Tensor{});

// ---- Differentiable ops: as in tensor.h, plus recording the IR op for its
// gradient rule (autograd_ops.cpp) ----
Tensor unary(UnaryOp op, const Tensor& a);
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);
Tensor binary(BinaryOp op, const Tensor& a, ops::Scalar b);
Tensor binary(BinaryOp op, ops::Scalar a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor clamp(const Tensor& a, std::optional<ops::Scalar> low, std::optional<ops::Scalar> high);
Tensor cast(const Tensor& a, DType dtype);
Tensor clone(const Tensor& a);
Tensor contiguous(const Tensor& a);

Tensor reduce(ReduceOp op, const Tensor& a, std::optional<int> dim, bool keepdim);
std::pair<Tensor, Tensor> max_min_dim(bool is_max, const Tensor& a, int dim, bool keepdim);
Tensor softmax(const Tensor& a, int dim, bool log);
Tensor cumsum(const Tensor& a, int dim);
Tensor matmul(const Tensor& a, const Tensor& b);

Tensor view(const Tensor& a, const Shape& shape);
Tensor reshape(const Tensor& a, const Shape& shape);
Tensor transpose(const Tensor& a, int dim_a, int dim_b);
Tensor permute(const Tensor& a, const std::vector<int>& order);
Tensor narrow(const Tensor& a, int dim, int64_t start, int64_t length);
Tensor select(const Tensor& a, int dim, int64_t index);
Tensor squeeze(const Tensor& a, std::optional<int> dim);
Tensor unsqueeze(const Tensor& a, int dim);
Tensor expand(const Tensor& a, const Shape& shape);
Tensor flatten(const Tensor& a, int start_dim, int end_dim);

Tensor cat(const std::vector<Tensor>& inputs, int dim);
Tensor stack(const std::vector<Tensor>& inputs, int dim);
Tensor gather(const Tensor& a, int dim, const Tensor& index);
Tensor index_select(const Tensor& a, int dim, const Tensor& index);
Tensor flip(const Tensor& a, const std::vector<int>& dims);
Tensor scatter_add(const Tensor& base, int dim, const Tensor& index, const Tensor& src);
// bias: null or [O]. conv_transpose records conv_grad_input.
Tensor conv(const Tensor& x, const Tensor& weight, const Tensor* bias, const ConvWindow& window);
Tensor conv_transpose(const Tensor& x, const Tensor& weight, const Tensor* bias,
                      const ConvWindow& window, const int64_t* output_padding);
Tensor max_pool2d(const Tensor& x, const Window2d& window);

}  // namespace autograd
}  // namespace lazylua
