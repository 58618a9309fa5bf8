// codegen_c.h - the C spelling of lazylua's element semantics: types,
// literals, dtype conversions and every unary/binary op, exactly as the
// eager kernels compute them (tensor/kernels/elementwise*.cpp).
#pragma once

#include <string>

#include "tensor/eager_ops.h"

namespace lazylua::compiler {

// float, double, int32_t, int64_t, uint8_t (bool holds 0 or 1).
const char* c_type(DType dtype);

// `value` converted to `dtype` as a fill would (ops::full), as a C literal.
std::string c_literal(DType dtype, const ops::Scalar& value);
std::string c_double(double value);  // exact (hex) double literal
std::string c_float(float value);    // exact (hex) float literal

// `x` (a C expression of dtype `from`) as `to`, by copy_kernel's rules.
std::string c_convert(DType from, DType to, const std::string& x);

// The result of unary `op` on `x`, which is already of the op's dtype
// `dtype` (for logical_not: any dtype; the result is bool).
std::string c_unary(UnaryOp op, DType dtype, const std::string& x);

// The result of binary `op` computed in `compute` (a and b already of that
// dtype; bool arithmetic already turned into logic). Integer // and % take
// a divisor that is never 0 (the caller substitutes and flags).
std::string c_binary(BinaryOp op, DType compute, const std::string& a, const std::string& b);

// The op that runs for `op` in dtype `compute` (bool + is or, * is and...).
BinaryOp effective_binary_op(BinaryOp op, DType compute);

// Helpers every generated source starts with (after kernel_math.h):
// includes, rounding, safe float->int, Lua // and %, clamp bounds, and the
// vectorized folds of reductions.
const char* codegen_prelude();

}  // namespace lazylua::compiler
