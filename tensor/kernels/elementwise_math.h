// elementwise_math.h - private to the elementwise kernels: float32
// transcendental functions written so that GCC vectorizes loops calling them.
//
// Scalar glibc expf/tanhf cost ~10x a vectorized version, and GCC only calls
// the vector math library under -ffast-math, which we do not use. These are
// branch-free (every special case is a select), use no tables and no
// float->int conversions of possibly-out-of-range values, so a loop
// `out[i] = f32math::tanh(in[i])` becomes straight AVX2/AVX-512 code.
//
// Accuracy: maximum relative error against the function computed in double,
// over 17 million inputs spread across the whole float range plus a dense
// grid on [-20, 20] (Elementwise.ApproximationSweep in
// tests/unit/elementwise_unary_test.cpp, which enforces bounds just above
// these; results below FLT_MIN are measured relative to FLT_MIN):
//   exp 1.2e-7, expm1 1.2e-7, log 1.2e-7, log2 1.3e-7, log1p 2.2e-7,
//   tanh 2.1e-7, sigmoid 2.4e-7, gelu 4.8e-7   (float's ulp is 6e-8..1.2e-7)
// Special values follow C: NaN in gives NaN out, exp(-inf) = 0,
// log(0) = -inf, log(x < 0) = NaN, tanh(+-inf) = +-1 ...
// Cost on AVX-512 (16M floats, one thread): exp 0.36 ns, tanh 0.6-0.9 ns,
// log 0.6 ns, sigmoid 0.5 ns, gelu 1.6 ns per element; glibc's scalar
// tanhf is ~13 ns. Only float32 uses these: float64 calls std::.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

// Forced inline: a kernel loop calling one of these that GCC decides not to
// inline (its budget runs out in big functions) is not vectorized at all.
#define LAZYLUA_MATH_INLINE [[gnu::always_inline]] inline

namespace lazylua::elementwise::f32math {

constexpr float kInfinity = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// condition ? a : b, done with integer masks. A plain ?: whose unused arm
// is a computed float lets GCC move that computation under a branch (it
// must assume float arithmetic may trap), which stops vectorization; bit
// operations are never turned back into branches.
LAZYLUA_MATH_INLINE float select(bool condition, float a, float b) {
  const int32_t mask = -static_cast<int32_t>(condition);
  return std::bit_cast<float>((std::bit_cast<int32_t>(a) & mask) |
                              (std::bit_cast<int32_t>(b) & ~mask));
}

// 2^n for an integer n in [-126, 127], built from the exponent bits.
LAZYLUA_MATH_INLINE float power_of_two(int32_t n) {
  return std::bit_cast<float>((n + 127) << 23);
}

// x = n ln2 + r with |r| <= ln2/2 and n an integer. n is found by adding
// 1.5 * 2^23, which leaves round(x / ln2) in the low mantissa bits: this
// needs no float->int conversion, so NaN and huge x are no undefined
// behaviour (the callers clamp x first anyway). The fused multiply-adds keep
// r accurate to ~1e-9 although n * ln2 is not exact in float.
struct Reduced {
  float r;
  float n;
  int32_t n_int;
};
LAZYLUA_MATH_INLINE Reduced reduce_by_ln2(float x) {
  constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23
  const float shifted = std::fma(x, 1.44269504088896341f, kRoundMagic);
  const float n = shifted - kRoundMagic;
  const int32_t n_int = std::bit_cast<int32_t>(shifted) - std::bit_cast<int32_t>(kRoundMagic);
  float r = std::fma(n, -0.693147182464599609375f, x);  // ln2 rounded to float
  r = std::fma(n, 1.904654323148236e-09f, r);           // minus the rounding error of that
  return {r, n, n_int};
}

// e^r - 1 for |r| <= ln2/2: Taylor series to r^8 (truncation error below
// 4e-10 relative), Horner form.
LAZYLUA_MATH_INLINE float expm1_reduced(float r) {
  float p = 1.0f / 40320.0f;
  p = std::fma(p, r, 1.0f / 5040.0f);
  p = std::fma(p, r, 1.0f / 720.0f);
  p = std::fma(p, r, 1.0f / 120.0f);
  p = std::fma(p, r, 1.0f / 24.0f);
  p = std::fma(p, r, 1.0f / 6.0f);
  p = std::fma(p, r, 0.5f);
  return std::fma(p * r, r, r);
}

// e^x. 2^n is applied as two factors 2^(n/2) 2^(n - n/2) so that results in
// the subnormal range and up to FLT_MAX come out right.
LAZYLUA_MATH_INLINE float exp(float x) {
  x = x < -104.0f ? -104.0f : x;  // e^-104 rounds to 0; comparisons let NaN through
  x = x > 89.0f ? 89.0f : x;      // e^89 overflows to +inf
  const Reduced reduced = reduce_by_ln2(x);
  const float e_r = 1.0f + expm1_reduced(reduced.r);
  const int32_t half = reduced.n_int >> 1;
  return e_r * power_of_two(half) * power_of_two(reduced.n_int - half);
}

// e^x - 1, accurate near 0 where exp(x) - 1 cancels: 2^n (e^r - 1) + (2^n - 1).
// Near the overflow point (n > 100) 2^n itself may not be a float; there
// e^x - 1 is e^x, computed as in exp() from the same reduction.
LAZYLUA_MATH_INLINE float expm1(float x) {
  float clamped = x < -30.0f ? -30.0f : x;  // e^-30 - 1 rounds to -1
  clamped = clamped > 89.0f ? 89.0f : clamped;
  const Reduced reduced = reduce_by_ln2(clamped);
  const float p = expm1_reduced(reduced.r);
  const int32_t half = reduced.n_int >> 1;
  const float scale_a = power_of_two(half), scale_b = power_of_two(reduced.n_int - half);
  const float scale = scale_a * scale_b;
  const float near_zero = std::fma(scale, p, scale - 1.0f);
  const float large = (1.0f + p) * scale_a * scale_b;
  const float result = select(reduced.n_int > 100, large, near_zero);
  return select(x == 0.0f, x, result);  // expm1(-0) = -0
}

// Natural log of the mantissa part, as in Cephes logf: x = m 2^e with m in
// [sqrt(1/2), sqrt(2)); returns f = m - 1 (exact) and the rest of log(m), so
// that callers can add e * ln2 (or e) with little rounding.
//
// The special cases are recognised from the bits of x with integer
// comparisons, and every select picks between values computed
// unconditionally: with float comparisons or arithmetic inside the selects,
// GCC (which must assume they may trap) leaves branches and does not
// vectorize the loop.
struct LogParts {
  float exponent;  // e
  float f;         // m - 1
  float rest;      // log(m) - f
};
LAZYLUA_MATH_INLINE LogParts log_parts(float x) {
  // Subnormal inputs are scaled by 2^23 first, so that they have an exponent.
  const int32_t x_bits = std::bit_cast<int32_t>(x);
  const bool subnormal = (x_bits & 0x7fffffff) < 0x00800000;
  const float scaled_up = x * 8388608.0f;
  const int32_t bits = subnormal ? std::bit_cast<int32_t>(scaled_up) : x_bits;
  const int32_t biased_exponent = ((bits >> 23) & 0xff) - (subnormal ? 126 + 23 : 126);
  // m gets the mantissa bits of x and the exponent that puts it in
  // [sqrt(1/2), sqrt(2)): [1, 2) when the mantissa is below sqrt(2)'s,
  // [0.5, 1) otherwise. Then |f| <= 0.42 and m - 1 is exact (Sterbenz).
  const int32_t mantissa = bits & 0x007fffff;
  const bool below = mantissa < 0x003504f3;  // mantissa of sqrt(2)
  const float m = std::bit_cast<float>(mantissa | (below ? 0x3f800000 : 0x3f000000));
  const float exponent = static_cast<float>(biased_exponent - (below ? 1 : 0));
  const float f = m - 1.0f;

  const float z = f * f;
  float p = 7.0376836292e-2f;
  p = std::fma(p, f, -1.1514610310e-1f);
  p = std::fma(p, f, 1.1676998740e-1f);
  p = std::fma(p, f, -1.2420140846e-1f);
  p = std::fma(p, f, 1.4249322787e-1f);
  p = std::fma(p, f, -1.6668057665e-1f);
  p = std::fma(p, f, 2.0000714765e-1f);
  p = std::fma(p, f, -2.4999993993e-1f);
  p = std::fma(p, f, 3.3333331174e-1f);
  const float rest = std::fma(p * f, z, -0.5f * z);
  return {exponent, f, rest};
}

// Results for the inputs log_parts does not handle: +-0, +inf, NaN, x < 0.
LAZYLUA_MATH_INLINE float log_special_cases(float x, float result) {
  const int32_t bits = std::bit_cast<int32_t>(x);
  const int32_t magnitude = bits & 0x7fffffff;
  result = select(bits == 0x7f800000, kInfinity, result);
  result = select((bits < 0) | (magnitude > 0x7f800000), kNaN, result);  // negative or NaN
  return select(magnitude == 0, -kInfinity, result);                     // log(-0) = -inf too
}

LAZYLUA_MATH_INLINE float log(float x) {
  const LogParts parts = log_parts(x);
  // e ln2 is added as e * (0.693359375 - 2.12194440e-4): the first product is
  // exact, so the large part of the result carries no rounding error.
  float result = std::fma(parts.exponent, -2.12194440e-4f, parts.rest);
  result = parts.f + result;
  result = std::fma(parts.exponent, 0.693359375f, result);
  return log_special_cases(x, result);
}

LAZYLUA_MATH_INLINE float log2(float x) {
  const LogParts parts = log_parts(x);
  // log2(x) = e + log(m) / ln2; exact for powers of two (f = rest = 0).
  constexpr float kLog2e = 1.44269504088896341f;
  const float log_m = parts.f + parts.rest;
  const float result = std::fma(log_m, kLog2e, parts.exponent);
  return log_special_cases(x, result);
}

// log(1 + x), accurate near 0: with u = 1 + x rounded, log(u) * x / (u - 1)
// cancels the rounding error of u (Goldberg, "What every computer scientist
// should know about floating-point arithmetic", theorem 4).
LAZYLUA_MATH_INLINE float log1p(float x) {
  const float u = 1.0f + x;
  const float ratio = x / (u - 1.0f);
  const float result = select(u == 1.0f, x, log(u) * ratio);
  return select(x == kInfinity, kInfinity, result);
}

// tanh(|x|) = -expm1(-2|x|) / (expm1(-2|x|) + 2), then the sign of x: no
// cancellation near 0, and it saturates to exactly 1 for |x| > 9.
LAZYLUA_MATH_INLINE float tanh(float x) {
  const float e = expm1(-2.0f * std::fabs(x));
  return std::copysign(-e / (e + 2.0f), x);
}

// 1 / (1 + e^-x) computed from e = e^-|x| <= 1, so it never overflows and
// keeps full relative accuracy for very negative x (the result e / (1 + e)
// even reaches the subnormal range).
LAZYLUA_MATH_INLINE float sigmoid(float x) {
  const float e = exp(-std::fabs(x));
  const float inverse = 1.0f / (1.0f + e);
  return x >= 0.0f ? inverse : e * inverse;
}

// gelu(x) = x * Phi(x) = 0.5 x (1 + erf(x / sqrt2)) = 0.5 x erfc(-x / sqrt2).
// The erfc form keeps relative accuracy for negative x where 1 + erf(.)
// cancels. erfc(u) for u >= 0 is t e^(-u^2 + c(t)) with t = 1 / (1 + u/2) and
// c a degree-9 polynomial (Numerical Recipes' erfcc, relative error below
// 1.2e-7 everywhere). u^2 = x^2 / 2 is split exactly into high + low parts
// with an FMA so that e^-u^2 does not inherit the rounding error of x^2,
// which is amplified ~x^2 times for x near -13.
LAZYLUA_MATH_INLINE float gelu(float x) {
  float a = std::fabs(x);
  a = a > 20.0f ? 20.0f : a;  // erfc(20/sqrt2) is 0 in float; NaN passes
  const float square_high = a * a;
  const float square_low = std::fma(a, a, -square_high);
  const float t = 1.0f / std::fma(a, 0.35355339059327376f, 1.0f);  // 1 / (1 + u/2)
  float c = 0.17087277f;
  c = std::fma(c, t, -0.82215223f);
  c = std::fma(c, t, 1.48851587f);
  c = std::fma(c, t, -1.13520398f);
  c = std::fma(c, t, 0.27886807f);
  c = std::fma(c, t, -0.18628806f);
  c = std::fma(c, t, 0.09678418f);
  c = std::fma(c, t, 0.37409196f);
  c = std::fma(c, t, 1.00002368f);
  c = std::fma(c, t, -1.26551223f);
  // tail = x Phi(-|x|) = x erfc(u) / 2, with the factor that may be tiny
  // applied last: a subnormal intermediate would lose digits.
  // x is clamped to +-20 here too, so that x = +-inf gives inf and -0 (the
  // limits) instead of inf * 0.
  const float clamped_x = std::copysign(a, x);
  const float tail = clamped_x * 0.5f * t * exp(c - 0.5f * square_low) * exp(-0.5f * square_high);
  return select(x <= 0.0f, tail, x - tail);  // x Phi(x) = x - x Phi(-x); keeps -0
}

}  // namespace lazylua::elementwise::f32math

namespace lazylua::elementwise {

// floor(x) for float or double. GCC vectorizes std::nearbyint but not
// std::floor (not without -fno-trapping-math), so floor is derived from
// r = nearbyint(x) by one correction step, with a select between constants
// (which GCC if-converts). Exact: r - 1 is representable whenever r > x.
// -0 - 0 stays -0, NaN and infinities pass through.
template <typename T>
LAZYLUA_MATH_INLINE T floor_by_nearbyint(T x) {
  const T r = std::nearbyint(x);
  return r - (r > x ? T{1} : T{0});
}

}  // namespace lazylua::elementwise
