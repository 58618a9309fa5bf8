// elementwise.h - reference kernels for elementwise ops (unary, binary,
// where, casts, fills). These are eager mode, the fallback for ops the
// compiler does not lower, and the oracle in tests: correct in every corner,
// and fast on contiguous data (vectorized, threaded past kElementwiseGrain).
#pragma once

#include <optional>

#include "../array.h"
#include "elementwise_ops.h"

namespace lazylua {

// Unary and binary ops: the table in elementwise_ops.h, with their
// semantics. Unary: float-only ops are only called with f32/f64 (the op
// layer promotes integer inputs first); neg/abs/sign/square keep ints.
//   sigmoid is computed stably from exp(-|x|); gelu is the exact erf form,
//     evaluated as 0.5 x erfc(-x/sqrt2) (no cancellation for x < 0), with
//     the limits gelu(+inf) = inf, gelu(-inf) = -0.
//   Float transcendentals and rounding are kernel_math.h's, the functions
//     generated code calls: the same bits in every tier (errors, < 1 ulp
//     but gelu, erf and erfc, listed there; float32 sin/cos/tan give NaN
//     beyond 6e6).
// Binary ops. Comparisons and logical ops produce bool.
//   div: true division (floats only; the op layer promotes ints).
//   floordiv: floor(a / b); for ints rounds toward -inf like Lua's //, and
//     x // 0 raises Error for integers with Lua 5.4's message "attempt to
//     divide by zero"; minint // -1 wraps to minint.
//   mod: a - floor(a / b) * b, the sign of b, like Lua's % and PyTorch's
//     remainder; integer x % 0 raises Error ("attempt to perform 'n%0'");
//     minint % -1 = 0. Floats use Lua 5.4's fmod-based rule: 5.5 % -2 =
//     -0.5, -5 % inf = inf, -5 % -inf = -5.
//   add/sub/mul wrap on integers, as Lua does.
//   Errors are raised before anything is written (an in-place op that
//   fails leaves its target untouched).
//   pow: ints use exact integer powers, wrapping (a negative exponent
//     raises Error "Integers to negative integer powers are not allowed."
//     unless the base is 1 or -1); floats use kernel_math.h's pow.
//   maximum/minimum: elementwise; NaN propagates for floats.

// out = op(in). `in` and `out` have equal shapes; `in` may have any strides
// (including 0) and dtype equal to out's (for logical_not: any dtype in, bool
// out). `out` may have any non-overlapping strides and may be `in` itself.
void unary_kernel(UnaryOp op, const Array& in, const Array& out);

// out = op(a, b). a and b have the same dtype (the compute dtype) and shapes
// that broadcast to out.shape (the kernel expands them with 0 strides).
// out's dtype is the compute dtype, or bool for comparisons/logical ops.
// out may be exactly a or b (in-place), never a partial overlap.
// Arithmetic needs i32/i64/f32/f64 (bool raises Error: the op layer
// promotes it); comparisons and logical ops take every dtype, and any
// nonzero byte of a bool array counts as true.
void binary_kernel(BinaryOp op, const Array& a, const Array& b, const Array& out);

// out = cond ? a : b, with cond bool; a, b and out share a dtype; all three
// broadcast to out.shape.
void where_kernel(const Array& cond, const Array& a, const Array& b, const Array& out);

// values[i] * sigmoid(values[i]) in place (SiLU), a convolution's epilogue
// (conv.h): the bits of unary_kernel's sigmoid and then binary_kernel's mul,
// in either operand order (a product's bits do not depend on it).
void silu_in_place(float* values, int64_t n);
void silu_in_place(double* values, int64_t n);

// out = clamp(in, lo, hi) with optional bounds (a NaN bound makes every
// float result NaN, as PyTorch; integer tensors never get one).
// Same dtype in and out; bounds are converted to it: for floats by
// rounding (beyond the range: +-inf), for ints to ceil(lo) and floor(hi)
// (the integers within [lo, hi]), saturated to the type's range. NaN input
// stays NaN; with lo > hi every element becomes hi (as PyTorch).
void clamp_kernel(const Array& in, bool has_low, double low, bool has_high, double high,
                  const Array& out);

// dst = convert(src) elementwise, any dtypes, src broadcast to dst.shape.
// Float -> int truncates toward zero (NaN and out-of-range values become 0
// rather than undefined behaviour); anything -> bool is `!= 0` (NaN is
// true); bool -> number is 0/1; int -> narrower int wraps; f64 -> f32
// rounds (beyond f32's range: +-inf). src and dst may have any strides.
void copy_kernel(const Array& src, const Array& dst);

// The first element of float `src` (in storage order of its rows) whose
// truncation is not a value of integer dtype `to`: NaN, +-inf or out of
// range. nullopt when all fit, or when src is not float or `to` is not an
// integer dtype.
std::optional<double> first_without_integer_value(const Array& src, DType to);

// Every element of dst (any strides) set to value converted to dst's dtype
// (by copy_kernel's rules).
void fill_kernel(const Array& dst, double value);
void fill_kernel_int(const Array& dst, int64_t value);  // exact for i64

// dst[i] = start + i * step for a contiguous 1-D dst. Integer dtypes with
// integral start and step are computed exactly in int64; otherwise in
// double, then converted by copy_kernel's rules.
void arange_kernel(const Array& dst, double start, double step);
// The same for an integer range: every value exact in int64 (whatever its
// size: no double in between), converted once to dst's dtype.
void arange_kernel_int(const Array& dst, int64_t start, int64_t step);

// True if any element is nonzero / all elements are nonzero (any dtype, any
// strides; NaN is nonzero, -0.0 is zero; an empty array has none / all).
bool any_nonzero(const Array& a);
bool all_nonzero(const Array& a);

}  // namespace lazylua
