// autograd_ops.cpp - the differentiable entry points of autograd.h: each runs
// the plain op of tensor.h and records the IR op it computed (record()),
// whose gradient is the row of that op in autograd_rules.cpp. An API call
// made of several IR ops records each of them.
#include "autograd_internal.h"

namespace lazylua::autograd {
namespace {

using ops::Scalar;

OpCall call(Op op, uint8_t sub_op = 0, Attrs attrs = {}) {
  return {op, sub_op, attrs};
}

Attrs order_attrs(const std::vector<int>& order) {
  Attrs attrs;
  for (size_t d = 0; d < order.size(); d++) attrs.values[d] = order[d];
  return attrs;
}

Attrs window_attrs(const Window2d& window) {
  Attrs attrs;
  ops::window_to_attrs(window, attrs.values);
  return attrs;
}

bool any_needs_grad(const std::vector<Tensor>& inputs) {
  for (const Tensor& t : inputs) {
    if (needs_grad(t)) return true;
  }
  return false;
}

}  // namespace

// ---- Elementwise ----

// The two most common ops return before building record's input list when
// no input wants a gradient (recording an op is meant to cost well under a
// microsecond, and that list is a heap allocation).
Tensor unary(UnaryOp op, const Tensor& a) {
  Tensor out = lazylua::unary(op, a);
  if (!needs_grad(a)) return out;
  return record(out, call(Op::unary, static_cast<uint8_t>(op)), {a});
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  Tensor out = lazylua::binary(op, a, b);
  if (!needs_grad(a) && !needs_grad(b)) return out;
  return record(out, call(Op::binary, static_cast<uint8_t>(op)), {a, b});
}

// A Lua number operand is a scalar input of the IR node; as a tensor of the
// result's dtype the rule can read it (the gradient of a * 3 is g * 3).
Tensor binary(BinaryOp op, const Tensor& a, Scalar b) {
  Tensor out = lazylua::binary(op, a, b);
  if (!needs_grad(a)) return out;
  const Tensor s = scalar_tensor(a->context.get(), b, out->dtype);
  return record(out, call(Op::binary, static_cast<uint8_t>(op)), {a, s});
}

Tensor binary(BinaryOp op, Scalar a, const Tensor& b) {
  Tensor out = lazylua::binary(op, a, b);
  if (!needs_grad(b)) return out;
  const Tensor s = scalar_tensor(b->context.get(), a, out->dtype);
  return record(out, call(Op::binary, static_cast<uint8_t>(op)), {s, b});
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  return record(lazylua::where(cond, a, b), call(Op::where), {cond, a, b});
}

// The bounds are inputs of the IR node; here they are tensors of a's dtype,
// the dtype clamp compares in (a bound that is absent is never read).
Tensor clamp(const Tensor& a, std::optional<Scalar> low, std::optional<Scalar> high) {
  Tensor out = lazylua::clamp(a, low, high);
  if (!needs_grad(a)) return out;
  Context* c = a->context.get();
  auto bound = [&](std::optional<Scalar> value) {
    return scalar_tensor(c, value.value_or(Scalar::from_integer(0)), a->dtype);
  };
  const uint8_t which = (low ? 1 : 0) | (high ? 2 : 0);
  return record(out, call(Op::clamp, which), {a, bound(low), bound(high)});
}

Tensor cast(const Tensor& a, DType dtype) {
  return record(lazylua::cast(a, dtype), call(Op::cast), {a});
}

// clone and contiguous are no IR op of their own (a lazy clone is the same
// node as its input): as ops they are a cast to their own dtype, whose
// gradient is g itself.
Tensor clone(const Tensor& a) {
  return record(lazylua::clone(a), call(Op::cast), {a});
}

Tensor contiguous(const Tensor& a) {
  return record(lazylua::contiguous(a), call(Op::cast), {a});
}

// ---- Reductions, softmax, matmul ----

Tensor reduce(ReduceOp op, const Tensor& a, std::optional<int> dim, bool keepdim) {
  return record(lazylua::reduce(op, a, dim, keepdim),
                call(Op::reduce, static_cast<uint8_t>(op), {dim.value_or(-1), keepdim}), {a});
}

// The values are a max or min reduce; their gradient goes to the position
// the indices name (PyTorch's max(dim)), so the indices are a second input
// of the recorded reduce (see reduce's rule).
std::pair<Tensor, Tensor> max_min_dim(bool is_max, const Tensor& a, int dim, bool keepdim) {
  auto [values, indices] = lazylua::max_min_dim(is_max, a, dim, keepdim);
  const ReduceOp op = is_max ? ReduceOp::max : ReduceOp::min;
  values = record(values, call(Op::reduce, static_cast<uint8_t>(op), {dim, keepdim}), {a, indices});
  return {values, indices};
}

Tensor softmax(const Tensor& a, int dim, bool log) {
  return record(lazylua::softmax(a, dim, log), call(Op::softmax, 0, {dim, log}), {a});
}

Tensor cumsum(const Tensor& a, int dim) {
  return record(lazylua::cumsum(a, dim), call(Op::cumsum, 0, {dim}), {a});
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  return record(lazylua::matmul(a, b), call(Op::matmul), {a, b});
}

// ---- Views (reshape, permute, slice, select and expand in the IR) ----

Tensor view(const Tensor& a, const Shape& shape) {
  return record(lazylua::view(a, shape), call(Op::reshape), {a});
}
Tensor reshape(const Tensor& a, const Shape& shape) {
  return record(lazylua::reshape(a, shape), call(Op::reshape), {a});
}
Tensor squeeze(const Tensor& a, std::optional<int> dim) {
  return record(lazylua::squeeze(a, dim), call(Op::reshape), {a});
}
Tensor unsqueeze(const Tensor& a, int dim) {
  return record(lazylua::unsqueeze(a, dim), call(Op::reshape), {a});
}
Tensor flatten(const Tensor& a, int start_dim, int end_dim) {
  return record(lazylua::flatten(a, start_dim, end_dim), call(Op::reshape), {a});
}

// The plain op first: it checks the dims (and the order's length).
Tensor transpose(const Tensor& a, int dim_a, int dim_b) {
  Tensor out = lazylua::transpose(a, dim_a, dim_b);
  std::vector<int> order(static_cast<size_t>(a->shape.rank()));
  for (size_t d = 0; d < order.size(); d++) order[d] = static_cast<int>(d);
  if (!order.empty()) std::swap(order[dim_a], order[dim_b]);
  return record(out, call(Op::permute, 0, order_attrs(order)), {a});
}

Tensor permute(const Tensor& a, const std::vector<int>& order) {
  Tensor out = lazylua::permute(a, order);
  return record(out, call(Op::permute, 0, order_attrs(order)), {a});
}

Tensor narrow(const Tensor& a, int dim, int64_t start, int64_t length) {
  return record(lazylua::narrow(a, dim, start, length), call(Op::slice, 0, {dim, start, length}),
                {a});
}

Tensor select(const Tensor& a, int dim, int64_t index) {
  return record(lazylua::select(a, dim, index), call(Op::select, 0, {dim, index}), {a});
}

Tensor expand(const Tensor& a, const Shape& shape) {
  return record(lazylua::expand(a, shape), call(Op::expand), {a});
}

// ---- Joins and indexing ----

Tensor cat(const std::vector<Tensor>& inputs, int dim) {
  return record(lazylua::cat(inputs, dim), call(Op::cat, 0, {dim}), inputs);
}

// stack is a cat of the inputs unsqueezed at dim (tensor.cpp): the result
// is lazylua::stack's (its checks and messages), its gradient that of the
// cat and the unsqueezes.
Tensor stack(const std::vector<Tensor>& inputs, int dim) {
  Tensor out = lazylua::stack(inputs, dim);
  if (!any_needs_grad(inputs)) return out;
  std::vector<Tensor> parts;
  for (const Tensor& input : inputs) parts.push_back(autograd::unsqueeze(input, dim));
  return record(out, call(Op::cat, 0, {dim}), parts);
}

Tensor gather(const Tensor& a, int dim, const Tensor& index) {
  return record(lazylua::gather(a, dim, index), call(Op::gather, 0, {dim}), {a, index});
}

Tensor index_select(const Tensor& a, int dim, const Tensor& index) {
  return record(lazylua::index_select(a, dim, index), call(Op::index_select, 0, {dim}), {a, index});
}

// flip is an index_select per flipped dim (tensor.cpp), recorded as such.
Tensor flip(const Tensor& a, const std::vector<int>& dims) {
  if (!needs_grad(a)) return lazylua::flip(a, dims);
  Tensor out = a;
  for (const auto& [dim, positions] : flip_steps(a, dims))
    out = autograd::index_select(out, dim, positions);
  return out.get() == a.get() ? autograd::clone(a) : out;
}

Tensor scatter_add(const Tensor& base, int dim, const Tensor& index, const Tensor& src) {
  return record(lazylua::scatter_add(base, dim, index, src), call(Op::scatter_add, 0, {dim}),
                {base, index, src});
}

// ---- Convolution and pooling ----

namespace {

Attrs conv_attrs(const ConvWindow& window) {
  Attrs attrs;
  ops::conv_window_to_attrs(window, attrs.values);
  return attrs;
}

std::vector<Tensor> conv_inputs(const Tensor& x, const Tensor& weight, const Tensor* bias) {
  if (bias) return {x, weight, *bias};
  return {x, weight};
}

}  // namespace

Tensor conv(const Tensor& x, const Tensor& weight, const Tensor* bias, const ConvWindow& window) {
  Tensor out = lazylua::conv(x, weight, bias, window);
  if (!needs_grad(x) && !needs_grad(weight) && !(bias && needs_grad(*bias))) return out;
  return record(out, call(Op::conv, static_cast<uint8_t>(window.rank), conv_attrs(window)),
                conv_inputs(x, weight, bias));
}

Tensor conv_transpose(const Tensor& x, const Tensor& weight, const Tensor* bias,
                      const ConvWindow& window, const int64_t* output_padding) {
  Tensor out = lazylua::conv_transpose(x, weight, bias, window, output_padding);
  if (!needs_grad(x) && !needs_grad(weight) && !(bias && needs_grad(*bias))) return out;
  return record(out,
                call(Op::conv_grad_input, static_cast<uint8_t>(window.rank), conv_attrs(window)),
                conv_inputs(x, weight, bias));
}

Tensor max_pool2d(const Tensor& x, const Window2d& window) {
  return record(lazylua::max_pool2d(x, window), call(Op::max_pool2d, 0, window_attrs(window)), {x});
}

}  // namespace lazylua::autograd
