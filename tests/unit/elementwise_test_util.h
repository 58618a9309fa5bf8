// elementwise_test_util.h - helpers shared by the elementwise kernel tests:
// arrays of any layout built and read by hand (broadcasting done here, not
// by the kernels' loop plans), and value comparisons.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "tensor/array.h"
#include "tensor/kernels/elementwise.h"

namespace lazylua::elementwise_test {

// ---- Arrays built and read by hand ----

// The storage type of each dtype in these tests (bool as a byte).
template <typename T>
constexpr DType dtype_for() {
  if constexpr (std::is_same_v<T, uint8_t>)
    return DType::boolean;
  else
    return dtype_of<T>();
}

template <typename F>
void for_each_index(const Shape& shape, F&& f) {
  if (numel(shape) == 0) return;
  int64_t index[kMaxDims] = {};
  for (;;) {
    f(static_cast<const int64_t*>(index));
    int d = shape.rank() - 1;
    for (; d >= 0; --d) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

// Element offset of `array` at the out-index `index` of a shape of rank
// `out_rank`, broadcasting as NumPy does (dims aligned at the right, extent-1
// dims stay at 0).
inline int64_t element_offset(const Array& array, const int64_t* index, int out_rank) {
  int64_t offset = array.offset;
  const int lead = out_rank - array.rank();
  for (int d = 0; d < array.rank(); ++d) {
    if (array.shape[d] != 1) offset += index[lead + d] * array.strides[d];
  }
  return offset;
}

template <typename T>
T& element(const Array& array, const int64_t* index, int out_rank) {
  return static_cast<T*>(array.buffer->data())[element_offset(array, index, out_rank)];
}

enum class Layout { contiguous, transposed, padded };

// An array of logical shape `shape` whose memory layout is `layout`:
// transposed (the last two dims swapped in memory) or padded (the last dim
// is a narrowed window of a wider buffer, the rest of which holds a sentinel).
inline Array make_array(const Shape& shape, DType dtype, Layout layout) {
  const int rank = shape.rank();
  if (layout == Layout::transposed && rank >= 2) {
    Shape swapped = shape;
    std::swap(swapped[rank - 1], swapped[rank - 2]);
    return Array::empty(swapped, dtype).transposed(rank - 2, rank - 1);
  }
  if (layout == Layout::padded && rank >= 1) {
    Shape wider = shape;
    wider[rank - 1] += 3;
    Array base = Array::empty(wider, dtype);
    std::memset(base.buffer->data(), 0x5a, base.buffer->nbytes());
    return base.narrowed(rank - 1, 1, shape[rank - 1]);
  }
  return Array::empty(shape, dtype);
}

// True when every byte of the buffer outside the array's elements still
// holds the sentinel 0x5a of make_array.
inline bool padding_untouched(const Array& array) {
  std::vector<bool> inside(array.buffer->nbytes(), false);
  const int size = dtype_size(array.dtype);
  for_each_index(array.shape, [&](const int64_t* index) {
    const int64_t offset = element_offset(array, index, array.rank());
    for (int k = 0; k < size; ++k) inside[offset * size + k] = true;
  });
  const auto* bytes = static_cast<const uint8_t*>(array.buffer->data());
  for (size_t i = 0; i < inside.size(); ++i) {
    if (!inside[i] && bytes[i] != 0x5a) return false;
  }
  return true;
}

template <typename T>
T random_element(std::mt19937_64& rng, bool specials) {
  if constexpr (std::is_same_v<T, uint8_t>) {
    return static_cast<uint8_t>(rng() % 2);
  } else if constexpr (std::is_integral_v<T>) {
    switch (rng() % 10) {
      case 0:
        return std::numeric_limits<T>::min();
      case 1:
        return std::numeric_limits<T>::max();
      case 2:
        return -1;
      case 3:
        return static_cast<T>(rng());  // anything
      default:
        return static_cast<T>(static_cast<int64_t>(rng() % 41) - 20);
    }
  } else {
    if (specials && rng() % 16 == 0) {
      const T special[] = {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(),
                           -std::numeric_limits<T>::infinity(), T{0}, T(-0.0)};
      return special[rng() % 5];
    }
    return static_cast<T>(std::uniform_real_distribution<double>(-10, 10)(rng));
  }
}

template <typename T>
void fill_random(const Array& array, std::mt19937_64& rng, bool specials,
                 const std::function<T(T)>& adjust = nullptr) {
  for_each_index(array.shape, [&](const int64_t* index) {
    T value = random_element<T>(rng, specials);
    if (adjust) value = adjust(value);
    element<T>(array, index, array.rank()) = value;
  });
}

template <typename T>
Array from_values(const Shape& shape, const std::vector<T>& values) {
  Array array = Array::empty(shape, dtype_for<T>());
  EXPECT_EQ(static_cast<size_t>(array.numel()), values.size());
  std::memcpy(array.raw_data(), values.data(), values.size() * sizeof(T));
  return array;
}

template <typename T>
std::vector<T> to_values(const Array& array) {
  std::vector<T> values;
  for_each_index(array.shape, [&](const int64_t* index) {
    values.push_back(element<T>(array, index, array.rank()));
  });
  return values;
}

// Equal, with NaN equal to NaN (of any payload) and -0 equal to 0.
template <typename T>
bool same_value(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  }
  return a == b;
}

template <typename T>
std::string show(T value) {
  if constexpr (std::is_same_v<T, uint8_t>)
    return std::to_string(static_cast<int>(value));
  else if constexpr (std::is_integral_v<T>)
    return std::to_string(value);
  else {
    char text[64];
    std::snprintf(text, sizeof text, "%.9g", static_cast<double>(value));
    return text;
  }
}

template <typename T>
T wrap(__int128 value) {
  return static_cast<T>(static_cast<std::make_unsigned_t<T>>(value));
}

// Relative error, with results below the smallest normal measured against
// it (subnormal results carry absolute, not relative, precision).
template <typename T>
double relative_error(T got, T expected) {
  if (std::isnan(expected) || std::isnan(got))
    return std::isnan(expected) == std::isnan(got) ? 0 : 1;
  if (std::isinf(expected) || std::isinf(got)) return expected == got ? 0 : 1;
  const double scale = std::max<double>(std::fabs(static_cast<double>(expected)),
                                        static_cast<double>(std::numeric_limits<T>::min()));
  return std::fabs(static_cast<double>(got) - static_cast<double>(expected)) / scale;
}

}  // namespace lazylua::elementwise_test
