// loops.cpp - strided walks and same-dtype copies for the kernels.
#include "loops.h"

#include <algorithm>
#include <cstring>

#include "../thread_pool.h"

namespace lazylua::loops {

int64_t Walk::numel() const {
  int64_t count = 1;
  for (int d = 0; d < rank; ++d) count *= extent[d];
  return count;
}

void Walk::erase(int d) {
  for (int i = d; i + 1 < rank; ++i) {
    extent[i] = extent[i + 1];
    stride_a[i] = stride_a[i + 1];
    stride_b[i] = stride_b[i + 1];
  }
  --rank;
}

namespace {

Walk collapse(const Shape& shape, const Strides& strides_a, const Strides* strides_b) {
  Walk walk;
  for (int d = 0; d < shape.rank(); ++d) {
    if (shape[d] == 0) {
      // An empty space: one dim of extent 0 says it all.
      walk.rank = 1;
      walk.extent[0] = 0;
      walk.stride_a[0] = walk.stride_b[0] = 0;
      return walk;
    }
  }
  for (int d = 0; d < shape.rank(); ++d) {
    if (shape[d] == 1) continue;
    int64_t stride_b = strides_b ? (*strides_b)[d] : 0;
    if (walk.rank > 0) {
      int last = walk.rank - 1;
      // The previous dim steps over exactly one whole run of this dim.
      if (walk.stride_a[last] == strides_a[d] * shape[d] &&
          walk.stride_b[last] == stride_b * shape[d]) {
        walk.extent[last] *= shape[d];
        walk.stride_a[last] = strides_a[d];
        walk.stride_b[last] = stride_b;
        continue;
      }
    }
    walk.extent[walk.rank] = shape[d];
    walk.stride_a[walk.rank] = strides_a[d];
    walk.stride_b[walk.rank] = stride_b;
    ++walk.rank;
  }
  return walk;
}

// Copies one row of `count` elements of kSize bytes (memcpy of a constant
// size compiles to one move and sidesteps type-punning).
template <int kSize>
void copy_row(const char* src, int64_t src_stride, char* dst, int64_t dst_stride, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    std::memcpy(dst + i * dst_stride * kSize, src + i * src_stride * kSize, kSize);
  }
}

}  // namespace

Walk make_walk(const Shape& shape, const Strides& strides_a) {
  return collapse(shape, strides_a, nullptr);
}

Walk make_walk(const Shape& shape, const Strides& strides_a, const Strides& strides_b) {
  return collapse(shape, strides_a, &strides_b);
}

Odometer::Odometer(const Walk& walk, int rank, int64_t start) : walk_(walk), rank_(rank) {
  for (int d = rank - 1; d >= 0 && start != 0; --d) {
    index_[d] = start % walk.extent[d];
    start /= walk.extent[d];
    offset_a_ += index_[d] * walk.stride_a[d];
    offset_b_ += index_[d] * walk.stride_b[d];
  }
}

void copy_same_dtype(const Array& src, const Array& dst) {
  LAZYLUA_ASSERT(src.dtype == dst.dtype && src.shape == dst.shape);
  Walk walk = make_walk(src.shape, src.strides, dst.strides);
  if (walk.numel() == 0) return;
  const int element_size = dtype_size(src.dtype);
  const char* from = static_cast<const char*>(src.raw_data());
  char* to = static_cast<char*>(dst.raw_data());
  if (walk.rank == 0) {
    std::memcpy(to, from, element_size);
    return;
  }
  const int inner = walk.rank - 1;
  const int64_t length = walk.extent[inner];
  const int64_t src_step = walk.stride_a[inner];
  const int64_t dst_step = walk.stride_b[inner];
  const int64_t rows = walk.numel() / length;
  parallel_for(rows, std::max<int64_t>(1, kElementwiseGrain / length),
               [&](int64_t begin, int64_t end) {
                 Odometer odometer(walk, inner, begin);
                 for (int64_t row = begin; row < end; ++row, odometer.next()) {
                   const char* row_src = from + odometer.a() * element_size;
                   char* row_dst = to + odometer.b() * element_size;
                   if (src_step == 1 && dst_step == 1) {
                     std::memcpy(row_dst, row_src, length * element_size);
                   } else if (element_size == 8) {
                     copy_row<8>(row_src, src_step, row_dst, dst_step, length);
                   } else if (element_size == 4) {
                     copy_row<4>(row_src, src_step, row_dst, dst_step, length);
                   } else {
                     copy_row<1>(row_src, src_step, row_dst, dst_step, length);
                   }
                 }
               });
}

Array contiguous_copy(const Array& a, const char* op) {
  if (a.is_contiguous()) return a;
  Array copy = Array::empty(a.shape, a.dtype, op);
  copy_same_dtype(a, copy);
  return copy;
}

DimSplit split_at(const Shape& shape, int dim) {
  DimSplit split;
  if (shape.rank() == 0) return split;
  for (int d = 0; d < dim; ++d) split.outer *= shape[d];
  split.size = shape[dim];
  for (int d = dim + 1; d < shape.rank(); ++d) split.inner *= shape[d];
  return split;
}

}  // namespace lazylua::loops
