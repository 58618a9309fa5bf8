// elementwise_ops.h - the table of elementwise ops: one row an op, its traits
// in columns (issue 13: "adding an op is one row").
//
// Generated from it: the UnaryOp and BinaryOp enums, their names, the dtype
// rules of the op layer, the traits the compiler's passes use (fusion,
// constant folding, simplification) and the Lua methods with their in-place
// forms. What must be written per op is checked at compile time: the eager
// kernel's struct (elementwise_unary.cpp, elementwise_binary.cpp: a missing
// one is an unknown name), the C expression (compiler/codegen_c.cpp) and the
// gradient (autograd_rules.cpp) are switches without `default:` under
// -Werror=switch, with an InternalError after them, never a silent identity
// or a missing gradient. New rows go at the end: the enum values are in
// graph keys and in the seeds of random tests.
#pragma once

#include <cstdint>

namespace lazylua {

// Which dtypes an op computes in. floats: an integer or bool input becomes
// the default float first; numbers: i32/i64/f32/f64 (a bool input becomes
// i64; binary ops turn bool arithmetic into logic); any: every dtype.
enum class OpDtypes : uint8_t { floats, numbers, any };
// The result's dtype: the compute dtype, or bool (comparisons, logic).
enum class OpResult : uint8_t { same, boolean };
// expensive: a transcendental or libm call, worth storing rather than
// recomputing in a second kernel (compiler/fuse.cpp).
enum class OpCost : uint8_t { cheap, expensive };
// exact: every element is computed exactly or correctly rounded, so one
// element evaluated at compile time is what every element gives at run time
// (compiler/fold_constants.cpp); approx: approximations whose scalar and
// vector code may differ in the last bit, and pow's shortcuts.
enum class OpFold : uint8_t { exact, approx };
// f(f(x)) = f(x) or = x (compiler/simplify.cpp).
enum class OpAlgebra : uint8_t { none, idempotent, involution };
// yes: also a Lua method `name_` that writes the result in place.
enum class OpInPlace : uint8_t { no, yes };
// Binary ops on integers: may_fail when an element can raise an error
// (x // 0, x % 0, negative integer powers), so every element must be
// computed even where the compiler would skip it.
enum class OpIntErrors : uint8_t { never, may_fail };

// Unary ops: X(name, dtypes, result, cost, fold, algebra, in_place). The Lua
// method is the name. Semantics (elementwise.h): neg/abs/square wrap on
// integers; relu(NaN) = NaN, relu(-0) = -0; round halves go to even; sign(0,
// -0, NaN) give themselves; frac(x) = x - trunc(x) (frac(+-inf) = NaN, as
// PyTorch); the float transcendentals are kernel_math.h's. isnan, isinf and
// isfinite take any dtype (integers and bools are finite) and give bools.
// clang-format off
#define LAZYLUA_UNARY_OPS(X)                                                       \
  X(neg,         numbers, same,    cheap,     exact,  involution, yes)             \
  X(abs,         numbers, same,    cheap,     exact,  idempotent, yes)             \
  X(sign,        numbers, same,    cheap,     exact,  idempotent, yes)             \
  X(square,      numbers, same,    cheap,     exact,  none,       no)              \
  X(exp,         floats,  same,    expensive, approx, none,       yes)             \
  X(expm1,       floats,  same,    expensive, approx, none,       yes)             \
  X(log,         floats,  same,    expensive, approx, none,       yes)             \
  X(log1p,       floats,  same,    expensive, approx, none,       no)              \
  X(log2,        floats,  same,    expensive, approx, none,       yes)             \
  X(sqrt,        floats,  same,    cheap,     exact,  none,       yes)             \
  X(rsqrt,       floats,  same,    cheap,     exact,  none,       no)              \
  X(reciprocal,  floats,  same,    cheap,     exact,  none,       no)              \
  X(sin,         floats,  same,    expensive, approx, none,       no)              \
  X(cos,         floats,  same,    expensive, approx, none,       no)              \
  X(tan,         floats,  same,    expensive, approx, none,       no)              \
  X(tanh,        floats,  same,    expensive, approx, none,       yes)             \
  X(sigmoid,     floats,  same,    expensive, approx, none,       yes)             \
  X(relu,        numbers, same,    cheap,     exact,  idempotent, yes)             \
  X(gelu,        floats,  same,    expensive, approx, none,       no)              \
  X(floor,       numbers, same,    cheap,     exact,  idempotent, no)              \
  X(ceil,        numbers, same,    cheap,     exact,  idempotent, no)              \
  X(round,       numbers, same,    cheap,     exact,  idempotent, no)              \
  X(trunc,       numbers, same,    cheap,     exact,  idempotent, yes)             \
  X(logical_not, any,     boolean, cheap,     exact,  involution, no)              \
  X(erf,         floats,  same,    expensive, approx, none,       yes)             \
  X(erfc,        floats,  same,    expensive, approx, none,       yes)             \
  X(exp2,        floats,  same,    expensive, approx, none,       yes)             \
  X(frac,        numbers, same,    cheap,     exact,  none,       yes)             \
  X(asin,        floats,  same,    expensive, approx, none,       yes)             \
  X(acos,        floats,  same,    expensive, approx, none,       yes)             \
  X(atan,        floats,  same,    expensive, approx, none,       yes)             \
  X(sinh,        floats,  same,    expensive, approx, none,       yes)             \
  X(cosh,        floats,  same,    expensive, approx, none,       yes)             \
  X(asinh,       floats,  same,    expensive, approx, none,       yes)             \
  X(acosh,       floats,  same,    expensive, approx, none,       yes)             \
  X(atanh,       floats,  same,    expensive, approx, none,       yes)             \
  X(log10,       floats,  same,    expensive, approx, none,       yes)             \
  X(isnan,       any,     boolean, cheap,     exact,  none,       no)              \
  X(isinf,       any,     boolean, cheap,     exact,  none,       no)              \
  X(isfinite,    any,     boolean, cheap,     exact,  none,       no)

// Binary ops: X(name, dtypes, result, cost, fold, in_place, int_errors,
// alias): alias is a second Lua method name ("" for none).
//   div: true division; floordiv: floor(a / b), Lua's //; mod: a - floor(a /
//   b) * b, the sign of b, Lua's % and PyTorch's remainder; pow: ints exact
//   and wrapping, floats kernel_math.h's; maximum/minimum: NaN propagates.
#define LAZYLUA_BINARY_OPS(X)                                                               \
  X(add,         numbers, same,    cheap,     exact,  yes, never,    "")                    \
  X(sub,         numbers, same,    cheap,     exact,  yes, never,    "")                    \
  X(mul,         numbers, same,    cheap,     exact,  yes, never,    "")                    \
  X(div,         floats,  same,    cheap,     exact,  yes, never,    "")                    \
  X(floordiv,    numbers, same,    expensive, exact,  no,  may_fail, "floor_divide")        \
  X(mod,         numbers, same,    expensive, exact,  no,  may_fail, "remainder")           \
  X(pow,         numbers, same,    expensive, approx, yes, may_fail, "")                    \
  X(maximum,     numbers, same,    cheap,     exact,  no,  never,    "")                    \
  X(minimum,     numbers, same,    cheap,     exact,  no,  never,    "")                    \
  X(atan2,       floats,  same,    expensive, approx, no,  never,    "")                    \
  X(eq,          any,     boolean, cheap,     exact,  no,  never,    "")                    \
  X(ne,          any,     boolean, cheap,     exact,  no,  never,    "")                    \
  X(lt,          any,     boolean, cheap,     exact,  no,  never,    "")                    \
  X(le,          any,     boolean, cheap,     exact,  no,  never,    "")                    \
  X(gt,          any,     boolean, cheap,     exact,  no,  never,    "")                    \
  X(ge,          any,     boolean, cheap,     exact,  no,  never,    "")                    \
  X(logical_and, any,     boolean, cheap,     exact,  no,  never,    "")                    \
  X(logical_or,  any,     boolean, cheap,     exact,  no,  never,    "")                    \
  X(logical_xor, any,     boolean, cheap,     exact,  no,  never,    "")
// clang-format on

#define LAZYLUA_OP_ENUM_ITEM(name, ...) name,
enum class UnaryOp { LAZYLUA_UNARY_OPS(LAZYLUA_OP_ENUM_ITEM) };
enum class BinaryOp { LAZYLUA_BINARY_OPS(LAZYLUA_OP_ENUM_ITEM) };
#undef LAZYLUA_OP_ENUM_ITEM

#define LAZYLUA_OP_COUNT_ITEM(...) +1
constexpr int kUnaryOpCount = 0 LAZYLUA_UNARY_OPS(LAZYLUA_OP_COUNT_ITEM);
constexpr int kBinaryOpCount = 0 LAZYLUA_BINARY_OPS(LAZYLUA_OP_COUNT_ITEM);
#undef LAZYLUA_OP_COUNT_ITEM

struct UnaryTraits {
  const char* name;
  OpDtypes dtypes;
  OpResult result;
  OpCost cost;
  OpFold fold;
  OpAlgebra algebra;
  OpInPlace in_place;
};

struct BinaryTraits {
  const char* name;
  OpDtypes dtypes;
  OpResult result;
  OpCost cost;
  OpFold fold;
  OpInPlace in_place;
  OpIntErrors int_errors;
  const char* alias;
};

inline constexpr UnaryTraits kUnaryTraits[] = {
#define LAZYLUA_UNARY_TRAITS(name, dtypes, result, cost, fold, algebra, in_place) \
  {#name,        OpDtypes::dtypes,   OpResult::result,   OpCost::cost,            \
   OpFold::fold, OpAlgebra::algebra, OpInPlace::in_place},
    LAZYLUA_UNARY_OPS(LAZYLUA_UNARY_TRAITS)
#undef LAZYLUA_UNARY_TRAITS
};

inline constexpr BinaryTraits kBinaryTraits[] = {
#define LAZYLUA_BINARY_TRAITS(name, dtypes, result, cost, fold, in_place, int_errors, alias) \
  {#name,        OpDtypes::dtypes,    OpResult::result,        OpCost::cost,                 \
   OpFold::fold, OpInPlace::in_place, OpIntErrors::int_errors, alias},
    LAZYLUA_BINARY_OPS(LAZYLUA_BINARY_TRAITS)
#undef LAZYLUA_BINARY_TRAITS
};

constexpr const UnaryTraits& traits(UnaryOp op) {
  return kUnaryTraits[static_cast<int>(op)];
}
constexpr const BinaryTraits& traits(BinaryOp op) {
  return kBinaryTraits[static_cast<int>(op)];
}

inline const char* unary_op_name(UnaryOp op) {
  return traits(op).name;
}
inline const char* binary_op_name(BinaryOp op) {
  return traits(op).name;
}
// True for ops whose result is meaningful only in floating point (the op
// layer turns an integer input into the default float type first).
constexpr bool unary_needs_float(UnaryOp op) {
  return traits(op).dtypes == OpDtypes::floats;
}
// eq..ge and logical_*: any dtypes in, bool out.
constexpr bool binary_is_comparison(BinaryOp op) {
  return traits(op).result == OpResult::boolean;
}

}  // namespace lazylua
