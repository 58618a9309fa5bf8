// sort.cpp - argsort (sort.h): each line along the dim is copied into a
// scratch row of (value, position) pairs, sorted with std::stable_sort, and
// its positions written out. Lines run in parallel; eager mode and compiled
// plans (a library step) both call this kernel, so the tiers agree.
#include "sort.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "../thread_pool.h"
#include "loops.h"

namespace lazylua {
namespace {

constexpr int64_t kGrain = 16384;

template <typename T>
bool is_nan(T value) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(value);
  } else {
    return false;
  }
}

// A strict weak order with NaN above everything (NaNs equal to each other).
template <typename T>
bool ascending_before(T a, T b) {
  if (is_nan(a)) return false;
  if (is_nan(b)) return true;
  return a < b;
}

template <typename T>
bool descending_before(T a, T b) {
  if (is_nan(b)) return false;
  if (is_nan(a)) return true;
  return b < a;
}

template <typename T>
void run_argsort(const Array& in, int dim, bool descending, const Array& out) {
  const loops::DimSplit split = loops::split_at(in.shape, dim);
  const T* x = in.data<T>();
  int64_t* y = out.data<int64_t>();
  const int64_t size = split.size, inner = split.inner;
  struct Entry {
    T value;
    int64_t position;
  };
  parallel_for(split.outer * inner, std::max<int64_t>(1, kGrain / std::max<int64_t>(size, 1)),
               [&](int64_t begin, int64_t end) {
                 std::vector<Entry> row(static_cast<size_t>(size));
                 for (int64_t line = begin; line < end; ++line) {
                   const int64_t outer = line / inner, column = line % inner;
                   const int64_t first = outer * size * inner + column;
                   for (int64_t i = 0; i < size; ++i) row[i] = {x[first + i * inner], i};
                   if (descending) {
                     std::stable_sort(row.begin(), row.end(), [](const Entry& a, const Entry& b) {
                       return descending_before(a.value, b.value);
                     });
                   } else {
                     std::stable_sort(row.begin(), row.end(), [](const Entry& a, const Entry& b) {
                       return ascending_before(a.value, b.value);
                     });
                   }
                   for (int64_t i = 0; i < size; ++i) y[first + i * inner] = row[i].position + 1;
                 }
               });
}

}  // namespace

void argsort_kernel(const Array& in, int dim, bool descending, const Array& out) {
  LAZYLUA_ASSERT(out.dtype == DType::i64 && out.shape == in.shape && out.is_contiguous());
  if (in.numel() == 0) return;
  if (in.rank() == 0) {
    out.data<int64_t>()[0] = 1;
    return;
  }
  const Array source = loops::contiguous_copy(in, "argsort");
  visit_dtype(in.dtype,
              [&](auto zero) { run_argsort<decltype(zero)>(source, dim, descending, out); });
}

}  // namespace lazylua
