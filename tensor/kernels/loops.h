// loops.h - walking strided index spaces, shared by the reduce, softmax,
// index and matmul kernels.
//
// A kernel's inner loop runs along one dim; everything outside it is walked
// by an Odometer that keeps the element offsets of one or two arrays up to
// date with additions only (no division per element).
#pragma once

#include <cstdint>

#include "../array.h"

namespace lazylua::loops {

// An index space with the strides of up to two arrays. make_walk drops
// extent-1 dims and merges neighbours that both arrays step through as one
// dim, so e.g. a contiguous [4, 5, 6] becomes a single dim of 120. Merging
// keeps the row-major order of the positions.
struct Walk {
  int rank = 0;
  int64_t extent[kMaxDims] = {};
  int64_t stride_a[kMaxDims] = {};
  int64_t stride_b[kMaxDims] = {};

  int64_t numel() const;
  // Drops dim d (used to pull out the dim a kernel loops along).
  void erase(int d);
};

Walk make_walk(const Shape& shape, const Strides& strides_a);
Walk make_walk(const Shape& shape, const Strides& strides_a, const Strides& strides_b);

// Visits the positions of the first `rank` dims of a walk in row-major
// order, starting at linear position `start`.
class Odometer {
 public:
  Odometer(const Walk& walk, int rank, int64_t start);
  int64_t a() const { return offset_a_; }
  int64_t b() const { return offset_b_; }
  void next() {
    for (int d = rank_ - 1; d >= 0; --d) {
      offset_a_ += walk_.stride_a[d];
      offset_b_ += walk_.stride_b[d];
      if (++index_[d] < walk_.extent[d]) return;
      offset_a_ -= walk_.stride_a[d] * walk_.extent[d];
      offset_b_ -= walk_.stride_b[d] * walk_.extent[d];
      index_[d] = 0;
    }
  }

 private:
  const Walk& walk_;
  int rank_;
  int64_t index_[kMaxDims] = {};
  int64_t offset_a_ = 0;
  int64_t offset_b_ = 0;
};

// Copies the elements of `src` into `dst` (same shape, same dtype, any
// strides for both; they must not overlap). Threaded for large copies.
void copy_same_dtype(const Array& src, const Array& dst);

// `a` itself when contiguous, else a contiguous copy with the same dtype.
// (Kernels use this rather than lazylua::contiguous so they depend on no
// other kernel file.)
Array contiguous_copy(const Array& a, const char* op);

// Extents of a shape around one dim: [outer, size, inner] as plain counts.
// A rank-0 shape counts as [1, 1, 1] (a scalar has one "row" of length 1).
struct DimSplit {
  int64_t outer = 1;
  int64_t size = 1;
  int64_t inner = 1;
};
DimSplit split_at(const Shape& shape, int dim);

}  // namespace lazylua::loops
