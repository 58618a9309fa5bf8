// kernel_math_test.cpp - accuracy, special values, Lua integer semantics and
// vectorization of tensor/kernels/kernel_math.h, the math library that generated
// kernels include.
//
// Accuracy is measured in ulp of the exact result (the function evaluated in
// a wider type: double libm for float32, long double libm for float64), over
// a dense sweep of every float bit pattern (every kDefaultStride-th one; the
// environment variable LAZYLUA_KERNEL_MATH_STRIDE=1 makes it exhaustive and
// the float64 samples 40 times larger), plus the 2^17 floats around each
// interesting point (0, +-1, the overflow and underflow thresholds ...). The
// bounds asserted are the figures stated in kernel_math.h.
#include "tensor/kernels/kernel_math.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

// Every 127th bit pattern: 34 million floats per function. 127 is odd, so the
// low mantissa bits take every value too.
constexpr uint64_t kDefaultStride = 127;
// Functions are applied in chunks of a constant size, as generated kernels
// do, so that GCC vectorizes those loops here too.
constexpr size_t kChunk = 4096;

uint64_t sweep_stride() {
  const char* text = std::getenv("LAZYLUA_KERNEL_MATH_STRIDE");
  const uint64_t stride = text ? std::strtoull(text, nullptr, 10) : 0;
#ifdef __FMA__
  return stride > 0 ? stride : kDefaultStride;
#else  // __builtin_fma is a libm call here (no -march=native): sample less
  return stride > 0 ? stride : 16 * kDefaultStride + 1;
#endif
}

float float_from_bits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}
uint32_t bits_of(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  return bits;
}
uint64_t bits_of(double x) {
  uint64_t bits;
  std::memcpy(&bits, &x, 8);
  return bits;
}

// |result - exact| in ulp of exact, for a format with `mantissa_bits`
// (counting the implicit one), smallest exponent `min_exponent` (of the ulp
// of subnormals) and overflow at 2^max_exponent. Infinite results count as
// 2^max_exponent so that a value that rounds to FLT_MAX but came out as inf
// (or the reverse) costs half an ulp, not infinity. NaN must match NaN.
double ulp_error(double result, long double exact, int mantissa_bits, int min_exponent,
                 int max_exponent) {
  if (std::isnan(exact)) return std::isnan(result) ? 0.0 : INFINITY;
  if (std::isnan(result)) return INFINITY;
  if (std::isinf(exact)) return result == exact ? 0.0 : INFINITY;
  const long double limit = std::ldexp(1.0L, max_exponent);
  const long double value = std::isinf(result) ? std::copysign(limit, (long double)result) : result;
  const long double clamped = std::max(-limit, std::min(limit, exact));
  int exponent = 0;
  std::frexp(clamped, &exponent);  // clamped = m 2^exponent, m in [0.5, 1)
  if (clamped == 0) exponent = min_exponent + mantissa_bits;
  exponent = std::min(exponent, max_exponent);
  const long double ulp = std::ldexp(1.0L, std::max(exponent - mantissa_bits, min_exponent));
  return static_cast<double>(std::fabs(value - clamped) / ulp);
}
// The same for float results and double exact values, in double arithmetic:
// the sweeps call it billions of times.
double ulp_error_f32(float result, double exact) {
  if (std::isnan(exact) || std::isnan(result) || std::isinf(exact))
    return ulp_error(result, exact, 24, -149, 128);
  const double limit = 0x1p128;
  const double value = std::isinf(result) ? std::copysign(limit, result) : result;
  const double clamped = std::max(-limit, std::min(limit, exact));
  // The exponent of |clamped| from its bits (>= -126: subnormals share 2^-149).
  const int exponent =
      std::min(127, std::max(-126, static_cast<int>((bits_of(clamped) >> 52) & 0x7ff) - 1023));
  const double inverse_ulp =
      std::bit_cast<double>(static_cast<uint64_t>(23 - exponent + 1023) << 52);
  return std::fabs(value - clamped) * inverse_ulp;
}
double ulp_error_f64(double result, long double exact) {
  return ulp_error(result, exact, 53, -1074, 1024);
}

struct ErrorStats {
  double max_ulp = 0;
  double max_relative = 0;    // over results that are normal numbers
  double max_ulp_normal = 0;  // the same
  double worst_input = 0;
  double worst_result = 0;
  long double worst_exact = 0;
  uint64_t count = 0;
  // Exact is double for float results (cheaper) and long double for double results.
  template <typename Exact>
  void add(double input, double result, Exact exact, double ulps, double normal_min,
           double normal_max) {
    ++count;
    if (ulps > max_ulp || std::isnan(ulps)) {
      max_ulp = ulps;
      worst_input = input;
      worst_result = result;
      worst_exact = exact;
    }
    const Exact magnitude = std::fabs(exact);
    if (magnitude >= normal_min && magnitude <= normal_max && std::isfinite(result)) {
      max_relative =
          std::max(max_relative, static_cast<double>(std::fabs(result - exact) / magnitude));
      max_ulp_normal = std::max(max_ulp_normal, ulps);
    }
  }
  void merge(const ErrorStats& other) {
    if (other.max_ulp > max_ulp) {
      max_ulp = other.max_ulp;
      worst_input = other.worst_input;
      worst_result = other.worst_result;
      worst_exact = other.worst_exact;
    }
    max_relative = std::max(max_relative, other.max_relative);
    max_ulp_normal = std::max(max_ulp_normal, other.max_ulp_normal);
    count += other.count;
  }
};

// Runs work(begin, end, stats) over [0, total) on two threads and merges.
template <typename Work>
ErrorStats in_two_threads(uint64_t total, Work work) {
  ErrorStats halves[2];
  std::thread helper([&] { work(total / 2, total, halves[1]); });
  work(0, total / 2, halves[0]);
  helper.join();
  halves[0].merge(halves[1]);
  return halves[0];
}

// ---- float32 unary functions: one row per function -------------------------

using F32 = float (*)(float);
using Reference = double (*)(double);

template <F32 function>
void apply_chunk(const float* __restrict in, float* __restrict out) {
  for (size_t i = 0; i < kChunk; ++i) out[i] = function(in[i]);
}

// The exact gelu x Phi(x) = 0.5 x erfc(-x / sqrt2), in double, with the
// rounding error of -x / sqrt2 (amplified ~x^2 times by erfc) corrected to
// first order. Good to a few double ulp, which is plenty for float.
double gelu_reference(double x) {
  if (!(std::fabs(x) <= 40.0)) return x < 0 ? -0.0 : x;
  const double u = -x * 0.70710678118654757;
  const double u_error = std::fma(-x, 0.70710678118654757, -u) + x * 4.833646656726457e-17;
  return 0.5 * x * (std::erfc(u) - u_error * 1.1283791670955126 * std::exp(-u * u));
}
double sigmoid_reference(double x) {
  const double e = std::exp(-std::fabs(x));
  return (x >= 0 ? 1.0 : e) / (1.0 + e);
}
// Beyond |x| = 6e6 ll_sinf and friends return NaN, by design.
double sin_reference(double x) {
  return std::fabs(x) <= 6e6 ? std::sin(x) : NAN;
}
double cos_reference(double x) {
  return std::fabs(x) <= 6e6 ? std::cos(x) : NAN;
}
double tan_reference(double x) {
  return std::fabs(x) <= 6e6 ? std::tan(x) : NAN;
}

using ApplyF32 = void (*)(const float*, float*);  // kChunk elements

struct F32Case {
  const char* name;
  ApplyF32 apply;
  Reference reference;
  double max_ulp;  // the bound kernel_math.h states
};

const F32Case kF32Cases[] = {
    {"expf", apply_chunk<ll_expf>, [](double x) { return std::exp(x); }, 0.77},
    {"expm1f", apply_chunk<ll_expm1f>, [](double x) { return std::expm1(x); }, 0.64},
    {"logf", apply_chunk<ll_logf>, [](double x) { return std::log(x); }, 0.63},
    {"log2f", apply_chunk<ll_log2f>, [](double x) { return std::log2(x); }, 0.73},
    {"log1pf", apply_chunk<ll_log1pf>, [](double x) { return std::log1p(x); }, 0.64},
    {"tanhf", apply_chunk<ll_tanhf>, [](double x) { return std::tanh(x); }, 0.60},
    {"sigmoidf", apply_chunk<ll_sigmoidf>, sigmoid_reference, 0.77},
    {"geluf", apply_chunk<ll_geluf>, gelu_reference, 7.6},
    {"sqrtf", apply_chunk<ll_sqrtf>, [](double x) { return std::sqrt(x); }, 0.5},
    {"sinf", apply_chunk<ll_sinf>, sin_reference, 0.67},
    {"cosf", apply_chunk<ll_cosf>, cos_reference, 0.67},
    {"tanf", apply_chunk<ll_tanf>, tan_reference, 0.81},
    {"erff", apply_chunk<ll_erff>, [](double x) { return std::erf(x); }, 0.51},
    {"erfcf", apply_chunk<ll_erfcf>, [](double x) { return std::erfc(x); }, 0.56},
    {"exp2f", apply_chunk<ll_exp2f>, [](double x) { return std::exp2(x); }, 0.51},
};

// The float32 functions that call libm's double ones and round once (as
// generated code calls them too: they are not in the compiled-as-C check
// below, which is about the branch-free vectorized code). References in
// long double.
const F32Case kF32LibmCases[] = {
    {"asinf", apply_chunk<ll_asinf>, [](double x) { return (double)std::asin((long double)x); },
     0.51},
    {"acosf", apply_chunk<ll_acosf>, [](double x) { return (double)std::acos((long double)x); },
     0.51},
    {"atanf", apply_chunk<ll_atanf>, [](double x) { return (double)std::atan((long double)x); },
     0.51},
    {"sinhf", apply_chunk<ll_sinhf>, [](double x) { return (double)std::sinh((long double)x); },
     0.51},
    {"coshf", apply_chunk<ll_coshf>, [](double x) { return (double)std::cosh((long double)x); },
     0.51},
    {"asinhf", apply_chunk<ll_asinhf>, [](double x) { return (double)std::asinh((long double)x); },
     0.51},
    {"acoshf", apply_chunk<ll_acoshf>, [](double x) { return (double)std::acosh((long double)x); },
     0.51},
    {"atanhf", apply_chunk<ll_atanhf>, [](double x) { return (double)std::atanh((long double)x); },
     0.51},
    {"log10f", apply_chunk<ll_log10f>, [](double x) { return (double)std::log10((long double)x); },
     0.51},
};

// Bit patterns of the points whose neighbourhoods are swept densely.
std::vector<uint32_t> interesting_points() {
  std::vector<uint32_t> points;
  for (float x :
       {0.0f,    1.0f,  2.0f,       0.5f,       88.72f,     89.0f, 87.33f, 103.97f, 104.0f,
        9.0f,    20.0f, 0.6931472f, 1.5707964f, 3.1415927f, 13.0f, 0.35f,  1e-7f,   1.17549435e-38f,
        3.4e38f, 6e6f}) {
    points.push_back(bits_of(x));
    points.push_back(bits_of(-x));
  }
  return points;
}

// Every stride-th float bit pattern, then the neighbourhoods of the interesting points.
ErrorStats sweep_f32(const std::function<void(const float*, float*)>& apply, Reference reference,
                     uint64_t stride) {
  const std::vector<uint32_t> points = interesting_points();
  constexpr uint64_t kNeighbourhood = 1 << 16;  // floats on each side of a point
  const uint64_t sweep_chunks = ((uint64_t{1} << 32) / stride + kChunk - 1) / kChunk;
  const uint64_t point_chunks = points.size() * 2 * kNeighbourhood / kChunk;
  return in_two_threads(sweep_chunks + point_chunks, [&](uint64_t begin, uint64_t end,
                                                         ErrorStats& stats) {
    std::vector<float> in(kChunk), out(kChunk);
    for (uint64_t chunk = begin; chunk < end; ++chunk) {
      for (size_t i = 0; i < kChunk; ++i) {
        uint32_t bits;
        if (chunk < sweep_chunks) {
          bits = static_cast<uint32_t>((chunk * kChunk + i) * stride);
        } else {
          const uint64_t k = (chunk - sweep_chunks) * kChunk + i;
          const uint32_t center = points[k / (2 * kNeighbourhood)];
          const int64_t offset = static_cast<int64_t>(k % (2 * kNeighbourhood)) - kNeighbourhood;
          // Walk through zero into the negatives rather than wrapping the bits.
          const int64_t signed_bits = (center & 0x7fffffffu) + offset;
          bits = signed_bits >= 0 ? static_cast<uint32_t>(signed_bits) | (center & 0x80000000u)
                                  : static_cast<uint32_t>(-signed_bits) | (~center & 0x80000000u);
        }
        in[i] = float_from_bits(bits);
      }
      apply(in.data(), out.data());
      for (size_t i = 0; i < kChunk; ++i) {
        const double exact = reference(in[i]);
        stats.add(in[i], out[i], exact, ulp_error_f32(out[i], exact), FLT_MIN, FLT_MAX);
      }
    }
  });
}

class KernelMathF32 : public testing::TestWithParam<F32Case> {};

TEST_P(KernelMathF32, AccuracyOverTheWholeRange) {
  const F32Case& c = GetParam();
  const ErrorStats stats = sweep_f32(c.apply, c.reference, sweep_stride());
  std::printf(
      "ll_%-9s max error %.3f ulp (bound %.2f; normal results %.3f ulp, relative %.3g) over"
      " %llu floats; worst at x = %.9g: %.9g, exact %.9g\n",
      c.name, stats.max_ulp, c.max_ulp, stats.max_ulp_normal, stats.max_relative,
      static_cast<unsigned long long>(stats.count), stats.worst_input, stats.worst_result,
      static_cast<double>(stats.worst_exact));
  EXPECT_LE(stats.max_ulp, c.max_ulp) << "at x = " << stats.worst_input;
}

INSTANTIATE_TEST_SUITE_P(KernelMath, KernelMathF32, testing::ValuesIn(kF32Cases),
                         [](const testing::TestParamInfo<F32Case>& param) {
                           return std::string(param.param.name);
                         });
INSTANTIATE_TEST_SUITE_P(KernelMathLibm, KernelMathF32, testing::ValuesIn(kF32LibmCases),
                         [](const testing::TestParamInfo<F32Case>& param) {
                           return std::string(param.param.name);
                         });

// ---- float64 unary functions ----------------------------------------------

using F64 = double (*)(double);
using ReferenceL = long double (*)(long double);

template <F64 function>
void apply_chunk_f64(const double* __restrict in, double* __restrict out) {
  for (size_t i = 0; i < kChunk; ++i) out[i] = function(in[i]);
}

long double sigmoid_reference_l(long double x) {
  const long double e = std::exp(-std::fabs(x));
  return (x >= 0 ? 1.0L : e) / (1.0L + e);
}
// -x / sqrt2 = u + du exactly enough (1/sqrt2 in two parts, FMA), and
// erfc(u + du) = erfc(u) - du 2/sqrt(pi) e^-u^2: erfc amplifies the relative
// error of u ~2u^2 times.
long double gelu_reference_l(long double x) {
  if (!(std::fabs(x) <= 40)) return x < 0 ? -0.0L : x;
  const long double high = 0.707106781186547524400844362104849039L;
  const long double low = 0.707106781186547524400844362104849039284835937688474036588L - high;
  const long double u = -x * high;
  const long double du = std::fma(-x, high, -u) - x * low;
  return 0.5L * x * (std::erfc(u) - du * 1.1283791670955125738961589031215452L * std::exp(-u * u));
}

struct F64Case {
  const char* name;
  void (*apply)(const double*, double*);
  ReferenceL reference;
  double max_ulp;
  double scale;  // inputs: random doubles of magnitude up to about `scale`
};

const F64Case kF64Cases[] = {
    {"exp", apply_chunk_f64<ll_exp>, [](long double x) { return std::exp(x); }, 0.80, 800},
    {"expm1", apply_chunk_f64<ll_expm1>, [](long double x) { return std::expm1(x); }, 0.80, 800},
    {"log", apply_chunk_f64<ll_log>, [](long double x) { return std::log(x); }, 0.80, 4},
    {"tanh", apply_chunk_f64<ll_tanh>, [](long double x) { return std::tanh(x); }, 0.75, 25},
    {"sigmoid", apply_chunk_f64<ll_sigmoid>, sigmoid_reference_l, 0.80, 800},
    // libm, or libm in long double (gelu): checked all the same.
    {"log2", apply_chunk_f64<ll_log2>, [](long double x) { return std::log2(x); }, 1.0, 4},
    {"log1p", apply_chunk_f64<ll_log1p>, [](long double x) { return std::log1p(x); }, 1.0, 4},
    {"gelu", apply_chunk_f64<ll_gelu>, gelu_reference_l, 1.0, 40},
    {"exp2", apply_chunk_f64<ll_exp2>, [](long double x) { return std::exp2(x); }, 0.80, 1100},
    // glibc's erf and erfc, measured: 1.09 and 2.92 ulp.
    {"erf", apply_chunk_f64<ll_erf>, [](long double x) { return std::erf(x); }, 1.1, 8},
    {"erfc", apply_chunk_f64<ll_erfc>, [](long double x) { return std::erfc(x); }, 3.0, 30},
    // glibc's, as measured.
    {"asin", apply_chunk_f64<ll_asin>, [](long double x) { return std::asin(x); }, 1.0, 1},
    {"acos", apply_chunk_f64<ll_acos>, [](long double x) { return std::acos(x); }, 1.0, 1},
    {"atan", apply_chunk_f64<ll_atan>, [](long double x) { return std::atan(x); }, 1.0, 100},
    {"sinh", apply_chunk_f64<ll_sinh>, [](long double x) { return std::sinh(x); }, 2.0, 700},
    {"cosh", apply_chunk_f64<ll_cosh>, [](long double x) { return std::cosh(x); }, 2.0, 700},
    {"asinh", apply_chunk_f64<ll_asinh>, [](long double x) { return std::asinh(x); }, 2.0, 100},
    {"acosh", apply_chunk_f64<ll_acosh>, [](long double x) { return std::acosh(x); }, 2.1, 100},
    {"atanh", apply_chunk_f64<ll_atanh>, [](long double x) { return std::atanh(x); }, 2.0, 1},
    {"log10", apply_chunk_f64<ll_log10>, [](long double x) { return std::log10(x); }, 2.0, 100},
};

// Three kinds of input: any bit pattern; random magnitudes 2^-60..scale of
// either sign; and 1 + small (log and log1p near their zero).
ErrorStats sweep_f64(const F64Case& c) {
  const uint64_t chunks = 3 * (sweep_stride() == 1 ? 4000 : 100);  // 1.2 million inputs
  return in_two_threads(chunks, [&](uint64_t begin, uint64_t end, ErrorStats& stats) {
    std::vector<double> in(kChunk), out(kChunk);
    for (uint64_t chunk = begin; chunk < end; ++chunk) {
      std::mt19937_64 random(chunk);
      std::uniform_real_distribution<double> unit(-1.0, 1.0);
      std::uniform_int_distribution<int> exponent(-60, 0);
      for (size_t i = 0; i < kChunk; ++i) {
        switch (chunk % 3) {
          case 0: {
            const uint64_t bits = random();
            std::memcpy(&in[i], &bits, 8);
            break;
          }
          case 1:
            in[i] = c.scale * unit(random) * std::ldexp(1.0, exponent(random) / 4);
            break;
          default:
            in[i] = 1.0 + unit(random) * std::ldexp(1.0, exponent(random));
        }
      }
      c.apply(in.data(), out.data());
      for (size_t i = 0; i < kChunk; ++i) {
        const long double exact = c.reference(in[i]);
        stats.add(in[i], out[i], exact, ulp_error_f64(out[i], exact), DBL_MIN, DBL_MAX);
      }
    }
  });
}

class KernelMathF64 : public testing::TestWithParam<F64Case> {};

TEST_P(KernelMathF64, Accuracy) {
  const F64Case& c = GetParam();
  const ErrorStats stats = sweep_f64(c);
  std::printf(
      "ll_%-8s max error %.3f ulp (bound %.2f; normal results %.3f ulp, relative %.3g) over"
      " %llu doubles; worst at x = %.17g\n",
      c.name, stats.max_ulp, c.max_ulp, stats.max_ulp_normal, stats.max_relative,
      static_cast<unsigned long long>(stats.count), stats.worst_input);
  EXPECT_LE(stats.max_ulp, c.max_ulp) << "at x = " << stats.worst_input;
}

INSTANTIATE_TEST_SUITE_P(KernelMath, KernelMathF64, testing::ValuesIn(kF64Cases),
                         [](const testing::TestParamInfo<F64Case>& param) {
                           return std::string(param.param.name);
                         });

// ---- special values ---------------------------------------------------------

// Same bits, or both NaN.
testing::AssertionResult same_float(float expected, float actual) {
  if ((std::isnan(expected) && std::isnan(actual)) || bits_of(expected) == bits_of(actual))
    return testing::AssertionSuccess();
  return testing::AssertionFailure()
         << "expected " << expected << " (bits " << std::hex << bits_of(expected) << "), got "
         << actual << " (bits " << bits_of(actual) << ")";
}
testing::AssertionResult same_double(double expected, double actual) {
  if ((std::isnan(expected) && std::isnan(actual)) || bits_of(expected) == bits_of(actual))
    return testing::AssertionSuccess();
  return testing::AssertionFailure() << "expected " << expected << ", got " << actual;
}

TEST(KernelMath, SpecialValuesFloat32) {
  const float inf = INFINITY, nan = NAN, tiny = 1e-45f;
  struct Row {
    const char* name;
    F32 function;
    float x, expected;
  };
  const Row rows[] = {
      {"exp", ll_expf, nan, nan},
      {"exp", ll_expf, -inf, 0},
      {"exp", ll_expf, inf, inf},
      {"exp", ll_expf, 0, 1},
      {"exp", ll_expf, -0.0f, 1},
      {"exp", ll_expf, 89, inf},
      {"exp", ll_expf, -104, 0},
      {"exp", ll_expf, -103.9f, tiny},
      {"exp", ll_expf, 1e-30f, 1},
      {"expm1", ll_expm1f, -0.0f, -0.0f},
      {"expm1", ll_expm1f, tiny, tiny},
      {"expm1", ll_expm1f, -inf, -1},
      {"expm1", ll_expm1f, inf, inf},
      {"expm1", ll_expm1f, nan, nan},
      {"log", ll_logf, 0, -inf},
      {"log", ll_logf, -0.0f, -inf},
      {"log", ll_logf, -1, nan},
      {"log", ll_logf, -inf, nan},
      {"log", ll_logf, inf, inf},
      {"log", ll_logf, nan, nan},
      {"log", ll_logf, 1, 0},
      {"log", ll_logf, -tiny, nan},
      {"log2", ll_log2f, 8, 3},
      {"log2", ll_log2f, tiny, -149},
      {"log2", ll_log2f, 0, -inf},
      {"log2", ll_log2f, inf, inf},
      {"log2", ll_log2f, -2, nan},
      {"log1p", ll_log1pf, -1, -inf},
      {"log1p", ll_log1pf, -0.0f, -0.0f},
      {"log1p", ll_log1pf, tiny, tiny},
      {"log1p", ll_log1pf, -2, nan},
      {"log1p", ll_log1pf, inf, inf},
      {"log1p", ll_log1pf, nan, nan},
      {"tanh", ll_tanhf, inf, 1},
      {"tanh", ll_tanhf, -inf, -1},
      {"tanh", ll_tanhf, -0.0f, -0.0f},
      {"tanh", ll_tanhf, tiny, tiny},
      {"tanh", ll_tanhf, nan, nan},
      {"tanh", ll_tanhf, 10, 1},
      {"sigmoid", ll_sigmoidf, inf, 1},
      {"sigmoid", ll_sigmoidf, -inf, 0},
      {"sigmoid", ll_sigmoidf, 0, 0.5f},
      {"sigmoid", ll_sigmoidf, nan, nan},
      {"sigmoid", ll_sigmoidf, -88, 6.0546018e-39f},
      {"gelu", ll_geluf, inf, inf},
      {"gelu", ll_geluf, -inf, -0.0f},
      {"gelu", ll_geluf, -0.0f, -0.0f},
      {"gelu", ll_geluf, 0, 0},
      {"gelu", ll_geluf, nan, nan},
      {"gelu", ll_geluf, 30, 30},
      {"sqrt", ll_sqrtf, -1, nan},
      {"sqrt", ll_sqrtf, -0.0f, -0.0f},
      {"sqrt", ll_sqrtf, inf, inf},
      {"sin", ll_sinf, -0.0f, -0.0f},
      {"sin", ll_sinf, tiny, tiny},
      {"sin", ll_sinf, inf, nan},
      {"sin", ll_sinf, nan, nan},
      {"sin", ll_sinf, 1e7f, nan},
      {"cos", ll_cosf, 0, 1},
      {"cos", ll_cosf, -inf, nan},
      {"tan", ll_tanf, -0.0f, -0.0f},
      {"tan", ll_tanf, inf, nan},
      {"erf", ll_erff, -0.0f, -0.0f},
      {"erf", ll_erff, tiny, tiny},
      {"erf", ll_erff, inf, 1},
      {"erf", ll_erff, -inf, -1},
      {"erf", ll_erff, nan, nan},
      {"erfc", ll_erfcf, 0, 1},
      {"erfc", ll_erfcf, inf, 0},
      {"erfc", ll_erfcf, -inf, 2},
      {"erfc", ll_erfcf, 11, 0},
      {"erfc", ll_erfcf, nan, nan},
      {"exp2", ll_exp2f, 3, 8},
      {"exp2", ll_exp2f, -149, tiny},
      {"exp2", ll_exp2f, -150, 0},
      {"exp2", ll_exp2f, 128, inf},
      {"exp2", ll_exp2f, -inf, 0},
      {"exp2", ll_exp2f, nan, nan},
      {"frac", ll_fracf, -2.5f, -0.5f},
      {"frac", ll_fracf, inf, nan},
      {"asin", ll_asinf, 1, 1.5707964f},
      {"asin", ll_asinf, -0.0f, -0.0f},
      {"asin", ll_asinf, 1.0000001f, nan},
      {"acos", ll_acosf, 1, 0},
      {"atan", ll_atanf, inf, 1.5707964f},
      {"sinh", ll_sinhf, 90, inf},
      {"sinh", ll_sinhf, -0.0f, -0.0f},
      {"cosh", ll_coshf, -inf, inf},
      {"asinh", ll_asinhf, -inf, -inf},
      {"acosh", ll_acoshf, 1, 0},
      {"acosh", ll_acoshf, 0.5f, nan},
      {"atanh", ll_atanhf, 1, inf},
      {"atanh", ll_atanhf, -1.5f, nan},
      {"log10", ll_log10f, 1000, 3},
      {"log10", ll_log10f, 0, -inf},
      {"log10", ll_log10f, -1, nan},
  };
  for (const Row& row : rows)
    EXPECT_TRUE(same_float(row.expected, row.function(row.x))) << row.name << "(" << row.x << ")";
}

TEST(KernelMath, SpecialValuesFloat64) {
  const double inf = INFINITY, nan = NAN, tiny = 5e-324;
  struct Row {
    const char* name;
    F64 function;
    double x, expected;
  };
  const Row rows[] = {
      {"exp", ll_exp, nan, nan},
      {"exp", ll_exp, -inf, 0},
      {"exp", ll_exp, inf, inf},
      {"exp", ll_exp, 710, inf},
      {"exp", ll_exp, -746, 0},
      {"exp", ll_exp, -745, tiny},
      {"exp", ll_exp, -0.0, 1},
      {"expm1", ll_expm1, -0.0, -0.0},
      {"expm1", ll_expm1, tiny, tiny},
      {"expm1", ll_expm1, -inf, -1},
      {"expm1", ll_expm1, inf, inf},
      {"expm1", ll_expm1, nan, nan},
      {"log", ll_log, 0, -inf},
      {"log", ll_log, -0.0, -inf},
      {"log", ll_log, -1, nan},
      {"log", ll_log, inf, inf},
      {"log", ll_log, 1, 0},
      {"log", ll_log, nan, nan},
      {"log2", ll_log2, tiny, -1074},
      {"log2", ll_log2, 1024, 10},
      {"log2", ll_log2, -inf, nan},
      {"log1p", ll_log1p, -1, -inf},
      {"log1p", ll_log1p, -0.0, -0.0},
      {"log1p", ll_log1p, tiny, tiny},
      {"log1p", ll_log1p, inf, inf},
      {"log1p", ll_log1p, -3, nan},
      {"tanh", ll_tanh, inf, 1},
      {"tanh", ll_tanh, -inf, -1},
      {"tanh", ll_tanh, -0.0, -0.0},
      {"tanh", ll_tanh, nan, nan},
      {"sigmoid", ll_sigmoid, inf, 1},
      {"sigmoid", ll_sigmoid, -inf, 0},
      {"sigmoid", ll_sigmoid, nan, nan},
      {"gelu", ll_gelu, -inf, -0.0},
      {"gelu", ll_gelu, inf, inf},
      {"gelu", ll_gelu, nan, nan},
      {"gelu", ll_gelu, -0.0, -0.0},
      {"sin", ll_sin, -0.0, -0.0},
      {"exp2", ll_exp2, 10, 1024},
      {"exp2", ll_exp2, -1074, tiny},
      {"exp2", ll_exp2, -1075, 0},
      {"exp2", ll_exp2, 1024, inf},
      {"exp2", ll_exp2, -inf, 0},
      {"exp2", ll_exp2, nan, nan},
      {"frac", ll_frac, -2.5, -0.5},
  };
  for (const Row& row : rows)
    EXPECT_TRUE(same_double(row.expected, row.function(row.x))) << row.name << "(" << row.x << ")";
}

// ---- pow ----------------------------------------------------------------------

// ll_powf against C's powf on every pair of special values: NaN-ness, the
// sign, zeros, infinities and exact results must match; other results must
// be within the accuracy bound of the exact (double) value.
TEST(KernelMath, PowSpecialCasesMatchC) {
  const float values[] = {
      0.0f,     -0.0f,       1.0f,         -1.0f,       0.5f,         -0.5f,       2.0f,
      -2.0f,    3.0f,        -3.0f,        2.5f,        -2.5f,        INFINITY,    -INFINITY,
      NAN,      -NAN,        1e-45f,       -1e-45f,     FLT_MIN,      -FLT_MIN,    FLT_MAX,
      -FLT_MAX, 16777215.0f, -16777215.0f, 16777216.0f, -16777216.0f, 0.99999994f, 1.0000001f,
      1e10f,    -1e10f,      1e-10f,       127.0f,      128.0f,       -149.0f,     -150.0f,
      0.1f,     -7.0f,       1e30f};
  for (float x : values) {
    for (float y : values) {
      const float expected = powf(x, y), actual = ll_powf(x, y);
      if (std::isnan(expected) || expected == 0 || std::isinf(expected) ||
          static_cast<double>(expected) == std::pow(static_cast<double>(x), y)) {
        EXPECT_TRUE(same_float(expected, actual)) << "pow(" << x << ", " << y << ")";
      } else {
        EXPECT_LE(ulp_error_f32(actual, std::pow(static_cast<double>(x), y)), 0.51)
            << "pow(" << x << ", " << y << ")";
      }
    }
  }
}

// Random pairs: any bit patterns, and bases with exponents chosen so that the
// result spans the float range (|y log x| up to 110), negative bases with
// integer exponents.
TEST(KernelMath, PowAccuracy) {
  ErrorStats stats = in_two_threads(1024, [](uint64_t begin, uint64_t end, ErrorStats& s) {
    std::vector<float> x(kChunk), y(kChunk), out(kChunk);
    for (uint64_t chunk = begin; chunk < end; ++chunk) {
      std::mt19937 random(static_cast<uint32_t>(chunk));
      std::uniform_real_distribution<double> target(-110.0, 100.0);
      std::uniform_int_distribution<int> small_integer(-40, 40);
      for (size_t i = 0; i < kChunk; ++i) {
        x[i] = float_from_bits(static_cast<uint32_t>(random()));
        y[i] = float_from_bits(static_cast<uint32_t>(random()));
        if (chunk % 4 == 1) x[i] = std::fabs(x[i]);
        if (chunk % 4 >= 1 && std::isfinite(x[i]) && x[i] != 0 && std::fabs(x[i]) != 1)
          y[i] = static_cast<float>(target(random) / std::log(std::fabs(x[i])));
        if (chunk % 4 == 3) y[i] = static_cast<float>(small_integer(random));
      }
      for (size_t i = 0; i < kChunk; ++i) out[i] = ll_powf(x[i], y[i]);
      for (size_t i = 0; i < kChunk; ++i) {
        const double exact = std::pow(static_cast<double>(x[i]), static_cast<double>(y[i]));
        s.add(x[i], out[i], exact, ulp_error_f32(out[i], exact), FLT_MIN, FLT_MAX);
      }
    }
  });
  std::printf("ll_powf     max error %.3f ulp, max relative %.3g, over %llu pairs\n", stats.max_ulp,
              stats.max_relative, static_cast<unsigned long long>(stats.count));
  EXPECT_LE(stats.max_ulp, 0.51) << "at x = " << stats.worst_input;
  EXPECT_TRUE(same_double(ll_pow(-8.0, 1.0 / 3), NAN));
  EXPECT_EQ(ll_pow(-2.0, 3.0), -8.0);
}

// Exponents 2, -1, 1 and 0.5 give the correctly rounded x*x, 1/x, x and
// sqrt(x) (+0 for -0), which the general path could miss at a halfway case
// (1 + 2^-12 squared is one), and which lets eager x^2 be x*x.
TEST(KernelMath, PowExactExponents) {
  for (uint64_t k = 0; k < (uint64_t{1} << 32); k += 65537) {
    const float x = float_from_bits(static_cast<uint32_t>(k));
    ASSERT_TRUE(same_float(x * x, ll_powf(x, 2.0f))) << x;
    ASSERT_TRUE(same_float(1.0f / x, ll_powf(x, -1.0f))) << x;
    ASSERT_TRUE(same_float(x, ll_powf(x, 1.0f))) << x;
    if (x >= 0.0f) {
      ASSERT_TRUE(same_float(std::sqrt(x) + 0.0f, ll_powf(x, 0.5f))) << x;
    }
    const double d = static_cast<double>(x) * 1.000000001;
    ASSERT_TRUE(same_double(d * d, ll_pow(d, 2.0))) << d;
    ASSERT_TRUE(same_double(1.0 / d, ll_pow(d, -1.0))) << d;
  }
  EXPECT_EQ(ll_powf(1.0f + 0x1p-12f, 2.0f), (1.0f + 0x1p-12f) * (1.0f + 0x1p-12f));
  EXPECT_TRUE(same_float(0.0f, ll_powf(-0.0f, 0.5f)));
  EXPECT_TRUE(same_float(INFINITY, ll_powf(-INFINITY, 0.5f)));
  EXPECT_TRUE(same_float(NAN, ll_powf(-4.0f, 0.5f)));
}

// ---- compiled as C, the way generated kernels are -------------------------------

#ifndef LAZYLUA_SOURCE_DIR
#define LAZYLUA_SOURCE_DIR "."
#endif

// Every function, one loop each, in a C file that includes the header.
// Unary and binary loops over a constant count (GCC 12's -O2 cost model,
// "very cheap", vectorizes only loops that need no scalar remainder) and,
// for -fvect-cost-model=cheap, over a count known at run time.
const char* const kUnaryF32[] = {"ll_expf",   "ll_expm1f",   "ll_logf",   "ll_log2f", "ll_log1pf",
                                 "ll_tanhf",  "ll_sigmoidf", "ll_geluf",  "ll_sqrtf", "ll_sinf",
                                 "ll_cosf",   "ll_tanf",     "ll_floorf", "ll_ceilf", "ll_truncf",
                                 "ll_roundf", "ll_erff",     "ll_erfcf",  "ll_exp2f", "ll_fracf"};
const char* const kUnaryF64[] = {"ll_exp",     "ll_expm1", "ll_log",   "ll_tanh",
                                 "ll_sigmoid", "ll_sqrt",  "ll_floor", "ll_ceil",
                                 "ll_trunc",   "ll_round", "ll_exp2",  "ll_frac"};
struct BinaryLoop {
  const char* function;
  const char* type;
};
const BinaryLoop kBinary[] = {{"ll_powf", "float"},
                              {"ll_floordivf", "float"},
                              {"ll_floordiv", "double"},
                              {"ll_floordiv_i32", "int32_t"},
                              {"ll_mod_i32", "int32_t"}};
struct ConversionLoop {
  const char* function;
  const char* from;
  const char* to;
};
const ConversionLoop kConversions[] = {{"ll_f32_to_i32", "float", "int32_t"},
                                       {"ll_f64_to_i32", "double", "int32_t"}};

struct CSource {
  std::string text;
  std::vector<std::string> loop_names;  // one per line from line 2 on
};

CSource vectorization_source(bool known_count) {
  CSource source;
  std::ostringstream out;
  const std::string count = known_count ? "4096" : "n";
  out << "#include \"tensor/kernels/kernel_math.h\"\n";
  auto loop = [&](const std::string& function, const std::string& in, const std::string& out_type,
                  bool binary) {
    out << "void loop_" << function << "(long n, const " << in << "* restrict a, const " << in
        << "* restrict b, " << out_type << "* restrict y) { (void)n; (void)b; "
        << "for (long i = 0; i < " << count << "; i++) y[i] = " << function
        << (binary ? "(a[i], b[i]); }\n" : "(a[i]); }\n");
    source.loop_names.push_back(function);
  };
  for (const char* f : kUnaryF32) loop(f, "float", "float", false);
  for (const char* f : kUnaryF64) loop(f, "double", "double", false);
  for (const BinaryLoop& b : kBinary) loop(b.function, b.type, b.type, true);
  for (const ConversionLoop& c : kConversions) loop(c.function, c.from, c.to, false);
  source.text = out.str();
  return source;
}

bool have_c_compiler() {
  return std::system("command -v cc > /dev/null 2>&1") == 0;
}

std::string temporary_directory() {
  char pattern[] = "/tmp/lazylua_kernel_math_XXXXXX";
  const char* made = mkdtemp(pattern);
  return made ? made : "";
}

// Compiles `source` with `flags` and returns the loops GCC reports as not
// vectorized (every loop when the compilation fails).
std::vector<std::string> unvectorized_loops(const CSource& source, const std::string& flags) {
  const std::string directory = temporary_directory();
  std::ofstream(directory + "/loops.c") << source.text;
  const std::string command = "cc " + flags + " -I" LAZYLUA_SOURCE_DIR " -c " + directory +
                              "/loops.c -o " + directory + "/loops.o -fopt-info-vec-optimized 2> " +
                              directory + "/report.txt";
  const int status = std::system(command.c_str());
  std::ifstream report_file(directory + "/report.txt");
  std::stringstream report;
  report << report_file.rdbuf();
  std::system(("rm -rf " + directory).c_str());
  std::vector<std::string> missing;
  for (size_t i = 0; i < source.loop_names.size(); ++i) {
    const std::string line = "loops.c:" + std::to_string(i + 2) + ":";
    const std::string text = report.str();
    bool vectorized = false;
    for (size_t at = text.find(line); at != std::string::npos; at = text.find(line, at + 1)) {
      const size_t end = text.find('\n', at);
      if (text.substr(at, end - at).find("loop vectorized") != std::string::npos) vectorized = true;
    }
    if (status != 0 || !vectorized) missing.push_back(source.loop_names[i]);
  }
  if (status != 0) ADD_FAILURE() << "cc failed:\n" << report.str();
  return missing;
}

// The flags of compiler/toolchain.cpp, as the header's contract says.
constexpr const char* kKernelFlags =
    "-O2 -march=native -mprefer-vector-width=512 -ffp-contract=off -fno-math-errno -std=c99 -Wall "
    "-Wextra -Werror";

TEST(KernelMath, LoopsVectorize) {
  if (!have_c_compiler()) GTEST_SKIP() << "no cc";
  const std::string kernel_flags = kKernelFlags;
  std::vector<std::string> configurations = {kernel_flags};
#if defined(__x86_64__)
  configurations.push_back(kernel_flags + " -march=x86-64-v3");  // AVX2 + FMA, no AVX-512
  // An AVX-512 CPU whose tuning prefers 256-bit vectors: without the toolchain's
  // -mprefer-vector-width=512 GCC leaves these loops scalar (checked on any x86-64).
  configurations.push_back(kernel_flags + " -march=skylake-avx512");
#endif
  for (const std::string& flags : configurations) {
    const std::vector<std::string> missing = unvectorized_loops(vectorization_source(true), flags);
    std::string list;
    for (const std::string& name : missing) list += " " + name;
    EXPECT_TRUE(missing.empty()) << "not vectorized with " << flags << ":" << list;
  }
  const std::vector<std::string> missing =
      unvectorized_loops(vectorization_source(false), kernel_flags + " -fvect-cost-model=cheap");
  std::string list;
  for (const std::string& name : missing) list += " " + name;
  EXPECT_TRUE(missing.empty()) << "with a run-time count, not vectorized:" << list;
}

// The loops of vectorization_source(false) compiled by cc as C, vectorized, into a
// shared object, loaded.
struct CompiledKernels {
  void* handle = nullptr;
  ~CompiledKernels() {
    if (handle) dlclose(handle);
  }
  using Loop = void (*)(long, const float*, const float*, float*);
  Loop find(const std::string& function) const {
    return reinterpret_cast<Loop>(dlsym(handle, ("loop_" + function).c_str()));
  }
};

bool compile_kernels(CompiledKernels& kernels) {
  const std::string directory = temporary_directory();
  std::ofstream(directory + "/loops.c") << vectorization_source(false).text;
  const std::string library = directory + "/loops.so";
  const std::string command = std::string("cc ") + kKernelFlags +
                              " -fvect-cost-model=cheap -fPIC -shared -I" LAZYLUA_SOURCE_DIR " " +
                              directory + "/loops.c -o " + library;
  const bool built = std::system(command.c_str()) == 0;
  if (built) kernels.handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::system(("rm -rf " + directory).c_str());
  return kernels.handle != nullptr;
}

// The kernels as generated code runs them: compiled by cc as C99 (where a * b + c is not
// contracted into an FMA, unlike in this C++ file) and vectorized, over every 1021st float bit
// pattern (8 * the stride + 5) and the neighbourhoods, within the same bounds.
TEST(KernelMath, CompiledAsCMeetsTheBounds) {
  if (!have_c_compiler()) GTEST_SKIP() << "no cc";
  CompiledKernels kernels;
  ASSERT_TRUE(compile_kernels(kernels));
  for (const F32Case& c : kF32Cases) {
    const CompiledKernels::Loop loop = kernels.find(std::string("ll_") + c.name);
    ASSERT_NE(loop, nullptr) << c.name;
    const ErrorStats stats =
        sweep_f32([loop](const float* in, float* out) { loop(kChunk, in, nullptr, out); },
                  c.reference, 8 * sweep_stride() + 5);
    std::printf("ll_%-9s compiled as C99: max error %.3f ulp (bound %.2f)\n", c.name, stats.max_ulp,
                c.max_ulp);
    EXPECT_LE(stats.max_ulp, c.max_ulp)
        << "ll_" << c.name << " compiled as C, at x = " << stats.worst_input;
  }
}

// Not asserted: ns per element, one thread, 16M floats, vectorized kernels
// (compiled by cc as C) against the scalar libm call.
TEST(KernelMath, Benchmark) {
  if (!have_c_compiler()) GTEST_SKIP() << "no cc";
  CompiledKernels kernels;
  ASSERT_TRUE(compile_kernels(kernels));
  constexpr size_t kCount = size_t{1} << 24;
  std::vector<float> in(kCount), out(kCount);
  std::mt19937 random(3);
  std::uniform_real_distribution<float> range(-10.0f, 10.0f);
  for (float& x : in) x = range(random);
  auto time = [&](auto&& run) {
    double best = INFINITY;
    for (int repeat = 0; repeat < 2; ++repeat) {
      const auto start = std::chrono::steady_clock::now();
      run();
      const std::chrono::duration<double, std::nano> spent =
          std::chrono::steady_clock::now() - start;
      best = std::min(best, spent.count() / kCount);
    }
    return best;
  };
  struct Row {
    const char* name;
    float (*libm)(float);
    bool positive;  // log: inputs |x|
  };
  const Row rows[] = {{"ll_expf", expf, false},
                      {"ll_tanhf", tanhf, false},
                      {"ll_erff", erff, false},
                      {"ll_erfcf", erfcf, false},
                      {"ll_logf", logf, true}};
  for (const Row& row : rows) {
    if (row.positive)
      for (float& x : in) x = std::fabs(x);
    const CompiledKernels::Loop loop = kernels.find(row.name);
    const double ours = time([&] { loop(kCount, in.data(), nullptr, out.data()); });
    float (*volatile libm)(float) = row.libm;  // a real call, as a kernel would make
    const double theirs = time([&] {
      for (size_t i = 0; i < kCount; ++i) out[i] = libm(in[i]);
    });
    std::printf("%-9s %.2f ns/element, scalar libm %.2f ns/element (%.1fx)\n", row.name, ours,
                theirs, theirs / ours);
  }
}

}  // namespace
