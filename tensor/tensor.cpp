// tensor.cpp - ops on Tensor handles: run at once in eager mode, recorded as
// IR nodes in lazy mode. Recording runs the eager op on meta arrays first
// (see MetaScope), so validation, shape and dtype rules are the eager op's.
#include "tensor.h"

#include "autograd.h"
#include "scan.h"

#include <algorithm>

namespace lazylua {

// Views start here too (with no data): made inside a scan body, they are
// the body's values like any other result (scan_grad.cpp walks through them).
TensorImpl::TensorImpl(Context* owner, Array array)
    : context(owner),
      shape(array.shape),
      dtype(array.dtype),
      data(std::move(array)),
      scan_level(owner->scan_depth) {}

TensorImpl::TensorImpl(Context* owner, NodeRef node)
    : context(owner), shape(node->shape), dtype(node->dtype), scan_level(owner->scan_depth) {
  set_pending(std::move(node));
  if (owner->scan_created) owner->scan_created->push_back(Tensor(this));
}

TensorImpl::~TensorImpl() {
  context->remove_live(this);
}

void TensorImpl::set_pending(NodeRef node) {
  if (node && !pending) context->add_live(this);
  if (!node && pending) context->remove_live(this);
  pending = std::move(node);
}

Tensor make_tensor(Context* context, Array data) {
  return Tensor(new TensorImpl(context, data));
}

Tensor scalar_tensor(Context* context, ops::Scalar value, DType dtype, const char* op) {
  ops::check_storable(value, dtype, op);
  if (context->eager) return make_tensor(context, ops::full(Shape{}, value, dtype));
  return Tensor(new TensorImpl(context, make_scalar(value, dtype, context->current_location())));
}

Array layout_of(const Tensor& t) {
  if (t->is_lazy_view()) return t->layout;
  if (t->data.defined() && !t->pending) return t->data;
  Array layout;
  layout.shape = t->shape;
  layout.strides = contiguous_strides(t->shape);
  layout.dtype = t->dtype;
  return layout;
}

namespace {

Context* context_of(const Tensor& t) {
  return t->context.get();
}

// The data an eager op works on (syncing a lazy tensor made before a switch
// to eager mode).
Array eager_data(const Tensor& t) {
  if (t->data.defined() && !t->pending && !t->is_lazy_view()) return t->data;
  return observe(t, SyncCause::eager_op);
}

Tensor wrap(const Tensor& like, Array data) {
  return make_tensor(context_of(like), data);
}

TensorImpl* storage_owner(const Tensor& t) {
  return t->is_lazy_view() ? t->base.get() : t.get();
}

// An eager view shares its base's memory. Both are marked, so that lazy mode
// later writes into them eagerly (see write_eagerly).
Tensor wrap_view(const Tensor& base, Array data) {
  Tensor view = wrap(base, data);
  if (data.buffer == eager_data(base).buffer) {
    view->shares_storage = true;
    storage_owner(base)->shares_storage = true;
    // Made in a scan body, a view of a tensor from outside it is still
    // outside memory to write_eagerly.
    view->scan_level = std::min(view->scan_level, storage_owner(base)->scan_level);
  }
  return view;
}

bool has_expand_step(const Tensor& t) {
  for (const ViewStep& step : t->steps) {
    if (step.op == Op::expand) return true;
  }
  return false;
}

// Two kinds of write lazy mode leaves to eager code: into memory shared
// through eager-mode views (which the graph cannot follow), and through an
// expanded view (whose elements map back to the base many-to-one; eager
// mode allows the write when the target itself has no repeated element).
// Such an op syncs every pending value, so no graph reads memory after it
// changed, and then writes as eager mode would.
bool write_eagerly(const Tensor& self) {
  // Every in-place op comes here first, in both modes: a scan body is
  // recorded once (lazy) or run per slice (eager), and neither may write
  // into a tensor made outside it.
  if (self->context->scan_depth > storage_owner(self)->scan_level) {
    fail(
        "cannot write in place into a tensor from outside the scan body; return the new value "
        "as part of the carry instead");
  }
  if (self->context->eager) return true;
  if (!storage_owner(self)->shares_storage && !has_expand_step(self)) return false;
  Context* context = context_of(self);
  context->sync(context->pending_tensors(), SyncCause::eager_op);
  return true;
}

Tensor record(Context* context, Op op, uint8_t sub_op, const Array& meta,
              std::vector<NodeRef> inputs, const Attrs& attrs = {}) {
  context->metrics.ops_recorded++;
  NodeRef node = make_node(op, sub_op, meta.dtype, meta.shape, std::move(inputs), attrs,
                           context->current_location());
  return Tensor(new TensorImpl(context, std::move(node)));
}

NodeRef node_of(Context* context, Op op, uint8_t sub_op, DType dtype, const Shape& shape,
                std::vector<NodeRef> inputs, const Attrs& attrs = {}) {
  context->metrics.ops_recorded++;
  return make_node(op, sub_op, dtype, shape, std::move(inputs), attrs, context->current_location());
}

NodeRef apply_step(Context* context, const ViewStep& step, const NodeRef& input) {
  const int64_t* a = step.attrs;
  switch (step.op) {
    case Op::permute:
      return node_of(context, Op::permute, 0, input->dtype, step.shape, {input},
                     Attrs(a, input->shape.rank()));
    case Op::slice:
      return node_of(context, Op::slice, 0, input->dtype, step.shape, {input}, {a[0], a[1], a[2]});
    case Op::select:
      return node_of(context, Op::select, 0, input->dtype, step.shape, {input}, {a[0], a[1]});
    case Op::reshape:
    case Op::expand:
      return node_of(context, step.op, 0, input->dtype, step.shape, {input});
    default:
      LAZYLUA_ASSERT(false);
  }
}

Array apply_step(const ViewStep& step, const Array& input) {
  const int64_t* a = step.attrs;
  switch (step.op) {
    case Op::permute:
      return ops::permute(input, std::vector<int>(a, a + input.rank()));
    case Op::slice:
      return input.narrowed(static_cast<int>(a[0]), a[1], a[2]);
    case Op::select:
      return input.selected(static_cast<int>(a[0]), a[1]);
    case Op::reshape:
      return ops::reshape(input, step.shape);
    case Op::expand:
      return input.expanded(step.shape);
    default:
      LAZYLUA_ASSERT(false);
  }
}

// The value `base` takes when `update` is written through `step` into the
// view of `base`.
NodeRef unapply_step(Context* context, const ViewStep& step, const NodeRef& base,
                     const NodeRef& update) {
  const int64_t* a = step.attrs;
  switch (step.op) {
    case Op::permute: {
      int64_t inverse[kMaxDims] = {};
      for (int i = 0; i < base->shape.rank(); i++) inverse[a[i]] = i;
      return node_of(context, Op::permute, 0, base->dtype, base->shape, {update},
                     Attrs(inverse, base->shape.rank()));
    }
    case Op::slice:
      return node_of(context, Op::slice_update, 0, base->dtype, base->shape, {base, update},
                     {a[0], a[1]});
    case Op::select:
      return node_of(context, Op::select_update, 0, base->dtype, base->shape, {base, update},
                     {a[0], a[1]});
    case Op::reshape:
      return node_of(context, Op::reshape, 0, base->dtype, base->shape, {update});
    default:
      fail("cannot write through an expanded view (its elements share memory)");
  }
}

Tensor make_view(const Tensor& a, ViewStep step, const Array& new_layout) {
  Context* context = context_of(a);
  Tensor view(new TensorImpl(context, Array{}));
  view->shape = step.shape;
  view->dtype = a->dtype;
  view->base = a->is_lazy_view() ? a->base : a;
  view->steps = a->steps;
  view->steps.push_back(step);
  view->layout = new_layout;
  return view;
}

// Writes a new value into `self` (a base, or a view of one).
void assign(const Tensor& self, NodeRef value) {
  Context* context = context_of(self);
  LAZYLUA_ASSERT(context->scan_depth <= storage_owner(self)->scan_level);  // write_eagerly
  if (value->dtype != self->dtype) {
    value = node_of(context, Op::cast, 0, self->dtype, value->shape, {value});
  }
  if (value->shape != self->shape) {
    value = node_of(context, Op::expand, 0, self->dtype, self->shape, {value});
  }
  if (!self->is_lazy_view()) {
    self->set_pending(std::move(value));
    self->data = Array{};
    self->data_node = NodeRef{};
    return;
  }
  const Tensor& base = self->base;
  std::vector<NodeRef> chain{value_of(base)};
  for (size_t i = 0; i + 1 < self->steps.size(); i++) {
    chain.push_back(apply_step(context, self->steps[i], chain.back()));
  }
  NodeRef update = std::move(value);
  for (size_t i = self->steps.size(); i-- > 0;) {
    update = unapply_step(context, self->steps[i], chain[i], update);
  }
  base->set_pending(std::move(update));
  base->data = Array{};
  base->data_node = NodeRef{};
}

// Eager in-place ops need their target's real memory; a lazy tensor that
// reaches eager mode is synced first. The buffer's version changes: the
// write is about to happen.
Array eager_target(const Tensor& self) {
  // The strided view of a lazy view shares the synced base's buffer, so the
  // write reaches the base as eager mode expects.
  Array data =
      self->is_lazy_view() || self->pending ? observe(self, SyncCause::eager_op) : self->data;
  if (data.buffer) data.buffer.get()->version++;
  // The memory gets a new value, so the owner needs a new node for it: the
  // old parameter node may be shared (a clone is the same node) and, once a
  // sync has bound a copy to it as its result, it would go on giving the
  // value from before the write.
  storage_owner(self)->data_node = NodeRef{};
  return data;
}

Array meta(const Tensor& t) {
  Array m = layout_of(t);
  m.buffer = Ref<Buffer>{};
  return m;
}

}  // namespace

namespace {

void check_not_failed(const TensorImpl& t) {
  if (!t.error.empty()) fail("this tensor's value could not be computed: {}", t.error);
}

// A contiguous view of data (a batch narrowed from a dataset, a row
// selected) as a graph input of its own: the graph's key then has the
// view's shape and not its offset, so the next batch runs the same
// compiled program instead of a new one. The steps after the last point
// where the view is such a block (a transpose of the batch, a broadcast)
// are applied to that input as nodes. Null when no step gives a block.
NodeRef data_view_parameter(const Tensor& t) {
  const TensorImpl& base = *t->base;
  if (base.pending || !base.data.defined()) return NodeRef{};
  Array view = base.data;
  Array block;
  size_t block_steps = 0;
  for (size_t k = 0; k < t->steps.size(); k++) {
    const ViewStep& step = t->steps[k];
    if (step.op == Op::expand || step.op == Op::permute) break;
    view = apply_step(step, view);
    if (view.buffer == base.data.buffer && view.is_contiguous()) block = view, block_steps = k + 1;
  }
  if (block_steps == 0) return NodeRef{};
  NodeRef value = make_parameter(block, t->context->current_location());
  for (size_t k = block_steps; k < t->steps.size(); k++) {
    value = apply_step(t->context.get(), t->steps[k], value);
  }
  return value;
}

}  // namespace

NodeRef value_of(const Tensor& t) {
  check_not_failed(t->is_lazy_view() ? *t->base : *t);
  if (t->is_lazy_view()) {
    NodeRef base_value = value_of(t->base);
    if (t->view_cache && t->view_cache_base == base_value) return t->view_cache;
    NodeRef value = data_view_parameter(t);
    if (!value) {
      value = base_value;
      for (const ViewStep& step : t->steps) value = apply_step(t->context.get(), step, value);
    }
    t->view_cache = value;
    t->view_cache_base = base_value;
    return value;
  }
  if (t->pending) return t->pending;
  // Memory shared with eager views may change under the node: no caching.
  if (t->shares_storage) return make_parameter(t->data, t->context->current_location());
  if (!t->data_node) t->data_node = make_parameter(t->data, t->context->current_location());
  return t->data_node;
}

const Array& materialize(const Tensor& t, SyncCause cause) {
  check_not_in_scan_body(t->context.get(), sync_cause_name(cause));
  TensorImpl* target = t->is_lazy_view() ? t->base.get() : t.get();
  check_not_failed(*target);
  if (target->pending) t->context->sync({target}, cause);
  return target->data;
}

Array observe(const Tensor& t, SyncCause cause) {
  const Array& data = materialize(t, cause);
  if (!t->is_lazy_view()) return data;
  Array view = data;
  for (const ViewStep& step : t->steps) view = apply_step(step, view);
  return view;
}

bool tensors_equal(const Tensor& a, const Tensor& b) {
  if (a->shape != b->shape) return false;
  return all_nonzero(ops::binary(BinaryOp::eq, observe(a, SyncCause::comparison),
                                 observe(b, SyncCause::comparison)));
}

// ---- Elementwise ----

Tensor unary(UnaryOp op, const Tensor& a) {
  if (a->context->eager) return wrap(a, ops::unary(op, eager_data(a)));
  Array m;
  {
    MetaScope scope;
    m = ops::unary(op, meta(a));
  }
  return record(context_of(a), Op::unary, static_cast<uint8_t>(op), m, {value_of(a)});
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  if (a->context->eager) return wrap(a, ops::binary(op, eager_data(a), eager_data(b)));
  Array m;
  {
    MetaScope scope;
    m = ops::binary(op, meta(a), meta(b));
  }
  return record(context_of(a), Op::binary, static_cast<uint8_t>(op), m, {value_of(a), value_of(b)});
}

Tensor binary(BinaryOp op, const Tensor& a, ops::Scalar b) {
  if (a->context->eager) return wrap(a, ops::binary(op, eager_data(a), b));
  Array m;
  {
    MetaScope scope;
    m = ops::binary(op, meta(a), b);
  }
  Context* context = context_of(a);
  const DType compute = ops::binary_compute_dtype(op, promote_with_scalar(a->dtype, b.is_integer));
  return record(context, Op::binary, static_cast<uint8_t>(op), m,
                {value_of(a), make_scalar(b, compute, context->current_location())});
}

Tensor binary(BinaryOp op, ops::Scalar a, const Tensor& b) {
  if (b->context->eager) return wrap(b, ops::binary(op, a, eager_data(b)));
  Array m;
  {
    MetaScope scope;
    m = ops::binary(op, a, meta(b));
  }
  Context* context = context_of(b);
  const DType compute = ops::binary_compute_dtype(op, promote_with_scalar(b->dtype, a.is_integer));
  return record(context, Op::binary, static_cast<uint8_t>(op), m,
                {make_scalar(a, compute, context->current_location()), value_of(b)});
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  if (a->context->eager) {
    return wrap(a, ops::where(eager_data(cond), eager_data(a), eager_data(b)));
  }
  Array m;
  {
    MetaScope scope;
    m = ops::where(meta(cond), meta(a), meta(b));
  }
  return record(context_of(a), Op::where, 0, m, {value_of(cond), value_of(a), value_of(b)});
}

Tensor clamp(const Tensor& a, std::optional<ops::Scalar> low, std::optional<ops::Scalar> high) {
  if (a->context->eager) return wrap(a, ops::clamp(eager_data(a), low, high));
  Array m;
  {
    MetaScope scope;
    m = ops::clamp(meta(a), low, high);
  }
  Context* context = context_of(a);
  const SourceLocation location = context->current_location();
  // A bound is a scalar input: exact as i64 when it is an integer, else f64.
  auto bound = [&](std::optional<ops::Scalar> value) {
    const ops::Scalar number = value.value_or(ops::Scalar::from_integer(0));
    return make_scalar(number, number.is_integer ? DType::i64 : DType::f64, location);
  };
  const uint8_t which = (low ? 1 : 0) | (high ? 2 : 0);
  return record(context, Op::clamp, which, m, {value_of(a), bound(low), bound(high)});
}

Tensor cast(const Tensor& a, DType dtype) {
  if (a->dtype == dtype) return a;
  if (a->context->eager) return wrap(a, ops::cast(eager_data(a), dtype));
  Array m = meta(a);
  m.dtype = dtype;
  return record(context_of(a), Op::cast, 0, m, {value_of(a)});
}

Tensor clone(const Tensor& a) {
  if (a->context->eager) {
    const Array source = eager_data(a);
    Array copy = Array::empty(source.shape, source.dtype);
    copy_kernel(source, copy);
    return wrap(a, copy);
  }
  return Tensor(new TensorImpl(context_of(a), value_of(a)));
}

// ---- In place ----

void unary_(UnaryOp op, const Tensor& self) {
  if (write_eagerly(self)) return ops::unary_(op, eager_target(self));
  {
    MetaScope scope;
    ops::unary_(op, meta(self));
  }
  Context* context = context_of(self);
  assign(self, node_of(context, Op::unary, static_cast<uint8_t>(op), self->dtype, self->shape,
                       {value_of(self)}));
}

void binary_(BinaryOp op, const Tensor& self, const Tensor& other) {
  if (write_eagerly(self)) return ops::binary_(op, eager_target(self), eager_data(other));
  Array m;
  {
    MetaScope scope;
    ops::binary_(op, meta(self), meta(other));
    m = ops::binary(op, meta(self), meta(other));
  }
  assign(self, node_of(context_of(self), Op::binary, static_cast<uint8_t>(op), m.dtype, m.shape,
                       {value_of(self), value_of(other)}));
}

void binary_(BinaryOp op, const Tensor& self, ops::Scalar other) {
  if (write_eagerly(self)) return ops::binary_(op, eager_target(self), other);
  Array m;
  {
    MetaScope scope;
    ops::binary_(op, meta(self), other);
    m = ops::binary(op, meta(self), other);
  }
  Context* context = context_of(self);
  const DType compute =
      ops::binary_compute_dtype(op, promote_with_scalar(self->dtype, other.is_integer));
  assign(self, node_of(context, Op::binary, static_cast<uint8_t>(op), m.dtype, m.shape,
                       {value_of(self), make_scalar(other, compute, context->current_location())}));
}

void clamp_(const Tensor& self, std::optional<ops::Scalar> low, std::optional<ops::Scalar> high) {
  if (write_eagerly(self)) return ops::clamp_(eager_target(self), low, high);
  {
    MetaScope scope;
    ops::clamp_(meta(self), low, high);
  }
  assign(self, value_of(clamp(self, low, high)));
}

void fill_(const Tensor& self, ops::Scalar value) {
  if (write_eagerly(self)) return ops::fill_(eager_target(self), value);
  {
    MetaScope scope;
    ops::fill_(meta(self), value);
  }
  Context* context = context_of(self);
  assign(self, make_scalar(value, self->dtype, context->current_location()));
}

void copy_(const Tensor& self, const Tensor& source) {
  if (write_eagerly(self)) return ops::copy_(eager_target(self), eager_data(source));
  {
    MetaScope scope;
    ops::copy_(meta(self), meta(source));
  }
  assign(self, value_of(source));
}

// ---- Reductions and matmul ----

Tensor reduce(ReduceOp op, const Tensor& a, std::optional<int> dim, bool keepdim) {
  if (a->context->eager) return wrap(a, ops::reduce(op, eager_data(a), dim, keepdim));
  Array m;
  {
    MetaScope scope;
    m = ops::reduce(op, meta(a), dim, keepdim);
  }
  return record(context_of(a), Op::reduce, static_cast<uint8_t>(op), m, {value_of(a)},
                {dim.value_or(-1), keepdim});
}

std::pair<Tensor, Tensor> max_min_dim(bool is_max, const Tensor& a, int dim, bool keepdim) {
  if (a->context->eager) {
    auto [values, indices] = ops::max_min_dim(is_max, eager_data(a), dim, keepdim);
    return {wrap(a, values), wrap(a, indices)};
  }
  std::pair<Array, Array> m;
  {
    MetaScope scope;
    m = ops::max_min_dim(is_max, meta(a), dim, keepdim);
  }
  const NodeRef input = value_of(a);
  Context* context = context_of(a);
  return {record(context, Op::reduce, static_cast<uint8_t>(is_max ? ReduceOp::max : ReduceOp::min),
                 m.first, {input}, {dim, keepdim}),
          record(context, Op::arg_reduce, is_max, m.second, {input}, {dim, keepdim})};
}

Tensor arg_max_min(bool is_max, const Tensor& a, std::optional<int> dim, bool keepdim) {
  if (a->context->eager) return wrap(a, ops::arg_max_min(is_max, eager_data(a), dim, keepdim));
  Array m;
  {
    MetaScope scope;
    m = ops::arg_max_min(is_max, meta(a), dim, keepdim);
  }
  return record(context_of(a), Op::arg_reduce, is_max, m, {value_of(a)},
                {dim.value_or(-1), keepdim});
}

Tensor softmax(const Tensor& a, int dim, bool log) {
  if (a->context->eager) return wrap(a, ops::softmax(eager_data(a), dim, log));
  Array m;
  {
    MetaScope scope;
    m = ops::softmax(meta(a), dim, log);
  }
  return record(context_of(a), Op::softmax, 0, m, {value_of(a)}, {dim, log});
}

Tensor cumsum(const Tensor& a, int dim) {
  if (a->context->eager) return wrap(a, ops::cumsum(eager_data(a), dim));
  Array m;
  {
    MetaScope scope;
    m = ops::cumsum(meta(a), dim);
  }
  return record(context_of(a), Op::cumsum, 0, m, {value_of(a)}, {dim});
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (a->context->eager) return wrap(a, ops::matmul(eager_data(a), eager_data(b)));
  Array m;
  {
    MetaScope scope;
    m = ops::matmul(meta(a), meta(b));
  }
  return record(context_of(a), Op::matmul, 0, m, {value_of(a), value_of(b)});
}

// ---- Views ----

namespace {

ViewStep step_of(Op op, const Shape& shape, std::initializer_list<int64_t> attrs = {}) {
  ViewStep step;
  step.op = op;
  step.shape = shape;
  int i = 0;
  for (int64_t attr : attrs) step.attrs[i++] = attr;
  return step;
}

// A reshape that eager mode does as a view (strides allow it) is a view
// step; otherwise it is a copy, as in eager mode.
Tensor reshape_or_copy(const Tensor& a, const Shape& target, bool must_be_view) {
  // On a meta array, success shows as the target shape (a failure is an
  // empty Array, whose rank-0 shape only a scalar target could match, and a
  // one-element tensor always reshapes as a view).
  const Array viewed = meta(a).try_reshape_view(target);
  if (viewed.shape == target) return make_view(a, step_of(Op::reshape, target), viewed);
  if (must_be_view) {
    fail(
        "view: the strides of a tensor of shape {} do not allow a view of shape {}; use "
        "reshape (which copies)",
        shape_string(a->shape), shape_string(target));
  }
  Array m = meta(a);
  m.shape = target;
  return record(context_of(a), Op::reshape, 0, m, {value_of(a)});
}

}  // namespace

Tensor view(const Tensor& a, const Shape& shape) {
  if (a->context->eager) return wrap_view(a, ops::view(eager_data(a), shape));
  return reshape_or_copy(a, ops::infer_shape(shape, numel(a->shape), "view"), true);
}

Tensor reshape(const Tensor& a, const Shape& shape) {
  if (a->context->eager) return wrap_view(a, ops::reshape(eager_data(a), shape));
  return reshape_or_copy(a, ops::infer_shape(shape, numel(a->shape), "reshape"), false);
}

Tensor transpose(const Tensor& a, int dim_a, int dim_b) {
  if (a->context->eager) return wrap_view(a, ops::transpose(eager_data(a), dim_a, dim_b));
  if (a->shape.rank() == 0) return a;
  std::vector<int> order(a->shape.rank());
  for (int i = 0; i < a->shape.rank(); i++) order[i] = i;
  std::swap(order[dim_a], order[dim_b]);
  return permute(a, order);
}

Tensor permute(const Tensor& a, const std::vector<int>& order) {
  if (a->context->eager) return wrap_view(a, ops::permute(eager_data(a), order));
  const Array layout = ops::permute(meta(a), order);
  ViewStep step = step_of(Op::permute, layout.shape);
  for (size_t i = 0; i < order.size(); i++) step.attrs[i] = order[i];
  return make_view(a, step, layout);
}

Tensor narrow(const Tensor& a, int dim, int64_t start, int64_t length) {
  if (a->context->eager) return wrap_view(a, ops::narrow(eager_data(a), dim, start, length));
  const Array layout = ops::narrow(meta(a), dim, start, length);
  return make_view(a, step_of(Op::slice, layout.shape, {dim, start, length}), layout);
}

Tensor select(const Tensor& a, int dim, int64_t index) {
  if (a->context->eager) return wrap_view(a, ops::select(eager_data(a), dim, index));
  const Array layout = ops::select(meta(a), dim, index);
  return make_view(a, step_of(Op::select, layout.shape, {dim, index}), layout);
}

Tensor squeeze(const Tensor& a, std::optional<int> dim) {
  if (a->context->eager) return wrap_view(a, ops::squeeze(eager_data(a), dim));
  const Array layout = ops::squeeze(meta(a), dim);
  return make_view(a, step_of(Op::reshape, layout.shape), layout);
}

Tensor unsqueeze(const Tensor& a, int dim) {
  if (a->context->eager) return wrap_view(a, ops::unsqueeze(eager_data(a), dim));
  const Array layout = ops::unsqueeze(meta(a), dim);
  return make_view(a, step_of(Op::reshape, layout.shape), layout);
}

Tensor expand(const Tensor& a, const Shape& shape) {
  if (a->context->eager) return wrap_view(a, ops::expand(eager_data(a), shape));
  const Array layout = ops::expand(meta(a), shape);
  return make_view(a, step_of(Op::expand, layout.shape), layout);
}

Tensor flatten(const Tensor& a, int start_dim, int end_dim) {
  if (a->context->eager) return wrap_view(a, ops::flatten(eager_data(a), start_dim, end_dim));
  Array shape_only;
  {
    MetaScope scope;
    shape_only = ops::flatten(meta(a), start_dim, end_dim);
  }
  return reshape_or_copy(a, shape_only.shape, false);
}

Tensor contiguous(const Tensor& a) {
  if (a->context->eager) return wrap_view(a, contiguous(eager_data(a)));
  if (meta(a).is_contiguous()) return a;
  return Tensor(new TensorImpl(context_of(a), value_of(a)));
}

// ---- Joins and indexing ----

Tensor cat(const std::vector<Tensor>& inputs, int dim) {
  LAZYLUA_ASSERT(!inputs.empty());
  const Tensor& first = inputs[0];
  std::vector<Array> arrays;
  arrays.reserve(inputs.size());
  if (first->context->eager) {
    for (const Tensor& input : inputs) arrays.push_back(eager_data(input));
    return wrap(first, ops::cat(arrays, dim));
  }
  for (const Tensor& input : inputs) arrays.push_back(meta(input));
  Array m;
  {
    MetaScope scope;
    m = ops::cat(arrays, dim);
  }
  std::vector<NodeRef> values;
  values.reserve(inputs.size());
  for (const Tensor& input : inputs) values.push_back(value_of(input));
  return record(context_of(first), Op::cat, 0, m, std::move(values), {dim});
}

Tensor stack(const std::vector<Tensor>& inputs, int dim) {
  LAZYLUA_ASSERT(!inputs.empty());
  for (size_t i = 0; i < inputs.size(); i++) {
    if (inputs[i]->shape != inputs[0]->shape) {
      fail("stack: tensor {} has shape {}, but tensor 1 has shape {}", i + 1,
           shape_string(inputs[i]->shape), shape_string(inputs[0]->shape));
    }
  }
  if (dim < 0 || dim > inputs[0]->shape.rank()) fail("stack: dimension {} out of range", dim + 1);
  std::vector<Tensor> expanded;
  expanded.reserve(inputs.size());
  for (const Tensor& input : inputs) expanded.push_back(unsqueeze(input, dim));
  return cat(expanded, dim);
}

Tensor gather(const Tensor& a, int dim, const Tensor& index) {
  if (a->context->eager) return wrap(a, ops::gather(eager_data(a), dim, eager_data(index)));
  Array m;
  {
    MetaScope scope;
    m = ops::gather(meta(a), dim, meta(index));
  }
  return record(context_of(a), Op::gather, 0, m, {value_of(a), value_of(index)}, {dim});
}

Tensor scatter_add(const Tensor& base, int dim, const Tensor& index, const Tensor& src) {
  if (base->context->eager) {
    return wrap(base, ops::scatter_add(eager_data(base), dim, eager_data(index), eager_data(src)));
  }
  Array m;
  {
    MetaScope scope;
    m = ops::scatter_add(meta(base), dim, meta(index), meta(src));
  }
  return record(context_of(base), Op::scatter_add, 0, m,
                {value_of(base), value_of(index), value_of(src)}, {dim});
}

Tensor index_select(const Tensor& a, int dim, const Tensor& index) {
  if (a->context->eager) {
    return wrap(a, ops::index_select(eager_data(a), dim, eager_data(index)));
  }
  Array m;
  {
    MetaScope scope;
    m = ops::index_select(meta(a), dim, meta(index));
  }
  return record(context_of(a), Op::index_select, 0, m, {value_of(a), value_of(index)}, {dim});
}

// flip is not an IR op: it is one index_select per flipped dim, with the
// reversed positions as i64 data (a graph input, so a training step's graph
// stays the same). The tiers then share index_select's kernels and
// lowering, and flip needs no shape rule, view inverse, fusion case, C code
// or gradient rule of its own.
std::vector<std::pair<int, Tensor>> flip_steps(const Tensor& a, const std::vector<int>& dims) {
  std::vector<bool> seen(a->shape.rank(), false);
  std::vector<std::pair<int, Tensor>> steps;
  // An empty tensor is its own flip: no positions, which for a dim of 2^40
  // next to a 0 would be 8 TB.
  const bool empty = numel(a->shape) == 0;
  for (int dim : dims) {
    LAZYLUA_ASSERT(dim >= 0 && dim < a->shape.rank());
    if (seen[dim]) fail("flip: dim {} appears more than once", dim + 1);
    seen[dim] = true;
    const int64_t n = a->shape[dim];
    if (n <= 1 || empty) continue;
    using ops::Scalar;
    // index_select takes 1-based positions, as the Lua API does.
    const Array reversed = ops::arange(Scalar::from_integer(n), Scalar::from_integer(0),
                                       Scalar::from_integer(-1), DType::i64);
    steps.push_back({dim, make_tensor(a->context.get(), reversed)});
  }
  return steps;
}

Tensor flip(const Tensor& a, const std::vector<int>& dims) {
  Tensor out = a;
  for (const auto& [dim, positions] : flip_steps(a, dims)) out = index_select(out, dim, positions);
  return out.get() == a.get() ? clone(a) : out;  // a new tensor, never an alias
}

// ---- Convolution and pooling ----

namespace {

// Eager mode runs compute(arrays); lazy mode runs it on meta arrays for the
// result's shape and checks, and records `op` with `attrs`. Null inputs
// (an absent bias) are left out.
template <typename Compute>
Tensor windowed(Op op, uint8_t sub_op, std::initializer_list<const Tensor*> inputs,
                const Attrs& attrs, Compute&& compute) {
  const Tensor& first = **inputs.begin();
  std::vector<Array> arrays;
  if (first->context->eager) {
    for (const Tensor* t : inputs) arrays.push_back(t ? eager_data(*t) : Array{});
    return wrap(first, compute(arrays));
  }
  Array m;
  {
    MetaScope scope;
    for (const Tensor* t : inputs) arrays.push_back(t ? meta(*t) : Array{});
    m = compute(arrays);
  }
  std::vector<NodeRef> nodes;
  for (const Tensor* t : inputs) {
    if (t) nodes.push_back(value_of(*t));
  }
  return record(context_of(first), op, sub_op, m, std::move(nodes), attrs);
}

template <typename Compute>
Tensor windowed(Op op, std::initializer_list<const Tensor*> inputs, const Window2d& window,
                Compute&& compute) {
  Attrs attrs;
  ops::window_to_attrs(window, attrs.values);
  return windowed(op, 0, inputs, attrs, std::forward<Compute>(compute));
}

Attrs conv_attrs(const ConvWindow& window) {
  Attrs attrs;
  ops::conv_window_to_attrs(window, attrs.values);
  return attrs;
}

// The third array when a bias was given.
const Array* bias_of(const std::vector<Array>& in, const Tensor* bias) {
  return bias ? &in[2] : nullptr;
}

}  // namespace

Tensor conv(const Tensor& x, const Tensor& weight, const Tensor* bias, const ConvWindow& window) {
  return windowed(Op::conv, static_cast<uint8_t>(window.rank), {&x, &weight, bias},
                  conv_attrs(window), [&](const std::vector<Array>& in) {
                    return ops::conv(in[0], in[1], bias_of(in, bias), window);
                  });
}

Tensor conv_grad_input(const Tensor& grad_y, const Tensor& weight, const Tensor* bias,
                       const Shape& input_shape, const ConvWindow& window) {
  return windowed(Op::conv_grad_input, static_cast<uint8_t>(window.rank), {&grad_y, &weight, bias},
                  conv_attrs(window), [&](const std::vector<Array>& in) {
                    return ops::conv_grad_input(in[0], in[1], bias_of(in, bias), input_shape,
                                                window);
                  });
}

Tensor conv_grad_weight(const Tensor& grad_y, const Tensor& x, const Shape& weight_shape,
                        const ConvWindow& window) {
  return windowed(Op::conv_grad_weight, static_cast<uint8_t>(window.rank), {&grad_y, &x},
                  conv_attrs(window), [&](const std::vector<Array>& in) {
                    return ops::conv_grad_weight(in[0], in[1], weight_shape, window);
                  });
}

Tensor conv_transpose(const Tensor& x, const Tensor& weight, const Tensor* bias,
                      const ConvWindow& window, const int64_t* output_padding) {
  Shape out;
  {
    MetaScope scope;
    const Array bias_meta = bias ? meta(*bias) : Array{};
    out = ops::conv_transpose_shape(meta(x), meta(weight), bias ? &bias_meta : nullptr, window,
                                    output_padding);
  }
  return conv_grad_input(x, weight, bias, out, window);
}

Tensor max_pool2d(const Tensor& x, const Window2d& window) {
  return windowed(Op::max_pool2d, {&x}, window,
                  [&](const std::vector<Array>& in) { return ops::max_pool2d(in[0], window); });
}

Tensor max_pool2d_grad(const Tensor& grad_y, const Tensor& x, const Window2d& window) {
  return windowed(Op::max_pool2d_grad, {&grad_y, &x}, window, [&](const std::vector<Array>& in) {
    return ops::max_pool2d_grad(in[0], in[1], window);
  });
}

}  // namespace lazylua
