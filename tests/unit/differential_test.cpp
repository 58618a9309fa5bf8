// differential_test.cpp - the reference tier and the compiled tier give the same bits (issue 13).
//
// Seeded random programs over every IR op, every row of the elementwise op
// table and every reduction, in every dtype each accepts, run by the
// reference executor (the graph walked with the eager kernels: what
// LAZYLUA_COMPILE=off and a graph's first runs use) and by the native
// executor in sync mode (generated C: LAZYLUA_COMPILE=sync). Every output
// must have the same bits in both, with no tolerance: both tiers use one
// math library (kernel_math.h) and one reduction order (reduce_order.h).
// The one exception is NaN: any NaN equals any NaN (which operand's NaN a
// binary op returns is the machine's and the C compiler's choice; see
// test_math_bitwise.lua).
//
// Many programs go into one graph, so one C compile covers many ops. The
// test counts which ops the graphs held, from the op tables themselves
// (LAZYLUA_IR_OPS, the elementwise X-macros, LAZYLUA_REDUCE_OPS), and fails
// if one never appeared: a new row without a case here fails.
//
// Some ops run on the eager kernels in the compiled tier too, so their bits
// agree by construction and the test checks how their results are placed:
// matmul (the same BLAS call), conv, max_pool2d, their gradients, argsort
// (library steps), softmax over a dim other than the last and scatter_add
// with partial lines (reference steps; the test prints how many ran).
//
// LAZYLUA_TEST_DIFFERENTIAL_GRAPHS sets the least number of graphs (default
// 6; more, up to four times as many, while some kind has not come up) and
// LAZYLUA_TEST_SEED the seed. On a difference the failure names the first
// node whose value differs when every node is an output.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "compiler/disk_cache.h"
#include "compiler/native_executor.h"
#include "tensor/collectives.h"
#include "tensor/scan.h"
#include "tensor/sorting.h"
#include "tensor/tensor.h"

namespace lazylua {
namespace {

// ---- Coverage, keyed by names made from the op tables ----

// What a node counts as: its op, and for the ops with a sub-op table the
// row and the dtype it computes in.
std::string coverage_name(const Node& node) {
  const std::string op = op_name(node.op);
  switch (node.op) {
    case Op::unary: {
      const auto sub = static_cast<UnaryOp>(node.sub_op);
      // logical_not computes in its input's dtype; the others in the result's.
      const DType compute =
          traits(sub).result == OpResult::boolean ? node.inputs[0]->dtype : node.dtype;
      return op + " " + unary_op_name(sub) + " " + dtype_name(compute);
    }
    case Op::binary: {
      const auto sub = static_cast<BinaryOp>(node.sub_op);
      const DType compute = traits(sub).result == OpResult::boolean
                                ? promote(node.inputs[0]->dtype, node.inputs[1]->dtype)
                                : node.dtype;
      return op + " " + binary_op_name(sub) + " " + dtype_name(compute);
    }
    case Op::reduce:
      return op + " " + reduce_op_name(static_cast<ReduceOp>(node.sub_op)) + " " +
             dtype_name(node.inputs[0]->dtype);
    case Op::arg_reduce:
      return op + (node.sub_op ? " max" : " min");
    case Op::softmax:
      return op + (node.attrs[1] ? " log" : "");
    case Op::clamp:
      return op + (node.sub_op == 1 ? " low" : node.sub_op == 2 ? " high" : " both");
    default:
      return op;
  }
}

void count_nodes(const Graph& graph, std::map<std::string, int>& seen) {
  for (const Node* node : graph.nodes) {
    seen[coverage_name(*node)]++;
    if (node->op == Op::scan) count_nodes(node->body->graph, seen);
  }
}

// Every name a graph can hold: each IR op, and each unary, binary and
// reduce row in each dtype it computes in, found by recording the op on
// a tensor of each dtype (pair of dtypes) and naming the node it makes.
std::set<std::string> required_names() {
  std::set<std::string> names;
  for (int op = 0; op < kOpCount; op++) names.insert(op_name(static_cast<Op>(op)));
  names.erase(op_name(Op::unary));
  names.erase(op_name(Op::binary));
  names.erase(op_name(Op::reduce));
  names.erase(op_name(Op::arg_reduce));
  names.erase(op_name(Op::softmax));
  names.erase(op_name(Op::clamp));
  for (const char* variant : {"arg_reduce max", "arg_reduce min", "softmax", "softmax log",
                              "clamp low", "clamp high", "clamp both"}) {
    names.insert(variant);
  }
  const Ref<Context> context = make_ref<Context>();
  auto tensor_of = [&](DType dtype) {
    return make_tensor(context.get(), Array::empty({2}, dtype));
  };
  auto name_made = [&](const Tensor& t, Op op) {
    const Graph graph = context->extract({t.get()});
    for (const Node* node : graph.nodes) {
      if (node->op == op) names.insert(coverage_name(*node));
    }
  };
  auto attempt = [](auto&& record) {
    try {
      record();
    } catch (const Error&) {
      // Not a combination the op accepts.
    }
  };
  for (int a = 0; a < kDTypeCount; a++) {
    const Tensor x = tensor_of(static_cast<DType>(a));
    for (int op = 0; op < kUnaryOpCount; op++) {
      attempt([&] { name_made(unary(static_cast<UnaryOp>(op), x), Op::unary); });
    }
    for (int op = 0; op < kReduceOpCount; op++) {
      attempt([&] {
        name_made(reduce(static_cast<ReduceOp>(op), x, std::nullopt, false), Op::reduce);
      });
    }
    for (int b = 0; b < kDTypeCount; b++) {
      const Tensor y = tensor_of(static_cast<DType>(b));
      for (int op = 0; op < kBinaryOpCount; op++) {
        attempt([&] { name_made(binary(static_cast<BinaryOp>(op), x, y), Op::binary); });
      }
    }
  }
  return names;
}

// ---- Values ----

// Values spread over [-3, 3] (integers: whole numbers) with, one time in
// six, a special one: signed zeros, infinities, NaN, halves (rounding),
// subnormals, huge values, and the integer extremes (wrapping).
Array random_array(const Shape& shape, DType dtype, std::mt19937& rng) {
  // Drawn as doubles and as integers; the dtype's values come from one or
  // the other (i64 to i32 wraps, f64 to f32 rounds, bools are v > 0).
  Array reals = Array::empty(shape, DType::f64), integers = Array::empty(shape, DType::i64);
  std::uniform_real_distribution<double> uniform(-3, 3);
  const double inf = std::numeric_limits<double>::infinity();
  const double kFloatSpecials[] = {0.0,   -0.0,   0.5,  -0.5,  2.5,   -2.5, inf,    -inf,     NAN,
                                   1e-40, -3e-39, 1e30, -1e30, 1e300, 88.5, -104.0, 1e7 + 0.5};
  const int64_t kIntSpecials[] = {0,         -1,        INT32_MAX, INT32_MIN,
                                  INT64_MAX, INT64_MIN, 1 << 20,   -(1 << 20)};
  for (int64_t i = 0; i < reals.numel(); i++) {
    const bool special = rng() % 6 == 0;
    const double v = special ? kFloatSpecials[rng() % std::size(kFloatSpecials)] : uniform(rng);
    reals.data<double>()[i] = v;
    integers.data<int64_t>()[i] =
        special ? kIntSpecials[rng() % std::size(kIntSpecials)] : std::lround(v);
  }
  if (dtype == DType::boolean)
    return ops::binary(BinaryOp::gt, reals, ops::Scalar::from_integer(0));
  return contiguous(ops::cast(is_floating(dtype) ? reals : integers, dtype));
}

// 1-based positions below `extent`, as gather, index_select and
// scatter_add read them.
Array random_index(const Shape& shape, int64_t extent, std::mt19937& rng) {
  Array a = Array::empty(shape, DType::i64);
  for (int64_t i = 0; i < a.numel(); i++) a.data<int64_t>()[i] = 1 + rng() % extent;
  return a;
}

// ---- Programs ----

// Records one random program with the lazy API and returns its outputs.
// Each step applies a random op to recent or older values of the program
// (any dtype, any shape the op accepts); a combination the op layer
// rejects is retried with another. Programs never fail at run time: an
// integer divisor is made nonzero and an integer exponent nonnegative, and
// indices are in range, since a failing graph would not compare the tiers.
class RandomProgram {
 public:
  // `wanted`: the node names not made yet in this run (required_names()).
  RandomProgram(Context* context, std::mt19937& rng, std::set<std::string>& wanted)
      : context_(context), rng_(rng), wanted_(wanted) {
    // Mostly small, sometimes big enough for chunked and threaded loops
    // and the blocks and partials of reductions.
    const bool big = chance(8);
    rows_ = 1 + pick(big ? 70 : 6);
    cols_ = 1 + pick(big ? 2500 : 9);
    const int inputs = 2 + pick(3);
    for (int i = 0; i < inputs; i++) pool_.push_back(input(random_shape(), random_dtype()));
    const int steps = 4 + pick(10);
    for (int i = 0; i < steps; i++) step_with_retries();
  }

  // The last values, and some earlier ones (each value is an output once
  // at most, so fusion still has intermediate values to fuse).
  std::vector<Tensor> outputs() {
    std::vector<Tensor> result;
    for (size_t i = 0; i < pool_.size(); i++) {
      const bool wanted = std::find(firsts_.begin(), firsts_.end(), pool_[i]) != firsts_.end();
      if (i + 3 >= pool_.size() || wanted || chance(25)) result.push_back(pool_[i]);
    }
    return result;
  }

 private:
  int pick(int n) { return static_cast<int>(rng_() % static_cast<unsigned>(n)); }
  bool chance(int percent) { return pick(100) < percent; }
  DType random_float() { return chance(70) ? DType::f32 : DType::f64; }
  DType random_dtype() {
    const DType kWeighted[] = {DType::f32, DType::f32, DType::f64,    DType::i32,
                               DType::i64, DType::f32, DType::boolean};
    return kWeighted[pick(std::size(kWeighted))];
  }
  Shape random_shape() {
    const Shape kShapes[] = {
        {rows_, cols_}, {rows_, cols_},    {cols_},        {rows_, 1},    {1, cols_},      {},
        {cols_, rows_}, {2, rows_, cols_}, {rows_, cols_}, {3, 1, cols_}, {2, 2, 1, cols_}};
    return kShapes[pick(std::size(kShapes))];
  }
  Tensor input(const Shape& shape, DType dtype) {
    return make_tensor(context_, random_array(shape, dtype, rng_));
  }
  const Tensor& any() { return pool_[pick(pool_.size())]; }
  const Tensor& recent() { return pool_[pool_.size() - 1 - pick(std::min<int>(3, pool_.size()))]; }
  ops::Scalar random_number() {
    const double kNumbers[] = {0, 1, 2, -1, 3, 0.5, -2.25, 3.75, 7, 1e10, -0.0};
    const double v = kNumbers[pick(std::size(kNumbers))];
    return v == std::floor(v) && std::fabs(v) < 100 && chance(70)
               ? ops::Scalar::from_integer(static_cast<int64_t>(v))
               : ops::Scalar::from_double(v);
  }
  // Positions into an extent, i64 or (cast lazily) i32.
  Tensor index(const Shape& shape, int64_t extent) {
    const Tensor positions = make_tensor(context_, random_index(shape, extent, rng_));
    return chance(30) ? cast(positions, DType::i32) : positions;
  }
  // An index for gather or scatter_add into `shape` along `dim`: up to
  // `most` positions along dim; the other extents at most shape's, and half
  // the time equal to them (whole lines, which the compiler's scatter needs).
  Tensor index_for(const Shape& shape, int dim, int most) {
    Shape index_shape = shape;
    const bool whole_lines = chance(50);
    for (int d = 0; d < shape.rank(); d++) {
      if (d == dim) {
        index_shape[d] = 1 + pick(most);
      } else if (!whole_lines) {
        index_shape[d] = 1 + pick(shape[d]);
      }
    }
    return index(index_shape, shape[dim]);
  }

  // A float value of the pool, or a new input.
  Tensor float_value(const Shape& shape) {
    const Tensor& x = any();
    if (is_floating(x->dtype) && x->shape == shape && chance(60)) return x;
    return input(shape, random_float());
  }

  // Integer floor division and remainder by zero, and negative integer
  // powers, raise errors: such an operand becomes |y| + 1 or clamp(y, 0, 4)
  // (|INT_MIN| + 1 is not zero either).
  static bool integer_compute(BinaryOp op, DType promoted) {
    return !is_floating(ops::binary_compute_dtype(op, promoted));
  }
  static Tensor safe_right(BinaryOp op, const Tensor& y) {
    if (op == BinaryOp::pow) {
      return clamp(y, ops::Scalar::from_integer(0), ops::Scalar::from_integer(4));
    }
    return binary(BinaryOp::add, unary(UnaryOp::abs, y), ops::Scalar::from_integer(1));
  }
  static bool may_fail(BinaryOp op) { return traits(op).int_errors == OpIntErrors::may_fail; }

  // A NaN, an infinity or a float out of range has no integer value (an
  // error): a float headed for an integer dtype is made finite and small
  // first (NaN becomes 0).
  Tensor convertible(const Tensor& x, DType to) {
    if (!is_floating(x->dtype) || is_floating(to)) return x;
    const Tensor bounded = clamp(x, ops::Scalar::from_double(-1e6), ops::Scalar::from_double(1e6));
    return where(binary(BinaryOp::eq, x, x), bounded,
                 scalar_tensor(context_, ops::Scalar::from_integer(0), x->dtype));
  }

  const Tensor& operand() { return chance(60) ? recent() : any(); }

  // A binary op of x and y, or of x and a number when y is empty.
  Tensor binary_step(const Tensor& x, const std::optional<Tensor>& y) {
    const auto op = static_cast<BinaryOp>(pick(kBinaryOpCount));
    if (y) {
      const bool integer = integer_compute(op, promote(x->dtype, (*y)->dtype));
      return binary(op, x, may_fail(op) && integer ? safe_right(op, *y) : *y);
    }
    ops::Scalar n = random_number();
    const bool integer = integer_compute(op, promote_with_scalar(x->dtype, n.is_integer));
    if (chance(50)) {
      if (may_fail(op) && integer && n.integer <= 0) n = ops::Scalar::from_integer(3);
      return binary(op, x, n);
    }
    return binary(op, n, may_fail(op) && integer ? safe_right(op, x) : x);
  }

  // Records `make` (which draws new random choices each time) up to eight
  // times and keeps the first node of a kind the run still wants, so that
  // every row in every dtype comes up within a short run. Such a value is
  // an output, so that its node is in the graph.
  template <typename F>
  Tensor wanted_first(F&& make) {
    Tensor t;
    for (int attempt = 0; attempt < 8; attempt++) {
      t = make();
      if (t->pending && wanted_.erase(coverage_name(*t->pending))) {
        firsts_.push_back(t);
        break;
      }
    }
    return t;
  }

  // An invalid combination (bool - bool, a float index) raises an Error:
  // another one is drawn.
  void step_with_retries() {
    int attempts = 30;
    while (attempts-- > 0) {
      try {
        if (step()) return;
      } catch (const Error&) {
      }
    }
  }

  bool step() {
    const Tensor x = operand();
    const Shape& s = x->shape;
    const int rank = s.rank();
    switch (pick(26)) {
      case 0:
      case 1:
      case 2:
        pool_.push_back(wanted_first(
            [&] { return unary(static_cast<UnaryOp>(pick(kUnaryOpCount)), operand()); }));
        return true;
      case 3:
      case 4:
      case 5:
        pool_.push_back(wanted_first([&] { return binary_step(operand(), any()); }));
        return true;
      case 6:  // a number on either side
        pool_.push_back(wanted_first([&] { return binary_step(operand(), std::nullopt); }));
        return true;
      case 7: {
        Tensor c = any();
        if (c->dtype != DType::boolean) c = binary(BinaryOp::gt, c, ops::Scalar::from_double(0.25));
        pool_.push_back(where(c, x, any()));
        return true;
      }
      case 8: {
        const DType to = random_dtype();
        if (to == x->dtype) return false;
        pool_.push_back(cast(convertible(x, to), to));
        return true;
      }
      case 9: {
        std::optional<ops::Scalar> low, high;
        if (chance(70)) low = random_number();
        if (!low || chance(60)) high = random_number();
        pool_.push_back(clamp(x, low, high));
        return true;
      }
      case 10:
      case 11:
        if (rank == 0) return false;
        pool_.push_back(wanted_first([&] {
          const Tensor v = operand();
          const int dims = v->shape.rank();
          const std::optional<int> dim =
              chance(25) || dims == 0 ? std::nullopt : std::optional<int>(pick(dims));
          return reduce(static_cast<ReduceOp>(pick(kReduceOpCount)), v, dim, chance(50));
        }));
        return true;
      case 12: {
        if (rank == 0) return false;
        const bool is_max = chance(50);
        if (chance(50)) {
          auto [values, indices] = max_min_dim(is_max, x, pick(rank), chance(50));
          pool_.push_back(values);
          pool_.push_back(indices);
        } else {
          const std::optional<int> dim = chance(30) ? std::nullopt : std::optional<int>(pick(rank));
          pool_.push_back(arg_max_min(is_max, x, dim, chance(50)));
        }
        return true;
      }
      case 13:
        if (rank == 0) return false;
        pool_.push_back(chance(60) ? softmax(x, chance(70) ? rank - 1 : pick(rank), chance(50))
                                   : cumsum(x, pick(rank)));
        return true;
      case 14: {  // matmul: 1-D, 2-D, batched, a transposed operand
        if (rank < 1 || !is_floating(x->dtype)) return false;
        const int64_t k = s[rank - 1];
        const int64_t n = 1 + pick(6);
        if (chance(20)) {
          pool_.push_back(matmul(x, input({k}, x->dtype)));
        } else if (chance(30)) {
          pool_.push_back(matmul(x, transpose(input({n, k}, x->dtype), 0, 1)));
        } else {
          pool_.push_back(matmul(x, input({k, n}, x->dtype)));
        }
        return true;
      }
      case 15:
        return view_step(x);
      case 16:
        return write_step(x);
      case 17: {  // cat with itself or a value of the same shape
        if (rank == 0) return false;
        std::vector<Tensor> parts = {x, unary(UnaryOp::neg, x)};
        for (const Tensor& y : pool_) {
          if (y->shape == s && y.get() != x.get() && chance(50)) parts.push_back(y);
        }
        pool_.push_back(cat(parts, pick(rank)));
        return true;
      }
      case 18: {
        if (rank == 0) return false;
        const int dim = pick(rank);
        if (chance(50)) {
          pool_.push_back(gather(x, dim, index_for(s, dim, 4)));
        } else {
          pool_.push_back(index_select(x, dim, index(Shape{1 + pick(5)}, s[dim])));
        }
        return true;
      }
      case 19: {
        if (rank == 0) return false;
        const int dim = pick(rank);
        const Tensor positions = index_for(s, dim, 5);
        const Tensor& y = any();
        const Tensor src = y->shape == positions->shape && y->dtype == x->dtype
                               ? y
                               : input(positions->shape, x->dtype);
        pool_.push_back(scatter_add(x, dim, positions, src));
        return true;
      }
      case 20: {
        if (rank == 0) return false;
        std::vector<int> dims;
        for (int d = 0; d < rank; d++) {
          if (chance(50)) dims.push_back(d);
        }
        if (dims.empty()) dims.push_back(pick(rank));
        pool_.push_back(flip(x, dims));
        return true;
      }
      case 21:
      case 22:
        return convolution_step();
      case 23: {  // argsort (a library step) and the sorted values it gathers
        const int dim = rank == 0 ? 0 : pick(rank);
        const Tensor order = argsort(x, dim, chance(50));
        pool_.push_back(order);
        if (rank > 0) pool_.push_back(gather(x, dim, order));
        return true;
      }
      case 24: {  // a collective: in one process the identity, a library step
        const auto op = static_cast<CollectiveOp>(pick(4));
        if (op == CollectiveOp::sum && x->dtype == DType::boolean) return false;
        pool_.push_back(collective(x, op, 0));
        return true;
      }
      default:
        return scan_step(x);
    }
  }

  bool view_step(const Tensor& x) {
    const Shape& s = x->shape;
    const int rank = s.rank();
    switch (pick(7)) {
      case 0: {
        if (rank < 2) return false;
        std::vector<int> order(rank);
        for (int d = 0; d < rank; d++) order[d] = d;
        std::shuffle(order.begin(), order.end(), rng_);
        pool_.push_back(permute(x, order));
        return true;
      }
      case 1: {
        if (rank == 0) return false;
        const int dim = pick(rank);
        const int64_t start = pick(s[dim]);
        pool_.push_back(narrow(x, dim, start, 1 + pick(s[dim] - start)));
        return true;
      }
      case 2:
        if (rank == 0) return false;
        pool_.push_back(select(x, 0, pick(s[0])));
        return true;
      case 3:
        pool_.push_back(chance(50) ? unsqueeze(x, pick(rank + 1)) : squeeze(x, std::nullopt));
        return true;
      case 4: {
        Shape target = s;
        for (int d = 0; d < rank; d++) {
          if (target[d] == 1) target[d] = 1 + pick(4);
        }
        if (chance(40) && rank < 4) target.insert(0, 2);
        if (target == s) return false;
        pool_.push_back(expand(x, target));
        return true;
      }
      case 5:
        pool_.push_back(reshape(x, {-1}));
        return true;
      default:
        if (rank < 2) return false;
        pool_.push_back(reshape(transpose(x, 0, rank - 1), {-1, s[0]}));
        return true;
    }
  }

  // Writes into a region of a copy (slice_update, select_update): a
  // number, a value, or an elementwise op in place.
  bool write_step(const Tensor& x) {
    const Shape& s = x->shape;
    if (s.rank() == 0) return false;
    const Tensor base = clone(x);
    const int dim = pick(s.rank());
    const int64_t first = pick(s[dim]);
    const Tensor region =
        chance(50) ? narrow(base, dim, first, 1 + pick(s[dim] - first)) : select(base, dim, first);
    switch (pick(3)) {
      case 0:
        fill_(region, random_number());
        break;
      case 1:
        copy_(region, convertible(any(), region->dtype));
        break;
      default:
        unary_(UnaryOp::neg, region);
        break;
    }
    pool_.push_back(base);
    return true;
  }

  // Convolutions (2-D, with groups, dilation, asymmetric padding and
  // bias), max_pool2d and their gradients on [N, C, H, W] floats.
  bool convolution_step() {
    Window2d window;
    window.kh = 1 + pick(3);
    window.kw = 1 + pick(3);
    window.sh = 1 + pick(2);
    window.sw = 1 + pick(2);
    window.ph = pick(window.kh / 2 + 1);
    window.pw = pick(window.kw / 2 + 1);
    ConvWindow conv_window;
    conv_window.groups = 1 + pick(2);
    conv_window.kernel[0] = window.kh;
    conv_window.kernel[1] = window.kw;
    for (int d = 0; d < 2; d++) {
      conv_window.stride[d] = 1 + pick(2);
      conv_window.dilation[d] = 1 + pick(2);
      conv_window.pad_before[d] = pick(2);
      conv_window.pad_after[d] = pick(3);
    }
    const int64_t n = 1 + pick(2), c = 1 + pick(3), o = 1 + pick(3);
    const int64_t conv_c = c * conv_window.groups, conv_o = o * conv_window.groups;
    const Shape x_shape = {n, c, window.kh + pick(6), window.kw + pick(6)};
    const Tensor x = float_value(x_shape);
    const DType dtype = x->dtype;
    const Shape pooled = {n, c, window.out_height(x_shape[2]), window.out_width(x_shape[3])};
    const Shape conv_x_shape = {n, conv_c, conv_window.reach(0) + pick(6),
                                conv_window.reach(1) + pick(6)};
    const Shape conv_y_shape = {n, conv_o, conv_window.out_extent(0, conv_x_shape[2]),
                                conv_window.out_extent(1, conv_x_shape[3])};
    const Shape weight_shape = {conv_o, c, window.kh, window.kw};
    const Tensor bias = input({conv_o}, dtype);
    switch (pick(5)) {
      case 0:
        pool_.push_back(conv(input(conv_x_shape, dtype), input(weight_shape, dtype),
                             pick(2) ? &bias : nullptr, conv_window));
        return true;
      case 1:
        pool_.push_back(conv_grad_input(input(conv_y_shape, dtype), input(weight_shape, dtype),
                                        nullptr, conv_x_shape, conv_window));
        return true;
      case 2:
        pool_.push_back(conv_grad_weight(input(conv_y_shape, dtype), input(conv_x_shape, dtype),
                                         weight_shape, conv_window));
        return true;
      case 3:
        pool_.push_back(max_pool2d(x, window));
        return true;
      default:
        pool_.push_back(max_pool2d_grad(input(pooled, dtype), x, window));
        return true;
    }
  }

  // A loop: the carry goes through an elementwise op with each slice of a
  // stacked input and with a captured value; each step also yields a value.
  bool scan_step(const Tensor& carry) {
    const int64_t length = 1 + pick(4);
    Shape stacked = carry->shape;
    if (stacked.rank() >= 4) return false;
    stacked.insert(0, length);
    const Tensor xs = input(stacked, chance(50) ? carry->dtype : random_dtype());
    const Tensor captured = any();
    const auto first = static_cast<BinaryOp>(pick(kBinaryOpCount));
    const auto second = static_cast<UnaryOp>(pick(kUnaryOpCount));
    if (may_fail(first)) return false;
    ScanOptions options;
    options.reverse = chance(30);
    const DType dtype = carry->dtype;
    auto body = [&](const std::vector<Tensor>& carries, const std::vector<Tensor>& slices) {
      const Tensor mixed = binary(first, carries[0], slices[0]);
      const Tensor other = cast(convertible(captured, mixed->dtype), mixed->dtype);
      Tensor next = binary(BinaryOp::maximum, mixed, other);
      if (next->shape != carries[0]->shape) next = mixed;
      next = cast(convertible(next, dtype), dtype);
      return std::pair<std::vector<Tensor>, std::vector<Tensor>>{{next}, {unary(second, mixed)}};
    };
    const std::vector<Tensor> results = scan(context_, body, {carry}, {xs}, length, options);
    for (const Tensor& t : results) pool_.push_back(t);
    return true;
  }

  Context* context_;
  std::mt19937& rng_;
  std::set<std::string>& wanted_;
  int64_t rows_, cols_;
  std::vector<Tensor> pool_;
  std::vector<Tensor> firsts_;  // values whose node was the first of its kind
};

// ---- Comparing ----

// The same bits, but that any NaN equals any NaN.
bool same_element(const Array& a, const Array& b, int64_t i) {
  switch (a.dtype) {
    case DType::f32: {
      const float x = a.data<float>()[i], y = b.data<float>()[i];
      return (std::isnan(x) && std::isnan(y)) || std::memcmp(&x, &y, sizeof x) == 0;
    }
    case DType::f64: {
      const double x = a.data<double>()[i], y = b.data<double>()[i];
      return (std::isnan(x) && std::isnan(y)) || std::memcmp(&x, &y, sizeof x) == 0;
    }
    default: {
      const int size = dtype_size(a.dtype);
      return std::memcmp(static_cast<const char*>(a.raw_data()) + i * size,
                         static_cast<const char*>(b.raw_data()) + i * size, size) == 0;
    }
  }
}

std::string element_string(const Array& a, int64_t i) {
  switch (a.dtype) {
    case DType::boolean:
      return std::to_string(a.data<uint8_t>()[i]);
    case DType::i32:
      return std::to_string(a.data<int32_t>()[i]);
    case DType::i64:
      return std::to_string(a.data<int64_t>()[i]);
    case DType::f32:
      return fmt::format("{:a} ({:.9g})", a.data<float>()[i], a.data<float>()[i]);
    case DType::f64:
      return fmt::format("{:a} ({:.17g})", a.data<double>()[i], a.data<double>()[i]);
  }
  return "?";
}

// "" when the two values have the same shape, dtype and bits.
std::string difference(const Array& reference_view, const Array& compiled_view) {
  if (reference_view.dtype != compiled_view.dtype || reference_view.shape != compiled_view.shape) {
    return fmt::format("reference {} {}, compiled {} {}", dtype_name(reference_view.dtype),
                       shape_string(reference_view.shape), dtype_name(compiled_view.dtype),
                       shape_string(compiled_view.shape));
  }
  const Array reference = contiguous(reference_view), compiled = contiguous(compiled_view);
  for (int64_t i = 0; i < reference.numel(); i++) {
    if (!same_element(reference, compiled, i)) {
      return fmt::format("element {} of {}: reference {}, compiled {}", i, reference.numel(),
                         element_string(reference, i), element_string(compiled, i));
    }
  }
  return "";
}

std::string node_string(const Graph& graph, int position) {
  const Node& node = *graph.nodes[position];
  std::string text = fmt::format("{} {} {}", coverage_name(node), dtype_name(node.dtype),
                                 shape_string(node.shape));
  for (int k = graph.input_offsets[position]; k < graph.input_offsets[position + 1]; k++) {
    const Node& input = *graph.nodes[graph.input_positions[k]];
    text += fmt::format("{} {} {}", k == graph.input_offsets[position] ? " of " : ", ",
                        dtype_name(input.dtype), shape_string(input.shape));
  }
  return text;
}

// Runs the graph again with every computed node as an output and names the
// first node (inputs before users) whose value differs between the tiers.
std::string first_difference(const Graph& graph, Executor& reference, Executor& compiled) {
  Graph every = graph;
  every.outputs.clear();
  for (size_t i = 0; i < graph.nodes.size(); i++) {
    if (!graph.is_leaf(static_cast<int>(i)) && graph.nodes[i]->op != Op::scan) {
      every.outputs.push_back(static_cast<int>(i));
    }
  }
  every.key = hash_mix(graph.key, 0xd1ffULL);
  Metrics metrics;
  const std::vector<Array> want = reference.run(every, metrics);
  const std::vector<Array> got = compiled.run(every, metrics);
  for (size_t k = 0; k < every.outputs.size(); k++) {
    const std::string diff = difference(want[k], got[k]);
    if (diff.empty()) continue;
    const int position = every.outputs[k];
    std::string text =
        fmt::format("first differing node: {}\n  {}", node_string(every, position), diff);
    // Its inputs (the same in both tiers), when small enough to print.
    for (int i = graph.input_offsets[position]; i < graph.input_offsets[position + 1]; i++) {
      const int input = graph.input_positions[i];
      const Node& node = *graph.nodes[input];
      const auto output = std::find(every.outputs.begin(), every.outputs.end(), input);
      const Array value = node.op == Op::parameter        ? node.data
                          : output != every.outputs.end() ? want[output - every.outputs.begin()]
                                                          : Array();
      text += fmt::format("\n  input {}:", i - graph.input_offsets[position]);
      if (node.op == Op::scalar || node.op == Op::constant) {
        text += fmt::format(" {} {:a}", node.op == Op::scalar ? "scalar" : "constant",
                            node.scalar.value);
      } else if (value.defined() && value.numel() <= 16) {
        const Array flat = contiguous(value);
        for (int64_t e = 0; e < flat.numel(); e++) text += " " + element_string(flat, e);
      }
    }
    return text;
  }
  return "no node differs with every node an output (so it is in fused code)";
}

class Differential : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = std::filesystem::temp_directory_path() / "lazylua-differential-XXXXXX";
    ASSERT_TRUE(mkdtemp(pattern.data()));
    cache_directory_ = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(cache_directory_, ignored);
  }
  std::string cache_directory_;
};

TEST_F(Differential, ReferenceAndCompiledTiersGiveTheSameBits) {
  const char* graphs_text = std::getenv("LAZYLUA_TEST_DIFFERENTIAL_GRAPHS");
  // At least this many graphs, and more (up to four times as many) while
  // some kind of node has not come up yet.
  const int graphs = graphs_text ? std::atoi(graphs_text) : 6;
  const int kProgramsPerGraph = 40;
  std::mt19937 rng(2024);
  if (const char* seed = std::getenv("LAZYLUA_TEST_SEED")) rng.seed(std::atoi(seed));

  const std::unique_ptr<Executor> reference = make_reference_executor();
  const std::unique_ptr<Executor> compiled = compiler::make_native_executor(
      compiler::CompileMode::sync, 0, &compiler::DiskCache::for_directory(cache_directory_));
  const std::set<std::string> required = required_names();
  std::set<std::string> wanted = required;
  std::map<std::string, int> seen;
  Metrics compiled_metrics;
  int outputs = 0, nodes = 0;
  int g = 0;
  for (; g < graphs || (!wanted.empty() && g < 4 * graphs); g++) {
    const Ref<Context> context = make_ref<Context>();
    std::vector<Tensor> values;
    std::vector<int> program_of;
    for (int p = 0; p < kProgramsPerGraph; p++) {
      RandomProgram program(context.get(), rng, wanted);
      for (const Tensor& t : program.outputs()) {
        // A lazy view's value is its base's: clone() makes it a node.
        const Tensor value = t->is_lazy_view() ? clone(t) : t;
        if (!value->pending) continue;  // an input itself
        values.push_back(value);
        program_of.push_back(p);
      }
    }
    std::vector<TensorImpl*> roots;
    for (const Tensor& t : values) roots.push_back(t.get());
    const Graph graph = context->extract(roots);
    ASSERT_EQ(graph.outputs.size(), values.size());
    count_nodes(graph, seen);
    for (const auto& [name, count] : seen) wanted.erase(name);
    nodes += graph.nodes.size();
    outputs += graph.outputs.size();

    Metrics metrics;
    std::vector<Array> want;
    try {
      want = reference->run(graph, metrics);
    } catch (const Error& error) {
      FAIL() << "graph " << g << ": a random program failed: " << error.what();
    }
    const int64_t interpreted_before = compiled_metrics.interpreted_runs;
    const std::vector<Array> got = compiled->run(graph, compiled_metrics);
    ASSERT_EQ(compiled_metrics.interpreted_runs, interpreted_before)
        << "graph " << g << " ran on the reference interpreter, not native code";
    ASSERT_EQ(got.size(), want.size());
    bool differs = false;
    for (size_t k = 0; k < want.size(); k++) {
      const std::string diff = difference(want[k], got[k]);
      if (diff.empty()) continue;
      differs = true;
      ADD_FAILURE() << "graph " << g << " program " << program_of[k] << " output " << k << " ("
                    << node_string(graph, graph.outputs[k]) << "): " << diff;
    }
    if (differs) {
      ADD_FAILURE() << "graph " << g << ": " << first_difference(graph, *reference, *compiled);
    }
  }

  std::string fallbacks;
  for (const auto& [op, count] : compiled_metrics.fallbacks_by_op) {
    fallbacks += fmt::format(" {} {}", op, count);
  }
  std::printf(
      "%d graphs, %d nodes, %d outputs compared bitwise; %lld native runs, %lld reference steps "
      "inside them:%s\n",
      g, nodes, outputs, static_cast<long long>(compiled_metrics.native_runs),
      static_cast<long long>(compiled_metrics.fallbacks), fallbacks.c_str());

  std::string missing;
  for (const std::string& name : required) {
    if (!seen.count(name)) missing += "\n  " + name;
  }
  EXPECT_TRUE(missing.empty()) << "never generated:" << missing;
}

}  // namespace
}  // namespace lazylua
