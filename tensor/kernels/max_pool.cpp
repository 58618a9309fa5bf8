// max_pool.cpp - 2-D max pooling and its gradient (the kernels of
// ops::max_pool2d, shared by every tier).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "../thread_pool.h"
#include "conv.h"
#include "simd.h"

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

// Planes per parallel_for item range: about kElementwiseGrain elements.
int64_t plane_grain(const Array& x) {
  return std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, x.shape[2] * x.shape[3]));
}

// Runs body(plane, scratch) on each [H, W] plane of x's N*C.
template <typename T, typename Body>
void for_each_plane(const Array& x, const PlanePooling<T>& pooling, Body&& body) {
  parallel_for(x.shape[0] * x.shape[1], plane_grain(x), [&](int64_t begin, int64_t end) {
    PoolScratch<T> scratch;
    pooling.reserve(scratch);
    for (int64_t p = begin; p < end; p++) body(p, scratch);
  });
}

// ---- 2x2 windows, stride 2, no padding ----
//
// The CNNs' pooling (bench/bench_training.lua: [64, 16, 28, 28] and
// [64, 32, 14, 14]). The general path above pays a few calls, a copy into
// phases and scratch rows per input row, which for rows of 14 or 28 costs
// several times the memory traffic, and its gradient fills grad_x before
// scattering into it. Here every window is a 2x2 block of the plane,
// entirely inside it (an odd last row or column belongs to no window), so
// a window's four elements a b / c d come straight from two input rows,
// even and odd columns split apart by shuffles: the forward reads x once
// and writes y once, and the gradient reads x and grad_y once and writes
// every element of grad_x once (its gradient or 0), with no fill.
//
// A window's result is pick(pick(a, b), pick(c, d)), pick(u, v) being v if
// it replaces u: the first maximum (or NaN) of each row, then of the two,
// which is the window's first maximum (or first NaN) in row-major order,
// the general path's result (the first row that holds the maximum holds
// its first occurrence). Gradients: each input is in at most one window,
// so grad_x is 0 + grad_y at the window's position (0 + g, as the general
// path's fill and add give: a -0 gradient lands as +0) and +0 elsewhere.

template <typename T>
using Vec = simd::Vec<T>;
template <typename T>
constexpr int64_t kLanes = simd::kLanes<T>;
// The shuffles below spell out the lanes of 32-byte vectors.
static_assert(kLanes<float> == 8 && kLanes<double> == 4);

// The shuffles stay within 128-bit halves where they can (one cheap
// instruction each on x86, where a permute across halves costs more): the
// even and odd elements of 2 * kLanes consecutive ones come out swizzled
// (outputs 0 1 4 5 2 3 6 7 for floats, 0 2 1 3 for doubles), the same for
// the four elements of a window, which are compared lane by lane; the
// results are put back in order with one permute (swizzle), and gradients
// swizzled the same way store to consecutive elements with two unpacks
// (interleave).
inline void deinterleave(const float* p, Vec<float>& even, Vec<float>& odd) {
  const Vec<float> lo = simd::load(p), hi = simd::load(p + 8);
  even = __builtin_shufflevector(lo, hi, 0, 2, 8, 10, 4, 6, 12, 14);
  odd = __builtin_shufflevector(lo, hi, 1, 3, 9, 11, 5, 7, 13, 15);
}
inline void deinterleave(const double* p, Vec<double>& even, Vec<double>& odd) {
  const Vec<double> lo = simd::load(p), hi = simd::load(p + 4);
  even = __builtin_shufflevector(lo, hi, 0, 4, 2, 6);
  odd = __builtin_shufflevector(lo, hi, 1, 5, 3, 7);
}
// Swizzled order to natural order and back (the permutation is its own
// inverse: it swaps the middle two 64-bit quarters).
inline Vec<float> swizzle(Vec<float> v) {
  return __builtin_shufflevector(v, v, 0, 1, 4, 5, 2, 3, 6, 7);
}
inline Vec<double> swizzle(Vec<double> v) {
  return __builtin_shufflevector(v, v, 0, 2, 1, 3);
}
// Stores even[i] at p[2i] and odd[i] at p[2i + 1], both in swizzled order.
inline void interleave(Vec<float> even, Vec<float> odd, float* p) {
  simd::store(p, __builtin_shufflevector(even, odd, 0, 8, 1, 9, 4, 12, 5, 13));
  simd::store(p + 8, __builtin_shufflevector(even, odd, 2, 10, 3, 11, 6, 14, 7, 15));
}
inline void interleave(Vec<double> even, Vec<double> odd, double* p) {
  simd::store(p, __builtin_shufflevector(even, odd, 0, 4, 2, 6));
  simd::store(p + 4, __builtin_shufflevector(even, odd, 1, 5, 3, 7));
}

// replaces() lane by lane, all ones where `value` replaces `best`, in
// three operations: value > best or value is NaN is "not value <= best";
// and best is no NaN.
template <typename V>
inline auto replaces_lanes(V value, V best) {
  return ~(value <= best) & (best == best);
}

// kLanes windows (swizzled): their maxima and where they are, as lane
// masks: in the bottom row (`bottom`), in the right column of the top row
// (`top_right`) and of the bottom row (`bottom_right`).
template <typename T>
struct Windows2x2 {
  Vec<T> value;
  decltype(Vec<T>{} > Vec<T>{}) top_right, bottom_right, bottom;
};

// The windows of kLanes outputs whose top-left corners are r0[0], r0[2]...
// (r1 the row below).
template <typename T>
inline Windows2x2<T> windows_2x2(const T* r0, const T* r1) {
  Vec<T> a, b, c, d;
  deinterleave(r0, a, b);
  deinterleave(r1, c, d);
  Windows2x2<T> w;
  w.top_right = replaces_lanes(b, a);
  w.bottom_right = replaces_lanes(d, c);
  const Vec<T> top = w.top_right ? b : a, bottom = w.bottom_right ? d : c;
  w.bottom = replaces_lanes(bottom, top);
  w.value = w.bottom ? bottom : top;
  return w;
}

// One window, scalar (for the row tails the vectors may not cover): its
// value, and its position 0 to 3 (a, b, c, d) in `position`.
template <typename T>
inline T window_2x2(const T* r0, const T* r1, int64_t ow, int& position) {
  const T a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];
  const bool top_right = replaces(b, a), bottom_right = replaces(d, c);
  const T top = top_right ? b : a, bottom = bottom_right ? d : c;
  const bool in_bottom = replaces(bottom, top);
  position = in_bottom ? 2 + bottom_right : top_right;
  return in_bottom ? bottom : top;
}

// Each output row is done in vectors of kLanes outputs. A row whose length
// is not a multiple of it (rows of 7 or 14 outputs) ends in a vector that
// runs past the row: its extra lanes read the input rows that follow and
// write results (or gradients) into the outputs that follow, which are
// computed, and so overwritten, later in the same call. That vector is
// taken first in its row, so that in the gradient its top-row store, which
// reaches into the bottom row, comes before the bottom row's stores. A
// tail is run that way only when all it touches lies in the planes of this
// call (another thread's outputs are never written); at the end of the
// call's planes its outputs are done one by one instead.
template <typename T>
__attribute__((noinline)) void pool_2x2_forward(const T* x, T* y, int64_t h_size, int64_t w_size,
                                                int64_t begin, int64_t end) {
  constexpr int64_t L = kLanes<T>;
  const int64_t oh_size = h_size / 2, ow_size = w_size / 2, area = h_size * w_size;
  const int64_t full_end = ow_size / L * L;
  const T* x_end = x + end * area;
  const T* y_end = y + end * oh_size * ow_size;
  const auto vector = [](const T* r0, const T* r1, T* out) {
    simd::store(out, swizzle(windows_2x2(r0, r1).value));
  };
  T* out = y + begin * oh_size * ow_size;
  for (int64_t p = begin; p < end; p++) {
    const T* r0 = x + p * area;
    for (int64_t oh = 0; oh < oh_size; oh++, r0 += 2 * w_size, out += ow_size) {
      const T* r1 = r0 + w_size;
      if (full_end < ow_size) {
        if (x_end - r1 >= 2 * (full_end + L) && y_end - out >= full_end + L) {
          vector(r0 + 2 * full_end, r1 + 2 * full_end, out + full_end);
        } else {
          int position;
          for (int64_t ow = full_end; ow < ow_size; ow++)
            out[ow] = window_2x2(r0, r1, ow, position);
        }
      }
      for (int64_t ow = 0; ow < full_end; ow += L) vector(r0 + 2 * ow, r1 + 2 * ow, out + ow);
    }
  }
}

template <typename T>
__attribute__((noinline)) void pool_2x2_backward(const T* gy, const T* x, T* gx, int64_t h_size,
                                                 int64_t w_size, int64_t begin, int64_t end) {
  constexpr int64_t L = kLanes<T>;
  const int64_t oh_size = h_size / 2, ow_size = w_size / 2, area = h_size * w_size;
  const int64_t full_end = ow_size / L * L;
  const T* x_end = x + end * area;
  const T* gy_end = gy + end * oh_size * ow_size;
  const T* gx_end = gx + end * area;
  // The gradients of kLanes windows into rows t0 and t1 of grad_x.
  const auto vector = [](const T* r0, const T* r1, const T* g, T* t0, T* t1) {
    const Vec<T> zero{};
    const Windows2x2<T> w = windows_2x2(r0, r1);
    const Vec<T> gradient = swizzle(simd::load(g)) + zero;
    const Vec<T> top = w.bottom ? zero : gradient, bottom = w.bottom ? gradient : zero;
    interleave(w.top_right ? zero : top, w.top_right ? top : zero, t0);
    interleave(w.bottom_right ? zero : bottom, w.bottom_right ? bottom : zero, t1);
  };
  const T* g = gy + begin * oh_size * ow_size;
  for (int64_t p = begin; p < end; p++) {
    const T* r0 = x + p * area;
    T* t0 = gx + p * area;
    for (int64_t oh = 0; oh < oh_size; oh++, r0 += 2 * w_size, t0 += 2 * w_size, g += ow_size) {
      const T* r1 = r0 + w_size;
      T* t1 = t0 + w_size;
      if (full_end < ow_size) {
        int64_t ow = full_end;
        if (x_end - r1 >= 2 * (ow + L) && gy_end - g >= ow + L && gx_end - t1 >= 2 * (ow + L)) {
          vector(r0 + 2 * ow, r1 + 2 * ow, g + ow, t0 + 2 * ow, t1 + 2 * ow);
        } else {
          for (; ow < ow_size; ow++) {
            int position;
            window_2x2(r0, r1, ow, position);
            const T gradient = T(0) + g[ow];
            t0[2 * ow] = position == 0 ? gradient : T(0);
            t0[2 * ow + 1] = position == 1 ? gradient : T(0);
            t1[2 * ow] = position == 2 ? gradient : T(0);
            t1[2 * ow + 1] = position == 3 ? gradient : T(0);
          }
        }
      }
      for (int64_t ow = 0; ow < full_end; ow += L) {
        vector(r0 + 2 * ow, r1 + 2 * ow, g + ow, t0 + 2 * ow, t1 + 2 * ow);
      }
      if (w_size % 2 != 0) t0[w_size - 1] = t1[w_size - 1] = T(0);  // in no window
    }
    // An odd last row is in no window; the tail vectors of the row pair
    // above may have written into it.
    if (h_size % 2 != 0) std::fill_n(t0, w_size, T(0));
  }
}

// Whether the window is the 2x2 fast path's.
bool is_2x2_stride_2(const Window2d& k) {
  return k.kh == 2 && k.kw == 2 && k.sh == 2 && k.sw == 2 && k.ph == 0 && k.pw == 0;
}

template <typename T>
void max_pool_forward(const Array& x_array, const Window2d& k, const Array& y) {
  const T* x = x_array.data<T>();
  T* out = y.data<T>();
  if (is_2x2_stride_2(k)) {
    const int64_t h_size = x_array.shape[2], w_size = x_array.shape[3];
    parallel_for(x_array.shape[0] * x_array.shape[1], plane_grain(x_array),
                 [&](int64_t begin, int64_t end) {
                   pool_2x2_forward<T>(x, out, h_size, w_size, begin, end);
                 });
    return;
  }
  const int64_t area = x_array.shape[2] * x_array.shape[3];
  const int64_t ow_size = y.shape[3], outputs = y.shape[2] * ow_size;
  const PlanePooling<T> pooling(k, x_array.shape[2], x_array.shape[3], y.shape[2], ow_size);
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
  const T* x = x_array.data<T>();
  const T* g = grad_y.data<T>();
  T* out = grad_x.data<T>();
  if (is_2x2_stride_2(k)) {
    const int64_t h_size = x_array.shape[2], w_size = x_array.shape[3];
    parallel_for(x_array.shape[0] * x_array.shape[1], plane_grain(x_array),
                 [&](int64_t begin, int64_t end) {
                   pool_2x2_backward<T>(g, x, out, h_size, w_size, begin, end);
                 });
    return;
  }
  const int64_t area = x_array.shape[2] * x_array.shape[3];
  const int64_t ow_size = grad_y.shape[3], outputs = grad_y.shape[2] * ow_size;
  const PlanePooling<T> pooling(k, x_array.shape[2], x_array.shape[3], grad_y.shape[2], ow_size);
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
