// fast_math.h - vectorizable float32 transcendental functions.
//
// glibc's scalar expf costs ~10x a vectorized one and GCC does not call the
// vector math library without -ffast-math, so kernels that need exp in a hot
// loop (softmax) use this inline version. It is written once for scalars and
// for simd::Vec<float>, so the two agree bit for bit.
//
// Accuracy (checked by tests/unit/reduce_test.cpp over the whole float range):
// max relative error 8.3e-8 (~1.4 ulp; the test's bound is 2.5e-7) wherever
// the result is a normal float;
// results below FLT_MIN (x < -87.3) are subnormal and carry an absolute error
// under 1e-44; x > 88.73 gives +inf, x < -103.98 gives 0, NaN gives NaN.
#pragma once

#include <bit>
#include <cstdint>

#include "simd.h"

namespace lazylua {

namespace fast_math_detail {
template <typename F>
struct IntOf;
template <>
struct IntOf<float> {
  using type = int32_t;
};
template <>
struct IntOf<simd::Vec<float>> {
  using type = simd::Vec<int32_t>;
};
}  // namespace fast_math_detail

// e^x for F = float or simd::Vec<float>. Cody-Waite range reduction
// x = n ln2 + r with |r| <= ln2/2, the Cephes degree-7 polynomial for e^r,
// then 2^n applied as two factors 2^(n/2) * 2^(n - n/2) so that results
// down in the subnormal range and up to the overflow point come out right.
template <typename F>
inline F fast_exp(F x) {
  using I = typename fast_math_detail::IntOf<F>::type;
  const F low = F{} + -104.0f;  // e^-104 rounds to 0 in float
  const F high = F{} + 89.0f;   // e^89 overflows to +inf
  // Comparisons are false for NaN, so NaN passes both clamps untouched.
  x = x < low ? low : x;
  x = x > high ? high : x;

  // n = round(x / ln2) without a float->int conversion (undefined for NaN):
  // adding 1.5 * 2^23 leaves n in the low mantissa bits.
  const F round_magic = F{} + 12582912.0f;
  F shifted = x * 1.44269504088896341f + round_magic;
  I n = std::bit_cast<I>(shifted) - std::bit_cast<I>(round_magic);
  F n_float = shifted - round_magic;
  F r = x - n_float * 0.693359375f;  // ln2 split in two so n * ln2_high is exact
  r = r - n_float * -2.12194440e-4f;

  F p = F{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;

  I half = n >> 1;
  F scale_a = std::bit_cast<F>((half + 127) << 23);
  F scale_b = std::bit_cast<F>((n - half + 127) << 23);
  return p * scale_a * scale_b;
}

}  // namespace lazylua
