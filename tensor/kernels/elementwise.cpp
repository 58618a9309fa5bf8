// elementwise.cpp - the data-movement kernels: copy (with
// dtype conversion), fill, arange, where, any/all. The unary and binary
// math lives in elementwise_unary.cpp and elementwise_binary.cpp.
#include "elementwise.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>

#include "elementwise_loops.h"

namespace lazylua {

namespace elementwise {
namespace {

// Whether float x truncated toward zero is a value of integer type To: iff
// low - 1 < x < -low, with low = To's minimum (a power of two, exact in
// From). When low - 1 is not representable in From, no From lies strictly
// between it and low: test x >= low. False for NaN and +-inf.
template <typename To, typename From>
inline bool fits_integer(From x) {
  constexpr From low = static_cast<From>(std::numeric_limits<To>::min());
  constexpr bool low_minus_one_exact = low - From{1} != low;
  return (low_minus_one_exact ? x > low - From{1} : x >= low) && x < -low;
}

// One element of From as To (both storage types; uint8_t is bool):
//   anything -> bool is x != 0 (NaN is true); bool -> number is 0 or 1;
//   float -> int truncates toward zero, and a value whose truncation does
//     not fit (NaN, +-inf, out of range) becomes 0 instead of undefined
//     behaviour;
//   int -> narrower int wraps; int -> float and f64 -> f32 round to nearest
//     (f64 beyond f32's range gives +-inf).
template <typename To, typename From>
inline To convert(From x) {
  if constexpr (std::is_same_v<To, uint8_t>) {
    return static_cast<uint8_t>(x != From{0});
  } else if constexpr (std::is_same_v<From, uint8_t>) {
    return static_cast<To>(x != 0);
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    const From safe = fits_integer<To>(x) ? x : From{0};  // a select: the loop still vectorizes
    return static_cast<To>(safe);
  } else {
    return static_cast<To>(x);
  }
}

template <typename To, typename From>
void convert_loop(const Array& src, const Array& dst) {
  unary_loop<From, To>(src, dst, kElementwiseGrain, [](From x) { return convert<To, From>(x); });
}

// Copies the last two dims of the plan in square tiles when the source is a
// transposed view of them (dst steps by one element along the last dim, the
// source along the one before). Row by row, every source read would touch a
// new cache line and often a new page (4096^2 floats: ~1 GB/s). Tiles alone
// do not cure it: with power-of-two strides all the lines of a tile fall in
// the same L1 set and evict each other. So each tile goes through a small
// contiguous buffer: its source columns are read as whole lines, then its
// destination rows are written as whole lines, and no line has to stay
// cached in between. Tiles are 16 columns by 512 bytes of rows: each visit
// to a source page reads 512 bytes (on big matrices every column is in its
// own page, and page walks dominate otherwise). Of the shapes measured
// (8..64 columns, 32..128 rows, f32 1024^2..4096^2) this one was fastest
// everywhere: 2-8x the untiled copy. Returns false when the layout is not
// that.
template <typename T>
bool copy_transposed_in_tiles(const LoopPlan<2>& plan) {
  constexpr int64_t kTileColumns = 16;
  constexpr int64_t kTileRows = 512 / sizeof(T);
  const int rank = plan.rank;
  if (rank < 2) return false;
  const int64_t rows = plan.extent[rank - 2], cols = plan.extent[rank - 1];
  const int64_t dst_row = plan.stride[rank - 2][0], dst_col = plan.stride[rank - 1][0];
  const int64_t src_row = plan.stride[rank - 2][1], src_col = plan.stride[rank - 1][1];
  if (dst_col != sizeof(T) || src_row != sizeof(T) || src_col < 512 || rows < kTileColumns ||
      cols < kTileColumns) {
    return false;
  }
  // Tasks: (slab of the outer dims, band of kTileRows rows).
  const int64_t bands = (rows + kTileRows - 1) / kTileRows;
  const int64_t tasks = plan.numel / (rows * cols) * bands;
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / (kTileRows * cols));
  parallel_for(tasks, grain, [&](int64_t begin, int64_t end) {
    T tile[kTileColumns][kTileRows];  // 8 KiB
    for (int64_t task = begin; task < end; ++task) {
      int64_t slab = task / bands;
      char* dst = plan.data[0];
      const char* src = plan.data[1];
      for (int d = rank - 3; d >= 0; --d) {
        const int64_t index = slab % plan.extent[d];
        slab /= plan.extent[d];
        dst += index * plan.stride[d][0];
        src += index * plan.stride[d][1];
      }
      const int64_t row_begin = task % bands * kTileRows;
      const int64_t row_count = std::min(kTileRows, rows - row_begin);
      for (int64_t col_begin = 0; col_begin < cols; col_begin += kTileColumns) {
        const int64_t col_count = std::min(kTileColumns, cols - col_begin);
        for (int64_t j = 0; j < col_count; ++j) {
          const T* in = reinterpret_cast<const T*>(src + (col_begin + j) * src_col) + row_begin;
          for (int64_t i = 0; i < row_count; ++i) tile[j][i] = in[i];
        }
        for (int64_t i = 0; i < row_count; ++i) {
          T* out = reinterpret_cast<T*>(dst + (row_begin + i) * dst_row) + col_begin;
          for (int64_t j = 0; j < col_count; ++j) out[j] = tile[j][i];
        }
      }
    }
  });
  return true;
}

// Same dtype: the bits move unchanged (bool is normalized to 0/1 by
// convert<uint8_t, uint8_t>); contiguous rows become memcpy.
template <typename T>
void same_type_copy(const Array& src, const Array& dst) {
  if constexpr (std::is_same_v<T, uint8_t>) {
    convert_loop<uint8_t, uint8_t>(src, dst);
  } else {
    LoopPlan<2> plan;
    const Array* const arrays[2] = {&dst, &src};
    if (!make_plan(plan, arrays)) return;
    if (copy_transposed_in_tiles<T>(plan)) return;
    const int64_t dst_stride = plan.inner_strides()[0];
    const int64_t src_stride = plan.inner_strides()[1];
    run_rows(plan, kElementwiseGrain, [&](char* const* pointers, int64_t count) {
      if (dst_stride == sizeof(T) && src_stride == sizeof(T)) {
        // copy_(t, t) reaches here with both sides equal: memcpy on
        // overlapping memory is undefined, and there is nothing to move.
        if (pointers[0] != pointers[1]) std::memcpy(pointers[0], pointers[1], count * sizeof(T));
      } else if (dst_stride == sizeof(T) && src_stride == 0) {
        const T value = *reinterpret_cast<const T*>(pointers[1]);
        T* output = reinterpret_cast<T*>(pointers[0]);
        for (int64_t i = 0; i < count; ++i) output[i] = value;
      } else {
        for (int64_t i = 0; i < count; ++i) {
          store_at<T>(pointers[0], i, dst_stride, load_at<T>(pointers[1], i, src_stride));
        }
      }
    });
  }
}

// Sets every element of dst (any strides) to `value`.
template <typename T>
void fill_loop(const Array& dst, T value) {
  LoopPlan<1> plan;
  const Array* const arrays[1] = {&dst};
  if (!make_plan(plan, arrays)) return;
  const int64_t stride = plan.inner_strides()[0];
  run_rows(plan, kElementwiseGrain, [&](char* const* pointers, int64_t count) {
    const T v = value;
    if (stride == sizeof(T)) {
      T* output = reinterpret_cast<T*>(pointers[0]);
      for (int64_t i = 0; i < count; ++i) output[i] = v;
    } else {
      for (int64_t i = 0; i < count; ++i) store_at<T>(pointers[0], i, stride, v);
    }
  });
}

// Visits the rows of `array` in order until visit(pointer, stride, count)
// returns true; returns whether it did.
template <typename Visit>
bool find_row(const Array& array, Visit&& visit) {
  LoopPlan<1> plan;
  const Array* const arrays[1] = {&array};
  if (!make_plan(plan, arrays)) return false;
  const int64_t stride = plan.inner_strides()[0];
  if (plan.rank == 1) return visit(plan.data[0], stride, plan.numel);
  // Row by row: for_each_row cannot stop early, so walk rows of the plan
  // in chunks and stop between them.
  const int64_t row_length = plan.extent[plan.rank - 1];
  bool found = false;
  const int64_t rows = plan.numel / row_length;
  constexpr int64_t kRowsPerChunk = 64;
  for (int64_t row = 0; row < rows && !found; row += kRowsPerChunk) {
    const int64_t last = std::min(rows, row + kRowsPerChunk);
    for_each_row(plan, row * row_length, last * row_length,
                 [&](char* const* pointers, int64_t count) {
                   if (!found) found = visit(pointers[0], stride, count);
                 });
  }
  return found;
}

// Whether some element of a row is zero (want_zero) or nonzero. Contiguous
// rows are scanned in blocks with a branch-free, vectorizable OR.
template <typename T>
bool row_has(bool want_zero, const char* pointer, int64_t stride, int64_t count) {
  if (stride == sizeof(T)) {
    const T* values = reinterpret_cast<const T*>(pointer);
    constexpr int64_t kBlock = 1024;
    for (int64_t start = 0; start < count; start += kBlock) {
      const int64_t end = std::min(count, start + kBlock);
      uint8_t found = 0;
      if (want_zero) {
        for (int64_t i = start; i < end; ++i) found |= static_cast<uint8_t>(values[i] == T{0});
      } else {
        for (int64_t i = start; i < end; ++i) found |= static_cast<uint8_t>(values[i] != T{0});
      }
      if (found) return true;
    }
    return false;
  }
  for (int64_t i = 0; i < count; ++i) {
    if ((load_at<T>(pointer, i, stride) == T{0}) == want_zero) return true;
  }
  return false;
}

bool array_has(const Array& array, bool want_zero) {
  return visit_storage(array.dtype, [&](auto type) {
    using T = decltype(type);
    return find_row(array, [&](const char* pointer, int64_t stride, int64_t count) {
      return row_has<T>(want_zero, pointer, stride, count);
    });
  });
}

// out = cond ? a : b for elements of `Bits` bytes: values are only moved,
// so one loop per element size serves every dtype of that size.
template <typename Bits, bool a_repeated, bool b_repeated>
void where_row(uint8_t* out_bytes, const uint8_t* cond, const uint8_t* a_bytes,
               const uint8_t* b_bytes, int64_t count) {
  Bits* out = reinterpret_cast<Bits*>(out_bytes);
  const Bits* a = reinterpret_cast<const Bits*>(a_bytes);
  const Bits* b = reinterpret_cast<const Bits*>(b_bytes);
  for (int64_t i = 0; i < count; ++i) {
    const Bits x = a[a_repeated ? 0 : i];  // both loaded unconditionally: the
    const Bits y = b[b_repeated ? 0 : i];  // select then vectorizes
    out[i] = cond[i] != 0 ? x : y;
  }
}

template <typename Bits>
void where_loop(const Array& cond, const Array& a, const Array& b, const Array& out) {
  LoopPlan<4> plan;
  const Array* const arrays[4] = {&out, &cond, &a, &b};
  if (!make_plan(plan, arrays)) return;
  const int64_t* inner = plan.inner_strides();
  const int64_t out_stride = inner[0], cond_stride = inner[1];
  const int64_t a_stride = inner[2], b_stride = inner[3];
  constexpr int64_t kSize = sizeof(Bits);
  const bool dense = out_stride == kSize && cond_stride == 1 &&
                     (a_stride == kSize || a_stride == 0) && (b_stride == kSize || b_stride == 0);
  run_rows(plan, kElementwiseGrain, [&](char* const* pointers, int64_t count) {
    auto* out_bytes = reinterpret_cast<uint8_t*>(pointers[0]);
    auto* cond_bytes = reinterpret_cast<const uint8_t*>(pointers[1]);
    auto* a_bytes = reinterpret_cast<const uint8_t*>(pointers[2]);
    auto* b_bytes = reinterpret_cast<const uint8_t*>(pointers[3]);
    if (dense) {
      if (a_stride != 0 && b_stride != 0) {
        where_row<Bits, false, false>(out_bytes, cond_bytes, a_bytes, b_bytes, count);
      } else if (a_stride != 0) {
        where_row<Bits, false, true>(out_bytes, cond_bytes, a_bytes, b_bytes, count);
      } else if (b_stride != 0) {
        where_row<Bits, true, false>(out_bytes, cond_bytes, a_bytes, b_bytes, count);
      } else {
        where_row<Bits, true, true>(out_bytes, cond_bytes, a_bytes, b_bytes, count);
      }
      return;
    }
    for (int64_t i = 0; i < count; ++i) {
      const bool take_a = load_at<uint8_t>(pointers[1], i, cond_stride) != 0;
      const Bits value = take_a ? load_at<Bits>(pointers[2], i, a_stride)
                                : load_at<Bits>(pointers[3], i, b_stride);
      store_at<Bits>(pointers[0], i, out_stride, value);
    }
  });
}

// dst[i] = first + i * increment, exactly: the sum is done in wrapping
// uint64 (defined), and every dst[i] lies between the range's start and
// stop, so it is the exact int64 value, converted once to T.
template <typename T>
void arange_integer_loop(const Array& dst, int64_t start, int64_t step) {
  T* output = dst.data<T>();
  const uint64_t first = static_cast<uint64_t>(start);
  const uint64_t increment = static_cast<uint64_t>(step);
  parallel_for(dst.numel(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      output[i] =
          convert<T, int64_t>(static_cast<int64_t>(first + static_cast<uint64_t>(i) * increment));
    }
  });
}

// dst[i] = start + i * step for double start and step: exactly as above when
// T is an integer and start, step are integral doubles below 2^63;
// otherwise in double, then converted like copy_kernel does.
template <typename T>
void arange_loop(const Array& dst, double start, double step) {
  constexpr double kTwo63 = 9223372036854775808.0;
  const bool exact_integers = std::is_integral_v<T> && start == std::trunc(start) &&
                              step == std::trunc(step) && std::fabs(start) < kTwo63 &&
                              std::fabs(step) < kTwo63;
  if (exact_integers) {
    arange_integer_loop<T>(dst, static_cast<int64_t>(start), static_cast<int64_t>(step));
    return;
  }
  T* output = dst.data<T>();
  parallel_for(dst.numel(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      output[i] = convert<T, double>(start + static_cast<double>(i) * step);
    }
  });
}

}  // namespace
}  // namespace elementwise

using namespace elementwise;

void copy_kernel(const Array& src, const Array& dst) {
  if (src.dtype == dst.dtype) {
    switch (dst.dtype) {
      case DType::boolean:
        return same_type_copy<uint8_t>(src, dst);
      case DType::i32:
      case DType::f32:
        return same_type_copy<uint32_t>(src, dst);
      case DType::i64:
      case DType::f64:
        return same_type_copy<uint64_t>(src, dst);
    }
  }
  visit_storage(dst.dtype, [&](auto to) {
    visit_storage(src.dtype,
                  [&](auto from) { convert_loop<decltype(to), decltype(from)>(src, dst); });
  });
}

void fill_kernel(const Array& dst, double value) {
  visit_storage(dst.dtype, [&](auto type) {
    using T = decltype(type);
    fill_loop<T>(dst, convert<T, double>(value));
  });
}

void fill_kernel_int(const Array& dst, int64_t value) {
  visit_storage(dst.dtype, [&](auto type) {
    using T = decltype(type);
    fill_loop<T>(dst, convert<T, int64_t>(value));
  });
}

void arange_kernel(const Array& dst, double start, double step) {
  LAZYLUA_ASSERT(dst.rank() == 1 && (dst.numel() <= 1 || dst.strides[0] == 1));
  visit_storage(dst.dtype, [&](auto type) { arange_loop<decltype(type)>(dst, start, step); });
}

void arange_kernel_int(const Array& dst, int64_t start, int64_t step) {
  LAZYLUA_ASSERT(dst.rank() == 1 && (dst.numel() <= 1 || dst.strides[0] == 1));
  visit_storage(dst.dtype,
                [&](auto type) { arange_integer_loop<decltype(type)>(dst, start, step); });
}

std::optional<double> first_without_integer_value(const Array& src, DType to) {
  if (!is_floating(src.dtype) || is_floating(to) || to == DType::boolean) return std::nullopt;
  std::optional<double> found;
  const auto scan = [&](auto from, auto integer) {
    using From = decltype(from);
    using To = decltype(integer);
    find_row(src, [&](const char* pointer, int64_t stride, int64_t count) {
      // Branch-free blocks, as row_has; the value is looked up only once found.
      constexpr int64_t kBlock = 1024;
      for (int64_t start = 0; start < count; start += kBlock) {
        const int64_t end = std::min(count, start + kBlock);
        uint8_t bad = 0;
        for (int64_t i = start; i < end; ++i)
          bad |= static_cast<uint8_t>(!fits_integer<To>(load_at<From>(pointer, i, stride)));
        if (!bad) continue;
        for (int64_t i = start; i < end && !found; ++i) {
          const From x = load_at<From>(pointer, i, stride);
          if (!fits_integer<To>(x)) found = static_cast<double>(x);
        }
        return true;
      }
      return false;
    });
  };
  const auto for_target = [&](auto from) {
    if (to == DType::i32) scan(from, int32_t{});
    if (to == DType::i64) scan(from, int64_t{});
  };
  if (src.dtype == DType::f32) for_target(float{});
  if (src.dtype == DType::f64) for_target(double{});
  return found;
}

bool any_nonzero(const Array& a) {
  return array_has(a, /*want_zero=*/false);
}

bool all_nonzero(const Array& a) {
  return !array_has(a, /*want_zero=*/true);
}

void where_kernel(const Array& cond, const Array& a, const Array& b, const Array& out) {
  LAZYLUA_ASSERT(cond.dtype == DType::boolean);
  LAZYLUA_ASSERT(a.dtype == out.dtype && b.dtype == out.dtype);
  switch (dtype_size(out.dtype)) {
    case 1: {
      // bool values: where picks bytes, then they are normalized to 0/1.
      where_loop<uint8_t>(cond, a, b, out);
      if (out.dtype == DType::boolean) convert_loop<uint8_t, uint8_t>(out, out);
      return;
    }
    case 4:
      return where_loop<uint32_t>(cond, a, b, out);
    case 8:
      return where_loop<uint64_t>(cond, a, b, out);
  }
  LAZYLUA_ASSERT(false);
}

}  // namespace lazylua
