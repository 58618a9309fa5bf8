// autograd_rules.cpp - the gradient rules, one table keyed by IR op
// (kRows), written with the tensor ops themselves so that lazy mode records
// backward as well. x is an op's input, y its result, g the gradient of y.
// The table has a row for every IR op (static_assert) and the switches over
// UnaryOp, BinaryOp and ReduceOp have no `default:` (-Werror=switch): an op
// without a rule does not compile, and an op without a gradient is listed
// as such.
#include <algorithm>
#include <cmath>
#include <iterator>

#include "autograd_internal.h"

namespace lazylua::autograd {
namespace {

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

// ---- What a rule reads from its node ----

// Input k's value, saved when the op ran.
Tensor input(const GradNode& node, const Tensor& g, int k) {
  return restore(g->context.get(), node.saved[static_cast<size_t>(k)]);
}
Tensor result(const GradNode& node, const Tensor& g) {
  return restore(g->context.get(), node.result);
}
const Shape& input_shape(const GradNode& node, int k) {
  return node.saved[static_cast<size_t>(k)].shape;
}
// Input k needs a gradient.
bool wants(const GradNode& node, int k) {
  return static_cast<bool>(node.inputs[static_cast<size_t>(k)]);
}
int64_t attr(const GradNode& node, int k) {
  return node.call.attrs.values[k];
}
int dim_attr(const GradNode& node, int k) {
  return static_cast<int>(attr(node, k));
}

[[noreturn]] void no_gradient(const char* name) {
  throw InternalError(fmt::format("autograd: '{}' has a bool result and no gradient", name));
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

// ---- Elementwise: one case per row of kernels/elementwise_ops.h ----

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
    case UnaryOp::asin:  // 1 / sqrt(1 - x^2)
      return mul(g, apply(UnaryOp::rsqrt, rsub(1.0, mul(x, x))));
    case UnaryOp::acos:
      return neg(mul(g, apply(UnaryOp::rsqrt, rsub(1.0, mul(x, x)))));
    case UnaryOp::atan:  // 1 / (1 + x^2)
      return div(g, add(mul(x, x), 1.0));
    case UnaryOp::sinh:
      return mul(g, apply(UnaryOp::cosh, x));
    case UnaryOp::cosh:
      return mul(g, apply(UnaryOp::sinh, x));
    case UnaryOp::asinh:  // 1 / sqrt(x^2 + 1)
      return mul(g, apply(UnaryOp::rsqrt, add(mul(x, x), 1.0)));
    case UnaryOp::acosh:  // 1 / sqrt(x^2 - 1)
      return mul(g, apply(UnaryOp::rsqrt, add(mul(x, x), -1.0)));
    case UnaryOp::atanh:  // 1 / (1 - x^2)
      return div(g, rsub(1.0, mul(x, x)));
    case UnaryOp::log10:
      return div(g, mul(x, std::log(10.0)));
    case UnaryOp::sign:
    case UnaryOp::floor:
    case UnaryOp::ceil:
    case UnaryOp::round:
    case UnaryOp::trunc:
      return zeros(c, dt, x->shape);
    case UnaryOp::logical_not:
    case UnaryOp::isnan:
    case UnaryOp::isinf:
    case UnaryOp::isfinite:
      no_gradient(unary_op_name(op));
  }
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
      no_gradient(binary_op_name(op));
  }
  return {want_a ? ga : Tensor{}, want_b ? gb : Tensor{}};
}

Grads unary_rule(const GradNode& node, const Tensor& g) {
  const auto op = static_cast<UnaryOp>(node.call.sub_op);
  return {unary_grad(op, g->context.get(), g, as(input(node, g, 0), g->dtype), result(node, g))};
}

// A Lua number operand is an input that wants no gradient (autograd_ops.cpp).
Grads binary_rule(const GradNode& node, const Tensor& g) {
  const DType dt = g->dtype;
  auto [ga, gb] = binary_grad(static_cast<BinaryOp>(node.call.sub_op), g->context.get(), g,
                              as(input(node, g, 0), dt), as(input(node, g, 1), dt), result(node, g),
                              wants(node, 0), wants(node, 1));
  return {ga, gb};
}

// (cond, a, b): cond is bool and has none.
Grads where_rule(const GradNode& node, const Tensor& g) {
  const Tensor mask = input(node, g, 0);
  const Tensor zero = zeros(g->context.get(), g->dtype, g->shape);
  return {Tensor{}, lazylua::where(mask, g, zero), lazylua::where(mask, zero, g)};
}

Grads cast_rule(const GradNode& node, const Tensor& g) {
  return {as(g, node.saved[0].dtype)};
}

// (x, low, high): 1 inside and on the bounds. The bounds are compared in
// x's dtype, as clamp compares (autograd_ops.cpp saves them so; a scan body
// has them as its inputs, Lua numbers in i64 or f64).
Grads clamp_rule(const GradNode& node, const Tensor& g) {
  const Tensor x = input(node, g, 0);
  auto bound = [&](int k) { return as(input(node, g, k), x->dtype); };
  Tensor inside = filled(g->context.get(), 1, g->dtype, g->shape);
  if (node.call.sub_op & 1) inside = mul(inside, indicator(BinaryOp::ge, x, bound(1), g->dtype));
  if (node.call.sub_op & 2) inside = mul(inside, indicator(BinaryOp::le, x, bound(2), g->dtype));
  return {mul(g, inside), Tensor{}, Tensor{}};
}

// ---- Reductions, softmax, matmul ----

// max(dim) and min(dim) (autograd_ops.cpp): the gradient goes to the
// position the index (input 1) names: a one-hot mask (index == 1..n along
// dim), elementwise, so it fuses.
Tensor to_index(const GradNode& node, const Tensor& g, int dim, bool keepdim) {
  const Shape& shape = input_shape(node, 0);
  if (shape.rank() == 0) return g;
  // (An empty input needs no positions: 8 TB for a dim of 2^40 next to a 0.)
  if (numel(shape) == 0) return unreduce(g, dim, keepdim, shape);
  const int64_t extent = shape[dim];
  Array positions = ops::arange(Scalar::from_integer(1), Scalar::from_integer(extent + 1),
                                Scalar::from_integer(1), DType::i64);
  Shape along = Dims::filled(shape.rank(), 1);
  along[dim] = extent;
  const Tensor position = lazylua::reshape(make_tensor(g->context.get(), positions), along);
  const Tensor index = unreduce(input(node, g, 1), dim, keepdim, shape);
  const Tensor hit = indicator(BinaryOp::eq, position, index, g->dtype);
  return mul(unreduce(g, dim, keepdim, shape), hit);
}

Grads reduce_rule(const GradNode& node, const Tensor& g) {
  const auto op = static_cast<ReduceOp>(node.call.sub_op);
  const std::optional<int> dim =
      attr(node, 0) < 0 ? std::nullopt : std::optional<int>(dim_attr(node, 0));
  const bool keepdim = attr(node, 1) != 0;
  if (node.saved.size() == 2) return {to_index(node, g, *dim, keepdim), Tensor{}};
  const Shape& shape = input_shape(node, 0);
  const int64_t count = dim ? (shape.rank() == 0 ? 1 : shape[*dim]) : numel(shape);
  const Tensor spread = unreduce(g, dim, keepdim, shape);
  switch (op) {
    case ReduceOp::sum:
      return {spread};
    case ReduceOp::mean:
      return {mul(spread, 1.0 / static_cast<double>(std::max<int64_t>(count, 1)))};
    case ReduceOp::prod: {
      const Tensor y = unreduce(result(node, g), dim, keepdim, shape);
      return {div(mul(spread, y), input(node, g, 0))};
    }
    case ReduceOp::max:
    case ReduceOp::min: {
      // Split evenly between the elements that reach the extreme.
      const Tensor x = input(node, g, 0);
      const Tensor y = unreduce(result(node, g), dim, keepdim, shape);
      const Tensor hit = indicator(BinaryOp::eq, x, y, g->dtype);
      Tensor hits = dim ? lazylua::reduce(ReduceOp::sum, hit, dim, true)
                        : lazylua::reduce(ReduceOp::sum, hit, std::nullopt, false);
      hits = unreduce(hits, dim, true, shape);
      return {div(mul(spread, hit), hits)};
    }
    case ReduceOp::any:
    case ReduceOp::all:
      no_gradient(reduce_op_name(op));
  }
  throw InternalError(fmt::format("no gradient rule for reduce op {}", static_cast<int>(op)));
}

Grads softmax_rule(const GradNode& node, const Tensor& g) {
  const int dim = dim_attr(node, 0);
  const Tensor y = result(node, g);
  if (attr(node, 1) != 0) {  // log_softmax
    const Tensor total = lazylua::reduce(ReduceOp::sum, g, dim, true);
    return {sub(g, mul(apply(UnaryOp::exp, y), total))};
  }
  const Tensor dot = lazylua::reduce(ReduceOp::sum, mul(g, y), dim, true);
  return {mul(y, sub(g, dot))};
}

Grads cumsum_rule(const GradNode& node, const Tensor& g) {
  // Sum over j >= i of g_j: the total, less the sum before i.
  if (g->shape.rank() == 0) return {g};
  const int dim = dim_attr(node, 0);
  const Tensor total = lazylua::reduce(ReduceOp::sum, g, dim, true);
  return {add(sub(total, lazylua::cumsum(g, dim)), g)};
}

Grads matmul_rule(const GradNode& node, const Tensor& g) {
  const Shape& a_shape = input_shape(node, 0);
  const Shape& b_shape = input_shape(node, 1);
  const bool want_a = wants(node, 0), want_b = wants(node, 1);
  // b = W:t() (nn.Linear's weight), a permute with a gradient history: W's
  // gradient is the transpose of b's, so b's is computed as (h^T x)^T; the
  // two transposes cancel and W's gradient comes out of BLAS in W's own
  // layout.
  const bool b_is_transpose = want_b && b_shape.rank() == 2 && node.inputs[1]->grad_fn &&
                              node.inputs[1]->grad_fn->call.op == Op::permute;
  // 1-D operands as matrices: a row (1, n) and a column (n, 1).
  Tensor x = as(input(node, g, 0), g->dtype), w = as(input(node, g, 1), g->dtype);
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
}

// ---- Views and joins ----

Grads reshape_rule(const GradNode& node, const Tensor& g) {
  return {lazylua::reshape(g, input_shape(node, 0))};
}

Grads permute_rule(const GradNode& node, const Tensor& g) {
  std::vector<int> inverse(static_cast<size_t>(input_shape(node, 0).rank()));
  for (size_t d = 0; d < inverse.size(); d++) inverse[dim_attr(node, static_cast<int>(d))] = d;
  return {lazylua::permute(g, inverse)};
}

Grads slice_rule(const GradNode& node, const Tensor& g) {
  return {pad(g->context.get(), g, dim_attr(node, 0), attr(node, 1), input_shape(node, 0))};
}

Grads select_rule(const GradNode& node, const Tensor& g) {
  const int dim = dim_attr(node, 0);
  return {
      pad(g->context.get(), lazylua::unsqueeze(g, dim), dim, attr(node, 1), input_shape(node, 0))};
}

Grads expand_rule(const GradNode& node, const Tensor& g) {
  return {sum_to(g, input_shape(node, 0))};
}

Grads cat_rule(const GradNode& node, const Tensor& g) {
  const int dim = dim_attr(node, 0);
  Grads grads;
  int64_t start = 0;
  for (const Saved& part : node.saved) {
    grads.push_back(lazylua::narrow(g, dim, start, part.shape[dim]));
    start += part.shape[dim];
  }
  return grads;
}

// (x, index)
Grads gather_rule(const GradNode& node, const Tensor& g) {
  const Tensor base = zeros(g->context.get(), g->dtype, input_shape(node, 0));
  return {lazylua::scatter_add(base, dim_attr(node, 0), input(node, g, 1), g), Tensor{}};
}

// (x, index)
Grads index_select_rule(const GradNode& node, const Tensor& g) {
  // Each selected slice adds back where it came from: the 1-D index
  // broadcast along the other dims is a gather index for scatter_add.
  const int dim = dim_attr(node, 0);
  Shape along = Dims::filled(g->shape.rank(), 1);
  along[dim] = g->shape[dim];
  const Tensor spread = lazylua::expand(lazylua::reshape(input(node, g, 1), along), g->shape);
  const Tensor base = zeros(g->context.get(), g->dtype, input_shape(node, 0));
  return {lazylua::scatter_add(base, dim, spread, g), Tensor{}};
}

// (base, index, src)
Grads scatter_add_rule(const GradNode& node, const Tensor& g) {
  // Each src element was added at one position: its gradient is read
  // back from there; a src larger than the index gets zeros elsewhere.
  const Shape& src_shape = input_shape(node, 2);
  Tensor gs = lazylua::gather(g, dim_attr(node, 0), input(node, g, 1));
  for (int d = 0; d < src_shape.rank(); d++) {
    if (gs->shape[d] < src_shape[d]) {
      Shape padded = gs->shape;
      padded[d] = src_shape[d];
      gs = pad(g->context.get(), gs, d, 0, padded);
    }
  }
  return {g, Tensor{}, gs};
}

// ---- Convolution and pooling ----

ConvWindow conv_window(const GradNode& node) {
  return ops::conv_window_from_attrs(node.call.sub_op, node.call.attrs.values);
}

// A bias's gradient: g [N, C, spatial...] summed to [C].
Tensor bias_gradient(const GradNode& node, const Tensor& g) {
  if (node.inputs.size() < 3 || !wants(node, 2)) return Tensor{};
  Tensor sum = g;
  for (int d = g->shape.rank() - 1; d >= 2; d--) {
    sum = lazylua::reduce(ReduceOp::sum, sum, d, false);
  }
  return lazylua::reduce(ReduceOp::sum, sum, 0, false);
}

// (x, weight [, bias])
Grads conv_rule(const GradNode& node, const Tensor& g) {
  const ConvWindow window = conv_window(node);
  Tensor gx, gw;
  if (wants(node, 0)) {
    gx = lazylua::conv_grad_input(g, input(node, g, 1), nullptr, input_shape(node, 0), window);
  }
  if (wants(node, 1)) {
    gw = lazylua::conv_grad_weight(g, input(node, g, 0), input_shape(node, 1), window);
  }
  Grads grads{gx, gw};
  if (node.inputs.size() > 2) grads.push_back(bias_gradient(node, g));
  return grads;
}

// The transposed convolution (x, weight [, bias]): its adjoint in x is the
// convolution, cut back to x's extents (an output_padding of at least the
// stride gives the convolution more positions than x has).
Grads conv_grad_input_rule(const GradNode& node, const Tensor& g) {
  const ConvWindow window = conv_window(node);
  const Shape& x_shape = input_shape(node, 0);
  Tensor gx, gw;
  if (wants(node, 0)) {
    gx = lazylua::conv(g, input(node, g, 1), nullptr, window);
    for (int d = 2; d < x_shape.rank(); d++) {
      if (gx->shape[d] > x_shape[d]) gx = lazylua::narrow(gx, d, 0, x_shape[d]);
    }
  }
  if (wants(node, 1)) {
    gw = lazylua::conv_grad_weight(input(node, g, 0), g, input_shape(node, 1), window);
  }
  Grads grads{gx, gw};
  if (node.inputs.size() > 2) grads.push_back(bias_gradient(node, g));
  return grads;
}

Grads max_pool2d_rule(const GradNode& node, const Tensor& g) {
  const Window2d window = ops::window_from_attrs(node.call.attrs.values);
  return {lazylua::max_pool2d_grad(g, input(node, g, 0), window)};
}

// The table: one row an IR op, in the order of LAZYLUA_IR_OPS (checked
// below, so a new op without a row does not compile), with the values its
// rule reads (saved when the op runs: input k as in<k>, the result as out) and
// the rule.
constexpr uint32_t in0 = saves_input(0), in1 = saves_input(1), in2 = saves_input(2);
constexpr uint32_t out = kSavesResult;
using enum GradKind;
struct Row {
  Op op;
  GradRule rule;
};
// clang-format off
constexpr Row kRows[] = {
  // Leaves have no inputs.
  {Op::parameter,          {none}},
  {Op::scalar,             {none}},
  {Op::constant,           {none}},
  {Op::unary,              {differentiable, in0 | out, unary_rule}},
  {Op::binary,             {differentiable, in0 | in1 | out, binary_rule}},
  {Op::where,              {differentiable, in0, where_rule}},
  {Op::cast,               {differentiable, 0, cast_rule}},
  {Op::clamp,              {differentiable, in0 | in1 | in2, clamp_rule}},
  // Input 1: the indices of max(dim) and min(dim).
  {Op::reduce,             {differentiable, in0 | in1 | out, reduce_rule}},
  {Op::arg_reduce,         {none}},  // an index is an integer
  {Op::softmax,            {differentiable, out, softmax_rule}},
  {Op::cumsum,             {differentiable, 0, cumsum_rule}},
  {Op::matmul,             {differentiable, in0 | in1, matmul_rule}},
  {Op::reshape,            {differentiable, 0, reshape_rule}},
  {Op::permute,            {differentiable, 0, permute_rule}},
  {Op::slice,              {differentiable, 0, slice_rule}},
  {Op::select,             {differentiable, 0, select_rule}},
  {Op::expand,             {differentiable, 0, expand_rule}},
  // Writes through views are in place: check_in_place refuses them when
  // they would need a gradient.
  {Op::slice_update,       {unsupported}},
  {Op::select_update,      {unsupported}},
  {Op::cat,                {differentiable, 0, cat_rule}},
  {Op::gather,             {differentiable, in1, gather_rule}},
  {Op::index_select,       {differentiable, in1, index_select_rule}},
  {Op::scatter_add,        {differentiable, in1, scatter_add_rule}},
  {Op::conv,               {differentiable, in0 | in1, conv_rule}},
  // conv_grad_input is also the transposed convolution; the weight
  // gradient's own gradient (a second derivative) is not supported.
  {Op::conv_grad_input,    {differentiable, in0 | in1, conv_grad_input_rule}},
  {Op::conv_grad_weight,   {unsupported}},
  {Op::max_pool2d,         {differentiable, in0, max_pool2d_rule}},
  {Op::max_pool2d_grad,    {unsupported}},
  {Op::argsort,            {none}},  // positions are integers
  {Op::collective,         {none}},  // dist: gradients are averaged, never differentiated
  // A scan's gradient is a reverse scan, attached whole by scan_grad.cpp.
  {Op::scan,               {unsupported}},
  {Op::scan_output,        {unsupported}},
};
// clang-format on

constexpr bool rows_follow_ops() {
  for (int k = 0; k < kOpCount; k++) {
    if (kRows[k].op != static_cast<Op>(k)) return false;
  }
  return true;
}
static_assert(std::size(kRows) == kOpCount, "an IR op without a gradient row");
static_assert(rows_follow_ops(), "gradient rows out of the order of LAZYLUA_IR_OPS");

}  // namespace

GradRule gradient_rule(Op op) {
  return kRows[static_cast<int>(op)].rule;
}

}  // namespace lazylua::autograd
