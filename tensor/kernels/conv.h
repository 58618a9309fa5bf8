// conv.h - convolutions of spatial rank 1 to 3 (stride, dilation,
// asymmetric padding, groups, bias) and 2-D max pooling, for f32 and f64:
// the kernels that eager mode, the reference walker and compiled plans all
// call, so every tier computes the same bits.
#pragma once

#include "../array.h"

namespace lazylua {

// A sliding window: kernel kh x kw, strides sh, sw, zero (convolution) or
// -inf (pooling) padding ph, pw on both sides.
struct Window2d {
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0;
  int64_t out_height(int64_t height) const { return (height + 2 * ph - kh) / sh + 1; }
  int64_t out_width(int64_t width) const { return (width + 2 * pw - kw) / sw + 1; }
};

// The window of a convolution over `rank` spatial dims (1 to 3), as
// torch.nn.functional.conv{1,2,3}d: per dim a kernel extent (the weight's),
// a stride, a dilation and zero padding before and after (asymmetric, as
// ONNX's pads); the channels split into `groups`.
struct ConvWindow {
  static constexpr int kMaxRank = 3;
  int rank = 2;
  int64_t groups = 1;
  int64_t kernel[kMaxRank] = {1, 1, 1};
  int64_t stride[kMaxRank] = {1, 1, 1};
  int64_t dilation[kMaxRank] = {1, 1, 1};
  int64_t pad_before[kMaxRank] = {0, 0, 0};
  int64_t pad_after[kMaxRank] = {0, 0, 0};

  // The span of input one output reads along dim d.
  int64_t reach(int d) const { return dilation[d] * (kernel[d] - 1) + 1; }
  // Output extent along dim d of an input extent, or 0 when the padded
  // input is shorter than the window.
  int64_t out_extent(int d, int64_t in) const {
    const int64_t padded = in + pad_before[d] + pad_after[d];
    return padded < reach(d) ? 0 : (padded - reach(d)) / stride[d] + 1;
  }
};

// All arrays contiguous and of one float dtype; shapes already checked
// (eager_ops_conv.cpp). x [N, C, spatial...], weight [O, C/groups, k...],
// y [N, O, out...]. `bias` [O] may be undefined.
void conv_kernel(const Array& x, const Array& weight, const Array& bias, const ConvWindow& window,
                 const Array& y);
// grad_x [N, C, in...] from grad_y [N, O, out...] and weight: the adjoint of
// conv_kernel, which is also the transposed convolution of grad_y; `bias`
// [C] (undefined: none) is added to every position. grad_y's extents may be
// below the window's output extents (a transposed convolution's
// output_padding): the missing positions count as zeros.
void conv_grad_input_kernel(const Array& grad_y, const Array& weight, const Array& bias,
                            const ConvWindow& window, const Array& grad_x);
// grad_weight [O, C/groups, k...] from grad_y [N, O, out...] and x (grad_y's
// extents may be short, as above).
void conv_grad_weight_kernel(const Array& grad_y, const Array& x, const ConvWindow& window,
                             const Array& grad_weight);

// y [N, C, OH, OW]: the maximum of each window (NaN if it holds one).
void max_pool2d_kernel(const Array& x, const Window2d& window, const Array& y);
// grad_x [N, C, H, W]: each window's gradient added at its first maximum.
void max_pool2d_grad_kernel(const Array& grad_y, const Array& x, const Window2d& window,
                            const Array& grad_x);

}  // namespace lazylua
