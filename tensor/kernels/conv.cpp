// conv.cpp - convolution as matrix products over columns built a few
// samples at a time, and max pooling.
//
// A convolution's columns (im2col: row (c, i, j) holds input channel c
// shifted by (i, j) under every output position) are built for a chunk of
// samples at once, into a buffer small enough to stay in cache, and
// multiplied by the weight [O, C*kh*kw] with one BLAS call per chunk. The
// full column matrix of a batch (9x the input for a 3x3 kernel) is never
// written to memory. Chunks run in parallel, each with single-threaded BLAS.
//
// The chunk size depends only on the shapes, never on the thread count, and
// the weight gradient adds the chunks' partial products in chunk order: the
// same inputs give the same bits with any number of threads.
#include "conv.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "../thread_pool.h"
#include "matmul.h"

namespace lazylua {
namespace {

// Columns per chunk to aim for: a chunk's columns (C*kh*kw rows) and its
// products then stay within a core's L2 for the layers of small CNNs.
constexpr int64_t kChunkColumns = 1024;

struct ConvShape {
  int64_t n, c, h, w, o, oh, ow;
  int64_t plane() const { return oh * ow; }                          // output positions of a sample
  int64_t rows(const Window2d& k) const { return c * k.kh * k.kw; }  // column rows
};

ConvShape conv_shape(const Array& x, int64_t out_channels, const Window2d& k) {
  ConvShape s{x.shape[0], x.shape[1], x.shape[2], x.shape[3], out_channels, 0, 0};
  s.oh = k.out_height(s.h);
  s.ow = k.out_width(s.w);
  return s;
}

int64_t chunk_samples(const ConvShape& s) {
  return std::clamp<int64_t>(kChunkColumns / std::max<int64_t>(1, s.plane()), 1, s.n);
}

// Columns of `count` samples from `x` (sample `first` on), into cols
// [rows, count * plane]: zero where the window reads padding.
template <typename T>
void im2col(const T* x, const ConvShape& s, const Window2d& k, int64_t first, int64_t count,
            T* cols) {
  const int64_t plane = s.plane(), width = count * plane;
  for (int64_t c = 0; c < s.c; c++) {
    for (int64_t i = 0; i < k.kh; i++) {
      for (int64_t j = 0; j < k.kw; j++) {
        T* row = cols + ((c * k.kh + i) * k.kw + j) * width;
        // Output columns whose input column w = ow*sw - pw + j is inside.
        const int64_t lo = std::clamp<int64_t>((k.pw - j + k.sw - 1) / k.sw, 0, s.ow);
        const int64_t hi = std::clamp<int64_t>((s.w + k.pw - j + k.sw - 1) / k.sw, lo, s.ow);
        for (int64_t b = 0; b < count; b++) {
          const T* image = x + ((first + b) * s.c + c) * s.h * s.w;
          for (int64_t oh = 0; oh < s.oh; oh++) {
            T* out = row + b * plane + oh * s.ow;
            const int64_t h = oh * k.sh - k.ph + i;
            if (h < 0 || h >= s.h) {
              std::fill(out, out + s.ow, T(0));
              continue;
            }
            const T* in = image + h * s.w;  // element ow * sw - pw + j
            std::fill(out, out + lo, T(0));
            if (k.sw == 1) {
              std::memcpy(out + lo, in + (lo - k.pw + j), static_cast<size_t>(hi - lo) * sizeof(T));
            } else {
              for (int64_t ow = lo; ow < hi; ow++) out[ow] = in[ow * k.sw - k.pw + j];
            }
            std::fill(out + hi, out + s.ow, T(0));
          }
        }
      }
    }
  }
}

// The inverse: adds cols [rows, count * plane] into grad_x's samples, which
// the caller has zeroed. Each input element sums its terms in (i, j) order.
template <typename T>
void col2im(const T* cols, const ConvShape& s, const Window2d& k, int64_t first, int64_t count,
            T* grad_x) {
  const int64_t plane = s.plane(), width = count * plane;
  for (int64_t b = 0; b < count; b++) {
    for (int64_t c = 0; c < s.c; c++) {
      T* image = grad_x + ((first + b) * s.c + c) * s.h * s.w;
      for (int64_t i = 0; i < k.kh; i++) {
        for (int64_t j = 0; j < k.kw; j++) {
          const T* row = cols + ((c * k.kh + i) * k.kw + j) * width + b * plane;
          const int64_t lo = std::clamp<int64_t>((k.pw - j + k.sw - 1) / k.sw, 0, s.ow);
          const int64_t hi = std::clamp<int64_t>((s.w + k.pw - j + k.sw - 1) / k.sw, lo, s.ow);
          for (int64_t oh = 0; oh < s.oh; oh++) {
            const int64_t h = oh * k.sh - k.ph + i;
            if (h < 0 || h >= s.h) continue;
            T* out = image + h * s.w;
            const T* in = row + oh * s.ow;
            for (int64_t ow = lo; ow < hi; ow++) out[ow * k.sw - k.pw + j] += in[ow];
          }
        }
      }
    }
  }
}

// Rows [rows_count, plane] of each of `count` samples (sample-major, as
// in [N, rows_count, plane]) side by side as [rows_count, count * plane],
// or back.
template <typename T>
void gather_samples(const T* samples, int64_t rows_count, int64_t plane, int64_t count, T* out) {
  for (int64_t r = 0; r < rows_count; r++) {
    for (int64_t b = 0; b < count; b++) {
      std::memcpy(out + (r * count + b) * plane, samples + (b * rows_count + r) * plane,
                  static_cast<size_t>(plane) * sizeof(T));
    }
  }
}
template <typename T>
void scatter_samples(const T* side_by_side, int64_t rows_count, int64_t plane, int64_t count,
                     T* samples) {
  for (int64_t r = 0; r < rows_count; r++) {
    for (int64_t b = 0; b < count; b++) {
      std::memcpy(samples + (b * rows_count + r) * plane, side_by_side + (r * count + b) * plane,
                  static_cast<size_t>(plane) * sizeof(T));
    }
  }
}

// The gradient rows [O, plane] of samples first.. first+count-1 of g
// [N, O, plane] side by side as [O, count * plane] (in scratch unless
// count is 1).
template <typename T>
const T* side_by_side(const T* g, const ConvShape& s, int64_t first, int64_t count,
                      std::vector<T>& scratch) {
  const T* rows = g + first * s.o * s.plane();
  if (count == 1) return rows;
  scratch.resize(static_cast<size_t>(s.o * count * s.plane()));
  gather_samples(rows, s.o, s.plane(), count, scratch.data());
  return scratch.data();
}

// Runs body(chunk, first_sample, count) for every chunk: on the
// pool when there are several, else on this thread (whose products then
// use the pool themselves).
template <typename Body>
void for_each_chunk(int64_t samples, int64_t per_chunk, Body&& body) {
  const int64_t chunks = (samples + per_chunk - 1) / per_chunk;
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t chunk = begin; chunk < end; chunk++) {
      const int64_t first = chunk * per_chunk;
      body(chunk, first, std::min(per_chunk, samples - first));
    }
  };
  if (chunks == 1) {
    run(0, 1);
  } else {
    parallel_for(chunks, 1, run);
  }
}

template <typename T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
          int64_t ldb, T* c, int64_t ldc) {
  float_gemm(std::is_same_v<T, double>, ta, tb, m, n, k, a, lda, b, ldb, c, ldc);
}

template <typename T>
void conv2d_forward(const Array& x_array, const Array& weight, const Window2d& k, const Array& y) {
  const ConvShape s = conv_shape(x_array, weight.shape[0], k);
  const int64_t rows = s.rows(k), plane = s.plane(), per_chunk = chunk_samples(s);
  const T* x = x_array.data<T>();
  const T* w = weight.data<T>();
  T* out = y.data<T>();
  for_each_chunk(s.n, per_chunk, [&](int64_t, int64_t first, int64_t count) {
    std::vector<T> cols(static_cast<size_t>(rows * count * plane));
    im2col(x, s, k, first, count, cols.data());
    T* target = out + first * s.o * plane;
    if (count == 1) {  // y[n] [O, plane] is the product itself
      gemm<T>(false, false, s.o, plane, rows, w, rows, cols.data(), plane, target, plane);
      return;
    }
    std::vector<T> product(static_cast<size_t>(s.o * count * plane));
    gemm<T>(false, false, s.o, count * plane, rows, w, rows, cols.data(), count * plane,
            product.data(), count * plane);
    scatter_samples(product.data(), s.o, plane, count, target);
  });
}

template <typename T>
void conv2d_backward_input(const Array& grad_y, const Array& weight, const Window2d& k,
                           const Array& grad_x) {
  const ConvShape s = conv_shape(grad_x, weight.shape[0], k);
  const int64_t rows = s.rows(k), plane = s.plane(), per_chunk = chunk_samples(s);
  const T* g = grad_y.data<T>();
  const T* w = weight.data<T>();
  T* out = grad_x.data<T>();
  for_each_chunk(s.n, per_chunk, [&](int64_t, int64_t first, int64_t count) {
    std::fill(out + first * s.c * s.h * s.w, out + (first + count) * s.c * s.h * s.w, T(0));
    std::vector<T> scratch;
    const T* gy = side_by_side(g, s, first, count, scratch);
    std::vector<T> cols(static_cast<size_t>(rows * count * plane));
    // cols [rows, count*plane] = W^T [rows, O] @ g [O, count*plane]
    gemm<T>(true, false, rows, count * plane, s.o, w, rows, gy, count * plane, cols.data(),
            count * plane);
    col2im(cols.data(), s, k, first, count, out);
  });
}

template <typename T>
void conv2d_backward_weight(const Array& grad_y, const Array& x_array, const Window2d& k,
                            const Array& grad_weight) {
  const ConvShape s = conv_shape(x_array, grad_weight.shape[0], k);
  const int64_t rows = s.rows(k), plane = s.plane(), per_chunk = chunk_samples(s);
  const int64_t chunks = (s.n + per_chunk - 1) / per_chunk, size = s.o * rows;
  const T* g = grad_y.data<T>();
  const T* x = x_array.data<T>();
  std::vector<T> partial(static_cast<size_t>(chunks * size));
  for_each_chunk(s.n, per_chunk, [&](int64_t chunk, int64_t first, int64_t count) {
    std::vector<T> cols(static_cast<size_t>(rows * count * plane));
    im2col(x, s, k, first, count, cols.data());
    std::vector<T> scratch;
    const T* gy = side_by_side(g, s, first, count, scratch);
    // partial [O, rows] = g [O, count*plane] @ cols^T [count*plane, rows]
    gemm<T>(false, true, s.o, rows, count * plane, gy, count * plane, cols.data(), count * plane,
            partial.data() + chunk * size, rows);
  });
  T* out = grad_weight.data<T>();
  std::copy(partial.begin(), partial.begin() + size, out);
  for (int64_t chunk = 1; chunk < chunks; chunk++) {
    const T* add = partial.data() + chunk * size;
    for (int64_t e = 0; e < size; e++) out[e] += add[e];
  }
}

// The first position of the maximum of the window of output (oh, ow) in
// one [H, W] plane, or of its first NaN; -1 if the window is all padding.
template <typename T>
inline __attribute__((always_inline)) int64_t window_max(const T* image, int64_t h_size,
                                                         int64_t w_size, const Window2d& k,
                                                         int64_t oh, int64_t ow) {
  const int64_t h0 = oh * k.sh - k.ph, w0 = ow * k.sw - k.pw;
  const int64_t h_lo = std::max<int64_t>(h0, 0), h_hi = std::min(h0 + k.kh, h_size);
  const int64_t w_lo = std::max<int64_t>(w0, 0), w_hi = std::min(w0 + k.kw, w_size);
  if (h_lo >= h_hi || w_lo >= w_hi) return -1;
  int64_t best = h_lo * w_size + w_lo;
  T best_value = image[best];
  if (best_value != best_value) return best;
  for (int64_t h = h_lo; h < h_hi; h++) {
    for (int64_t w = h == h_lo ? w_lo + 1 : w_lo; w < w_hi; w++) {
      const T value = image[h * w_size + w];
      if (value > best_value) {
        best = h * w_size + w;
        best_value = value;
      } else if (value != value) {
        return h * w_size + w;
      }
    }
  }
  return best;
}

// Max pooling of one [H, W] plane. Without padding every window lies in
// the plane, and its top-left corner's offset is the same in every plane
// (`corners`, one per output); the maxima are then computed kernel offset
// by kernel offset across all the plane's outputs at once, in loops the
// compiler vectorizes (with gathers). Planes with padding take one window at a time. Positions are
// 32-bit (the op allows planes of fewer than 2^31 elements), which keeps the loops vectorizable.
// Either way a window's result is its first maximum, or its first NaN.
class PlanePooling {
 public:
  PlanePooling(const Window2d& k, int64_t h_size, int64_t w_size, int64_t oh_size, int64_t ow_size)
      : k_(k), h_size_(h_size), w_size_(w_size), oh_size_(oh_size), ow_size_(ow_size) {
    if (k.ph != 0 || k.pw != 0) return;
    corners_.resize(static_cast<size_t>(oh_size * ow_size));
    for (int64_t oh = 0; oh < oh_size; oh++) {
      for (int64_t ow = 0; ow < ow_size; ow++) {
        corners_[oh * ow_size + ow] = static_cast<int32_t>(oh * k.sh * w_size + ow * k.sw);
      }
    }
  }

  // values[q] (and positions[q] in the plane, unless null) for every output q.
  template <typename T>
  void run(const T* image, T* values, int32_t* positions) const {
    const int64_t count = oh_size_ * ow_size_;
    if (corners_.empty()) {
      for (int64_t q = 0; q < count; q++) {
        const int64_t at = window_max(image, h_size_, w_size_, k_, q / ow_size_, q % ow_size_);
        values[q] = at < 0 ? -std::numeric_limits<T>::infinity() : image[at];
        if (positions) positions[q] = static_cast<int32_t>(at);
      }
      return;
    }
    positions ? inside<T, true>(image, values, positions)
              : inside<T, false>(image, values, nullptr);
  }

 private:
  // Not inlined: its pointers' __restrict (which lets the loops vectorize)
  // would not survive inlining into the callers.
  template <typename T, bool kPositions>
  __attribute__((noinline)) void inside(const T* __restrict image, T* __restrict values,
                                        int32_t* __restrict positions) const {
    const int64_t count = static_cast<int64_t>(corners_.size());
    const int32_t* __restrict corners = corners_.data();
    for (int64_t q = 0; q < count; q++) values[q] = image[corners[q]];
    if constexpr (kPositions) {
      for (int64_t q = 0; q < count; q++) positions[q] = corners[q];
    }
    for (int64_t i = 0; i < k_.kh; i++) {
      for (int64_t j = i == 0 ? 1 : 0; j < k_.kw; j++) {
        const int32_t offset = static_cast<int32_t>(i * w_size_ + j);
        const T* __restrict shifted = image + offset;
        for (int64_t q = 0; q < count; q++) {
          const T value = shifted[corners[q]], best = values[q];
          // Larger, or the first NaN (a NaN best is never replaced).
          const bool take = value > best || (value != value && best == best);
          values[q] = take ? value : best;
          if constexpr (kPositions) {
            positions[q] = take ? corners[q] + offset : positions[q];
          }
        }
      }
    }
  }

  Window2d k_;
  int64_t h_size_, w_size_, oh_size_, ow_size_;
  std::vector<int32_t> corners_;
};

// Runs body(plane, values, positions) on each [H, W] plane of x's N*C, with
// scratch room for one plane's output values and positions.
template <typename T, typename Body>
void for_each_plane(const Array& x, int64_t outputs, Body&& body) {
  const int64_t planes = x.shape[0] * x.shape[1], area = x.shape[2] * x.shape[3];
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, area));
  parallel_for(planes, grain, [&](int64_t begin, int64_t end) {
    std::vector<T> values(static_cast<size_t>(outputs));
    std::vector<int32_t> positions(static_cast<size_t>(outputs));
    for (int64_t p = begin; p < end; p++) body(p, values.data(), positions.data());
  });
}

template <typename T>
void max_pool_forward(const Array& x_array, const Window2d& k, const Array& y) {
  const int64_t area = x_array.shape[2] * x_array.shape[3], outputs = y.shape[2] * y.shape[3];
  const PlanePooling pooling(k, x_array.shape[2], x_array.shape[3], y.shape[2], y.shape[3]);
  const T* x = x_array.data<T>();
  T* out = y.data<T>();
  for_each_plane<T>(x_array, 0, [&](int64_t p, T*, int32_t*) {
    pooling.run<T>(x + p * area, out + p * outputs, nullptr);
  });
}

template <typename T>
void max_pool_backward(const Array& grad_y, const Array& x_array, const Window2d& k,
                       const Array& grad_x) {
  const int64_t area = x_array.shape[2] * x_array.shape[3];
  const int64_t outputs = grad_y.shape[2] * grad_y.shape[3];
  const PlanePooling pooling(k, x_array.shape[2], x_array.shape[3], grad_y.shape[2],
                             grad_y.shape[3]);
  const T* x = x_array.data<T>();
  const T* g = grad_y.data<T>();
  T* out = grad_x.data<T>();
  for_each_plane<T>(x_array, outputs, [&](int64_t p, T* values, int32_t* positions) {
    pooling.run<T>(x + p * area, values, positions);
    T* target = out + p * area;
    std::fill(target, target + area, T(0));
    const T* gradient = g + p * outputs;
    for (int64_t q = 0; q < outputs; q++) {
      if (positions[q] >= 0) target[positions[q]] += gradient[q];
    }
  });
}

}  // namespace

void conv2d_kernel(const Array& x, const Array& weight, const Window2d& window, const Array& y) {
  if (y.dtype == DType::f64) return conv2d_forward<double>(x, weight, window, y);
  conv2d_forward<float>(x, weight, window, y);
}

void conv2d_grad_input_kernel(const Array& grad_y, const Array& weight, const Window2d& window,
                              const Array& grad_x) {
  if (grad_x.dtype == DType::f64)
    return conv2d_backward_input<double>(grad_y, weight, window, grad_x);
  conv2d_backward_input<float>(grad_y, weight, window, grad_x);
}

void conv2d_grad_weight_kernel(const Array& grad_y, const Array& x, const Window2d& window,
                               const Array& grad_weight) {
  if (grad_weight.dtype == DType::f64) {
    return conv2d_backward_weight<double>(grad_y, x, window, grad_weight);
  }
  conv2d_backward_weight<float>(grad_y, x, window, grad_weight);
}

void max_pool2d_kernel(const Array& x, const Window2d& window, const Array& y) {
  if (y.dtype == DType::f64) return max_pool_forward<double>(x, window, y);
  max_pool_forward<float>(x, window, y);
}

void max_pool2d_grad_kernel(const Array& grad_y, const Array& x, const Window2d& window,
                            const Array& grad_x) {
  if (grad_x.dtype == DType::f64) return max_pool_backward<double>(grad_y, x, window, grad_x);
  max_pool_backward<float>(grad_y, x, window, grad_x);
}

}  // namespace lazylua
