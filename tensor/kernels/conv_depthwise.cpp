// conv_depthwise.cpp - direct kernels for depthwise convolutions (one input
// channel per group, any number of outputs per channel), with no columns:
// each output line is the sum, tap by tap, of a weight times a shifted
// input line, a loop the compiler vectorizes. The work is one pass over
// the input and output planes, which stay in cache while their taps run.
//
// Every output (and every input gradient, and weight gradient) element sums
// its terms in one fixed order, and planes are the unit of parallel work:
// the bits do not depend on the thread count.
#include <algorithm>
#include <vector>

#include "../thread_pool.h"
#include "conv_geometry.h"

namespace lazylua::conv_detail {
namespace {

// Taps are run in order (i, j, l) over each output line (od, oh).
template <typename Tap>
void for_each_tap(const ConvGeometry& g, int64_t od, int64_t oh, Tap&& tap) {
  int64_t index = 0;
  for (int64_t i = 0; i < g.kernel[0]; i++) {
    const int64_t id = od * g.stride[0] - g.pad_before[0] + i * g.dilation[0];
    for (int64_t j = 0; j < g.kernel[1]; j++) {
      const int64_t ih = oh * g.stride[1] - g.pad_before[1] + j * g.dilation[1];
      const bool inside = id >= 0 && id < g.in[0] && ih >= 0 && ih < g.in[1];
      for (int64_t l = 0; l < g.kernel[2]; l++, index++) {
        if (inside) tap(index, (id * g.in[1] + ih) * g.in[2], l * g.dilation[2] - g.pad_before[2]);
      }
    }
  }
}

// out[ow] += w * in[ow * stride + offset] for ow in [lo, hi). Not inlined:
// the __restrict lets the loop vectorize.
template <typename T>
__attribute__((noinline)) void axpy_line(T* __restrict out, const T* __restrict in, T w,
                                         int64_t stride, int64_t offset, int64_t lo, int64_t hi) {
  if (stride == 1) {
    const T* __restrict shifted = in + offset;
    for (int64_t ow = lo; ow < hi; ow++) out[ow] += w * shifted[ow];
  } else {
    for (int64_t ow = lo; ow < hi; ow++) out[ow] += w * in[ow * stride + offset];
  }
}

// in[ow * stride + offset] += w * out[ow]: the transposed line.
template <typename T>
__attribute__((noinline)) void scatter_line(T* __restrict in, const T* __restrict out, T w,
                                            int64_t stride, int64_t offset, int64_t lo,
                                            int64_t hi) {
  if (stride == 1) {
    T* __restrict shifted = in + offset;
    for (int64_t ow = lo; ow < hi; ow++) shifted[ow] += w * out[ow];
  } else {
    for (int64_t ow = lo; ow < hi; ow++) in[ow * stride + offset] += w * out[ow];
  }
}

// The sum of out[ow] * in[ow * stride + offset] over [lo, hi), in eight
// interleaved partial sums (added in a fixed order at the end), which the
// compiler keeps in vector registers.
template <typename T>
__attribute__((noinline)) T dot_line(const T* __restrict out, const T* __restrict in,
                                     int64_t stride, int64_t offset, int64_t lo, int64_t hi) {
  constexpr int kLanes = 8;
  T lanes[kLanes] = {};
  int64_t ow = lo;
  if (stride == 1) {
    const T* __restrict shifted = in + offset;
    for (; ow + kLanes <= hi; ow += kLanes) {
      for (int k = 0; k < kLanes; k++) lanes[k] += out[ow + k] * shifted[ow + k];
    }
  }
  for (; ow < hi; ow++) lanes[0] += out[ow] * in[ow * stride + offset];
  T sum = T(0);
  for (int k = 0; k < kLanes; k++) sum += lanes[k];
  return sum;
}

// Planes per parallel task: at least a grain of output elements.
int64_t plane_grain(int64_t plane) {
  return std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, plane));
}

template <typename T>
void forward(const ConvGeometry& g, const Array& x_array, const Array& weight, const Array& bias,
             const Array& y_array) {
  const int64_t multiplier = g.outputs_per_group, taps = g.taps();
  const int64_t in_plane = g.in_plane(), out_plane = g.out_plane();
  const T* x = x_array.data<T>();
  const T* w = weight.data<T>();
  const T* b = bias.defined() ? bias.data<T>() : nullptr;
  T* y = y_array.data<T>();
  parallel_for(g.n * g.o, plane_grain(out_plane), [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; plane++) {
      const int64_t n = plane / g.o, oc = plane % g.o;
      const T* image = x + (n * g.c + oc / multiplier) * in_plane;
      const T* kernel = w + oc * taps;
      T* out = y + plane * out_plane;
      std::fill(out, out + out_plane, b ? b[oc] : T(0));
      for (int64_t od = 0; od < g.out[0]; od++) {
        for (int64_t oh = 0; oh < g.out[1]; oh++) {
          T* line = out + (od * g.out[1] + oh) * g.out[2];
          for_each_tap(g, od, oh, [&](int64_t tap, int64_t at, int64_t offset) {
            int64_t lo, hi;
            inside_range(g.in[2], g.out[2], g.stride[2], offset, &lo, &hi);
            axpy_line(line, image + at, kernel[tap], g.stride[2], offset, lo, hi);
          });
        }
      }
    }
  });
}

template <typename T>
void backward_input(const ConvGeometry& g, const Array& grad_y, const Array& weight,
                    const Array& bias, const Array& grad_x) {
  const int64_t multiplier = g.outputs_per_group, taps = g.taps();
  const int64_t in_plane = g.in_plane(), out_plane = g.out_plane();
  const T* gy = grad_y.data<T>();
  const T* w = weight.data<T>();
  const T* b = bias.defined() ? bias.data<T>() : nullptr;
  T* gx = grad_x.data<T>();
  parallel_for(g.n * g.c, plane_grain(in_plane), [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; plane++) {
      const int64_t n = plane / g.c, c = plane % g.c;
      T* image = gx + plane * in_plane;
      std::fill(image, image + in_plane, T(0));
      for (int64_t m = 0; m < multiplier; m++) {
        const int64_t oc = c * multiplier + m;
        const T* kernel = w + oc * taps;
        const T* out = gy + (n * g.o + oc) * out_plane;
        for (int64_t od = 0; od < g.out[0]; od++) {
          for (int64_t oh = 0; oh < g.out[1]; oh++) {
            const T* line = out + (od * g.out[1] + oh) * g.out[2];
            for_each_tap(g, od, oh, [&](int64_t tap, int64_t at, int64_t offset) {
              int64_t lo, hi;
              inside_range(g.in[2], g.out[2], g.stride[2], offset, &lo, &hi);
              scatter_line(image + at, line, kernel[tap], g.stride[2], offset, lo, hi);
            });
          }
        }
      }
      if (b) {
        for (T* at = image; at < image + in_plane; at++) *at += b[c];
      }
    }
  });
}

template <typename T>
void backward_weight(const ConvGeometry& g, const Array& grad_y, const Array& x_array,
                     const Array& grad_weight) {
  const int64_t multiplier = g.outputs_per_group, taps = g.taps();
  const int64_t in_plane = g.in_plane(), out_plane = g.out_plane();
  const T* gy = grad_y.data<T>();
  const T* x = x_array.data<T>();
  T* gw = grad_weight.data<T>();
  const int64_t grain = plane_grain(g.n * out_plane * taps);
  parallel_for(g.o, grain, [&](int64_t begin, int64_t end) {
    for (int64_t oc = begin; oc < end; oc++) {
      T* kernel = gw + oc * taps;
      std::fill(kernel, kernel + taps, T(0));
      for (int64_t n = 0; n < g.n; n++) {
        const T* image = x + (n * g.c + oc / multiplier) * in_plane;
        const T* out = gy + (n * g.o + oc) * out_plane;
        for (int64_t od = 0; od < g.out[0]; od++) {
          for (int64_t oh = 0; oh < g.out[1]; oh++) {
            const T* line = out + (od * g.out[1] + oh) * g.out[2];
            for_each_tap(g, od, oh, [&](int64_t tap, int64_t at, int64_t offset) {
              int64_t lo, hi;
              inside_range(g.in[2], g.out[2], g.stride[2], offset, &lo, &hi);
              kernel[tap] += dot_line(line, image + at, g.stride[2], offset, lo, hi);
            });
          }
        }
      }
    }
  });
}

}  // namespace

void depthwise_forward(const ConvGeometry& g, const Array& x, const Array& weight,
                       const Array& bias, const Array& y) {
  if (y.dtype == DType::f64) return forward<double>(g, x, weight, bias, y);
  forward<float>(g, x, weight, bias, y);
}

void depthwise_grad_input(const ConvGeometry& g, const Array& grad_y, const Array& weight,
                          const Array& bias, const Array& grad_x) {
  if (grad_x.dtype == DType::f64) return backward_input<double>(g, grad_y, weight, bias, grad_x);
  backward_input<float>(g, grad_y, weight, bias, grad_x);
}

void depthwise_grad_weight(const ConvGeometry& g, const Array& grad_y, const Array& x,
                           const Array& grad_weight) {
  if (grad_weight.dtype == DType::f64) return backward_weight<double>(g, grad_y, x, grad_weight);
  backward_weight<float>(g, grad_y, x, grad_weight);
}

}  // namespace lazylua::conv_detail
