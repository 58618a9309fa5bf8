// tensor_sorting.cpp - argsort (the IR op) and the sorting functions made
// from it: sort, topk, kthvalue, median (sorting.h).
#include "autograd.h"
#include "kernels/sort.h"
#include "sorting.h"

namespace lazylua {

namespace ops {

Array argsort(const Array& a, int dim, bool descending) {
  if (dim < 0 || dim >= std::max(a.rank(), 1)) {
    fail("argsort: dimension {} out of range for a {}-d tensor", dim + 1, a.rank());
  }
  Array out = Array::empty(a.shape, DType::i64, "argsort");
  if (!in_meta_scope()) argsort_kernel(a, dim, descending, out);
  return out;
}

}  // namespace ops

// As tensor.cpp's ops: run at once in eager mode; in lazy mode the eager
// op runs on a meta array (checks, shape) and a node is recorded.
Tensor argsort(const Tensor& a, int dim, bool descending) {
  Context* context = a->context.get();
  if (context->eager) {
    const Array data = a->data.defined() && !a->pending && !a->is_lazy_view()
                           ? a->data
                           : observe(a, SyncCause::eager_op);
    return make_tensor(context, ops::argsort(data, dim, descending));
  }
  Array meta = layout_of(a);
  meta.buffer = Ref<Buffer>{};
  {
    MetaScope scope;
    meta = ops::argsort(meta, dim, descending);
  }
  context->metrics.ops_recorded++;
  NodeRef node = make_node(Op::argsort, 0, meta.dtype, meta.shape, {value_of(a)}, {dim, descending},
                           context->current_location());
  return Tensor(new TensorImpl(context, std::move(node)));
}

namespace autograd {
namespace {

void check_sort_dim(const Tensor& a, int dim, const char* op) {
  if (dim < 0 || dim >= std::max(a->shape.rank(), 1)) {
    fail("{}: dimension {} out of range for a {}-d tensor", op, dim + 1, a->shape.rank());
  }
}

// A 0-dim tensor sorts as its one element: as a 1-element vector, with the
// results given back 0-dim.
Tensor as_vector(const Tensor& a) {
  return a->shape.rank() == 0 ? autograd::reshape(a, Shape{1}) : a;
}

Tensor like_rank(const Tensor& result, const Tensor& a) {
  return a->shape.rank() == 0 ? autograd::reshape(result, Shape{}) : result;
}

Tensor index_like_rank(const Tensor& result, const Tensor& a) {
  return a->shape.rank() == 0 ? lazylua::reshape(result, Shape{}) : result;
}

// The sorted values: a gather of the indices, so gather's rule is their
// gradient.
std::pair<Tensor, Tensor> values_at(const Tensor& a, int dim, Tensor indices, bool keepdim) {
  Tensor values = autograd::gather(a, dim, indices);
  if (!keepdim) {
    values = autograd::squeeze(values, dim);
    indices = lazylua::squeeze(indices, dim);
  }
  return {values, indices};
}

}  // namespace

std::pair<Tensor, Tensor> sort(const Tensor& a, int dim, bool descending) {
  check_sort_dim(a, dim, "sort");
  const Tensor x = as_vector(a);
  auto [values, indices] = values_at(x, dim, lazylua::argsort(x, dim, descending), true);
  return {like_rank(values, a), index_like_rank(indices, a)};
}

std::pair<Tensor, Tensor> topk(const Tensor& a, int64_t k, int dim, bool largest) {
  check_sort_dim(a, dim, "topk");
  const Tensor x = as_vector(a);
  if (k < 0 || k > x->shape[dim]) {
    fail("topk: k ({}) out of range for a dimension of size {}", k, x->shape[dim]);
  }
  const Tensor order = lazylua::argsort(x, dim, largest);
  auto [values, indices] = values_at(x, dim, lazylua::narrow(order, dim, 0, k), true);
  return {like_rank(values, a), index_like_rank(indices, a)};
}

std::pair<Tensor, Tensor> kthvalue(const Tensor& a, int64_t k, int dim, bool keepdim) {
  check_sort_dim(a, dim, "kthvalue");
  const Tensor x = as_vector(a);
  if (k < 1 || k > x->shape[dim]) {
    fail("kthvalue: k ({}) out of range for a dimension of size {} (k counts from 1)", k,
         x->shape[dim]);
  }
  const Tensor order = lazylua::argsort(x, dim, false);
  auto [values, indices] = values_at(x, dim, lazylua::narrow(order, dim, k - 1, 1), keepdim);
  if (a->shape.rank() == 0 && keepdim) {
    return {autograd::reshape(values, Shape{}), lazylua::reshape(indices, Shape{})};
  }
  return {values, indices};
}

std::pair<Tensor, Tensor> median(const Tensor& a, int dim, bool keepdim) {
  check_sort_dim(a, dim, "median");
  const Tensor x = as_vector(a);
  const int64_t n = x->shape[dim];
  if (n == 0) fail("median: cannot take the median of an empty dimension");
  const Tensor order = lazylua::argsort(x, dim, false);
  Tensor picked = lazylua::narrow(order, dim, (n - 1) / 2, 1);
  if (is_floating(x->dtype)) {
    // NaNs sort last: a line with c of them gives its first, at n - c.
    Context* context = x->context.get();
    const Tensor is_nan = lazylua::binary(BinaryOp::ne, x, x);
    const Tensor nans = lazylua::reduce(ReduceOp::sum, is_nan, dim, true);
    const Tensor first_nan = lazylua::binary(BinaryOp::sub, ops::Scalar::from_integer(n + 1), nans);
    const Tensor lower =
        scalar_tensor(context, ops::Scalar::from_integer((n - 1) / 2 + 1), DType::i64);
    const Tensor has_nan = lazylua::binary(BinaryOp::gt, nans, ops::Scalar::from_integer(0));
    picked = lazylua::gather(order, dim, lazylua::where(has_nan, first_nan, lower));
  }
  auto [values, indices] = values_at(x, dim, picked, keepdim);
  if (a->shape.rank() == 0) {
    return {autograd::reshape(values, Shape{}), lazylua::reshape(indices, Shape{})};
  }
  return {values, indices};
}

Tensor median(const Tensor& a) {
  if (numel(a->shape) == 0) fail("median: cannot take the median of an empty tensor");
  return median(autograd::reshape(a, Shape{numel(a->shape)}), 0, false).first;
}

std::pair<Tensor, Tensor> cummax_cummin(bool is_max, const Tensor& a, int dim) {
  const char* op = is_max ? "cummax" : "cummin";
  check_sort_dim(a, dim, op);
  const Tensor x = as_vector(a);
  Context* context = x->context.get();
  const int64_t n = x->shape[dim];
  // An empty tensor needs no positions (for a dim of 2^40 next to a 0 they
  // would be 8 TB): its values, and indices of the same empty shape.
  if (numel(x->shape) == 0) {
    const Tensor none = make_tensor(context, Array::empty(x->shape, DType::i64));
    return {like_rank(autograd::clone(x), a), index_like_rank(none, a)};
  }
  // Positions 1..n along dim, for every line.
  Shape along = Shape::filled(x->shape.rank(), 1);
  along[dim] = n;
  const Array positions =
      ops::arange(ops::Scalar::from_integer(1), ops::Scalar::from_integer(n + 1),
                  ops::Scalar::from_integer(1), DType::i64);
  Tensor where_reached =
      lazylua::expand(lazylua::reshape(make_tensor(context, positions), along), x->shape);
  // A scan of log2(n) steps (Hillis and Steele), on (value, position) pairs
  // without gradients: after the step of stride s, position i holds the
  // best of the (up to) 2s elements ending at i. Of two segments, the later
  // one wins unless the earlier one is strictly better, or NaN while the
  // later one is not.
  Tensor best = x;
  const BinaryOp at_least = is_max ? BinaryOp::ge : BinaryOp::le;
  for (int64_t stride = 1; stride < n; stride *= 2) {
    const Tensor earlier = lazylua::narrow(best, dim, 0, n - stride);
    const Tensor later = lazylua::narrow(best, dim, stride, n - stride);
    Tensor later_wins = lazylua::binary(at_least, later, earlier);
    if (is_floating(x->dtype)) {
      const Tensor later_nan = lazylua::binary(BinaryOp::ne, later, later);
      const Tensor earlier_number = lazylua::binary(BinaryOp::eq, earlier, earlier);
      later_wins =
          lazylua::binary(BinaryOp::logical_or, later_nan,
                          lazylua::binary(BinaryOp::logical_and, earlier_number, later_wins));
    }
    auto combine = [&](const Tensor& t) {
      const Tensor head = lazylua::narrow(t, dim, 0, stride);
      const Tensor tail = lazylua::where(later_wins, lazylua::narrow(t, dim, stride, n - stride),
                                         lazylua::narrow(t, dim, 0, n - stride));
      return lazylua::cat({head, tail}, dim);
    };
    best = combine(best);
    where_reached = combine(where_reached);
  }
  auto [values, indices] = values_at(x, dim, where_reached, true);
  return {like_rank(values, a), index_like_rank(indices, a)};
}

}  // namespace autograd
}  // namespace lazylua
