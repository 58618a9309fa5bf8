// elementwise_test.cpp - the elementwise reference kernels against naive
// references written here: binary ops, where, copy, fill, arange, any/all
// (unary ops and clamp: elementwise_unary_test.cpp). Each expected value
// comes from a scalar loop over logical indices, with broadcasting done by
// hand, integer semantics recomputed in 128-bit arithmetic, and float ops
// written out in the same precision: the kernels must match exactly.
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

// ---- Independent references ----

// Lua's // on integers, in 128 bits (no overflow possible), then wrapped.
__int128 floor_divide_128(__int128 a, __int128 b) {
  __int128 q = a / b;
  if (q * b != a && ((a < 0) != (b < 0))) q -= 1;
  return q;
}

template <typename T>
T integer_pow(T base, T exponent) {
  if (exponent < 0) return base == 1 ? 1 : (exponent % 2 == 0 ? 1 : -1);  // base is +-1 here
  __int128 result = 1;
  for (T i = 0; i < exponent && i < 200; ++i) result = wrap<T>(result * base);
  if (exponent >= 200) {  // long exponents: square and multiply, modulo 2^bits
    using U = std::make_unsigned_t<T>;
    U r = 1, b = static_cast<U>(base);
    for (uint64_t e = static_cast<uint64_t>(exponent); e; e >>= 1) {
      if (e & 1) r = static_cast<U>(static_cast<unsigned __int128>(r) * b);
      b = static_cast<U>(static_cast<unsigned __int128>(b) * b);
    }
    return static_cast<T>(r);
  }
  return static_cast<T>(result);
}

// Lua 5.4's luai_nummod, literally.
template <typename T>
T lua_float_mod(T a, T b) {
  T m = std::fmod(a, b);
  if (m * b < 0) m += b;
  return m;
}

// The expected value of a binary op, written independently of the kernel.
template <typename T>
auto binary_reference(BinaryOp op, T a, T b) {
  using R = std::conditional_t<std::is_same_v<T, uint8_t>, int, T>;
  R x = a, y = b;
  if constexpr (std::is_same_v<T, uint8_t>) {
    x = a != 0;
    y = b != 0;
  }
  switch (op) {
    case BinaryOp::eq:
      return static_cast<uint8_t>(x == y);
    case BinaryOp::ne:
      return static_cast<uint8_t>(x != y);
    case BinaryOp::lt:
      return static_cast<uint8_t>(x < y);
    case BinaryOp::le:
      return static_cast<uint8_t>(x <= y);
    case BinaryOp::gt:
      return static_cast<uint8_t>(x > y);
    case BinaryOp::ge:
      return static_cast<uint8_t>(x >= y);
    case BinaryOp::logical_and:
      return static_cast<uint8_t>(x != 0 && y != 0);
    case BinaryOp::logical_or:
      return static_cast<uint8_t>(x != 0 || y != 0);
    case BinaryOp::logical_xor:
      return static_cast<uint8_t>((x != 0) != (y != 0));
    default:
      break;
  }
  ADD_FAILURE() << "not a predicate";
  return uint8_t{0};
}

template <typename T>
T arithmetic_reference(BinaryOp op, T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    const __int128 x = a, y = b;
    switch (op) {
      case BinaryOp::add:
        return wrap<T>(x + y);
      case BinaryOp::sub:
        return wrap<T>(x - y);
      case BinaryOp::mul:
        return wrap<T>(x * y);
      case BinaryOp::floordiv:
        return wrap<T>(floor_divide_128(x, y));
      case BinaryOp::mod:
        return wrap<T>(x - floor_divide_128(x, y) * y);
      case BinaryOp::pow:
        return integer_pow<T>(a, b);
      case BinaryOp::maximum:
        return std::max(a, b);
      case BinaryOp::minimum:
        return std::min(a, b);
      default:
        break;
    }
  } else {
    const T nan = std::numeric_limits<T>::quiet_NaN();
    switch (op) {
      case BinaryOp::add:
        return a + b;
      case BinaryOp::sub:
        return a - b;
      case BinaryOp::mul:
        return a * b;
      case BinaryOp::div:
        return a / b;
      case BinaryOp::floordiv:
        return std::floor(a / b);
      case BinaryOp::mod:
        return lua_float_mod(a, b);
      case BinaryOp::pow:
        // float: in double, rounded once (kernel_math.h's ll_powf is
        // correctly rounded on these inputs; glibc's powf is off by up to
        // 0.82 ulp).
        if constexpr (std::is_same_v<T, float>) {
          return static_cast<float>(std::pow(static_cast<double>(a), static_cast<double>(b)));
        } else {
          return std::pow(a, b);
        }
      case BinaryOp::maximum:
        return std::isnan(a) || std::isnan(b) ? nan : std::max(a, b);
      case BinaryOp::minimum:
        return std::isnan(a) || std::isnan(b) ? nan : std::min(a, b);
      case BinaryOp::atan2:
        return std::atan2(a, b);
      default:
        break;
    }
  }
  ADD_FAILURE() << "no reference for " << binary_op_name(op);
  return T{};
}

// Checks out == op(a, b) elementwise (a and b broadcast to out's shape).
template <typename T>
void expect_binary(BinaryOp op, const Array& a, const Array& b, const Array& out,
                   const std::string& label) {
  int failures = 0;
  const int rank = out.rank();
  for_each_index(out.shape, [&](const int64_t* index) {
    const T x = element<T>(a, index, rank), y = element<T>(b, index, rank);
    if (binary_is_comparison(op)) {
      const uint8_t expected = binary_reference<T>(op, x, y);
      const uint8_t got = element<uint8_t>(out, index, rank);
      if (got != expected && failures++ < 5) {
        ADD_FAILURE() << label << " " << binary_op_name(op) << "(" << show(x) << ", " << show(y)
                      << ") = " << int{got} << ", expected " << int{expected};
      }
    } else {
      const T expected = arithmetic_reference<T>(op, x, y);
      const T got = element<T>(out, index, rank);
      if (!same_value(got, expected) && failures++ < 5) {
        ADD_FAILURE() << label << " " << binary_op_name(op) << "(" << show(x) << ", " << show(y)
                      << ") = " << show(got) << ", expected " << show(expected);
      }
    }
  });
}

// ---- Binary ops over layouts, sizes and dtypes ----

struct BroadcastCase {
  const char* name;
  Shape a, b, out;
};

std::vector<BroadcastCase> broadcast_cases() {
  std::vector<BroadcastCase> cases;
  for (int64_t n : {1, 7, 8, 9, 33, 32769, 100003}) {
    cases.push_back({"same shape", Shape{n}, Shape{n}, Shape{n}});
  }
  for (int64_t n : {5, 33, 100003}) {
    cases.push_back({"scalar a", Shape{}, Shape{n}, Shape{n}});
    cases.push_back({"scalar b", Shape{n}, Shape{1}, Shape{n}});
  }
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{3, 5}, {7, 9}, {33, 8}, {200, 513}}) {
    cases.push_back({"row", Shape{rows, cols}, Shape{cols}, Shape{rows, cols}});
    cases.push_back({"column", Shape{rows, cols}, Shape{rows, 1}, Shape{rows, cols}});
    cases.push_back({"outer", Shape{rows, 1}, Shape{1, cols}, Shape{rows, cols}});
    cases.push_back({"2-D same", Shape{rows, cols}, Shape{rows, cols}, Shape{rows, cols}});
  }
  cases.push_back({"3-D mixed", Shape{4, 1, 6}, Shape{5, 1}, Shape{4, 5, 6}});
  cases.push_back({"3-D mixed big", Shape{3, 1, 20000}, Shape{2, 1}, Shape{3, 2, 20000}});
  cases.push_back({"3-D middle", Shape{6, 7, 8}, Shape{7, 1}, Shape{6, 7, 8}});
  cases.push_back({"4-D", Shape{2, 3, 4, 5}, Shape{1, 3, 1, 5}, Shape{2, 3, 4, 5}});
  return cases;
}

template <typename T>
void run_binary_cases(BinaryOp op, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const bool predicate = binary_is_comparison(op);
  const DType type = dtype_for<T>();
  std::function<T(T)> adjust_b = nullptr;
  if constexpr (std::is_integral_v<T>) {
    if (op == BinaryOp::floordiv || op == BinaryOp::mod) {
      adjust_b = [](T v) { return v == 0 ? T{3} : v; };
    } else if (op == BinaryOp::pow) {
      adjust_b = [](T v) { return static_cast<T>(std::abs(v % 70)); };  // 0..69
    }
  }
  for (const BroadcastCase& c : broadcast_cases()) {
    // (inputs' layout, output's layout)
    const std::pair<Layout, Layout> layouts[] = {{Layout::contiguous, Layout::contiguous},
                                                 {Layout::transposed, Layout::transposed},
                                                 {Layout::padded, Layout::padded},
                                                 {Layout::contiguous, Layout::padded},
                                                 {Layout::transposed, Layout::contiguous}};
    for (auto [in_layout, out_layout] : layouts) {
      const bool plain = in_layout == Layout::contiguous && out_layout == Layout::contiguous;
      if (!plain && numel(c.out) > 50000) continue;  // keep it quick
      const Array a = make_array(c.a, type, in_layout);
      const Array b =
          make_array(c.b, type, in_layout == Layout::transposed ? Layout::padded : in_layout);
      fill_random<T>(a, rng, true);
      fill_random<T>(b, rng, true, adjust_b);
      const Array out = make_array(c.out, predicate ? DType::boolean : type, out_layout);
      binary_kernel(op, a, b, out);
      const std::string label = std::string(c.name) + " " + shape_string(c.out) + " layouts " +
                                std::to_string(static_cast<int>(in_layout)) + "/" +
                                std::to_string(static_cast<int>(out_layout)) + " " +
                                dtype_name(type);
      expect_binary<T>(op, a, b, out, label);
      if (out_layout == Layout::padded) {
        EXPECT_TRUE(padding_untouched(out)) << label;
      }
    }
  }
  // In place: out is a itself, then b itself (same shapes), also through a
  // transposed view.
  if (!predicate) {
    for (Layout layout : {Layout::contiguous, Layout::transposed}) {
      const Shape shape{37, 41};
      const Array a = make_array(shape, type, layout);
      const Array b = make_array(shape, type, layout);
      fill_random<T>(a, rng, true);
      fill_random<T>(b, rng, true, adjust_b);
      const Array a_before = make_array(shape, type, Layout::contiguous);
      copy_kernel(a, a_before);
      binary_kernel(op, a, b, a);
      expect_binary<T>(op, a_before, b, a, "in place (out = a)");
      const Array b_before = make_array(shape, type, Layout::contiguous);
      copy_kernel(b, b_before);
      binary_kernel(op, a_before, b, b);
      expect_binary<T>(op, a_before, b_before, b, "in place (out = b)");
    }
  }
}

template <typename T>
void run_binary_ops(std::initializer_list<BinaryOp> ops) {
  uint64_t seed = 1;
  for (BinaryOp op : ops) {
    SCOPED_TRACE(binary_op_name(op));
    run_binary_cases<T>(op, seed++);
  }
}

constexpr std::initializer_list<BinaryOp> kPredicates = {
    BinaryOp::eq, BinaryOp::ne,          BinaryOp::lt,         BinaryOp::le,         BinaryOp::gt,
    BinaryOp::ge, BinaryOp::logical_and, BinaryOp::logical_or, BinaryOp::logical_xor};
constexpr std::initializer_list<BinaryOp> kIntegerArithmetic = {
    BinaryOp::add, BinaryOp::sub, BinaryOp::mul,     BinaryOp::floordiv,
    BinaryOp::mod, BinaryOp::pow, BinaryOp::maximum, BinaryOp::minimum};
constexpr std::initializer_list<BinaryOp> kFloatArithmetic = {
    BinaryOp::add, BinaryOp::sub, BinaryOp::mul,     BinaryOp::div,     BinaryOp::floordiv,
    BinaryOp::mod, BinaryOp::pow, BinaryOp::maximum, BinaryOp::minimum, BinaryOp::atan2};

TEST(Elementwise, BinaryF32) {
  run_binary_ops<float>(kFloatArithmetic);
  run_binary_ops<float>(kPredicates);
}
TEST(Elementwise, BinaryF64) {
  run_binary_ops<double>(kFloatArithmetic);
  run_binary_ops<double>(kPredicates);
}
TEST(Elementwise, BinaryI32) {
  run_binary_ops<int32_t>(kIntegerArithmetic);
  run_binary_ops<int32_t>(kPredicates);
}
TEST(Elementwise, BinaryI64) {
  run_binary_ops<int64_t>(kIntegerArithmetic);
  run_binary_ops<int64_t>(kPredicates);
}
TEST(Elementwise, BinaryBool) {
  run_binary_ops<uint8_t>(kPredicates);
}

// The same ops, split over 1 and 2 threads, must give the same bits.
TEST(Elementwise, ThreadCountDoesNotChangeResults) {
  const int saved = thread_count();
  std::mt19937_64 rng(7);
  const Shape shape{3, 100003};
  const Array a = make_array(shape, DType::f32, Layout::contiguous);
  const Array b = make_array(Shape{3, 1}, DType::f32, Layout::contiguous);
  fill_random<float>(a, rng, true);
  fill_random<float>(b, rng, true);
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 3}) {
    set_thread_count(threads);
    const Array out = Array::empty(shape, DType::f32);
    binary_kernel(BinaryOp::mul, a, b, out);
    unary_kernel(UnaryOp::tanh, out, out);
    results.push_back(to_values<float>(out));
  }
  set_thread_count(saved);
  EXPECT_EQ(0, std::memcmp(results[0].data(), results[1].data(), results[0].size() * 4));
  EXPECT_EQ(0, std::memcmp(results[0].data(), results[2].data(), results[0].size() * 4));
}

// ---- Integer and float corner cases, by hand ----

template <typename T>
std::vector<T> run_binary_values(BinaryOp op, const std::vector<T>& a, const std::vector<T>& b) {
  const Array x = from_values<T>(Shape{static_cast<int64_t>(a.size())}, a);
  const Array y = from_values<T>(Shape{static_cast<int64_t>(b.size())}, b);
  const Array out = Array::empty(x.shape, x.dtype);
  binary_kernel(op, x, y, out);
  return to_values<T>(out);
}

template <typename T>
std::vector<uint8_t> run_predicate_values(BinaryOp op, const std::vector<T>& a,
                                          const std::vector<T>& b) {
  const Array x = from_values<T>(Shape{static_cast<int64_t>(a.size())}, a);
  const Array y = from_values<T>(Shape{static_cast<int64_t>(b.size())}, b);
  const Array out = Array::empty(x.shape, DType::boolean);
  binary_kernel(op, x, y, out);
  return to_values<uint8_t>(out);
}

TEST(Elementwise, IntegerCorners) {
  constexpr int32_t kMin32 = std::numeric_limits<int32_t>::min();
  constexpr int32_t kMax32 = std::numeric_limits<int32_t>::max();
  constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax64 = std::numeric_limits<int64_t>::max();
  // Wrapping, as Lua's integers.
  EXPECT_EQ(run_binary_values<int32_t>(BinaryOp::add, {kMax32, kMin32}, {1, -1}),
            (std::vector<int32_t>{kMin32, kMax32}));
  EXPECT_EQ(run_binary_values<int64_t>(BinaryOp::mul, {kMax64, kMin64}, {2, -1}),
            (std::vector<int64_t>{-2, kMin64}));
  EXPECT_EQ(run_binary_values<int64_t>(BinaryOp::sub, {kMin64}, {1}),
            (std::vector<int64_t>{kMax64}));
  // minint // -1 wraps to minint and minint % -1 is 0, without SIGFPE.
  EXPECT_EQ(run_binary_values<int32_t>(BinaryOp::floordiv, {kMin32, kMin32}, {-1, 1}),
            (std::vector<int32_t>{kMin32, kMin32}));
  EXPECT_EQ(run_binary_values<int64_t>(BinaryOp::floordiv, {kMin64}, {-1}),
            (std::vector<int64_t>{kMin64}));
  EXPECT_EQ(run_binary_values<int32_t>(BinaryOp::mod, {kMin32}, {-1}), (std::vector<int32_t>{0}));
  EXPECT_EQ(run_binary_values<int64_t>(BinaryOp::mod, {kMin64}, {-1}), (std::vector<int64_t>{0}));
  // Floor division and modulo round toward minus infinity (Lua: 7 // -2 == -4).
  const std::vector<int64_t> a = {7, -7, 7, -7, 6, -6, 0, kMax64};
  const std::vector<int64_t> b = {2, 2, -2, -2, 3, -3, -5, kMin64};
  EXPECT_EQ(run_binary_values<int64_t>(BinaryOp::floordiv, a, b),
            (std::vector<int64_t>{3, -4, -4, 3, 2, 2, 0, -1}));
  EXPECT_EQ(run_binary_values<int64_t>(BinaryOp::mod, a, b),
            (std::vector<int64_t>{1, 1, -1, -1, 0, 0, 0, -1}));
  const std::vector<int32_t> a32 = {7, -7, 7, -7, kMax32, kMin32, kMin32};
  const std::vector<int32_t> b32 = {2, 2, -2, -2, kMin32, kMax32, 2};
  EXPECT_EQ(run_binary_values<int32_t>(BinaryOp::floordiv, a32, b32),
            (std::vector<int32_t>{3, -4, -4, 3, -1, -2, kMin32 / 2}));
  EXPECT_EQ(run_binary_values<int32_t>(BinaryOp::mod, a32, b32),
            (std::vector<int32_t>{1, 1, -1, -1, -1, kMax32 - 1, 0}));
  // Integer powers: exact, wrapping, and the +-1 bases with negative exponents.
  EXPECT_EQ(run_binary_values<int64_t>(BinaryOp::pow, {3, 2, 2, -1, -1, 1, 0, 7},
                                       {4, 62, 64, -3, -4, -9, 0, 0}),
            (std::vector<int64_t>{81, int64_t{1} << 62, 0, -1, 1, 1, 1, 1}));
  EXPECT_EQ(run_binary_values<int32_t>(BinaryOp::pow, {3}, {21}),
            (std::vector<int32_t>{static_cast<int32_t>(10460353203u & 0xffffffffu)}));
}

TEST(Elementwise, IntegerErrorsLeaveTargetUntouched) {
  for (DType type : {DType::i32, DType::i64}) {
    Array a = Array::empty(Shape{4}, type);
    fill_kernel_int(a, 5);
    Array b = Array::empty(Shape{4}, type);
    fill_kernel_int(b, 2);
    fill_kernel_int(b.narrowed(0, 2, 1), 0);
    try {
      binary_kernel(BinaryOp::floordiv, a, b, a);
      ADD_FAILURE() << "n // 0 did not raise";
    } catch (const Error& error) {
      EXPECT_STREQ(error.what(), "attempt to divide by zero");  // Lua 5.4's wording
    }
    try {
      binary_kernel(BinaryOp::mod, a, b, a);
      ADD_FAILURE() << "n % 0 did not raise";
    } catch (const Error& error) {
      EXPECT_STREQ(error.what(), "attempt to perform 'n%0'");
    }
    EXPECT_TRUE(all_nonzero(a));
    const Array scalar_zero = Array::empty(Shape{}, type);
    fill_kernel_int(scalar_zero, 0);
    EXPECT_THROW(binary_kernel(BinaryOp::mod, a, scalar_zero, a), Error);
    // Negative exponents: fine for bases 1 and -1 only.
    Array exponent = Array::empty(Shape{4}, type);
    fill_kernel_int(exponent, -2);
    EXPECT_THROW(binary_kernel(BinaryOp::pow, a, exponent, a), Error);
    Array ones = Array::empty(Shape{4}, type);
    fill_kernel_int(ones, -1);
    EXPECT_NO_THROW(binary_kernel(BinaryOp::pow, ones, exponent, ones));
    EXPECT_TRUE(all_nonzero(ones));
    EXPECT_FALSE(any_nonzero(a.narrowed(0, 0, 0)));
    // An empty op never raises.
    const Array empty = Array::empty(Shape{0}, type);
    EXPECT_NO_THROW(binary_kernel(BinaryOp::floordiv, empty, empty, empty));
  }
}

TEST(Elementwise, FloatModAndFloorDivFollowLua) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Values from the stock lua5.4: 5.5 % -2 == -0.5, -5 % math.huge == inf ...
  const std::vector<double> a = {5.5, -5.5, 5.0, -5.0, 5.0, -5.0, 0.0, nan, 3.0, inf};
  const std::vector<double> b = {-2, 2, inf, inf, -inf, -inf, -2, 1, nan, 2};
  const std::vector<double> mod = run_binary_values<double>(BinaryOp::mod, a, b);
  const std::vector<double> expected = {-0.5, 0.5, 5.0, inf, -inf, -5.0, 0.0, nan, nan, nan};
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(same_value(mod[i], expected[i])) << a[i] << " % " << b[i] << " = " << mod[i];
  }
  EXPECT_FALSE(std::signbit(mod[6]));  // Lua prints 0.0 % -2 as 0.0
  const std::vector<float> mod32 = run_binary_values<float>(BinaryOp::mod, {5.5f, -7.5f}, {-2, 2});
  EXPECT_EQ(mod32, (std::vector<float>{-0.5f, 0.5f}));
  const std::vector<double> quotient =
      run_binary_values<double>(BinaryOp::floordiv, {7, -7.5, 1, -1, 0}, {-2, 2, 0, 0, 0});
  EXPECT_EQ(quotient[0], -4);
  EXPECT_EQ(quotient[1], -4);
  EXPECT_EQ(quotient[2], inf);
  EXPECT_EQ(quotient[3], -inf);
  EXPECT_TRUE(std::isnan(quotient[4]));
}

TEST(Elementwise, MaximumMinimumPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> a = {nan, 1, nan, 2, -0.0f};
  const std::vector<float> b = {1, nan, nan, 3, 5};
  const std::vector<float> high = run_binary_values<float>(BinaryOp::maximum, a, b);
  const std::vector<float> low = run_binary_values<float>(BinaryOp::minimum, a, b);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(high[i]) && std::isnan(low[i])) << i;
  EXPECT_EQ(high[3], 3);
  EXPECT_EQ(low[3], 2);
  EXPECT_EQ(low[4], 0.0f);
  const std::vector<int32_t> ints = run_binary_values<int32_t>(BinaryOp::maximum, {-3, 4}, {2, -9});
  EXPECT_EQ(ints, (std::vector<int32_t>{2, 4}));
}

TEST(Elementwise, PowByScalarExponent) {
  // A scalar exponent takes shortcuts (x * x for 2 ...): they must agree
  // with the general pow of a tensor exponent bit for bit, including -0,
  // infinities and NaN, and with C's pow on the exact cases.
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> base = {-0.0f, 0.0f,   -inf,  inf,   std::nanf(""), 2.5f,
                                   -3.0f, 1e-30f, 3e38f, -1.0f, 0.3f};
  const Shape shape{static_cast<int64_t>(base.size())};
  for (float exponent : {2.0f, 1.0f, 0.0f, -1.0f, 0.5f, 3.0f, -0.5f, 1.7f}) {
    const Array a = from_values<float>(shape, base);
    const Array out = Array::empty(a.shape, DType::f32),
                general = Array::empty(a.shape, DType::f32);
    binary_kernel(BinaryOp::pow, a, from_values<float>(Shape{}, {exponent}), out);
    binary_kernel(BinaryOp::pow, a,
                  from_values<float>(shape, std::vector<float>(base.size(), exponent)), general);
    const std::vector<float> got = to_values<float>(out), expected = to_values<float>(general);
    for (size_t i = 0; i < base.size(); ++i) {
      EXPECT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(expected[i]))
          << base[i] << " ^ " << exponent << " = " << got[i] << ", expected " << expected[i];
      const float c = std::pow(base[i], exponent);
      if (exponent == 2.0f || exponent == 1.0f || exponent == 0.0f || exponent == -1.0f ||
          exponent == 0.5f) {
        EXPECT_TRUE(same_value(got[i], c) &&
                    (std::isnan(c) || std::signbit(got[i]) == std::signbit(c)))
            << base[i] << " ^ " << exponent << " = " << got[i] << ", C says " << c;
      }
    }
  }
}

TEST(Elementwise, PredicatesOnOddBoolBytesAndNaN) {
  // A host buffer may use any nonzero byte for true.
  const std::vector<uint8_t> a = {2, 0, 255, 1, 2};
  const std::vector<uint8_t> b = {1, 0, 0, 7, 0};
  EXPECT_EQ(run_predicate_values<uint8_t>(BinaryOp::eq, a, b),
            (std::vector<uint8_t>{1, 1, 0, 1, 0}));
  EXPECT_EQ(run_predicate_values<uint8_t>(BinaryOp::gt, a, b),
            (std::vector<uint8_t>{0, 0, 1, 0, 1}));
  EXPECT_EQ(run_predicate_values<uint8_t>(BinaryOp::logical_xor, a, b),
            (std::vector<uint8_t>{0, 0, 1, 0, 1}));
  // NaN compares unequal to everything, itself included, and is "true".
  const float nan = std::nanf("");
  const std::vector<float> x = {nan, nan, 1, -0.0f};
  const std::vector<float> y = {nan, 1, nan, 0.0f};
  EXPECT_EQ(run_predicate_values<float>(BinaryOp::ne, x, y), (std::vector<uint8_t>{1, 1, 1, 0}));
  EXPECT_EQ(run_predicate_values<float>(BinaryOp::eq, x, y), (std::vector<uint8_t>{0, 0, 0, 1}));
  EXPECT_EQ(run_predicate_values<float>(BinaryOp::le, x, y), (std::vector<uint8_t>{0, 0, 0, 1}));
  EXPECT_EQ(run_predicate_values<float>(BinaryOp::ge, x, y), (std::vector<uint8_t>{0, 0, 0, 1}));
  EXPECT_EQ(run_predicate_values<float>(BinaryOp::logical_and, x, y),
            (std::vector<uint8_t>{1, 1, 1, 0}));
}

// ---- copy, fill, arange ----

// The expected conversion, written independently of the kernel.
template <typename To, typename From>
To convert_reference(From x) {
  if constexpr (std::is_same_v<To, uint8_t>) {
    return x != 0;
  } else if constexpr (std::is_same_v<From, uint8_t>) {
    return x != 0 ? 1 : 0;
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    if (std::isnan(x)) return 0;
    const long double t = std::trunc(static_cast<long double>(x));
    if (t < std::numeric_limits<To>::min() || t > std::numeric_limits<To>::max()) return 0;
    return static_cast<To>(t);
  } else if constexpr (std::is_integral_v<To> && std::is_integral_v<From>) {
    return wrap<To>(x);
  } else {
    return static_cast<To>(x);
  }
}

template <typename T>
std::vector<T> conversion_inputs() {
  if constexpr (std::is_same_v<T, uint8_t>) {
    return {0, 1, 2, 255, 0, 1};
  } else if constexpr (std::is_integral_v<T>) {
    return {0, 1, -1, 7, std::numeric_limits<T>::min(), std::numeric_limits<T>::max()};
  } else {
    const T inf = std::numeric_limits<T>::infinity();
    return {T(-0.0),
            T(2.9),
            T(-2.9),
            std::numeric_limits<T>::quiet_NaN(),
            inf,
            -inf,
            T(2147483647.0),
            T(2147483648.0),
            T(-2147483648.0),
            T(-2147483649.0),
            T(-2147483648.75),
            T(9.2233720368547758e18),
            T(-9.2233720368547758e18),
            T(1e30),
            T(3e38),
            T(-0.75)};
  }
}

template <typename To, typename From>
void check_conversion() {
  const std::vector<From> inputs = conversion_inputs<From>();
  const int64_t n = static_cast<int64_t>(inputs.size());
  const Array src = from_values<From>(Shape{n}, inputs);
  const std::string label =
      std::string(dtype_name(dtype_for<From>())) + " -> " + dtype_name(dtype_for<To>());
  auto expect_all = [&](const Array& dst, const char* how) {
    const std::vector<To> got = to_values<To>(dst);
    for (size_t i = 0; i < got.size(); ++i) {
      const To expected = convert_reference<To, From>(inputs[i % inputs.size()]);
      EXPECT_TRUE(same_value(got[i], expected))
          << label << " " << how << ": " << show(inputs[i % inputs.size()]) << " gave "
          << show(got[i]) << ", expected " << show(expected);
    }
  };
  const Array dense = Array::empty(Shape{n}, dtype_for<To>());
  copy_kernel(src, dense);
  expect_all(dense, "contiguous");
  // Into a strided window, from a broadcast source.
  const Array padded = make_array(Shape{3, n}, dtype_for<To>(), Layout::padded);
  copy_kernel(src, padded);
  expect_all(padded, "broadcast into padded");
  EXPECT_TRUE(padding_untouched(padded)) << label;
  const Array transposed = make_array(Shape{n, 2}, dtype_for<To>(), Layout::transposed);
  copy_kernel(src.view_as(Shape{n, 1}, Strides{1, 0}, 0), transposed);
  const std::vector<To> got = to_values<To>(transposed);
  for (int64_t i = 0; i < 2 * n; ++i) {
    EXPECT_TRUE(same_value(got[i], convert_reference<To, From>(inputs[i / 2]))) << label;
  }
}

template <typename From>
void check_conversions_from() {
  check_conversion<uint8_t, From>();
  check_conversion<int32_t, From>();
  check_conversion<int64_t, From>();
  check_conversion<float, From>();
  check_conversion<double, From>();
}

TEST(Elementwise, CopyAllDtypePairs) {
  check_conversions_from<uint8_t>();
  check_conversions_from<int32_t>();
  check_conversions_from<int64_t>();
  check_conversions_from<float>();
  check_conversions_from<double>();
}

TEST(Elementwise, CopyLayouts) {
  std::mt19937_64 rng(3);
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {7, 9}, {64, 64}, {300, 513}}) {
    const Shape shape{rows, cols};
    for (Layout from : {Layout::contiguous, Layout::transposed, Layout::padded}) {
      for (Layout to : {Layout::contiguous, Layout::transposed, Layout::padded}) {
        const Array src = make_array(shape, DType::f64, from);
        fill_random<double>(src, rng, true);
        const Array dst = make_array(shape, DType::f64, to);
        copy_kernel(src, dst);
        const std::vector<double> a = to_values<double>(src), b = to_values<double>(dst);
        EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(double)))
            << shape_string(shape) << " " << static_cast<int>(from) << " -> "
            << static_cast<int>(to);
        if (to == Layout::padded) {
          EXPECT_TRUE(padding_untouched(dst));
        }
      }
    }
  }
  // Batched transposes (the tiled path walks the outer dims) and a permute.
  const Array base = make_array(Shape{3, 70, 45}, DType::f32, Layout::contiguous);
  fill_random<float>(base, rng, true);
  for (const Array& src : {base.transposed(1, 2), base.transposed(0, 2), base.transposed(0, 1)}) {
    const Array dst = Array::empty(src.shape, DType::f32);
    copy_kernel(src, dst);
    const std::vector<float> a = to_values<float>(src), b = to_values<float>(dst);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
        << shape_string(src.shape);
  }
  // Copying an array onto itself (copy_(t, t)) changes nothing.
  const std::vector<float> before = to_values<float>(base);
  copy_kernel(base, base);
  EXPECT_EQ(0, std::memcmp(to_values<float>(base).data(), before.data(), before.size() * 4));
  // Empty arrays are no-ops.
  const Array empty = Array::empty(Shape{0, 5}, DType::f32);
  copy_kernel(empty, empty);
  fill_kernel(empty, 1);
  unary_kernel(UnaryOp::exp, empty, empty);
}

TEST(Elementwise, Fill) {
  for (DType type : {DType::boolean, DType::i32, DType::i64, DType::f32, DType::f64}) {
    for (Layout layout : {Layout::contiguous, Layout::transposed, Layout::padded}) {
      const Array dst = make_array(Shape{5, 33}, type, layout);
      for (double value : {2.7, -2.7, 0.0, 1e30, std::nan("")}) {
        fill_kernel(dst, value);
        visit_dtype(type, [&](auto tag) {
          using T = std::conditional_t<std::is_same_v<decltype(tag), bool>, uint8_t, decltype(tag)>;
          const T expected = convert_reference<T, double>(value);
          for (T got : to_values<T>(dst)) {
            EXPECT_TRUE(same_value(got, expected)) << dtype_name(type) << " " << value;
          }
        });
      }
      if (layout == Layout::padded) {
        EXPECT_TRUE(padding_untouched(dst));
      }
    }
  }
  const int64_t big = (int64_t{1} << 62) + 1;  // not exact as a double
  const Array i64 = Array::empty(Shape{3}, DType::i64);
  fill_kernel_int(i64, big);
  EXPECT_EQ(to_values<int64_t>(i64), (std::vector<int64_t>{big, big, big}));
  const Array i32 = Array::empty(Shape{2}, DType::i32);
  fill_kernel_int(i32, (int64_t{1} << 32) + 5);  // wraps
  EXPECT_EQ(to_values<int32_t>(i32), (std::vector<int32_t>{5, 5}));
  const Array flag = Array::empty(Shape{2}, DType::boolean);
  fill_kernel_int(flag, 256);
  EXPECT_EQ(to_values<uint8_t>(flag), (std::vector<uint8_t>{1, 1}));
  const Array f = Array::empty(Shape{1}, DType::f32);
  fill_kernel_int(f, big);
  EXPECT_EQ(to_values<float>(f)[0], static_cast<float>(big));
}

TEST(Elementwise, Arange) {
  const Array i64 = Array::empty(Shape{100003}, DType::i64);
  arange_kernel(i64, -5, 3);
  const std::vector<int64_t> ints = to_values<int64_t>(i64);
  for (int64_t i = 0; i < 100003; ++i) ASSERT_EQ(ints[i], -5 + 3 * i);
  const Array f32 = Array::empty(Shape{7}, DType::f32);
  arange_kernel(f32, 0.5, 0.1);
  const std::vector<float> floats = to_values<float>(f32);
  for (int i = 0; i < 7; ++i) EXPECT_EQ(floats[i], static_cast<float>(0.5 + 0.1 * i));
  const Array i32 = Array::empty(Shape{4}, DType::i32);
  arange_kernel(i32, 0.5, 1.5);  // non-integer steps truncate, as in copy
  EXPECT_EQ(to_values<int32_t>(i32), (std::vector<int32_t>{0, 2, 3, 5}));
  const Array down = Array::empty(Shape{3}, DType::f64);
  arange_kernel(down, 1, -0.25);
  EXPECT_EQ(to_values<double>(down), (std::vector<double>{1, 0.75, 0.5}));
  arange_kernel(Array::empty(Shape{0}, DType::f64), 0, 1);
}

// ---- any / all ----

TEST(Elementwise, AnyAll) {
  for (DType type : {DType::boolean, DType::i32, DType::i64, DType::f32, DType::f64}) {
    for (Layout layout : {Layout::contiguous, Layout::transposed, Layout::padded}) {
      for (int64_t cols : {1, 9, 3001}) {
        const Array a = make_array(Shape{37, cols}, type, layout);
        fill_kernel(a, 0);  // the padding holds nonzero sentinels
        EXPECT_FALSE(any_nonzero(a)) << dtype_name(type);
        EXPECT_FALSE(all_nonzero(a));
        const Array last = a.narrowed(0, 36, 1).narrowed(1, cols - 1, 1);
        fill_kernel(last, is_floating(type) ? std::nan("") : 1.0);  // NaN is nonzero
        EXPECT_TRUE(any_nonzero(a)) << dtype_name(type) << " " << cols;
        fill_kernel(a, 1);
        EXPECT_TRUE(all_nonzero(a));
        fill_kernel(last, is_floating(type) ? -0.0 : 0.0);  // -0.0 is zero
        EXPECT_FALSE(all_nonzero(a)) << dtype_name(type) << " " << cols;
        EXPECT_TRUE(any_nonzero(a));
      }
    }
    const Array empty = Array::empty(Shape{0}, type);
    EXPECT_FALSE(any_nonzero(empty));
    EXPECT_TRUE(all_nonzero(empty));
  }
  const Array bytes = from_values<uint8_t>(Shape{3}, {0, 2, 0});
  EXPECT_TRUE(any_nonzero(bytes));
  const Array expanded = from_values<int32_t>(Shape{1}, {0}).expanded(Shape{1000});
  EXPECT_FALSE(any_nonzero(expanded));
}

// ---- where ----

template <typename T>
void check_where(uint64_t seed) {
  std::mt19937_64 rng(seed);
  const DType type = dtype_for<T>();
  struct Case {
    Shape cond, a, b, out;
  };
  const Case cases[] = {
      {Shape{100003}, Shape{100003}, Shape{100003}, Shape{100003}},
      {Shape{33}, Shape{}, Shape{33}, Shape{33}},
      {Shape{33}, Shape{33}, Shape{1}, Shape{33}},
      {Shape{40, 1}, Shape{40, 9}, Shape{9}, Shape{40, 9}},
      {Shape{9}, Shape{40, 1}, Shape{}, Shape{40, 9}},
      {Shape{2, 1, 9}, Shape{5, 1}, Shape{1, 5, 9}, Shape{2, 5, 9}},
  };
  for (const Case& c : cases) {
    for (Layout layout : {Layout::contiguous, Layout::transposed, Layout::padded}) {
      const Array cond = make_array(c.cond, DType::boolean, layout);
      const Array a = make_array(c.a, type, layout);
      const Array b = make_array(c.b, type, layout);
      fill_random<uint8_t>(cond, rng, false, [](uint8_t v) { return static_cast<uint8_t>(v * 3); });
      fill_random<T>(a, rng, true);
      fill_random<T>(b, rng, true);
      const Array out = make_array(c.out, type, layout);
      where_kernel(cond, a, b, out);
      const int rank = out.rank();
      int failures = 0;
      for_each_index(c.out, [&](const int64_t* index) {
        const bool take_a = element<uint8_t>(cond, index, rank) != 0;
        T expected = take_a ? element<T>(a, index, rank) : element<T>(b, index, rank);
        if constexpr (std::is_same_v<T, uint8_t>) expected = expected != 0;
        const T got = element<T>(out, index, rank);
        if (std::memcmp(&got, &expected, sizeof(T)) != 0 && failures++ < 5) {
          ADD_FAILURE() << "where " << shape_string(c.out) << " " << dtype_name(type) << ": got "
                        << show(got) << ", expected " << show(expected);
        }
      });
      if (layout == Layout::padded) {
        EXPECT_TRUE(padding_untouched(out));
      }
    }
  }
}

TEST(Elementwise, Where) {
  check_where<float>(11);
  check_where<double>(12);
  check_where<int32_t>(13);
  check_where<int64_t>(14);
  check_where<uint8_t>(15);
}
}  // namespace
}  // namespace lazylua
