// shape.cpp - shapes, strides, broadcasting and dimension arithmetic.
#include "shape.h"

#include <algorithm>

#include "checked.h"

namespace lazylua {

Dims::Dims(std::initializer_list<int64_t> values) {
  for (int64_t value : values) push_back(value);
}

Dims Dims::filled(int rank, int64_t value) {
  Dims dims;
  dims.resize(rank, value);
  return dims;
}

void Dims::push_back(int64_t value) {
  if (rank_ == kMaxDims) fail("tensors have at most {} dimensions", kMaxDims);
  values_[rank_++] = value;
}

void Dims::insert(int index, int64_t value) {
  if (rank_ == kMaxDims) fail("tensors have at most {} dimensions", kMaxDims);
  LAZYLUA_ASSERT(index >= 0 && index <= rank_);
  std::copy_backward(values_ + index, values_ + rank_, values_ + rank_ + 1);
  values_[index] = value;
  rank_++;
}

void Dims::erase(int index) {
  LAZYLUA_ASSERT(index >= 0 && index < rank_);
  std::copy(values_ + index + 1, values_ + rank_, values_ + index);
  rank_--;
}

void Dims::resize(int rank, int64_t fill) {
  if (rank > kMaxDims) fail("tensors have at most {} dimensions", kMaxDims);
  LAZYLUA_ASSERT(rank >= 0);
  for (int i = rank_; i < rank; i++) values_[i] = fill;
  rank_ = rank;
}

bool operator==(const Dims& a, const Dims& b) {
  return a.rank_ == b.rank_ && std::equal(a.begin(), a.end(), b.begin());
}

int64_t numel(const Shape& shape) {
  int64_t count = 1;
  for (int64_t extent : shape) {
    if (mul_overflows(count, extent, &count)) {
      // checked_numel admits every shape a tensor can have, so only an empty
      // one with huge other extents gets here, e.g. [2^40, 2^40, 0].
      for (int64_t other : shape) {
        if (other == 0) return 0;
      }
      fail("shape {} has too many elements", shape_string(shape));
    }
  }
  return count;
}

int64_t checked_numel(const Shape& shape, const char* op) {
  for (int64_t extent : shape) {
    if (extent < 0) fail("{}: negative size {} in shape {}", op, extent, shape_string(shape));
  }
  // The nonzero extents are bounded even when another one is 0: strides,
  // offsets and loop plans multiply them, empty or not.
  int64_t nonzero = 1;
  bool empty = false;
  for (int64_t extent : shape) {
    if (extent == 0) {
      empty = true;
      continue;
    }
    if (mul_overflows(nonzero, extent, &nonzero) || nonzero > kMaxElements) {
      fail("{}: shape {} has too many elements (the limit is 2^40)", op, shape_string(shape));
    }
  }
  return empty ? 0 : nonzero;
}

Strides contiguous_strides(const Shape& shape) {
  Strides strides = Strides::filled(shape.rank(), 1);
  for (int i = shape.rank() - 2; i >= 0; i--) {
    strides[i] = checked_mul(strides[i + 1], std::max<int64_t>(shape[i + 1], 1), "strides");
  }
  return strides;
}

std::string shape_string(const Shape& shape) {
  std::string text = "[";
  for (int i = 0; i < shape.rank(); i++) {
    if (i > 0) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

std::string shape_footer_string(const Shape& shape) {
  if (shape.empty()) return "scalar";
  std::string text;
  for (int i = 0; i < shape.rank(); i++) {
    if (i > 0) text += "x";
    text += std::to_string(shape[i]);
  }
  return text;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  if (a == b) return a;
  const int rank = std::max(a.rank(), b.rank());
  Shape result = Shape::filled(rank, 1);
  for (int i = 0; i < rank; i++) {
    const int ia = a.rank() - rank + i, ib = b.rank() - rank + i;
    const int64_t ea = ia >= 0 ? a[ia] : 1, eb = ib >= 0 ? b[ib] : 1;
    if (ea != eb && ea != 1 && eb != 1) {
      fail("{}: shapes {} and {} do not broadcast (dimension {}: {} vs {})", op, shape_string(a),
           shape_string(b), i + 1, ea, eb);
    }
    result[i] = ea == 1 ? eb : ea;
  }
  return result;
}

int normalize_dim(int64_t lua_dim, int rank, const char* op, int rank_extra) {
  const int64_t limit = rank + rank_extra;
  const int64_t dim = lua_dim < 0 ? lua_dim + limit : lua_dim - 1;
  if (lua_dim == 0 || dim < 0 || dim >= limit) {
    if (limit == 0) fail("{}: dimension {} out of range (the tensor is a scalar)", op, lua_dim);
    fail("{}: dimension {} out of range (expected 1..{} or -{}..-1)", op, lua_dim, limit, limit);
  }
  return static_cast<int>(dim);
}

int64_t normalize_index(int64_t lua_index, int64_t size, const char* op) {
  const int64_t index = lua_index < 0 ? lua_index + size : lua_index - 1;
  if (lua_index == 0 || index < 0 || index >= size) {
    fail("{}: index {} out of range for size {} (indices start at 1)", op, lua_index, size);
  }
  return index;
}

}  // namespace lazylua
