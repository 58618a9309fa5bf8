// passes_test.cpp - the optimization passes: each rule rewrites where it is
// exact and only there, and optimize() keeps every output bit for bit (NaN,
// inf and -0 included) on hand-made and on random programs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>

#include "compiler/cse.h"
#include "compiler/dce.h"
#include "compiler/fold_constants.h"
#include "compiler/passes.h"
#include "compiler/simplify.h"
#include "tensor/tensor.h"

namespace lazylua::compiler {
namespace {

// ---- Building programs by hand ----

// Appends instructions whose dtype and shape come from the eager op rules
// (run in meta mode, as recording does).
class Maker {
 public:
  int parameter(DType dtype, const Shape& shape) { return leaf(Op::parameter, dtype, shape); }
  int scalar(DType dtype) { return leaf(Op::scalar, dtype, Shape{}); }
  int constant(double value, DType dtype) {
    Instruction instruction;
    instruction.op = Op::constant;
    instruction.dtype = dtype;
    instruction.constant = is_floating(dtype)
                               ? ops::Scalar::from_double(value)
                               : ops::Scalar::from_integer(static_cast<int64_t>(value));
    return push(instruction);
  }
  int op(Op op, uint8_t sub_op, std::vector<int> inputs, const Attrs& attrs = {},
         DType dtype = DType::f32, const Shape& shape = {}) {
    Instruction instruction;
    instruction.op = op;
    instruction.sub_op = sub_op;
    instruction.attrs = attrs;
    instruction.dtype = dtype;
    instruction.shape = shape;
    instruction.inputs = std::move(inputs);
    std::vector<Array> metas;
    MetaScope scope;
    for (int input : instruction.inputs) {
      metas.push_back(
          Array::empty(program.instructions[input].shape, program.instructions[input].dtype));
    }
    const Array result = evaluate_instruction(instruction, metas);
    instruction.dtype = result.dtype;
    instruction.shape = result.shape;
    return push(instruction);
  }
  int unary(UnaryOp op_kind, int x) { return op(Op::unary, static_cast<uint8_t>(op_kind), {x}); }
  int binary(BinaryOp op_kind, int a, int b) {
    return op(Op::binary, static_cast<uint8_t>(op_kind), {a, b});
  }
  int cast(int x, DType dtype) { return op(Op::cast, 0, {x}, {}, dtype); }
  int reshape(int x, const Shape& shape) { return op(Op::reshape, 0, {x}, {}, DType::f32, shape); }
  int expand(int x, const Shape& shape) { return op(Op::expand, 0, {x}, {}, DType::f32, shape); }
  int permute(int x, const Attrs& order) { return op(Op::permute, 0, {x}, order); }
  int slice(int x, int64_t dim, int64_t start, int64_t length) {
    return op(Op::slice, 0, {x}, {dim, start, length});
  }
  int reduce(ReduceOp op_kind, int x, int64_t dim, bool keepdim) {
    return op(Op::reduce, static_cast<uint8_t>(op_kind), {x}, {dim, keepdim ? 1 : 0});
  }
  Program finish(std::vector<int> outputs) {
    program.outputs = std::move(outputs);
    return program;
  }

  Program program;

 private:
  int leaf(Op op, DType dtype, const Shape& shape) {
    Instruction instruction;
    instruction.op = op;
    instruction.dtype = dtype;
    instruction.shape = shape;
    instruction.input_index = program.input_count++;
    return push(instruction);
  }
  int push(const Instruction& instruction) {
    program.instructions.push_back(instruction);
    return static_cast<int>(program.instructions.size()) - 1;
  }
};

// ---- Random inputs, and comparing bits ----

template <typename T>
T random_value(std::mt19937& rng) {
  std::uniform_int_distribution<int> pick(0, 19);
  const int choice = pick(rng);
  if constexpr (std::is_same_v<T, bool>) {
    return choice % 2 == 0;
  } else if constexpr (std::is_integral_v<T>) {
    if (choice == 0) return std::numeric_limits<T>::min();
    if (choice == 1) return std::numeric_limits<T>::max();
    return static_cast<T>(std::uniform_int_distribution<int>(-6, 6)(rng));
  } else {
    switch (choice) {
      case 0:
        return std::numeric_limits<T>::quiet_NaN();
      case 1:
        return -std::numeric_limits<T>::quiet_NaN();
      case 2:
        return std::numeric_limits<T>::infinity();
      case 3:
        return -std::numeric_limits<T>::infinity();
      case 4:
        return T(0);
      case 5:
        return -T(0);
      case 6:
        return std::numeric_limits<T>::denorm_min() * 3;
      case 7:
        return T(1);
      default:
        return static_cast<T>(std::uniform_real_distribution<double>(-4, 4)(rng));
    }
  }
}

Array random_array(DType dtype, const Shape& shape, std::mt19937& rng) {
  Array array = Array::empty(shape, dtype);
  visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* data = array.data<T>();
    for (int64_t i = 0; i < array.numel(); i++) data[i] = random_value<T>(rng);
  });
  return array;
}

// One random array per run input of the program (parameters and scalars).
std::vector<Array> random_inputs(const Program& program, std::mt19937& rng) {
  std::vector<Array> inputs(static_cast<size_t>(program.input_count));
  for (const Instruction& instruction : program.instructions) {
    if (instruction.op == Op::parameter || instruction.op == Op::scalar) {
      inputs[instruction.input_index] = random_array(instruction.dtype, instruction.shape, rng);
    }
  }
  return inputs;
}

// Like interpret, but with every value made contiguous. The eager kernels
// choose a float sum's order by layout (a transposed view is summed in
// another order than a dense array), and removing a view changes layouts;
// the passes promise values, so the random test compares dense runs.
std::vector<Array> run_dense(const Program& program, const std::vector<Array>& inputs) {
  std::vector<Array> values(program.instructions.size());
  for (size_t i = 0; i < program.instructions.size(); i++) {
    const Instruction& instruction = program.instructions[i];
    if (instruction.op == Op::parameter || instruction.op == Op::scalar) {
      values[i] = inputs.at(static_cast<size_t>(instruction.input_index));
      continue;
    }
    std::vector<Array> arguments;
    for (int input : instruction.inputs) arguments.push_back(values[input]);
    values[i] = contiguous(evaluate_instruction(instruction, arguments));
  }
  std::vector<Array> outputs;
  for (int output : program.outputs) outputs.push_back(values[output]);
  return outputs;
}

void expect_same_bits(const std::vector<Array>& expected, const std::vector<Array>& actual,
                      const std::string& what) {
  ASSERT_EQ(expected.size(), actual.size()) << what;
  for (size_t k = 0; k < expected.size(); k++) {
    ASSERT_EQ(expected[k].dtype, actual[k].dtype) << what << " output " << k;
    ASSERT_EQ(expected[k].shape, actual[k].shape) << what << " output " << k;
    const Array a = contiguous(expected[k]);
    const Array b = contiguous(actual[k]);
    const size_t size = static_cast<size_t>(dtype_size(a.dtype));
    for (int64_t i = 0; i < a.numel(); i++) {
      const char* x = static_cast<const char*>(a.raw_data()) + static_cast<size_t>(i) * size;
      const char* y = static_cast<const char*>(b.raw_data()) + static_cast<size_t>(i) * size;
      if (std::memcmp(x, y, size) != 0) {
        const double xv =
            ops::cast(ops::select(ops::reshape(a, Shape{a.numel()}), 0, i), DType::f64)
                .data<double>()[0];
        const double yv =
            ops::cast(ops::select(ops::reshape(b, Shape{b.numel()}), 0, i), DType::f64)
                .data<double>()[0];
        FAIL() << what << " output " << k << " element " << i << ": " << xv << " vs " << yv;
      }
    }
  }
}

int count_ops(const Program& program, Op op) {
  int count = 0;
  for (const Instruction& instruction : program.instructions) count += instruction.op == op;
  return count;
}

// Optimizes and checks: never larger, same bits as before on random inputs
// (through interpret, the reference interpreter).
Program optimized_checked(const Program& program, int input_sets = 8) {
  Program optimized = optimize(program, 0);
  EXPECT_LE(optimized.instructions.size(), program.instructions.size());
  EXPECT_EQ(optimized.input_count, program.input_count);
  std::mt19937 rng(1234);
  for (int k = 0; k < input_sets; k++) {
    const std::vector<Array> inputs = random_inputs(program, rng);
    const std::string context =
        "input set " + std::to_string(k) + "\n" + program.text() + "became\n" + optimized.text();
    // A cast of NaN or inf to an integer fails: then the optimized program
    // must fail alike.
    std::vector<Array> expected;
    try {
      expected = interpret(program, inputs);
    } catch (const Error& error) {
      try {
        interpret(optimized, inputs);
        ADD_FAILURE() << "the optimized program does not fail with: " << error.what() << context;
      } catch (const Error& optimized_error) {
        EXPECT_STREQ(optimized_error.what(), error.what()) << context;
      }
      continue;
    }
    expect_same_bits(expected, interpret(optimized, inputs), context);
  }
  return optimized;
}

int size(const Program& program) {
  return static_cast<int>(program.instructions.size());
}

// ---- CSE and DCE ----

TEST(Cse, MergesWhatComputesTheSameAndKeepsDistinctInputs) {
  Maker m;
  const int x = m.parameter(DType::f32, {2, 3});
  const int y = m.parameter(DType::f32, {2, 3});  // another run input, though alike
  const int s1 = m.scalar(DType::f32);
  const int s2 = m.scalar(DType::f32);
  const int one_a = m.constant(1, DType::f32);
  const int one_b = m.constant(1, DType::f32);
  const int one_i = m.constant(1, DType::i64);  // another dtype
  const int a = m.binary(BinaryOp::add, x, one_a);
  const int b = m.binary(BinaryOp::add, x, one_b);  // = a
  const int c = m.binary(BinaryOp::add, y, one_b);
  const int d = m.op(Op::binary, static_cast<uint8_t>(BinaryOp::add), {x, one_b}, {7});  // = a
  const int e = m.binary(BinaryOp::mul, x, s1);
  const int f = m.binary(BinaryOp::mul, x, s2);  // another scalar input
  const int g = m.binary(BinaryOp::mul, x, one_i);
  const int sum0 = m.reduce(ReduceOp::sum, a, 0, false);
  const int sum1 = m.reduce(ReduceOp::sum, b, 1, false);  // another dim
  const Program program = m.finish({a, b, c, d, e, f, g, sum0, sum1});
  const Program merged = cse(program);
  EXPECT_EQ(size(merged), size(program) - 3) << merged.text();  // one_b, b, d
  EXPECT_EQ(merged.outputs[0], merged.outputs[1]);
  EXPECT_EQ(merged.outputs[0], merged.outputs[3]);
  EXPECT_NE(merged.outputs[0], merged.outputs[2]);
  EXPECT_NE(merged.outputs[4], merged.outputs[5]);
  EXPECT_NE(merged.outputs[7], merged.outputs[8]);
  std::mt19937 rng(7);
  const std::vector<Array> inputs = random_inputs(program, rng);
  expect_same_bits(interpret(program, inputs), interpret(merged, inputs), "cse");
}

TEST(Dce, DropsWhatNoOutputNeedsAndKeepsInputNumbers) {
  Maker m;
  const int unused = m.parameter(DType::f32, {2});
  const int x = m.parameter(DType::f32, {2});
  const int dead = m.unary(UnaryOp::exp, x);
  const int live = m.unary(UnaryOp::neg, x);
  m.binary(BinaryOp::add, dead, unused);
  const Program program = m.finish({live});
  const Program pruned = dce(program);
  ASSERT_EQ(size(pruned), 2) << pruned.text();
  EXPECT_EQ(pruned.instructions[0].input_index, 1);  // x is still run input 1
  EXPECT_EQ(pruned.input_count, 2);
  std::mt19937 rng(8);
  const std::vector<Array> inputs = random_inputs(program, rng);
  expect_same_bits(interpret(program, inputs), interpret(pruned, inputs), "dce");
}

// ---- Constant folding ----

TEST(Fold, FoldsZeroAndOneResultsOnly) {
  Maker m;
  const int one = m.constant(1, DType::i64);
  const int zero = m.constant(0, DType::i64);
  const int one_f = m.constant(1, DType::f32);
  const int sum = m.binary(BinaryOp::add, one, zero);                        // 1: folds
  const int two = m.binary(BinaryOp::add, one_f, one_f);                     // 2: no literal
  const int back = m.binary(BinaryOp::sub, two, one_f);                      // 1 again: folds
  const int equal = m.binary(BinaryOp::eq, one, zero);                       // false: folds
  const int ones = m.expand(one_f, {3});                                     //
  const int product = m.binary(BinaryOp::mul, ones, one_f);                  // = ones
  const int division = m.binary(BinaryOp::floordiv, one, zero);              // an Error at run time
  const int exponential = m.unary(UnaryOp::exp, m.constant(0, DType::f32));  // not exact: kept
  const Program program = m.finish({sum, two, back, equal, product, exponential, division});
  const Program folded = fold_constants(program);
  const Instruction& first = folded.instructions[folded.outputs[0]];
  EXPECT_EQ(first.op, Op::constant);
  EXPECT_EQ(first.dtype, DType::i64);
  EXPECT_EQ(first.constant.value, 1);
  EXPECT_EQ(folded.instructions[folded.outputs[1]].op, Op::binary);
  EXPECT_EQ(folded.instructions[folded.outputs[2]].op, Op::constant);
  EXPECT_EQ(folded.instructions[folded.outputs[2]].dtype, DType::f32);
  EXPECT_EQ(folded.instructions[folded.outputs[3]].op, Op::constant);
  EXPECT_EQ(folded.instructions[folded.outputs[3]].dtype, DType::boolean);
  EXPECT_EQ(folded.instructions[folded.outputs[4]].op, Op::expand);
  EXPECT_EQ(folded.instructions[folded.outputs[5]].op, Op::unary);
  EXPECT_EQ(folded.instructions[folded.outputs[6]].op, Op::binary);
  EXPECT_EQ(count_ops(dce(folded), Op::binary), 2) << folded.text();  // 1 + 1 and 1 // 0
  EXPECT_THROW(interpret(folded, {}), Error);  // still fails where eager fails
}

TEST(Fold, ReductionsOfBroadcastConstants) {
  Maker m;
  const int one = m.constant(1, DType::f32);
  const int zero = m.constant(0, DType::i32);
  // max of a million copies of 1 is 1, known without computing anything.
  const int max = m.reduce(ReduceOp::max, m.expand(one, {1000, 1000}), -1, false);
  const int zeros = m.reduce(ReduceOp::sum, m.expand(zero, {4, 5}), 1, false);  // [4] of 0
  const int four = m.reduce(ReduceOp::sum, m.expand(one, {4}), 0, false);       // 4: kept
  // [1] of false: a new constant false and its expand, in place of the
  // reduction and of the expand of zero that only it used.
  const int any = m.reduce(ReduceOp::any, m.expand(zero, {3}), 0, true);
  const Program program = m.finish({max, zeros, four, any});
  const Program folded = dce(fold_constants(program));
  EXPECT_EQ(folded.instructions[folded.outputs[0]].op, Op::constant);
  EXPECT_EQ(folded.instructions[folded.outputs[1]].op, Op::expand);
  EXPECT_EQ(folded.instructions[folded.outputs[2]].op, Op::reduce);
  EXPECT_EQ(folded.instructions[folded.outputs[3]].op, Op::expand);
  expect_same_bits(interpret(program, {}), interpret(folded, {}), "folded reductions");
}

// ---- Simplification: one row per rule, where it fires and where it must not ----

struct RuleCase {
  const char* name;
  Program (*build)();
  bool rewritten;  // the optimized program is smaller
};

// x (of x_dtype, x_shape) op c, or c op x, with c the constant `value`
// broadcast to c_shape.
Program binary_case(BinaryOp op, DType x_dtype, const Shape& x_shape, double value, DType c_dtype,
                    bool constant_left = false, const Shape& c_shape = {}) {
  Maker m;
  const int x = m.parameter(x_dtype, x_shape);
  int c = m.constant(value, c_dtype);
  if (c_shape.rank() > 0) c = m.expand(c, c_shape);
  return m.finish({constant_left ? m.binary(op, c, x) : m.binary(op, x, c)});
}

Program unary_twice(UnaryOp op, DType dtype) {
  Maker m;
  return m.finish({m.unary(op, m.unary(op, m.parameter(dtype, {2, 3})))});
}

Program cast_twice(DType from, DType middle, DType to) {
  Maker m;
  return m.finish({m.cast(m.cast(m.parameter(from, {5}), middle), to)});
}

Program reduce_expanded(ReduceOp op, DType dtype, const Shape& x_shape, const Shape& shape,
                        int64_t dim, bool keepdim) {
  Maker m;
  return m.finish({m.reduce(op, m.expand(m.parameter(dtype, x_shape), shape), dim, keepdim)});
}

Program reduce_plain(ReduceOp op, DType dtype, const Shape& shape, int64_t dim) {
  Maker m;
  return m.finish({m.reduce(op, m.parameter(dtype, shape), dim, false)});
}

using BO = BinaryOp;
using D = DType;
constexpr double kNegativeZero = -0.0;

const RuleCase kRuleCases[] = {
    // x*1, x/1, x-0, x+0 and friends.
    {"f32 x*1",
     [] {
       return binary_case(BO::mul, D::f32, {2, 3}, 1, D::f32);
     },
     true},
    {"f64 1*x", [] { return binary_case(BO::mul, D::f64, {4}, 1, D::f64, true); }, true},
    {"f32 x/1", [] { return binary_case(BO::div, D::f32, {3}, 1, D::f32); }, true},
    {"i64 x/1 is cast(x, f32)", [] { return binary_case(BO::div, D::i64, {3}, 1, D::f32); }, true},
    {"i64 x * f32 1 is cast(x)", [] { return binary_case(BO::mul, D::i64, {3}, 1, D::f32); }, true},
    {"f32 x-0", [] { return binary_case(BO::sub, D::f32, {3}, 0, D::f32); }, true},
    {"f32 x-(-0) is not x", [] { return binary_case(BO::sub, D::f32, {3}, kNegativeZero, D::f32); },
     false},
    {"f32 x+0 is not x (-0+0)", [] { return binary_case(BO::add, D::f32, {3}, 0, D::f32); }, false},
    {"f32 x+(-0)", [] { return binary_case(BO::add, D::f32, {3}, kNegativeZero, D::f32); }, true},
    {"i32 0+x", [] { return binary_case(BO::add, D::i32, {3}, 0, D::i32, true); }, true},
    {"i64 x + f32 0 (x is never -0)", [] { return binary_case(BO::add, D::i64, {3}, 0, D::f32); },
     true},
    {"bool x + bool 0", [] { return binary_case(BO::add, D::boolean, {3}, 0, D::boolean); }, true},
    {"i64 x[3] + 0[2,3] is expand(x)",
     [] {
       return binary_case(BO::add, D::i64, {3}, 0, D::i64, false, {2, 3});
     },
     true},
    {"i32 x[3] + f32 0[2,3] is expand(cast(x)) (the zeros die)",
     [] {
       return binary_case(BO::add, D::i32, {3}, 0, D::f32, false, {2, 3});
     },
     true},
    {"i32 x[3] + f32 0[2,3] when the zeros are needed too",
     [] {
       Maker m;
       const int x = m.parameter(D::i32, {3});
       const int zeros = m.expand(m.constant(0, D::f32), {2, 3});
       return m.finish({m.binary(BO::add, x, zeros), zeros});
     },
     false},
    {"i64 x//1", [] { return binary_case(BO::floordiv, D::i64, {3}, 1, D::i64); }, true},
    {"f32 x//1 is floor(x)", [] { return binary_case(BO::floordiv, D::f32, {3}, 1, D::f32); },
     false},
    {"i32 x^1", [] { return binary_case(BO::pow, D::i32, {3}, 1, D::i32); }, true},
    {"f32 x^1 (not promised by pow)", [] { return binary_case(BO::pow, D::f32, {3}, 1, D::f32); },
     false},
    {"f32 x and true", [] { return binary_case(BO::logical_and, D::f32, {3}, 1, D::boolean); },
     true},
    {"bool x or false", [] { return binary_case(BO::logical_or, D::boolean, {3}, 0, D::boolean); },
     true},
    // x*0 and other absorbing constants.
    {"i64 x*0",
     [] {
       return binary_case(BO::mul, D::i64, {2, 3}, 0, D::i64);
     },
     true},
    {"bool x*0", [] { return binary_case(BO::mul, D::boolean, {3}, 0, D::boolean); }, true},
    {"f32 x*0 (NaN*0, -1*0)", [] { return binary_case(BO::mul, D::f32, {3}, 0, D::f32); }, false},
    {"i32 x * f32 0 (-1*0 = -0)", [] { return binary_case(BO::mul, D::i32, {3}, 0, D::f32); },
     false},
    {"i64 x%1", [] { return binary_case(BO::mod, D::i64, {3}, 1, D::i64); }, true},
    {"f32 x%1", [] { return binary_case(BO::mod, D::f32, {3}, 1, D::f32); }, false},
    {"f32 x^0 (pow(NaN, 0) = 1)", [] { return binary_case(BO::pow, D::f32, {3}, 0, D::f32); },
     true},
    {"f32 x and false", [] { return binary_case(BO::logical_and, D::f32, {3}, 0, D::boolean); },
     true},
    // 0 - x.
    {"i64 0-x", [] { return binary_case(BO::sub, D::i64, {3}, 0, D::i64, true); }, true},
    {"f32 0-x (0-0 = +0)", [] { return binary_case(BO::sub, D::f32, {3}, 0, D::f32, true); },
     false},
    {"f32 (-0)-x (neg flips a NaN's sign bit)",
     [] { return binary_case(BO::sub, D::f32, {3}, kNegativeZero, D::f32, true); }, false},
    // Unary ops twice.
    {"f32 --x", [] { return unary_twice(UnaryOp::neg, D::f32); }, true},
    {"i32 --x", [] { return unary_twice(UnaryOp::neg, D::i32); }, true},
    {"bool --x is cast(x, i64)", [] { return unary_twice(UnaryOp::neg, D::boolean); }, true},
    {"f32 not not x", [] { return unary_twice(UnaryOp::logical_not, D::f32); }, true},
    {"f32 abs(abs(x))", [] { return unary_twice(UnaryOp::abs, D::f32); }, true},
    {"f64 relu(relu(x))", [] { return unary_twice(UnaryOp::relu, D::f64); }, true},
    {"f32 floor(floor(x))", [] { return unary_twice(UnaryOp::floor, D::f32); }, true},
    {"f32 exp(exp(x))", [] { return unary_twice(UnaryOp::exp, D::f32); }, false},
    // Casts.
    {"cast to the same dtype",
     [] {
       Maker m;
       return m.finish({m.cast(m.parameter(D::f32, {3}), D::f32)});
     },
     true},
    {"i32 -> i64 -> i32", [] { return cast_twice(D::i32, D::i64, D::i32); }, true},
    {"i32 -> f64 -> f32", [] { return cast_twice(D::i32, D::f64, D::f32); }, true},
    {"bool -> f32 -> i32", [] { return cast_twice(D::boolean, D::f32, D::i32); }, true},
    {"f64 -> f32 -> f64 rounds", [] { return cast_twice(D::f64, D::f32, D::f64); }, false},
    {"f32 -> i32 -> f32 truncates", [] { return cast_twice(D::f32, D::i32, D::f32); }, false},
    {"i64 -> f64 -> i64 rounds", [] { return cast_twice(D::i64, D::f64, D::i64); }, false},
    // Views.
    {"double transpose",
     [] {
       Maker m;
       return m.finish({m.permute(m.permute(m.parameter(D::f32, {2, 3}), {1, 0}), {1, 0})});
     },
     true},
    {"permute chain",
     [] {
       Maker m;
       return m.finish(
           {m.permute(m.permute(m.parameter(D::i32, {2, 3, 4}), {1, 2, 0}), {1, 0, 2})});
     },
     true},
    {"identity permute",
     [] {
       Maker m;
       return m.finish({m.permute(m.parameter(D::f32, {2, 3}), {0, 1})});
     },
     true},
    {"reshape chain",
     [] {
       Maker m;
       return m.finish({m.reshape(m.reshape(m.parameter(D::f32, {2, 3}), {6}), {3, 2})});
     },
     true},
    {"reshape back to the same shape",
     [] {
       Maker m;
       return m.finish({m.reshape(m.reshape(m.parameter(D::f32, {2, 3}), {6}), {2, 3})});
     },
     true},
    {"expand to the same shape",
     [] {
       Maker m;
       return m.finish({m.expand(m.parameter(D::f32, {2, 3}), {2, 3})});
     },
     true},
    {"expand chain",
     [] {
       Maker m;
       return m.finish({m.expand(m.expand(m.parameter(D::f32, {3, 1}), {3, 4}), {2, 3, 4})});
     },
     true},
    {"slice of the whole extent",
     [] {
       Maker m;
       return m.finish({m.slice(m.parameter(D::f32, {4, 3}), 0, 0, 4)});
     },
     true},
    {"slice chain",
     [] {
       Maker m;
       return m.finish({m.slice(m.slice(m.parameter(D::f32, {6, 3}), 0, 1, 4), 0, 2, 2)});
     },
     true},
    {"slices along two dims stay",
     [] {
       Maker m;
       return m.finish({m.slice(m.slice(m.parameter(D::f32, {6, 3}), 0, 1, 4), 1, 1, 2)});
     },
     false},
    // Reductions of broadcast copies.
    {"max over an expanded dim",
     [] {
       return reduce_expanded(ReduceOp::max, D::f32, {3, 1}, {3, 4}, 1, false);
     },
     true},
    {"min over an expanded dim, keepdim",
     [] {
       return reduce_expanded(ReduceOp::min, D::f64, {3, 1}, {3, 4}, 1, true);
     },
     true},
    {"max over a new leading dim",
     [] {
       return reduce_expanded(ReduceOp::max, D::f32, {3}, {4, 3}, 0, false);
     },
     true},
    {"any over an expanded dim",
     [] {
       return reduce_expanded(ReduceOp::any, D::boolean, {1, 3}, {4, 3}, 0, false);
     },
     true},
    {"max over a real dim",
     [] {
       return reduce_expanded(ReduceOp::max, D::f32, {3, 1}, {3, 4}, 0, false);
     },
     false},
    {"i64 sum over an expanded dim (4*x has no literal)",
     [] {
       return reduce_expanded(ReduceOp::sum, D::i64, {3, 1}, {3, 4}, 1, false);
     },
     false},
    {"f32 mean over an expanded dim",
     [] {
       return reduce_expanded(ReduceOp::mean, D::f32, {3, 1}, {3, 4}, 1, false);
     },
     false},
    {"i32 max of all of an expand",
     [] {
       return reduce_expanded(ReduceOp::max, D::i32, {3, 1}, {3, 4}, -1, false);
     },
     true},
    {"f32 max of all of an expand (order of +0 and -0)",
     [] {
       return reduce_expanded(ReduceOp::max, D::f32, {3, 1}, {3, 4}, -1, false);
     },
     false},
    {"i64 sum over extent 1",
     [] {
       return reduce_plain(ReduceOp::sum, D::i64, {3, 1}, 1);
     },
     true},
    {"f32 prod over extent 1",
     [] {
       return reduce_plain(ReduceOp::prod, D::f32, {3, 1}, 1);
     },
     true},
    {"f32 sum over extent 1 (0 + -0)",
     [] {
       return reduce_plain(ReduceOp::sum, D::f32, {3, 1}, 1);
     },
     false},
    {"f32 mean over extent 1",
     [] {
       return reduce_plain(ReduceOp::mean, D::f32, {1, 3}, 0);
     },
     false},
    // where.
    {"where(c, x, x)",
     [] {
       Maker m;
       const int c = m.parameter(D::boolean, {2, 3});
       const int x = m.parameter(D::f32, {3});
       return m.finish({m.op(Op::where, 0, {c, x, x})});
     },
     true},
    {"where(true, a, b)",
     [] {
       Maker m;
       const int a = m.parameter(D::f32, {2, 3});
       const int b = m.parameter(D::f32, {2, 3});
       return m.finish({m.op(Op::where, 0, {m.constant(1, D::boolean), a, b})});
     },
     true},
    {"where(false, i32 a, f32 b)",
     [] {
       Maker m;
       const int a = m.parameter(D::i32, {2, 3});
       const int b = m.parameter(D::f32, {2, 3});
       return m.finish({m.op(Op::where, 0, {m.constant(0, D::f32), a, b})});
     },
     true},
};

TEST(Simplify, EachRuleFiresOnlyWhereExact) {
  for (const RuleCase& rule_case : kRuleCases) {
    SCOPED_TRACE(rule_case.name);
    const Program program = rule_case.build();
    const Program optimized = optimized_checked(program);
    // A rewrite removes instructions or replaces the output's op (x*1 of
    // an i64 x by the f32 1 becomes cast(x)).
    const Instruction& before = program.instructions[program.outputs[0]];
    const Instruction& after = optimized.instructions[optimized.outputs[0]];
    const bool changed =
        size(optimized) < size(program) || before.op != after.op || before.sub_op != after.sub_op;
    EXPECT_EQ(changed, rule_case.rewritten) << optimized.text();
    EXPECT_LE(size(optimized), size(program));
  }
}

// ---- Random programs, recorded through the lazy API ----

class RandomRecorder {
 public:
  explicit RandomRecorder(uint32_t seed) : rng_(seed), context_(make_ref<Context>()) {
    context_->eager = false;
  }

  // A random program, or nothing if recording made nothing to compute.
  std::optional<Program> record() {
    const int parameters = uniform(1, 3);
    for (int k = 0; k < parameters; k++) {
      pool_.push_back(
          make_tensor(context_.get(), random_array(random_dtype(), random_shape(), rng_)));
    }
    const int steps = uniform(3, 24);
    for (int step = 0; step < steps; step++) {
      try {
        pool_.push_back(random_op());
      } catch (const Error&) {
        // Shapes or dtypes that do not fit: recording refused, as a script would see.
      }
    }
    // The newest tensor and a few others are the outputs.
    std::vector<Tensor> roots;
    const int outputs = uniform(1, 3);
    for (int k = 0; k < outputs; k++) {
      const Tensor& chosen = k == 0 ? pool_.back() : pick();
      roots.push_back(Tensor(new TensorImpl(context_.get(), value_of(chosen))));
    }
    std::vector<TensorImpl*> raw;
    for (const Tensor& root : roots) raw.push_back(root.get());
    const Graph graph = context_->extract(raw);
    if (graph.outputs.empty()) return std::nullopt;
    return program_from_graph(graph);
  }

 private:
  int uniform(int low, int high) { return std::uniform_int_distribution<int>(low, high)(rng_); }
  DType random_dtype() { return static_cast<DType>(uniform(0, kDTypeCount - 1)); }
  Shape random_shape() {
    Shape shape;
    const int rank = uniform(0, 3);
    for (int d = 0; d < rank; d++) shape.push_back(uniform(1, 4));
    return shape;
  }
  // Recent tensors more often, so ops chain.
  const Tensor& pick() {
    const int size = static_cast<int>(pool_.size());
    const int back = std::min(uniform(0, size - 1), uniform(0, size - 1));
    return pool_[static_cast<size_t>(size - 1 - back)];
  }
  ops::Scalar special_number() {
    switch (uniform(0, 3)) {
      case 0:
        return ops::Scalar::from_integer(0);
      case 1:
        return ops::Scalar::from_integer(1);
      case 2:
        return ops::Scalar::from_double(uniform(0, 1) ? 1.0 : 0.0);
      default:
        return ops::Scalar::from_double(-0.0);
    }
  }
  template <typename Op>
  Tensor maybe_twice(const Tensor& x, Op apply) {
    const Tensor once = apply(x);
    return uniform(0, 1) ? apply(once) : once;
  }

  Tensor random_op() {
    const Tensor& x = pick();
    const int rank = x->shape.rank();
    switch (uniform(0, 15)) {
      case 0: {  // tensor op tensor (no integer division: it can fail at run time)
        const BinaryOp ops[] = {BinaryOp::add,     BinaryOp::sub, BinaryOp::mul, BinaryOp::maximum,
                                BinaryOp::minimum, BinaryOp::lt,  BinaryOp::eq};
        return binary(ops[uniform(0, 6)], x, pick());
      }
      case 1:
      case 2: {  // a 0 or 1 on either side: the simplifier's patterns
        const BinaryOp ops[] = {BinaryOp::add, BinaryOp::sub,         BinaryOp::mul,
                                BinaryOp::div, BinaryOp::logical_and, BinaryOp::logical_or,
                                BinaryOp::pow};
        const BinaryOp op = ops[uniform(0, 6)];
        const ops::Scalar number = special_number();
        return uniform(0, 1) || op == BinaryOp::pow ? binary(op, x, number) : binary(op, number, x);
      }
      case 3: {  // x // 1, x % 1 (never by 0: integers would fail)
        const BinaryOp op = uniform(0, 1) ? BinaryOp::floordiv : BinaryOp::mod;
        return binary(op, x, ops::Scalar::from_integer(1));
      }
      case 4: {  // other numbers are scalar inputs
        const ops::Scalar number =
            uniform(0, 1) ? ops::Scalar::from_double(2.5) : ops::Scalar::from_integer(-3);
        const BinaryOp ops[] = {BinaryOp::add, BinaryOp::mul, BinaryOp::div};
        return binary(ops[uniform(0, 2)], x, number);
      }
      case 5: {
        const UnaryOp ops[] = {UnaryOp::neg,         UnaryOp::abs,  UnaryOp::relu, UnaryOp::floor,
                               UnaryOp::logical_not, UnaryOp::sign, UnaryOp::sqrt, UnaryOp::exp};
        const UnaryOp op = ops[uniform(0, 7)];
        return maybe_twice(x, [op](const Tensor& t) { return unary(op, t); });
      }
      case 6: {
        const DType middle = random_dtype();
        const Tensor once = cast(x, middle);
        return uniform(0, 1) ? cast(once, random_dtype()) : once;
      }
      case 7: {  // reshape chains
        const Tensor flat = reshape(x, Shape{x->shape.rank() ? numel(x->shape) : 1});
        return uniform(0, 1) ? reshape(flat, x->shape) : reshape(flat, Shape{1, numel(x->shape)});
      }
      case 8: {  // permutes and transposes, often twice
        std::vector<int> order(static_cast<size_t>(rank));
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), rng_);
        return maybe_twice(x, [&order](const Tensor& t) { return permute(t, order); });
      }
      case 9: {  // narrow (sometimes of the whole extent), select
        if (rank == 0) return unary(UnaryOp::neg, x);
        const int dim = uniform(0, rank - 1);
        const int extent = static_cast<int>(x->shape[dim]);
        if (extent == 0) return unary(UnaryOp::neg, x);
        if (uniform(0, 3) == 0) return select(x, dim, uniform(0, extent - 1));
        const int start = uniform(0, extent - 1);
        const Tensor once = narrow(x, dim, start, uniform(0, extent - start));
        return uniform(0, 1) ? narrow(once, dim, 0, once->shape[dim]) : once;
      }
      case 10:
      case 11: {  // expand, then often a reduction over what was broadcast
        Shape shape = x->shape;
        Tensor source = x;
        for (int d = 0; d < rank; d++) {
          if (shape[d] == 1) shape[d] = uniform(1, 3);
        }
        if (uniform(0, 1) || rank == 0) {
          source = unsqueeze(x, 0);
          shape.insert(0, uniform(1, 3));
        }
        const Tensor expanded = expand(source, shape);
        if (uniform(0, 3) == 0) return expanded;
        const ReduceOp ops[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::mean, ReduceOp::max,
                                ReduceOp::min, ReduceOp::any,  ReduceOp::all};
        const ReduceOp op = ops[uniform(0, 6)];
        const bool all = uniform(0, 4) == 0;
        return reduce(op, expanded, all ? std::nullopt : std::optional<int>(uniform(0, rank)),
                      uniform(0, 1));
      }
      case 12: {  // plain reductions
        const ReduceOp ops[] = {ReduceOp::sum, ReduceOp::max, ReduceOp::prod, ReduceOp::any};
        const std::optional<int> dim = rank == 0 || uniform(0, 3) == 0
                                           ? std::nullopt
                                           : std::optional<int>(uniform(0, rank - 1));
        return reduce(ops[uniform(0, 3)], x, dim, uniform(0, 1));
      }
      case 13: {  // where with a computed or a constant condition
        const Tensor condition =
            uniform(0, 1) ? binary(BinaryOp::lt, x, pick())
                          : scalar_tensor(context_.get(), special_number(), DType::boolean);
        return where(condition, x, uniform(0, 1) ? x : pick());
      }
      case 14: {  // a constant broadcast to a shape, combined with a tensor
        const Tensor constant = scalar_tensor(context_.get(), special_number(), random_dtype());
        const Tensor wide = expand(constant, pick()->shape);
        const BinaryOp ops[] = {BinaryOp::add, BinaryOp::mul, BinaryOp::sub};
        return binary(ops[uniform(0, 2)], x, wide);
      }
      default: {
        if (uniform(0, 1)) return clamp(x, special_number(), ops::Scalar::from_double(2.5));
        return rank ? cumsum(x, uniform(0, rank - 1)) : clamp(x, special_number(), std::nullopt);
      }
    }
  }

  std::mt19937 rng_;
  Ref<Context> context_;
  std::vector<Tensor> pool_;
};

// 20,000 pass as well (about a second); a thousand keep the suite quick.
constexpr uint32_t kRandomPrograms = 1000;

TEST(Passes, RandomProgramsKeepEveryBitAndNeverGrow) {
  int checked = 0;
  int shrunk = 0;
  for (uint32_t seed = 1; seed <= kRandomPrograms; seed++) {
    RandomRecorder recorder(seed);
    const std::optional<Program> program = recorder.record();
    if (!program) continue;
    std::mt19937 rng(seed);
    const std::vector<Array> inputs = random_inputs(*program, rng);
    std::vector<Array> expected;
    try {
      expected = run_dense(*program, inputs);
    } catch (const Error&) {
      continue;  // fails at run time (e.g. an integer overflow check); nothing to compare
    }
    const Program optimized = optimize(*program, 0);

    ASSERT_LE(size(optimized), size(*program)) << "seed " << seed;
    shrunk += size(optimized) < size(*program);
    const std::string what =
        "seed " + std::to_string(seed) + "\n" + program->text() + "became\n" + optimized.text();
    expect_same_bits(expected, run_dense(optimized, inputs), what);
    // Each pass alone too, so a wrong rule is not hidden by another pass.
    expect_same_bits(expected, run_dense(cse(*program), inputs), "cse alone, " + what);
    expect_same_bits(expected, run_dense(fold_constants(*program), inputs), "fold alone, " + what);
    expect_same_bits(expected, run_dense(simplify(*program), inputs), "simplify alone, " + what);
    expect_same_bits(expected, run_dense(dce(*program), inputs), "dce alone, " + what);
    if (HasFatalFailure() || HasNonfatalFailure()) return;
    checked++;
  }
  EXPECT_GT(checked, 900);
  EXPECT_GT(shrunk, 500);  // the rules do fire on recorded programs
}

// ---- From a recorded graph, and the debug dump ----

TEST(Passes, RecordedGraphKeepsItsInputs) {
  Ref<Context> context = make_ref<Context>();
  context->eager = false;
  std::mt19937 rng(3);
  const Tensor x = make_tensor(context.get(), random_array(DType::i64, Shape{2, 3}, rng));
  const Tensor y = make_tensor(context.get(), random_array(DType::f32, Shape{3}, rng));
  // (x^T)^T * 1 + 0 and y / 1 * 2.5: only the scalar 2.5 multiply survives besides the outputs.
  const Tensor twice = transpose(transpose(x, 0, 1), 0, 1);
  const Tensor a = binary(BinaryOp::add, binary(BinaryOp::mul, twice, ops::Scalar::from_integer(1)),
                          ops::Scalar::from_integer(0));
  const Tensor b = binary(BinaryOp::mul, binary(BinaryOp::div, y, ops::Scalar::from_integer(1)),
                          ops::Scalar::from_double(2.5));
  const Tensor sum = binary(BinaryOp::add, a, b);
  const Graph graph = context->extract({sum.get(), b.get()});
  const Program program = program_from_graph(graph);
  const Program optimized = optimize(program, 0);
  EXPECT_EQ(count_ops(optimized, Op::binary), 2) << optimized.text();  // * 2.5 and the add
  EXPECT_EQ(count_ops(optimized, Op::permute), 0) << optimized.text();
  const std::vector<Array> inputs = program_inputs(graph);
  expect_same_bits(interpret(program, inputs), interpret(optimized, inputs), "recorded");
}

// An executor with a bug: every run breaks an invariant.
class BrokenExecutor : public Executor {
 public:
  std::vector<Array> run(const Graph&, Metrics&) override {
    LAZYLUA_ASSERT(1 + 1 == 3);
    return {};
  }
};

TEST(InternalErrors, ReachTheUserNamingTheGraphAndAreNeverUserErrors) {
  for (const int debug_level : {0, 1}) {
    Ref<Context> context = make_ref<Context>();
    context->eager = false;
    context->debug_level = debug_level;
    context->executor = std::make_unique<BrokenExecutor>();
    std::mt19937 rng(3);
    const Tensor x = make_tensor(context.get(), random_array(DType::f32, Shape{4}, rng));
    const Tensor y = unary(UnaryOp::exp, x);
    std::string message;
    try {
      observe(y, SyncCause::item);
      ADD_FAILURE() << "the broken executor did not fail";
    } catch (const Error& error) {
      ADD_FAILURE() << "an internal error became a user error: " << error.what();
    } catch (const InternalError& error) {
      message = error.what();
    }
    EXPECT_NE(message.find("internal error in lazylua"), std::string::npos) << message;
    EXPECT_NE(message.find("1 + 1 == 3"), std::string::npos) << message;
    EXPECT_NE(message.find(
                  fmt::format("running graph {:016x} of 2 nodes", context->extract({y.get()}).key)),
              std::string::npos)
        << message;
    const size_t file = message.find("the graph is in ");
    if (debug_level == 0) {
      EXPECT_NE(message.find("LAZYLUA_DEBUG=1 writes a file"), std::string::npos) << message;
      continue;
    }
    ASSERT_NE(file, std::string::npos) << message;
    const std::string path = message.substr(file + std::string("the graph is in ").size());
    std::ifstream report(path);
    const std::string text((std::istreambuf_iterator<char>(report)),
                           std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("exp"), std::string::npos) << text;
    std::remove(path.c_str());
  }
}

TEST(Passes, DebugLevelTwoDumpsEveryPass) {
  const Program program = binary_case(BinaryOp::mul, DType::f32, {2}, 1, DType::f32);
  testing::internal::CaptureStderr();
  optimize(program, 1);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  testing::internal::CaptureStderr();
  optimize(program, 2);
  const std::string dump = testing::internal::GetCapturedStderr();
  for (const char* pass : {"after cse", "after fold_constants", "after simplify", "after dce"}) {
    EXPECT_NE(dump.find(pass), std::string::npos) << pass << " in\n" << dump;
  }
  EXPECT_NE(dump.find("mul(%0, %1)"), std::string::npos) << dump;  // before simplify
  EXPECT_NE(dump.find("outputs: %0"), std::string::npos) << dump;  // after: x itself
}

}  // namespace
}  // namespace lazylua::compiler
