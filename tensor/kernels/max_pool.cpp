// max_pool.cpp - 2-D max pooling and its gradient (the kernels of
// ops::max_pool2d, shared by every tier).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "../thread_pool.h"
#include "conv.h"

namespace lazylua {
namespace {

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
