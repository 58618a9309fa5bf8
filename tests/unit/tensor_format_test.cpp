// tensor_format_test.cpp - exact printed text of tensors (interp/tensor_format).
//
// Every expected string is written out by hand: these tests pin down what
// users see, so a change in layout must show up here as a diff.
#include "interp/tensor_format.h"

#include <cmath>
#include <initializer_list>
#include <limits>
#include <string>

#include <gtest/gtest.h>

namespace lazylua {
namespace {

template <typename T>
Array make_array(const Shape& shape, std::initializer_list<T> values) {
  Array array = Array::empty(shape, dtype_of<T>());
  EXPECT_EQ(static_cast<int64_t>(values.size()), array.numel());
  T* data = array.data<T>();
  for (T value : values) *data++ = value;
  return array;
}

// 0, 1, 2 ... in row-major order.
template <typename T>
Array iota(const Shape& shape) {
  Array array = Array::empty(shape, dtype_of<T>());
  for (int64_t i = 0; i < array.numel(); i++) array.data<T>()[i] = static_cast<T>(i);
  return array;
}

template <typename T>
Array filled(const Shape& shape, T value) {
  Array array = Array::empty(shape, dtype_of<T>());
  for (int64_t i = 0; i < array.numel(); i++) array.data<T>()[i] = value;
  return array;
}

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(TensorFormat, Integers) {
  EXPECT_EQ(format_tensor(make_array<int64_t>({2, 3}, {1, 2, 3, 4, 5, 6})),
            " 1  2  3\n"
            " 4  5  6\n"
            "[i64 tensor of size 2x3]");
}

TEST(TensorFormat, NegativeIntegersUseTheSignSlot) {
  EXPECT_EQ(format_tensor(make_array<int32_t>({2, 2}, {-1, 20, 3, -400})),
            "  -1   20\n"
            "   3 -400\n"
            "[i32 tensor of size 2x2]");
}

TEST(TensorFormat, MixedFloatsShareFourDecimals) {
  EXPECT_EQ(format_tensor(make_array<float>({2, 2}, {1.5f, -2.25f, 3.0f, 0.0f})),
            " 1.5000 -2.2500\n"
            " 3.0000  0.0000\n"
            "[f32 tensor of size 2x2]");
}

TEST(TensorFormat, IntegerValuedFloatsPrintWithoutDecimals) {
  EXPECT_EQ(format_tensor(make_array<double>({3}, {1, 2, 3})),
            " 1  2  3\n"
            "[f64 tensor of size 3]");
  EXPECT_EQ(format_tensor(make_array<float>({2}, {-1, 10})),
            " -1  10\n"
            "[f32 tensor of size 2]");
  // From 1e8 on, integer-valued floats take the float formats.
  EXPECT_EQ(format_tensor(make_array<double>({2}, {1e9, 2e9})),
            "1e+09 *\n"
            " 1.0000  2.0000\n"
            "[f64 tensor of size 2]");
}

TEST(TensorFormat, SmallValuesGetAScaleHeader) {
  EXPECT_EQ(format_tensor(make_array<double>({3}, {1e-5, 2.5e-5, 3e-5})),
            "1e-05 *\n"
            " 1.0000  2.5000  3.0000\n"
            "[f64 tensor of size 3]");
}

TEST(TensorFormat, LargeValuesGetAScaleHeader) {
  EXPECT_EQ(format_tensor(make_array<double>({2}, {123456.7, -200000})),
            "1e+05 *\n"
            " 1.2346 -2.0000\n"
            "[f64 tensor of size 2]");
}

TEST(TensorFormat, ModerateValuesNeedNoScale) {
  EXPECT_EQ(format_tensor(make_array<double>({2}, {0.05, 0.0125})),
            " 0.0500  0.0125\n"
            "[f64 tensor of size 2]");
}

TEST(TensorFormat, WideRangeFallsBackToScientific) {
  EXPECT_EQ(format_tensor(make_array<double>({2}, {0.001, 1000})),
            " 1.0000e-03  1.0000e+03\n"
            "[f64 tensor of size 2]");
  EXPECT_EQ(format_tensor(make_array<double>({3}, {0.05, 0.01, 12345.6})),
            " 5.0000e-02  1.0000e-02  1.2346e+04\n"
            "[f64 tensor of size 3]");
  EXPECT_EQ(format_tensor(make_array<double>({2, 1}, {-2.5e-100, 1})),
            "-2.5000e-100\n"
            "  1.0000e+00\n"
            "[f64 tensor of size 2x1]");
}

TEST(TensorFormat, NanAndInfinityAreIgnoredByTheFormat) {
  EXPECT_EQ(format_tensor(make_array<float>({4}, {1.5f, NAN, INFINITY, -INFINITY})),
            " 1.5000     nan     inf    -inf\n"
            "[f32 tensor of size 4]");
  EXPECT_EQ(format_tensor(make_array<double>({4}, {1, kNan, -kInf, 2})),
            "   1  nan -inf    2\n"
            "[f64 tensor of size 4]");
  EXPECT_EQ(format_tensor(make_array<double>({2}, {kNan, kNan})),
            " nan  nan\n"
            "[f64 tensor of size 2]");
  EXPECT_EQ(format_tensor(make_array<double>({2}, {kInf, 1.5e-7})),
            "1e-07 *\n"
            "    inf  1.5000\n"
            "[f64 tensor of size 2]");
}

TEST(TensorFormat, ExtremeMagnitudesUseScientific) {
  // A factor of 10^-324 or 10^308 would itself under- or overflow.
  EXPECT_EQ(format_tensor(make_array<double>({2}, {5e-324, 1e-323})),
            " 4.9407e-324  9.8813e-324\n"
            "[f64 tensor of size 2]");
  EXPECT_EQ(format_tensor(make_array<double>({2}, {1.5e308, -1e308})),
            " 1.5000e+308 -1.0000e+308\n"
            "[f64 tensor of size 2]");
}

TEST(TensorFormat, NegativeZeroPrintsAsZero) {
  EXPECT_EQ(format_tensor(make_array<double>({2}, {-0.0, 1.5})),
            " 0.0000  1.5000\n"
            "[f64 tensor of size 2]");
  EXPECT_EQ(format_tensor(make_array<double>({2}, {-0.0, 1})),
            " 0  1\n"
            "[f64 tensor of size 2]");
}

TEST(TensorFormat, Booleans) {
  EXPECT_EQ(format_tensor(make_array<bool>({2, 2}, {true, false, false, true})),
            "  true  false\n"
            " false   true\n"
            "[bool tensor of size 2x2]");
  EXPECT_EQ(format_tensor(make_array<bool>({2}, {true, true})),
            " true  true\n"
            "[bool tensor of size 2]");
}

TEST(TensorFormat, ZeroDimensional) {
  EXPECT_EQ(format_tensor(make_array<float>({}, {2.5f})),
            " 2.5000\n"
            "[f32 tensor with no dimension]");
  EXPECT_EQ(format_tensor(make_array<int64_t>({}, {-42})),
            "-42\n"
            "[i64 tensor with no dimension]");
  // A lone value gets no scale header: scientific instead.
  EXPECT_EQ(format_tensor(make_array<double>({}, {1.5e-7})),
            " 1.5000e-07\n"
            "[f64 tensor with no dimension]");
  EXPECT_EQ(format_tensor(make_array<bool>({}, {false})),
            " false\n"
            "[bool tensor with no dimension]");
}

TEST(TensorFormat, EmptyTensorsPrintOnlyTheFooter) {
  EXPECT_EQ(format_tensor(Array::empty({0, 3}, DType::f32)), "[f32 tensor of size 0x3]");
  EXPECT_EQ(format_tensor(Array::empty({0}, DType::i64)), "[i64 tensor of size 0]");
  EXPECT_EQ(format_tensor(Array::empty({2, 0, 4}, DType::boolean)), "[bool tensor of size 2x0x4]");
}

TEST(TensorFormat, ThreeDimensionalSlices) {
  EXPECT_EQ(format_tensor(iota<int64_t>({2, 2, 2})),
            "(1,.,.) = \n"
            "  0  1\n"
            "  2  3\n"
            "\n"
            "(2,.,.) = \n"
            "  4  5\n"
            "  6  7\n"
            "[i64 tensor of size 2x2x2]");
}

TEST(TensorFormat, FourDimensionalSlices) {
  EXPECT_EQ(format_tensor(iota<int32_t>({1, 2, 1, 2})),
            "(1,1,.,.) = \n"
            "  0  1\n"
            "\n"
            "(1,2,.,.) = \n"
            "  2  3\n"
            "[i32 tensor of size 1x2x1x2]");
}

TEST(TensorFormat, ScaleHeaderInSlices) {
  EXPECT_EQ(format_tensor(make_array<double>({2, 1, 2}, {1e-5, 2e-5, 3.5e-5, 4e-5})),
            "(1,.,.) = \n"
            " 1e-05 *\n"
            "  1.0000  2.0000\n"
            "\n"
            "(2,.,.) = \n"
            " 1e-05 *\n"
            "  3.5000  4.0000\n"
            "[f64 tensor of size 2x1x2]");
}

TEST(TensorFormat, WideMatricesSplitIntoColumnBlocks) {
  Array a = Array::empty({2, 8}, DType::i64);
  for (int64_t c = 0; c < 8; c++) {
    a.data<int64_t>()[c] = 1000000001 + c;
    a.data<int64_t>()[8 + c] = 2000000001 + c;
  }
  EXPECT_EQ(format_tensor(a),
            "Columns 1 to 6\n"
            " 1000000001  1000000002  1000000003  1000000004  1000000005  1000000006\n"
            " 2000000001  2000000002  2000000003  2000000004  2000000005  2000000006\n"
            "\n"
            "Columns 7 to 8\n"
            " 1000000007  1000000008\n"
            " 2000000007  2000000008\n"
            "[i64 tensor of size 2x8]");
}

TEST(TensorFormat, WideVectorsSplitWithTheScaleInEachBlock) {
  Array a = Array::empty({12}, DType::f64);
  for (int64_t i = 0; i < 12; i++) a.data<double>()[i] = (static_cast<double>(i) + 0.5) * 1e-5;
  // The longest line, 10 cells of 7 plus 9 separators, is 79 characters.
  EXPECT_EQ(format_tensor(a),
            "Columns 1 to 10\n"
            "1e-04 *\n"
            " 0.0500  0.1500  0.2500  0.3500  0.4500  0.5500  0.6500  0.7500  0.8500  0.9500\n"
            "\n"
            "Columns 11 to 12\n"
            "1e-04 *\n"
            " 1.0500  1.1500\n"
            "[f64 tensor of size 12]");
}

TEST(TensorFormat, BigMatricesAreElided) {
  EXPECT_EQ(format_tensor(iota<int64_t>({40, 40})),
            "    0     1     2  ...    37    38    39\n"
            "   40    41    42  ...    77    78    79\n"
            "   80    81    82  ...   117   118   119\n"
            " ...\n"
            " 1480  1481  1482  ...  1517  1518  1519\n"
            " 1520  1521  1522  ...  1557  1558  1559\n"
            " 1560  1561  1562  ...  1597  1598  1599\n"
            "[i64 tensor of size 40x40]");
}

TEST(TensorFormat, BigVectorsAreElided) {
  EXPECT_EQ(format_tensor(iota<float>({2000})),
            "    0     1     2  ...  1997  1998  1999\n"
            "[f32 tensor of size 2000]");
  // 1000 elements are still printed in full.
  EXPECT_EQ(std::string::npos, format_tensor(iota<int32_t>({1000})).find("..."));
}

TEST(TensorFormat, ElidedFormatDependsOnlyOnPrintedElements) {
  Array a = filled<double>({1001}, 0.5);
  a.data<double>()[500] = 1e30;
  EXPECT_EQ(format_tensor(a),
            " 0.5000  0.5000  0.5000  ...  0.5000  0.5000  0.5000\n"
            "[f64 tensor of size 1001]");
}

TEST(TensorFormat, BigSlicedTensorsElideSlices) {
  const std::string row = "  1  1  1  ...  1  1  1\n";
  EXPECT_EQ(format_tensor(filled<float>({7, 1, 200}, 1.0f)),
            "(1,.,.) = \n" + row + "\n(2,.,.) = \n" + row + "\n(3,.,.) = \n" + row +
                "\n"
                "...\n"
                "\n"
                "(5,.,.) = \n" +
                row + "\n(6,.,.) = \n" + row + "\n(7,.,.) = \n" + row +
                "[f32 tensor of size 7x1x200]");
}

TEST(TensorFormat, TransposedViewsPrintLogicalValues) {
  Array a = make_array<int64_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(format_tensor(a.transposed(0, 1)),
            " 1  4\n"
            " 2  5\n"
            " 3  6\n"
            "[i64 tensor of size 3x2]");
}

TEST(TensorFormat, NarrowedViewsHonourTheOffset) {
  EXPECT_EQ(format_tensor(iota<int32_t>({3, 4}).narrowed(1, 1, 2)),
            "  1   2\n"
            "  5   6\n"
            "  9  10\n"
            "[i32 tensor of size 3x2]");
}

TEST(TensorFormat, BroadcastViewsPrintLogicalValues) {
  Array row = make_array<int32_t>({1, 3}, {7, 8, 9});
  EXPECT_EQ(format_tensor(row.expanded({2, 3})),
            " 7  8  9\n"
            " 7  8  9\n"
            "[i32 tensor of size 2x3]");
}

TEST(TensorFormat, HugeBroadcastViewPrintsWithoutScanning) {
  // 10^12 logical elements over one stored float.
  Array one = make_array<float>({1, 1}, {1.5f});
  const std::string row = " 1.5000  1.5000  1.5000  ...  1.5000  1.5000  1.5000\n";
  EXPECT_EQ(format_tensor(one.expanded({1000000, 1000000})),
            row + row + row + " ...\n" + row + row + row + "[f32 tensor of size 1000000x1000000]");
}

TEST(TensorFormat, EightDimensionsOfExtentOne) {
  EXPECT_EQ(format_tensor(make_array<float>({1, 1, 1, 1, 1, 1, 1, 1}, {3.25f})),
            "(1,1,1,1,1,1,.,.) = \n"
            "  3.2500\n"
            "[f32 tensor of size 1x1x1x1x1x1x1x1]");
}

TEST(TensorFormat, ExtremeIntegers) {
  EXPECT_EQ(format_tensor(make_array<int64_t>(
                {2}, {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()})),
            "-9223372036854775808  9223372036854775807\n"
            "[i64 tensor of size 2]");
}

// Every dtype and many shapes print something ending in the footer.
TEST(TensorFormat, NeverFailsOnAnyShapeOrDtype) {
  const Shape shapes[] = {{},
                          {1},
                          {7},
                          {1001},
                          {3, 0},
                          {2, 2, 2, 2, 2, 2, 2, 2},
                          {3, 3, 3, 3, 3, 3, 3},
                          {1, 2000},
                          {2000, 1},
                          {8, 8, 8, 8}};
  for (DType dtype : {DType::boolean, DType::i32, DType::i64, DType::f32, DType::f64}) {
    for (const Shape& shape : shapes) {
      Array a = Array::empty(shape, dtype);
      std::fill_n(static_cast<char*>(a.raw_data()), a.numel() * dtype_size(dtype), 1);
      const std::string text = format_tensor(a);
      const std::string footer =
          shape.empty() ? "with no dimension]" : "of size " + shape_footer_string(shape) + "]";
      EXPECT_TRUE(text.ends_with(footer)) << text;
    }
  }
}

}  // namespace
}  // namespace lazylua
