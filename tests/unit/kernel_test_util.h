// kernel_test_util.h - arrays with chosen values and memory layouts, read
// back element by element, for the reduce/matmul/index/random kernel tests.
//
// The references in those tests are naive loops over logical positions in
// double precision; these helpers are deliberately simple (no kernels).
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "tensor/array.h"

namespace lazylua::test_util {

inline std::vector<int64_t> unravel(int64_t linear, const Shape& shape) {
  std::vector<int64_t> index(shape.rank());
  for (int d = shape.rank() - 1; d >= 0; --d) {
    index[d] = linear % shape[d];
    linear /= shape[d];
  }
  return index;
}

inline int64_t offset_of(const Array& a, const std::vector<int64_t>& index) {
  int64_t offset = a.offset;
  for (int d = 0; d < a.rank(); ++d) offset += index[d] * a.strides[d];
  return offset;
}

// The element at a buffer offset (in elements), as a double.
inline double get(const Array& a, int64_t offset) {
  void* base = a.buffer->data();
  switch (a.dtype) {
    case DType::boolean:
      return static_cast<bool*>(base)[offset] ? 1 : 0;
    case DType::i32:
      return static_cast<int32_t*>(base)[offset];
    case DType::i64:
      return static_cast<double>(static_cast<int64_t*>(base)[offset]);
    case DType::f32:
      return static_cast<float*>(base)[offset];
    case DType::f64:
      return static_cast<double*>(base)[offset];
  }
  return 0;
}

inline void set(const Array& a, int64_t offset, double value) {
  void* base = a.buffer->data();
  switch (a.dtype) {
    case DType::boolean:
      static_cast<bool*>(base)[offset] = value != 0;
      break;
    case DType::i32:
      static_cast<int32_t*>(base)[offset] = static_cast<int32_t>(value);
      break;
    case DType::i64:
      static_cast<int64_t*>(base)[offset] = static_cast<int64_t>(value);
      break;
    case DType::f32:
      static_cast<float*>(base)[offset] = static_cast<float>(value);
      break;
    case DType::f64:
      static_cast<double*>(base)[offset] = value;
      break;
  }
}

inline double at(const Array& a, const std::vector<int64_t>& index) {
  return get(a, offset_of(a, index));
}

// All elements in row-major logical order.
inline std::vector<double> values(const Array& a) {
  std::vector<double> result(a.numel());
  for (int64_t i = 0; i < a.numel(); ++i) result[i] = at(a, unravel(i, a.shape));
  return result;
}

inline Array make(const Shape& shape, DType dtype, const std::vector<double>& data) {
  Array a = Array::empty(shape, dtype);
  for (int64_t i = 0; i < a.numel(); ++i) set(a, i, data[i]);
  return a;
}

// Random values: floats in [low, high), integers in [-5, 5], bools 0/1.
inline Array random_array(const Shape& shape, DType dtype, uint32_t seed, double low = -1,
                          double high = 1) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<double> real(low, high);
  std::uniform_int_distribution<int> integer(-5, 5), bit(0, 1);
  Array a = Array::empty(shape, dtype);
  for (int64_t i = 0; i < a.numel(); ++i) {
    double value = dtype == DType::boolean ? bit(engine)
                   : is_integral(dtype)    ? integer(engine)
                                           : real(engine);
    set(a, i, value);
  }
  return a;
}

enum class Layout {
  contiguous,
  transposed,  // dims stored in reverse order: every stride differs from row-major
  padded,      // every dim has a gap: strides twice the contiguous ones, plus an offset
};
inline const char* layout_name(Layout layout) {
  switch (layout) {
    case Layout::contiguous:
      return "contiguous";
    case Layout::transposed:
      return "transposed";
    case Layout::padded:
      return "padded";
  }
  return "?";
}
constexpr Layout kLayouts[] = {Layout::contiguous, Layout::transposed, Layout::padded};

// The same logical values as `a`, stored with another layout.
inline Array with_layout(const Array& a, Layout layout) {
  const int rank = a.rank();
  Shape storage_shape;
  Strides strides = Strides::filled(rank, 0);
  int64_t offset = 0;
  if (layout == Layout::contiguous) {
    storage_shape = a.shape;
    strides = contiguous_strides(a.shape);
  } else if (layout == Layout::transposed) {
    for (int d = rank - 1; d >= 0; --d) storage_shape.push_back(a.shape[d]);
    Strides storage_strides = contiguous_strides(storage_shape);
    for (int d = 0; d < rank; ++d) strides[d] = storage_strides[rank - 1 - d];
  } else {
    for (int d = 0; d < rank; ++d) storage_shape.push_back(2 * a.shape[d] + 1);
    Strides storage_strides = contiguous_strides(storage_shape);
    for (int d = 0; d < rank; ++d) {
      strides[d] = 2 * storage_strides[d];
      offset += storage_strides[d];  // start at [1, 1, ...]
    }
  }
  Array storage = Array::empty(storage_shape, a.dtype);
  for (int64_t i = 0; i < storage.numel(); ++i) set(storage, i, 7);  // poison the gaps
  Array view = storage.view_as(a.shape, strides, offset);
  for (int64_t i = 0; i < a.numel(); ++i) {
    std::vector<int64_t> index = unravel(i, a.shape);
    set(view, offset_of(view, index), at(a, index));
  }
  return view;
}

// x and y agree to a relative tolerance (NaN agrees with NaN, inf with inf).
inline bool close(double x, double y, double tolerance) {
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
  if (std::isinf(x) || std::isinf(y)) return x == y;
  return std::fabs(x - y) <= tolerance * std::max(1.0, std::max(std::fabs(x), std::fabs(y)));
}

inline double tolerance_for(DType dtype) {
  return dtype == DType::f32 ? 2e-5 : dtype == DType::f64 ? 1e-12 : 0;
}

}  // namespace lazylua::test_util
