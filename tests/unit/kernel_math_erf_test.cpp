// kernel_math_erf_test.cpp - the float32 erf and erfc of
// tensor/kernels/kernel_math.h against glibc's double erf and erfc (good to
// ~1 double ulp: exact for a float's purposes), on every 64th float bit
// pattern of [-10.1, 10.1], the floats around the switch between the two
// approximations (|x| = 1) and where the results reach 1 and 0, and the
// special values. The bounds are the ones kernel_math.h states
// (kernel_math_test.cpp sweeps the whole float range every 127th pattern).
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "tensor/kernels/kernel_math.h"

namespace {

constexpr double kErfMaxUlp = 0.51;
constexpr double kErfcMaxUlp = 0.56;
constexpr size_t kChunk = 4096;  // a constant trip count, vectorized as generated kernels are

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

// |result - exact| in ulp of the float nearest exact (subnormal: ulps of 2^-149).
double ulps(float result, double exact) {
  if (std::isnan(exact)) return std::isnan(result) ? 0.0 : INFINITY;
  if (!std::isfinite(result)) return INFINITY;
  int exponent = 0;
  std::frexp(exact, &exponent);  // exact = m 2^exponent, m in [0.5, 1)
  const double ulp = std::ldexp(1.0, std::max(exponent - 24, -149));
  return std::fabs(static_cast<double>(result) - exact) / ulp;
}

void erf_chunk(const float* __restrict in, float* __restrict out) {
  for (size_t i = 0; i < kChunk; ++i) out[i] = ll_erff(in[i]);
}
void erfc_chunk(const float* __restrict in, float* __restrict out) {
  for (size_t i = 0; i < kChunk; ++i) out[i] = ll_erfcf(in[i]);
}

// The inputs: every 64th bit pattern from +0 to 10.1 (subnormals included), the 2^14
// floats on each side of 1, 3.92 (erf reaches 1), 9.2 and 10.06 (erfc becomes subnormal,
// then 0), and 10.1 (where |x| is clamped), each with both signs; then large values and the
// special ones, padded to whole chunks with 0.
std::vector<float> sweep_inputs() {
  std::vector<float> inputs;
  auto both_signs = [&](float x) {
    inputs.push_back(x);
    inputs.push_back(-x);
  };
  for (uint32_t bits = 0; bits <= bits_of(10.1f); bits += 64) both_signs(float_from_bits(bits));
  for (float center : {1.0f, 3.92f, 9.2f, 10.06f, 10.1f}) {
    const uint32_t middle = bits_of(center);
    for (uint32_t bits = middle - (1u << 14); bits <= middle + (1u << 14); ++bits)
      both_signs(float_from_bits(bits));
  }
  for (float x : {11.0f, 26.5f, 1e10f, 1e30f, FLT_MAX, FLT_MIN, FLT_TRUE_MIN, 0.0f,
                  std::numeric_limits<float>::infinity()})
    both_signs(x);
  inputs.push_back(std::numeric_limits<float>::quiet_NaN());
  inputs.resize((inputs.size() + kChunk - 1) / kChunk * kChunk, 0.0f);
  return inputs;
}

struct Worst {
  double ulp = 0;
  float input = 0;
};

Worst sweep(void (*apply)(const float*, float*), double (*reference)(double)) {
  const std::vector<float> inputs = sweep_inputs();
  std::vector<float> outputs(inputs.size());
  for (size_t at = 0; at < inputs.size(); at += kChunk) apply(&inputs[at], &outputs[at]);
  Worst worst;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const double error = ulps(outputs[i], reference(inputs[i]));
    if (!(error <= worst.ulp)) worst = {error, inputs[i]};
  }
  return worst;
}

TEST(KernelMathErf, ErfWithinTheStatedBound) {
  const Worst worst = sweep(erf_chunk, [](double x) { return std::erf(x); });
  std::printf("ll_erff max error %.3f ulp at x = %.9g (bound %.2f)\n", worst.ulp, worst.input,
              kErfMaxUlp);
  EXPECT_LE(worst.ulp, kErfMaxUlp) << "at x = " << worst.input;
}

TEST(KernelMathErf, ErfcWithinTheStatedBound) {
  const Worst worst = sweep(erfc_chunk, [](double x) { return std::erfc(x); });
  std::printf("ll_erfcf max error %.3f ulp at x = %.9g (bound %.2f)\n", worst.ulp, worst.input,
              kErfcMaxUlp);
  EXPECT_LE(worst.ulp, kErfcMaxUlp) << "at x = " << worst.input;
}

// erf is odd to the bit (computed on |x|, the sign put back), erfc(-x) = 2 - erfc(x)
// rounded once, and the vectorized loop gives the scalar call's bits.
TEST(KernelMathErf, SymmetryAndVectorizedEqualsScalar) {
  const std::vector<float> inputs = sweep_inputs();
  std::vector<float> erf_out(inputs.size()), erfc_out(inputs.size());
  for (size_t at = 0; at < inputs.size(); at += kChunk) {
    erf_chunk(&inputs[at], &erf_out[at]);
    erfc_chunk(&inputs[at], &erfc_out[at]);
  }
  int failures = 0;
  for (size_t i = 0; i < inputs.size() && failures < 10; i += 31) {
    const float x = inputs[i];
    volatile float scalar_x = x;  // the scalar (not vectorized) path
    const bool same_erf = bits_of(ll_erff(scalar_x)) == bits_of(erf_out[i]);
    const bool same_erfc = bits_of(ll_erfcf(scalar_x)) == bits_of(erfc_out[i]);
    const bool odd = std::isnan(x) || bits_of(ll_erff(-x)) == (bits_of(erf_out[i]) ^ 0x80000000u);
    const float reflected = static_cast<float>(2.0 - static_cast<double>(ll_erfcf(-x)));
    const bool reflects = std::isnan(x) || std::fabs(reflected - erfc_out[i]) <= 2.5e-7f;
    if (!(same_erf && same_erfc && odd && reflects)) {
      ++failures;
      ADD_FAILURE() << "x = " << x << ": scalar erf " << same_erf << ", scalar erfc " << same_erfc
                    << ", erf odd " << odd << ", erfc(x) + erfc(-x) = 2 " << reflects;
    }
  }
}

TEST(KernelMathErf, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(bits_of(ll_erff(0.0f)), bits_of(0.0f));
  EXPECT_EQ(bits_of(ll_erff(-0.0f)), bits_of(-0.0f));
  EXPECT_EQ(ll_erff(inf), 1.0f);
  EXPECT_EQ(ll_erff(-inf), -1.0f);
  EXPECT_TRUE(std::isnan(ll_erff(nan)));
  EXPECT_TRUE(std::isnan(ll_erff(-nan)));
  EXPECT_EQ(ll_erff(4.0f), 1.0f);  // erf(4) = 1 - 1.5e-8, above 1 - 2^-25: rounds to 1
  EXPECT_EQ(ll_erff(-FLT_MAX), -1.0f);
  // erf x = 2x / sqrt(pi) for tiny x: 1.128 ulp of the smallest subnormal rounds to 1 ulp
  EXPECT_EQ(ll_erff(FLT_TRUE_MIN), FLT_TRUE_MIN);
  EXPECT_EQ(ll_erff(1e-30f), static_cast<float>(1e-30f * 1.1283791670955126));
  EXPECT_EQ(ll_erfcf(0.0f), 1.0f);
  EXPECT_EQ(ll_erfcf(-0.0f), 1.0f);
  EXPECT_EQ(ll_erfcf(inf), 0.0f);
  EXPECT_EQ(ll_erfcf(-inf), 2.0f);
  EXPECT_EQ(ll_erfcf(FLT_MAX), 0.0f);
  EXPECT_EQ(ll_erfcf(-FLT_MAX), 2.0f);
  EXPECT_EQ(ll_erfcf(10.06f), 0.0f);  // erfc(10.06) = 6.6e-46, below half the smallest subnormal
  EXPECT_GT(ll_erfcf(10.0f), 0.0f);   // erfc(10) = 2.1e-45: subnormal, not 0
  EXPECT_TRUE(std::isnan(ll_erfcf(nan)));
}

}  // namespace
