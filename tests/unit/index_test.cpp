// index_test.cpp - gather, index_select, scatter and cat against naive
// loops over logical positions, for every dtype, dim, index dtype and
// layout, plus the out-of-range errors (op, position and size named).
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <random>
#include <string>

#include "kernel_test_util.h"
#include "tensor/kernels/index.h"

namespace lazylua {
namespace {

using namespace test_util;

constexpr DType kAllDtypes[] = {DType::boolean, DType::i32, DType::i64, DType::f32, DType::f64};

// Random 1-based positions in [1, size].
Array random_positions(const Shape& shape, DType dtype, int64_t size, uint32_t seed) {
  std::mt19937 engine(seed);
  std::uniform_int_distribution<int64_t> pick(1, std::max<int64_t>(size, 1));
  Array index = Array::empty(shape, dtype);
  for (int64_t i = 0; i < index.numel(); ++i) set(index, i, static_cast<double>(pick(engine)));
  return index;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

void expect_range_error(const std::string& message, const std::string& op, int64_t position,
                        int64_t size) {
  EXPECT_NE(message.find(op + ":"), std::string::npos) << message;
  EXPECT_NE(message.find("index " + std::to_string(position)), std::string::npos) << message;
  EXPECT_NE(message.find("size " + std::to_string(size)), std::string::npos) << message;
}

TEST(Gather, EveryDtypeDimIndexTypeAndLayout) {
  const Shape shapes[] = {Shape{5}, Shape{3, 4}, Shape{2, 3, 4}, Shape{4, 70}};
  uint32_t seed = 1;
  for (const Shape& shape : shapes) {
    for (DType dtype : kAllDtypes) {
      Array base = random_array(shape, dtype, seed++);
      for (Layout layout : kLayouts) {
        Array in = with_layout(base, layout);
        for (int dim = 0; dim < shape.rank(); ++dim) {
          for (DType index_dtype : {DType::i64, DType::i32}) {
            // Index extents: larger along dim, smaller or equal elsewhere.
            Shape index_shape = shape;
            index_shape[dim] = shape[dim] + 2;
            if (shape.rank() > 1) index_shape[(dim + 1) % shape.rank()] -= 1;
            Array index =
                with_layout(random_positions(index_shape, index_dtype, shape[dim], seed++), layout);
            Array out = Array::empty(index_shape, dtype);
            gather_kernel(in, dim, index, out);
            for (int64_t i = 0; i < out.numel(); ++i) {
              std::vector<int64_t> position = unravel(i, index_shape);
              std::vector<int64_t> source = position;
              source[dim] = static_cast<int64_t>(at(index, position)) - 1;
              ASSERT_EQ(get(out, i), at(in, source))
                  << dtype_name(dtype) << " " << shape_string(shape) << " dim " << dim << " "
                  << layout_name(layout);
            }
          }
        }
      }
    }
  }
}

TEST(Gather, ScalarsAndEmptyIndices) {
  Array in = make({}, DType::f32, {2.5});
  Array index = make({}, DType::i64, {1});
  Array out = Array::empty({}, DType::f32);
  gather_kernel(in, 0, index, out);
  EXPECT_EQ(get(out, 0), 2.5);
  Array empty_index = Array::empty({0, 3}, DType::i64);
  EXPECT_NO_THROW(gather_kernel(random_array({4, 3}, DType::f32, 1), 0, empty_index,
                                Array::empty({0, 3}, DType::f32)));
}

TEST(Gather, OutOfRangePositionsRaise) {
  Array in = random_array({3, 4}, DType::f32, 2);
  for (int64_t bad : {0LL, 5LL, -1LL, 1000000LL}) {
    for (DType index_dtype : {DType::i64, DType::i32}) {
      Array index = make({2, 2}, index_dtype, {1, 2, 3, static_cast<double>(bad)});
      Array out = Array::empty({2, 2}, DType::f32);
      expect_range_error(error_of([&] { gather_kernel(in, 1, index, out); }), "gather", bad, 4);
    }
  }
  Array float_index = make({2, 2}, DType::f32, {1, 1, 1, 1});
  EXPECT_THROW(gather_kernel(in, 1, float_index, Array::empty({2, 2}, DType::f32)), Error);
}

TEST(IndexSelect, EveryDtypeDimAndLayout) {
  const Shape shapes[] = {Shape{6}, Shape{3, 4}, Shape{2, 3, 4}, Shape{3, 2, 5, 2}};
  uint32_t seed = 40;
  for (const Shape& shape : shapes) {
    for (DType dtype : kAllDtypes) {
      Array base = random_array(shape, dtype, seed++);
      for (Layout layout : kLayouts) {
        Array in = with_layout(base, layout);
        for (int dim = 0; dim < shape.rank(); ++dim) {
          for (DType index_dtype : {DType::i64, DType::i32}) {
            // A strided 1-D index: every other element of a longer one.
            Array long_index = random_positions({9}, index_dtype, shape[dim], seed++);
            Array index = long_index.view_as({5}, {2}, 0);
            Shape out_shape = shape;
            out_shape[dim] = 5;
            Array out = Array::empty(out_shape, dtype);
            index_select_kernel(in, dim, index, out);
            for (int64_t i = 0; i < out.numel(); ++i) {
              std::vector<int64_t> source = unravel(i, out_shape);
              source[dim] = static_cast<int64_t>(at(index, {source[dim]})) - 1;
              ASSERT_EQ(get(out, i), at(in, source))
                  << dtype_name(dtype) << " " << shape_string(shape) << " dim " << dim << " "
                  << layout_name(layout);
            }
          }
        }
      }
    }
  }
}

TEST(IndexSelect, EmptyIndexAndOutOfRange) {
  Array in = random_array({3, 4}, DType::i64, 3);
  Array out = Array::empty({3, 0}, DType::i64);
  EXPECT_NO_THROW(index_select_kernel(in, 1, Array::empty({0}, DType::i64), out));
  Array index = make({3}, DType::i32, {1, 4, 2});
  expect_range_error(error_of([&] {
                       index_select_kernel(in, 0, index, Array::empty({3, 4}, DType::i64));
                     }),
                     "index_select", 4, 3);
}

// Scatter with duplicate positions: the last write (row-major order of the
// index) wins; with accumulate every value adds up.
TEST(Scatter, EveryDtypeDimLayoutWithDuplicates) {
  const Shape shapes[] = {Shape{5}, Shape{3, 4}, Shape{2, 3, 4}};
  uint32_t seed = 70;
  for (const Shape& shape : shapes) {
    for (DType dtype : kAllDtypes) {
      for (Layout layout : kLayouts) {
        for (int dim = 0; dim < shape.rank(); ++dim) {
          for (bool accumulate : {false, true}) {
            Array initial = random_array(shape, dtype, seed++);
            Array out = with_layout(initial, layout);
            Shape index_shape = shape;
            index_shape[dim] = shape[dim] + 3;  // more sources than slots: duplicates
            Array src = with_layout(random_array(index_shape, dtype, seed++), layout);
            Array index = random_positions(index_shape, DType::i64, shape[dim], seed++);
            scatter_kernel(out, dim, index, src, accumulate);

            std::vector<double> expected = values(initial);
            for (int64_t i = 0; i < index.numel(); ++i) {
              std::vector<int64_t> position = unravel(i, index_shape);
              std::vector<int64_t> target = position;
              target[dim] = static_cast<int64_t>(at(index, position)) - 1;
              int64_t linear = 0;
              for (int d = 0; d < shape.rank(); ++d) linear = linear * shape[d] + target[d];
              const double value = at(src, position);
              if (!accumulate) {
                expected[linear] = value;
              } else if (dtype == DType::boolean) {
                expected[linear] = expected[linear] != 0 || value != 0;
              } else {
                expected[linear] += value;
              }
            }
            std::vector<double> got = values(out);
            for (size_t i = 0; i < got.size(); ++i) {
              ASSERT_TRUE(close(got[i], expected[i], tolerance_for(dtype)))
                  << dtype_name(dtype) << " " << shape_string(shape) << " dim " << dim << " "
                  << layout_name(layout) << (accumulate ? " accumulate" : "") << " at " << i;
            }
          }
        }
      }
    }
  }
}

TEST(Scatter, OutOfRangeRaisesBeforeWriting) {
  Array out = make({2, 3}, DType::f32, {1, 2, 3, 4, 5, 6});
  Array src = make({2, 3}, DType::f32, {9, 9, 9, 9, 9, 9});
  Array index = make({2, 3}, DType::i32, {1, 2, 3, 1, 2, 4});
  expect_range_error(error_of([&] { scatter_kernel(out, 1, index, src, false); }), "scatter", 4, 3);
  EXPECT_EQ(values(out), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  expect_range_error(error_of([&] { scatter_kernel(out, 1, index, src, true); }), "scatter_add", 4,
                     3);
}

TEST(Scatter, IntegerAccumulationWraps) {
  Array out = Array::empty({1}, DType::i32);
  out.data<int32_t>()[0] = std::numeric_limits<int32_t>::max();
  Array src = make({2}, DType::i32, {1, 1});
  Array index = make({2}, DType::i64, {1, 1});
  scatter_kernel(out, 0, index, src, true);
  EXPECT_EQ(out.data<int32_t>()[0], std::numeric_limits<int32_t>::min() + 1);
}

TEST(Cat, EveryDtypeDimAndLayoutWithEmptyPieces) {
  const Shape shapes[] = {Shape{4}, Shape{3, 4}, Shape{2, 3, 4}};
  uint32_t seed = 90;
  for (const Shape& shape : shapes) {
    for (DType dtype : kAllDtypes) {
      for (int dim = 0; dim < shape.rank(); ++dim) {
        std::vector<Array> inputs;
        std::vector<int64_t> extents = {2, 0, 3, 1};
        int64_t total = 0;
        for (size_t piece = 0; piece < extents.size(); ++piece) {
          Shape piece_shape = shape;
          piece_shape[dim] = extents[piece];
          total += extents[piece];
          inputs.push_back(
              with_layout(random_array(piece_shape, dtype, seed++), kLayouts[piece % 3]));
        }
        Shape out_shape = shape;
        out_shape[dim] = total;
        Array out = Array::empty(out_shape, dtype);
        cat_kernel(inputs, dim, out);
        for (int64_t i = 0; i < out.numel(); ++i) {
          std::vector<int64_t> position = unravel(i, out_shape);
          size_t piece = 0;
          while (position[dim] >= extents[piece]) position[dim] -= extents[piece++];
          ASSERT_EQ(get(out, i), at(inputs[piece], position))
              << dtype_name(dtype) << " " << shape_string(shape) << " dim " << dim;
        }
      }
    }
  }
}

TEST(Cat, LargePiecesAreCopiedExactly) {
  Array a = random_array({300, 500}, DType::f32, 1);
  Array b = random_array({500, 200}, DType::f32, 2).transposed(0, 1);  // [200, 500] strided
  Array out = Array::empty({500, 500}, DType::f32);
  cat_kernel({a, b}, 0, out);
  EXPECT_EQ(at(out, {0, 0}), at(a, {0, 0}));
  EXPECT_EQ(at(out, {299, 499}), at(a, {299, 499}));
  EXPECT_EQ(at(out, {300, 0}), at(b, {0, 0}));
  EXPECT_EQ(at(out, {499, 7}), at(b, {199, 7}));
  std::vector<double> got = values(out), expected = values(a), tail = values(b);
  expected.insert(expected.end(), tail.begin(), tail.end());
  EXPECT_EQ(got, expected);
}

}  // namespace
}  // namespace lazylua
