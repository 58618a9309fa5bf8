// random_test.cpp - the Philox generator (known-answer vectors) and the
// random kernels: reproducibility, independence from the thread count,
// ranges and moments.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <vector>

#include "kernel_test_util.h"
#include "tensor/kernels/philox.h"
#include "tensor/kernels/random.h"
#include "tensor/thread_pool.h"

namespace lazylua {
namespace {

// Known-answer tests from the Random123 distribution (kat_vectors).
TEST(Philox, MatchesTheReferenceVectors) {
  EXPECT_EQ(philox4x32({0, 0, 0, 0}, {0, 0}),
            (PhiloxBlock{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (PhiloxBlock{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (PhiloxBlock{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Philox, GroupsMatchSingleBlocks) {
  for (uint64_t first : {uint64_t{0}, uint64_t{12345}, (uint64_t{1} << 32) - 3}) {
    PhiloxBlock group[kPhiloxGroup];
    philox_group(0x0123456789abcdefULL, first, group);
    for (int lane = 0; lane < kPhiloxGroup; ++lane) {
      EXPECT_EQ(group[lane], philox_block(0x0123456789abcdefULL, first + lane)) << first;
    }
  }
}

std::vector<double> draw(void (*fill)(const Array&), const Shape& shape, DType dtype) {
  Array a = Array::empty(shape, dtype);
  fill(a);
  return test_util::values(a);
}

void fill_uniform(const Array& a) {
  uniform_kernel(a, -2, 3);
}
void fill_normal(const Array& a) {
  normal_kernel(a, 0, 1);
}
void fill_randint(const Array& a) {
  randint_kernel(a, -5, 1000);
}
void fill_randperm(const Array& a) {
  randperm_kernel(a);
}

TEST(Random, SameSeedSameValuesAndTheStreamMovesOn) {
  for (auto fill : {fill_uniform, fill_normal}) {
    for (DType dtype : {DType::f32, DType::f64}) {
      manual_seed(42);
      std::vector<double> first = draw(fill, {1001}, dtype);
      std::vector<double> second = draw(fill, {7}, dtype);
      manual_seed(42);
      EXPECT_EQ(draw(fill, {1001}, dtype), first);
      EXPECT_EQ(draw(fill, {7}, dtype), second);
      EXPECT_NE(std::vector<double>(first.begin(), first.begin() + 7), second);
      manual_seed(43);
      EXPECT_NE(draw(fill, {1001}, dtype), first);
    }
  }
  manual_seed(5);
  std::vector<double> ints = draw(fill_randint, {100}, DType::i64);
  std::vector<double> perm = draw(fill_randperm, {100}, DType::i64);
  manual_seed(5);
  EXPECT_EQ(draw(fill_randint, {100}, DType::i64), ints);
  EXPECT_EQ(draw(fill_randperm, {100}, DType::i64), perm);
  EXPECT_EQ(initial_seed(), 5u);
}

TEST(Random, ValuesDoNotDependOnTheThreadCount) {
  const int threads = thread_count();
  std::vector<double> results[2];
  for (int run = 0; run < 2; ++run) {
    set_thread_count(run == 0 ? 1 : 2);
    manual_seed(9);
    for (auto fill : {fill_uniform, fill_normal}) {
      std::vector<double> v = draw(fill, {300001}, DType::f32);
      results[run].insert(results[run].end(), v.begin(), v.end());
    }
    std::vector<double> v = draw(fill_randint, {200001}, DType::i32);
    results[run].insert(results[run].end(), v.begin(), v.end());
  }
  set_thread_count(threads);
  EXPECT_TRUE(results[0] == results[1]);
}

TEST(Random, UniformStaysInRangeWithTheRightMoments) {
  manual_seed(1);
  for (DType dtype : {DType::f32, DType::f64}) {
    const int64_t n = 1'000'000;
    Array a = Array::empty({n}, dtype);
    uniform_kernel(a, -2, 3);
    std::vector<double> v = test_util::values(a);
    double sum = 0, sum_squares = 0;
    for (double x : v) {
      ASSERT_GE(x, -2);
      ASSERT_LT(x, 3);
      sum += x;
      sum_squares += x * x;
    }
    const double mean = sum / n, variance = sum_squares / n - mean * mean;
    EXPECT_NEAR(mean, 0.5, 0.01);
    EXPECT_NEAR(variance, 25.0 / 12, 0.01);
    // Buckets of width 0.5 each hold ~1/10 of the values.
    std::vector<int64_t> buckets(10, 0);
    for (double x : v) buckets[static_cast<int>((x + 2) * 2)]++;
    for (int64_t count : buckets) EXPECT_NEAR(count, n / 10, n / 200);
  }
  // A range so narrow that rounding would reach `high` still excludes it.
  Array narrow = Array::empty({10000}, DType::f32);
  uniform_kernel(narrow, 1.0, 1.0000001);
  for (double x : test_util::values(narrow)) {
    ASSERT_GE(x, 1.0);
    ASSERT_LT(x, 1.0000001);
  }
}

TEST(Random, NormalHasTheRightMoments) {
  manual_seed(2);
  for (DType dtype : {DType::f32, DType::f64}) {
    const int64_t n = 1'000'000;
    Array a = Array::empty({n}, dtype);
    normal_kernel(a, 3, 2);
    std::vector<double> v = test_util::values(a);
    double sum = 0;
    for (double x : v) sum += x;
    const double mean = sum / n;
    double m2 = 0, m3 = 0, m4 = 0;
    int64_t within_one_sigma = 0;
    for (double x : v) {
      ASSERT_TRUE(std::isfinite(x));
      const double d = (x - mean) / 2;
      m2 += d * d;
      m3 += d * d * d;
      m4 += d * d * d * d;
      within_one_sigma += std::fabs(x - 3) < 2;
    }
    // Standard errors at n = 1e6: mean 0.002, std 0.0014, skew 0.0025.
    EXPECT_NEAR(mean, 3, 0.01);
    EXPECT_NEAR(std::sqrt(m2 / n) * 2, 2, 0.01);
    EXPECT_NEAR(m3 / n, 0, 0.015);
    EXPECT_NEAR(m4 / n, 3, 0.03);
    EXPECT_NEAR(static_cast<double>(within_one_sigma) / n, 0.6827, 0.003);
  }
}

// Neighbours come from the same Philox block (and Box-Muller pairs): they
// must still be uncorrelated.
TEST(Random, NeighbouringValuesAreUncorrelated) {
  manual_seed(6);
  for (auto fill : {fill_uniform, fill_normal}) {
    for (DType dtype : {DType::f32, DType::f64}) {
      std::vector<double> v = draw(fill, {400000}, dtype);
      const double mean = std::accumulate(v.begin(), v.end(), 0.0) / v.size();
      for (size_t lag : {1, 2, 3}) {
        double covariance = 0, variance = 0;
        for (size_t i = 0; i + lag < v.size(); ++i) {
          covariance += (v[i] - mean) * (v[i + lag] - mean);
          variance += (v[i] - mean) * (v[i] - mean);
        }
        EXPECT_NEAR(covariance / variance, 0, 0.01) << "lag " << lag;
      }
    }
  }
}

TEST(Random, RandintCoversItsRangeOnly) {
  manual_seed(3);
  for (DType dtype : {DType::i32, DType::i64}) {
    Array a = Array::empty({100000}, dtype);
    randint_kernel(a, -3, 4);
    std::vector<int64_t> counts(7, 0);
    for (double x : test_util::values(a)) {
      ASSERT_GE(x, -3);
      ASSERT_LT(x, 4);
      counts[static_cast<int>(x) + 3]++;
    }
    for (int64_t count : counts) EXPECT_NEAR(count, 100000 / 7, 600);
  }
  // The full i64 range works (range computed without overflow).
  Array wide = Array::empty({1000}, DType::i64);
  randint_kernel(wide, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
  int64_t negatives = 0;
  for (int64_t i = 0; i < 1000; ++i) negatives += wide.data<int64_t>()[i] < 0;
  EXPECT_NEAR(negatives, 500, 80);
  EXPECT_THROW(randint_kernel(Array::empty({3}, DType::i64), 5, 5), Error);
  EXPECT_NO_THROW(randint_kernel(Array::empty({0}, DType::i64), 5, 5));
}

TEST(Random, RandpermIsAUniformPermutation) {
  manual_seed(4);
  for (int64_t n : {0, 1, 2, 10, 100000}) {
    Array a = Array::empty({n}, DType::i64);
    randperm_kernel(a);
    std::vector<int64_t> v(a.data<int64_t>(), a.data<int64_t>() + n);
    std::sort(v.begin(), v.end());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(v[i], i + 1) << n;
  }
  // Each of the 6 orders of 3 items about equally often.
  std::map<std::vector<int64_t>, int> orders;
  for (int trial = 0; trial < 6000; ++trial) {
    Array a = Array::empty({3}, DType::i64);
    randperm_kernel(a);
    orders[std::vector<int64_t>(a.data<int64_t>(), a.data<int64_t>() + 3)]++;
  }
  EXPECT_EQ(orders.size(), 6u);
  for (const auto& [order, count] : orders) EXPECT_NEAR(count, 1000, 130);
}

}  // namespace
}  // namespace lazylua
