// index.cpp - reference kernels for gather, index_select, scatter and cat.
//
// Gathers and copies only move bits, so they are instantiated per element
// size (1, 4 or 8 bytes) rather than per dtype; only scatter with
// accumulation needs arithmetic. Index arrays are validated in a first pass
// (so a bad position raises before anything is written, and the parallel
// pass that follows cannot throw).
#include "index.h"

#include <cstring>
#include <type_traits>

#include "../thread_pool.h"
#include "loops.h"

namespace lazylua {

namespace {

[[noreturn]] void out_of_range(const char* op, int64_t position, int dim, int64_t size) {
  fail("{}: index {} is out of range for dimension {} of size {} (valid: 1 to {})", op, position,
       dim + 1, size, size);
}

void check_index_dtype(const char* op, const Array& index) {
  if (index.dtype != DType::i64 && index.dtype != DType::i32) {
    fail("{}: expected an i64 or i32 index tensor, got {}", op, dtype_name(index.dtype));
  }
}

template <typename I>
int64_t position_at(const Array& index, int64_t offset) {
  return static_cast<int64_t>(index.data<I>()[offset]);
}

// Raises Error for the first (row-major) position outside [1, size].
template <typename I>
void validate_positions(const char* op, const Array& index, int dim, int64_t size) {
  const I* data = index.data<I>();
  loops::Walk walk = loops::make_walk(index.shape, index.strides);
  if (walk.numel() == 0) return;
  if (walk.rank == 0) {
    if (data[0] < 1 || data[0] > size) out_of_range(op, data[0], dim, size);
    return;
  }
  const int last = walk.rank - 1;
  const int64_t length = walk.extent[last], stride = walk.stride_a[last];
  loops::Odometer odometer(walk, last, 0);
  for (int64_t row = walk.numel() / length; row > 0; --row, odometer.next()) {
    const I* p = data + odometer.a();
    bool all_valid = true;
    for (int64_t j = 0; j < length; ++j) all_valid &= p[j * stride] >= 1 && p[j * stride] <= size;
    if (all_valid) continue;
    for (int64_t j = 0; j < length; ++j) {
      if (p[j * stride] < 1 || p[j * stride] > size) out_of_range(op, p[j * stride], dim, size);
    }
  }
}

void validate(const char* op, const Array& index, int dim, int64_t size) {
  check_index_dtype(op, index);
  if (index.dtype == DType::i64) {
    validate_positions<int64_t>(op, index, dim, size);
  } else {
    validate_positions<int32_t>(op, index, dim, size);
  }
}

template <int kSize>
inline void copy_element(char* dst, const char* src) {
  std::memcpy(dst, src, kSize);
}

// Calls f(std::integral_constant<int, element size>).
template <typename F>
void visit_element_size(DType dtype, F&& f) {
  switch (dtype_size(dtype)) {
    case 1:
      return f(std::integral_constant<int, 1>{});
    case 4:
      return f(std::integral_constant<int, 4>{});
    default:
      return f(std::integral_constant<int, 8>{});
  }
}

// gather: walk index's positions, reading index (stride list a) and in with
// `dim`'s stride zeroed (list b); the position read supplies that part.
template <int kSize, typename I>
void run_gather(const Array& in, int dim, const Array& index, const Array& out) {
  Strides in_strides = in.strides;
  int64_t dim_stride = 0;
  if (in.rank() > 0) {
    dim_stride = in.strides[dim];
    in_strides[dim] = 0;
  }
  loops::Walk walk = loops::make_walk(index.shape, index.strides, in_strides);
  const int64_t count = walk.numel();
  const I* positions = index.data<I>();
  const char* source = static_cast<const char*>(in.raw_data());
  char* target = static_cast<char*>(out.raw_data());
  if (walk.rank == 0) {
    copy_element<kSize>(target, source + (positions[0] - 1) * dim_stride * kSize);
    return;
  }
  const int last = walk.rank - 1;
  const int64_t length = walk.extent[last];
  const int64_t index_step = walk.stride_a[last], in_step = walk.stride_b[last];
  parallel_for(count / length, std::max<int64_t>(1, kElementwiseGrain / length),
               [&](int64_t begin, int64_t end) {
                 loops::Odometer odometer(walk, last, begin);
                 for (int64_t row = begin; row < end; ++row, odometer.next()) {
                   const I* row_positions = positions + odometer.a();
                   const char* row_source = source + odometer.b() * kSize;
                   char* row_target = target + row * length * kSize;
                   for (int64_t j = 0; j < length; ++j) {
                     const int64_t offset =
                         j * in_step + (row_positions[j * index_step] - 1) * dim_stride;
                     copy_element<kSize>(row_target + j * kSize, row_source + offset * kSize);
                   }
                 }
               });
}

// index_select: out is [outer, count, inner] around dim; each (outer, k)
// block copies the inner slice of in at position positions[k].
template <int kSize>
void run_index_select(const Array& in, int dim, const std::vector<int64_t>& positions,
                      const Array& out) {
  const int rank = in.rank();
  Shape outer_shape, inner_shape;
  Strides outer_strides, inner_strides;
  for (int d = 0; d < rank; ++d) {
    if (d < dim) {
      outer_shape.push_back(in.shape[d]);
      outer_strides.push_back(in.strides[d]);
    } else if (d > dim) {
      inner_shape.push_back(in.shape[d]);
      inner_strides.push_back(in.strides[d]);
    }
  }
  const int64_t dim_stride = rank == 0 ? 0 : in.strides[dim];
  loops::Walk outer = loops::make_walk(outer_shape, outer_strides);
  loops::Walk inner = loops::make_walk(inner_shape, inner_strides);
  const int64_t count = static_cast<int64_t>(positions.size());
  const int64_t inner_count = inner.numel(), outer_count = outer.numel();
  const char* source = static_cast<const char*>(in.raw_data());
  char* target = static_cast<char*>(out.raw_data());
  const int64_t inner_step = inner.rank == 1 ? inner.stride_a[0] : 1;

  parallel_for(outer_count * count, std::max<int64_t>(1, kElementwiseGrain / inner_count),
               [&](int64_t begin, int64_t end) {
                 for (int64_t item = begin; item < end; ++item) {
                   const int64_t o = item / count, k = item % count;
                   loops::Odometer outer_position(outer, outer.rank, o);
                   const char* from =
                       source + (outer_position.a() + positions[k] * dim_stride) * kSize;
                   char* to = target + item * inner_count * kSize;
                   if (inner.rank <= 1) {
                     if (inner_step == 1) {
                       std::memcpy(to, from, inner_count * kSize);
                     } else {
                       for (int64_t j = 0; j < inner_count; ++j) {
                         copy_element<kSize>(to + j * kSize, from + j * inner_step * kSize);
                       }
                     }
                   } else {
                     loops::Odometer inner_position(inner, inner.rank, 0);
                     for (int64_t j = 0; j < inner_count; ++j, inner_position.next()) {
                       copy_element<kSize>(to + j * kSize, from + inner_position.a() * kSize);
                     }
                   }
                 }
               });
}

// scatter runs serially in row-major order of index, so with duplicate
// positions the last write wins, deterministically.
template <typename T, typename I>
void run_scatter(const Array& out, int dim, const Array& index, const Array& src, bool accumulate) {
  const int rank = index.rank();
  const int64_t count = index.numel();
  if (count == 0) return;
  const I* positions = index.data<I>();
  const T* source = src.data<T>();
  T* target = out.data<T>();
  const int64_t dim_stride = rank == 0 ? 0 : out.strides[dim];
  int64_t coordinate[kMaxDims] = {};
  for (int64_t i = 0; i < count; ++i) {
    int64_t index_offset = 0, source_offset = 0, target_offset = 0;
    for (int d = 0; d < rank; ++d) {
      index_offset += coordinate[d] * index.strides[d];
      source_offset += coordinate[d] * src.strides[d];
      if (d != dim) target_offset += coordinate[d] * out.strides[d];
    }
    T& slot = target[target_offset + (positions[index_offset] - 1) * dim_stride];
    const T value = source[source_offset];
    if (!accumulate) {
      slot = value;
    } else if constexpr (std::is_same_v<T, bool>) {
      slot = slot || value;
    } else if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;  // wrapping addition
      slot = static_cast<T>(static_cast<U>(slot) + static_cast<U>(value));
    } else {
      slot += value;
    }
    for (int d = rank - 1; d >= 0; --d) {
      if (++coordinate[d] < index.shape[d]) break;
      coordinate[d] = 0;
    }
  }
}

}  // namespace

void gather_kernel(const Array& in, int dim, const Array& index, const Array& out) {
  LAZYLUA_ASSERT(index.rank() == in.rank() && out.shape == index.shape && out.dtype == in.dtype &&
                 out.is_contiguous());
  for (int d = 0; d < in.rank(); ++d) {
    LAZYLUA_ASSERT(d == dim || index.shape[d] <= in.shape[d]);
  }
  const int64_t size = in.rank() == 0 ? 1 : in.shape[dim];
  validate("gather", index, dim, size);
  if (out.numel() == 0) return;
  visit_element_size(in.dtype, [&](auto element_size) {
    if (index.dtype == DType::i64) {
      run_gather<element_size(), int64_t>(in, dim, index, out);
    } else {
      run_gather<element_size(), int32_t>(in, dim, index, out);
    }
  });
}

void index_select_kernel(const Array& in, int dim, const Array& index, const Array& out) {
  LAZYLUA_ASSERT(index.rank() <= 1 && out.dtype == in.dtype && out.is_contiguous());
  const int64_t size = in.rank() == 0 ? 1 : in.shape[dim];
  validate("index_select", index, dim, size);
  const int64_t count = index.numel();
  const int64_t step = index.rank() == 1 ? index.strides[0] : 0;
  std::vector<int64_t> positions(count);
  for (int64_t k = 0; k < count; ++k) {
    positions[k] = (index.dtype == DType::i64 ? position_at<int64_t>(index, k * step)
                                              : position_at<int32_t>(index, k * step)) -
                   1;
  }
  LAZYLUA_ASSERT(out.numel() == (size == 0 ? 0 : in.numel() / size) * count || out.numel() == 0);
  if (out.numel() == 0) return;
  visit_element_size(in.dtype, [&](auto element_size) {
    run_index_select<element_size()>(in, dim, positions, out);
  });
}

void scatter_kernel(const Array& out, int dim, const Array& index, const Array& src,
                    bool accumulate) {
  LAZYLUA_ASSERT(index.rank() == out.rank() && src.rank() == out.rank() && src.dtype == out.dtype);
  for (int d = 0; d < index.rank(); ++d) {
    LAZYLUA_ASSERT(index.shape[d] <= src.shape[d]);
    LAZYLUA_ASSERT(d == dim || index.shape[d] <= out.shape[d]);
  }
  const char* op = accumulate ? "scatter_add" : "scatter";
  const int64_t size = out.rank() == 0 ? 1 : out.shape[dim];
  validate(op, index, dim, size);
  visit_dtype(out.dtype, [&](auto zero) {
    using T = decltype(zero);
    if (index.dtype == DType::i64) {
      run_scatter<T, int64_t>(out, dim, index, src, accumulate);
    } else {
      run_scatter<T, int32_t>(out, dim, index, src, accumulate);
    }
  });
}

void cat_kernel(const std::vector<Array>& inputs, int dim, const Array& out) {
  LAZYLUA_ASSERT(out.is_contiguous());
  const Strides out_strides = contiguous_strides(out.shape);
  int64_t start = 0;  // where the next input goes along dim
  for (const Array& input : inputs) {
    LAZYLUA_ASSERT(input.dtype == out.dtype && input.rank() == out.rank());
    for (int d = 0; d < out.rank(); ++d) {
      LAZYLUA_ASSERT(d == dim || input.shape[d] == out.shape[d]);
    }
    if (input.numel() > 0) {
      // The slice of out this input fills, as a strided view.
      Array slice = out.view_as(input.shape, out_strides, out.offset + start * out_strides[dim]);
      loops::copy_same_dtype(input, slice);
    }
    start += input.shape[dim];
  }
  LAZYLUA_ASSERT(start == out.shape[dim]);
}

}  // namespace lazylua
