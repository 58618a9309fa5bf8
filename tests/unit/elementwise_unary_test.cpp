// elementwise_unary_test.cpp - unary_kernel and clamp_kernel against
// references written here.
//
// Tolerances: ops that are one IEEE operation (neg, floor, sqrt ...) must
// match exactly; transcendental ops are compared with the function computed
// one precision up (double for f32, long double for f64). The functions are
// those of tensor/kernels/kernel_math.h, whose accuracy over the whole float
// range tests/unit/kernel_math_test.cpp measures.
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "elementwise_test_util.h"
#include "tensor/array.h"
#include "tensor/kernels/elementwise.h"
#include "tensor/thread_pool.h"

namespace lazylua {
namespace {

using namespace elementwise_test;

// ---- Unary ops ----

// The expected value of a unary op. Floats are computed one precision up:
// double for f32, long double for f64.
template <typename T>
T unary_reference(UnaryOp op, T x) {
  if constexpr (std::is_integral_v<T>) {
    const __int128 v = x;
    switch (op) {
      case UnaryOp::neg:
        return wrap<T>(-v);
      case UnaryOp::abs:
        return wrap<T>(v < 0 ? -v : v);
      case UnaryOp::sign:
        return static_cast<T>((x > 0) - (x < 0));
      case UnaryOp::square:
        return wrap<T>(v * v);
      case UnaryOp::relu:
        return x < 0 ? 0 : x;
      case UnaryOp::floor:
      case UnaryOp::ceil:
      case UnaryOp::round:
      case UnaryOp::trunc:
        return x;
      case UnaryOp::frac:
        return 0;
      default:
        break;
    }
    ADD_FAILURE() << "no integer reference for " << unary_op_name(op);
    return 0;
  } else {
    using Wide = std::conditional_t<std::is_same_v<T, float>, double, long double>;
    const Wide v = x;
    switch (op) {
      // One IEEE operation: computed in T, must match exactly.
      case UnaryOp::neg:
        return -x;
      case UnaryOp::abs:
        return std::fabs(x);
      case UnaryOp::sign:
        return std::isnan(x) ? x : (x > 0 ? T{1} : (x < 0 ? T{-1} : x));
      case UnaryOp::square:
        return x * x;
      case UnaryOp::relu:
        return x < 0 ? T{0} : x;  // NaN and -0 stay
      case UnaryOp::floor:
        return std::floor(x);
      case UnaryOp::ceil:
        return std::ceil(x);
      case UnaryOp::round:
        return std::nearbyint(x);
      case UnaryOp::trunc:
        return std::trunc(x);
      case UnaryOp::frac:
        return x - std::trunc(x);
      case UnaryOp::sqrt:
        return std::sqrt(x);
      case UnaryOp::rsqrt:
        return T{1} / std::sqrt(x);
      case UnaryOp::reciprocal:
        return T{1} / x;
      // Transcendental: computed wider, compared with a tolerance.
      case UnaryOp::exp:
        return static_cast<T>(std::exp(v));
      case UnaryOp::expm1:
        return static_cast<T>(std::expm1(v));
      case UnaryOp::log:
        return static_cast<T>(std::log(v));
      case UnaryOp::log1p:
        return static_cast<T>(std::log1p(v));
      case UnaryOp::log2:
        return static_cast<T>(std::log2(v));
      case UnaryOp::sin:
        return static_cast<T>(std::sin(v));
      case UnaryOp::cos:
        return static_cast<T>(std::cos(v));
      case UnaryOp::tan:
        return static_cast<T>(std::tan(v));
      case UnaryOp::tanh:
        return static_cast<T>(std::tanh(v));
      case UnaryOp::sigmoid:
        return static_cast<T>(Wide{1} / (Wide{1} + std::exp(-v)));
      case UnaryOp::gelu:  // the limits at +-inf, as documented
        if (std::isinf(x)) return x > 0 ? x : T(-0.0);
        return static_cast<T>(Wide{0.5} * v * std::erfc(-v / std::sqrt(Wide{2})));
      case UnaryOp::erf:
        return static_cast<T>(std::erf(v));
      case UnaryOp::erfc:
        return static_cast<T>(std::erfc(v));
      case UnaryOp::exp2:
        return static_cast<T>(std::exp2(v));
      case UnaryOp::asin:
        return static_cast<T>(std::asin(v));
      case UnaryOp::acos:
        return static_cast<T>(std::acos(v));
      case UnaryOp::atan:
        return static_cast<T>(std::atan(v));
      case UnaryOp::sinh:
        return static_cast<T>(std::sinh(v));
      case UnaryOp::cosh:
        return static_cast<T>(std::cosh(v));
      case UnaryOp::asinh:
        return static_cast<T>(std::asinh(v));
      case UnaryOp::acosh:
        return static_cast<T>(std::acosh(v));
      case UnaryOp::atanh:
        return static_cast<T>(std::atanh(v));
      case UnaryOp::log10:
        return static_cast<T>(std::log10(v));
      default:
        break;
    }
    ADD_FAILURE() << "no float reference for " << unary_op_name(op);
    return 0;
  }
}

// Relative error allowed against unary_reference: 0 for exact ops.
template <typename T>
double unary_tolerance(UnaryOp op) {
  switch (op) {
    case UnaryOp::exp:
    case UnaryOp::expm1:
    case UnaryOp::log:
    case UnaryOp::log1p:
    case UnaryOp::log2:
    case UnaryOp::sin:
    case UnaryOp::cos:
    case UnaryOp::tan:
    case UnaryOp::tanh:
    case UnaryOp::sigmoid:
    case UnaryOp::gelu:
    case UnaryOp::erf:
    case UnaryOp::erfc:
    case UnaryOp::exp2:
    case UnaryOp::asin:
    case UnaryOp::acos:
    case UnaryOp::atan:
    case UnaryOp::sinh:
    case UnaryOp::cosh:
    case UnaryOp::asinh:
    case UnaryOp::acosh:
    case UnaryOp::atanh:
    case UnaryOp::log10:
      break;
    default:
      return 0;
  }
  if constexpr (std::is_same_v<T, double>) {
    if (op == UnaryOp::erfc) return 4e-15;  // libm's erfc: a few ulp in the tail
    return 1e-15;  // libm's double functions and short formulas on them: a few ulp
  } else {
    switch (op) {
      case UnaryOp::gelu:
        return 8e-7;
      case UnaryOp::sin:
      case UnaryOp::cos:
      case UnaryOp::tan:
        return 1.2e-7;  // glibc's float functions, within 1 ulp
      default:
        return 2.5e-7;
    }
  }
}

template <typename T>
void expect_unary(UnaryOp op, const Array& in, const Array& out, const std::string& label) {
  const double tolerance = unary_tolerance<T>(op);
  int failures = 0;
  for_each_index(out.shape, [&](const int64_t* index) {
    const T x = element<T>(in, index, out.rank());
    const T got = element<T>(out, index, out.rank());
    const T expected = unary_reference<T>(op, x);
    bool ok;
    if constexpr (std::is_integral_v<T>) {
      ok = got == expected;
    } else {
      ok = tolerance == 0 ? same_value(got, expected) && std::signbit(got) == std::signbit(expected)
                          : relative_error(got, expected) <= tolerance;
    }
    if (!ok && failures++ < 5) {
      ADD_FAILURE() << label << " " << unary_op_name(op) << "(" << show(x) << ") = " << show(got)
                    << ", expected " << show(expected);
    }
  });
}

template <typename T>
void run_unary_cases(UnaryOp op, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const DType type = dtype_for<T>();
  for (int64_t n : {1, 7, 8, 9, 33, 32769, 100003}) {
    const Array in = make_array(Shape{n}, type, Layout::contiguous);
    fill_random<T>(in, rng, true);
    const Array out = Array::empty(in.shape, type);
    unary_kernel(op, in, out);
    expect_unary<T>(op, in, out, std::string(dtype_name(type)) + " size " + std::to_string(n));
  }
  for (Layout layout : {Layout::transposed, Layout::padded}) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{3, 5}, {33, 9}, {300, 257}}) {
      const Shape shape{rows, cols};
      const Array in = make_array(shape, type, layout);
      fill_random<T>(in, rng, true);
      const Array out = make_array(shape, type, layout);
      unary_kernel(op, in, out);
      const std::string label = std::string(dtype_name(type)) + " layout " +
                                std::to_string(static_cast<int>(layout)) + " " +
                                shape_string(shape);
      expect_unary<T>(op, in, out, label);
      if (layout == Layout::padded) {
        EXPECT_TRUE(padding_untouched(out)) << label;
      }
      // Into a contiguous output, and in place.
      const Array dense = Array::empty(shape, type);
      unary_kernel(op, in, dense);
      expect_unary<T>(op, in, dense, label + " to contiguous");
      copy_kernel(in, dense);
      unary_kernel(op, in, in);
      expect_unary<T>(op, dense, in, label + " in place");
    }
  }
  // A broadcast input (0 strides): one value for a whole row.
  const Array row = make_array(Shape{1, 7}, type, Layout::contiguous);
  fill_random<T>(row, rng, true);
  const Array expanded = row.expanded(Shape{40, 7});
  const Array column = make_array(Shape{40, 1}, type, Layout::contiguous);
  fill_random<T>(column, rng, true);
  for (const Array& in : {expanded, column.expanded(Shape{40, 7})}) {
    const Array out = Array::empty(Shape{40, 7}, type);
    unary_kernel(op, in, out);
    expect_unary<T>(op, in, out, "expanded");
  }
}

constexpr std::initializer_list<UnaryOp> kIntegerUnary = {
    UnaryOp::neg,   UnaryOp::abs,  UnaryOp::sign,  UnaryOp::square, UnaryOp::relu,
    UnaryOp::floor, UnaryOp::ceil, UnaryOp::round, UnaryOp::trunc,  UnaryOp::frac};

template <typename T>
void run_unary_ops() {
  uint64_t seed = 100;
  for (int i = 0; i < kUnaryOpCount; ++i) {
    const UnaryOp op = static_cast<UnaryOp>(i);
    if (traits(op).result == OpResult::boolean) continue;  // bool out: own tests below
    if (std::is_integral_v<T> && unary_needs_float(op)) continue;
    SCOPED_TRACE(unary_op_name(op));
    run_unary_cases<T>(op, seed++);
  }
}

TEST(Elementwise, UnaryF32) {
  run_unary_ops<float>();
}
TEST(Elementwise, UnaryF64) {
  run_unary_ops<double>();
}
TEST(Elementwise, UnaryI32) {
  run_unary_ops<int32_t>();
}
TEST(Elementwise, UnaryI64) {
  run_unary_ops<int64_t>();
}

TEST(Elementwise, UnaryNeedsFloat) {
  for (UnaryOp op : kIntegerUnary) EXPECT_FALSE(unary_needs_float(op)) << unary_op_name(op);
  EXPECT_FALSE(unary_needs_float(UnaryOp::logical_not));
  for (UnaryOp op : {UnaryOp::exp, UnaryOp::log, UnaryOp::sqrt, UnaryOp::tanh, UnaryOp::sigmoid,
                     UnaryOp::gelu, UnaryOp::reciprocal, UnaryOp::sin}) {
    EXPECT_TRUE(unary_needs_float(op)) << unary_op_name(op);
  }
  EXPECT_STREQ(unary_op_name(UnaryOp::log1p), "log1p");
  EXPECT_STREQ(binary_op_name(BinaryOp::floordiv), "floordiv");
  EXPECT_TRUE(binary_is_comparison(BinaryOp::logical_xor));
  EXPECT_FALSE(binary_is_comparison(BinaryOp::maximum));
  // Ops the op layer must have converted for are refused, not miscomputed.
  const Array ints = Array::empty(Shape{3}, DType::i64);
  EXPECT_THROW(unary_kernel(UnaryOp::exp, ints, ints), Error);
  const Array bools = Array::empty(Shape{3}, DType::boolean);
  EXPECT_THROW(binary_kernel(BinaryOp::add, bools, bools, bools), Error);
}

TEST(Elementwise, LogicalNotEveryDtype) {
  const Array f = from_values<float>(Shape{4}, {0.0f, -0.0f, std::nanf(""), 2.5f});
  const Array i = from_values<int64_t>(Shape{4}, {0, 1, -1, std::numeric_limits<int64_t>::min()});
  const Array b = from_values<uint8_t>(Shape{4}, {0, 1, 2, 255});
  const std::vector<uint8_t> expected[] = {{1, 1, 0, 0}, {1, 0, 0, 0}, {1, 0, 0, 0}};
  int k = 0;
  for (const Array& in : {f, i, b}) {
    const Array out = Array::empty(Shape{4}, DType::boolean);
    unary_kernel(UnaryOp::logical_not, in, out);
    EXPECT_EQ(to_values<uint8_t>(out), expected[k++]);
  }
}

// isnan, isinf, isfinite: floats by value, integers and bools always finite.
TEST(Elementwise, FloatClassesEveryDtype) {
  const float inf = std::numeric_limits<float>::infinity();
  const Array f = from_values<float>(Shape{5}, {0.0f, -inf, std::nanf(""), 3e38f, inf});
  const Array d = from_values<double>(
      Shape{5}, {-0.0, std::nan(""), 1e308, -std::numeric_limits<double>::infinity(), 1});
  const Array i = from_values<int64_t>(Shape{5}, {0, 1, -1, 7, 9});
  const Array b = from_values<uint8_t>(Shape{5}, {0, 1, 1, 0, 1});
  struct Case {
    UnaryOp op;
    std::vector<uint8_t> f32, f64;
  };
  const Case cases[] = {{UnaryOp::isnan, {0, 0, 1, 0, 0}, {0, 1, 0, 0, 0}},
                        {UnaryOp::isinf, {0, 1, 0, 0, 1}, {0, 0, 0, 1, 0}},
                        {UnaryOp::isfinite, {1, 0, 0, 1, 0}, {1, 0, 1, 0, 1}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(unary_op_name(c.op));
    const uint8_t integer_answer = c.op == UnaryOp::isfinite ? 1 : 0;
    const std::vector<uint8_t> integers(5, integer_answer);
    const std::vector<uint8_t>* expected[] = {&c.f32, &c.f64, &integers, &integers};
    int k = 0;
    for (const Array& in : {f, d, i, b}) {
      const Array out = Array::empty(Shape{5}, DType::boolean);
      unary_kernel(c.op, in, out);
      EXPECT_EQ(to_values<uint8_t>(out), *expected[k++]);
    }
  }
}

template <typename T>
std::vector<T> run_unary_values(UnaryOp op, const std::vector<T>& values) {
  const Array in = from_values<T>(Shape{static_cast<int64_t>(values.size())}, values);
  const Array out = Array::empty(in.shape, in.dtype);
  unary_kernel(op, in, out);
  return to_values<T>(out);
}

template <typename T>
void check_special_values() {
  const T inf = std::numeric_limits<T>::infinity();
  const T nan = std::numeric_limits<T>::quiet_NaN();
  auto same = [](std::vector<T> got, std::vector<T> expected) {
    EXPECT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i) {
      const bool same_sign =
          std::isnan(got[i]) || std::signbit(got[i]) == std::signbit(expected[i]);
      EXPECT_TRUE(same_value(got[i], expected[i]) && same_sign)
          << i << ": " << show(got[i]) << " vs " << show(expected[i]);
    }
  };
  // Round half to even, like torch.round.
  same(run_unary_values<T>(UnaryOp::round, {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999999}),
       {0, 2, 2, T(-0.0), -2, -2, 2});
  const T big =
      std::is_same_v<T, float> ? T(8388607.5) : T(4503599627370495.5);  // 2^23, 2^52 - 0.5
  same(run_unary_values<T>(UnaryOp::floor, {-0.5, 0.5, T(-0.0), -inf, nan, big, -big, -3, T(-2.5)}),
       {-1, 0, T(-0.0), -inf, nan, big - T(0.5), -big - T(0.5), -3, -3});
  same(run_unary_values<T>(UnaryOp::ceil, {-0.5, 0.5, T(-0.0), inf, nan, big, -big, 3, T(2.5)}),
       {T(-0.0), 1, T(-0.0), inf, nan, big + T(0.5), -big + T(0.5), 3, 3});
  same(run_unary_values<T>(UnaryOp::trunc, {-0.7, 0.7, T(-0.0), -inf, nan, big, -big, T(-2.5)}),
       {T(-0.0), 0, T(-0.0), -inf, nan, big - T(0.5), -big + T(0.5), -2});
  same(run_unary_values<T>(UnaryOp::relu, {nan, -inf, T(-0.0), 3}), {nan, 0, T(-0.0), 3});
  same(run_unary_values<T>(UnaryOp::sign, {nan, T(-0.0), -4, inf}), {nan, T(-0.0), -1, 1});
  same(run_unary_values<T>(UnaryOp::exp, {-inf, inf, nan, 0, -800, 800}), {0, inf, nan, 1, 0, inf});
  same(run_unary_values<T>(UnaryOp::expm1, {-inf, inf, nan, T(-0.0), -800}),
       {-1, inf, nan, T(-0.0), -1});
  same(run_unary_values<T>(UnaryOp::log, {0, T(-0.0), -1, inf, -inf, nan, 1}),
       {-inf, -inf, nan, inf, nan, nan, 0});
  same(run_unary_values<T>(UnaryOp::log2, {0, 8, T(0.125), inf, -2, 1024}),
       {-inf, 3, -3, inf, nan, 10});
  same(run_unary_values<T>(UnaryOp::log1p, {-1, inf, -2, T(-0.0), nan}),
       {-inf, inf, nan, T(-0.0), nan});
  same(run_unary_values<T>(UnaryOp::tanh, {inf, -inf, T(-0.0), nan, 30, -30}),
       {1, -1, T(-0.0), nan, 1, -1});
  same(run_unary_values<T>(UnaryOp::sigmoid, {inf, -inf, nan, 0}), {1, 0, nan, T(0.5)});
  // gelu at +-inf gives the limits (the formula would give -inf * 0 = NaN).
  same(run_unary_values<T>(UnaryOp::gelu, {inf, -inf, nan, 0, T(-0.0), 100, -100}),
       {inf, T(-0.0), nan, 0, T(-0.0), 100, T(-0.0)});
  same(run_unary_values<T>(UnaryOp::rsqrt, {0, inf, -1}), {inf, 0, nan});
  // Accuracy where naive formulas lose it.
  const std::vector<T> tiny = run_unary_values<T>(UnaryOp::expm1, {T(1e-10), T(-3e-9)});
  EXPECT_NEAR(tiny[0] / T(1e-10), 1, 1e-6);
  EXPECT_NEAR(tiny[1] / T(-3e-9), 1, 1e-6);
  EXPECT_NEAR(run_unary_values<T>(UnaryOp::log1p, {T(1e-10)})[0] / T(1e-10), 1, 1e-6);
  const T sigmoid_low = run_unary_values<T>(UnaryOp::sigmoid, {-100})[0];
  const double sigmoid_tolerance = std::is_same_v<T, float> ? 0.05 : 1e-12;  // f32: subnormal
  EXPECT_NEAR(sigmoid_low / T(3.7200759760208361e-44), 1, sigmoid_tolerance);
  const T gelu_low = run_unary_values<T>(UnaryOp::gelu, {-8})[0];
  EXPECT_NEAR(gelu_low / T(-4.976768459417428e-15), 1, 1e-6);  // 1 + erf(.) would cancel
}

TEST(Elementwise, UnarySpecialValuesF32) {
  check_special_values<float>();
}
TEST(Elementwise, UnarySpecialValuesF64) {
  check_special_values<double>();
}

// ---- clamp ----

TEST(Elementwise, ClampFloats) {
  const float nan = std::nanf("");
  const std::vector<float> values = {-5, -1, 0, 0.5f, 1, 7, nan, -INFINITY, INFINITY};
  const Array in = from_values<float>(Shape{9}, values);
  const Array out = make_array(Shape{9}, DType::f32, Layout::padded);
  clamp_kernel(in, true, -1, true, 1, out);
  std::vector<float> got = to_values<float>(out);
  const std::vector<float> expected = {-1, -1, 0, 0.5f, 1, 1, nan, -1, 1};
  for (int i = 0; i < 9; ++i) EXPECT_TRUE(same_value(got[i], expected[i])) << i;
  EXPECT_TRUE(padding_untouched(out));
  // Only a lower bound; a NaN bound makes every result NaN (as PyTorch);
  // low > high gives high.
  clamp_kernel(in, true, 0.5, false, 0, out);
  EXPECT_EQ(to_values<float>(out)[0], 0.5f);
  EXPECT_EQ(to_values<float>(out)[5], 7.0f);
  clamp_kernel(in, true, 0.5, true, nan, out);
  for (float v : to_values<float>(out)) EXPECT_TRUE(std::isnan(v));
  clamp_kernel(in, true, nan, false, 0, out);
  for (float v : to_values<float>(out)) EXPECT_TRUE(std::isnan(v));
  clamp_kernel(in, true, 3, true, 2, out);
  got = to_values<float>(out);
  for (int i = 0; i < 9; ++i) {
    if (i != 6) {
      EXPECT_EQ(got[i], 2.0f) << i;
    }
  }
  // Bounds beyond float's range are infinities, not undefined conversions.
  clamp_kernel(in, true, -1e300, true, 1e300, out);
  EXPECT_EQ(to_values<float>(out)[8], INFINITY);
}

TEST(Elementwise, ClampIntegers) {
  const std::vector<int32_t> values = {std::numeric_limits<int32_t>::min(), -3, 0, 1, 2, 3,
                                       std::numeric_limits<int32_t>::max()};
  const Array in = from_values<int32_t>(Shape{7}, values);
  const Array out = Array::empty(Shape{7}, DType::i32);
  // Fractional bounds keep the integers inside [low, high].
  clamp_kernel(in, true, 0.5, true, 2.5, out);
  EXPECT_EQ(to_values<int32_t>(out), (std::vector<int32_t>{1, 1, 1, 1, 2, 2, 2}));
  // Bounds beyond the type's range saturate.
  clamp_kernel(in, true, -1e30, true, 1e30, out);
  EXPECT_EQ(to_values<int32_t>(out), values);
  clamp_kernel(in, false, 0, true, -1e30, out);
  EXPECT_EQ(to_values<int32_t>(out)[3], std::numeric_limits<int32_t>::min());
  const Array big = from_values<int64_t>(Shape{2}, {-(int64_t{1} << 60), int64_t{1} << 60});
  clamp_kernel(big, true, -1e18, false, 0, big);
  EXPECT_EQ(to_values<int64_t>(big),
            (std::vector<int64_t>{-1000000000000000000, int64_t{1} << 60}));
}
}  // namespace
}  // namespace lazylua
