// elementwise_binary.cpp - binary_kernel: arithmetic, comparisons, logic.
//
// Integer semantics are Lua's: +, -, * wrap around (computed in unsigned
// types, since signed overflow is undefined behaviour in C++), // and %
// round toward minus infinity, x // 0 and x % 0 raise Error, and
// minint // -1 wraps to minint while minint % -1 is 0 (where C++ would trap
// with SIGFPE). Float // is floor(a / b) and float % follows Lua's fmod-based
// rule, so 5.5 % -2 == -0.5.
//
// Errors are found before anything is written, so a failing in-place op
// leaves its target untouched.
#include <cmath>
#include <limits>
#include <type_traits>

#include "elementwise.h"
#include "elementwise_loops.h"
#include "kernel_math.h"

namespace lazylua {
namespace elementwise {
namespace {

template <typename T>
using Unsigned = std::make_unsigned_t<T>;

// Which dtypes an op accepts: floats, numbers (ints and floats), or all
// (bool too). Predicates (comparisons, logic) write bool.
enum class Support { floats, numbers, all };

// Per-element cost, as in elementwise_unary.cpp: ops that call libm or
// divide integers do not vectorize and are split across threads earlier.
template <typename T>
constexpr bool is_float = std::is_floating_point_v<T>;

// apply() is always_inline, so that every loop calling it can vectorize.
namespace binary_functions {

struct add {
  static constexpr Support support = Support::numbers;
  static constexpr bool predicate = false;
  template <typename T>
  static constexpr bool costly = false;
  template <typename T>
  [[gnu::always_inline]] static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<Unsigned<T>>(a) + static_cast<Unsigned<T>>(b));
    } else {
      return a + b;
    }
  }
};
struct sub {
  static constexpr Support support = Support::numbers;
  static constexpr bool predicate = false;
  template <typename T>
  static constexpr bool costly = false;
  template <typename T>
  [[gnu::always_inline]] static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<Unsigned<T>>(a) - static_cast<Unsigned<T>>(b));
    } else {
      return a - b;
    }
  }
};
struct mul {
  static constexpr Support support = Support::numbers;
  static constexpr bool predicate = false;
  template <typename T>
  static constexpr bool costly = false;
  template <typename T>
  [[gnu::always_inline]] static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<Unsigned<T>>(a) * static_cast<Unsigned<T>>(b));
    } else {
      return a * b;
    }
  }
};
struct div {
  static constexpr Support support = Support::floats;
  static constexpr bool predicate = false;
  template <typename T>
  static constexpr bool costly = false;
  template <typename T>
  [[gnu::always_inline]] static T apply(T a, T b) {
    return a / b;
  }
};

// Integer // and % need b != 0 (checked before the loop). For int32 the
// quotient is computed in double, which vectorizes: floor(a / b) is exact
// there, because a / b can only round onto an integer q if it lies within
// q * 2^-53 of it, while a quotient of 32-bit integers that is not an integer
// stays at least 1/|b| >= q * 2^-31 away. int64 uses Lua's luaV_idiv/luaV_mod.
struct floordiv {
  static constexpr Support support = Support::numbers;
  static constexpr bool predicate = false;
  template <typename T>
  static constexpr bool costly = std::is_same_v<T, int64_t>;
  template <typename T>
  [[gnu::always_inline]] static T apply(T a, T b) {
    if constexpr (std::is_same_v<T, float>) {
      return ll_floordivf(a, b);
    } else if constexpr (std::is_same_v<T, double>) {
      return ll_floordiv(a, b);
    } else if constexpr (sizeof(T) == 4) {
      const double q = ll_floor(static_cast<double>(a) / static_cast<double>(b));
      return static_cast<T>(q >= 2147483648.0 ? -2147483648.0 : q);  // minint // -1 wraps
    } else {
      if (b == -1) return static_cast<T>(Unsigned<T>{0} - static_cast<Unsigned<T>>(a));
      T q = a / b;
      if ((a ^ b) < 0 && a % b != 0) q -= 1;  // rounded toward zero: step down
      return q;
    }
  }
};
struct mod {
  static constexpr Support support = Support::numbers;
  static constexpr bool predicate = false;
  template <typename T>
  static constexpr bool costly = !std::is_same_v<T, int32_t>;
  template <typename T>
  [[gnu::always_inline]] static T apply(T a, T b) {
    if constexpr (std::is_same_v<T, float>) {
      // Lua 5.4's luai_nummod: fmod is exact (its result has a's sign);
      // when that differs from b's sign, add b. (Lua tests m * b < 0, which
      // is the same except when the product underflows to 0.) So
      // -5 % math.huge == inf but -5 % -math.huge == -5, as in Lua.
      return ll_modf(a, b);
    } else if constexpr (std::is_same_v<T, double>) {
      return ll_mod(a, b);
    } else if constexpr (sizeof(T) == 4) {
      const double da = static_cast<double>(a), db = static_cast<double>(b);
      const double q = ll_floor(da / db);
      return static_cast<T>(da - q * db);  // exact: |q b| < 2^32, |result| < |b|
    } else {
      if (b == -1) return 0;  // minint % -1 would trap
      T m = a % b;
      if (m != 0 && (m ^ b) < 0) m += b;
      return m;
    }
  }
};
// Integer powers are exact (wrapping) by repeated squaring. A negative
// exponent is only allowed for bases 1 and -1 (checked before the loop).
struct pow {
  static constexpr Support support = Support::numbers;
  static constexpr bool predicate = false;
  template <typename T>
  static constexpr bool costly = !std::is_same_v<T, float>;  // ll_powf vectorizes
  template <typename T>
  [[gnu::always_inline]] static T apply(T a, T b) {
    if constexpr (std::is_same_v<T, float>) {
      return ll_powf(a, b);
    } else if constexpr (std::is_same_v<T, double>) {
      return ll_pow(a, b);
    } else {
      if (b < 0) {
        if (a == 1) return 1;
        if (a == -1) return (b & 1) ? -1 : 1;
        return 0;
      }
      Unsigned<T> result = 1, base = static_cast<Unsigned<T>>(a);
      for (Unsigned<T> e = static_cast<Unsigned<T>>(b); e != 0; e >>= 1) {
        if (e & 1) result *= base;
        base *= base;
      }
      return static_cast<T>(result);
    }
  }
};
// NaN wins for floats (`|` rather than `||` keeps the loop branch-free).
struct maximum {
  static constexpr Support support = Support::numbers;
  static constexpr bool predicate = false;
  template <typename T>
  static constexpr bool costly = false;
  template <typename T>
  [[gnu::always_inline]] static T apply(T a, T b) {
    if constexpr (is_float<T>)
      return (a > b) | (a != a) ? a : b;
    else
      return a > b ? a : b;
  }
};
struct minimum {
  static constexpr Support support = Support::numbers;
  static constexpr bool predicate = false;
  template <typename T>
  static constexpr bool costly = false;
  template <typename T>
  [[gnu::always_inline]] static T apply(T a, T b) {
    if constexpr (is_float<T>)
      return (a < b) | (a != a) ? a : b;
    else
      return a < b ? a : b;
  }
};
struct atan2 {
  static constexpr Support support = Support::floats;
  static constexpr bool predicate = false;
  template <typename T>
  static constexpr bool costly = true;
  template <typename T>
  [[gnu::always_inline]] static T apply(T a, T b) {
    if constexpr (std::is_same_v<T, float>)
      return ll_atan2f(a, b);
    else
      return ll_atan2(a, b);
  }
};

// Predicates. gt and ge are lt and le with the operands swapped. NaN
// compares false except for ne, as in IEEE 754.
#define LAZYLUA_PREDICATE(name, expression)                 \
  struct name {                                             \
    static constexpr Support support = Support::all;        \
    static constexpr bool predicate = true;                 \
    template <typename T>                                   \
    static constexpr bool costly = false;                   \
    template <typename T>                                   \
    [[gnu::always_inline]] static uint8_t apply(T a, T b) { \
      return static_cast<uint8_t>(expression);              \
    }                                                       \
  };
LAZYLUA_PREDICATE(eq, a == b)
LAZYLUA_PREDICATE(ne, a != b)
LAZYLUA_PREDICATE(lt, a < b)
LAZYLUA_PREDICATE(le, a <= b)
LAZYLUA_PREDICATE(logical_and, (a != T{0}) & (b != T{0}))
LAZYLUA_PREDICATE(logical_or, (a != T{0}) | (b != T{0}))
LAZYLUA_PREDICATE(logical_xor, (a != T{0}) != (b != T{0}))
#undef LAZYLUA_PREDICATE

}  // namespace binary_functions

// out[i] = function(a[i], b[i]) over the plan of (out, a, b), with a
// vectorizable loop for each common row layout.
template <typename T, typename R, typename Function>
void binary_loop(const Array& a, const Array& b, const Array& out, int64_t grain,
                 Function function) {
  LoopPlan<3> plan;
  const Array* const arrays[3] = {&out, &a, &b};
  if (!make_plan(plan, arrays)) return;
  const int64_t element_bytes[3] = {sizeof(R), sizeof(T), sizeof(T)};
  const RowKind kind = row_kind(plan, element_bytes);
  const int64_t out_stride = plan.inner_strides()[0];
  const int64_t a_stride = plan.inner_strides()[1];
  const int64_t b_stride = plan.inner_strides()[2];
  run_rows(plan, grain, [&](char* const* pointers, int64_t count) {
    const Function f = function;  // a local copy: stores cannot alias it
    R* output = reinterpret_cast<R*>(pointers[0]);
    const T* x = reinterpret_cast<const T*>(pointers[1]);
    const T* y = reinterpret_cast<const T*>(pointers[2]);
    switch (kind) {
      case RowKind::contiguous:
        for (int64_t i = 0; i < count; ++i) output[i] = f(x[i], y[i]);
        return;
      case RowKind::first_repeated: {
        const T x0 = *x;
        for (int64_t i = 0; i < count; ++i) output[i] = f(x0, y[i]);
        return;
      }
      case RowKind::second_repeated: {
        const T y0 = *y;
        for (int64_t i = 0; i < count; ++i) output[i] = f(x[i], y0);
        return;
      }
      case RowKind::strided:
        for (int64_t i = 0; i < count; ++i) {
          *reinterpret_cast<R*>(pointers[0] + i * out_stride) =
              f(load_at<T>(pointers[1], i, a_stride), load_at<T>(pointers[2], i, b_stride));
        }
        return;
    }
  });
}

// x ** c for a float array and one exponent c: kernel_math.h's pow, whose
// results for c = 2, 1 and -1 are x * x, x and 1 / x, computed here without
// the rest of pow (the same bits, much faster).
template <typename T>
void power_by_scalar(const Array& a, T exponent, const Array& out) {
  auto run = [&](int64_t grain, auto function) { unary_loop<T, T>(a, out, grain, function); };
  if (exponent == T{2}) return run(kElementwiseGrain, [](T x) { return x * x; });
  if (exponent == T{1}) return run(kElementwiseGrain, [](T x) { return x; });
  if (exponent == T{-1}) return run(kElementwiseGrain, [](T x) { return T{1} / x; });
  const int64_t grain = std::is_same_v<T, float> ? kElementwiseGrain : kExpensiveGrain;
  run(grain, [exponent](T x) { return binary_functions::pow::apply(x, exponent); });
}

// Calls check(a_element, b_element) for every pair the op will see, until it
// returns true; returns whether it did. Serial: only used on error paths.
template <typename T, typename Check>
bool any_pair(const Array& a, const Array& b, const Array& out, Check check) {
  LoopPlan<3> plan;
  const Array* const arrays[3] = {&out, &a, &b};
  if (!make_plan(plan, arrays)) return false;
  bool found = false;
  const int64_t a_stride = plan.inner_strides()[1];
  const int64_t b_stride = plan.inner_strides()[2];
  for_each_row(plan, 0, plan.numel, [&](char* const* pointers, int64_t count) {
    for (int64_t i = 0; i < count && !found; ++i) {
      found = check(load_at<T>(pointers[1], i, a_stride), load_at<T>(pointers[2], i, b_stride));
    }
  });
  return found;
}

template <typename T>
bool any_negative(const Array& array) {
  LoopPlan<1> plan;
  const Array* const arrays[1] = {&array};
  if (!make_plan(plan, arrays)) return false;
  const int64_t stride = plan.inner_strides()[0];
  bool found = false;
  for_each_row(plan, 0, plan.numel, [&](char* const* pointers, int64_t count) {
    T smallest = 0;
    for (int64_t i = 0; i < count; ++i) {
      const T value = load_at<T>(pointers[0], i, stride);
      smallest = value < smallest ? value : smallest;
    }
    found |= smallest < 0;
  });
  return found;
}

// Errors the loop itself must not meet, raised before anything is written.
template <typename Op, typename T>
void check_operands(const Array& a, const Array& b, const Array& out) {
  if constexpr (std::is_integral_v<T>) {
    if (out.numel() == 0) return;
    // Every element of b meets some element of a (b broadcasts to out, and
    // out is not empty), so looking at b alone is exact.
    if constexpr (std::is_same_v<Op, binary_functions::floordiv>) {
      if (!all_nonzero(b)) fail("attempt to divide by zero");  // Lua 5.4's message for n // 0
    } else if constexpr (std::is_same_v<Op, binary_functions::mod>) {
      if (!all_nonzero(b)) fail("attempt to perform 'n%0'");
    } else if constexpr (std::is_same_v<Op, binary_functions::pow>) {
      if (any_negative<T>(b) &&
          any_pair<T>(a, b, out, [](T x, T y) { return y < 0 && x != 1 && x != -1; })) {
        fail("Integers to negative integer powers are not allowed.");
      }
    }
  }
}

// Op::apply as a function object for the loops; bool operands (any
// nonzero byte is true, see StorageOf) are normalized to 0/1 first.
template <typename Op, typename T>
struct ApplyBinary {
  [[gnu::always_inline]] auto operator()(T x, T y) const {
    if constexpr (std::is_same_v<T, uint8_t>) {
      return Op::apply(static_cast<uint8_t>(x != 0), static_cast<uint8_t>(y != 0));
    } else {
      return Op::apply(x, y);
    }
  }
};

template <typename Op, typename T>
void run_binary(const Array& a, const Array& b, const Array& out) {
  check_operands<Op, T>(a, b, out);
  if constexpr (std::is_same_v<Op, binary_functions::pow> && is_float<T>) {
    if (b.numel() == 1) return power_by_scalar<T>(a, *b.data<T>(), out);
  }
  using Result = std::conditional_t<Op::predicate, uint8_t, T>;
  const int64_t grain = Op::template costly<T> ? kExpensiveGrain : kElementwiseGrain;
  binary_loop<T, Result>(a, b, out, grain, ApplyBinary<Op, T>{});
}

template <typename Op>
void dispatch_binary(BinaryOp op, const Array& a, const Array& b, const Array& out) {
  LAZYLUA_ASSERT(a.dtype == b.dtype);
  LAZYLUA_ASSERT(out.dtype == (Op::predicate ? DType::boolean : a.dtype));
  switch (a.dtype) {
    case DType::f32:
      return run_binary<Op, float>(a, b, out);
    case DType::f64:
      return run_binary<Op, double>(a, b, out);
    case DType::i32:
      if constexpr (Op::support != Support::floats) return run_binary<Op, int32_t>(a, b, out);
      break;
    case DType::i64:
      if constexpr (Op::support != Support::floats) return run_binary<Op, int64_t>(a, b, out);
      break;
    case DType::boolean:
      if constexpr (Op::support == Support::all) return run_binary<Op, uint8_t>(a, b, out);
      break;
  }
  fail("{}: not supported for {} tensors", binary_op_name(op), dtype_name(a.dtype));
}

}  // namespace
}  // namespace elementwise

using namespace elementwise;

void binary_kernel(BinaryOp op, const Array& a, const Array& b, const Array& out) {
  namespace functions = binary_functions;
  switch (op) {
    case BinaryOp::add:
      return dispatch_binary<functions::add>(op, a, b, out);
    case BinaryOp::sub:
      return dispatch_binary<functions::sub>(op, a, b, out);
    case BinaryOp::mul:
      return dispatch_binary<functions::mul>(op, a, b, out);
    case BinaryOp::div:
      return dispatch_binary<functions::div>(op, a, b, out);
    case BinaryOp::floordiv:
      return dispatch_binary<functions::floordiv>(op, a, b, out);
    case BinaryOp::mod:
      return dispatch_binary<functions::mod>(op, a, b, out);
    case BinaryOp::pow:
      return dispatch_binary<functions::pow>(op, a, b, out);
    case BinaryOp::maximum:
      return dispatch_binary<functions::maximum>(op, a, b, out);
    case BinaryOp::minimum:
      return dispatch_binary<functions::minimum>(op, a, b, out);
    case BinaryOp::atan2:
      return dispatch_binary<functions::atan2>(op, a, b, out);
    case BinaryOp::eq:
      return dispatch_binary<functions::eq>(op, a, b, out);
    case BinaryOp::ne:
      return dispatch_binary<functions::ne>(op, a, b, out);
    case BinaryOp::lt:
      return dispatch_binary<functions::lt>(op, a, b, out);
    case BinaryOp::le:
      return dispatch_binary<functions::le>(op, a, b, out);
    case BinaryOp::gt:
      return dispatch_binary<functions::lt>(op, b, a, out);  // a > b is b < a
    case BinaryOp::ge:
      return dispatch_binary<functions::le>(op, b, a, out);
    case BinaryOp::logical_and:
      return dispatch_binary<functions::logical_and>(op, a, b, out);
    case BinaryOp::logical_or:
      return dispatch_binary<functions::logical_or>(op, a, b, out);
    case BinaryOp::logical_xor:
      return dispatch_binary<functions::logical_xor>(op, a, b, out);
  }
}

}  // namespace lazylua
