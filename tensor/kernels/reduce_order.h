// reduce_order.h - THE order of float reductions (sum, mean, prod, and the
// sums and maxes inside softmax), shared by the eager kernels and mirrored
// exactly by the generated C (compiler/codegen_c.cpp's prelude and
// compiler/codegen_reduce.cpp), so every tier gives the same bits.
//
// The values of one output are taken in logical order (along the reduced
// dim; for a whole tensor, row-major), whatever their layout in memory:
//  1. they are cut into blocks of kBlock values (the last one shorter);
//  2. a block folds into kLanes<T> lanes (4 vectors: 32 for f32, 16 for
//     f64): value i goes to lane i % kLanes, each lane folds its values in
//     order starting from the identity; then the four vectors merge as
//     (v0 + v1) + (v2 + v3) and the result's lanes fold left to right;
//  3. block results merge pairwise as a binary counter would: block b is
//     merged with the perfect subtrees its trailing one bits name, and the
//     subtrees left at the end merge from the smallest (right) upwards.
// Step 2 is a plain vectorized loop (and the accuracy of ~32 sequential
// adds per lane); step 3 keeps the error ~log n over blocks. Aligned runs
// of 2^k blocks are complete subtrees of step 3, so a line cut into such
// chunks for threads, the chunk results merged by the same counter, gives
// the very same bits: the thread count never matters.
//
// A lane that received nothing holds the identity, and merging the
// identity is exact (a lane of a sum is never -0: it starts at +0), so an
// implementation may skip empty lanes instead of padding them.
#pragma once

#include <algorithm>
#include <cstdint>

#include "simd.h"

namespace lazylua::order {

constexpr int64_t kBlock = 1024;
template <typename T>
constexpr int kLanes = 4 * simd::kLanes<T>;

// Step 2 for n >= 0 contiguous values (softmax's max uses it on whole
// rows: for max only NaN payloads and the sign of zero depend on order).
// `merge` works on T and on simd::Vec<T>.
template <typename T, typename Merge>
inline T fold_block(const T* p, int64_t n, T identity, Merge merge) {
  using V = simd::Vec<T>;
  constexpr int kWidth = simd::kLanes<T>;
  V a0 = simd::broadcast<T>(identity), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 4 * kWidth <= n; i += 4 * kWidth) {
    a0 = merge(a0, simd::load(p + i));
    a1 = merge(a1, simd::load(p + i + kWidth));
    a2 = merge(a2, simd::load(p + i + 2 * kWidth));
    a3 = merge(a3, simd::load(p + i + 3 * kWidth));
  }
  if (i < n) {
    T tail[4 * kWidth];
    for (int l = 0; l < 4 * kWidth; ++l) tail[l] = i + l < n ? p[i + l] : identity;
    a0 = merge(a0, simd::load(tail));
    a1 = merge(a1, simd::load(tail + kWidth));
    a2 = merge(a2, simd::load(tail + 2 * kWidth));
    a3 = merge(a3, simd::load(tail + 3 * kWidth));
  }
  const V v = merge(merge(a0, a1), merge(a2, a3));
  T r = v[0];
  for (int l = 1; l < kWidth; ++l) r = merge(r, v[l]);
  return r;
}

// Step 3: block results pushed in order; total() merges what is left.
template <typename T>
struct Pairs {
  T level[64];
  int depth = 0;
  int64_t count = 0;

  template <typename Merge>
  void push(T part, Merge merge) {
    for (int64_t c = count++; c & 1; c >>= 1) part = merge(level[--depth], part);
    level[depth++] = part;
  }
  template <typename Merge>
  T total(T identity, Merge merge) const {
    if (depth == 0) return identity;
    T t = level[depth - 1];
    for (int d = depth - 2; d >= 0; --d) t = merge(level[d], t);
    return t;
  }
};

// Steps 1-3 for n values at any stride (strided blocks are gathered first).
template <typename T, typename Merge>
T fold_line(const T* p, int64_t n, int64_t stride, T identity, Merge merge) {
  Pairs<T> pairs;
  T gathered[kBlock];
  for (int64_t b0 = 0; b0 < n; b0 += kBlock) {
    const int64_t count = std::min(kBlock, n - b0);
    const T* q = p + b0 * stride;
    if (stride != 1) {
      for (int64_t j = 0; j < count; ++j) gathered[j] = q[j * stride];
      q = gathered;
    }
    pairs.push(fold_block(q, count, identity, merge), merge);
  }
  return pairs.total(identity, merge);
}

}  // namespace lazylua::order
