// matmul_test.cpp - matmul_kernel against a naive triple loop: every dtype,
// transposed / padded / broadcast operands, batches, broadcast batches and
// empty extents. Tolerance: f32 1e-5 relative to the row's magnitude
// (BLAS reassociates), f64 1e-12; integers and bools exact.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "kernel_test_util.h"
#include "tensor/kernels/matmul.h"

namespace lazylua {
namespace {

using namespace test_util;

// How an operand's [B, rows, cols] values are laid out in memory.
enum class Operand {
  contiguous,
  transposed,       // the last two dims swapped in memory: strides (.., 1, rows)
  padded,           // gaps between rows and elements (copied before BLAS)
  broadcast_batch,  // one matrix shared by every batch: batch stride 0
  broadcast_rows,   // every row the same: row stride 0 (copied before BLAS)
};
constexpr Operand kOperands[] = {Operand::contiguous, Operand::transposed, Operand::padded,
                                 Operand::broadcast_batch, Operand::broadcast_rows};
const char* operand_name(Operand o) {
  switch (o) {
    case Operand::contiguous:
      return "contiguous";
    case Operand::transposed:
      return "transposed";
    case Operand::padded:
      return "padded";
    case Operand::broadcast_batch:
      return "broadcast_batch";
    case Operand::broadcast_rows:
      return "broadcast_rows";
  }
  return "?";
}

Array make_operand(int64_t batches, int64_t rows, int64_t cols, DType dtype, Operand layout,
                   uint32_t seed) {
  const Shape shape{batches, rows, cols};
  switch (layout) {
    case Operand::contiguous:
      return random_array(shape, dtype, seed);
    case Operand::padded:
      return with_layout(random_array(shape, dtype, seed), Layout::padded);
    case Operand::transposed: {
      Array storage = random_array({batches, cols, rows}, dtype, seed);
      return storage.transposed(1, 2);
    }
    case Operand::broadcast_batch: {
      Array one = random_array({1, rows, cols}, dtype, seed);
      return one.expanded(shape);
    }
    case Operand::broadcast_rows: {
      Array one = random_array({batches, 1, cols}, dtype, seed);
      return one.expanded(shape);
    }
  }
  return {};
}

// The product in double (exact for the small integers used here), or with
// wrapping arithmetic for i64 when `wrap` is set.
double reference(const Array& a, const Array& b, int64_t batch, int64_t i, int64_t j) {
  const int64_t k_count = a.shape[2];
  if (a.dtype == DType::boolean) {
    bool any = false;
    for (int64_t k = 0; k < k_count; ++k)
      any |= at(a, {batch, i, k}) != 0 && at(b, {batch, k, j}) != 0;
    return any;
  }
  double sum = 0;
  for (int64_t k = 0; k < k_count; ++k) sum += at(a, {batch, i, k}) * at(b, {batch, k, j});
  return sum;
}

void check_matmul(const Array& a, const Array& b, const std::string& what) {
  const int64_t batches = a.shape[0], m = a.shape[1], n = b.shape[2];
  Array out = Array::empty({batches, m, n}, a.dtype);
  matmul_kernel(a, b, out);
  for (int64_t batch = 0; batch < batches; ++batch) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        const double expected = reference(a, b, batch, i, j);
        const double got = at(out, {batch, i, j});
        ASSERT_TRUE(close(got, expected, a.dtype == DType::f32 ? 1e-5 : 1e-12))
            << what << " at [" << batch << ", " << i << ", " << j << "]: got " << got
            << ", expected " << expected;
      }
    }
  }
}

TEST(Matmul, EveryDtypeAndOperandLayout) {
  struct Sizes {
    int64_t batches, m, k, n;
  };
  const Sizes sizes[] = {{1, 1, 1, 1}, {1, 3, 4, 5},   {2, 5, 3, 4}, {3, 1, 7, 2},
                         {2, 6, 1, 3}, {1, 17, 33, 9}, {4, 2, 5, 1}};
  uint32_t seed = 1;
  for (DType dtype : {DType::f32, DType::f64, DType::i32, DType::i64, DType::boolean}) {
    for (const Sizes& s : sizes) {
      for (Operand layout_a : kOperands) {
        for (Operand layout_b : kOperands) {
          Array a = make_operand(s.batches, s.m, s.k, dtype, layout_a, seed++);
          Array b = make_operand(s.batches, s.k, s.n, dtype, layout_b, seed++);
          check_matmul(a, b,
                       std::string(dtype_name(dtype)) + " [" + std::to_string(s.batches) + ", " +
                           std::to_string(s.m) + ", " + std::to_string(s.k) + "] x [" +
                           std::to_string(s.k) + ", " + std::to_string(s.n) + "] " +
                           operand_name(layout_a) + " x " + operand_name(layout_b));
        }
      }
    }
  }
}

// Sizes beyond the integer loop's cache blocks (16 rows, 256 columns, 128
// inner) and a batch folded into one BLAS call (b shared by all batches).
TEST(Matmul, LargerThanTheBlocks) {
  uint32_t seed = 500;
  for (DType dtype : {DType::f32, DType::i32, DType::boolean}) {
    for (Operand layout_b : {Operand::contiguous, Operand::transposed, Operand::broadcast_batch}) {
      Array a = make_operand(2, 37, 300, dtype, Operand::contiguous, seed++);
      Array b = make_operand(2, 300, 270, dtype, layout_b, seed++);
      check_matmul(a, b, std::string("large ") + dtype_name(dtype) + " " + operand_name(layout_b));
    }
  }
}

TEST(Matmul, IntegerProductsWrap) {
  Array a = Array::empty({1, 1, 2}, DType::i64), b = Array::empty({1, 2, 1}, DType::i64);
  a.data<int64_t>()[0] = int64_t{1} << 62;
  a.data<int64_t>()[1] = std::numeric_limits<int64_t>::max();
  b.data<int64_t>()[0] = 4;
  b.data<int64_t>()[1] = 2;
  Array out = Array::empty({1, 1, 1}, DType::i64);
  matmul_kernel(a, b, out);
  // 2^62 * 4 wraps to 0; (2^63 - 1) * 2 wraps to -2.
  EXPECT_EQ(out.data<int64_t>()[0], -2);

  Array a32 = Array::empty({1, 1, 1}, DType::i32), b32 = Array::empty({1, 1, 1}, DType::i32);
  a32.data<int32_t>()[0] = 65536;
  b32.data<int32_t>()[0] = 65537;
  Array out32 = Array::empty({1, 1, 1}, DType::i32);
  matmul_kernel(a32, b32, out32);
  EXPECT_EQ(out32.data<int32_t>()[0], 65536);  // 2^32 + 2^16 mod 2^32
}

TEST(Matmul, EmptyExtents) {
  for (DType dtype : {DType::f32, DType::f64, DType::i64, DType::boolean}) {
    // K = 0: a sum of nothing, every element 0 (the output starts as garbage).
    Array a = Array::empty({2, 3, 0}, dtype), b = Array::empty({2, 0, 4}, dtype);
    Array out = Array::empty({2, 3, 4}, dtype);
    for (int64_t i = 0; i < out.numel(); ++i) set(out, i, 1);
    matmul_kernel(a, b, out);
    EXPECT_EQ(values(out), std::vector<double>(24, 0.0)) << dtype_name(dtype);
    // M = 0, N = 0, B = 0: nothing to do, nothing touched.
    matmul_kernel(Array::empty({2, 0, 5}, dtype), Array::empty({2, 5, 4}, dtype),
                  Array::empty({2, 0, 4}, dtype));
    matmul_kernel(Array::empty({2, 3, 5}, dtype), Array::empty({2, 5, 0}, dtype),
                  Array::empty({2, 3, 0}, dtype));
    matmul_kernel(Array::empty({0, 3, 5}, dtype), Array::empty({0, 5, 4}, dtype),
                  Array::empty({0, 3, 4}, dtype));
  }
}

TEST(Matmul, NaNAndInfinityPropagateThroughBlas) {
  Array a = make({1, 2, 2}, DType::f32, {1, std::nan(""), 1, 1});
  Array b = make({1, 2, 2}, DType::f32, {1, 2, 3, INFINITY});
  Array out = Array::empty({1, 2, 2}, DType::f32);
  matmul_kernel(a, b, out);
  EXPECT_TRUE(std::isnan(get(out, 0)));
  EXPECT_TRUE(std::isnan(get(out, 1)));
  EXPECT_EQ(get(out, 2), 4);
  EXPECT_TRUE(std::isinf(get(out, 3)));
}

}  // namespace
}  // namespace lazylua
