// eager_ops_conv.cpp - checks and result shapes of convolutions (rank 1 to
// 3, transposed too) and of max pooling; the work is in kernels/conv*.cpp
// and kernels/max_pool.cpp.
#include <climits>
#include <cstdint>

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

// ---- Convolutions ----

namespace {

// Each spatial dim's stride, dilation and two pads share one int64 of the
// node's attrs (16 bits each): an IR node has kMaxDims attrs, and widening
// them for every node (their size is charged to memory limits, ir.cpp)
// would cost more than these bounds do. Larger values are refused.
constexpr int kFieldBits = 16;
constexpr int64_t kMaxField = (int64_t{1} << kFieldBits) - 1;
// Groups and extents past this are certainly mistakes, and keep every size
// computation far from overflow.
constexpr int64_t kMaxConvExtent = int64_t{1} << 24;

// "3x4" of a shape's spatial extents (from dim `first` on).
std::string spatial_string(const int64_t* values, int count) {
  std::string text;
  for (int d = 0; d < count; d++) text += fmt::format("{}{}", d ? "x" : "", values[d]);
  return text;
}
std::string spatial_string(const Shape& shape) {
  return spatial_string(shape.begin() + 2, shape.rank() - 2);
}

void check_conv_window(const ConvWindow& k, const char* op) {
  LAZYLUA_ASSERT(k.rank >= 1 && k.rank <= ConvWindow::kMaxRank);
  if (k.groups < 1 || k.groups > kMaxConvExtent)
    fail("{}: groups must be 1 to {}, got {}", op, kMaxConvExtent, k.groups);
  auto check = [&](const int64_t* values, const char* what, int64_t low) {
    for (int d = 0; d < k.rank; d++) {
      if (values[d] < low || values[d] > kMaxField)
        fail("{}: {} must be {} to {} in every dim, got {}", op, what, low, kMaxField,
             spatial_string(values, k.rank));
    }
  };
  for (int d = 0; d < k.rank; d++) {
    if (k.stride[d] < 1 || k.stride[d] > kMaxField)
      fail("{}: kernel size and stride must be 1 to {}, got stride {}", op, kMaxField,
           spatial_string(k.stride, k.rank));
  }
  check(k.dilation, "dilation", 1);
  check(k.pad_before, "padding", 0);
  check(k.pad_after, "padding", 0);
}

// x is [N, C, spatial...] of a float dtype; `what` names it.
void check_spatial(const Shape& shape, DType dtype, int rank, const char* op, const char* what) {
  static const char* const kLayouts[] = {"", "[N, C, L]", "[N, C, H, W]", "[N, C, D, H, W]"};
  if (shape.rank() != rank + 2)
    fail("{}: {} must be {}, got a {}-d tensor {}", op, what, kLayouts[rank], shape.rank(),
         shape_string(shape));
  if (dtype != DType::f32 && dtype != DType::f64)
    fail("{}: {} must be f32 or f64, got {}", op, what, dtype_name(dtype));
  for (int d = 1; d < shape.rank(); d++) {
    if (shape[d] > kMaxConvExtent) fail("{}: {} {} is too large", op, what, shape_string(shape));
  }
}

// The weight [O, C/groups, k...] of a convolution of a C-channel input
// under the window; sets the window's kernel from it.
void check_conv_weight(const Shape& weight, int64_t channels, ConvWindow& k, const char* op) {
  const int rank = k.rank;
  if (weight.rank() != rank + 2)
    fail("{}: weight must be [O, C/groups, {}kernel], got {}", op, rank == 1 ? "" : "... ",
         shape_string(weight));
  if (channels % k.groups != 0)
    fail("{}: groups {} does not divide the input's {} channels", op, k.groups, channels);
  if (weight[0] % k.groups != 0)
    fail("{}: groups {} does not divide the weight's {} output channels", op, k.groups, weight[0]);
  if (weight[1] * k.groups != channels) {
    std::string kernel;
    for (int d = 0; d < rank; d++) kernel += fmt::format(", {}", weight[2 + d]);
    fail("{}: weight must be [O, {}{}] for a {}-channel input with groups {}, got {}", op,
         channels / k.groups, kernel, channels, k.groups, shape_string(weight));
  }
  for (int d = 0; d < rank; d++) {
    if (weight[2 + d] < 1 || weight[2 + d] > kMaxField)
      fail("{}: the kernel {} must be 1 to {} in every dim", op, shape_string(weight), kMaxField);
    k.kernel[d] = weight[2 + d];
  }
}

// The output shape [N, O, out...] of a convolution of `input`.
Shape conv_output_shape(const Shape& input, int64_t out_channels, const ConvWindow& k,
                        const char* op) {
  Shape out = input;
  out[1] = out_channels;
  for (int d = 0; d < k.rank; d++) {
    out[2 + d] = k.out_extent(d, input[2 + d]);
    if (out[2 + d] < 1) {
      int64_t reach[ConvWindow::kMaxRank];
      for (int e = 0; e < k.rank; e++) reach[e] = k.reach(e);
      fail(
          "{}: input {} (padding {} before, {} after) is smaller than the kernel {} (kernel "
          "{} dilated by {}): the output would be empty",
          op, spatial_string(input), spatial_string(k.pad_before, k.rank),
          spatial_string(k.pad_after, k.rank), spatial_string(reach, k.rank),
          spatial_string(k.kernel, k.rank), spatial_string(k.dilation, k.rank));
    }
  }
  return out;
}

void check_bias(const Array* bias, int64_t channels, DType dtype, const char* op) {
  if (!bias) return;
  if (bias->rank() != 1 || bias->shape[0] != channels)
    fail("{}: bias must be [{}] (one per output channel), got {}", op, channels,
         shape_string(bias->shape));
  if (bias->dtype != dtype)
    fail("{}: bias is {} but the input is {}", op, dtype_name(bias->dtype), dtype_name(dtype));
}

// A gradient's extents may be below the window's output extents (a
// transposed convolution's output_padding), never above.
void check_conv_gradient(const Shape& grad_y, const Shape& full, const char* op) {
  bool fits = grad_y.rank() == full.rank() && grad_y[0] == full[0] && grad_y[1] == full[1];
  for (int d = 2; fits && d < full.rank(); d++) fits = grad_y[d] >= 1 && grad_y[d] <= full[d];
  if (!fits) fail("{}: gradient is {}, expected {}", op, shape_string(grad_y), shape_string(full));
}

Array zeros_like_shape(const Shape& shape, DType dtype) {
  return full(shape, Scalar::from_double(0), dtype);
}

}  // namespace

const char* conv_name(int rank, bool transposed) {
  static const char* const kNames[2][4] = {
      {"conv", "conv1d", "conv2d", "conv3d"},
      {"conv_transpose", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"}};
  return kNames[transposed ? 1 : 0][rank >= 1 && rank <= 3 ? rank : 0];
}

void conv_window_to_attrs(const ConvWindow& k, int64_t* attrs) {
  attrs[0] = k.groups;
  for (int d = 0; d < k.rank; d++) {
    const uint64_t fields[] = {
        static_cast<uint64_t>(k.stride[d]), static_cast<uint64_t>(k.dilation[d]),
        static_cast<uint64_t>(k.pad_before[d]), static_cast<uint64_t>(k.pad_after[d])};
    // Values past a field are refused by the op's checks, which run before
    // a node with these attrs is recorded.
    uint64_t packed = 0;
    for (int f = 0; f < 4; f++) {
      packed |= (fields[f] & static_cast<uint64_t>(kMaxField)) << (f * kFieldBits);
    }
    attrs[1 + d] = static_cast<int64_t>(packed);
  }
}

ConvWindow conv_window_from_attrs(int rank, const int64_t* attrs) {
  ConvWindow k;
  k.rank = rank;
  k.groups = attrs[0];
  for (int d = 0; d < rank; d++) {
    const auto packed = static_cast<uint64_t>(attrs[1 + d]);
    auto field = [&](int f) {
      return static_cast<int64_t>((packed >> (f * kFieldBits)) & static_cast<uint64_t>(kMaxField));
    };
    k.stride[d] = field(0);
    k.dilation[d] = field(1);
    k.pad_before[d] = field(2);
    k.pad_after[d] = field(3);
  }
  return k;
}

Array conv(const Array& x, const Array& weight, const Array* bias, ConvWindow k,
           const ConvEpilogue& epilogue) {
  const char* op = conv_name(k.rank, false);
  check_conv_window(k, op);
  check_spatial(x.shape, x.dtype, k.rank, op, "input");
  check_same_dtype(weight, x, op, "weight");
  check_conv_weight(weight.shape, x.shape[1], k, op);
  check_bias(bias, weight.shape[0], x.dtype, op);
  Array y = Array::empty(conv_output_shape(x.shape, weight.shape[0], k, op), x.dtype, op);
  if (in_meta_scope() || y.numel() == 0) return y;
  if (weight.shape[1] == 0) {  // no terms: the bias alone
    Array only_bias = zeros_like_shape(y.shape, y.dtype);
    if (bias) {
      Shape per_channel = Shape::filled(y.rank(), 1);
      per_channel[1] = y.shape[1];
      only_bias = contiguous(reshape(*bias, per_channel).expanded(y.shape));
    }
    epilogue.apply(only_bias);
    return only_bias;
  }
  const Array bias_data = bias ? contiguous(*bias) : Array{};
  conv_kernel(contiguous(x), contiguous(weight), bias_data, k, y, epilogue);
  return y;
}

Array conv_grad_input(const Array& grad_y, const Array& weight, const Array* bias,
                      const Shape& input_shape, ConvWindow k) {
  const char* op = "conv (input gradient)";
  check_conv_window(k, op);
  check_same_dtype(grad_y, weight, op, "gradient");
  check_spatial(input_shape, weight.dtype, k.rank, op, "input");
  check_spatial(grad_y.shape, grad_y.dtype, k.rank, op, "gradient");
  check_conv_weight(weight.shape, input_shape[1], k, op);
  check_bias(bias, input_shape[1], weight.dtype, op);
  check_conv_gradient(grad_y.shape, conv_output_shape(input_shape, weight.shape[0], k, op), op);
  Array grad_x = Array::empty(input_shape, weight.dtype, op);
  if (in_meta_scope() || grad_x.numel() == 0) return grad_x;
  const Array bias_data = bias ? contiguous(*bias) : Array{};
  if (grad_y.numel() == 0) {
    if (!bias) return zeros_like_shape(input_shape, grad_x.dtype);
    Shape per_channel = Shape::filled(grad_x.rank(), 1);
    per_channel[1] = input_shape[1];
    return contiguous(reshape(bias_data, per_channel).expanded(input_shape));
  }
  conv_grad_input_kernel(contiguous(grad_y), contiguous(weight), bias_data, k, grad_x);
  return grad_x;
}

Array conv_grad_weight(const Array& grad_y, const Array& x, const Shape& weight_shape,
                       ConvWindow k) {
  const char* op = "conv (weight gradient)";
  check_conv_window(k, op);
  check_spatial(x.shape, x.dtype, k.rank, op, "input");
  check_same_dtype(grad_y, x, op, "gradient");
  check_conv_weight(weight_shape, x.shape[1], k, op);
  check_conv_gradient(grad_y.shape, conv_output_shape(x.shape, weight_shape[0], k, op), op);
  Array grad_weight = Array::empty(weight_shape, x.dtype, op);
  if (in_meta_scope() || grad_weight.numel() == 0) return grad_weight;
  if (grad_y.numel() == 0 || x.numel() == 0) return zeros_like_shape(weight_shape, x.dtype);
  conv_grad_weight_kernel(contiguous(grad_y), contiguous(x), k, grad_weight);
  return grad_weight;
}

Shape conv_transpose_shape(const Array& x, const Array& weight, const Array* bias, ConvWindow k,
                           const int64_t* output_padding) {
  const char* op = conv_name(k.rank, true);
  check_conv_window(k, op);
  check_spatial(x.shape, x.dtype, k.rank, op, "input");
  check_same_dtype(weight, x, op, "weight");
  const int rank = k.rank;
  if (weight.rank() != rank + 2)
    fail("{}: weight must be [C, O/groups, {}kernel], got {}", op, rank == 1 ? "" : "... ",
         shape_string(weight.shape));
  if (weight.shape[0] != x.shape[1])
    fail("{}: weight {} must have the input's {} channels in dim 1, got {}", op,
         shape_string(weight.shape), x.shape[1], weight.shape[0]);
  if (x.shape[1] % k.groups != 0)
    fail("{}: groups {} does not divide the input's {} channels", op, k.groups, x.shape[1]);
  Shape out = x.shape;
  out[1] = weight.shape[1] * k.groups;
  for (int d = 0; d < rank; d++) {
    if (weight.shape[2 + d] < 1 || weight.shape[2 + d] > kMaxField)
      fail("{}: the kernel {} must be 1 to {} in every dim", op, shape_string(weight.shape),
           kMaxField);
    k.kernel[d] = weight.shape[2 + d];
    const int64_t limit = std::max(k.stride[d], k.dilation[d]);
    if (output_padding[d] < 0 || output_padding[d] >= limit)
      fail("{}: output_padding {} must be 0 to {} (below the stride or the dilation)", op,
           output_padding[d], limit - 1);
    out[2 + d] = (x.shape[2 + d] - 1) * k.stride[d] - k.pad_before[d] - k.pad_after[d] +
                 k.reach(d) + output_padding[d];
    if (out[2 + d] < 1)
      fail(
          "{}: the output would have extent {} in spatial dim {} (input {}, padding {} before, "
          "{} after); it must be at least 1",
          op, out[2 + d], d + 1, spatial_string(x.shape), spatial_string(k.pad_before, rank),
          spatial_string(k.pad_after, rank));
    if (out[2 + d] > kMaxConvExtent) fail("{}: the output {} is too large", op, out[2 + d]);
  }
  check_bias(bias, out[1], x.dtype, op);
  return out;
}

}  // namespace lazylua::ops
