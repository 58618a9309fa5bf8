// tensor_statistics.cpp - var, std, norm, logsumexp and cumprod (sorting.h):
// compositions of differentiable ops, so their gradients are those ops'
// rules, written with care for their numerics.
#include <cmath>
#include <limits>

#include "autograd.h"
#include "sorting.h"

namespace lazylua::autograd {
namespace {

using ops::Scalar;

// Integer and bool tensors compute in f32, as mean does.
Tensor as_floating(const Tensor& a) {
  return is_floating(a->dtype) ? a : autograd::cast(a, kDefaultFloat);
}

Tensor constant_like(const Tensor& like, double value) {
  return scalar_tensor(like->context.get(), Scalar::from_double(value), like->dtype);
}

int64_t extent_of(const Tensor& a, std::optional<int> dim) {
  if (!dim) return numel(a->shape);
  return a->shape.rank() == 0 ? 1 : a->shape[*dim];
}

// root(s) with a gradient of 0 where s is 0 (where the root's own slope is
// infinite), as PyTorch's std and norm: the root is taken of 1 there and
// where() passes no gradient to the branch it does not choose. The value is
// root(s) itself everywhere (root(0) = 0).
template <typename Root>
Tensor root_with_zero_slope_at_zero(const Tensor& s, Root&& root) {
  const Tensor zero = lazylua::binary(BinaryOp::eq, s, Scalar::from_integer(0));
  const Tensor safe = autograd::where(zero, constant_like(s, 1), s);
  return autograd::where(zero, constant_like(s, 0), root(safe));
}

Tensor sqrt_with_zero_slope(const Tensor& s) {
  return root_with_zero_slope_at_zero(
      s, [](const Tensor& t) { return autograd::unary(UnaryOp::sqrt, t); });
}

// A result reduced with keepdim back to the shape without it.
Tensor drop_kept_dim(const Tensor& t, std::optional<int> dim) {
  return dim ? autograd::squeeze(t, *dim) : autograd::reshape(t, Shape{});
}

}  // namespace

Tensor var(const Tensor& a, std::optional<int> dim, double correction, bool keepdim) {
  const Tensor x = as_floating(a);
  // Two passes: the deviations from the mean, squared and summed, lose far
  // less than the sum of squares less the squared sum.
  const Tensor mean = autograd::reduce(ReduceOp::mean, x, dim, true);
  const Tensor deviation = autograd::binary(BinaryOp::sub, x, mean);
  const Tensor squares = autograd::reduce(
      ReduceOp::sum, autograd::binary(BinaryOp::mul, deviation, deviation), dim, keepdim);
  const double divisor = std::max(0.0, static_cast<double>(extent_of(a, dim)) - correction);
  return autograd::binary(BinaryOp::div, squares, Scalar::from_double(divisor));
}

Tensor standard_deviation(const Tensor& a, std::optional<int> dim, double correction,
                          bool keepdim) {
  return sqrt_with_zero_slope(var(a, dim, correction, keepdim));
}

Tensor norm(const Tensor& a, double p, std::optional<int> dim, bool keepdim) {
  const Tensor x = as_floating(a);
  const Tensor magnitude = autograd::unary(UnaryOp::abs, x);
  if (std::isinf(p)) {
    if (extent_of(x, dim) == 0) {
      // As PyTorch: max and min of nothing have no value.
      fail("norm: the {} norm of an empty {} has no value (shape {})", p > 0 ? "inf" : "-inf",
           dim ? fmt::format("dimension {}", *dim + 1) : std::string("tensor"),
           shape_string(a->shape));
    }
    // The gradient of max and min is split evenly among ties, as PyTorch's.
    return autograd::reduce(p > 0 ? ReduceOp::max : ReduceOp::min, magnitude, dim, keepdim);
  }
  if (p == 0) {
    const Tensor nonzero = lazylua::binary(BinaryOp::ne, x, Scalar::from_integer(0));
    return lazylua::reduce(ReduceOp::sum, lazylua::cast(nonzero, x->dtype), dim, keepdim);
  }
  if (p == 1) return autograd::reduce(ReduceOp::sum, magnitude, dim, keepdim);
  if (p == 2)
    return sqrt_with_zero_slope(
        autograd::reduce(ReduceOp::sum, autograd::binary(BinaryOp::mul, x, x), dim, keepdim));
  // (sum |x|^p)^(1/p) overflows for a large |p| when the norm itself is an
  // ordinary number ({1, 2} with p = 1e300 gives inf^0 = 1 in f32, not 2).
  // It is computed as s * (sum (|x|/s)^p)^(1/p), s the largest |x| of the
  // line (the smallest for p < 0): each term is at most 1 (at least 1), the
  // sum between 1 and n. The result is the same function of x for any
  // s > 0, so s carries no gradient (as logsumexp's shift). s is 1 where it
  // is 0, infinite or NaN, and for an empty line: the plain formula.
  Tensor scale = constant_like(x, 1);
  if (extent_of(x, dim) > 0) {
    const Tensor extreme = lazylua::reduce(p > 0 ? ReduceOp::max : ReduceOp::min,
                                           lazylua::unary(UnaryOp::abs, x), dim, true);
    const Tensor usable = lazylua::binary(
        BinaryOp::logical_and, lazylua::binary(BinaryOp::gt, extreme, Scalar::from_integer(0)),
        lazylua::binary(BinaryOp::lt, extreme,
                        Scalar::from_double(std::numeric_limits<double>::infinity())));
    scale = lazylua::where(usable, extreme, constant_like(x, 1));
  }
  const Tensor ratios = autograd::binary(BinaryOp::div, magnitude, scale);
  const Tensor powers = autograd::binary(BinaryOp::pow, ratios, Scalar::from_double(p));
  const Tensor root = root_with_zero_slope_at_zero(
      autograd::reduce(ReduceOp::sum, powers, dim, true), [p](const Tensor& t) {
        return autograd::binary(BinaryOp::pow, t, Scalar::from_double(1 / p));
      });
  const Tensor result = autograd::binary(BinaryOp::mul, root, scale);
  return keepdim ? result : drop_kept_dim(result, dim);
}

Tensor logsumexp(const Tensor& a, std::optional<int> dim, bool keepdim) {
  const Tensor x = as_floating(a);
  // The shift is the maximum, taken with no gradient (it cancels out), and
  // 0 where the maximum is infinite: a line of -inf gives log(0) = -inf and
  // one holding +inf gives +inf, instead of inf - inf = NaN.
  Tensor shift = constant_like(x, 0);
  if (extent_of(x, dim) > 0) {
    const Tensor top = lazylua::reduce(ReduceOp::max, x, dim, true);
    const Tensor infinite =
        lazylua::binary(BinaryOp::eq, lazylua::unary(UnaryOp::abs, top),
                        Scalar::from_double(std::numeric_limits<double>::infinity()));
    shift = lazylua::where(infinite, constant_like(x, 0), top);
  }
  const Tensor exps = autograd::unary(UnaryOp::exp, autograd::binary(BinaryOp::sub, x, shift));
  Tensor result = autograd::binary(
      BinaryOp::add,
      autograd::unary(UnaryOp::log, autograd::reduce(ReduceOp::sum, exps, dim, true)), shift);
  return keepdim ? result : drop_kept_dim(result, dim);
}

Tensor cumprod(const Tensor& a, int dim) {
  Tensor y = is_floating(a->dtype) ? a : autograd::cast(a, DType::i64);
  if (dim < 0 || dim >= std::max(a->shape.rank(), 1)) {
    fail("cumprod: dimension {} out of range for a {}-d tensor", dim + 1, a->shape.rank());
  }
  const int64_t n = a->shape.rank() == 0 ? 1 : a->shape[dim];
  // A scan of log2(n) steps (Hillis and Steele): after the step of stride s,
  // position i holds the product of the (up to) 2s elements ending at i. Each
  // step is a narrow, a multiply and a cat, so the gradient is theirs and a
  // zero needs no division.
  for (int64_t stride = 1; stride < n; stride *= 2) {
    const Tensor head = autograd::narrow(y, dim, 0, stride);
    const Tensor tail =
        autograd::binary(BinaryOp::mul, autograd::narrow(y, dim, stride, n - stride),
                         autograd::narrow(y, dim, 0, n - stride));
    y = autograd::cat({head, tail}, dim);
  }
  return y.get() == a.get() ? autograd::clone(a) : y;  // a new tensor, never an alias
}

}  // namespace lazylua::autograd
