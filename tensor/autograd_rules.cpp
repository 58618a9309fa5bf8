// autograd_rules.cpp - one gradient rule per differentiable op, written with
// the tensor ops themselves so that lazy mode records backward as well.
// x is an op's input, y its result, g the gradient of y.
#include <cmath>
#include <numeric>
#include <string_view>

#include "autograd_internal.h"

namespace lazylua::autograd {
namespace {

using Grads = std::vector<Tensor>;
using ops::Scalar;

Tensor add(const Tensor& a, const Tensor& b) {
  return lazylua::binary(BinaryOp::add, a, b);
}
Tensor sub(const Tensor& a, const Tensor& b) {
  return lazylua::binary(BinaryOp::sub, a, b);
}
Tensor mul(const Tensor& a, const Tensor& b) {
  return lazylua::binary(BinaryOp::mul, a, b);
}
Tensor div(const Tensor& a, const Tensor& b) {
  return lazylua::binary(BinaryOp::div, a, b);
}
Tensor mul(const Tensor& a, double s) {
  return lazylua::binary(BinaryOp::mul, a, Scalar::from_double(s));
}
Tensor add(const Tensor& a, double s) {
  return lazylua::binary(BinaryOp::add, a, Scalar::from_double(s));
}
Tensor rsub(double s, const Tensor& a) {
  return lazylua::binary(BinaryOp::sub, Scalar::from_double(s), a);
}
Tensor neg(const Tensor& a) {
  return lazylua::unary(UnaryOp::neg, a);
}
Tensor apply(UnaryOp op, const Tensor& a) {
  return lazylua::unary(op, a);
}
// A comparison as 0/1 in dtype.
Tensor indicator(BinaryOp op, const Tensor& a, const Tensor& b, DType dtype) {
  return lazylua::cast(lazylua::binary(op, a, b), dtype);
}
Tensor indicator(BinaryOp op, const Tensor& a, double s, DType dtype) {
  return lazylua::cast(lazylua::binary(op, a, Scalar::from_double(s)), dtype);
}
Tensor zeros(Context* c, DType dtype, const Shape& shape) {
  return filled(c, 0, dtype, shape);
}
Tensor as(const Tensor& t, DType dtype) {
  return lazylua::cast(t, dtype);
}

// g of a reduction over `dim` (all dims when none) brought back to `shape`.
Tensor unreduce(const Tensor& g, std::optional<int> dim, bool keepdim, const Shape& shape) {
  Tensor h = g;
  if (dim && !keepdim && shape.rank() > 0) h = lazylua::unsqueeze(h, *dim);
  if (!dim && h->shape.rank() != shape.rank())
    h = lazylua::reshape(h, Dims::filled(shape.rank(), 1));
  return lazylua::expand(h, shape);
}

// g placed at [start, start + extent) of dim in zeros of `shape`.
Tensor pad(Context* c, const Tensor& g, int dim, int64_t start, const Shape& shape) {
  const int64_t extent = g->shape[dim];
  std::vector<Tensor> parts;
  if (start > 0) {
    Shape before = shape;
    before[dim] = start;
    parts.push_back(zeros(c, g->dtype, before));
  }
  parts.push_back(g);
  if (start + extent < shape[dim]) {
    Shape after = shape;
    after[dim] = shape[dim] - start - extent;
    parts.push_back(zeros(c, g->dtype, after));
  }
  return parts.size() == 1 ? g : lazylua::cat(parts, dim);
}

Tensor unary_grad(UnaryOp op, Context* c, const Tensor& g, const Tensor& x, const Tensor& y) {
  const DType dt = g->dtype;
  switch (op) {
    case UnaryOp::neg:
      return neg(g);
    case UnaryOp::abs:
      return mul(g, apply(UnaryOp::sign, x));
    case UnaryOp::square:
      return mul(g, mul(x, 2.0));
    case UnaryOp::exp:
      return mul(g, y);
    case UnaryOp::expm1:
      return mul(g, add(y, 1.0));
    case UnaryOp::log:
      return div(g, x);
    case UnaryOp::log1p:
      return div(g, add(x, 1.0));
    case UnaryOp::log2:
      return div(g, mul(x, std::log(2.0)));
    case UnaryOp::sqrt:
      return div(mul(g, 0.5), y);
    case UnaryOp::rsqrt:
      return mul(mul(g, -0.5), mul(y, mul(y, y)));
    case UnaryOp::reciprocal:
      return neg(mul(g, mul(y, y)));
    case UnaryOp::sin:
      return mul(g, apply(UnaryOp::cos, x));
    case UnaryOp::cos:
      return neg(mul(g, apply(UnaryOp::sin, x)));
    case UnaryOp::tan:
      return mul(g, add(mul(y, y), 1.0));
    case UnaryOp::tanh:
      return mul(g, rsub(1.0, mul(y, y)));
    case UnaryOp::sigmoid:
      return mul(g, mul(y, rsub(1.0, y)));
    case UnaryOp::relu:
      return mul(g, indicator(BinaryOp::gt, x, 0.0, dt));
    case UnaryOp::gelu: {
      // d/dx x Phi(x) = Phi(x) + x phi(x), with Phi(x) = gelu(x) / x (1/2 at 0).
      const Tensor zero = indicator(BinaryOp::eq, x, 0.0, DType::boolean);
      const Tensor cdf = lazylua::where(zero, filled(c, 0.5, dt, x->shape), div(y, x));
      const Tensor pdf = mul(apply(UnaryOp::exp, mul(mul(x, x), -0.5)), 1 / std::sqrt(2 * M_PI));
      return mul(g, add(cdf, mul(x, pdf)));
    }
    case UnaryOp::erf:  // 2/sqrt(pi) e^(-x^2)
      return mul(g, mul(apply(UnaryOp::exp, neg(mul(x, x))), 2 / std::sqrt(M_PI)));
    case UnaryOp::erfc:
      return mul(g, mul(apply(UnaryOp::exp, neg(mul(x, x))), -2 / std::sqrt(M_PI)));
    case UnaryOp::exp2:
      return mul(g, mul(y, std::log(2.0)));
    case UnaryOp::frac:  // x - trunc(x): 1 almost everywhere
      return g;
    case UnaryOp::sign:
    case UnaryOp::floor:
    case UnaryOp::ceil:
    case UnaryOp::round:
    case UnaryOp::trunc:
      return zeros(c, dt, x->shape);
    case UnaryOp::logical_not:
      return Tensor{};  // a bool result: never differentiated
  }
  // No default above: a row of elementwise_ops.h without a rule here does
  // not compile (-Werror=switch), never a silently missing gradient.
  throw InternalError(fmt::format("no gradient rule for unary op {}", static_cast<int>(op)));
}

// Gradients of binary op (a, b) -> y, all of dtype dt; each only if wanted.
std::pair<Tensor, Tensor> binary_grad(BinaryOp op, Context* c, const Tensor& g, const Tensor& a,
                                      const Tensor& b, const Tensor& y, bool want_a, bool want_b) {
  const DType dt = g->dtype;
  Tensor ga, gb;
  switch (op) {
    case BinaryOp::add:
      ga = g, gb = g;
      break;
    case BinaryOp::sub:
      ga = g;
      if (want_b) gb = neg(g);
      break;
    case BinaryOp::mul:
      if (want_a) ga = mul(g, b);
      if (want_b) gb = mul(g, a);
      break;
    case BinaryOp::div:
      if (want_a) ga = div(g, b);
      if (want_b) gb = neg(div(mul(g, y), b));
      break;
    case BinaryOp::pow: {
      // 0^0: the exponent's 0 kills the base's gradient; a zero base gives
      // the exponent no gradient (PyTorch's conventions).
      if (want_a) {
        const Tensor d = mul(b, lazylua::binary(BinaryOp::pow, a, add(b, -1.0)));
        ga = lazylua::where(lazylua::binary(BinaryOp::eq, b, Scalar::from_double(0)),
                            zeros(c, dt, g->shape), mul(g, d));
      }
      if (want_b) {
        gb = lazylua::where(lazylua::binary(BinaryOp::eq, a, Scalar::from_double(0)),
                            zeros(c, dt, g->shape), mul(g, mul(y, apply(UnaryOp::log, a))));
      }
      break;
    }
    case BinaryOp::maximum:
    case BinaryOp::minimum: {
      // The larger (smaller) input gets the gradient; a tie splits it.
      const BinaryOp wins = op == BinaryOp::maximum ? BinaryOp::gt : BinaryOp::lt;
      const Tensor half_tie = mul(indicator(BinaryOp::eq, a, b, dt), 0.5);
      if (want_a) ga = mul(g, add(indicator(wins, a, b, dt), half_tie));
      if (want_b) gb = mul(g, add(indicator(wins, b, a, dt), half_tie));
      break;
    }
    case BinaryOp::atan2: {
      const Tensor scale = div(g, add(mul(a, a), mul(b, b)));
      if (want_a) ga = mul(scale, b);
      if (want_b) gb = neg(mul(scale, a));
      break;
    }
    case BinaryOp::mod:
      ga = g;
      if (want_b) gb = neg(mul(g, apply(UnaryOp::floor, div(a, b))));
      break;
    case BinaryOp::floordiv:
      ga = zeros(c, dt, g->shape), gb = ga;
      break;
    case BinaryOp::eq:
    case BinaryOp::ne:
    case BinaryOp::lt:
    case BinaryOp::le:
    case BinaryOp::gt:
    case BinaryOp::ge:
    case BinaryOp::logical_and:
    case BinaryOp::logical_or:
    case BinaryOp::logical_xor:
      break;  // comparisons and logic: bool results, never differentiated
  }
  return {want_a ? ga : Tensor{}, want_b ? gb : Tensor{}};
}

Tensor binary_node(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b,
                   bool a_is_scalar, bool b_is_scalar) {
  const bool want_a = !a_is_scalar && needs_grad(a), want_b = !b_is_scalar && needs_grad(b);
  if (!want_a && !want_b) return out;
  Context* c = out->context.get();
  const Saved sa = save(a), sb = save(b), sy = save(out);
  return attach(out, binary_op_name(op), {a_is_scalar ? Tensor{} : a, b_is_scalar ? Tensor{} : b},
                [=](const Tensor& g) -> Grads {
                  const DType dt = g->dtype;
                  auto [ga, gb] =
                      binary_grad(op, c, g, as(restore(c, sa), dt), as(restore(c, sb), dt),
                                  restore(c, sy), want_a, want_b);
                  return {ga, gb};
                });
}

}  // namespace

// ---- Elementwise ----

Tensor unary(UnaryOp op, const Tensor& a) {
  Tensor out = lazylua::unary(op, a);
  if (!needs_grad(a)) return out;
  Context* c = a->context.get();
  const Saved sx = save(a), sy = save(out);
  return attach(out, unary_op_name(op), {a}, [=](const Tensor& g) -> Grads {
    return {unary_grad(op, c, g, as(restore(c, sx), g->dtype), restore(c, sy))};
  });
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  return binary_node(op, lazylua::binary(op, a, b), a, b, false, false);
}

Tensor binary(BinaryOp op, const Tensor& a, Scalar b) {
  Tensor out = lazylua::binary(op, a, b);
  if (!needs_grad(a)) return out;
  const Tensor s = scalar_tensor(a->context.get(), b, out->dtype);
  return binary_node(op, out, a, s, false, true);
}

Tensor binary(BinaryOp op, Scalar a, const Tensor& b) {
  Tensor out = lazylua::binary(op, a, b);
  if (!needs_grad(b)) return out;
  const Tensor s = scalar_tensor(b->context.get(), a, out->dtype);
  return binary_node(op, out, s, b, true, false);
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  Tensor out = lazylua::where(cond, a, b);
  if (!needs_grad(a) && !needs_grad(b)) return out;
  Context* c = out->context.get();
  const Saved sc = save(cond);
  return attach(out, "where", {a, b}, [=](const Tensor& g) -> Grads {
    const Tensor mask = restore(c, sc);
    const Tensor zero = zeros(c, g->dtype, g->shape);
    return {lazylua::where(mask, g, zero), lazylua::where(mask, zero, g)};
  });
}

Tensor clamp(const Tensor& a, std::optional<Scalar> low, std::optional<Scalar> high) {
  Tensor out = lazylua::clamp(a, low, high);
  if (!needs_grad(a)) return out;
  Context* c = a->context.get();
  const Saved sx = save(a);
  return attach(out, "clamp", {a}, [=](const Tensor& g) -> Grads {
    const Tensor x = restore(c, sx);
    Tensor inside = filled(c, 1, g->dtype, g->shape);
    if (low) inside = mul(inside, lazylua::cast(lazylua::binary(BinaryOp::ge, x, *low), g->dtype));
    if (high)
      inside = mul(inside, lazylua::cast(lazylua::binary(BinaryOp::le, x, *high), g->dtype));
    return {mul(g, inside)};
  });
}

Tensor cast(const Tensor& a, DType dtype) {
  Tensor out = lazylua::cast(a, dtype);
  if (!needs_grad(a) || out.get() == a.get()) return out;
  const DType from = a->dtype;
  return attach(out, "cast", {a}, [=](const Tensor& g) -> Grads { return {as(g, from)}; });
}

Tensor clone(const Tensor& a) {
  Tensor out = lazylua::clone(a);
  return attach(out, "clone", {a}, [](const Tensor& g) -> Grads { return {g}; });
}

Tensor contiguous(const Tensor& a) {
  Tensor out = lazylua::contiguous(a);
  return attach(out, "contiguous", {a}, [](const Tensor& g) -> Grads { return {g}; });
}

// ---- Reductions, softmax, matmul ----

Tensor reduce(ReduceOp op, const Tensor& a, std::optional<int> dim, bool keepdim) {
  Tensor out = lazylua::reduce(op, a, dim, keepdim);
  if (!needs_grad(a)) return out;
  Context* c = a->context.get();
  const Shape shape = a->shape;
  const Saved sx = save(a), sy = save(out);
  const int64_t count = dim ? (shape.rank() == 0 ? 1 : shape[*dim]) : numel(shape);
  return attach(out, "reduce", {a}, [=](const Tensor& g) -> Grads {
    const Tensor spread = unreduce(g, dim, keepdim, shape);
    switch (op) {
      case ReduceOp::sum:
        return {spread};
      case ReduceOp::mean:
        return {mul(spread, 1.0 / static_cast<double>(std::max<int64_t>(count, 1)))};
      case ReduceOp::prod: {
        const Tensor y = unreduce(restore(c, sy), dim, keepdim, shape);
        return {div(mul(spread, y), restore(c, sx))};
      }
      case ReduceOp::max:
      case ReduceOp::min: {
        // Split evenly between the elements that reach the extreme.
        const Tensor x = restore(c, sx);
        const Tensor y = unreduce(restore(c, sy), dim, keepdim, shape);
        const Tensor hit = indicator(BinaryOp::eq, x, y, g->dtype);
        Tensor hits = dim ? lazylua::reduce(ReduceOp::sum, hit, dim, true)
                          : lazylua::reduce(ReduceOp::sum, hit, std::nullopt, false);
        hits = unreduce(hits, dim, true, shape);
        return {div(mul(spread, hit), hits)};
      }
      default:
        return {Tensor{}};
    }
  });
}

std::pair<Tensor, Tensor> max_min_dim(bool is_max, const Tensor& a, int dim, bool keepdim) {
  auto [values, indices] = lazylua::max_min_dim(is_max, a, dim, keepdim);
  if (!needs_grad(a)) return {values, indices};
  Context* c = a->context.get();
  const Shape shape = a->shape;
  const Saved si = save(indices);
  values = attach(values, is_max ? "max" : "min", {a}, [=](const Tensor& g) -> Grads {
    // The gradient goes to the position the index names: a one-hot mask
    // (index == 1..n along dim), elementwise, so it fuses.
    if (shape.rank() == 0) return {g};
    const int64_t extent = shape[dim];
    Array positions = ops::arange(Scalar::from_integer(1), Scalar::from_integer(extent + 1),
                                  Scalar::from_integer(1), DType::i64);
    Shape along = Dims::filled(shape.rank(), 1);
    along[dim] = extent;
    const Tensor position = lazylua::reshape(make_tensor(c, positions), along);
    const Tensor index = unreduce(restore(c, si), dim, keepdim, shape);
    const Tensor hit = indicator(BinaryOp::eq, position, index, g->dtype);
    return {mul(unreduce(g, dim, keepdim, shape), hit)};
  });
  return {values, indices};
}

Tensor softmax(const Tensor& a, int dim, bool log) {
  Tensor out = lazylua::softmax(a, dim, log);
  if (!needs_grad(a)) return out;
  Context* c = a->context.get();
  const Saved sy = save(out);
  return attach(out, log ? "log_softmax" : "softmax", {a}, [=](const Tensor& g) -> Grads {
    const Tensor y = restore(c, sy);
    if (log) {
      const Tensor total = lazylua::reduce(ReduceOp::sum, g, dim, true);
      return {sub(g, mul(apply(UnaryOp::exp, y), total))};
    }
    const Tensor dot = lazylua::reduce(ReduceOp::sum, mul(g, y), dim, true);
    return {mul(y, sub(g, dot))};
  });
}

Tensor cumsum(const Tensor& a, int dim) {
  Tensor out = lazylua::cumsum(a, dim);
  return attach(out, "cumsum", {a}, [=](const Tensor& g) -> Grads {
    // Sum over j >= i of g_j: the total, less the sum before i.
    if (g->shape.rank() == 0) return {g};
    const Tensor total = lazylua::reduce(ReduceOp::sum, g, dim, true);
    return {add(sub(total, lazylua::cumsum(g, dim)), g)};
  });
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  Tensor out = lazylua::matmul(a, b);
  const bool want_a = needs_grad(a), want_b = needs_grad(b);
  if (!want_a && !want_b) return out;
  Context* c = out->context.get();
  const Saved sa = save(a), sb = save(b);
  const Shape a_shape = a->shape, b_shape = b->shape;
  // b = W:t() (nn.Linear's weight): W's gradient is the transpose of b's,
  // so b's is computed as (h^T x)^T; the two transposes cancel and W's
  // gradient comes out of BLAS in W's own layout.
  // (A 2-D permute is a transpose too: a scan body replays transposes as such.)
  const bool b_is_transpose = b_shape.rank() == 2 && b->grad_fn &&
                              (std::string_view(b->grad_fn->name) == "transpose" ||
                               std::string_view(b->grad_fn->name) == "permute");
  return attach(out, "matmul", {a, b}, [=](const Tensor& g) -> Grads {
    // 1-D operands as matrices: a row (1, n) and a column (n, 1).
    Tensor x = as(restore(c, sa), g->dtype), w = as(restore(c, sb), g->dtype);
    if (a_shape.rank() == 1) x = lazylua::unsqueeze(x, 0);
    if (b_shape.rank() == 1) w = lazylua::unsqueeze(w, 1);
    // The result's shape before the 1-D dims were dropped.
    Shape x_batch = x->shape, w_batch = w->shape;
    x_batch.resize(x_batch.rank() - 2);
    w_batch.resize(w_batch.rank() - 2);
    Shape full = broadcast_shapes(x_batch, w_batch, "matmul");
    full.push_back(x->shape[x->shape.rank() - 2]);
    full.push_back(w->shape.back());
    const Tensor h = lazylua::reshape(g, full);
    Tensor ga, gb;
    if (want_a) {
      ga = lazylua::matmul(h, lazylua::transpose(w, w->shape.rank() - 2, w->shape.rank() - 1));
      ga = lazylua::reshape(sum_to(ga, x->shape), a_shape);
    }
    if (want_b && b_is_transpose && x->shape.rank() == 2) {
      gb = lazylua::transpose(lazylua::matmul(lazylua::transpose(h, 0, 1), x), 0, 1);
    } else if (want_b) {
      gb = lazylua::matmul(lazylua::transpose(x, x->shape.rank() - 2, x->shape.rank() - 1), h);
      gb = lazylua::reshape(sum_to(gb, w->shape), b_shape);
    }
    return {ga, gb};
  });
}

// ---- Views and joins ----

namespace {

// Views whose gradient is g reshaped back to the input's shape.
Tensor reshaped_node(const Tensor& out, const Tensor& a, const char* name) {
  const Shape shape = a->shape;
  return attach(out, name, {a},
                [=](const Tensor& g) -> Grads { return {lazylua::reshape(g, shape)}; });
}

}  // namespace

Tensor view(const Tensor& a, const Shape& shape) {
  return reshaped_node(lazylua::view(a, shape), a, "view");
}
Tensor reshape(const Tensor& a, const Shape& shape) {
  return reshaped_node(lazylua::reshape(a, shape), a, "reshape");
}
Tensor squeeze(const Tensor& a, std::optional<int> dim) {
  return reshaped_node(lazylua::squeeze(a, dim), a, "squeeze");
}
Tensor unsqueeze(const Tensor& a, int dim) {
  return reshaped_node(lazylua::unsqueeze(a, dim), a, "unsqueeze");
}
Tensor flatten(const Tensor& a, int start_dim, int end_dim) {
  return reshaped_node(lazylua::flatten(a, start_dim, end_dim), a, "flatten");
}

Tensor transpose(const Tensor& a, int dim_a, int dim_b) {
  Tensor out = lazylua::transpose(a, dim_a, dim_b);
  return attach(out, "transpose", {a},
                [=](const Tensor& g) -> Grads { return {lazylua::transpose(g, dim_a, dim_b)}; });
}

Tensor permute(const Tensor& a, const std::vector<int>& order) {
  Tensor out = lazylua::permute(a, order);
  std::vector<int> inverse(order.size());
  for (size_t d = 0; d < order.size(); d++) inverse[order[d]] = static_cast<int>(d);
  return attach(out, "permute", {a},
                [=](const Tensor& g) -> Grads { return {lazylua::permute(g, inverse)}; });
}

Tensor narrow(const Tensor& a, int dim, int64_t start, int64_t length) {
  Tensor out = lazylua::narrow(a, dim, start, length);
  Context* c = a->context.get();
  const Shape shape = a->shape;
  return attach(out, "narrow", {a},
                [=](const Tensor& g) -> Grads { return {pad(c, g, dim, start, shape)}; });
}

Tensor select(const Tensor& a, int dim, int64_t index) {
  Tensor out = lazylua::select(a, dim, index);
  Context* c = a->context.get();
  const Shape shape = a->shape;
  return attach(out, "select", {a}, [=](const Tensor& g) -> Grads {
    return {pad(c, lazylua::unsqueeze(g, dim), dim, index, shape)};
  });
}

Tensor expand(const Tensor& a, const Shape& shape) {
  Tensor out = lazylua::expand(a, shape);
  const Shape from = a->shape;
  return attach(out, "expand", {a}, [=](const Tensor& g) -> Grads { return {sum_to(g, from)}; });
}

Tensor cat(const std::vector<Tensor>& inputs, int dim) {
  Tensor out = lazylua::cat(inputs, dim);
  std::vector<int64_t> extents;
  for (const Tensor& input : inputs) extents.push_back(input->shape[dim]);
  return attach(out, "cat", inputs, [=](const Tensor& g) -> Grads {
    Grads grads;
    int64_t start = 0;
    for (int64_t extent : extents) {
      grads.push_back(lazylua::narrow(g, dim, start, extent));
      start += extent;
    }
    return grads;
  });
}

Tensor stack(const std::vector<Tensor>& inputs, int dim) {
  Tensor out = lazylua::stack(inputs, dim);
  const int64_t count = static_cast<int64_t>(inputs.size());
  return attach(out, "stack", inputs, [=](const Tensor& g) -> Grads {
    Grads grads;
    for (int64_t k = 0; k < count; k++) grads.push_back(lazylua::select(g, dim, k));
    return grads;
  });
}

Tensor gather(const Tensor& a, int dim, const Tensor& index) {
  Tensor out = lazylua::gather(a, dim, index);
  if (!needs_grad(a)) return out;
  Context* c = a->context.get();
  const Shape shape = a->shape;
  const Saved si = save(index);
  return attach(out, "gather", {a}, [=](const Tensor& g) -> Grads {
    return {lazylua::scatter_add(zeros(c, g->dtype, shape), dim, restore(c, si), g)};
  });
}

Tensor flip(const Tensor& a, const std::vector<int>& dims) {
  Tensor out = lazylua::flip(a, dims);
  if (!needs_grad(a)) return out;
  return attach(out, "flip", {a},
                [=](const Tensor& g) -> Grads { return {lazylua::flip(g, dims)}; });
}

Tensor index_select(const Tensor& a, int dim, const Tensor& index) {
  Tensor out = lazylua::index_select(a, dim, index);
  if (!needs_grad(a)) return out;
  Context* c = a->context.get();
  const Shape shape = a->shape;
  const Saved si = save(index);
  return attach(out, "index_select", {a}, [=](const Tensor& g) -> Grads {
    // Each selected slice adds back where it came from: the 1-D index
    // broadcast along the other dims is a gather index for scatter_add.
    Shape along = Dims::filled(g->shape.rank(), 1);
    along[dim] = g->shape[dim];
    const Tensor spread = lazylua::expand(lazylua::reshape(restore(c, si), along), g->shape);
    return {lazylua::scatter_add(zeros(c, g->dtype, shape), dim, spread, g)};
  });
}

Tensor scatter_add(const Tensor& base, int dim, const Tensor& index, const Tensor& src) {
  Tensor out = lazylua::scatter_add(base, dim, index, src);
  Context* c = out->context.get();
  const Saved si = save(index);
  const Shape src_shape = src->shape;
  return attach(out, "scatter_add", {base, src}, [=](const Tensor& g) -> Grads {
    // Each src element was added at one position: its gradient is read
    // back from there; a src larger than the index gets zeros elsewhere.
    const Tensor index_value = restore(c, si);
    Tensor gs = lazylua::gather(g, dim, index_value);
    for (int d = 0; d < src_shape.rank(); d++) {
      if (gs->shape[d] < src_shape[d]) {
        Shape padded = gs->shape;
        padded[d] = src_shape[d];
        gs = pad(c, gs, d, 0, padded);
      }
    }
    return {g, gs};
  });
}

// ---- Convolution and pooling ----

Tensor conv2d(const Tensor& x, const Tensor& weight, const Window2d& window) {
  Tensor out = lazylua::conv2d(x, weight, window);
  const bool want_x = needs_grad(x), want_w = needs_grad(weight);
  if (!want_x && !want_w) return out;
  Context* c = out->context.get();
  const Saved sx = want_w ? save(x) : Saved{}, sw = want_x ? save(weight) : Saved{};
  const Shape x_shape = x->shape, w_shape = weight->shape;
  return attach(out, "conv2d", {x, weight}, [=](const Tensor& g) -> Grads {
    Tensor gx, gw;
    if (want_x) gx = lazylua::conv2d_grad_input(g, restore(c, sw), x_shape, window);
    if (want_w) gw = lazylua::conv2d_grad_weight(g, restore(c, sx), w_shape, window);
    return {gx, gw};
  });
}

Tensor max_pool2d(const Tensor& x, const Window2d& window) {
  Tensor out = lazylua::max_pool2d(x, window);
  if (!needs_grad(x)) return out;
  Context* c = out->context.get();
  const Saved sx = save(x);
  return attach(out, "max_pool2d", {x}, [=](const Tensor& g) -> Grads {
    return {lazylua::max_pool2d_grad(g, restore(c, sx), window)};
  });
}

}  // namespace lazylua::autograd
