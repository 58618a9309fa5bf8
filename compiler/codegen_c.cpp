// codegen_c.cpp - C expressions for dtypes, literals, conversions and ops.
//
// Every expression here must compute bit for bit what the eager kernel
// computes for one element (the float math functions are kernel_math.h's,
// which the eager kernels call too), and must keep a loop vectorizable: integer arithmetic
// wraps in unsigned types, selects instead of branches, and the math
// functions come from kernel_math.h (ll_*), never scalar libm in f32 loops.
#include "compiler/codegen_c.h"

#include <cmath>
#include <cstring>

namespace lazylua::compiler {

const char* c_type(DType dtype) {
  switch (dtype) {
    case DType::boolean:
      return "uint8_t";
    case DType::i32:
      return "int32_t";
    case DType::i64:
      return "int64_t";
    case DType::f32:
      return "float";
    case DType::f64:
      return "double";
  }
  return "?";
}

std::string c_double(double value) {
  if (std::isnan(value)) return "((double)NAN)";
  if (std::isinf(value)) return value > 0 ? "((double)INFINITY)" : "(-(double)INFINITY)";
  return fmt::format("({:a})", value);
}

std::string c_float(float value) {
  if (std::isnan(value)) return "((float)NAN)";
  if (std::isinf(value)) return value > 0 ? "((float)INFINITY)" : "(-(float)INFINITY)";
  return fmt::format("({:a}f)", static_cast<double>(value));
}

std::string c_literal(DType dtype, const ops::Scalar& value) {
  // The eager fill decides the value; this only spells it.
  const Array array = ops::full(Shape{}, value, dtype);
  switch (dtype) {
    case DType::boolean:
      return *static_cast<const uint8_t*>(array.raw_data()) ? "((uint8_t)1)" : "((uint8_t)0)";
    case DType::i32:
      return fmt::format("((int32_t){})", *array.data<int32_t>());
    case DType::i64: {
      const int64_t v = *array.data<int64_t>();
      if (v == INT64_MIN) return "((int64_t)(-9223372036854775807LL - 1))";
      return fmt::format("((int64_t){}LL)", v);
    }
    case DType::f32:
      return c_float(*array.data<float>());
    case DType::f64:
      return c_double(*array.data<double>());
  }
  return "0";
}

std::string c_convert(DType from, DType to, const std::string& x) {
  if (from == to) return x;
  if (to == DType::boolean) return fmt::format("((uint8_t)(({}) != 0))", x);
  // Through int32_t: GCC does not vectorize uint8_t -> float conversions
  // in loops that also hold wider types.
  if (from == DType::boolean && is_floating(to)) {
    return fmt::format("(({})(int32_t)({}))", c_type(to), x);
  }
  if (from == DType::boolean) return fmt::format("(({})({}))", c_type(to), x);
  if (is_floating(from) && !is_floating(to)) {
    return fmt::format("ll_{}_to_{}({})", dtype_name(from), dtype_name(to), x);
  }
  if (from == DType::i64 && to == DType::i32) return fmt::format("((int32_t)(uint32_t)({}))", x);
  return fmt::format("(({})({}))", c_type(to), x);
}

namespace {

// "f" for float functions of kernel_math.h, "" for double ones.
const char* suffix(DType dtype) {
  return dtype == DType::f32 ? "f" : "";
}

const char* unsigned_type(DType dtype) {
  return dtype == DType::i32 ? "uint32_t" : "uint64_t";
}

std::string math(const char* name, DType dtype, const std::string& x) {
  return fmt::format("ll_{}{}({})", name, suffix(dtype), x);
}

// An integer op done in the unsigned type of `dtype`, so that it wraps.
std::string wrapping(DType dtype, const std::string& a, const char* op, const std::string& b) {
  const char* u = unsigned_type(dtype);
  return fmt::format("(({})(({})({}) {} ({})({})))", c_type(dtype), u, a, op, u, b);
}

}  // namespace

std::string c_unary(UnaryOp op, DType dtype, const std::string& x) {
  const bool integer = !is_floating(dtype);
  const char* t = c_type(dtype);
  switch (op) {
    case UnaryOp::neg:
      return integer ? wrapping(dtype, "0", "-", x) : fmt::format("(-({}))", x);
    case UnaryOp::abs:
      return integer ? fmt::format("(({0}) < 0 ? {1} : ({0}))", x, wrapping(dtype, "0", "-", x))
                     : fmt::format("fabs{}({})", suffix(dtype), x);
    case UnaryOp::sign:
      return fmt::format("(({0}) > 0 ? ({1})1 : (({0}) < 0 ? ({1})-1 : ({0})))", x, t);
    case UnaryOp::square:
      return integer ? wrapping(dtype, x, "*", x) : fmt::format("(({0}) * ({0}))", x);
    case UnaryOp::relu:
      return fmt::format("(({0}) < 0 ? ({1})0 : ({0}))", x, t);
    case UnaryOp::floor:
      return integer ? x : math("floor", dtype, x);
    case UnaryOp::ceil:
      return integer ? x : math("ceil", dtype, x);
    case UnaryOp::round:
      return integer ? x : math("round", dtype, x);
    case UnaryOp::trunc:
      return integer ? x : math("trunc", dtype, x);
    case UnaryOp::exp:
      return math("exp", dtype, x);
    case UnaryOp::expm1:
      return math("expm1", dtype, x);
    case UnaryOp::log:
      return math("log", dtype, x);
    case UnaryOp::log1p:
      return math("log1p", dtype, x);
    case UnaryOp::log2:
      return math("log2", dtype, x);
    case UnaryOp::sqrt:
      return fmt::format("sqrt{}({})", suffix(dtype), x);
    case UnaryOp::rsqrt:
      return fmt::format("(({})1 / sqrt{}({}))", t, suffix(dtype), x);
    case UnaryOp::reciprocal:
      return fmt::format("(({})1 / ({}))", t, x);
    case UnaryOp::sin:
      return math("sin", dtype, x);
    case UnaryOp::cos:
      return math("cos", dtype, x);
    case UnaryOp::tan:
      return math("tan", dtype, x);
    case UnaryOp::tanh:
      return math("tanh", dtype, x);
    case UnaryOp::sigmoid:
      return math("sigmoid", dtype, x);
    case UnaryOp::gelu:
      return math("gelu", dtype, x);
    case UnaryOp::logical_not:
      return fmt::format("((uint8_t)(({}) == 0))", x);
    case UnaryOp::erf:
      return math("erf", dtype, x);
    case UnaryOp::erfc:
      return math("erfc", dtype, x);
    case UnaryOp::exp2:
      return math("exp2", dtype, x);
    case UnaryOp::frac:
      return integer ? fmt::format("(({})0)", t) : math("frac", dtype, x);
    case UnaryOp::asin:
      return math("asin", dtype, x);
    case UnaryOp::acos:
      return math("acos", dtype, x);
    case UnaryOp::atan:
      return math("atan", dtype, x);
    case UnaryOp::sinh:
      return math("sinh", dtype, x);
    case UnaryOp::cosh:
      return math("cosh", dtype, x);
    case UnaryOp::asinh:
      return math("asinh", dtype, x);
    case UnaryOp::acosh:
      return math("acosh", dtype, x);
    case UnaryOp::atanh:
      return math("atanh", dtype, x);
    case UnaryOp::log10:
      return math("log10", dtype, x);
    // dtype is the input's (any dtype in, bool out): integers are finite.
    case UnaryOp::isnan:
      return integer ? "((uint8_t)0)" : fmt::format("((uint8_t)(({0}) != ({0})))", x);
    case UnaryOp::isinf:
      return integer ? "((uint8_t)0)"
                     : fmt::format("((uint8_t)(fabs{}({}) == INFINITY))", suffix(dtype), x);
    case UnaryOp::isfinite:
      return integer ? "((uint8_t)1)"
                     : fmt::format("((uint8_t)(fabs{}({}) < INFINITY))", suffix(dtype), x);
  }
  // No default above: a row of elementwise_ops.h without a case here does
  // not compile (-Werror=switch); a value outside the enum is our bug.
  throw InternalError(
      fmt::format("codegen: no C expression for unary op {}", static_cast<int>(op)));
}

BinaryOp effective_binary_op(BinaryOp op, DType compute) {
  if (compute != DType::boolean) return op;
  switch (op) {
    case BinaryOp::add:
    case BinaryOp::maximum:
      return BinaryOp::logical_or;
    case BinaryOp::mul:
    case BinaryOp::minimum:
      return BinaryOp::logical_and;
    default:
      return op;
  }
}

std::string c_binary(BinaryOp op, DType compute, const std::string& a, const std::string& b) {
  const bool integer = !is_floating(compute);
  const bool wraps = compute == DType::i32 || compute == DType::i64;
  switch (op) {
    case BinaryOp::add:
      return wraps ? wrapping(compute, a, "+", b) : fmt::format("(({}) + ({}))", a, b);
    case BinaryOp::sub:
      return wraps ? wrapping(compute, a, "-", b) : fmt::format("(({}) - ({}))", a, b);
    case BinaryOp::mul:
      return wraps ? wrapping(compute, a, "*", b) : fmt::format("(({}) * ({}))", a, b);
    case BinaryOp::div:
      return fmt::format("(({}) / ({}))", a, b);
    case BinaryOp::floordiv:
      return integer ? fmt::format("ll_floordiv_{}({}, {})", dtype_name(compute), a, b)
                     : fmt::format("ll_floordiv{}({}, {})", suffix(compute), a, b);
    case BinaryOp::mod:
      return integer ? fmt::format("ll_mod_{}({}, {})", dtype_name(compute), a, b)
                     : fmt::format("ll_mod{}({}, {})", suffix(compute), a, b);
    case BinaryOp::pow:
      return integer ? fmt::format("lzk_pow_{}({}, {})", dtype_name(compute), a, b)
                     : fmt::format("ll_pow{}({}, {})", suffix(compute), a, b);
    // NaN wins for floats; selects by masks keep the loop branch-free.
    case BinaryOp::maximum:
      return integer ? fmt::format("(({0}) > ({1}) ? ({0}) : ({1}))", a, b)
                     : fmt::format("lzk_select_{2}((({0}) > ({1})) | (({0}) != ({0})), {0}, {1})",
                                   a, b, dtype_name(compute));
    case BinaryOp::minimum:
      return integer ? fmt::format("(({0}) < ({1}) ? ({0}) : ({1}))", a, b)
                     : fmt::format("lzk_select_{2}((({0}) < ({1})) | (({0}) != ({0})), {0}, {1})",
                                   a, b, dtype_name(compute));
    case BinaryOp::atan2:
      return fmt::format("ll_atan2{}({}, {})", suffix(compute), a, b);
    case BinaryOp::eq:
      return fmt::format("((uint8_t)(({}) == ({})))", a, b);
    case BinaryOp::ne:
      return fmt::format("((uint8_t)(({}) != ({})))", a, b);
    case BinaryOp::lt:
      return fmt::format("((uint8_t)(({}) < ({})))", a, b);
    case BinaryOp::le:
      return fmt::format("((uint8_t)(({}) <= ({})))", a, b);
    case BinaryOp::gt:
      return fmt::format("((uint8_t)(({}) > ({})))", a, b);
    case BinaryOp::ge:
      return fmt::format("((uint8_t)(({}) >= ({})))", a, b);
    case BinaryOp::logical_and:
      return fmt::format("((uint8_t)((({}) != 0) & (({}) != 0)))", a, b);
    case BinaryOp::logical_or:
      return fmt::format("((uint8_t)((({}) != 0) | (({}) != 0)))", a, b);
    case BinaryOp::logical_xor:
      return fmt::format("((uint8_t)((({}) != 0) != (({}) != 0)))", a, b);
  }
  throw InternalError(
      fmt::format("codegen: no C expression for binary op {}", static_cast<int>(op)));
}

const char* codegen_prelude() {
  return R"lazylua_prelude(
/* ---- lazylua generated kernels ---------------------------------------- */
#include <stdint.h>
#include <string.h>
#include <math.h>

/* -O2's "very cheap" vectorizer cost model gives up on loops whose trip
 * count is unknown; the kernels need the ordinary one. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic")
#endif

#define LZK_INLINE static inline __attribute__((always_inline))

/* cond ? a : b by bit masks: a ?: between two computed values lets the
 * compiler turn it into a branch (it must assume float arithmetic may
 * trap), which stops vectorization. */
#define LZK_SELECT(name, T, U)                                   \
  LZK_INLINE T name(int cond, T a, T b) {                        \
    const U mask = (U)0 - (U)(cond != 0);                        \
    U x, y;                                                      \
    memcpy(&x, &a, sizeof x);                                    \
    memcpy(&y, &b, sizeof y);                                    \
    x = (x & mask) | (y & ~mask);                                \
    memcpy(&a, &x, sizeof a);                                    \
    return a;                                                    \
  }
LZK_SELECT(lzk_select_f32, float, uint32_t)
LZK_SELECT(lzk_select_f64, double, uint64_t)
LZK_SELECT(lzk_select_i32, int32_t, uint32_t)
LZK_SELECT(lzk_select_i64, int64_t, uint64_t)

/* A zero the C compiler cannot see: GCC 12 folds 0.0 - x into -x when it
 * knows x is never -0 (x = (float)i, fabsf(y)), which is -0 for x = +0
 * where IEEE and the eager kernels give +0. Zero constants are made
 * unknown to it by an empty asm; they sit before the loops, so the asm
 * costs nothing and stops no vectorization. */
#if defined(__GNUC__)
#define LZK_OPAQUE(x) __asm__("" : "+m"(x))
#else
#define LZK_OPAQUE(x) ((void)0)
#endif

/* Clamp bounds given as doubles, as the eager clamp converts them: floats
 * round (beyond the range: +-inf), integers take the integers inside the
 * bounds (ceil of the low, floor of the high), saturated to the type. */
LZK_INLINE float lzk_bound_f32(double v) {
  return v > 3.4028234663852886e38 ? (float)INFINITY
       : v < -3.4028234663852886e38 ? -(float)INFINITY : (float)v;
}
LZK_INLINE double lzk_bound_f64(double v) { return v; }
LZK_INLINE int32_t lzk_saturate_i32(double b) {
  return b <= -2147483648.0 ? INT32_MIN : b >= 2147483647.0 ? INT32_MAX : (int32_t)b;
}
LZK_INLINE int64_t lzk_saturate_i64(double b) {
  return b <= -9223372036854775808.0 ? INT64_MIN
       : b >= 9223372036854775807.0 ? INT64_MAX : (int64_t)b;
}
LZK_INLINE int32_t lzk_low_bound_i32(double v) { return lzk_saturate_i32(ceil(v)); }
LZK_INLINE int64_t lzk_low_bound_i64(double v) { return lzk_saturate_i64(ceil(v)); }
LZK_INLINE int32_t lzk_high_bound_i32(double v) { return lzk_saturate_i32(floor(v)); }
LZK_INLINE int64_t lzk_high_bound_i64(double v) { return lzk_saturate_i64(floor(v)); }

/* Integer powers as the eager kernel: exact and wrapping, by squaring; a
 * negative exponent gives 1 or +-1 for bases 1 and -1 (other bases are an
 * error the kernel flags) and 0 otherwise. */
#define LZK_IPOW(name, T, U)                                       \
  LZK_INLINE T name(T a, T b) {                                    \
    if (b < 0) return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0; \
    U r = 1, base = (U)a;                                          \
    for (U e = (U)b; e != 0; e >>= 1) {                            \
      if (e & 1) r *= base;                                        \
      base *= base;                                                \
    }                                                              \
    return (T)r;                                                   \
  }
LZK_IPOW(lzk_pow_i32, int32_t, uint32_t)
LZK_IPOW(lzk_pow_i64, int64_t, uint64_t)

/* The folds of float reductions (ll_sum_f32 ...) are in kernel_math.h: eager softmax uses
 * them too. */

)lazylua_prelude";
}

}  // namespace lazylua::compiler
