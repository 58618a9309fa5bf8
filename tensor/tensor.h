// tensor.h - the Tensor handle scripts hold, and every op on it.
//
// In eager mode a tensor holds data (an Array; views share their base's
// buffer) and each op runs at once. In lazy mode each op records an IR node
// instead: a tensor holds a pending node until a sync computes it. A lazy
// view keeps its base and the view steps from the base; reading it applies
// the steps to the base's current value, and writing through it updates the
// base by the inverse of the steps, all inside the graph.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "context.h"
#include "ir.h"
#include "object_pool.h"

namespace lazylua {

// One step from a base to a view of it.
struct ViewStep {
  Op op;        // reshape, permute, slice, select or expand
  Shape shape;  // the view's shape after this step
  int64_t attrs[kMaxDims] = {};
};

struct GradNode;

class TensorImpl : public RefCounted {
 public:
  LAZYLUA_POOLED_OBJECT
  TensorImpl(Context* context, Array data);       // a data tensor
  TensorImpl(Context* context, NodeRef pending);  // a lazy result
  ~TensorImpl();

  const Ref<Context> context;
  Shape shape;
  DType dtype;

  // The current value is `data` when `pending` is null, else `pending`.
  // Lazy views have neither: their value comes from `base`.
  Array data;
  NodeRef pending;
  NodeRef data_node;  // `data` as a graph parameter, made once

  Ref<TensorImpl> base;
  std::vector<ViewStep> steps;
  Array layout;  // a lazy view's strides and offset into its base (no memory)
  NodeRef view_cache, view_cache_base;

  // Its data shares memory with another tensor's through an eager-mode view.
  bool shares_storage = false;
  // Set when a sync failed to compute this tensor: using it raises this.
  std::string error;

  // Autograd (autograd.h): a leaf that requires grad accumulates `grad`; a
  // result computed from such tensors has the node that made it.
  bool requires_grad = false;
  int scan_level = 0;  // the scan_depth of its context when it was made (scan.h)
  Ref<GradNode> grad_fn;
  int grad_output = 0;  // which result of grad_fn this is
  Ref<TensorImpl> grad;

  bool is_lazy_view() const { return static_cast<bool>(base); }

  // Sets or clears the pending value; a tensor is in its context's list of
  // pending tensors exactly while it has one.
  void set_pending(NodeRef node);

  // Intrusive list of pending tensors (Context::pending_tensors).
  TensorImpl* previous_live = nullptr;
  TensorImpl* next_live = nullptr;
};

using Tensor = Ref<TensorImpl>;

// Wraps data as a tensor (factories, host buffers, results of syncs).
Tensor make_tensor(Context* context, Array data);
// A Lua number as a 0-d tensor of `dtype`: data in eager mode, a scalar
// (or constant 0/1) node in lazy mode.
// `op` names the function in the error for a value `dtype` cannot hold
// (ops::check_storable).
Tensor scalar_tensor(Context* context, ops::Scalar value, DType dtype, const char* op = "cast");

// The tensor's current IR value (lazy mode): its pending node, its data as a
// parameter, or for a view the steps applied to its base's value.
NodeRef value_of(const Tensor& tensor);
// Makes the tensor's value data (syncing if pending) and returns it.
const Array& materialize(const Tensor& tensor, SyncCause cause);
// The data of a view or tensor after materializing (a strided view for
// lazy views).
Array observe(const Tensor& tensor, SyncCause cause);

// The tensor's layout as eager mode would have it: shape, strides and
// offset (no memory): its data's for a data tensor, the view's for a lazy
// view, contiguous for a pending value.
Array layout_of(const Tensor& tensor);
// Same shape and equal values (syncs both).
bool tensors_equal(const Tensor& a, const Tensor& b);

// ---- Ops: same names and rules as ops:: in eager_ops.h ----
Tensor unary(UnaryOp op, const Tensor& a);
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);
Tensor binary(BinaryOp op, const Tensor& a, ops::Scalar b);
Tensor binary(BinaryOp op, ops::Scalar a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor clamp(const Tensor& a, std::optional<ops::Scalar> low, std::optional<ops::Scalar> high);
Tensor cast(const Tensor& a, DType dtype);
Tensor clone(const Tensor& a);

void unary_(UnaryOp op, const Tensor& self);
void binary_(BinaryOp op, const Tensor& self, const Tensor& other);
void binary_(BinaryOp op, const Tensor& self, ops::Scalar other);
void clamp_(const Tensor& self, std::optional<ops::Scalar> low, std::optional<ops::Scalar> high);
void fill_(const Tensor& self, ops::Scalar value);
void copy_(const Tensor& self, const Tensor& source);

Tensor reduce(ReduceOp op, const Tensor& a, std::optional<int> dim, bool keepdim);
std::pair<Tensor, Tensor> max_min_dim(bool is_max, const Tensor& a, int dim, bool keepdim);
Tensor arg_max_min(bool is_max, const Tensor& a, std::optional<int> dim, bool keepdim);
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
Tensor contiguous(const Tensor& a);

Tensor cat(const std::vector<Tensor>& inputs, int dim);
Tensor stack(const std::vector<Tensor>& inputs, int dim);
Tensor gather(const Tensor& a, int dim, const Tensor& index);
Tensor index_select(const Tensor& a, int dim, const Tensor& index);
// The elements in reverse order along each of `dims` (0-based, distinct), a
// new tensor (torch.flip).
Tensor flip(const Tensor& a, const std::vector<int>& dims);
// What flip is made of: for each of `dims` (checked) with two elements or
// more, the dim and the reversed positions to index_select along it (a
// flip of no such dim is a clone). autograd::flip records these ops.
std::vector<std::pair<int, Tensor>> flip_steps(const Tensor& a, const std::vector<int>& dims);
Tensor scatter_add(const Tensor& base, int dim, const Tensor& index, const Tensor& src);

// Convolutions of spatial rank 1 to 3 (ops::conv and friends; `bias` may
// be null) and max pooling over [N, C, H, W].
Tensor conv(const Tensor& x, const Tensor& weight, const Tensor* bias, const ConvWindow& window);
Tensor conv_grad_input(const Tensor& grad_y, const Tensor& weight, const Tensor* bias,
                       const Shape& input_shape, const ConvWindow& window);
Tensor conv_grad_weight(const Tensor& grad_y, const Tensor& x, const Shape& weight_shape,
                        const ConvWindow& window);
// The transposed convolution: checked (ops::conv_transpose_shape), then
// recorded as conv_grad_input of x.
Tensor conv_transpose(const Tensor& x, const Tensor& weight, const Tensor* bias,
                      const ConvWindow& window, const int64_t* output_padding);
Tensor max_pool2d(const Tensor& x, const Window2d& window);
Tensor max_pool2d_grad(const Tensor& grad_y, const Tensor& x, const Window2d& window);

}  // namespace lazylua
