// kernel_math_rounding_test.cpp - kernel_math.h's rounding, Lua's float and
// integer // and %, and float -> integer conversions, against libm and by
// hand (split from kernel_math_test.cpp, which has the accuracy sweeps).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "tensor/kernels/kernel_math.h"

namespace {

float float_from_bits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}
uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
uint64_t bits_of(double x) {
  uint64_t u;
  std::memcpy(&u, &x, 8);
  return u;
}

// Same bits, or both NaN.
testing::AssertionResult same_float(float expected, float actual) {
  if ((std::isnan(expected) && std::isnan(actual)) || bits_of(expected) == bits_of(actual))
    return testing::AssertionSuccess();
  return testing::AssertionFailure() << "expected " << expected << ", got " << actual;
}
testing::AssertionResult same_double(double expected, double actual) {
  if ((std::isnan(expected) && std::isnan(actual)) || bits_of(expected) == bits_of(actual))
    return testing::AssertionSuccess();
  return testing::AssertionFailure() << "expected " << expected << ", got " << actual;
}

// ---- rounding, Lua division and modulo, conversions -----------------------------

TEST(KernelMath, RoundingMatchesLibm) {
  for (uint64_t k = 0; k < (uint64_t{1} << 32); k += 4099) {
    const float x = float_from_bits(static_cast<uint32_t>(k));
    ASSERT_TRUE(same_float(std::floor(x), ll_floorf(x))) << x;
    ASSERT_TRUE(same_float(std::ceil(x), ll_ceilf(x))) << x;
    ASSERT_TRUE(same_float(std::trunc(x), ll_truncf(x))) << x;
    const double d = static_cast<double>(x) * 1.000000001;
    ASSERT_TRUE(same_double(std::floor(d), ll_floor(d))) << d;
    ASSERT_TRUE(same_double(std::ceil(d), ll_ceil(d))) << d;
    ASSERT_TRUE(same_double(std::trunc(d), ll_trunc(d))) << d;
  }
  // Halves go to the even neighbour.
  const float halves[][2] = {{0.5f, 0.0f},
                             {1.5f, 2.0f},
                             {2.5f, 2.0f},
                             {-0.5f, -0.0f},
                             {-2.5f, -2.0f},
                             {-3.5f, -4.0f},
                             {8388607.5f, 8388608.0f}};
  for (const auto& half : halves) {
    EXPECT_TRUE(same_float(half[1], ll_roundf(half[0])));
    EXPECT_TRUE(same_double(half[1], ll_round(half[0])));
  }
}

// Lua 5.4's float // and %: floor(a / b), and fmod corrected to b's sign.
TEST(KernelMath, LuaFloatDivisionAndModulo) {
  const double inf = INFINITY;
  struct Row {
    double a, b, modulo, floor_quotient;
  };
  const Row rows[] = {
      {5.5, -2, -0.5, -3},  {-5.5, -2, -1.5, 2},
      {-5, inf, inf, -0.0}, {5, inf, 5, 0},
      {-5, -inf, -5, 0},    {5, -inf, -inf, -0.0},
      {7, 0, NAN, inf},     {-7, 0, NAN, -inf},
      {0.0, -2, 0.0, -0.0}, {-0.0, 2, -0.0, -0.0},
      {inf, 2, NAN, inf},   {NAN, 1, NAN, NAN},
      {3, 1.5, 0, 2},       {-3, 1.5, -0.0, -2},
      {3, -1.5, 0, -2},     {1e30, 3, 1, 3.333333333333333e29},
  };
  for (const Row& row : rows) {
    EXPECT_TRUE(same_double(row.modulo, ll_mod(row.a, row.b))) << row.a << " % " << row.b;
    EXPECT_TRUE(same_double(row.floor_quotient, ll_floordiv(row.a, row.b)))
        << row.a << " // " << row.b;
    const float a = static_cast<float>(row.a), b = static_cast<float>(row.b);
    if (row.a == 1e30) continue;  // not exact in float
    EXPECT_TRUE(same_float(static_cast<float>(row.modulo), ll_modf(a, b))) << a << " % " << b;
    EXPECT_TRUE(same_float(static_cast<float>(row.floor_quotient), ll_floordivf(a, b)))
        << a << " // " << b;
  }
  // On integers in floats, % and // agree with integer arithmetic.
  for (int a = -40; a <= 40; ++a) {
    for (int b = -9; b <= 9; ++b) {
      if (b == 0) continue;
      const int quotient = a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
      EXPECT_EQ(ll_floordivf(static_cast<float>(a), static_cast<float>(b)), quotient);
      EXPECT_EQ(ll_modf(static_cast<float>(a), static_cast<float>(b)), a - quotient * b);
    }
  }
}

// Reference Lua // and % on integers, computed in 128 bits and wrapped.
template <typename T>
T floordiv_reference(T a, T b) {
  const __int128 q = static_cast<__int128>(a) / b;
  const __int128 floored = q - ((static_cast<__int128>(a) % b != 0) && ((a < 0) != (b < 0)));
  return static_cast<T>(static_cast<std::make_unsigned_t<T>>(floored));
}
template <typename T>
T mod_reference(T a, T b) {
  return static_cast<T>(static_cast<__int128>(a) -
                        static_cast<__int128>(floordiv_reference(a, b)) * b);
}

template <typename T, T (*floordiv)(T, T), T (*mod)(T, T)>
void check_integer_division() {
  constexpr T lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
  std::vector<T> values = {lo, static_cast<T>(lo + 1), static_cast<T>(lo / 2),
                           hi, static_cast<T>(hi - 1), static_cast<T>(hi / 2)};
  for (int v = -20; v <= 20; ++v) values.push_back(static_cast<T>(v));
  std::mt19937_64 random(7);
  for (int i = 0; i < 300; ++i) {
    values.push_back(static_cast<T>(random()));
    values.push_back(static_cast<T>(static_cast<T>(random()) >> (random() % (8 * sizeof(T)))));
  }
  for (T a : values) {
    for (T b : values) {
      if (b == 0) continue;
      ASSERT_EQ(floordiv_reference(a, b), floordiv(a, b)) << a << " // " << b;
      ASSERT_EQ(mod_reference(a, b), mod(a, b)) << a << " % " << b;
    }
  }
  EXPECT_EQ(floordiv(lo, -1), lo);  // wraps
  EXPECT_EQ(mod(lo, -1), 0);
  EXPECT_EQ(floordiv(7, -2), -4);
  EXPECT_EQ(mod(7, -2), -1);
  EXPECT_EQ(mod(-7, 2), 1);
}

TEST(KernelMath, LuaIntegerDivisionAndModulo) {
  check_integer_division<int32_t, ll_floordiv_i32, ll_mod_i32>();
  check_integer_division<int64_t, ll_floordiv_i64, ll_mod_i64>();
}

TEST(KernelMath, FloatToIntegerConversion) {
  const float f_inf = INFINITY, f_nan = NAN;
  EXPECT_EQ(ll_f32_to_i32(2.9f), 2);
  EXPECT_EQ(ll_f32_to_i32(-2.9f), -2);
  EXPECT_EQ(ll_f32_to_i32(-2147483648.0f), INT32_MIN);
  EXPECT_EQ(ll_f32_to_i32(2147483520.0f), 2147483520);
  EXPECT_EQ(ll_f32_to_i32(2147483648.0f), 0);
  EXPECT_EQ(ll_f32_to_i32(-2147483904.0f), 0);
  EXPECT_EQ(ll_f32_to_i32(f_inf), 0);
  EXPECT_EQ(ll_f32_to_i32(-f_inf), 0);
  EXPECT_EQ(ll_f32_to_i32(f_nan), 0);
  EXPECT_EQ(ll_f32_to_i64(-9223372036854775808.0f), INT64_MIN);
  EXPECT_EQ(ll_f32_to_i64(9223372036854775808.0f), 0);
  EXPECT_EQ(ll_f32_to_i64(1e10f), 10000000000);
  EXPECT_EQ(ll_f32_to_i64(f_nan), 0);
  EXPECT_EQ(ll_f64_to_i32(-2147483648.9), INT32_MIN);
  EXPECT_EQ(ll_f64_to_i32(2147483647.9), INT32_MAX);
  EXPECT_EQ(ll_f64_to_i32(-2147483649.0), 0);
  EXPECT_EQ(ll_f64_to_i32(2147483648.0), 0);
  EXPECT_EQ(ll_f64_to_i32(NAN), 0);
  EXPECT_EQ(ll_f64_to_i64(9223372036854774784.0), 9223372036854774784);
  EXPECT_EQ(ll_f64_to_i64(9223372036854775808.0), 0);
  EXPECT_EQ(ll_f64_to_i64(-9223372036854775808.0), INT64_MIN);
  EXPECT_EQ(ll_f64_to_i64(-INFINITY), 0);
  EXPECT_EQ(ll_f64_to_i64(-0.5), 0);
}

}  // namespace
