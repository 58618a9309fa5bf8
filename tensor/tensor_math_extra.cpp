// tensor_math_extra.cpp - isclose/allclose, lerp, addcmul/addcdiv, xlogy,
// one_hot and the random fills (uniform_, normal_, bernoulli, multinomial).
//
// The composites are written with autograd's ops, so they record like any
// other op in lazy mode and have gradients without rules of their own. The
// random ones draw their numbers from the global generator when called (as
// tensor.rand does): the values then enter the graph as data, so every mode
// and tier sees the same numbers for the same seed and sequence of calls.
#include "tensor_math_extra.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd.h"
#include "kernels/random.h"
#include "scan.h"

namespace lazylua {
namespace {

using ops::Scalar;

Tensor scalar_like(const Tensor& t, double value, DType dtype) {
  return scalar_tensor(t->context.get(), Scalar::from_double(value), dtype);
}

// The float dtype both operands compare in: their promoted type, or f64 for
// integers and bools (exact for every i32 and for i64 up to 2^53).
DType close_dtype(const Tensor& a, const Tensor& b) {
  const DType promoted = promote(a->dtype, b->dtype);
  return is_floating(promoted) ? promoted : DType::f64;
}

Tensor logical_and(const Tensor& a, const Tensor& b) {
  return binary(BinaryOp::logical_and, a, b);
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  return binary(BinaryOp::logical_or, a, b);
}

void check_not_in_scan(const Tensor& t, const char* op) {
  check_no_random_in_scan_body(t->context.get(), op);
}

// A fresh contiguous array of the shape and dtype, from the generator.
Array uniform_array(const Shape& shape, DType dtype, double low, double high) {
  Array out = Array::empty(shape, dtype, "uniform_");
  uniform_kernel(out, low, high);
  return out;
}

void check_float_target(const Tensor& self, const char* op) {
  if (!is_floating(self->dtype)) {
    fail("{}: needs an f32 or f64 tensor, got {}", op, dtype_name(self->dtype));
  }
}

// The host data of a tensor as doubles, row-major (syncs a lazy tensor).
std::vector<double> host_values(const Tensor& t) {
  const Array data = contiguous(ops::cast(observe(t, SyncCause::host_read), DType::f64));
  const double* values = data.data<double>();
  return std::vector<double>(values, values + data.numel());
}

}  // namespace

Tensor isclose(const Tensor& a, const Tensor& b, const CloseTolerance& tolerance) {
  if (!(tolerance.rtol >= 0) || !(tolerance.atol >= 0)) {
    fail("isclose: rtol and atol must be >= 0, got rtol = {}, atol = {}", tolerance.rtol,
         tolerance.atol);
  }
  // No gradient: a bool result. Plain ops, so nothing is recorded for backward.
  const DType dtype = close_dtype(a, b);
  const Tensor x = cast(a, dtype), y = cast(b, dtype);
  // Infinities are close only to themselves (x == y); finite values within
  // atol + rtol |y|.
  const Tensor bound =
      binary(BinaryOp::add,
             binary(BinaryOp::mul, unary(UnaryOp::abs, y), Scalar::from_double(tolerance.rtol)),
             Scalar::from_double(tolerance.atol));
  const Tensor near = binary(BinaryOp::le, unary(UnaryOp::abs, binary(BinaryOp::sub, x, y)), bound);
  const Tensor finite = logical_and(unary(UnaryOp::isfinite, x), unary(UnaryOp::isfinite, y));
  Tensor close = logical_or(binary(BinaryOp::eq, x, y), logical_and(finite, near));
  if (tolerance.equal_nan) {
    close = logical_or(close, logical_and(unary(UnaryOp::isnan, x), unary(UnaryOp::isnan, y)));
  }
  return close;
}

bool allclose(const Tensor& a, const Tensor& b, const CloseTolerance& tolerance) {
  const Tensor all = reduce(ReduceOp::all, isclose(a, b, tolerance), std::nullopt, false);
  const Array value = observe(all, SyncCause::item);
  return *value.data<uint8_t>() != 0;
}

Tensor lerp(const Tensor& a, const Tensor& b, const Tensor& weight) {
  const Tensor difference = autograd::binary(BinaryOp::sub, b, a);
  const Tensor from_a =
      autograd::binary(BinaryOp::add, a, autograd::binary(BinaryOp::mul, weight, difference));
  const Tensor one_minus = autograd::binary(BinaryOp::sub, Scalar::from_integer(1), weight);
  const Tensor from_b =
      autograd::binary(BinaryOp::sub, b, autograd::binary(BinaryOp::mul, difference, one_minus));
  const Tensor low = binary(BinaryOp::lt, unary(UnaryOp::abs, weight), Scalar::from_double(0.5));
  return autograd::where(low, from_a, from_b);
}

Tensor lerp(const Tensor& a, const Tensor& b, double weight) {
  const Tensor difference = autograd::binary(BinaryOp::sub, b, a);
  if (std::fabs(weight) < 0.5) {
    return autograd::binary(
        BinaryOp::add, a, autograd::binary(BinaryOp::mul, difference, Scalar::from_double(weight)));
  }
  return autograd::binary(
      BinaryOp::sub, b,
      autograd::binary(BinaryOp::mul, difference, Scalar::from_double(1 - weight)));
}

namespace {
Tensor add_scaled(const Tensor& t, const Tensor& product, Scalar value) {
  const bool unit = value.is_integer ? value.integer == 1 : value.value == 1.0;
  const Tensor scaled = unit ? product : autograd::binary(BinaryOp::mul, product, value);
  return autograd::binary(BinaryOp::add, t, scaled);
}
}  // namespace

Tensor addcmul(const Tensor& t, const Tensor& a, const Tensor& b, Scalar value) {
  return add_scaled(t, autograd::binary(BinaryOp::mul, a, b), value);
}

Tensor addcdiv(const Tensor& t, const Tensor& a, const Tensor& b, Scalar value) {
  return add_scaled(t, autograd::binary(BinaryOp::div, a, b), value);
}

Tensor xlogy(const Tensor& x, const Tensor& y) {
  const Tensor product = autograd::binary(BinaryOp::mul, x, autograd::unary(UnaryOp::log, y));
  const Tensor zero_x = binary(BinaryOp::eq, x, Scalar::from_integer(0));
  const Tensor take_zero =
      logical_and(zero_x, unary(UnaryOp::logical_not, unary(UnaryOp::isnan, y)));
  return autograd::where(take_zero, scalar_like(product, 0, product->dtype), product);
}

Tensor one_hot(const Tensor& index, std::optional<int64_t> num_classes) {
  check_not_in_scan_body(index->context.get(), "one_hot reads its indices");
  if (index->dtype != DType::i64 && index->dtype != DType::i32) {
    fail("one_hot: index must be an i64 or i32 tensor of 1-based classes, got {}",
         dtype_name(index->dtype));
  }
  const Array indices = contiguous(ops::cast(observe(index, SyncCause::host_read), DType::i64));
  const int64_t count = indices.numel();
  const int64_t* values = indices.data<int64_t>();
  int64_t classes = 0;
  if (num_classes) {
    if (*num_classes < 1) fail("one_hot: num_classes must be >= 1, got {}", *num_classes);
    classes = *num_classes;
  } else {
    if (count == 0) fail("one_hot: cannot infer num_classes from an empty index tensor");
    for (int64_t i = 0; i < count; ++i) classes = std::max(classes, values[i]);
  }
  for (int64_t i = 0; i < count; ++i) {
    if (values[i] < 1 || values[i] > classes) {
      fail("one_hot: class {} is out of range 1..{} (classes are 1-based)", values[i], classes);
    }
  }
  Shape shape = index->shape;
  shape.push_back(classes);
  Array out = Array::empty(shape, DType::i64, "one_hot");
  int64_t* cells = out.data<int64_t>();
  std::fill(cells, cells + out.numel(), int64_t{0});
  for (int64_t i = 0; i < count; ++i) cells[i * classes + values[i] - 1] = 1;
  return make_tensor(index->context.get(), std::move(out));
}

void uniform_(const Tensor& self, double low, double high) {
  check_float_target(self, "uniform_");
  check_not_in_scan(self, "uniform_");
  if (!std::isfinite(low) || !std::isfinite(high) || low > high) {
    fail("uniform_: expected finite low <= high, got [{}, {})", low, high);
  }
  copy_(self, make_tensor(self->context.get(), uniform_array(self->shape, self->dtype, low, high)));
}

void normal_(const Tensor& self, double mean, double std) {
  check_float_target(self, "normal_");
  check_not_in_scan(self, "normal_");
  if (!std::isfinite(mean) || !(std >= 0) || !std::isfinite(std)) {
    fail("normal_: expected a finite mean and std >= 0, got mean = {}, std = {}", mean, std);
  }
  Array values = Array::empty(self->shape, self->dtype, "normal_");
  normal_kernel(values, mean, std);
  copy_(self, make_tensor(self->context.get(), std::move(values)));
}

// u < p with u uniform in [0, 1) (f64, 53 bits): p = 0 never, p = 1 always.
Tensor bernoulli(const Tensor& p) {
  check_not_in_scan(p, "bernoulli");
  if (!is_floating(p->dtype)) {
    fail("bernoulli: p must be an f32 or f64 tensor of probabilities, got {}",
         dtype_name(p->dtype));
  }
  const Tensor u = make_tensor(p->context.get(), uniform_array(p->shape, DType::f64, 0, 1));
  return cast(binary(BinaryOp::lt, u, p), p->dtype);
}

void bernoulli_(const Tensor& self, double p) {
  check_not_in_scan(self, "bernoulli_");
  if (!(p >= 0 && p <= 1)) fail("bernoulli_: p must be in [0, 1], got {}", p);
  const Tensor u = make_tensor(self->context.get(), uniform_array(self->shape, DType::f64, 0, 1));
  copy_(self, binary(BinaryOp::lt, u, Scalar::from_double(p)));
}

void bernoulli_(const Tensor& self, const Tensor& p) {
  check_not_in_scan(self, "bernoulli_");
  if (!is_floating(p->dtype)) {
    fail("bernoulli_: p must be a number or an f32/f64 tensor, got {}", dtype_name(p->dtype));
  }
  const Tensor u = make_tensor(self->context.get(), uniform_array(self->shape, DType::f64, 0, 1));
  // u has self's shape: p must broadcast to it (the comparison checks).
  const Tensor draw = binary(BinaryOp::lt, u, p);
  if (!(draw->shape == self->shape)) {
    fail("bernoulli_: p's shape does not broadcast to the tensor's");
  }
  copy_(self, draw);
}

Tensor multinomial(const Tensor& probs, int64_t n, bool replacement) {
  check_not_in_scan(probs, "multinomial");
  const int rank = probs->shape.rank();
  if (rank != 1 && rank != 2) fail("multinomial: probs must be 1-D or 2-D, got {}-D", rank);
  if (probs->dtype == DType::boolean) fail("multinomial: probs must be a number tensor, got bool");
  const int64_t rows = rank == 2 ? probs->shape[0] : 1;
  const int64_t categories = probs->shape[rank - 1];
  if (categories == 0) fail("multinomial: probs has no categories");
  if (n < 1) fail("multinomial: n must be >= 1, got {}", n);
  if (!replacement && n > categories) {
    fail("multinomial: cannot draw {} samples from {} categories without replacement", n,
         categories);
  }
  const std::vector<double> weights = host_values(probs);
  for (int64_t r = 0; r < rows; ++r) {
    double total = 0;
    int64_t positive = 0;
    for (int64_t c = 0; c < categories; ++c) {
      const double w = weights[r * categories + c];
      if (!(w >= 0) || !std::isfinite(w)) {
        fail("multinomial: row {} has a negative, infinite or NaN probability ({})", r + 1, w);
      }
      total += w;
      positive += w > 0;
    }
    if (!(total > 0)) fail("multinomial: row {} sums to zero", r + 1);
    if (!replacement && n > positive) {
      fail(
          "multinomial: row {} has {} nonzero categories, fewer than the {} samples drawn "
          "without replacement",
          r + 1, positive, n);
    }
  }
  // One uniform per sample, drawn at once (the same numbers in every mode).
  const Array uniforms = uniform_array(Shape{rows, n}, DType::f64, 0, 1);
  const double* u = uniforms.data<double>();
  Array out = Array::empty(rank == 2 ? Shape{rows, n} : Shape{n}, DType::i64, "multinomial");
  int64_t* picks = out.data<int64_t>();
  std::vector<double> remaining(categories);
  for (int64_t r = 0; r < rows; ++r) {
    std::copy_n(weights.begin() + r * categories, categories, remaining.begin());
    for (int64_t s = 0; s < n; ++s) {
      double total = 0;
      for (double w : remaining) total += w;
      // The first category whose running sum passes u * total; rounding can
      // leave it past the end, then the last category with weight.
      const double target = u[r * n + s] * total;
      int64_t pick = -1, last_positive = -1;
      double running = 0;
      for (int64_t c = 0; c < categories; ++c) {
        if (remaining[c] <= 0) continue;
        last_positive = c;
        running += remaining[c];
        if (running > target) {
          pick = c;
          break;
        }
      }
      if (pick < 0) pick = last_positive;
      picks[r * n + s] = pick + 1;
      if (!replacement) remaining[pick] = 0;
    }
  }
  return make_tensor(probs->context.get(), std::move(out));
}

}  // namespace lazylua
