// elementwise_unary.cpp - unary_kernel and clamp_kernel.
//
// Each op is a small struct whose apply() computes one element; one loop
// template walks the arrays and calls it. Integer arithmetic goes through
// unsigned types so that overflow wraps, as in Lua, instead of being
// undefined behaviour. Float transcendentals and rounding come from
// kernel_math.h, the functions generated code calls too, so that both give
// the same bits; the float ones vectorize (simd clones).
#include <algorithm>
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

// Whether an element costs a scalar libm call: such loops do not vectorize
// and are worth splitting across threads much earlier.
struct Cheap {
  static constexpr bool costly_f32 = false;
  static constexpr bool costly_f64 = false;
};
struct LibmForDouble {
  static constexpr bool costly_f32 = false;
  static constexpr bool costly_f64 = true;
};
struct LibmAlways {
  static constexpr bool costly_f32 = true;
  static constexpr bool costly_f64 = true;
};

// Each op's apply() is always_inline: GCC may otherwise keep a large one
// (gelu) as a call, and a loop containing a call is not vectorized.
namespace unary_functions {

struct neg : Cheap {
  template <typename T>
  [[gnu::always_inline]] static T apply(T x) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(Unsigned<T>{0} - static_cast<Unsigned<T>>(x));
    } else {
      return -x;
    }
  }
};
struct abs : Cheap {
  template <typename T>
  [[gnu::always_inline]] static T apply(T x) {
    if constexpr (std::is_integral_v<T>) {  // abs(INT_MIN) wraps to INT_MIN
      return x < 0 ? static_cast<T>(Unsigned<T>{0} - static_cast<Unsigned<T>>(x)) : x;
    } else {
      return std::fabs(x);
    }
  }
};
struct sign : Cheap {
  template <typename T>
  [[gnu::always_inline]] static T apply(T x) {  // 0, -0 and NaN give themselves
    return x > T{0} ? T{1} : (x < T{0} ? T(-1) : x);
  }
};
struct square : Cheap {
  template <typename T>
  [[gnu::always_inline]] static T apply(T x) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<Unsigned<T>>(x) * static_cast<Unsigned<T>>(x));
    } else {
      return x * x;
    }
  }
};
struct relu : Cheap {
  template <typename T>
  [[gnu::always_inline]] static T apply(T x) {  // NaN < 0 is false: relu(NaN) = NaN
    return x < T{0} ? T{0} : x;
  }
};
// Rounding ops are the identity on integers. For floats they are
// kernel_math.h's, built on nearbyint, since GCC does not vectorize
// std::floor, std::ceil or std::trunc.
struct floor : Cheap {
  template <typename T>
  [[gnu::always_inline]] static T apply(T x) {
    if constexpr (std::is_integral_v<T>)
      return x;
    else if constexpr (std::is_same_v<T, float>)
      return ll_floorf(x);
    else
      return ll_floor(x);
  }
};
struct ceil : Cheap {
  template <typename T>
  [[gnu::always_inline]] static T apply(T x) {
    if constexpr (std::is_integral_v<T>)
      return x;
    else if constexpr (std::is_same_v<T, float>)
      return ll_ceilf(x);  // -floor(-x): gets the zero signs right, ceil(-0.3) = -0
    else
      return ll_ceil(x);
  }
};
// Halves go to the even neighbour (nearbyint in the default rounding mode),
// like torch.round and NumPy.
struct round : Cheap {
  template <typename T>
  [[gnu::always_inline]] static T apply(T x) {
    if constexpr (std::is_integral_v<T>)
      return x;
    else if constexpr (std::is_same_v<T, float>)
      return ll_roundf(x);
    else
      return ll_round(x);
  }
};
struct trunc : Cheap {
  template <typename T>
  [[gnu::always_inline]] static T apply(T x) {
    if constexpr (std::is_integral_v<T>)
      return x;
    else if constexpr (std::is_same_v<T, float>)
      return ll_truncf(x);  // floor(|x|) with x's sign
    else
      return ll_trunc(x);
  }
};
// x - trunc(x): 0 for integers; frac(+-inf) = NaN, as PyTorch.
struct frac : Cheap {
  template <typename T>
  [[gnu::always_inline]] static T apply(T x) {
    if constexpr (std::is_integral_v<T>)
      return T{0};
    else if constexpr (std::is_same_v<T, float>)
      return ll_fracf(x);
    else
      return ll_frac(x);
  }
};

// The float functions of kernel_math.h vectorize; its float64 log2, log1p,
// sin, cos, tan and gelu call libm (as generated code does).
#define LAZYLUA_MATH_OP(name, base, cost)                                          \
  struct name : cost {                                                             \
    [[gnu::always_inline]] static float apply(float x) { return ll_##base##f(x); } \
    [[gnu::always_inline]] static double apply(double x) { return ll_##base(x); }  \
  };
LAZYLUA_MATH_OP(exp, exp, Cheap)
LAZYLUA_MATH_OP(expm1, expm1, Cheap)
LAZYLUA_MATH_OP(log, log, Cheap)
LAZYLUA_MATH_OP(log1p, log1p, LibmForDouble)
LAZYLUA_MATH_OP(log2, log2, LibmForDouble)
LAZYLUA_MATH_OP(sqrt, sqrt, Cheap)
LAZYLUA_MATH_OP(sin, sin, LibmForDouble)
LAZYLUA_MATH_OP(cos, cos, LibmForDouble)
LAZYLUA_MATH_OP(tan, tan, LibmForDouble)
LAZYLUA_MATH_OP(tanh, tanh, Cheap)
// sigmoid is computed from e = exp(-|x|) <= 1: never overflows, and keeps
// relative accuracy for very negative x (1 / (1 + exp(-x)) would give 0).
LAZYLUA_MATH_OP(sigmoid, sigmoid, Cheap)
// The exact form, PyTorch's default: 0.5 x (1 + erf(x / sqrt2)), evaluated
// as 0.5 x erfc(-x / sqrt2), which does not cancel for negative x.
LAZYLUA_MATH_OP(gelu, gelu, LibmForDouble)
// erf, erfc and exp2 in float32 are computed in double (kernel_math.h);
// float64 erf and erfc call libm.
LAZYLUA_MATH_OP(erf, erf, LibmForDouble)
LAZYLUA_MATH_OP(erfc, erfc, LibmForDouble)
LAZYLUA_MATH_OP(exp2, exp2, Cheap)
// Inverse trigonometric, hyperbolic and log10: libm's double functions (the
// float32 ones round them once).
LAZYLUA_MATH_OP(asin, asin, LibmAlways)
LAZYLUA_MATH_OP(acos, acos, LibmAlways)
LAZYLUA_MATH_OP(atan, atan, LibmAlways)
LAZYLUA_MATH_OP(sinh, sinh, LibmAlways)
LAZYLUA_MATH_OP(cosh, cosh, LibmAlways)
LAZYLUA_MATH_OP(asinh, asinh, LibmAlways)
LAZYLUA_MATH_OP(acosh, acosh, LibmAlways)
LAZYLUA_MATH_OP(atanh, atanh, LibmAlways)
LAZYLUA_MATH_OP(log10, log10, LibmAlways)
#undef LAZYLUA_MATH_OP
struct rsqrt : Cheap {
  template <typename T>
  [[gnu::always_inline]] static T apply(T x) {
    return T{1} / std::sqrt(x);  // as generated code: 1 / sqrt(x), both correctly rounded
  }
};
struct reciprocal : Cheap {
  template <typename T>
  [[gnu::always_inline]] static T apply(T x) {
    return T{1} / x;
  }
};

// Any dtype in, bool out: true where the input is zero (-0.0 counts as
// zero, NaN as nonzero).
struct logical_not : Cheap {
  template <typename T>
  [[gnu::always_inline]] static uint8_t apply(T x) {
    return static_cast<uint8_t>(x == T{0});
  }
};

// Any dtype in, bool out: integers and bools are never NaN or infinite.
struct isnan : Cheap {
  template <typename T>
  [[gnu::always_inline]] static uint8_t apply([[maybe_unused]] T x) {
    if constexpr (std::is_floating_point_v<T>)
      return static_cast<uint8_t>(x != x);
    else
      return 0;
  }
};
struct isinf : Cheap {
  template <typename T>
  [[gnu::always_inline]] static uint8_t apply([[maybe_unused]] T x) {
    if constexpr (std::is_floating_point_v<T>)
      return static_cast<uint8_t>(std::fabs(x) == std::numeric_limits<T>::infinity());
    else
      return 0;
  }
};
struct isfinite : Cheap {
  template <typename T>
  [[gnu::always_inline]] static uint8_t apply([[maybe_unused]] T x) {  // NaN < inf is false
    if constexpr (std::is_floating_point_v<T>)
      return static_cast<uint8_t>(std::fabs(x) < std::numeric_limits<T>::infinity());
    else
      return 1;
  }
};

}  // namespace unary_functions

// Op::apply as a function object for the loops (a lambda here would be one
// more call that GCC may decline to inline).
template <typename Op, typename T>
struct ApplyUnary {
  [[gnu::always_inline]] auto operator()(T x) const { return Op::apply(x); }
};

template <typename Op, typename T>
void run_unary(const Array& in, const Array& out) {
  const bool costly = std::is_same_v<T, float> ? Op::costly_f32 : Op::costly_f64;
  const int64_t grain = std::is_floating_point_v<T> && costly ? kExpensiveGrain : kElementwiseGrain;
  unary_loop<T, T>(in, out, grain, ApplyUnary<Op, T>{});
}

// Which dtypes the op accepts is its row in elementwise_ops.h (the op layer
// converts the others first).
template <typename Op, OpDtypes dtypes>
void dispatch_unary(UnaryOp op, const Array& in, const Array& out) {
  if constexpr (dtypes == OpDtypes::any) {
    LAZYLUA_ASSERT(out.dtype == DType::boolean);
    visit_storage(in.dtype, [&](auto type) {
      using T = decltype(type);
      unary_loop<T, uint8_t>(in, out, kElementwiseGrain, ApplyUnary<Op, T>{});
    });
    return;
  } else {
    LAZYLUA_ASSERT(in.dtype == out.dtype);
    switch (in.dtype) {
      case DType::f32:
        return run_unary<Op, float>(in, out);
      case DType::f64:
        return run_unary<Op, double>(in, out);
      case DType::i32:
        if constexpr (dtypes == OpDtypes::numbers) return run_unary<Op, int32_t>(in, out);
        break;
      case DType::i64:
        if constexpr (dtypes == OpDtypes::numbers) return run_unary<Op, int64_t>(in, out);
        break;
      case DType::boolean:
        break;
    }
    fail("{}: not supported for {} tensors", unary_op_name(op), dtype_name(in.dtype));
  }
}

// The range of T as clamp bounds: a bound outside it is no bound at all (or
// clamps everything to T's extreme), never an undefined conversion.
template <typename T>
T lower_bound_as(double low) {
  if constexpr (std::is_floating_point_v<T>) {
    if (low > static_cast<double>(std::numeric_limits<T>::max())) {
      return std::numeric_limits<T>::infinity();
    }
    if (low < static_cast<double>(std::numeric_limits<T>::lowest())) {
      return -std::numeric_limits<T>::infinity();
    }
    return static_cast<T>(low);
  } else {
    // The smallest integer >= low: x >= low and x >= ceil(low) agree for ints.
    const double bound = std::ceil(low);
    if (bound <= static_cast<double>(std::numeric_limits<T>::min())) {
      return std::numeric_limits<T>::min();
    }
    if (bound >= static_cast<double>(std::numeric_limits<T>::max())) {
      return std::numeric_limits<T>::max();
    }
    return static_cast<T>(bound);
  }
}
template <typename T>
T upper_bound_as(double high) {
  if constexpr (std::is_floating_point_v<T>) {
    return lower_bound_as<T>(high);  // the same conversion for floats
  } else {
    const double bound = std::floor(high);
    if (bound <= static_cast<double>(std::numeric_limits<T>::min())) {
      return std::numeric_limits<T>::min();
    }
    if (bound >= static_cast<double>(std::numeric_limits<T>::max())) {
      return std::numeric_limits<T>::max();
    }
    return static_cast<T>(bound);
  }
}

template <typename T>
void clamp_loop(const Array& in, bool has_low, double low, bool has_high, double high,
                const Array& out) {
  const T lowest = std::is_floating_point_v<T> ? -std::numeric_limits<T>::infinity()
                                               : std::numeric_limits<T>::lowest();
  const T highest = std::is_floating_point_v<T> ? std::numeric_limits<T>::infinity()
                                                : std::numeric_limits<T>::max();
  const T low_bound = has_low ? lower_bound_as<T>(low) : lowest;
  const T high_bound = has_high ? upper_bound_as<T>(high) : highest;
  // max then min, as PyTorch: with low > high everything becomes high. A
  // NaN x compares false both times and stays NaN; a NaN bound (floats
  // only: the op refuses it for integers) makes every result NaN.
  unary_loop<T, T>(in, out, kElementwiseGrain, [low_bound, high_bound](T x) {
    const T raised = x < low_bound || low_bound != low_bound ? low_bound : x;
    return raised > high_bound || high_bound != high_bound ? high_bound : raised;
  });
}

}  // namespace
}  // namespace elementwise

using namespace elementwise;

void unary_kernel(UnaryOp op, const Array& in, const Array& out) {
  LAZYLUA_ASSERT(in.shape == out.shape);
  switch (op) {
#define LAZYLUA_DISPATCH_UNARY(name, dtypes, ...) \
  case UnaryOp::name:                             \
    return dispatch_unary<unary_functions::name, OpDtypes::dtypes>(op, in, out);
    LAZYLUA_UNARY_OPS(LAZYLUA_DISPATCH_UNARY)
#undef LAZYLUA_DISPATCH_UNARY
  }
}

void clamp_kernel(const Array& in, bool has_low, double low, bool has_high, double high,
                  const Array& out) {
  LAZYLUA_ASSERT(in.shape == out.shape && in.dtype == out.dtype);
  // A NaN bound of an integer tensor is refused by the op; here it would
  // be an undefined conversion.
  LAZYLUA_ASSERT(!is_integral(in.dtype) || !(has_low && std::isnan(low)));
  LAZYLUA_ASSERT(!is_integral(in.dtype) || !(has_high && std::isnan(high)));
  switch (in.dtype) {
    case DType::i32:
      return clamp_loop<int32_t>(in, has_low, low, has_high, high, out);
    case DType::i64:
      return clamp_loop<int64_t>(in, has_low, low, has_high, high, out);
    case DType::f32:
      return clamp_loop<float>(in, has_low, low, has_high, high, out);
    case DType::f64:
      return clamp_loop<double>(in, has_low, low, has_high, high, out);
    case DType::boolean:
      break;
  }
  fail("clamp: not supported for bool tensors");
}

// The last n % 8 values go through a padded block of 8 too: an epilogue's
// runs are short (a 7x7 plane's 49 values), and the scalar sigmoid of a
// remainder cost as much as the vectors before it. (The vector and scalar
// sigmoids give the same bits.)
template <typename T, typename Silu>
void silu_blocks(T* values, int64_t n, Silu silu) {
  constexpr int64_t kBlock = 8;
  const int64_t whole = n / kBlock * kBlock;
  for (int64_t i = 0; i < whole; i++) values[i] = silu(values[i]);
  if (whole == n) return;
  T block[kBlock] = {};
  std::copy(values + whole, values + n, block);
  for (int64_t l = 0; l < kBlock; l++) block[l] = silu(block[l]);
  std::copy(block, block + (n - whole), values + whole);
}
void silu_in_place(float* values, int64_t n) {
  silu_blocks(values, n, [](float x) { return x * ll_sigmoidf(x); });
}
void silu_in_place(double* values, int64_t n) {
  silu_blocks(values, n, [](double x) { return x * ll_sigmoid(x); });
}

}  // namespace lazylua
