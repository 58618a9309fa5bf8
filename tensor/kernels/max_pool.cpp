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

// Whether `value` replaces `best` as a window's result: it is larger, or it
// is the first NaN (a NaN best is never replaced). Scanning a window in
// row-major order with this test keeps its first maximum (of +0 and -0, the
// first) or its first NaN.
template <typename T>
inline __attribute__((always_inline)) bool replaces(T value, T best) {
  return value > best || (value != value && best == best);
}

// The functions below that end in __restrict pointers are not inlined: the
// __restrict (which lets their loops vectorize) would not survive inlining.

// Splits one input row, between `pad` columns of -inf on the left and as
// many as needed on the right, into `stride` phases of `length` columns:
// phases[r * length + i] is padded column i * stride + r. Window column j
// of output q, padded column q * stride + j, is then element q + j / stride
// of phase j % stride, so that every loop of row_maxima reads consecutive
// elements. kStride: the stride when known at compile time (1 and 2 copy
// whole vectors); 0: `stride`.
template <typename T, int kStride>
__attribute__((noinline)) void split_row(const T* __restrict source, int64_t w_size, int64_t pad,
                                         int64_t stride, int64_t length, T* __restrict phases) {
  if constexpr (kStride != 0) stride = kStride;
  const T lowest = -std::numeric_limits<T>::infinity();
  // Columns [inside_begin, inside_end) of each phase come from the row.
  const int64_t inside_begin = std::min(length, (pad + stride - 1) / stride);
  const int64_t inside_end = std::clamp((w_size + pad) / stride, inside_begin, length);
  const auto edge = [&](int64_t i) {
    for (int64_t r = 0; r < stride; r++) {
      const int64_t w = i * stride + r - pad;
      phases[r * length + i] = w >= 0 && w < w_size ? source[w] : lowest;
    }
  };
  for (int64_t i = 0; i < inside_begin; i++) edge(i);
  if (inside_end > inside_begin) {
    const T* __restrict from = source + (inside_begin * stride - pad);
    T* __restrict to = phases + inside_begin;
    for (int64_t i = 0; i < inside_end - inside_begin; i++) {
      for (int64_t r = 0; r < stride; r++) to[r * length + i] = from[i * stride + r];
    }
  }
  for (int64_t i = inside_end; i < length; i++) edge(i);
}

// The maxima of `count` windows of one row, each `width` columns wide, the
// q-th starting at padded column q * stride of the row split into phases of
// `length` (split_row). positions[q] is the window's first maximum as an
// offset in the plane, `base` being the padded row's.
template <typename T, bool kPositions>
__attribute__((noinline)) void row_maxima(const T* __restrict phases, int64_t length,
                                          int64_t stride, int32_t base, int64_t width,
                                          int64_t count, T* __restrict values,
                                          int32_t* __restrict positions) {
  // Positions in unsigned arithmetic: those of the outputs past the row's
  // end (the block's padding) may wrap; they are never used.
  const auto position = [base, stride](int64_t q, int64_t j) {
    return static_cast<int32_t>(static_cast<uint32_t>(base) +
                                static_cast<uint32_t>(q * stride + j));
  };
  for (int64_t q = 0; q < count; q++) values[q] = phases[q];
  if constexpr (kPositions) {
    for (int64_t q = 0; q < count; q++) positions[q] = position(q, 0);
  }
  for (int64_t j = 1; j < width; j++) {
    const T* __restrict column = phases + (j % stride) * length + j / stride;
    for (int64_t q = 0; q < count; q++) {
      const T value = column[q], best = values[q];
      const bool take = replaces(value, best);
      values[q] = take ? value : best;
      if constexpr (kPositions) {
        positions[q] = take ? position(q, j) : positions[q];
      }
    }
  }
}

// out = the first window row's maxima (`first_*`), or the second's where
// they are larger.
template <typename T, bool kPositions>
__attribute__((noinline)) void merge_two_rows(const T* __restrict first_values,
                                              const int32_t* __restrict first_positions,
                                              const T* __restrict second_values,
                                              const int32_t* __restrict second_positions,
                                              int64_t count, T* __restrict values,
                                              int32_t* __restrict positions) {
  for (int64_t q = 0; q < count; q++) {
    const T value = second_values[q], best = first_values[q];
    const bool take = replaces(value, best);
    values[q] = take ? value : best;
    if constexpr (kPositions) positions[q] = take ? second_positions[q] : first_positions[q];
  }
}

// Folds the next window row's maxima into the results so far.
template <typename T, bool kPositions>
__attribute__((noinline)) void merge_row(const T* __restrict row_values,
                                         const int32_t* __restrict row_positions, int64_t count,
                                         T* __restrict values, int32_t* __restrict positions) {
  for (int64_t q = 0; q < count; q++) {
    const T value = row_values[q], best = values[q];
    const bool take = replaces(value, best);
    values[q] = take ? value : best;
    if constexpr (kPositions) positions[q] = take ? row_positions[q] : positions[q];
  }
}

// The loops above run over whole blocks of this many outputs (rows of
// results are padded up to a multiple of it), so that they have no scalar
// remainder: a row of 56 outputs (ResNet's stem) would otherwise spend most
// of its time in the remainder of 16-lane vector loops.
constexpr int64_t kBlock = 16;

// One thread's working rows, reused from plane to plane: an input row split
// into phases, the row maxima of the last kh window rows (a ring of kh rows
// of `padded` entries) and one output row.
template <typename T>
struct PoolScratch {
  std::vector<T> phases, ring_values, merged_values;
  std::vector<int32_t> ring_positions, merged_positions;
};

// Max pooling of one [H, W] plane, separably. For each input row a window
// covers, the maxima of every output column's window columns come first
// (row_maxima); each output then takes the first of its window rows' maxima
// that is larger (merge_*). That is the window's first maximum in row-major
// order, or its first NaN, as scanning the whole window would give: the
// first row that holds the window's maximum holds its first occurrence,
// and that row's maximum is its first occurrence in the row.
//
// row_maxima runs over the row between -inf pads, for every output column
// at once; the outputs whose window reaches into the padding (a few at
// each end) are then redone on the row itself (border), so that padding
// never counts as an element: a window of -inf values has its first -inf
// as maximum, and one entirely in the padding is -inf at position -1.
// Positions are 32-bit (the op allows planes of fewer than 2^31 elements),
// which keeps the loops vectorizable. A window row's maxima are kept in
// slot h % kh of a ring of kh rows, so a row that two windows share
// (stride below the kernel) is computed once.
template <typename T>
class PlanePooling {
 public:
  PlanePooling(const Window2d& k, int64_t h_size, int64_t w_size, int64_t oh_size, int64_t ow_size)
      : k_(k), h_size_(h_size), w_size_(w_size), oh_size_(oh_size), ow_size_(ow_size) {
    padded_ = (ow_size + kBlock - 1) / kBlock * kBlock;
    ring_ = std::min(k.kh, h_size);
    // A phase holds a column of every window of a padded row, and the
    // windows' further columns.
    phase_length_ = padded_ + (k.kw - 1) / k.sw;
    // Outputs [inner_begin_, inner_end_) have every window column inside.
    inner_begin_ = std::min(ow_size, (k.pw + k.sw - 1) / k.sw);
    const int64_t last_inside = w_size - k.kw + k.pw;  // the largest window start inside
    inner_end_ = last_inside < 0 ? 0 : std::min(ow_size, last_inside / k.sw + 1);
    inner_end_ = std::max(inner_end_, inner_begin_);
  }

  void reserve(PoolScratch<T>& scratch) const {
    scratch.phases.resize(static_cast<size_t>(phase_length_ * k_.sw));
    scratch.ring_values.resize(static_cast<size_t>(ring_ * padded_));
    scratch.ring_positions.resize(static_cast<size_t>(ring_ * padded_));
    scratch.merged_values.resize(static_cast<size_t>(padded_));
    scratch.merged_positions.resize(static_cast<size_t>(padded_));
  }

  // Calls emit(oh, values, positions) for each output row oh of the plane
  // `image`, with its ow_size results (and their positions in the plane,
  // when kPositions), which stay valid until the next call.
  template <bool kPositions, typename Emit>
  void run(const T* image, PoolScratch<T>& scratch, Emit&& emit) const {
    T* merged_values = scratch.merged_values.data();
    int32_t* merged_positions = scratch.merged_positions.data();
    int64_t computed_end = 0;  // rows below it are in the ring (the ones still needed)
    for (int64_t oh = 0; oh < oh_size_; oh++) {
      const int64_t h0 = oh * k_.sh - k_.ph;
      const int64_t h_lo = std::max<int64_t>(h0, 0), h_hi = std::min(h0 + k_.kh, h_size_);
      if (h_lo >= h_hi) {
        std::fill_n(merged_values, ow_size_, -std::numeric_limits<T>::infinity());
        std::fill_n(merged_positions, ow_size_, -1);
        emit(oh, merged_values, merged_positions);
        continue;
      }
      for (int64_t h = std::max(h_lo, computed_end); h < h_hi; h++) {
        row<kPositions>(image, h, scratch);
      }
      computed_end = std::max(computed_end, h_hi);
      const auto slot_values = [&](int64_t h) { return scratch.ring_values.data() + slot(h); };
      const auto slot_positions = [&](int64_t h) {
        return scratch.ring_positions.data() + slot(h);
      };
      if (h_hi - h_lo == 1) {
        emit(oh, slot_values(h_lo), slot_positions(h_lo));
        continue;
      }
      merge_two_rows<T, kPositions>(slot_values(h_lo), slot_positions(h_lo), slot_values(h_lo + 1),
                                    slot_positions(h_lo + 1), padded_, merged_values,
                                    merged_positions);
      for (int64_t h = h_lo + 2; h < h_hi; h++) {
        merge_row<T, kPositions>(slot_values(h), slot_positions(h), padded_, merged_values,
                                 merged_positions);
      }
      emit(oh, merged_values, merged_positions);
    }
  }

 private:
  int64_t slot(int64_t h) const { return (h % ring_) * padded_; }

  // The maxima of every output column's window columns in input row h,
  // into its ring slot.
  template <bool kPositions>
  void row(const T* image, int64_t h, PoolScratch<T>& scratch) const {
    const T* source = image + h * w_size_;
    T* phases = scratch.phases.data();
    if (k_.sw == 1) {
      split_row<T, 1>(source, w_size_, k_.pw, 1, phase_length_, phases);
    } else if (k_.sw == 2) {
      split_row<T, 2>(source, w_size_, k_.pw, 2, phase_length_, phases);
    } else {
      split_row<T, 0>(source, w_size_, k_.pw, k_.sw, phase_length_, phases);
    }
    T* values = scratch.ring_values.data() + slot(h);
    int32_t* positions = scratch.ring_positions.data() + slot(h);
    const int32_t source_base = static_cast<int32_t>(h * w_size_);
    row_maxima<T, kPositions>(phases, phase_length_, k_.sw,
                              source_base - static_cast<int32_t>(k_.pw), k_.kw, padded_, values,
                              positions);
    for (int64_t ow = 0; ow < inner_begin_; ow++) {
      border(source, source_base, ow, values, positions);
    }
    for (int64_t ow = inner_end_; ow < ow_size_; ow++) {
      border(source, source_base, ow, values, positions);
    }
  }

  // Output column ow's window in one row, its columns clipped to the plane.
  void border(const T* source, int32_t source_base, int64_t ow, T* values,
              int32_t* positions) const {
    const int64_t w0 = ow * k_.sw - k_.pw;
    const int64_t w_lo = std::max<int64_t>(w0, 0), w_hi = std::min(w0 + k_.kw, w_size_);
    T best = -std::numeric_limits<T>::infinity();
    int64_t at = -1;
    for (int64_t w = w_lo; w < w_hi; w++) {
      if (at < 0 || replaces(source[w], best)) {
        best = source[w];
        at = w;
      }
    }
    values[ow] = best;
    positions[ow] = at < 0 ? -1 : source_base + static_cast<int32_t>(at);
  }

  Window2d k_;
  int64_t h_size_, w_size_, oh_size_, ow_size_;
  int64_t padded_ = 0, ring_ = 0, phase_length_ = 0;
  int64_t inner_begin_ = 0, inner_end_ = 0;
};

// Runs body(plane, scratch) on each [H, W] plane of x's N*C.
template <typename T, typename Body>
void for_each_plane(const Array& x, const PlanePooling<T>& pooling, Body&& body) {
  const int64_t planes = x.shape[0] * x.shape[1], area = x.shape[2] * x.shape[3];
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, area));
  parallel_for(planes, grain, [&](int64_t begin, int64_t end) {
    PoolScratch<T> scratch;
    pooling.reserve(scratch);
    for (int64_t p = begin; p < end; p++) body(p, scratch);
  });
}

template <typename T>
void max_pool_forward(const Array& x_array, const Window2d& k, const Array& y) {
  const int64_t area = x_array.shape[2] * x_array.shape[3];
  const int64_t ow_size = y.shape[3], outputs = y.shape[2] * ow_size;
  const PlanePooling<T> pooling(k, x_array.shape[2], x_array.shape[3], y.shape[2], ow_size);
  const T* x = x_array.data<T>();
  T* out = y.data<T>();
  for_each_plane<T>(x_array, pooling, [&](int64_t p, PoolScratch<T>& scratch) {
    T* plane = out + p * outputs;
    pooling.template run<false>(x + p * area, scratch,
                                [&](int64_t oh, const T* values, const int32_t*) {
                                  std::copy_n(values, ow_size, plane + oh * ow_size);
                                });
  });
}

template <typename T>
void max_pool_backward(const Array& grad_y, const Array& x_array, const Window2d& k,
                       const Array& grad_x) {
  const int64_t area = x_array.shape[2] * x_array.shape[3];
  const int64_t ow_size = grad_y.shape[3], outputs = grad_y.shape[2] * ow_size;
  const PlanePooling<T> pooling(k, x_array.shape[2], x_array.shape[3], grad_y.shape[2], ow_size);
  const T* x = x_array.data<T>();
  const T* g = grad_y.data<T>();
  T* out = grad_x.data<T>();
  for_each_plane<T>(x_array, pooling, [&](int64_t p, PoolScratch<T>& scratch) {
    T* target = out + p * area;
    std::fill(target, target + area, T(0));
    const T* plane_gradient = g + p * outputs;
    // The outputs' gradients are added in output order, as one scan would.
    pooling.template run<true>(x + p * area, scratch,
                               [&](int64_t oh, const T*, const int32_t* positions) {
                                 const T* gradient = plane_gradient + oh * ow_size;
                                 for (int64_t ow = 0; ow < ow_size; ow++) {
                                   if (positions[ow] >= 0) target[positions[ow]] += gradient[ow];
                                 }
                               });
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
