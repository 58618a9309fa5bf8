// eager_ops.cpp - validation, shape/dtype inference and kernel calls for
// elementwise ops, factories and in-place updates.
#include <algorithm>
#include <cmath>

#include "eager_ops.h"
#include "kernels/random.h"

namespace lazylua::ops {
namespace {

// A 0-dim array holding `value` as `dtype` (exact for integers).
Array scalar_array(Scalar value, DType dtype) {
  Array array = Array::empty(Shape{}, dtype);
  if (value.is_integer && !is_floating(dtype)) {
    if (!in_meta_scope()) fill_kernel_int(array, value.integer);
  } else {
    if (!in_meta_scope()) fill_kernel(array, value.value);
  }
  return array;
}

bool is_arithmetic(BinaryOp op) {
  return !binary_is_comparison(op);
}

DType compute_dtype(BinaryOp op, DType promoted) {
  return binary_compute_dtype(op, promoted);
}

// The op that runs for `op` in the compute dtype (bool arithmetic is logic).
BinaryOp effective_op(BinaryOp op, DType compute) {
  if (compute != DType::boolean) return op;
  switch (op) {
    case BinaryOp::add:
    case BinaryOp::maximum:
      return BinaryOp::logical_or;
    case BinaryOp::mul:
    case BinaryOp::minimum:
      return BinaryOp::logical_and;
    case BinaryOp::sub:
      fail("sub: subtracting bool tensors is not supported; use logical_xor");
    default:
      return op;
  }
}

DType result_dtype(BinaryOp op, DType compute) {
  return binary_is_comparison(op) ? DType::boolean : compute;
}

Array run_binary(BinaryOp op, const Array& a, const Array& b, DType compute) {
  const Shape shape = broadcast_shapes(a.shape, b.shape, binary_op_name(op));
  const BinaryOp run_op = effective_op(op, compute);
  Array out = Array::empty(shape, result_dtype(op, compute), binary_op_name(op));
  if (!in_meta_scope()) binary_kernel(run_op, cast(a, compute), cast(b, compute), out);
  return out;
}

DType unary_dtype(UnaryOp op, DType input) {
  if (traits(op).dtypes == OpDtypes::any) return input;
  if (unary_needs_float(op)) return is_floating(input) ? input : kDefaultFloat;
  return input == DType::boolean ? DType::i64 : input;
}

// PyTorch's rule for writing a result into an existing tensor: never from a
// float result into an integer tensor, never from a number into a bool.
void check_can_store(DType result, DType target, const char* op) {
  const bool loses_kind = (is_floating(result) && !is_floating(target)) ||
                          (result != DType::boolean && target == DType::boolean);
  if (loses_kind) {
    fail("{}: result type {} can't be stored in the in-place target of type {}", op,
         dtype_name(result), dtype_name(target));
  }
}

void check_broadcasts_to(const Shape& source, const Shape& target, const char* op) {
  if (broadcast_shapes(source, target, op) != target) {
    fail("{}: shape {} cannot be broadcast to the in-place target's shape {}", op,
         shape_string(source), shape_string(target));
  }
}

void check_writable(const Array& self, const char* op) {
  // No element at all shares memory with another (and lazy mode, which may
  // see an empty view's strides made contiguous, writes nothing either).
  if (self.numel() == 0) return;
  for (int i = 0; i < self.rank(); i++) {
    if (self.strides[i] == 0 && self.shape[i] > 1) {
      fail(
          "{}: cannot write into an expanded tensor (several of its elements share memory); "
          "clone it first",
          op);
    }
  }
}

// An input that shares memory with the target of an in-place op, other than
// being the very same view, must be read before anything is written.
Array detach_overlap(const Array& input, const Array& target) {
  const bool same_view = input.buffer == target.buffer && input.offset == target.offset &&
                         input.shape == target.shape && input.strides == target.strides;
  if (same_view || !may_overlap(input, target)) return input;
  Array copy = Array::empty(input.shape, input.dtype);
  if (!in_meta_scope()) copy_kernel(input, copy);
  return copy;
}

}  // namespace

DType binary_compute_dtype(BinaryOp op, DType promoted) {
  if (traits(op).dtypes == OpDtypes::floats) {
    return is_floating(promoted) ? promoted : kDefaultFloat;
  }
  const bool logical = op == BinaryOp::add || op == BinaryOp::mul || op == BinaryOp::sub ||
                       op == BinaryOp::maximum || op == BinaryOp::minimum;
  if (is_arithmetic(op) && promoted == DType::boolean && !logical) return DType::i64;
  return promoted;
}

// ---- Factories ----

void check_storable(Scalar value, DType dtype, const char* op) {
  if (value.is_integer || is_floating(dtype) || dtype == DType::boolean) return;
  const double v = value.value;  // the bounds of fits_integer, in double
  const bool fits =
      dtype == DType::i32 ? v > -0x1p31 - 1 && v < 0x1p31 : v >= -0x1p63 && v < 0x1p63;
  if (!fits) {
    fail("{}: {} has no {} value (NaN, infinite or out of range)", op,
         std::isnan(v) ? "nan" : fmt::format("{}", v), dtype_name(dtype));
  }
}

Array full(const Shape& shape, Scalar value, DType dtype) {
  check_storable(value, dtype, "full");
  Array out = Array::empty(shape, dtype, "full");
  if (value.is_integer && !is_floating(dtype)) {
    if (!in_meta_scope()) fill_kernel_int(out, value.integer);
  } else {
    if (!in_meta_scope()) fill_kernel(out, value.value);
  }
  return out;
}

Array arange(Scalar start, Scalar stop, Scalar step, std::optional<DType> dtype) {
  const bool all_integers = start.is_integer && stop.is_integer && step.is_integer;
  const DType type = dtype.value_or(all_integers ? DType::i64 : kDefaultFloat);
  if (step.value == 0) fail("arange: step must be nonzero");
  if (!std::isfinite(start.value) || !std::isfinite(stop.value) || !std::isfinite(step.value)) {
    fail("arange: start, stop and step must be finite");
  }
  int64_t count = 0;
  if (all_integers) {
    // In 128 bits: stop - start overflows int64 for a range like
    // mininteger..maxinteger, which must be "too many", not wrap around.
    const __int128 span = static_cast<__int128>(stop.integer) - start.integer;
    const __int128 step_size = step.integer;
    const __int128 steps = (span + step_size + (step_size > 0 ? -1 : 1)) / step_size;
    if (steps > kMaxElements) {
      fail("arange: {} elements is too many (the limit is 2^40)", static_cast<double>(steps));
    }
    count = steps > 0 ? static_cast<int64_t>(steps) : 0;
  } else {
    const double steps = std::ceil((stop.value - start.value) / step.value);
    if (steps > static_cast<double>(kMaxElements)) {
      fail("arange: {} elements is too many (the limit is 2^40)", steps);
    }
    // A negative count (stop behind start) is an empty range; converting a
    // huge negative double to int64 would be undefined.
    count = steps > 0 ? static_cast<int64_t>(steps) : 0;
  }
  Array out = Array::empty(Shape{count}, type, "arange");
  if (in_meta_scope()) return out;
  // Integer ranges fill from the exact integers: through doubles, values
  // past 2^53 (and start = mininteger, step near the limits) come out wrong.
  if (all_integers) {
    arange_kernel_int(out, start.integer, step.integer);
  } else {
    arange_kernel(out, start.value, step.value);
  }
  return out;
}

Array linspace(double start, double stop, int64_t steps, DType dtype) {
  if (steps < 0) fail("linspace: number of steps must be non-negative, got {}", steps);
  Array out = Array::empty(Shape{steps}, dtype, "linspace");
  const double step = steps > 1 ? (stop - start) / static_cast<double>(steps - 1) : 0;
  // Filled from both ends so the last value is exactly `stop`.
  Array staging = Array::empty(Shape{steps}, DType::f64);
  double* values = staging.data<double>();
  for (int64_t i = 0; i < steps; i++) {
    values[i] = i < steps / 2 ? start + step * static_cast<double>(i)
                              : stop - step * static_cast<double>(steps - 1 - i);
  }
  if (!in_meta_scope()) copy_kernel(staging, out);
  return out;
}

Array eye(int64_t rows, int64_t cols, DType dtype) {
  Array out = Array::empty(Shape{rows, cols}, dtype, "eye");
  if (!in_meta_scope()) fill_kernel_int(out, 0);
  const int64_t diagonal = std::min(rows, cols);
  Array diag = out.view_as(Shape{diagonal}, Strides{cols + 1}, 0);
  if (!in_meta_scope()) fill_kernel_int(diag, 1);
  return out;
}

Array rand(const Shape& shape, DType dtype) {
  if (!is_floating(dtype)) fail("rand: dtype must be f32 or f64, got {}", dtype_name(dtype));
  Array out = Array::empty(shape, dtype, "rand");
  uniform_kernel(out, 0.0, 1.0);
  return out;
}

Array randn(const Shape& shape, DType dtype) {
  if (!is_floating(dtype)) fail("randn: dtype must be f32 or f64, got {}", dtype_name(dtype));
  Array out = Array::empty(shape, dtype, "randn");
  normal_kernel(out, 0.0, 1.0);
  return out;
}

Array randint(int64_t low, int64_t high, const Shape& shape, DType dtype) {
  if (!is_integral(dtype)) fail("randint: dtype must be i32 or i64, got {}", dtype_name(dtype));
  if (high <= low) fail("randint: empty range [{}, {})", low, high);
  Array out = Array::empty(shape, dtype, "randint");
  randint_kernel(out, low, high);
  return out;
}

Array randperm(int64_t n) {
  Array out = Array::empty(Shape{n}, DType::i64, "randperm");
  randperm_kernel(out);
  return out;
}

// ---- Elementwise ----

Array unary(UnaryOp op, const Array& a) {
  const DType type = unary_dtype(op, a.dtype);
  Array out = Array::empty(a.shape, traits(op).result == OpResult::boolean ? DType::boolean : type);
  if (!in_meta_scope()) unary_kernel(op, cast(a, type), out);
  return out;
}

Array binary(BinaryOp op, const Array& a, const Array& b) {
  return run_binary(op, a, b, compute_dtype(op, promote(a.dtype, b.dtype)));
}

void check_scalar_fits(BinaryOp op, Scalar value, DType compute) {
  if (compute != DType::i32 || !value.is_integer) return;
  if (value.integer < INT32_MIN || value.integer > INT32_MAX) {
    fail("{}: {} does not fit in i32, the tensor's dtype (convert the tensor with :long())",
         binary_op_name(op), value.integer);
  }
}

Array binary(BinaryOp op, const Array& a, Scalar b) {
  const DType compute = compute_dtype(op, promote_with_scalar(a.dtype, b.is_integer));
  check_scalar_fits(op, b, compute);
  return run_binary(op, a, scalar_array(b, compute), compute);
}

Array binary(BinaryOp op, Scalar a, const Array& b) {
  const DType compute = compute_dtype(op, promote_with_scalar(b.dtype, a.is_integer));
  check_scalar_fits(op, a, compute);
  return run_binary(op, scalar_array(a, compute), b, compute);
}

Array where(const Array& cond, const Array& a, const Array& b) {
  const Shape shape =
      broadcast_shapes(broadcast_shapes(cond.shape, a.shape, "where"), b.shape, "where");
  const DType type = promote(a.dtype, b.dtype);
  Array out = Array::empty(shape, type, "where");
  if (!in_meta_scope()) where_kernel(cast(cond, DType::boolean), cast(a, type), cast(b, type), out);
  return out;
}

namespace {

// Clamps into `out` (which may be `in`). Integer bounds of an integer
// tensor go through exact integer max/min; otherwise the bounds are doubles.
void run_clamp(const Array& in, std::optional<Scalar> low, std::optional<Scalar> high,
               const Array& out) {
  if (in_meta_scope()) return;
  const bool exact =
      is_integral(out.dtype) && (!low || low->is_integer) && (!high || high->is_integer);
  if (!exact) {
    clamp_kernel(in, low.has_value(), low ? low->value : 0, high.has_value(),
                 high ? high->value : 0, out);
    return;
  }
  // A bound beyond the dtype's range saturates (it must not wrap).
  auto bound = [&](Scalar value) {
    if (out.dtype == DType::i32) {
      value.integer = std::clamp<int64_t>(value.integer, INT32_MIN, INT32_MAX);
    }
    return scalar_array(value, out.dtype);
  };
  if (&in != &out) copy_kernel(in, out);
  if (low) binary_kernel(BinaryOp::maximum, out, bound(*low), out);
  if (high) binary_kernel(BinaryOp::minimum, out, bound(*high), out);
}

}  // namespace

namespace {

void check_bounds(const char* op, DType type, std::optional<Scalar> low,
                  std::optional<Scalar> high) {
  for (const std::optional<Scalar>& bound : {low, high}) {
    if (bound && !is_floating(type) && std::isnan(bound->value))
      fail("{}: a NaN bound for a {} tensor (its values cannot be NaN)", op, dtype_name(type));
  }
  if (is_floating(type)) return;
  // A low bound above the integer dtype's range (a high one below it) is
  // the value of every element, which the dtype cannot hold: an error, as a
  // fill with it is, not a saturated value. Bounds on the other side of the
  // range (+-inf included) clamp nothing and are fine.
  const bool i32 = type == DType::i32;
  const auto beyond = [&](Scalar bound, bool is_low) {
    if (bound.is_integer && !i32) return false;
    if (bound.is_integer) return is_low ? bound.integer > INT32_MAX : bound.integer < INT32_MIN;
    if (is_low) return i32 ? bound.value > 0x1p31 - 1 : bound.value >= 0x1p63;
    return i32 ? bound.value < -0x1p31 : bound.value < -0x1p63;
  };
  for (const bool is_low : {true, false}) {
    const std::optional<Scalar>& bound = is_low ? low : high;
    if (!bound || !beyond(*bound, is_low)) continue;
    fail("{}: {} has no {} value (NaN, infinite or out of range)", op,
         bound->is_integer ? fmt::format("{}", bound->integer) : fmt::format("{}", bound->value),
         dtype_name(type));
  }
}

}  // namespace

Array clamp(const Array& a, std::optional<Scalar> low, std::optional<Scalar> high) {
  const DType type = a.dtype == DType::boolean ? DType::i64 : a.dtype;
  check_bounds("clamp", type, low, high);
  Array out = Array::empty(a.shape, type);
  run_clamp(cast(a, type), low, high, out);
  return out;
}

// A float value with no integer value (NaN, +-inf, beyond the range) is an
// error when converted to an integer dtype, as in Lua (`3.5 // 0 | 0`), not
// a silent 0. Compiled kernels raise it too (KernelError::no_integer_value).
void check_integer_values(const Array& source, DType to, const char* op) {
  if (const std::optional<double> bad = first_without_integer_value(source, to)) {
    fail("{}: {} has no {} value (NaN, infinite or out of range)", op,
         std::isnan(*bad) ? "nan" : fmt::format("{}", *bad), dtype_name(to));
  }
}

Array cast(const Array& a, DType dtype) {
  if (a.dtype == dtype) return a;
  Array out = Array::empty(a.shape, dtype);
  if (in_meta_scope()) return out;
  check_integer_values(a, dtype, "cast");
  copy_kernel(a, out);
  return out;
}

// ---- In place ----

void unary_(UnaryOp op, const Array& self) {
  check_writable(self, unary_op_name(op));
  const DType type = unary_dtype(op, self.dtype);
  check_can_store(type, self.dtype, unary_op_name(op));
  if (type != self.dtype)
    fail("{}_: not defined for {} tensors", unary_op_name(op), dtype_name(self.dtype));
  if (!in_meta_scope()) unary_kernel(op, self, self);
}

void binary_(BinaryOp op, const Array& self, const Array& other) {
  const char* name = binary_op_name(op);
  check_writable(self, name);
  const DType compute = compute_dtype(op, promote(self.dtype, other.dtype));
  check_can_store(result_dtype(op, compute), self.dtype, name);
  check_broadcasts_to(other.shape, self.shape, name);
  const Array source = detach_overlap(other, self);
  if (compute == self.dtype && !binary_is_comparison(op)) {
    const BinaryOp run_op = effective_op(op, compute);
    if (!in_meta_scope()) binary_kernel(run_op, self, cast(source, compute), self);
  } else {
    if (!in_meta_scope()) copy_kernel(run_binary(op, self, source, compute), self);
  }
}

void binary_(BinaryOp op, const Array& self, Scalar other) {
  const DType compute = compute_dtype(op, promote_with_scalar(self.dtype, other.is_integer));
  check_scalar_fits(op, other, compute);
  binary_(op, self, scalar_array(other, compute));
}

void clamp_(const Array& self, std::optional<Scalar> low, std::optional<Scalar> high) {
  check_writable(self, "clamp_");
  if (self.dtype == DType::boolean) fail("clamp_: not defined for bool tensors");
  check_bounds("clamp_", self.dtype, low, high);
  run_clamp(self, low, high, self);
}

void fill_(const Array& self, Scalar value) {
  check_writable(self, "fill_");
  check_storable(value, self.dtype, "fill_");
  if (value.is_integer && !is_floating(self.dtype)) {
    if (!in_meta_scope()) fill_kernel_int(self, value.integer);
  } else {
    if (!in_meta_scope()) fill_kernel(self, value.value);
  }
}

void copy_(const Array& self, const Array& source) {
  check_writable(self, "copy_");
  check_broadcasts_to(source.shape, self.shape, "copy_");
  if (in_meta_scope()) return;
  check_integer_values(source, self.dtype, "copy_");
  copy_kernel(detach_overlap(source, self), self);
}

}  // namespace lazylua::ops
