// reduce_test.cpp - reduce, arg-reduce, softmax and cumsum against
// naive double-precision references, for every dtype, dim and layout.
//
// Tolerances (float reassociation): f32 2e-5 relative (sums of a few
// elements; the large-sum tests bound the pairwise error separately),
// f64 1e-12; integers and bools exact.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "kernel_test_util.h"
#include "tensor/kernels/reduce.h"
#include "tensor/thread_pool.h"

namespace lazylua {
namespace {

using namespace test_util;

constexpr DType kAllDtypes[] = {DType::boolean, DType::i32, DType::i64, DType::f32, DType::f64};
constexpr ReduceOp kAllOps[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::mean, ReduceOp::max,
                                ReduceOp::min, ReduceOp::any,  ReduceOp::all};

DType reduce_out_dtype(ReduceOp op, DType in) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::prod:
      return is_floating(in) ? in : DType::i64;
    case ReduceOp::any:
    case ReduceOp::all:
      return DType::boolean;
    default:
      return in;
  }
}

// Shape of the output: `dim` removed, or a scalar for dim == -1.
Shape reduced_shape(const Shape& shape, int dim) {
  if (dim < 0) return Shape{};
  Shape out = shape;
  if (out.rank() > 0) out.erase(dim);
  return out;
}

double naive_fold(ReduceOp op, const std::vector<double>& xs) {
  double acc = 0;
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::mean:
      for (double x : xs) acc += x;
      return op == ReduceOp::mean ? acc / xs.size() : acc;
    case ReduceOp::prod:
      acc = 1;
      for (double x : xs) acc *= x;
      return acc;
    case ReduceOp::max:
    case ReduceOp::min:
      acc = xs.at(0);
      for (double x : xs) {
        if (std::isnan(x) || std::isnan(acc)) {
          acc = std::numeric_limits<double>::quiet_NaN();
        } else {
          acc = op == ReduceOp::max ? std::max(acc, x) : std::min(acc, x);
        }
      }
      return acc;
    case ReduceOp::any:
      for (double x : xs) acc = acc || x != 0;
      return acc;
    case ReduceOp::all:
      acc = 1;
      for (double x : xs) acc = acc && x != 0;
      return acc;
  }
  return 0;
}

// The elements that output `o` of a reduction along `dim` folds.
std::vector<double> reduced_elements(const Array& in, int dim, int64_t o) {
  std::vector<double> xs;
  if (dim < 0) return values(in);
  Shape kept = reduced_shape(in.shape, dim);
  std::vector<int64_t> index = unravel(o, kept);
  if (in.rank() == 0) return {at(in, {})};
  index.insert(index.begin() + dim, 0);
  for (int64_t r = 0; r < in.shape[dim]; ++r) {
    index[dim] = r;
    xs.push_back(at(in, index));
  }
  return xs;
}

void check_reduce(ReduceOp op, const Array& in, int dim, const std::string& what) {
  const DType out_dtype = reduce_out_dtype(op, in.dtype);
  Array out = Array::empty(reduced_shape(in.shape, dim), out_dtype);
  const bool empty_extent = dim < 0 ? in.numel() == 0 : (in.rank() > 0 && in.shape[dim] == 0);
  if (empty_extent && (op == ReduceOp::max || op == ReduceOp::min) &&
      (dim < 0 || out.numel() > 0)) {
    EXPECT_THROW(reduce_kernel(op, in, dim, out), Error) << what;
    return;
  }
  reduce_kernel(op, in, dim, out);
  for (int64_t o = 0; o < out.numel(); ++o) {
    std::vector<double> xs = reduced_elements(in, dim, o);
    double expected;
    if (xs.empty()) {
      expected = op == ReduceOp::prod || op == ReduceOp::all ? 1
                 : op == ReduceOp::mean                      ? std::nan("")
                                                             : 0;
    } else {
      expected = naive_fold(op, xs);
    }
    const double got = get(out, o);
    ASSERT_TRUE(close(got, expected, tolerance_for(out_dtype)))
        << what << " output " << o << ": got " << got << ", expected " << expected;
  }
}

TEST(Reduce, EveryOpDtypeDimAndLayout) {
  const Shape shapes[] = {Shape{},        Shape{7}, Shape{3, 4},    Shape{2, 3, 5},
                          Shape{4, 1, 6}, Shape{0}, Shape{2, 0, 3}, Shape{3, 37}};
  uint32_t seed = 1;
  for (const Shape& shape : shapes) {
    for (DType dtype : kAllDtypes) {
      // prod of many values in [-1, 1) underflows the check; keep them near 1.
      Array base = random_array(shape, dtype, seed++, 0.5, 1.5);
      for (Layout layout : kLayouts) {
        Array in = with_layout(base, layout);
        for (ReduceOp op : kAllOps) {
          if (op == ReduceOp::mean && !is_floating(dtype)) continue;
          for (int dim = -1; dim < std::max(1, shape.rank()); ++dim) {
            check_reduce(op, in, dim,
                         std::string(reduce_op_name(op)) + " " + dtype_name(dtype) + " " +
                             shape_string(shape) + " dim " + std::to_string(dim) + " " +
                             layout_name(layout));
          }
        }
      }
    }
  }
}

TEST(Reduce, MeanOfIntegersIsAnError) {
  Array in = make({3}, DType::i32, {1, 2, 3});
  Array out = Array::empty({}, DType::i32);
  EXPECT_THROW(reduce_kernel(ReduceOp::mean, in, -1, out), Error);
}

TEST(Reduce, EmptyReductionsGiveIdentitiesOrErrors) {
  Array in = Array::empty({0, 3}, DType::f32);
  Array out = Array::empty({3}, DType::f32);
  reduce_kernel(ReduceOp::sum, in, 0, out);
  EXPECT_EQ(values(out), (std::vector<double>{0, 0, 0}));
  reduce_kernel(ReduceOp::prod, in, 0, out);
  EXPECT_EQ(values(out), (std::vector<double>{1, 1, 1}));
  reduce_kernel(ReduceOp::mean, in, 0, out);
  EXPECT_TRUE(std::isnan(get(out, 0)));
  Array flags = Array::empty({3}, DType::boolean);
  reduce_kernel(ReduceOp::any, in, 0, flags);
  EXPECT_EQ(values(flags), (std::vector<double>{0, 0, 0}));
  reduce_kernel(ReduceOp::all, in, 0, flags);
  EXPECT_EQ(values(flags), (std::vector<double>{1, 1, 1}));
  try {
    reduce_kernel(ReduceOp::max, in, 0, out);
    FAIL() << "max of an empty dimension must raise";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("size 0"), std::string::npos) << e.what();
  }
  Array scalar = Array::empty({}, DType::f32);
  EXPECT_THROW(reduce_kernel(ReduceOp::min, in, -1, scalar), Error);
  // Reducing dim 1 of [0, 3] has no outputs at all: nothing to do.
  Array none = Array::empty({0}, DType::f32);
  EXPECT_NO_THROW(reduce_kernel(ReduceOp::max, in, 1, none));
}

TEST(Reduce, IntegerSumsWrapAndUseI64) {
  Array in = Array::empty({2}, DType::i64);
  in.data<int64_t>()[0] = std::numeric_limits<int64_t>::max();
  in.data<int64_t>()[1] = 1;
  Array out = Array::empty({}, DType::i64);
  reduce_kernel(ReduceOp::sum, in, -1, out);
  EXPECT_EQ(out.data<int64_t>()[0], std::numeric_limits<int64_t>::min());
  // i32 sums do not wrap at 32 bits: they accumulate in i64.
  Array ints = Array::empty({3}, DType::i32);
  for (int i = 0; i < 3; ++i) ints.data<int32_t>()[i] = std::numeric_limits<int32_t>::max();
  reduce_kernel(ReduceOp::sum, ints, 0, out);
  EXPECT_EQ(out.data<int64_t>()[0], 3LL * std::numeric_limits<int32_t>::max());
  // Products wrap modulo 2^64.
  Array factors = Array::empty({2}, DType::i64);
  factors.data<int64_t>()[0] = int64_t{1} << 62;
  factors.data<int64_t>()[1] = 4;
  reduce_kernel(ReduceOp::prod, factors, -1, out);
  EXPECT_EQ(out.data<int64_t>()[0], 0);
  // Bool sums count.
  Array flags = make({5}, DType::boolean, {1, 0, 1, 1, 0});
  reduce_kernel(ReduceOp::sum, flags, -1, out);
  EXPECT_EQ(out.data<int64_t>()[0], 3);
}

// Column sums of many rows are split into row blocks whose partial sums
// (beyond 32 bits here) merge afterwards: they must stay 64-bit.
TEST(Reduce, SplitColumnSumsKeepI64Partials) {
  const int64_t rows = 600000;
  Array in = Array::empty({rows, 2}, DType::i32);
  for (int64_t i = 0; i < 2 * rows; ++i) in.data<int32_t>()[i] = 10000 + (i & 1);
  Array out = Array::empty({2}, DType::i64);
  reduce_kernel(ReduceOp::sum, in, 0, out);
  EXPECT_EQ(out.data<int64_t>()[0], rows * 10000);
  EXPECT_EQ(out.data<int64_t>()[1], rows * 10001);
  Array prod_out = Array::empty({2}, DType::i64);
  Array twos = Array::empty({rows, 2}, DType::i32);
  for (int64_t i = 0; i < 2 * rows; ++i) twos.data<int32_t>()[i] = i < 80 ? 2 : 1;
  reduce_kernel(ReduceOp::prod, twos, 0, prod_out);
  EXPECT_EQ(prod_out.data<int64_t>()[0], int64_t{1} << 40);
}

TEST(Reduce, NaNPropagatesThroughMaxMinAndSum) {
  const double nan = std::nan("");
  for (DType dtype : {DType::f32, DType::f64}) {
    // NaN in every position of a 2x40 block (long enough for vector lanes).
    for (int position = 0; position < 80; position += 13) {
      std::vector<double> data(80);
      for (int i = 0; i < 80; ++i) data[i] = i % 7;
      data[position] = nan;
      Array base = make({2, 40}, dtype, data);
      for (Layout layout : kLayouts) {
        Array in = with_layout(base, layout);
        for (ReduceOp op : {ReduceOp::max, ReduceOp::min, ReduceOp::sum}) {
          for (int dim = -1; dim < 2; ++dim) {
            check_reduce(op, in, dim, std::string("nan ") + reduce_op_name(op));
          }
        }
        Array flag = Array::empty({}, DType::boolean);
        Array zeros_and_nan = with_layout(make({2}, dtype, {0, nan}), layout);
        reduce_kernel(ReduceOp::any, zeros_and_nan, -1, flag);
        EXPECT_TRUE(flag.data<bool>()[0]) << "NaN is nonzero";
      }
    }
  }
}

// Sum in double of f32 values, the accuracy reference.
double exact_sum(const float* p, int64_t n, int64_t stride = 1) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += p[i * stride];
  return sum;
}

Array large_f32(const Shape& shape, uint32_t seed) {
  Array a = Array::empty(shape, DType::f32);
  std::mt19937 engine(seed);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  for (int64_t i = 0; i < a.numel(); ++i) a.data<float>()[i] = uniform(engine);
  return a;
}

// A float sum added sequentially drifts by ~n * eps (at 8M elements of ~0.5
// the running sum's ulp is 0.5: relative errors of 1e-4 and worse); pairwise
// summation keeps it ~eps * log n.
TEST(Reduce, LargeF32SumsArePairwiseAccurate) {
  const int64_t n = 8'000'000;
  Array in = large_f32({n}, 11);
  Array out = Array::empty({}, DType::f32);
  reduce_kernel(ReduceOp::sum, in, -1, out);
  const double exact = exact_sum(in.data<float>(), n);
  EXPECT_LT(std::fabs(out.data<float>()[0] - exact) / exact, 3e-7);

  reduce_kernel(ReduceOp::mean, in, -1, out);
  EXPECT_LT(std::fabs(out.data<float>()[0] - exact / n) / (exact / n), 3e-7);

  // Few long rows (lines split into chunks), and many rows.
  for (Shape shape : {Shape{2, n / 2}, Shape{n / 1000, 1000}}) {
    Array rows_in = in.view_as(shape, contiguous_strides(shape), 0);
    Array sums = Array::empty({shape[0]}, DType::f32);
    reduce_kernel(ReduceOp::sum, rows_in, 1, sums);
    for (int64_t r = 0; r < shape[0]; r += std::max<int64_t>(1, shape[0] / 50)) {
      const double row_exact = exact_sum(in.data<float>() + r * shape[1], shape[1]);
      EXPECT_LT(std::fabs(sums.data<float>()[r] - row_exact) / row_exact, 3e-7) << r;
    }
  }
  // Column sums (reduce the outer dim): few wide columns and many narrow.
  for (Shape shape : {Shape{n / 4, 4}, Shape{n / 3000, 3000}}) {
    Array columns_in = in.view_as(shape, contiguous_strides(shape), 0);
    Array sums = Array::empty({shape[1]}, DType::f32);
    reduce_kernel(ReduceOp::sum, columns_in, 0, sums);
    for (int64_t c = 0; c < shape[1]; c += std::max<int64_t>(1, shape[1] / 50)) {
      const double column_exact = exact_sum(in.data<float>() + c, shape[0], shape[1]);
      EXPECT_LT(std::fabs(sums.data<float>()[c] - column_exact) / column_exact, 3e-7) << c;
    }
  }
  // The whole tensor through a transposed view (strided lines).
  Array transposed = in.view_as({2000, n / 2000}, {1, 2000}, 0);
  reduce_kernel(ReduceOp::sum, transposed, -1, out);
  EXPECT_LT(std::fabs(out.data<float>()[0] - exact) / exact, 3e-7);
}

// The large paths split work into fixed chunks; check their results element
// by element against the reference for odd shapes and layouts.
TEST(Reduce, LargeInputsMatchTheReferenceOnEveryPath) {
  const Shape shapes[] = {{3, 70001}, {70001, 3}, {5, 999, 67}, {1, 200000}, {200000, 1}};
  uint32_t seed = 100;
  for (const Shape& shape : shapes) {
    for (DType dtype : {DType::f32, DType::f64, DType::i32}) {
      Array base = random_array(shape, dtype, seed++);
      for (Layout layout : {Layout::contiguous, Layout::transposed}) {
        Array in = with_layout(base, layout);
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::all}) {
          for (int dim = -1; dim < shape.rank(); ++dim) {
            check_reduce(op, in, dim,
                         std::string("large ") + reduce_op_name(op) + " " + dtype_name(dtype) +
                             " " + shape_string(shape) + " dim " + std::to_string(dim) + " " +
                             layout_name(layout));
          }
        }
      }
    }
  }
}

TEST(Reduce, ResultsDoNotDependOnTheThreadCount) {
  Array in = large_f32({3000, 2000}, 5);
  Array transposed = in.view_as({2000, 3000}, {1, 2000}, 0);
  const int threads = thread_count();
  std::vector<std::vector<double>> results[2];
  for (int run = 0; run < 2; ++run) {
    set_thread_count(run == 0 ? 1 : 2);
    for (const Array& a : {in, transposed}) {
      for (int dim = -1; dim < 2; ++dim) {
        Array out = Array::empty(reduced_shape(a.shape, dim), DType::f32);
        reduce_kernel(ReduceOp::sum, a, dim, out);
        results[run].push_back(values(out));
      }
    }
  }
  set_thread_count(threads);
  EXPECT_EQ(results[0], results[1]);
}

// ---------------------------------------------------------------------------

void check_arg_reduce(bool is_max, const Array& in, int dim, const std::string& what) {
  Shape shape = reduced_shape(in.shape, dim);
  Array values_out = Array::empty(shape, in.dtype);
  Array indices_out = Array::empty(shape, DType::i64);
  arg_reduce_kernel(is_max, in, dim, values_out, indices_out);
  for (int64_t o = 0; o < values_out.numel(); ++o) {
    std::vector<double> xs = reduced_elements(in, dim, o);
    size_t best = 0;
    for (size_t i = 1; i < xs.size(); ++i) {
      if (std::isnan(xs[best])) break;
      if (std::isnan(xs[i]) || (is_max ? xs[i] > xs[best] : xs[i] < xs[best])) best = i;
    }
    ASSERT_TRUE(close(get(values_out, o), xs[best], 0)) << what << " value " << o;
    ASSERT_EQ(indices_out.data<int64_t>()[o], static_cast<int64_t>(best) + 1)
        << what << " index " << o;
  }
}

TEST(ArgReduce, EveryDtypeDimAndLayoutWithTiesAndNaN) {
  const Shape shapes[] = {Shape{}, Shape{9}, Shape{3, 4}, Shape{2, 3, 5}, Shape{5, 130}};
  uint32_t seed = 7;
  for (const Shape& shape : shapes) {
    for (DType dtype : kAllDtypes) {
      // Integers in [-5, 5] have many ties: the first position must win.
      Array base = random_array(shape, dtype, seed++);
      if (is_floating(dtype)) {
        base = make(shape, dtype, values(random_array(shape, DType::i32, seed++)));
        if (base.numel() > 3) {
          set(base, base.numel() / 2, std::nan(""));
          set(base, base.numel() - 1, std::nan(""));
        }
      }
      for (Layout layout : kLayouts) {
        Array in = with_layout(base, layout);
        for (bool is_max : {true, false}) {
          for (int dim = -1; dim < std::max(1, shape.rank()); ++dim) {
            check_arg_reduce(is_max, in, dim,
                             std::string(is_max ? "max " : "min ") + dtype_name(dtype) + " " +
                                 shape_string(shape) + " dim " + std::to_string(dim) + " " +
                                 layout_name(layout));
          }
        }
      }
    }
  }
}

TEST(ArgReduce, LongRowsUseTheVectorPathAndKeepTheFirstTie) {
  std::vector<double> data(100000, 1.0);
  data[777] = 5;
  data[4242] = 5;
  Array in = make({100000}, DType::f32, data);
  Array value = Array::empty({}, DType::f32), index = Array::empty({}, DType::i64);
  arg_reduce_kernel(true, in, -1, value, index);
  EXPECT_EQ(value.data<float>()[0], 5.0f);
  EXPECT_EQ(index.data<int64_t>()[0], 778);
  data[90000] = std::nan("");
  data[95000] = std::nan("");
  in = make({100000}, DType::f32, data);
  arg_reduce_kernel(false, in, -1, value, index);
  EXPECT_TRUE(std::isnan(value.data<float>()[0]));
  EXPECT_EQ(index.data<int64_t>()[0], 90001);
  // Either output may be skipped.
  arg_reduce_kernel(true, in, -1, Array{}, index);
  EXPECT_EQ(index.data<int64_t>()[0], 90001);
  arg_reduce_kernel(true, in, -1, value, Array{});
  EXPECT_TRUE(std::isnan(value.data<float>()[0]));
}

TEST(ArgReduce, EmptyIsAnError) {
  Array in = Array::empty({2, 0}, DType::f32);
  Array values_out = Array::empty({2}, DType::f32), indices_out = Array::empty({2}, DType::i64);
  EXPECT_THROW(arg_reduce_kernel(true, in, 1, values_out, indices_out), Error);
  EXPECT_THROW(arg_reduce_kernel(true, in, -1, Array{}, Array::empty({}, DType::i64)), Error);
}

// ---------------------------------------------------------------------------

// Calls f(line positions) for every line along `dim` (all of them for a
// scalar input).
template <typename F>
void for_each_line(const Shape& shape, int dim, F&& f) {
  Shape kept = reduced_shape(shape, dim);
  for (int64_t o = 0; o < numel(kept); ++o) {
    std::vector<std::vector<int64_t>> line;
    std::vector<int64_t> index = unravel(o, kept);
    if (shape.rank() == 0) {
      line.push_back({});
    } else {
      index.insert(index.begin() + dim, 0);
      for (int64_t r = 0; r < shape[dim]; ++r) {
        index[dim] = r;
        line.push_back(index);
      }
    }
    f(line);
  }
}

void check_softmax(const Array& in, int dim, bool log, const std::string& what) {
  Array out = Array::empty(in.shape, in.dtype);
  softmax_kernel(in, dim, log, out);
  for_each_line(in.shape, dim, [&](const std::vector<std::vector<int64_t>>& line) {
    double shift = -INFINITY, sum = 0;
    bool has_nan = false;
    for (const auto& index : line) {
      has_nan |= std::isnan(at(in, index));
      shift = std::max(shift, at(in, index));
    }
    for (const auto& index : line) sum += std::exp(at(in, index) - shift);
    for (const auto& index : line) {
      const double x = at(in, index);
      double expected = log ? x - shift - std::log(sum) : std::exp(x - shift) / sum;
      if (has_nan) expected = std::nan("");
      const double got = at(out, index);
      ASSERT_TRUE(close(got, expected, tolerance_for(in.dtype)))
          << what << ": got " << got << ", expected " << expected;
    }
  });
}

TEST(Softmax, EveryDimLayoutAndDtype) {
  const Shape shapes[] = {Shape{},        Shape{1},        Shape{7},    Shape{3, 4},
                          Shape{2, 3, 5}, Shape{4, 37, 3}, Shape{0, 3}, Shape{3, 100}};
  uint32_t seed = 50;
  for (const Shape& shape : shapes) {
    for (DType dtype : {DType::f32, DType::f64}) {
      Array base = random_array(shape, dtype, seed++, -20, 20);
      for (Layout layout : kLayouts) {
        Array in = with_layout(base, layout);
        for (bool log : {false, true}) {
          for (int dim = 0; dim < std::max(1, shape.rank()); ++dim) {
            check_softmax(in, dim, log,
                          std::string(log ? "log_softmax " : "softmax ") + dtype_name(dtype) + " " +
                              shape_string(shape) + " dim " + std::to_string(dim) + " " +
                              layout_name(layout));
          }
        }
      }
    }
  }
}

TEST(Softmax, IsStableForLargeValuesAndHandlesInfinityAndNaN) {
  for (DType dtype : {DType::f32, DType::f64}) {
    // exp(1000) overflows: only the max-subtracted form works.
    Array big = make({2, 3}, dtype, {1000, 1001, 1002, -1000, -1001, -INFINITY});
    for (int dim = 0; dim < 2; ++dim) {
      for (bool log : {false, true}) check_softmax(big, dim, log, "large values");
    }
    Array out = Array::empty({2, 3}, dtype);
    softmax_kernel(big, 1, false, out);
    EXPECT_EQ(get(out, 5), 0.0);  // e^-inf
    // A NaN poisons its row only.
    Array with_nan = make({2, 20}, dtype, std::vector<double>(40, 0.5));
    set(with_nan, 3, std::nan(""));
    Array nan_out = Array::empty({2, 20}, dtype);
    softmax_kernel(with_nan, 1, false, nan_out);
    EXPECT_TRUE(std::isnan(get(nan_out, 0)));
    EXPECT_TRUE(std::isnan(get(nan_out, 19)));
    EXPECT_NEAR(get(nan_out, 20), 1.0 / 20, 1e-7);
  }
}

TEST(Softmax, LargeRowsSumToOne) {
  Array in = random_array({64, 1024}, DType::f32, 3, -10, 10);
  Array out = Array::empty({64, 1024}, DType::f32);
  softmax_kernel(in, 1, false, out);
  for (int64_t row = 0; row < 64; ++row) {
    double sum = 0;
    for (int64_t j = 0; j < 1024; ++j) sum += out.data<float>()[row * 1024 + j];
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
  check_softmax(in, 1, false, "large rows");
  check_softmax(in, 0, true, "large columns");
}

// ---------------------------------------------------------------------------

TEST(Cumsum, EveryDtypeDimAndLayout) {
  const Shape shapes[] = {Shape{},        Shape{7},    Shape{3, 4},
                          Shape{2, 3, 5}, Shape{0, 2}, Shape{3, 70}};
  uint32_t seed = 90;
  for (const Shape& shape : shapes) {
    for (DType dtype : kAllDtypes) {
      Array base = random_array(shape, dtype, seed++);
      const DType out_dtype = is_floating(dtype) ? dtype : DType::i64;
      for (Layout layout : kLayouts) {
        Array in = with_layout(base, layout);
        for (int dim = 0; dim < std::max(1, shape.rank()); ++dim) {
          Array out = Array::empty(shape, out_dtype);
          cumsum_kernel(in, dim, out);
          for_each_line(shape, dim, [&](const std::vector<std::vector<int64_t>>& line) {
            double running = 0;
            for (const auto& index : line) {
              running += at(in, index);
              ASSERT_TRUE(close(at(out, index), running, tolerance_for(out_dtype)))
                  << dtype_name(dtype) << " " << shape_string(shape) << " dim " << dim << " "
                  << layout_name(layout);
            }
          });
        }
      }
    }
  }
}

TEST(Cumsum, IntegersWrap) {
  Array in = Array::empty({2}, DType::i64);
  in.data<int64_t>()[0] = std::numeric_limits<int64_t>::max();
  in.data<int64_t>()[1] = 2;
  Array out = Array::empty({2}, DType::i64);
  cumsum_kernel(in, 0, out);
  EXPECT_EQ(out.data<int64_t>()[1], std::numeric_limits<int64_t>::min() + 1);
}

}  // namespace
}  // namespace lazylua
