// eager_ops_conv.cpp - checks and result shapes of convolution and max
// pooling; the work is in kernels/conv.cpp.
#include "eager_ops.h"

namespace lazylua::ops {
namespace {

// Window numbers beyond this are certainly mistakes, and keep every size
// computation below far from overflow.
constexpr int64_t kMaxWindow = int64_t{1} << 24;

void check_window(const Window2d& k, const char* op) {
  for (int64_t size : {k.kh, k.kw, k.sh, k.sw}) {
    if (size < 1 || size > kMaxWindow)
      fail("{}: kernel size and stride must be 1 to {}, got kernel {}x{}, stride {}x{}", op,
           kMaxWindow, k.kh, k.kw, k.sh, k.sw);
  }
  if (k.ph < 0 || k.pw < 0 || k.ph > kMaxWindow || k.pw > kMaxWindow)
    fail("{}: padding must be 0 to {}, got {}x{}", op, kMaxWindow, k.ph, k.pw);
}

void check_image(const Array& x, const char* op, const char* what) {
  if (x.rank() != 4)
    fail("{}: {} must be [N, C, H, W], got a {}-d tensor {}", op, what, x.rank(),
         shape_string(x.shape));
  if (x.dtype != DType::f32 && x.dtype != DType::f64)
    fail("{}: {} must be f32 or f64, got {}", op, what, dtype_name(x.dtype));
}

// [N, channels, OH, OW] of an [N, C, H, W] input under the window.
Shape output_shape(const Shape& input, int64_t channels, const Window2d& k, const char* op) {
  if (input[2] > kMaxWindow || input[3] > kMaxWindow)
    fail("{}: input {}x{} is too large", op, input[2], input[3]);
  const int64_t oh = input[2] + 2 * k.ph >= k.kh ? k.out_height(input[2]) : 0;
  const int64_t ow = input[3] + 2 * k.pw >= k.kw ? k.out_width(input[3]) : 0;
  if (oh < 1 || ow < 1)
    fail("{}: input {}x{} (padding {}x{}) is smaller than the kernel {}x{}", op, input[2], input[3],
         k.ph, k.pw, k.kh, k.kw);
  return Shape{input[0], channels, oh, ow};
}

void check_same_dtype(const Array& a, const Array& b, const char* op, const char* what) {
  if (a.dtype != b.dtype)
    fail("{}: {} is {} but the input is {}", op, what, dtype_name(a.dtype), dtype_name(b.dtype));
}

void check_weight(const Array& weight, int64_t channels, const Window2d& k, const char* op) {
  if (weight.rank() != 4 || weight.shape[1] != channels || weight.shape[2] != k.kh ||
      weight.shape[3] != k.kw)
    fail("{}: weight must be [O, {}, {}, {}] for a {}-channel input, got {}", op, channels, k.kh,
         k.kw, channels, shape_string(weight.shape));
}

void check_gradient(const Array& grad_y, const Shape& expected, const char* op) {
  if (grad_y.shape != expected)
    fail("{}: gradient is {}, expected {}", op, shape_string(grad_y.shape), shape_string(expected));
}

}  // namespace

Window2d window_from_attrs(const int64_t* a) {
  return Window2d{a[0], a[1], a[2], a[3], a[4], a[5]};
}

void window_to_attrs(const Window2d& k, int64_t* a) {
  const int64_t values[] = {k.kh, k.kw, k.sh, k.sw, k.ph, k.pw};
  std::copy(std::begin(values), std::end(values), a);
}

Array conv2d(const Array& x, const Array& weight, const Window2d& k) {
  const char* op = "conv2d";
  check_window(k, op);
  check_image(x, op, "input");
  check_same_dtype(weight, x, op, "weight");
  check_weight(weight, x.shape[1], k, op);
  Array y = Array::empty(output_shape(x.shape, weight.shape[0], k, op), x.dtype, op);
  if (in_meta_scope() || y.numel() == 0) return y;
  if (x.shape[1] == 0) return full(y.shape, Scalar::from_double(0), y.dtype);  // no terms
  conv2d_kernel(contiguous(x), contiguous(weight), k, y);
  return y;
}

Array conv2d_grad_input(const Array& grad_y, const Array& weight, const Shape& input_shape,
                        const Window2d& k) {
  const char* op = "conv2d (gradient)";
  check_window(k, op);
  check_same_dtype(grad_y, weight, op, "gradient");
  Array grad_x = Array::empty(input_shape, weight.dtype, op);
  check_image(grad_x, op, "input");
  check_weight(weight, input_shape[1], k, op);
  check_gradient(grad_y, output_shape(input_shape, weight.shape[0], k, op), op);
  if (!in_meta_scope()) {
    if (grad_x.numel() == 0) return grad_x;
    if (grad_y.numel() == 0) return full(input_shape, Scalar::from_double(0), grad_x.dtype);
    conv2d_grad_input_kernel(contiguous(grad_y), contiguous(weight), k, grad_x);
  }
  return grad_x;
}

Array conv2d_grad_weight(const Array& grad_y, const Array& x, const Shape& weight_shape,
                         const Window2d& k) {
  const char* op = "conv2d (gradient)";
  check_window(k, op);
  check_image(x, op, "input");
  check_same_dtype(grad_y, x, op, "gradient");
  Array grad_weight = Array::empty(weight_shape, x.dtype, op);
  check_weight(grad_weight, x.shape[1], k, op);
  check_gradient(grad_y, output_shape(x.shape, weight_shape[0], k, op), op);
  if (!in_meta_scope()) {
    if (grad_y.numel() == 0 || grad_weight.numel() == 0)
      return full(weight_shape, Scalar::from_double(0), grad_weight.dtype);
    conv2d_grad_weight_kernel(contiguous(grad_y), contiguous(x), k, grad_weight);
  }
  return grad_weight;
}

Array max_pool2d(const Array& x, const Window2d& k) {
  const char* op = "max_pool2d";
  check_window(k, op);
  check_image(x, op, "input");
  if (x.shape[2] * x.shape[3] >= (int64_t{1} << 31))  // kernels/conv.cpp: 32-bit positions
    fail("{}: planes of {}x{} elements are too large", op, x.shape[2], x.shape[3]);
  if (2 * k.ph > k.kh || 2 * k.pw > k.kw)
    fail("{}: padding {}x{} must be at most half the kernel {}x{}", op, k.ph, k.pw, k.kh, k.kw);
  Array y = Array::empty(output_shape(x.shape, x.shape[1], k, op), x.dtype, op);
  if (!in_meta_scope() && y.numel() > 0) max_pool2d_kernel(contiguous(x), k, y);
  return y;
}

Array max_pool2d_grad(const Array& grad_y, const Array& x, const Window2d& k) {
  const char* op = "max_pool2d (gradient)";
  check_window(k, op);
  check_image(x, op, "input");
  check_same_dtype(grad_y, x, op, "gradient");
  check_gradient(grad_y, output_shape(x.shape, x.shape[1], k, op), op);
  Array grad_x = Array::empty(x.shape, x.dtype, op);
  if (!in_meta_scope() && grad_x.numel() > 0) {
    if (grad_y.numel() == 0) return full(x.shape, Scalar::from_double(0), x.dtype);
    max_pool2d_grad_kernel(contiguous(grad_y), contiguous(x), k, grad_x);
  }
  return grad_x;
}

}  // namespace lazylua::ops
