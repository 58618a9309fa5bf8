// conv.h - 2-D convolution and max pooling over [N, C, H, W] arrays, for
// f32 and f64: the kernels that eager mode and compiled plans both call, so
// every tier computes the same bits.
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

// All arrays contiguous and of one float dtype; shapes already checked.
// y [N, O, OH, OW] = conv(x [N, C, H, W], weight [O, C, kh, kw]).
void conv2d_kernel(const Array& x, const Array& weight, const Window2d& window, const Array& y);
// grad_x [N, C, H, W] from grad_y [N, O, OH, OW] and weight.
void conv2d_grad_input_kernel(const Array& grad_y, const Array& weight, const Window2d& window,
                              const Array& grad_x);
// grad_weight [O, C, kh, kw] from grad_y [N, O, OH, OW] and x.
void conv2d_grad_weight_kernel(const Array& grad_y, const Array& x, const Window2d& window,
                               const Array& grad_weight);
// y [N, C, OH, OW]: the maximum of each window (NaN if it holds one).
void max_pool2d_kernel(const Array& x, const Window2d& window, const Array& y);
// grad_x [N, C, H, W]: each window's gradient added at its first maximum.
void max_pool2d_grad_kernel(const Array& grad_y, const Array& x, const Window2d& window,
                            const Array& grad_x);

}  // namespace lazylua
