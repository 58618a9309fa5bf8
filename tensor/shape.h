// shape.h - shapes, strides, broadcasting and dimension arithmetic.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "error.h"

namespace lazylua {

// Tensors have at most this many dimensions; a deeper request is an Error.
constexpr int kMaxDims = 8;

// The largest tensor anyone may ask for (2^40 elements, 4 TiB of f32): a
// request beyond it is an Error at once instead of an out-of-memory kill.
constexpr int64_t kMaxElements = int64_t{1} << 40;

// A fixed-capacity list of extents (or of strides). Stored inline so that
// making a tensor allocates nothing for its shape.
class Dims {
 public:
  Dims() = default;
  Dims(std::initializer_list<int64_t> values);
  static Dims filled(int rank, int64_t value);

  int rank() const { return rank_; }
  bool empty() const { return rank_ == 0; }
  int64_t operator[](int i) const { return values_[i]; }
  int64_t& operator[](int i) { return values_[i]; }
  const int64_t* begin() const { return values_; }
  const int64_t* end() const { return values_ + rank_; }
  int64_t* begin() { return values_; }
  int64_t* end() { return values_ + rank_; }
  int64_t back() const { return values_[rank_ - 1]; }

  void push_back(int64_t value);  // throws Error past kMaxDims
  void insert(int index, int64_t value);
  void erase(int index);
  void resize(int rank, int64_t fill = 0);

  friend bool operator==(const Dims& a, const Dims& b);
  friend bool operator!=(const Dims& a, const Dims& b) { return !(a == b); }

 private:
  int64_t values_[kMaxDims] = {};
  int rank_ = 0;
};

using Shape = Dims;
using Strides = Dims;

// Product of the extents; 1 for a scalar (rank 0). Throws Error if it does
// not fit in int64_t (no shape that passed checked_numel does that).
int64_t numel(const Shape& shape);

// Checks every extent is >= 0 and the product of the nonzero ones is at
// most kMaxElements (so that strides and offsets computed from the shape
// cannot overflow even for an empty tensor); names `op` in the error.
// Returns the element count. Every Array's shape passes it.
int64_t checked_numel(const Shape& shape, const char* op);

// Row-major strides (in elements) of a contiguous tensor of this shape.
Strides contiguous_strides(const Shape& shape);

// "[2, 3]": how shapes appear in every message.
std::string shape_string(const Shape& shape);
// "2x3" (Torch7's footer style); "scalar" for rank 0.
std::string shape_footer_string(const Shape& shape);

// NumPy broadcasting of two shapes; throws Error naming `op` and both shapes
// when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// Turns a 1-based Lua dimension (negative counts from the end: -1 is the
// last) into a 0-based one for a tensor of `rank` dims. `rank_extra` widens
// the accepted range, e.g. 1 for unsqueeze, which may add a dim at the end.
// Throws Error naming `op` when out of range.
int normalize_dim(int64_t lua_dim, int rank, const char* op, int rank_extra = 0);

// Turns a 1-based Lua index along an extent of `size` (negative counts from
// the end) into a 0-based one. Throws Error naming `op` when out of range.
int64_t normalize_index(int64_t lua_index, int64_t size, const char* op);

}  // namespace lazylua
