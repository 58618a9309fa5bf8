// elementwise_loops.h - private to the elementwise kernels: how N arrays of
// one shape (after broadcasting) are walked, row by row, on the thread pool.
//
// A LoopPlan describes the walk over the output's elements. Operand 0 is the
// output, which also gives the iteration shape; the other operands broadcast
// to it (their missing or size-1 dims get stride 0). Building the plan
//   1. drops dims of extent 1 (they do not move any pointer),
//   2. orders the dims by the output's strides, largest first, so that a
//      transposed output view is still written in memory order,
//   3. merges neighbouring dims that are one contiguous run for every operand
//      ([N, M] contiguous becomes [N*M]; a row broadcast [N, M] + [M] stays
//      [N, M] with strides (M, 1) and (0, 1)).
// After that the innermost dim is the long, tight loop. Each operand's stride
// along it is either its element size (contiguous), 0 (a value repeated along
// the row, e.g. a scalar or a column broadcast [N, M] + [N, 1]) or anything
// else (a strided view); kernels pick a specialised inner loop from those.
//
// for_each_row() walks any range [begin, end) of the flattened element index
// space, so parallel_for can split the work anywhere, even inside a row.
#pragma once

#include <algorithm>
#include <cstdint>

#include "../array.h"
#include "../checked.h"
#include "../thread_pool.h"

namespace lazylua::elementwise {

// The type a kernel reads and writes for each dtype. bool is handled as a
// byte: a host buffer may lend bytes other than 0 and 1 for "true", and
// reading those through a C++ bool would be undefined behaviour. Kernels
// always write 0 or 1.
template <typename T>
struct StorageOf {
  using type = T;
};
template <>
struct StorageOf<bool> {
  using type = uint8_t;
};
template <typename T>
using Storage = typename StorageOf<T>::type;

// Calls f(T{}) with the storage type of dtype t (uint8_t for bool).
template <typename F>
decltype(auto) visit_storage(DType t, F&& f) {
  return visit_dtype(t,
                     [&](auto value) -> decltype(auto) { return f(Storage<decltype(value)>{}); });
}

template <int N>
struct LoopPlan {
  int rank = 0;  // >= 1 once built
  int64_t numel = 0;
  int64_t extent[kMaxDims];
  int64_t stride[kMaxDims][N];  // in bytes; dim rank-1 is the innermost
  char* data[N];

  const int64_t* inner_strides() const { return stride[rank - 1]; }
};

// Builds the plan for arrays[0] (the output) and the arrays that broadcast to
// it. Returns false when there is nothing to do (zero elements).
template <int N>
bool make_plan(LoopPlan<N>& plan, const Array* const (&arrays)[N]) {
  const Shape& shape = arrays[0]->shape;
  const int rank = shape.rank();
  int64_t element_bytes[N];
  for (int k = 0; k < N; ++k) {
    plan.data[k] = static_cast<char*>(arrays[k]->raw_data());
    element_bytes[k] = dtype_size(arrays[k]->dtype);
    LAZYLUA_ASSERT(arrays[k]->rank() <= rank);
  }

  // 1. Keep the dims of extent > 1, with each operand's stride in bytes.
  int64_t numel = 1;
  int kept = 0;
  for (int d = 0; d < rank; ++d) {
    const int64_t extent = shape[d];
    if (extent == 1) continue;
    if (extent == 0) return false;
    // Arrays are validated when made (checked_numel), so this cannot fail
    // unless a view was made wrong; then an Error beats a wild pointer.
    numel = checked_mul(numel, extent, "elementwise");
    plan.extent[kept] = extent;
    for (int k = 0; k < N; ++k) {
      const Array& array = *arrays[k];
      const int dim = d - (rank - array.rank());
      int64_t stride = 0;
      if (dim >= 0 && array.shape[dim] != 1) {
        LAZYLUA_ASSERT(array.shape[dim] == extent);
        stride = checked_mul(array.strides[dim], element_bytes[k], "elementwise");
      }
      plan.stride[kept][k] = stride;
    }
    ++kept;
  }
  plan.numel = numel;
  if (kept == 0) {  // a single element
    plan.rank = 1;
    plan.extent[0] = 1;
    for (int k = 0; k < N; ++k) plan.stride[0][k] = element_bytes[k];
    return true;
  }

  // 2. Order the dims by the output's stride, largest first (insertion sort:
  // at most 8 dims, and usually already in order).
  for (int i = 1; i < kept; ++i) {
    for (int j = i; j > 0 && plan.stride[j - 1][0] < plan.stride[j][0]; --j) {
      std::swap(plan.extent[j - 1], plan.extent[j]);
      for (int k = 0; k < N; ++k) std::swap(plan.stride[j - 1][k], plan.stride[j][k]);
    }
  }

  // 3. Merge dim d into the (outer) dim before it when, for every operand,
  // stepping the outer dim once equals stepping the inner one extent times.
  int merged = 0;
  for (int d = 1; d < kept; ++d) {
    bool can_merge = true;
    for (int k = 0; k < N; ++k) {
      can_merge &= plan.stride[merged][k] == plan.stride[d][k] * plan.extent[d];
    }
    if (can_merge) {
      plan.extent[merged] *= plan.extent[d];
      for (int k = 0; k < N; ++k) plan.stride[merged][k] = plan.stride[d][k];
    } else {
      ++merged;
      plan.extent[merged] = plan.extent[d];
      for (int k = 0; k < N; ++k) plan.stride[merged][k] = plan.stride[d][k];
    }
  }
  plan.rank = merged + 1;
  return true;
}

// Calls row(pointers, count) for each run of the flattened elements
// [begin, end) that lies along the innermost dim; pointers[k] addresses
// operand k's first element of the run, and consecutive elements are
// plan.inner_strides()[k] bytes apart.
template <int N, typename Row>
void for_each_row(const LoopPlan<N>& plan, int64_t begin, int64_t end, Row&& row) {
  const int inner_dim = plan.rank - 1;
  const int64_t* inner_stride = plan.stride[inner_dim];
  const int64_t inner_extent = plan.extent[inner_dim];

  // Position of `begin`: its row's index along each outer dim, and column.
  // (row() has a single call site below, so that its loops are inlined once.)
  int64_t index[kMaxDims];
  int64_t column = begin;
  if (inner_dim > 0) {
    int64_t row_number = begin / inner_extent;
    column = begin % inner_extent;
    for (int d = inner_dim - 1; d >= 0; --d) {
      index[d] = row_number % plan.extent[d];
      row_number /= plan.extent[d];
    }
  }
  char* pointers[N];
  for (int k = 0; k < N; ++k) {
    pointers[k] = plan.data[k] + column * inner_stride[k];
    for (int d = 0; d < inner_dim; ++d) pointers[k] += index[d] * plan.stride[d][k];
  }

  int64_t remaining = end - begin;
  for (;;) {
    const int64_t count = std::min(inner_extent - column, remaining);
    row(pointers, count);
    remaining -= count;
    if (remaining <= 0) return;
    // Back to the start of the row, then step the outer dims like an odometer.
    for (int k = 0; k < N; ++k) pointers[k] -= column * inner_stride[k];
    column = 0;
    for (int d = inner_dim - 1; d >= 0; --d) {
      if (++index[d] < plan.extent[d]) {
        for (int k = 0; k < N; ++k) pointers[k] += plan.stride[d][k];
        break;
      }
      index[d] = 0;
      for (int k = 0; k < N; ++k) pointers[k] -= (plan.extent[d] - 1) * plan.stride[d][k];
    }
  }
}

// Runs row() over the whole plan, on the thread pool when it is large.
// `grain` is the number of elements below which a split does not pay: lower
// it for ops that cost much more than a load and a store per element.
template <int N, typename Row>
void run_rows(const LoopPlan<N>& plan, int64_t grain, Row&& row) {
  parallel_for(plan.numel, grain,
               [&](int64_t begin, int64_t end) { for_each_row(plan, begin, end, row); });
}

// Ops that call scalar libm functions or divide integers cost tens of ns per
// element: splitting pays off much earlier than for an add.
constexpr int64_t kExpensiveGrain = kElementwiseGrain / 16;

// How the operands of a row are laid out, decided once per plan.
enum class RowKind : uint8_t {
  contiguous,       // every operand steps by its element size
  first_repeated,   // operand 1 has stride 0, the others are contiguous
  second_repeated,  // operand 2 has stride 0, the others are contiguous
  strided,          // anything else
};

template <int N>
RowKind row_kind(const LoopPlan<N>& plan, const int64_t (&element_bytes)[N]) {
  const int64_t* stride = plan.inner_strides();
  bool contiguous = true;
  for (int k = 0; k < N; ++k) contiguous &= stride[k] == element_bytes[k];
  if (contiguous) return RowKind::contiguous;
  if constexpr (N >= 2) {
    bool others_contiguous = true;
    for (int k = 0; k < N; ++k) others_contiguous &= k == 1 || stride[k] == element_bytes[k];
    if (others_contiguous && stride[1] == 0) return RowKind::first_repeated;
  }
  if constexpr (N >= 3) {
    bool others_contiguous = true;
    for (int k = 0; k < N; ++k) others_contiguous &= k == 2 || stride[k] == element_bytes[k];
    if (others_contiguous && stride[2] == 0) return RowKind::second_repeated;
  }
  return RowKind::strided;
}

// Reads the element `index` strides past `base` (strides in bytes).
template <typename T>
inline T load_at(const char* base, int64_t index, int64_t stride) {
  return *reinterpret_cast<const T*>(base + index * stride);
}

// Writes the element `index` strides past `base` (strides in bytes).
template <typename T>
inline void store_at(char* base, int64_t index, int64_t stride, T value) {
  *reinterpret_cast<T*>(base + index * stride) = value;
}

// out[i] = function(in[i]) over the plan of (out, in). Rows are either
// contiguous on both sides (the vectorized loop), a repeated input (computed
// once), or strided.
template <typename In, typename Out, typename Function>
void unary_loop(const Array& in, const Array& out, int64_t grain, Function function) {
  LoopPlan<2> plan;
  const Array* const arrays[2] = {&out, &in};
  if (!make_plan(plan, arrays)) return;
  const int64_t out_stride = plan.inner_strides()[0];
  const int64_t in_stride = plan.inner_strides()[1];
  run_rows(plan, grain, [&](char* const* pointers, int64_t count) {
    const Function f = function;  // a local copy: stores cannot alias it
    if (out_stride == sizeof(Out) && in_stride == sizeof(In)) {
      Out* output = reinterpret_cast<Out*>(pointers[0]);
      const In* input = reinterpret_cast<const In*>(pointers[1]);
      for (int64_t i = 0; i < count; ++i) output[i] = f(input[i]);
    } else if (out_stride == sizeof(Out) && in_stride == 0) {
      Out* output = reinterpret_cast<Out*>(pointers[0]);
      const Out value = f(*reinterpret_cast<const In*>(pointers[1]));
      for (int64_t i = 0; i < count; ++i) output[i] = value;
    } else {
      for (int64_t i = 0; i < count; ++i) {
        store_at<Out>(pointers[0], i, out_stride, f(load_at<In>(pointers[1], i, in_stride)));
      }
    }
  });
}

}  // namespace lazylua::elementwise
