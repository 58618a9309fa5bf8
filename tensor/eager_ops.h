// eager_ops.h - every tensor op, executed at once on Arrays.
//
// Each op validates its arguments (shape and dtype errors are Errors naming
// the op and the shapes), infers the result's shape and dtype, allocates the
// result and runs the reference kernel. Dims and indices are 0-based here:
// the Lua binding has already normalized them with normalize_dim/index.
// This is eager mode, and what the lazy executor calls for each node.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "array.h"
#include "kernels/conv.h"
#include "kernels/elementwise.h"
#include "kernels/reduce.h"

namespace lazylua::ops {

// A Lua number taking part in an op (see promote_with_scalar in dtype.h).
struct Scalar {
  double value = 0;     // the number as a double
  int64_t integer = 0;  // exact value when is_integer
  bool is_integer = false;

  static Scalar from_double(double v) { return {v, static_cast<int64_t>(0), false}; }
  static Scalar from_integer(int64_t v) { return {static_cast<double>(v), v, true}; }
};

// The dtype binary op `op` computes in when its operands promote to
// `promoted` (true division and atan2 of integers compute in f32; arithmetic
// on bools in i64).
// Between two bools, + and maximum are logical or, * and minimum logical
// and (as in PyTorch), and - is an error; the other arithmetic ops count
// bools as 0/1 in i64.
DType binary_compute_dtype(BinaryOp op, DType promoted);

// An integer Lua number in an op whose compute dtype is i32 must fit in
// i32 (it would wrap): an Error naming the op otherwise.
void check_scalar_fits(BinaryOp op, Scalar value, DType compute);

// A number stored into a tensor of `dtype` (a fill, a masked fill, a
// constant): a float with no value of an integer dtype (NaN, +-inf, beyond
// its range) is an Error naming `op`, the one a cast of it gives, not a
// silent 0 or wrapped value.
void check_storable(Scalar value, DType dtype, const char* op);

// Factories.
Array full(const Shape& shape, Scalar value, DType dtype);
Array arange(Scalar start, Scalar stop, Scalar step, std::optional<DType> dtype);
Array linspace(double start, double stop, int64_t steps, DType dtype);
Array eye(int64_t rows, int64_t cols, DType dtype);
Array rand(const Shape& shape, DType dtype);
Array randn(const Shape& shape, DType dtype);
Array randint(int64_t low, int64_t high, const Shape& shape, DType dtype);
Array randperm(int64_t n);

// Elementwise.
Array unary(UnaryOp op, const Array& a);
Array binary(BinaryOp op, const Array& a, const Array& b);
Array binary(BinaryOp op, const Array& a, Scalar b);
Array binary(BinaryOp op, Scalar a, const Array& b);
Array where(const Array& cond, const Array& a, const Array& b);
// Bounds are Lua numbers; integer bounds clamp integer tensors exactly.
Array clamp(const Array& a, std::optional<Scalar> low, std::optional<Scalar> high);
Array cast(const Array& a, DType dtype);  // returns `a` itself when already dtype

// In place: self is updated (through its view into the base). The result
// dtype of the op must be self's dtype (an f32 result cannot go into an i64
// tensor: Error, as in PyTorch); other's shape must broadcast to self's.
// Writing into an expanded view (several elements share memory) is an Error.
void unary_(UnaryOp op, const Array& self);
void binary_(BinaryOp op, const Array& self, const Array& other);
void binary_(BinaryOp op, const Array& self, Scalar other);
void clamp_(const Array& self, std::optional<Scalar> low, std::optional<Scalar> high);
void fill_(const Array& self, Scalar value);
void copy_(const Array& self, const Array& source);  // source broadcasts to self, any dtype

// Reductions. dim == nullopt reduces everything to a scalar (keepdim then
// keeps every dim as extent 1).
Array reduce(ReduceOp op, const Array& a, std::optional<int> dim, bool keepdim);
// values, 1-based i64 indices.
std::pair<Array, Array> max_min_dim(bool is_max, const Array& a, int dim, bool keepdim);
Array arg_max_min(bool is_max, const Array& a, std::optional<int> dim, bool keepdim);
Array softmax(const Array& a, int dim, bool log);
Array cumsum(const Array& a, int dim);

// Linear algebra: matmul follows torch.matmul (1-D, 2-D, batched with
// broadcast batch dims).
Array matmul(const Array& a, const Array& b);
// The same, written into `out` when it is contiguous and of the result's
// dtype and size (the compiler's plans place results where they belong).
Array matmul_into(const Array& a, const Array& b, const Array& out);

// Views: share a's buffer.
Array view(const Array& a, const Shape& shape);     // Error if not viewable; -1 allowed
Array reshape(const Array& a, const Shape& shape);  // a view when possible, else a copy
Array transpose(const Array& a, int dim_a, int dim_b);
Array permute(const Array& a, const std::vector<int>& order);
Array narrow(const Array& a, int dim, int64_t start, int64_t length);
Array select(const Array& a, int dim, int64_t index);
Array squeeze(const Array& a, std::optional<int> dim);
Array unsqueeze(const Array& a, int dim);          // dim in [0, rank]
Array expand(const Array& a, const Shape& shape);  // -1 keeps an extent
Array flatten(const Array& a, int start_dim, int end_dim);

// Joins and indexing (index arrays hold 1-based positions).
Array cat(const std::vector<Array>& inputs, int dim);
Array gather(const Array& a, int dim, const Array& index);
// A copy of `base` with src[i][j] added at [index[i][j]][j] (dim 0; likewise
// for others), as torch.scatter_add. Repeated positions add up.
Array scatter_add(const Array& base, int dim, const Array& index, const Array& src);
Array index_select(const Array& a, int dim, const Array& index);

// Resolves one -1 extent of `shape` against `numel`; Errors name `op`.
Shape infer_shape(const Shape& shape, int64_t numel, const char* op);

// Convolutions over [N, C, spatial...] f32/f64 arrays of spatial rank 1 to 3
// (window.rank), as torch.nn.functional.conv{1,2,3}d with asymmetric
// padding, and their gradients; `bias` is nullptr or [O] (the transposed
// convolution's [C] for conv_grad_input). The window's kernel is taken from
// the weight. The IR nodes hold the rest of the window in their attrs
// (conv_window_to_attrs) and the rank in sub_op. Errors name conv_name().
const char* conv_name(int rank, bool transposed);  // "conv2d", "conv_transpose2d"
void conv_window_to_attrs(const ConvWindow& window, int64_t* attrs);
ConvWindow conv_window_from_attrs(int rank, const int64_t* attrs);
// x [N, C, in...], weight [O, C/groups, k...] -> [N, O, out...].
// `epilogue`: the clamps a compiled plan folded into the convolution
// (compiler/conv_epilogue.h), applied to every value of the result.
Array conv(const Array& x, const Array& weight, const Array* bias, ConvWindow window,
           const ConvEpilogue& epilogue = {});
// The adjoint of conv in x, which is also the transposed convolution of
// grad_y (whose extents may be short of conv's: output_padding).
Array conv_grad_input(const Array& grad_y, const Array& weight, const Array* bias,
                      const Shape& input_shape, ConvWindow window);
Array conv_grad_weight(const Array& grad_y, const Array& x, const Shape& weight_shape,
                       ConvWindow window);
// Checks a transposed convolution of x [N, C, in...] by weight [C, O/groups,
// k...] and returns its output shape [N, O, out...], out = (in - 1) * stride
// - pad_before - pad_after + dilation * (k - 1) + output_padding + 1.
Shape conv_transpose_shape(const Array& x, const Array& weight, const Array* bias,
                           ConvWindow window, const int64_t* output_padding);

// Max pooling over [N, C, H, W] f32/f64 arrays, as
// torch.nn.functional.max_pool2d, and its gradient. The window's six
// numbers are the IR node's attrs.
Window2d window_from_attrs(const int64_t* attrs);
void window_to_attrs(const Window2d& window, int64_t* attrs);
// x [N, C, H, W] -> [N, C, OH, OW]; padding is -inf and at most half the kernel.
Array max_pool2d(const Array& x, const Window2d& window);
Array max_pool2d_grad(const Array& grad_y, const Array& x, const Window2d& window);

}  // namespace lazylua::ops
