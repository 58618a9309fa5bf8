// conv_geometry.h - the sizes a convolution kernel works with, shared by
// the column kernels (conv.cpp) and the direct depthwise ones
// (conv_depthwise.cpp). Every convolution is seen as a 3-D one: a 1-D or
// 2-D window has leading spatial dims of extent 1, kernel 1, stride 1.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>

#include "conv.h"

namespace lazylua::conv_detail {

struct ConvGeometry {
  int64_t n = 0, c = 0, o = 0, groups = 1;
  int64_t channels_per_group = 0, outputs_per_group = 0;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  int64_t kernel[3] = {1, 1, 1}, stride[3] = {1, 1, 1}, dilation[3] = {1, 1, 1};
  int64_t pad_before[3] = {0, 0, 0};

  int64_t in_plane() const { return in[0] * in[1] * in[2]; }
  int64_t out_plane() const { return out[0] * out[1] * out[2]; }
  int64_t taps() const { return kernel[0] * kernel[1] * kernel[2]; }
  // Rows of a group's column matrix: one per (input channel, tap).
  int64_t rows() const { return channels_per_group * taps(); }
  // 1x1 windows, stride 1, no padding: the columns are the input itself.
  bool pointwise() const {
    for (int d = 0; d < 3; d++) {
      if (kernel[d] != 1 || stride[d] != 1 || pad_before[d] != 0) return false;
    }
    return in[0] == out[0] && in[1] == out[1] && in[2] == out[2];
  }
  // One input channel per group (any number of outputs per channel).
  bool depthwise() const { return groups == c && channels_per_group == 1; }
};

// x [N, C, in...], weight [O, C/groups, k...], y [N, O, out...] (y's
// extents are the ones computed: they may be below the window's).
inline ConvGeometry conv_geometry(const Shape& x, const Shape& weight, const Shape& y,
                                  const ConvWindow& window) {
  ConvGeometry g;
  g.n = x[0];
  g.c = x[1];
  g.o = weight[0];
  g.groups = window.groups;
  g.channels_per_group = weight[1];
  g.outputs_per_group = g.o / g.groups;
  const int skip = 3 - window.rank;
  for (int d = 0; d < window.rank; d++) {
    g.in[skip + d] = x[2 + d];
    g.out[skip + d] = y[2 + d];
    g.kernel[skip + d] = weight[2 + d];
    g.stride[skip + d] = window.stride[d];
    g.dilation[skip + d] = window.dilation[d];
    g.pad_before[skip + d] = window.pad_before[d];
  }
  return g;
}

// Ceiling of a / b for b > 0 and any a.
inline int64_t ceil_div(int64_t a, int64_t b) {
  return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

// The outputs [*lo, *hi) of a line of `out` whose input o * stride + offset
// lies inside [0, in).
inline void inside_range(int64_t in, int64_t out, int64_t stride, int64_t offset, int64_t* lo,
                         int64_t* hi) {
  *lo = std::clamp<int64_t>(ceil_div(-offset, stride), 0, out);
  *hi = std::clamp<int64_t>(ceil_div(in - offset, stride), *lo, out);
}

// Scratch buffers of the calling thread, one per slot, kept from call to
// call: a kernel asks for its buffer on every chunk, and a fresh vector
// each time cost page faults and a zero fill (4% and 2% of a ResNet-18
// call). A buffer only grows; its size is bounded by the chunk sizes
// (conv.cpp's kScratchElements and products of one chunk) and, for
// kPartialSums, by the weight gradient's partial sums.
enum ScratchSlot { kChunkScratch, kPartialSums };

template <typename T, ScratchSlot slot = kChunkScratch>
T* thread_scratch(int64_t elements) {
  thread_local std::unique_ptr<T[]> buffer;
  thread_local int64_t capacity = 0;
  if (elements > capacity) {
    buffer.reset();
    buffer = std::make_unique_for_overwrite<T[]>(static_cast<size_t>(elements));
    capacity = elements;
  }
  return buffer.get();
}

// f32 2-D convolutions (groups 1) through oneDNN (conv_onednn.cpp); false
// when oneDNN has no kernel for the shape (the column kernels run it). Each
// work item applies the epilogue to the part of y it wrote.
bool onednn_forward(const ConvGeometry& g, int rank, const Array& x, const Array& weight,
                    const Array& bias, const Array& y, const ConvEpilogue& epilogue);
// Their input gradient (with a transposed convolution's bias) and weight
// gradient, likewise.
bool onednn_grad_input(const ConvGeometry& g, int rank, const Array& grad_y, const Array& weight,
                       const Array& bias, const Array& grad_x);
bool onednn_grad_weight(const ConvGeometry& g, int rank, const Array& grad_y, const Array& x,
                        const Array& grad_weight);

// The forward pass of f32 1x1 convolutions of one group, with stride 1
// and no padding (conv_pointwise.cpp); false for any other, and where the
// build has no AVX2 and FMA (OpenBLAS's products run it, conv.cpp).
bool pointwise_forward(const ConvGeometry& g, const Array& x, const Array& weight,
                       const Array& bias, const Array& y, const ConvEpilogue& epilogue);

// Direct kernels for depthwise convolutions (conv_depthwise.cpp); the
// forward one applies the epilogue to each output plane it writes.
void depthwise_forward(const ConvGeometry& g, const Array& x, const Array& weight,
                       const Array& bias, const Array& y, const ConvEpilogue& epilogue);
void depthwise_grad_input(const ConvGeometry& g, const Array& grad_y, const Array& weight,
                          const Array& bias, const Array& grad_x);
void depthwise_grad_weight(const ConvGeometry& g, const Array& grad_y, const Array& x,
                           const Array& grad_weight);

}  // namespace lazylua::conv_detail
