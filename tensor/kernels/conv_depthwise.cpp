// conv_depthwise.cpp - direct kernels for depthwise convolutions (one input
// channel per group, any number of outputs per channel), with no columns.
//
// The forward kernel of a 1-D or 2-D window copies an input plane once into
// zero-padded phase planes (one per stride phase of rows and columns), laid
// so that every tap reads one contiguous run at a fixed offset: the output
// plane, computed on a grid as wide as a phase plane's rows, is then the sum
// over taps of a weight times a shifted flat run, vectors of the whole plane
// summed over every tap in registers (no per-line loop: MobileNetV2's 7x7
// and 14x14 planes made the line-by-line kernel 20-50x slower than a copy of
// its input and output; a pass over the grid per tap took 1.5-2x the time).
// The grid's extra columns are dropped when the plane is written out, and
// the epilogue is applied to the plane while it is in cache.
//
// Other windows (3-D) and the gradients run line by line: each output line
// is the sum, tap by tap, of a weight times a shifted input line.
//
// Every output (and every input gradient, and weight gradient) element sums
// its terms in one fixed order, and planes are the unit of parallel work:
// the bits do not depend on the thread count.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "../thread_pool.h"
#include "conv.h"
#include "conv_geometry.h"
#include "simd.h"

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

// The phase planes of one input plane: plane (psi, phi) holds rows
// v * sh + psi and columns u * sw + phi of the input, over the rows and
// columns the taps reach, zero outside the input. Tap (j, l) then reads
// the plane of its phases at flat offset tap_offset[tap] from the output
// grid position oh * width + ow.
struct PhaseLayout {
  int64_t phases_h = 1, phases_w = 1;       // the strides
  int64_t first_row = 0, first_column = 0;  // in phase-plane units, may be < 0
  int64_t rows = 0, width = 0;              // of each phase plane, plus a spare row
  int64_t plane_size() const { return (rows + 1) * width; }
  int64_t grid_size(const ConvGeometry& g) const { return g.out[1] * width; }
};

// floor(a / b) for b > 0.
inline int64_t floor_div(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

PhaseLayout phase_layout(const ConvGeometry& g) {
  PhaseLayout p;
  p.phases_h = g.stride[1];
  p.phases_w = g.stride[2];
  int64_t low_row = 0, high_row = 0, low_column = 0, high_column = 0;
  for (int64_t j = 0; j < g.kernel[1]; j++) {
    const int64_t e = floor_div(j * g.dilation[1] - g.pad_before[1], p.phases_h);
    low_row = j == 0 ? e : std::min(low_row, e);
    high_row = j == 0 ? e : std::max(high_row, e);
  }
  for (int64_t l = 0; l < g.kernel[2]; l++) {
    const int64_t d = floor_div(l * g.dilation[2] - g.pad_before[2], p.phases_w);
    low_column = l == 0 ? d : std::min(low_column, d);
    high_column = l == 0 ? d : std::max(high_column, d);
  }
  p.first_row = low_row;
  p.first_column = low_column;
  p.rows = g.out[1] + high_row - low_row;
  p.width = g.out[2] + high_column - low_column;
  return p;
}

// line[u] = source[2 u] for u in [0, count), reading no further than
// source[available - 1]: the columns of one phase of a stride-2 window. By
// pairs of vectors and a shuffle: GCC's own loop moved a float at a time,
// half of a stride-2 layer's time.
template <typename T>
void copy_every_other(T* __restrict line, const T* __restrict source, int64_t count,
                      int64_t available) {
  int64_t u = 0;
  if constexpr (std::is_same_v<T, float>) {
    using Index = int32_t __attribute__((vector_size(simd::kVectorBytes)));
    constexpr Index kEven = {0, 2, 4, 6, 8, 10, 12, 14};
    constexpr int64_t kLanes = simd::kLanes<float>;
    for (; u + kLanes <= count && 2 * (u + kLanes) <= available; u += kLanes) {
      const simd::Vec<float> low = simd::load(source + 2 * u);
      const simd::Vec<float> high = simd::load(source + 2 * u + kLanes);
      simd::store(line + u, __builtin_shuffle(low, high, kEven));
    }
  }
  for (; u < count; u++) line[u] = source[2 * u];
}

// Fills the phase planes of input plane `image` into `planes`.
template <typename T>
void fill_phases(const ConvGeometry& g, const PhaseLayout& p, const T* image, T* planes) {
  const int64_t height = g.in[1], width = g.in[2];
  for (int64_t psi = 0; psi < p.phases_h; psi++) {
    for (int64_t phi = 0; phi < p.phases_w; phi++) {
      T* plane = planes + (psi * p.phases_w + phi) * p.plane_size();
      // Columns u of the phase plane inside the input: 0 <= u * sw + phi < width.
      const int64_t u_lo =
          std::clamp<int64_t>(ceil_div(-phi, p.phases_w) - p.first_column, 0, p.width);
      const int64_t u_hi =
          std::clamp<int64_t>(ceil_div(width - phi, p.phases_w) - p.first_column, u_lo, p.width);
      for (int64_t r = 0; r <= p.rows; r++) {
        T* __restrict line = plane + r * p.width;
        const int64_t ih = (r + p.first_row) * p.phases_h + psi;
        if (r == p.rows || ih < 0 || ih >= height) {
          std::fill(line, line + p.width, T(0));
          continue;
        }
        const T* __restrict source = image + ih * width;
        const int64_t shift = p.first_column * p.phases_w + phi;  // column of u = 0
        std::fill(line, line + u_lo, T(0));
        if (p.phases_w == 1) {
          for (int64_t u = u_lo; u < u_hi; u++) line[u] = source[u + shift];
        } else if (p.phases_w == 2) {
          const int64_t first = u_lo * 2 + shift;  // >= 0: u_lo is inside the input
          copy_every_other(line + u_lo, source + first, u_hi - u_lo, width - first);
        } else {
          for (int64_t u = u_lo; u < u_hi; u++) line[u] = source[u * p.phases_w + shift];
        }
        std::fill(line + u_hi, line + p.width, T(0));
      }
    }
  }
}

// grid[t] = start + the sum over taps of kernel[tap] * planes[tap_offset[tap] + t], for t
// in [0, count): each sum in tap order, one rounding per tap (an FMA), held in registers
// over four vectors of positions at once (an FMA's latency times the two FMA units); then
// single vectors, then single positions, which compute the same sums.
template <typename T>
void sum_taps(T* __restrict grid, const T* __restrict planes, const int64_t* tap_offset,
              const T* kernel, int64_t taps, T start, int64_t count) {
  using simd::Vec;
  constexpr int64_t kLanes = simd::kLanes<T>;
  constexpr int kVectors = 4;
  int64_t t = 0;
  for (; t + kVectors * kLanes <= count; t += kVectors * kLanes) {
    Vec<T> sum[kVectors];
    for (int v = 0; v < kVectors; v++) sum[v] = simd::broadcast(start);
    for (int64_t tap = 0; tap < taps; tap++) {
      const Vec<T> weight = simd::broadcast(kernel[tap]);
      const T* run = planes + tap_offset[tap] + t;
      for (int v = 0; v < kVectors; v++) {
        sum[v] = simd::fma(weight, simd::load(run + v * kLanes), sum[v]);
      }
    }
    for (int v = 0; v < kVectors; v++) simd::store(grid + t + v * kLanes, sum[v]);
  }
  for (; t + kLanes <= count; t += kLanes) {
    Vec<T> sum = simd::broadcast(start);
    for (int64_t tap = 0; tap < taps; tap++) {
      sum = simd::fma(simd::broadcast(kernel[tap]), simd::load(planes + tap_offset[tap] + t), sum);
    }
    simd::store(grid + t, sum);
  }
  for (; t < count; t++) {
    T sum = start;
    for (int64_t tap = 0; tap < taps; tap++) {
      sum = simd::fma(kernel[tap], planes[tap_offset[tap] + t], sum);
    }
    grid[t] = sum;
  }
}

// The 1-D and 2-D forward kernel (see the header comment).
template <typename T>
void forward_flat(const ConvGeometry& g, const Array& x_array, const Array& weight,
                  const Array& bias, const Array& y_array, const ConvEpilogue& epilogue) {
  const int64_t multiplier = g.outputs_per_group, taps = g.kernel[1] * g.kernel[2];
  const int64_t in_plane = g.in_plane(), out_plane = g.out_plane();
  const PhaseLayout p = phase_layout(g);
  const int64_t phases_size = p.phases_h * p.phases_w * p.plane_size();
  const int64_t grid_size = p.grid_size(g);
  const T* x = x_array.data<T>();
  const T* w = weight.data<T>();
  const T* b = bias.defined() ? bias.data<T>() : nullptr;
  T* y = y_array.data<T>();
  // Per tap: its phase plane's offset in the planes plus the flat shift.
  std::vector<int64_t> tap_offset(static_cast<size_t>(taps));
  for (int64_t j = 0, tap = 0; j < g.kernel[1]; j++) {
    const int64_t row = j * g.dilation[1] - g.pad_before[1];
    for (int64_t l = 0; l < g.kernel[2]; l++, tap++) {
      const int64_t column = l * g.dilation[2] - g.pad_before[2];
      const int64_t e = floor_div(row, p.phases_h), psi = row - e * p.phases_h;
      const int64_t d = floor_div(column, p.phases_w), phi = column - d * p.phases_w;
      tap_offset[static_cast<size_t>(tap)] = (psi * p.phases_w + phi) * p.plane_size() +
                                             (e - p.first_row) * p.width + (d - p.first_column);
    }
  }
  // Output planes of one input channel are neighbours: one task fills the
  // phases of a channel once for all its outputs.
  const int64_t grain =
      std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, out_plane * multiplier));
  parallel_for(g.n * g.c, grain, [&](int64_t begin, int64_t end) {
    T* planes = thread_scratch<T>(phases_size + grid_size);
    T* grid = planes + phases_size;
    for (int64_t channel_plane = begin; channel_plane < end; channel_plane++) {
      const int64_t n = channel_plane / g.c, c = channel_plane % g.c;
      fill_phases(g, p, x + channel_plane * in_plane, planes);
      for (int64_t m = 0; m < multiplier; m++) {
        const int64_t oc = c * multiplier + m;
        const T* kernel = w + oc * taps;
        sum_taps(grid, planes, tap_offset.data(), kernel, taps, b ? b[oc] : T(0), grid_size);
        T* out = y + (n * g.o + oc) * out_plane;
        for (int64_t oh = 0; oh < g.out[1]; oh++) {
          std::copy_n(grid + oh * p.width, g.out[2], out + oh * g.out[2]);
        }
        epilogue.apply(out, out_plane);  // while the plane is in cache
      }
    }
  });
}

template <typename T>
void forward(const ConvGeometry& g, const Array& x_array, const Array& weight, const Array& bias,
             const Array& y_array, const ConvEpilogue& epilogue) {
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
      epilogue.apply(out, out_plane);
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
                       const Array& bias, const Array& y, const ConvEpilogue& epilogue) {
  // A 1-D or 2-D window (the leading spatial dim of extent 1) runs flat.
  if (g.in[0] == 1 && g.out[0] == 1 && g.kernel[0] == 1 && g.pad_before[0] == 0) {
    if (y.dtype == DType::f64) return forward_flat<double>(g, x, weight, bias, y, epilogue);
    return forward_flat<float>(g, x, weight, bias, y, epilogue);
  }
  if (y.dtype == DType::f64) return forward<double>(g, x, weight, bias, y, epilogue);
  forward<float>(g, x, weight, bias, y, epilogue);
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
