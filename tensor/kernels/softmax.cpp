// softmax.cpp - reference kernels for softmax, log-softmax and cumsum
// (declared in reduce.h).
//
// Both work on a contiguous input seen as [outer, size, inner] around the
// dim (a strided input is copied first: these ops read every element
// several times, so one copy is cheap next to strided passes).
//  - inner == 1 (the last dim, the common case): each row is short enough
//    to stay in L1 and goes through kernel_math.h's ll_softmax_row_*, the
//    function generated code calls: eager, reference and compiled softmax
//    give the same bits.
//  - inner > 1: the same passes (max, exp and sum, scale) run over blocks of
//    columns, vectorized along the contiguous inner dim, with kernel_math.h's
//    exp and log; the sums run down each column (generated code leaves this
//    form to this kernel).
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>

#include "../thread_pool.h"
#include "kernel_math.h"
#include "loops.h"
#include "reduce.h"
#include "reduce_order.h"
#include "simd.h"

namespace lazylua {

namespace {

// Elements per unit of parallel work.
constexpr int64_t kGrain = 16384;
// Column blocks of [size, width] are sized to stay in L2 (~256 KiB for the
// input and output blocks together).
constexpr int64_t kColumnBlockElements = 32768;

inline void softmax_row(const float* x, float* y, int64_t n, bool log) {
  ll_softmax_row_f32(x, y, n, log);
}
inline void softmax_row(const double* x, double* y, int64_t n, bool log) {
  ll_softmax_row_f64(x, y, n, log);
}

inline float exp_of(float x) {
  return ll_expf(x);
}
inline double exp_of(double x) {
  return ll_exp(x);
}
inline float log_of(float x) {
  return ll_logf(x);
}
inline double log_of(double x) {
  return ll_log(x);
}

// NaN wins, as in ll_max_*.
template <typename T>
T max_nan(T a, T b) {
  return (b > a) | (b != b) ? b : a;
}

// Softmax over the rows of a [size, width] block (row stride `inner`) for
// each of the `width` columns; shift and sum are scratch rows.
template <typename T>
void softmax_columns(const T* x, T* y, int64_t size, int64_t width, int64_t inner, bool log,
                     T* shift, T* sum) {
  for (int64_t j = 0; j < width; ++j) shift[j] = x[j];
  for (int64_t r = 1; r < size; ++r) {
    const T* row = x + r * inner;
    for (int64_t j = 0; j < width; ++j) shift[j] = max_nan(shift[j], row[j]);
  }
  for (int64_t j = 0; j < width; ++j) sum[j] = 0;
  for (int64_t r = 0; r < size; ++r) {
    const T* row = x + r * inner;
    T* out_row = y + r * inner;
    for (int64_t j = 0; j < width; ++j) {
      out_row[j] = exp_of(row[j] - shift[j]);
      sum[j] += out_row[j];
    }
  }
  for (int64_t j = 0; j < width; ++j) sum[j] = log ? log_of(sum[j]) : T(1) / sum[j];
  for (int64_t r = 0; r < size; ++r) {
    const T* row = x + r * inner;
    T* out_row = y + r * inner;
    if (log) {
      for (int64_t j = 0; j < width; ++j) out_row[j] = (row[j] - shift[j]) - sum[j];
    } else {
      for (int64_t j = 0; j < width; ++j) out_row[j] *= sum[j];
    }
  }
}

template <typename T>
void run_softmax(const Array& in, int dim, bool log, const Array& out) {
  const loops::DimSplit split = loops::split_at(in.shape, dim);
  const T* x = in.data<T>();
  T* y = out.data<T>();
  const int64_t size = split.size, inner = split.inner;
  if (inner == 1) {
    parallel_for(split.outer, std::max<int64_t>(1, kGrain / size), [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        softmax_row(x + row * size, y + row * size, size, log);
      }
    });
    return;
  }
  const int64_t block_width =
      std::min(inner, std::max<int64_t>(2 * simd::kLanes<T>, kColumnBlockElements / size));
  const int64_t blocks = (inner + block_width - 1) / block_width;
  parallel_for(split.outer * blocks, std::max<int64_t>(1, kGrain / (size * block_width)),
               [&](int64_t begin, int64_t end) {
                 auto scratch = std::make_unique_for_overwrite<T[]>(2 * block_width);
                 for (int64_t item = begin; item < end; ++item) {
                   const int64_t outer = item / blocks, first = (item % blocks) * block_width;
                   const int64_t offset = outer * size * inner + first;
                   softmax_columns(x + offset, y + offset, size,
                                   std::min(block_width, inner - first), inner, log, scratch.get(),
                                   scratch.get() + block_width);
                 }
               });
}

// Running sums: floats accumulate in double (as PyTorch's CPU cumsum does),
// integers in wrapping uint64_t.
template <typename T>
void run_cumsum(const Array& in, int dim, const Array& out) {
  constexpr bool kFloat = std::is_floating_point_v<T>;
  using Out = std::conditional_t<kFloat, T, int64_t>;
  using Acc = std::conditional_t<kFloat, double, uint64_t>;
  LAZYLUA_ASSERT(out.dtype == dtype_of<Out>());
  auto widen = [](T value) {
    if constexpr (kFloat) {
      return static_cast<double>(value);
    } else {
      return static_cast<uint64_t>(static_cast<int64_t>(value));
    }
  };
  const loops::DimSplit split = loops::split_at(in.shape, dim);
  const T* x = in.data<T>();
  Out* y = out.data<Out>();
  const int64_t size = split.size, inner = split.inner;
  if (inner == 1) {
    parallel_for(split.outer, std::max<int64_t>(1, kGrain / size), [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        Acc acc = 0;
        for (int64_t i = row * size; i < (row + 1) * size; ++i) {
          acc += widen(x[i]);
          y[i] = static_cast<Out>(acc);
        }
      }
    });
    return;
  }
  const int64_t block_width = std::min(inner, std::max<int64_t>(64, kColumnBlockElements / size));
  const int64_t blocks = (inner + block_width - 1) / block_width;
  parallel_for(split.outer * blocks, std::max<int64_t>(1, kGrain / (size * block_width)),
               [&](int64_t begin, int64_t end) {
                 auto acc = std::make_unique_for_overwrite<Acc[]>(block_width);
                 for (int64_t item = begin; item < end; ++item) {
                   const int64_t outer = item / blocks, first = (item % blocks) * block_width;
                   const int64_t width = std::min(block_width, inner - first);
                   std::fill(acc.get(), acc.get() + width, Acc(0));
                   for (int64_t r = 0; r < size; ++r) {
                     const int64_t offset = (outer * size + r) * inner + first;
                     for (int64_t j = 0; j < width; ++j) {
                       acc[j] += widen(x[offset + j]);
                       y[offset + j] = static_cast<Out>(acc[j]);
                     }
                   }
                 }
               });
}

}  // namespace

void softmax_kernel(const Array& in, int dim, bool log, const Array& out) {
  LAZYLUA_ASSERT(is_floating(in.dtype) && out.dtype == in.dtype && out.shape == in.shape &&
                 out.is_contiguous());
  if (in.numel() == 0) return;
  const Array source = loops::contiguous_copy(in, log ? "log_softmax" : "softmax");
  if (in.dtype == DType::f32) {
    run_softmax<float>(source, dim, log, out);
  } else {
    run_softmax<double>(source, dim, log, out);
  }
}

void cumsum_kernel(const Array& in, int dim, const Array& out) {
  LAZYLUA_ASSERT(out.shape == in.shape && out.is_contiguous());
  if (in.numel() == 0) return;
  const Array source = loops::contiguous_copy(in, "cumsum");
  visit_dtype(in.dtype, [&](auto zero) { run_cumsum<decltype(zero)>(source, dim, out); });
}

}  // namespace lazylua
