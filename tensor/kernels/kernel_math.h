/* kernel_math.h - the one math library of lazylua's float kernels: the eager kernels
 * (tensor/kernels/elementwise_*.cpp, softmax.cpp) include it, and generated code pastes it
 * verbatim at its top, so that every tier computes the same bits: an eager t:exp(), the
 * reference interpreter (which calls the eager kernels) and compiled code. Plain C99 that also
 * compiles as C++; both builds must not contract a*b + c into an FMA (-ffp-contract=off, set in
 * CMakeLists.txt and compiler/toolchain.cpp), or the same expression rounds differently.
 * Every function is static inline and branch-free so that GCC -O2 -march=native
 * -fno-math-errno vectorizes (AVX2, AVX-512)
 *     for (long i = 0; i < 4096; i++) y[i] = ll_tanhf(x[i]);   (x, y restrict)
 * no libm calls, no tables, special cases as integer-mask selects, no float->int conversion of
 * values that may be out of range. __builtin_fma needs an FMA unit to be fast (x86-64-v3 has
 * one). GCC 12's -O2 cost model ("very cheap") only vectorizes loops whose trip count is a
 * known multiple of the vector length: loops over a run-time n need -fvect-cost-model=cheap.
 *
 * Max error in ulp of the exact result (subnormal results: ulps of 2^-149 or 2^-1074), measured
 * and asserted by tests/unit/kernel_math_test.cpp, f32 over every float (CI: every 127th):
 *   f32  exp 0.53  expm1 0.63  log 0.63  log2 0.73  log1p 0.64  tanh 0.59  sigmoid 0.53  gelu 7.6
 *        sqrt 0.5  pow 0.5 (sampled)  sin 0.67  cos 0.67  tan 0.80  erf 0.51  erfc 0.56 (fits
 *        in double, rounded once)  exp2 0.50 (in double, rounded once); asin acos atan sinh
 *        cosh asinh acosh atanh log10 0.50 (libm's double, rounded once); exp and sigmoid 0.76
 *        where subnormal. Max relative error 7.7e-8; gelu 5.0e-7 (Numerical Recipes' erfc).
 *   f64  exp 0.56  expm1 0.73  log 0.74  tanh 0.67  sigmoid 0.56 (0.75 subnormal), 49M
 *        samples; exp2 0.70 (1.2M samples); libm's erf 1.09, erfc 2.92, asin 0.51, acos
 *        atan 0.52, sinh 1.71, cosh 1.02, asinh 1.59, acosh 2.03, atanh 1.63, log10 1.57;
 *        log2, log1p, gelu (0.89), erf, erfc, pow, sin, cos, tan, atan2, asin ... log10, float
 *        % call libm
 *        (loops not vectorized; the same libm in every tier, as generated code runs in-process).
 * Special values follow C99 Annex F (NaN -> NaN, exp(-inf) = 0, log(0) = -inf, log(-1) = NaN,
 * tanh(+-inf) = +-1, sigmoid(+-inf) = 1, 0, gelu(-inf) = -0, signed zeros kept); ll_powf
 * matches powf in every special case. Unlike libm, ll_sinf/ll_cosf/ll_tanf return NaN for
 * |x| > 6e6, where their argument reduction is no longer exact. NaNs that the functions make
 * (log(-1)) are the positive quiet NaN of NAN; NaN inputs pass through. */
#ifndef LAZYLUA_KERNEL_MATH_H
#define LAZYLUA_KERNEL_MATH_H
/* One function a line, so that the library reads as a table: */
/* clang-format off */

#include <math.h>
#include <stdint.h>
#include <string.h>

#define LL_MATH static inline __attribute__((always_inline)) /* else: no vectorization */
/* The heavy functions are compiled once per file, with a vector clone (GCC's simd attribute)
 * that vectorized loops call: a kernel with 30 tanh compiles 8x faster than with 30 inlined
 * copies, and runs as fast. Kernels compute every value unconditionally, so the calls are
 * never in a branch ("notinbranch"). Other compilers inline them. */
#if defined(__GNUC__) && !defined(__clang__)
#define LL_VECTOR static __attribute__((simd("notinbranch"), noinline, unused))
#else
#define LL_VECTOR LL_MATH
#endif
#define LLM_FMAF __builtin_fmaf
#define LLM_FMA __builtin_fma
#define LLM_MAGICF 12582912.0f        /* 1.5 * 2^23: x + it has round(x) in its low bits */
#define LLM_MAGIC 6755399441055744.0  /* 1.5 * 2^52 */

/* Bit casts; c ? a : b with an integer mask m = 0 - c held in a variable (written ~(0u - c)
 * inline, GCC folds it back into a branch). A ?: whose arms compute floats lets GCC move that
 * arithmetic under a branch (float operations may trap), which stops vectorization. */
LL_MATH uint32_t llm_bits_f(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
LL_MATH float llm_float(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }
LL_MATH uint64_t llm_bits_d(double x) { uint64_t u; memcpy(&u, &x, 8); return u; }
LL_MATH double llm_double(uint64_t u) { double x; memcpy(&x, &u, 8); return x; }
LL_MATH uint32_t llm_selu(int c, uint32_t a, uint32_t b) { uint32_t m = 0u - (c != 0); return (a & m) | (b & ~m); }
LL_MATH uint64_t llm_selq(int c, uint64_t a, uint64_t b) { uint64_t m = 0u - (uint64_t)(c != 0); return (a & m) | (b & ~m); }
LL_MATH float llm_self(int c, float a, float b) { return llm_float(llm_selu(c, llm_bits_f(a), llm_bits_f(b))); }
LL_MATH double llm_seld(int c, double a, double b) { return llm_double(llm_selq(c, llm_bits_d(a), llm_bits_d(b))); }
LL_MATH float llm_clampf(float x, float lo, float hi) { return llm_self(x < lo, lo, llm_self(x > hi, hi, x)); }
LL_MATH double llm_clampd(double x, double lo, double hi) { return llm_seld(x < lo, lo, llm_seld(x > hi, hi, x)); }

/* ---- float32 exp family: x = k ln2 + r + r_lo (two-part ln2, FMA), e^r - 1 = p + p_lo by
 * Taylor to r^8 (truncation < 4e-10) with error-free last steps (TwoProduct, Fast2Sum), so that
 * results round once. e^x = (one + one_lo) a b, 2^k = a b (subnormal results, FLT_MAX). */
typedef struct { float p, p_lo; int32_t k; } llm_exp_f;
typedef struct { float one, one_lo, a, b; } llm_scale_f;
typedef struct { float hi, lo; } llm_ff;
LL_MATH llm_exp_f llm_exp_reduce_f(float x) {
  float shifted = LLM_FMAF(x, 1.44269504088896341f, LLM_MAGICF), n = shifted - LLM_MAGICF;
  float r1 = LLM_FMAF(n, -0.693147182464599609375f, x); /* exact */
  float r = LLM_FMAF(n, 1.904654323148236e-09f, r1), r_lo = LLM_FMAF(n, 1.904654323148236e-09f, r1 - r);
  float q = LLM_FMAF(1.0f / 40320, r, 1.0f / 5040); /* (e^r - 1 - r) / r^2 */
  q = LLM_FMAF(q, r, 1.0f / 720); q = LLM_FMAF(q, r, 1.0f / 120);
  q = LLM_FMAF(q, r, 1.0f / 24); q = LLM_FMAF(q, r, 1.0f / 6); q = LLM_FMAF(q, r, 0.5f);
  float r2 = r * r, t = q * r2, t_lo = LLM_FMAF(q, r2, -t) + q * LLM_FMAF(r, r, -r2), p = r + t;
  llm_exp_f o = {p, LLM_FMAF(r_lo, p, ((t - (p - r)) + t_lo) + r_lo), /* + r_lo e^r */
                 (int32_t)(llm_bits_f(shifted) - 0x4b400000u)};
  return o;
}
LL_MATH float llm_pow2f(int32_t k) { return llm_float((uint32_t)(k + 127) << 23); } /* |k| < 127 */
LL_MATH llm_scale_f llm_exp_parts_f(llm_exp_f d) {
  llm_scale_f o = {1.0f + d.p, 0.0f, llm_pow2f(d.k / 2), llm_pow2f(d.k - d.k / 2)};
  o.one_lo = ((1.0f - o.one) + d.p) + d.p_lo;
  return o;
}
LL_MATH float llm_exp_scale_f(llm_exp_f d) {
  llm_scale_f s = llm_exp_parts_f(d);
  return LLM_FMAF(s.one, s.a, s.one_lo * s.a) * s.b;
}
LL_VECTOR float ll_expf(float x) { return llm_exp_scale_f(llm_exp_reduce_f(llm_clampf(x, -104.0f, 89.0f))); }
/* e^x - 1 = 2^k - 1 + 2^k (p + p_lo) as hi + lo, k in [-44, 24], the rounding of 2^k - 1 kept. */
LL_MATH llm_ff llm_expm1_ff(llm_exp_f d) {
  float s = llm_pow2f(d.k), b = s - 1.0f, b_err = s - (b + 1.0f), sp = s * d.p, hi = b + sp;
  llm_ff e = {hi, (sp - (hi - b)) + LLM_FMAF(s, d.p_lo, b_err)};
  return e;
}
LL_VECTOR float ll_expm1f(float x) {
  llm_exp_f d = llm_exp_reduce_f(llm_clampf(x, -30.0f, 89.0f));
  llm_ff e = llm_expm1_ff(d);
  llm_scale_f s = llm_exp_parts_f(d); /* k > 24: e^x + (low part - 1) */
  float big = LLM_FMAF(s.one * s.a, s.b, LLM_FMAF(s.one_lo * s.a, s.b, -1.0f));
  return llm_self(x == 0.0f, x, llm_self(d.k > 24, big, e.hi + e.lo)); /* keeps -0 */
}
/* tanh|x| = -e / (e + 2), e = expm1(-2|x|): q corrected by the exact residual, e's low part and
 * the rounding of e + 2, over e + 2 (times (1 + q) / 2). */
LL_VECTOR float ll_tanhf(float x) {
  llm_ff e = llm_expm1_ff(llm_exp_reduce_f(llm_clampf(-2.0f * fabsf(x), -30.0f, 0.0f)));
  float den = e.hi + 2.0f, den_lo = ((2.0f - den) + e.hi) + e.lo, q = -e.hi / den;
  float rho = LLM_FMAF(-q, den_lo, LLM_FMAF(q, -den, -e.hi) - e.lo);
  return copysignf(LLM_FMAF(rho, LLM_FMAF(0.5f, q, 0.5f), q), x);
}
/* 1 / (1 + e) or e / (1 + e), e = e^-|x| <= 1 (no overflow), corrected as tanh; e below -60. */
LL_VECTOR float ll_sigmoidf(float x) {
  llm_exp_f d = llm_exp_reduce_f(llm_clampf(-fabsf(x), -104.0f, 0.0f));
  float s = llm_pow2f(d.k < -126 ? -126 : d.k), one = 1.0f + d.p;
  float e = s * one, e_lo = s * (((1.0f - one) + d.p) + d.p_lo);
  float den = 1.0f + e, den_lo = ((1.0f - den) + e) + e_lo;
  int pos = x >= 0.0f;
  float num = llm_self(pos, 1.0f, e), q = num / den;
  float rho = LLM_FMAF(-q, den_lo, LLM_FMAF(-q, den, num) + llm_self(pos, 0.0f, e_lo));
  return llm_self(x < -60.0f, llm_exp_scale_f(d), LLM_FMAF(rho, llm_self(pos, q, 1.0f - q), q));
}

/* ---- float32 log family: x = m 2^e, m in [sqrt(1/2), sqrt2) (subnormals scaled first), f = m - 1
 * exact, log(1 + f) = f - f^2/2 + f^3 P(f) (Cephes logf) = hi + lo, f - f^2/2 error-free, so
 * that the results round once. Special inputs are recognised by their bits. */
typedef struct { float e, f; } llm_logx_f;
LL_MATH llm_logx_f llm_log_split_f(float x) {
  uint32_t xb = llm_bits_f(x), scaled = llm_bits_f(x * 8388608.0f);
  int sub = (xb & 0x7fffffffu) < 0x00800000u;
  uint32_t b = llm_selu(sub, scaled, xb), mant = b & 0x007fffffu;
  int below = mant < 0x003504f3u; /* mantissa of sqrt2 */
  llm_logx_f o = {(float)((int32_t)((b >> 23) & 0xff) - 126 - 23 * sub - below),
                  llm_float(mant | llm_selu(below, 0x3f800000u, 0x3f000000u)) - 1.0f};
  return o;
}
LL_MATH llm_ff llm_log1p_ff(float f) {
  float z = f * f, p = LLM_FMAF(7.0376836292e-2f, f, -1.1514610310e-1f);
  p = LLM_FMAF(p, f, 1.1676998740e-1f); p = LLM_FMAF(p, f, -1.2420140846e-1f);
  p = LLM_FMAF(p, f, 1.4249322787e-1f); p = LLM_FMAF(p, f, -1.6668057665e-1f);
  p = LLM_FMAF(p, f, 2.0000714765e-1f); p = LLM_FMAF(p, f, -2.4999993993e-1f);
  p = LLM_FMAF(p, f, 3.3333331174e-1f);
  float hi = f - 0.5f * z, lo = LLM_FMAF(p * f, z, -0.5f * LLM_FMAF(f, f, -z));
  llm_ff o = {hi, ((f - hi) - 0.5f * z) + lo};
  return o;
}
LL_MATH float llm_log_special_f(float x, float r) { /* +-0, < 0 or NaN, +inf */
  uint32_t b = llm_bits_f(x), m = b & 0x7fffffffu;
  return llm_self(m == 0, -INFINITY, llm_self((int)(b >> 31) | (m > 0x7f800000u), NAN,
                                              llm_self(m == 0x7f800000u, INFINITY, r)));
}
/* log(x) + extra (tiny) = a + hi + small, a = e 0.693359375 exact, a + hi error-free. */
LL_MATH float llm_log_f(float x, float extra) {
  llm_logx_f s = llm_log_split_f(x);
  llm_ff l = llm_log1p_ff(s.f);
  float a = s.e * 0.693359375f, hi = a + l.hi, small = LLM_FMAF(s.e, -2.12194440e-4f, l.lo + extra);
  return llm_log_special_f(x, hi + ((l.hi - (hi - a)) + small));
}
LL_VECTOR float ll_logf(float x) { return llm_log_f(x, 0.0f); }
/* e + (hi + lo) log2(e), log2(e) in two parts, hi log2(e) = p + p_lo and e + p error-free. */
LL_VECTOR float ll_log2f(float x) {
  llm_logx_f s = llm_log_split_f(x);
  llm_ff l = llm_log1p_ff(s.f);
  const float l2e = 1.44269502162933349609375f;
  float p = l.hi * l2e, p_lo = LLM_FMAF(l.hi, l2e, -p), hi = s.e + p;
  float lo = LLM_FMAF(l.hi, 1.925963033500011e-08f, l.lo * l2e);
  return llm_log_special_f(x, hi + (((p - (hi - s.e)) + p_lo) + lo));
}
/* Near 0 log(1 + f), f = x; else log(u) + (1 + x - u) / u, u = 1 + x, 1 + x - u by Fast2Sum. */
LL_VECTOR float ll_log1pf(float x) {
  float u = 1.0f + x, err = llm_self(fabsf(x) > 1.0f, 1.0f - (u - x), x - (u - 1.0f));
  float r = llm_self(u == 0.0f, -INFINITY, llm_log_f(u, err / u));
  llm_ff l = llm_log1p_ff(x);
  r = llm_self((x > -0.29289322f) & (x < 0.41421356f), l.hi + l.lo, r);
  return llm_self((x == 0.0f) | (x == INFINITY), x, r);
}

/* ---- float32 gelu, sqrt, pow ----------------------------------------------------------------
 * gelu(x) = x Phi(x) = x erfc(-x / sqrt2) / 2; erfc(u) = t e^(-u^2 + c(t)), t = 1 / (1 + u/2)
 * (Numerical Recipes' erfcc, relative error 1.2e-7, as the eager kernel), u^2 split exactly:
 * its rounding would cost ~x^2 ulp near x = -13. */
LL_VECTOR float ll_geluf(float x) {
  float a = llm_self(fabsf(x) > 20.0f, 20.0f, fabsf(x)); /* Phi(-20) = 0 in float */
  float sq = a * a, sq_lo = LLM_FMAF(a, a, -sq), t = 1.0f / LLM_FMAF(a, 0.35355339059327376f, 1.0f);
  float c = LLM_FMAF(0.17087277f, t, -0.82215223f);
  c = LLM_FMAF(c, t, 1.48851587f); c = LLM_FMAF(c, t, -1.13520398f); c = LLM_FMAF(c, t, 0.27886807f);
  c = LLM_FMAF(c, t, -0.18628806f); c = LLM_FMAF(c, t, 0.09678418f); c = LLM_FMAF(c, t, 0.37409196f);
  c = LLM_FMAF(c, t, 1.00002368f); c = LLM_FMAF(c, t, -1.26551223f);
  /* x Phi(-|x|), the tiny factor last; x clamped too: gelu(+-inf) = inf, -0 */
  float tail = copysignf(a, x) * 0.5f * t * ll_expf(c - 0.5f * sq_lo) * ll_expf(-0.5f * sq);
  return llm_self(x <= 0.0f, tail, x - tail);
}
LL_MATH float ll_sqrtf(float x) { return sqrtf(x); }
LL_MATH double ll_sqrt(double x) { return sqrt(x); }
/* |x|^y = 2^(y log2|x|) in double, rounded once (a float log is off by |y log x| ulp): log2|x|
 * = e + 2 atanh(s) / ln2, s = f / (2 + f) (series error < 4e-13), y log2|x| = n + r exactly,
 * 2^r by Taylor. Then powf's special cases (odd y, x < 0, x^0 = 1^y = (-1)^+-inf = 1). */
LL_VECTOR float ll_powf(float x, float y) {
  llm_logx_f ls = llm_log_split_f(x);
  double f = ls.f, s = f / (2.0 + f), z = s * s, p = LLM_FMA(z, 1.0 / 15, 1.0 / 13);
  p = LLM_FMA(p, z, 1.0 / 11); p = LLM_FMA(p, z, 1.0 / 9); p = LLM_FMA(p, z, 1.0 / 7);
  p = LLM_FMA(p, z, 1.0 / 5); p = LLM_FMA(p, z, 1.0 / 3);
  double lg = LLM_FMA(2.8853900817779268, LLM_FMA(s * z, p, s), (double)ls.e);
  uint32_t xb = llm_bits_f(x), xm = xb & 0x7fffffffu;
  lg = llm_seld(xm == 0, -INFINITY, llm_seld(xm >= 0x7f800000u, (double)fabsf(x), lg));
  double t = llm_clampd((double)y * lg, -200.0, 200.0); /* NaN passes */
  double shifted = t + LLM_MAGIC, u = (t - (shifted - LLM_MAGIC)) * 0.6931471805599453;
  double e = LLM_FMA(u, 1.0 / 3628800, 1.0 / 362880);
  e = LLM_FMA(e, u, 1.0 / 40320); e = LLM_FMA(e, u, 1.0 / 5040); e = LLM_FMA(e, u, 1.0 / 720);
  e = LLM_FMA(e, u, 1.0 / 120); e = LLM_FMA(e, u, 1.0 / 24); e = LLM_FMA(e, u, 1.0 / 6);
  e = 1.0 + LLM_FMA(LLM_FMA(e, u, 0.5) * u, u, u);
  float res = (float)(e * llm_double((llm_bits_d(shifted) + 1023u) << 52));
  int y_int = nearbyintf(y) == y, y_odd = y_int & (nearbyintf(y * 0.5f) != y * 0.5f);
  res = llm_self(y_odd & (int)(xb >> 31), -res, res);
  res = llm_self((x < 0.0f) & (x > -INFINITY) & !y_int & (fabsf(y) < INFINITY), NAN, res);
  /* x^2, x^-1, x^1 and x^0.5 (x >= -0) are the correctly rounded x*x, 1/x, x, sqrt(x) + 0 (the
   * general path can miss a halfway case): what users expect of x^2, and what lets an eager loop
   * compute x^2 as x*x and stay bitwise equal. */
  float exact = llm_self(y == 2.0f, x * x, llm_self(y == -1.0f, 1.0f / x, llm_self(y == 1.0f, x, sqrtf(x) + 0.0f)));
  res = llm_self((y == 2.0f) | (y == -1.0f) | (y == 1.0f) | ((y == 0.5f) & (x >= 0.0f)), exact, res);
  return llm_self((x == 1.0f) | (y == 0.0f) | ((xm == 0x3f800000u) & (fabsf(y) == INFINITY)), 1.0f, res);
}

/* ---- float32 sin, cos, tan: |x| = n pi/2 + r + r_lo, n = round(|x| 2/pi) (2/pi in two parts),
 * pi/2 in three: n p1 and |x| - n p1 exact, n p2 and the sum error-free, so r + r_lo is good to
 * ~1e-16 while n < 2^22 (the float nearest a multiple of pi/2 there is 4e-9 from it). sin r,
 * cos r by Taylor (cos as fdlibm's, 1 - r^2/2 error-free) as hi + lo; n mod 4 picks them. */
typedef struct { float s, s_lo, c, c_lo; uint32_t n; } llm_sc_f;
LL_MATH llm_sc_f llm_sincos_f(float ax) {
  float y = ax * 0.6366197466850281f, y_lo = LLM_FMAF(ax, 0.6366197466850281f, -y) + ax * 2.5682553e-08f;
  float shifted = y + LLM_MAGICF, frac = (y - (shifted - LLM_MAGICF)) + y_lo;
  shifted += llm_self(frac > 0.5f, 1.0f, 0.0f) - llm_self(frac < -0.5f, 1.0f, 0.0f);
  float n = shifted - LLM_MAGICF, hi = LLM_FMAF(n, -1.5707963705062866f, ax);
  float pr = n * 4.371138828673793e-08f, pr_lo = LLM_FMAF(n, 4.371138828673793e-08f, -pr);
  float r = hi + pr, v = r - hi, r_lo = (hi - (r - v)) + (pr - v);
  r_lo = LLM_FMAF(n, 1.7151245100058819e-15f, r_lo + pr_lo);
  r = llm_self(ax <= 6e6f, r, NAN); /* and inf, NaN */
  float z = r * r, z_lo = LLM_FMAF(r, r, -z), ps = LLM_FMAF(z, -1.0f / 39916800, 1.0f / 362880);
  ps = LLM_FMAF(ps, z, -1.0f / 5040); ps = LLM_FMAF(ps, z, 1.0f / 120); ps = LLM_FMAF(ps, z, -1.0f / 6);
  float w = LLM_FMAF(-0.5f, z, 1.0f), rz = r * z, rz_lo = LLM_FMAF(r, z, -rz) + r * z_lo;
  float t = LLM_FMAF(rz, ps, LLM_FMAF(rz_lo, ps, r_lo * w)), s = r + t; /* r_lo cos r */
  float pc = LLM_FMAF(z, 1.0f / 479001600, -1.0f / 3628800);
  pc = LLM_FMAF(pc, z, 1.0f / 40320); pc = LLM_FMAF(pc, z, -1.0f / 720); pc = LLM_FMAF(pc, z, 1.0f / 24);
  float tc = LLM_FMAF(z * z, pc, LLM_FMAF(-0.5f, z_lo, -r * r_lo)) + ((1.0f - w) - 0.5f * z), c = w + tc;
  llm_sc_f o = {s, t - (s - r), c, tc - (c - w), llm_bits_f(shifted) - 0x4b400000u};
  return o;
}
/* sin and tan are odd: computed on |x|, then x's sign (sin(-0) = -0). */
LL_VECTOR float ll_sinf(float x) {
  llm_sc_f v = llm_sincos_f(fabsf(x));
  float r = llm_self(v.n & 1u, v.c, v.s);
  return llm_float(llm_bits_f(r) ^ ((v.n & 2u) << 30) ^ (llm_bits_f(x) & 0x80000000u));
}
LL_VECTOR float ll_cosf(float x) {
  llm_sc_f v = llm_sincos_f(fabsf(x));
  return llm_float(llm_bits_f(llm_self(v.n & 1u, v.s, v.c)) ^ (((v.n + 1u) & 2u) << 30));
}
/* sin r / cos r or -cos r / sin r, corrected by the residual and the low parts. */
LL_VECTOR float ll_tanf(float x) {
  llm_sc_f v = llm_sincos_f(fabsf(x));
  int odd = v.n & 1u;
  float num = llm_self(odd, -v.c, v.s), num_lo = llm_self(odd, -v.c_lo, v.s_lo);
  float den = llm_self(odd, v.s, v.c), den_lo = llm_self(odd, v.s_lo, v.c_lo), q = num / den;
  float r = q + LLM_FMAF(-q, den_lo, LLM_FMAF(-q, den, num) + num_lo) / den;
  return llm_float(llm_bits_f(r) ^ (llm_bits_f(x) & 0x80000000u));
}

/* ---- float64: the same algorithms, Taylor to r^13 for e^r (truncation < 5e-18), fdlibm's log.
 * 2^k from the bits of k + 1.5 * 2^52: AVX2 has no 64-bit int<->double conversion. */
typedef struct { double p, p_lo, shifted; int64_t k; } llm_exp_d;
typedef struct { double one, one_lo, a, b; } llm_scale_d;
typedef struct { double hi, lo; } llm_dd;
/* e^(r + r_lo) - 1 = p + p_lo; shifted holds k (2^k is the scale) */
LL_MATH llm_exp_d llm_exp_poly_d(double r, double r_lo, double shifted) {
  double q = LLM_FMA(r, 1.0 / 6227020800, 1.0 / 479001600);
  q = LLM_FMA(q, r, 1.0 / 39916800); q = LLM_FMA(q, r, 1.0 / 3628800); q = LLM_FMA(q, r, 1.0 / 362880);
  q = LLM_FMA(q, r, 1.0 / 40320); q = LLM_FMA(q, r, 1.0 / 5040); q = LLM_FMA(q, r, 1.0 / 720);
  q = LLM_FMA(q, r, 1.0 / 120); q = LLM_FMA(q, r, 1.0 / 24); q = LLM_FMA(q, r, 1.0 / 6);
  q = LLM_FMA(q, r, 0.5);
  double r2 = r * r, t = q * r2, t_lo = LLM_FMA(q, r2, -t) + q * LLM_FMA(r, r, -r2), p = r + t;
  llm_exp_d o = {p, LLM_FMA(r_lo, p, ((t - (p - r)) + t_lo) + r_lo), shifted,
                 (int64_t)(llm_bits_d(shifted) - 0x4338000000000000u)};
  return o;
}
LL_MATH llm_exp_d llm_exp_reduce_d(double x) {
  double shifted = LLM_FMA(x, 1.4426950408889634, LLM_MAGIC), n = shifted - LLM_MAGIC;
  double r1 = LLM_FMA(n, -0.6931471805598903, x); /* ln2 with 11 zero bits */
  double r = LLM_FMA(n, -5.497923018708371e-14, r1), r_lo = LLM_FMA(n, -5.497923018708371e-14, r1 - r);
  return llm_exp_poly_d(r, r_lo, shifted);
}
LL_MATH double llm_pow2d(double shifted, double c) { /* 2^(k + c), k + c in [-1022, 1023] */
  return llm_double((llm_bits_d(shifted + c) + 1023u) << 52);
}
LL_MATH llm_scale_d llm_exp_parts_d(llm_exp_d d) { /* k in [-1077, 1025] */
  double k = d.shifted - LLM_MAGIC, h = nearbyint(k * 0.5);
  llm_scale_d o = {1.0 + d.p, 0.0, llm_pow2d(d.shifted, h - k), llm_pow2d(d.shifted, -h)};
  o.one_lo = ((1.0 - o.one) + d.p) + d.p_lo;
  return o;
}
LL_MATH double llm_exp_scale_d(llm_exp_d d) {
  llm_scale_d s = llm_exp_parts_d(d);
  return LLM_FMA(s.one, s.a, s.one_lo * s.a) * s.b;
}
LL_VECTOR double ll_exp(double x) { return llm_exp_scale_d(llm_exp_reduce_d(llm_clampd(x, -746.0, 710.0))); }
LL_MATH llm_dd llm_expm1_dd(llm_exp_d d) { /* k in [-58, 53] */
  double s = llm_pow2d(d.shifted, 0.0), b = s - 1.0, b_err = s - (b + 1.0), sp = s * d.p, hi = b + sp;
  llm_dd e = {hi, (sp - (hi - b)) + LLM_FMA(s, d.p_lo, b_err)};
  return e;
}
LL_VECTOR double ll_expm1(double x) {
  llm_exp_d d = llm_exp_reduce_d(llm_clampd(x, -40.0, 710.0));
  llm_dd e = llm_expm1_dd(d);
  llm_scale_d s = llm_exp_parts_d(d);
  double big = LLM_FMA(s.one * s.a, s.b, LLM_FMA(s.one_lo * s.a, s.b, -1.0));
  return llm_seld(x == 0.0, x, llm_seld(d.k > 53, big, e.hi + e.lo));
}
LL_VECTOR double ll_tanh(double x) {
  llm_dd e = llm_expm1_dd(llm_exp_reduce_d(llm_clampd(-2.0 * fabs(x), -40.0, 0.0)));
  double den = e.hi + 2.0, den_lo = ((2.0 - den) + e.hi) + e.lo, q = -e.hi / den;
  double rho = LLM_FMA(-q, den_lo, LLM_FMA(q, -den, -e.hi) - e.lo);
  return copysign(LLM_FMA(rho, LLM_FMA(0.5, q, 0.5), q), x);
}
LL_VECTOR double ll_sigmoid(double x) {
  llm_exp_d d = llm_exp_reduce_d(llm_clampd(-fabs(x), -746.0, 0.0));
  double s = llm_pow2d(llm_clampd(d.shifted, LLM_MAGIC - 1022.0, INFINITY), 0.0), one = 1.0 + d.p;
  double e = s * one, e_lo = s * (((1.0 - one) + d.p) + d.p_lo);
  double den = 1.0 + e, den_lo = ((1.0 - den) + e) + e_lo;
  int pos = x >= 0.0;
  double num = llm_seld(pos, 1.0, e), q = num / den;
  double rho = LLM_FMA(-q, den_lo, LLM_FMA(-q, den, num) + llm_seld(pos, 0.0, e_lo));
  return llm_seld(x < -600.0, llm_exp_scale_d(d), LLM_FMA(rho, llm_seld(pos, q, 1.0 - q), q));
}
/* log(1 + f) = f - (hfsq - s (hfsq + R(s^2))), s = f / (2 + f), hfsq = f^2/2, |R error| <
 * 2^-58.45 (fdlibm's log). */
typedef struct { double k, f; } llm_logx_d;
LL_MATH llm_logx_d llm_log_split_d(double x) {
  uint64_t xb = llm_bits_d(x), scaled = llm_bits_d(x * 18014398509481984.0); /* 2^54 */
  int sub = (xb & 0x7fffffffffffffffu) < 0x0010000000000000u;
  uint64_t b = llm_selq(sub, scaled, xb), mant = b & 0x000fffffffffffffu;
  int below = mant < 0x0006a09e667f3bcdu; /* mantissa of sqrt2 */
  double e = llm_double(0x4330000000000000u | ((b >> 52) & 0x7ff)) - 4503599627370496.0;
  llm_logx_d o = {e - llm_seld(sub, 1023.0 + 54.0, 1023.0) + llm_seld(below, 0.0, 1.0),
                  llm_double(mant | llm_selq(below, 0x3ff0000000000000u, 0x3fe0000000000000u)) - 1.0};
  return o;
}
LL_MATH llm_dd llm_log_poly_d(double f) { /* hi = hfsq, lo = s (hfsq + R) */
  double s = f / (2.0 + f), z = s * s, w = z * z, hfsq = 0.5 * f * f;
  double t1 = w * LLM_FMA(w, LLM_FMA(w, 1.531383769920937332e-01, 2.222219843214978396e-01),
                          3.999999999940941908e-01);
  double t2 = LLM_FMA(w, LLM_FMA(w, 1.479819860511658591e-01, 1.818357216161805012e-01),
                      2.857142874366239149e-01);
  llm_dd o = {hfsq, s * (hfsq + (t1 + z * LLM_FMA(w, t2, 6.666666666666735130e-01)))};
  return o;
}
LL_VECTOR double ll_log(double x) {
  llm_logx_d s = llm_log_split_d(x);
  llm_dd p = llm_log_poly_d(s.f);
  uint64_t b = llm_bits_d(x), m = b & 0x7fffffffffffffffu;
  double r = s.k * 6.93147180369123816490e-01 - ((p.hi - (p.lo + s.k * 1.90821492927058770002e-10)) - s.f);
  return llm_seld(m == 0, -INFINITY, llm_seld((int)(b >> 63) | (m > 0x7ff0000000000000u), NAN,
                                             llm_seld(m == 0x7ff0000000000000u, INFINITY, r)));
}
/* libm, not vectorized. gelu: 0.5 x erfc(-x / sqrt2) in long double, whose range keeps erfc
 * normal where the result is subnormal, whose precision absorbs erfc's (~x^2) amplification of
 * the rounding of -x / sqrt2. */
LL_VECTOR double ll_gelu(double x) {
  long double r = 0.5L * x * erfcl(-x * 0.707106781186547524400844362104849039L);
  return fabs(x) <= 40.0 ? (double)r : (x < 0.0 ? -0.0 : x);
}
LL_MATH double ll_log2(double x) { return log2(x); }
LL_MATH double ll_log1p(double x) { return log1p(x); }
LL_MATH double ll_pow(double x, double y) { /* the exact cases of ll_powf, then libm */
  return y == 2.0 ? x * x : y == -1.0 ? 1.0 / x : y == 1.0 ? x : (y == 0.5) & (x >= 0.0) ? sqrt(x) + 0.0 : pow(x, y);
}
LL_MATH double ll_sin(double x) { return sin(x); }
LL_MATH double ll_cos(double x) { return cos(x); }
LL_MATH double ll_tan(double x) { return tan(x); }
LL_MATH float ll_atan2f(float y, float x) { return atan2f(y, x); }
LL_MATH double ll_atan2(double y, double x) { return atan2(y, x); }

/* ---- exp2 (the float32 one computed in double and rounded once: 0.5 ulp plus the double's
 * ~1e-12 relative): x = k + f, k = round(x), f exact, e^(f ln2) with ln2 in two
 * parts, as exp; exact for integer x (so the float 2^-150 is a tie that rounds to 0); 2^-1075
 * rounds to 0. */
LL_VECTOR double ll_exp2(double x) {
  double c = llm_clampd(x, -1076.0, 1025.0), shifted = c + LLM_MAGIC, f = c - (shifted - LLM_MAGIC);
  double r = f * 0.6931471805599453, r_lo = LLM_FMA(f, 0.6931471805599453, -r) + f * 2.3190468138462996e-17;
  return llm_exp_scale_d(llm_exp_poly_d(r, r_lo, shifted));
}
LL_VECTOR float ll_exp2f(float x) { return (float)ll_exp2((double)x); }
/* ---- erf, erfc (float32): in double from a = |x| clamped to 10.1, rounded once; both parts are
 * computed for every element (selects, one double division; 50x faster than a series and a
 * continued fraction in double, and 0.51 / 0.56 ulp instead of 0.50).
 *   a < 1:  erf a = a + a Q(a^2), Q the degree-7 minimax fit of erf(a) / a - 1 (error < 3.3e-11).
 *   a >= 1: erfc a = e^-a^2 P(t - tc), t = 1 / (1 + a/2), P the degree-9 minimax fit of
 *           erfc(a) e^(a^2) (relative error < 6.1e-10). a^2 = hi + lo split exactly (its rounding
 *           would cost ~a^2 ulp): e^-a^2 = e^-hi (1 - lo), e^-hi from ll_expf's reduction and
 *           polynomial, 1 + p + p_lo summed in double (a float e^-hi would cost 1 ulp more).
 *           erfc(10.1) < 2^-150 rounds to 0.
 * erf = 1 - erfc and erfc = 1 - erf where those do not cancel (a >= 1, a < 1); erfc(-a) = 2 -
 * erfc(a). Coefficients fitted with mpmath (Lawson's iteration on Chebyshev nodes). */
LL_MATH double llm_erf_small_d(double a) { /* a in [0, 1) */
  double z = a * a, q = LLM_FMA(-9.6801400921164849e-06, z, 1.1270545783710617e-04);
  q = LLM_FMA(q, z, -8.4847116270246603e-04); q = LLM_FMA(q, z, 5.2210748902366266e-03);
  q = LLM_FMA(q, z, -2.6865445825660944e-02); q = LLM_FMA(q, z, 1.1283782747271945e-01);
  q = LLM_FMA(q, z, -3.7612638483813510e-01); q = LLM_FMA(q, z, 1.2837916706315861e-01);
  return LLM_FMA(a, q, a);
}
LL_MATH double llm_erfc_tail_d(float a) { /* a in [1, 10.1] */
  float hi = a * a, lo = LLM_FMAF(a, a, -hi);
  double u = 1.0 / (1.0 + 0.5 * (double)a) - 0.41597795486450195;
  double p = LLM_FMA(-6.2939920457722107e-02, u, 7.4256978414124250e-02);
  p = LLM_FMA(p, u, 9.2732743658837685e-02); p = LLM_FMA(p, u, -1.2099906341733482e-01);
  p = LLM_FMA(p, u, -1.7883221946041114e-01); p = LLM_FMA(p, u, 1.4552716371931884e-01);
  p = LLM_FMA(p, u, 5.9680343838069572e-01); p = LLM_FMA(p, u, 8.1117695170104387e-01);
  p = LLM_FMA(p, u, 7.0512049901789497e-01); p = LLM_FMA(p, u, 1.9006286989729634e-01);
  llm_exp_f e = llm_exp_reduce_f(-hi); /* e^-hi = (1 + p + p_lo) 2^k, k in [-148, -1] */
  double scale = llm_double((uint64_t)(int64_t)(e.k + 1023) << 52);
  return ((1.0 + (double)e.p) + (double)e.p_lo) * scale * LLM_FMA(-p, (double)lo, p);
}
LL_VECTOR float ll_erff(float x) {
  float a = llm_clampf(fabsf(x), 0.0f, 10.1f);
  double d = a, r = llm_seld(d < 1.0, llm_erf_small_d(d), 1.0 - llm_erfc_tail_d(a));
  return (float)copysign(r, (double)x); /* erf(-0) = -0, erf(+-inf) = +-1 */
}
LL_VECTOR float ll_erfcf(float x) {
  float a = llm_clampf(fabsf(x), 0.0f, 10.1f);
  double d = x, small = llm_erf_small_d((double)a), tail = llm_erfc_tail_d(a);
  return (float)llm_seld(d >= 1.0, tail, llm_seld(d <= -1.0, 2.0 - tail, 1.0 - copysign(small, d)));
}
/* libm, not vectorized: the cancellation of 1 - erf leaves the double erfc no cheap form. */
LL_MATH double ll_erf(double x) { return erf(x); }
LL_MATH double ll_erfc(double x) { return erfc(x); }

/* ---- asin acos atan sinh cosh asinh acosh atanh log10: libm's double functions (not vectorized,
 * the same libm in every tier); the float32 ones call them and round once (0.5 ulp plus the
 * double's error, like erf). Special values are libm's: asin(2) = NaN, atanh(1) = inf. */
LL_MATH double ll_asin(double x) { return asin(x); }
LL_MATH double ll_acos(double x) { return acos(x); }
LL_MATH double ll_atan(double x) { return atan(x); }
LL_MATH double ll_sinh(double x) { return sinh(x); }
LL_MATH double ll_cosh(double x) { return cosh(x); }
LL_MATH double ll_asinh(double x) { return asinh(x); }
LL_MATH double ll_acosh(double x) { return acosh(x); }
LL_MATH double ll_atanh(double x) { return atanh(x); }
LL_MATH double ll_log10(double x) { return log10(x); }
LL_MATH float ll_asinf(float x) { return (float)asin((double)x); }
LL_MATH float ll_acosf(float x) { return (float)acos((double)x); }
LL_MATH float ll_atanf(float x) { return (float)atan((double)x); }
LL_MATH float ll_sinhf(float x) { return (float)sinh((double)x); }
LL_MATH float ll_coshf(float x) { return (float)cosh((double)x); }
LL_MATH float ll_asinhf(float x) { return (float)asinh((double)x); }
LL_MATH float ll_acoshf(float x) { return (float)acosh((double)x); }
LL_MATH float ll_atanhf(float x) { return (float)atanh((double)x); }
LL_MATH float ll_log10f(float x) { return (float)log10((double)x); }

/* ---- rounding, Lua // and %, conversions. floor from nearbyint (GCC vectorizes nearbyint, not
 * floor): exact, keeps -0, NaN and inf. Round half to even is nearbyint. */
LL_MATH float ll_floorf(float x) { float r = nearbyintf(x); return r - llm_self(r > x, 1.0f, 0.0f); }
LL_MATH double ll_floor(double x) { double r = nearbyint(x); return r - llm_seld(r > x, 1.0, 0.0); }
LL_MATH float ll_ceilf(float x) { return -ll_floorf(-x); }
LL_MATH double ll_ceil(double x) { return -ll_floor(-x); }
LL_MATH float ll_truncf(float x) { return copysignf(ll_floorf(fabsf(x)), x); }
LL_MATH double ll_trunc(double x) { return copysign(ll_floor(fabs(x)), x); }
LL_MATH float ll_roundf(float x) { return nearbyintf(x); }
LL_MATH double ll_round(double x) { return nearbyint(x); }
/* frac(x) = x - trunc(x), exact; frac(+-inf) = NaN, as PyTorch. */
LL_MATH float ll_fracf(float x) { return x - ll_truncf(x); }
LL_MATH double ll_frac(double x) { return x - ll_trunc(x); }
/* Lua float // is floor(a / b); % is fmod given b's sign (Lua 5.4's luai_nummod): 5.5 % -2 =
 * -0.5, -5 % inf = inf, -5 % -inf = -5. fmod is a libm call: loops with % are not vectorized. */
LL_MATH float ll_floordivf(float a, float b) { return ll_floorf(a / b); }
LL_MATH double ll_floordiv(double a, double b) { return ll_floor(a / b); }
LL_MATH float ll_modf(float a, float b) {
  float m = fmodf(a, b);
  return (m > 0 ? b < 0 : m < 0 && b > 0) ? m + b : m;
}
LL_MATH double ll_mod(double a, double b) {
  double m = fmod(a, b);
  return (m > 0 ? b < 0 : m < 0 && b > 0) ? m + b : m;
}
/* Lua integer // (toward -inf) and % (b's sign); b != 0 is the caller's check; minint // -1 =
 * minint, minint % -1 = 0, no trap. int32 via double (vectorizes; exact: a non-integer quotient
 * of int32s is >= 2^-31 q from an integer); int64 divides (scalar). */
LL_MATH double llm_qfloor(int32_t a, int32_t b) { return ll_floor((double)a / (double)b); }
LL_MATH int32_t ll_floordiv_i32(int32_t a, int32_t b) {
  return (int32_t)llm_seld(llm_qfloor(a, b) >= 0x1p31, -0x1p31, llm_qfloor(a, b));
}
LL_MATH int32_t ll_mod_i32(int32_t a, int32_t b) { return (int32_t)(a - llm_qfloor(a, b) * b); }
LL_MATH int64_t ll_floordiv_i64(int64_t a, int64_t b) { /* b = -1: -a, wrapping */
  int64_t d = b == -1 ? 1 : b, q = a / d - ((a % d != 0) & ((a ^ d) < 0));
  return b == -1 ? (int64_t)(0u - (uint64_t)a) : q;
}
LL_MATH int64_t ll_mod_i64(int64_t a, int64_t b) {
  int64_t d = b == -1 ? 1 : b, m = a % d;
  return (m != 0) & ((m ^ d) < 0) ? m + d : m;
}
/* Float -> int, truncating: ll_F_fits_I says whether the truncation is a value of I (false for
 * NaN and +-inf); ll_F_to_I gives 0 where it is not (a cast then raises an error). */
LL_MATH int ll_f32_fits_i32(float x) { return (x >= -0x1p31f) & (x < 0x1p31f); }
LL_MATH int ll_f32_fits_i64(float x) { return (x >= -0x1p63f) & (x < 0x1p63f); }
LL_MATH int ll_f64_fits_i32(double x) { return (x > -0x1p31 - 1) & (x < 0x1p31); }
LL_MATH int ll_f64_fits_i64(double x) { return (x >= -0x1p63) & (x < 0x1p63); }
LL_MATH int32_t ll_f32_to_i32(float x) { return (int32_t)llm_self(ll_f32_fits_i32(x), x, 0); }
LL_MATH int64_t ll_f32_to_i64(float x) { return (int64_t)llm_self(ll_f32_fits_i64(x), x, 0); }
LL_MATH int32_t ll_f64_to_i32(double x) { return (int32_t)llm_seld(ll_f64_fits_i32(x), x, 0); }
LL_MATH int64_t ll_f64_to_i64(double x) { return (int64_t)llm_seld(ll_f64_fits_i64(x), x, 0); }

/* ---- folds and softmax rows ---------------------------------------------------------------
 * The one float order of reductions (tensor/kernels/reduce_order.h; eager and generated code
 * follow it, so results have the same bits). A block of n values folds in 4 x 32-byte vectors
 * of lanes: value i into lane i % (4 * LANES), each lane from the identity (float + is not
 * associative, so the compiler would not vectorize a plain loop); a short tail is padded with
 * the identity (exact); then (v0 + v1) + (v2 + v3) and its lanes left to right. Block results
 * merge as a binary counter (NAME_push, NAME_total). Max and min let NaN win. */
typedef float llm_f32x8 __attribute__((vector_size(32)));
typedef double llm_f64x4 __attribute__((vector_size(32)));
typedef int32_t llm_i32x8 __attribute__((vector_size(32)));
typedef int64_t llm_i64x4 __attribute__((vector_size(32)));
#define LLM_ADD(a, b) ((a) + (b))
#define LLM_MUL(a, b) ((a) * (b))
/* NaN wins (the generated scalar folds use these too) */
#define LL_MAX(a, b) (((b) > (a)) | ((b) != (b)) ? (b) : (a))
#define LL_MIN(a, b) (((b) < (a)) | ((b) != (b)) ? (b) : (a))
#define LLM_VMAX(V, I, a, b) \
  ((V)((((I)(b)) & (((b) > (a)) | ((b) != (b)))) | (((I)(a)) & ~(((b) > (a)) | ((b) != (b))))))
#define LLM_VMIN(V, I, a, b) \
  ((V)((((I)(b)) & (((b) < (a)) | ((b) != (b)))) | (((I)(a)) & ~(((b) < (a)) | ((b) != (b))))))
#define LLM_VADD(V, I, a, b) ((a) + (b))
#define LLM_VMUL(V, I, a, b) ((a) * (b))
#define LLM_FOLD(name, T, V, I, LANES, IDENTITY, VMERGE, MERGE)                     \
  LL_MATH T name(const T* p, int64_t n) {                                           \
    V a0, a1, a2, a3, x0, x1, x2, x3;                                               \
    for (int l = 0; l < LANES; ++l) a0[l] = (IDENTITY);                             \
    a1 = a0;                                                                        \
    a2 = a0;                                                                        \
    a3 = a0;                                                                        \
    int64_t i = 0;                                                                  \
    for (; i + 4 * LANES <= n; i += 4 * LANES) {                                    \
      memcpy(&x0, p + i, sizeof x0);                                                \
      memcpy(&x1, p + i + LANES, sizeof x1);                                        \
      memcpy(&x2, p + i + 2 * LANES, sizeof x2);                                    \
      memcpy(&x3, p + i + 3 * LANES, sizeof x3);                                    \
      a0 = VMERGE(V, I, a0, x0);                                                    \
      a1 = VMERGE(V, I, a1, x1);                                                    \
      a2 = VMERGE(V, I, a2, x2);                                                    \
      a3 = VMERGE(V, I, a3, x3);                                                    \
    }                                                                               \
    if (i < n) {                                                                    \
      T t[4 * LANES];                                                               \
      for (int l = 0; l < 4 * LANES; ++l) t[l] = i + l < n ? p[i + l] : (IDENTITY); \
      memcpy(&x0, t, sizeof x0);                                                    \
      memcpy(&x1, t + LANES, sizeof x1);                                            \
      memcpy(&x2, t + 2 * LANES, sizeof x2);                                        \
      memcpy(&x3, t + 3 * LANES, sizeof x3);                                        \
      a0 = VMERGE(V, I, a0, x0);                                                    \
      a1 = VMERGE(V, I, a1, x1);                                                    \
      a2 = VMERGE(V, I, a2, x2);                                                    \
      a3 = VMERGE(V, I, a3, x3);                                                    \
    }                                                                               \
    a0 = VMERGE(V, I, VMERGE(V, I, a0, a1), VMERGE(V, I, a2, a3));                  \
    T r = a0[0];                                                                    \
    for (int l = 1; l < LANES; ++l) r = MERGE(r, a0[l]);                            \
    return r;                                                                       \
  }                                                                                 \
  /* Block `index` merges with the subtrees its trailing one bits name; what is   \
   * left merges from the top of the stack down. */                                \
  LL_MATH void name##_push(T* level, int* depth, int64_t index, T part) {           \
    for (int64_t c = index; c & 1; c >>= 1) {                                       \
      --*depth;                                                                     \
      part = MERGE(level[*depth], part);                                            \
    }                                                                               \
    level[(*depth)++] = part;                                                       \
  }                                                                                 \
  LL_MATH T name##_total(const T* level, int depth) {                               \
    if (depth == 0) return (IDENTITY);                                              \
    T t = level[depth - 1];                                                         \
    for (int d = depth - 2; d >= 0; --d) t = MERGE(level[d], t);                    \
    return t;                                                                       \
  }
LLM_FOLD(ll_sum_f32, float, llm_f32x8, llm_i32x8, 8, 0.0f, LLM_VADD, LLM_ADD)
LLM_FOLD(ll_sum_f64, double, llm_f64x4, llm_i64x4, 4, 0.0, LLM_VADD, LLM_ADD)
LLM_FOLD(ll_prod_f32, float, llm_f32x8, llm_i32x8, 8, 1.0f, LLM_VMUL, LLM_MUL)
LLM_FOLD(ll_prod_f64, double, llm_f64x4, llm_i64x4, 4, 1.0, LLM_VMUL, LLM_MUL)
LLM_FOLD(ll_max_f32, float, llm_f32x8, llm_i32x8, 8, -(float)INFINITY, LLM_VMAX, LL_MAX)
LLM_FOLD(ll_max_f64, double, llm_f64x4, llm_i64x4, 4, -(double)INFINITY, LLM_VMAX, LL_MAX)
LLM_FOLD(ll_min_f32, float, llm_f32x8, llm_i32x8, 8, (float)INFINITY, LLM_VMIN, LL_MIN)
LLM_FOLD(ll_min_f64, double, llm_f64x4, llm_i64x4, 4, (double)INFINITY, LLM_VMIN, LL_MIN)

/* softmax (log = 0) or log_softmax (log = 1) of the row r[0..n) into y (y may be r), as the
 * eager kernel and generated code both compute it: m = max (one fold), e = exp(r - m), s = the
 * sum of e in the reduction order (blocks of LL_FOLD_BLOCK, merged by the counter); y = e / s
 * as e * (1 / s), or (r - m) - log(s) (r - m is exact near m; folding m into one offset would
 * round it). */
#define LL_FOLD_BLOCK 1024
#define LLM_SOFTMAX_ROW(name, T, SUFFIX, DTYPE)                                    \
  LL_MATH void name(const T* r, T* y, int64_t n, int take_log) {                   \
    const T m = ll_max_##DTYPE(r, n);                                              \
    T level[64];                                                                   \
    int depth = 0;                                                                 \
    if (take_log) {                                                                \
      T tmp[LL_FOLD_BLOCK];                                                        \
      for (int64_t k0 = 0, b = 0; k0 < n; k0 += LL_FOLD_BLOCK, ++b) {              \
        const int64_t kn = n - k0 < LL_FOLD_BLOCK ? n - k0 : LL_FOLD_BLOCK;        \
        for (int64_t k = 0; k < kn; ++k) tmp[k] = ll_exp##SUFFIX(r[k0 + k] - m);   \
        ll_sum_##DTYPE##_push(level, &depth, b, ll_sum_##DTYPE(tmp, kn));          \
      }                                                                            \
      const T l = ll_log##SUFFIX(ll_sum_##DTYPE##_total(level, depth));            \
      for (int64_t k = 0; k < n; ++k) y[k] = (r[k] - m) - l;                       \
    } else {                                                                       \
      for (int64_t k = 0; k < n; ++k) y[k] = ll_exp##SUFFIX(r[k] - m);             \
      for (int64_t k0 = 0, b = 0; k0 < n; k0 += LL_FOLD_BLOCK, ++b) {              \
        const int64_t kn = n - k0 < LL_FOLD_BLOCK ? n - k0 : LL_FOLD_BLOCK;        \
        ll_sum_##DTYPE##_push(level, &depth, b, ll_sum_##DTYPE(y + k0, kn));       \
      }                                                                            \
      const T scale = (T)1 / ll_sum_##DTYPE##_total(level, depth);                 \
      for (int64_t k = 0; k < n; ++k) y[k] *= scale;                               \
    }                                                                              \
  }
LLM_SOFTMAX_ROW(ll_softmax_row_f32, float, f, f32)
LLM_SOFTMAX_ROW(ll_softmax_row_f64, double, , f64)

/* clang-format on */
#endif /* LAZYLUA_KERNEL_MATH_H */
