// checked.h - overflow-checked integer arithmetic for sizes, offsets and
// strides.
//
// Extents, indices and lengths come from scripts, files and hosts, and any
// of them may be math.maxinteger. Signed overflow is undefined behaviour,
// and a wrapped sum that passes a bounds check (`start + length > size`)
// makes a view that reads and writes outside its buffer. Every computation
// that combines such values goes through these helpers (the compiler's
// overflow builtins), so a bad input is an Error naming the op instead.
#pragma once

#include <cstdint>

#include "error.h"

namespace lazylua {

// True when a + b (a - b, a * b) does not fit in int64_t; otherwise false
// with the result in *out.
[[nodiscard]] inline bool add_overflows(int64_t a, int64_t b, int64_t* out) {
  return __builtin_add_overflow(a, b, out);
}
[[nodiscard]] inline bool sub_overflows(int64_t a, int64_t b, int64_t* out) {
  return __builtin_sub_overflow(a, b, out);
}
[[nodiscard]] inline bool mul_overflows(int64_t a, int64_t b, int64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}

// a + b (a * b), or an Error naming `op` when it does not fit.
inline int64_t checked_add(int64_t a, int64_t b, const char* op) {
  int64_t result;
  if (add_overflows(a, b, &result)) fail("{}: {} + {} is too large (integer overflow)", op, a, b);
  return result;
}
inline int64_t checked_mul(int64_t a, int64_t b, const char* op) {
  int64_t result;
  if (mul_overflows(a, b, &result)) fail("{}: {} * {} is too large (integer overflow)", op, a, b);
  return result;
}

// True when [start, start + length) lies inside [0, size), with length >= 0
// (an empty range may start at size).
inline bool range_fits(int64_t start, int64_t length, int64_t size) {
  int64_t end;
  return start >= 0 && length >= 0 && !add_overflows(start, length, &end) && end <= size;
}

}  // namespace lazylua
