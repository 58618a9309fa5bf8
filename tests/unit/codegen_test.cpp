// codegen_test.cpp - generated kernels against interpret(): W1, every op and dtype, views,
// reductions, softmax, steps that are not kernels, fusion decisions.
#include "codegen_test_util.h"

namespace lazylua::compiler {
namespace {

// ---- W1 ----

TEST_F(Codegen, W1IsOneKernelWithNoTemporaries) {
  const Shape shape{1000000};
  const Tensor a = data(shape), b = data(shape), c = data(shape);
  const Plan& plan = check(record({w1(a, b, c)}), 4e-6, 1e-6);
  EXPECT_EQ(plan.steps.size(), 1u) << plan.summary;
  EXPECT_EQ(plan.kernel_count, 1);
  EXPECT_EQ(temporary_slots(plan), 0);
  EXPECT_EQ(plan.slots.size(), 5u);  // a, b, c, 0.5 and the result
  EXPECT_NE(plan.summary.find("kernel"), std::string::npos);
}

// The inner loop of the W1 kernel must be vectorized (no scalar libm calls).
TEST_F(Codegen, W1InnerLoopIsVectorized) {
  const Shape shape{4096};
  const Tensor a = data(shape), b = data(shape), c = data(shape);
  const Plan plan = plan_program(record({w1(a, b, c)}).program);
  std::string log;
  ASSERT_TRUE(build(plan.source, "-fopt-info-vec-optimized", &log));
  // Lines of the kernel's body in the source.
  const size_t start = plan.source.find("int lazylua_kernel_0_run");
  const size_t stop = plan.source.find("\n}\n", start);
  ASSERT_NE(start, std::string::npos);
  auto line_of = [&](size_t offset) {
    return 1 + std::count(plan.source.begin(), plan.source.begin() + offset, '\n');
  };
  const int64_t first = line_of(start), last = line_of(stop);
  std::regex vectorized(R"(k\.c:(\d+):\d+: optimized: loop vectorized)");
  bool found = false;
  for (std::sregex_iterator it(log.begin(), log.end(), vectorized), end; it != end; ++it) {
    const int64_t line = std::stoll((*it)[1]);
    found = found || (line >= first && line <= last);
  }
  EXPECT_TRUE(found) << log.substr(0, 3000) << plan.source.substr(start, stop - start);
  const std::string body = plan.source.substr(start, stop - start);
  EXPECT_EQ(std::regex_search(body, std::regex(R"([^_a-z]tanhf?\()")), false) << body;
  if (std::getenv("LAZYLUA_TEST_DUMP")) std::printf("%s\n", body.c_str());
}

// ---- Elementwise ops, every dtype ----

TEST_F(Codegen, EveryUnaryOpOnEveryDtype) {
  const Shape shape{37, 13};  // not a multiple of any vector width
  int programs = 0;
  for (int k = 0; k < kUnaryOpCount; k++) {
    const auto op = static_cast<UnaryOp>(k);
    for (DType dtype : kAllDtypes) {
      const Tensor x = data(shape, dtype, 4, true);
      Tensor y;
      try {
        y = unary(op, x);
      } catch (const Error&) {
        continue;
      }
      const double rtol = is_transcendental(op) ? 1e-5 : 1e-6;
      check(record({y}), rtol, 1e-6, fmt::format("{} {}", unary_op_name(op), dtype_name(dtype)));
      programs++;
    }
  }
  EXPECT_GT(programs, 80);
}

// Both operands of every dtype (promotion, bool logic, int division giving
// f32, comparisons giving bool), broadcasting in both directions.
TEST_F(Codegen, EveryBinaryOpOnEveryDtypePair) {
  int programs = 0;
  for (int k = 0; k <= static_cast<int>(BinaryOp::logical_xor); k++) {
    const auto op = static_cast<BinaryOp>(k);
    for (DType left : kAllDtypes) {
      for (DType right : kAllDtypes) {
        const Tensor a = data({5, 1, 7}, left, 6, true);
        Tensor b = data({3, 1}, right, 6, true);
        if (op == BinaryOp::floordiv || op == BinaryOp::mod || op == BinaryOp::pow) {
          // Integer divisors must not be 0 here (see IntegerDivisionByZero),
          // nor integer exponents negative.
          Array values = random_array({3, 1}, right, rng, 6);
          for (int64_t i = 0; i < values.numel(); i++) {
            if (right == DType::i32)
              values.data<int32_t>()[i] = 1 + std::abs(values.data<int32_t>()[i]);
            if (right == DType::i64)
              values.data<int64_t>()[i] = 1 + std::abs(values.data<int64_t>()[i]);
            if (right == DType::boolean) values.data<uint8_t>()[i] = 1;
          }
          b = make_tensor(context.get(), values);
        }
        Tensor y;
        try {
          y = binary(op, a, b);
        } catch (const Error&) {
          continue;
        }
        const double rtol = op == BinaryOp::pow || op == BinaryOp::atan2 ? 1e-5 : 1e-6;
        check(record({y}), rtol, 1e-6,
              fmt::format("{} {} {}", binary_op_name(op), dtype_name(left), dtype_name(right)));
        programs++;
      }
    }
  }
  EXPECT_GT(programs, 400);
}

// Lua numbers on either side: scalar inputs, and the constants 0 and 1.
TEST_F(Codegen, NumbersOnEitherSide) {
  const double kNumbers[] = {0, 1, 2, -3, 2.5, -0.75};
  const BinaryOp kOps[] = {BinaryOp::add, BinaryOp::sub,     BinaryOp::mul, BinaryOp::div,
                           BinaryOp::pow, BinaryOp::maximum, BinaryOp::lt,  BinaryOp::eq,
                           BinaryOp::mod, BinaryOp::floordiv};
  for (DType dtype : kAllDtypes) {
    for (BinaryOp op : kOps) {
      for (double v : kNumbers) {
        for (int side = 0; side < 2; side++) {
          const Tensor x = data({4, 9}, dtype, 5);
          Tensor y;
          try {
            y = side ? binary(op, number(v), x) : binary(op, x, number(v));
          } catch (const Error&) {
            continue;
          }
          check(record({y}), 1e-5, 1e-6,
                fmt::format("{} {} {} side {}", binary_op_name(op), dtype_name(dtype), v, side));
        }
      }
    }
  }
}

TEST_F(Codegen, WhereCastAndClamp) {
  for (DType a_type : kAllDtypes) {
    for (DType b_type : kAllDtypes) {
      const Tensor condition = data({6, 1}, DType::i32, 2);
      const Tensor y = where(condition, data({6, 5}, a_type), data({5}, b_type));
      check(record({y}), 1e-6, 0,
            fmt::format("where {} {}", dtype_name(a_type), dtype_name(b_type)));
    }
  }
  for (DType from : kAllDtypes) {
    for (DType to : kAllDtypes) {
      if (to == from) continue;  // cast returns the tensor itself
      // Float -> int with NaN, infinities and out-of-range values.
      Array values = random_array({64}, from, rng, 3e9, true);
      const Tensor y = cast(make_tensor(context.get(), values), to);
      check(record({y}), 0, 0, fmt::format("cast {} -> {}", dtype_name(from), dtype_name(to)));
    }
  }
  const std::optional<ops::Scalar> kBounds[] = {std::nullopt,
                                                ops::Scalar::from_integer(-2),
                                                ops::Scalar::from_integer(3),
                                                ops::Scalar::from_double(-1.5),
                                                ops::Scalar::from_double(2.25),
                                                ops::Scalar::from_integer(int64_t{1} << 40),
                                                ops::Scalar::from_double(std::nan(""))};
  for (DType dtype : kAllDtypes) {
    for (const auto& low : kBounds) {
      for (const auto& high : kBounds) {
        if (!low && !high) continue;
        Tensor y;
        try {
          y = clamp(data({3, 17}, dtype, 4, true), low, high);
        } catch (const Error&) {
          continue;
        }
        check(record({y}), 0, 0, fmt::format("clamp {}", dtype_name(dtype)));
      }
    }
  }
}

TEST_F(Codegen, Broadcasting) {
  const std::vector<std::pair<Shape, Shape>> kPairs = {
      {{4, 5}, {5}},      {{4, 5}, {4, 1}}, {{1, 5}, {4, 1}}, {{3, 1, 5}, {1, 4, 1}},
      {{2, 3, 4, 5}, {}}, {{}, {2, 3}},     {{1}, {7, 1}},    {{6, 1, 1}, {1, 1, 9}},
      {{1, 1}, {1, 1}},   {{2, 0, 3}, {3}}, {{4097}, {1}},    {{3, 5000}, {3, 1}}};
  for (const auto& [left, right] : kPairs) {
    const Tensor a = data(left), b = data(right);
    check(record({binary(BinaryOp::sub, a, b), binary(BinaryOp::mul, b, a)}), 1e-6, 1e-6,
          shape_string(left) + shape_string(right));
  }
}

TEST_F(Codegen, ViewsAreIndexArithmetic) {
  const Tensor a = data({6, 8}), b = data({8, 6}), c = data({2, 3, 4}), d = data({6, 8});
  // Transpose and permute of inputs, mixed with contiguous operands.
  check(record({binary(BinaryOp::add, transpose(a, 0, 1), b)}), 1e-6, 1e-6, "transpose");
  check(record({binary(BinaryOp::mul, permute(c, {2, 0, 1}), data({4, 2, 3}))}), 1e-6, 1e-6,
        "permute");
  // Narrow, select, expand, unsqueeze/squeeze.
  check(record({binary(BinaryOp::add, narrow(a, 1, 2, 5), narrow(d, 1, 1, 5))}), 1e-6, 1e-6,
        "narrow");
  check(record({binary(BinaryOp::add, select(a, 0, 3), select(b, 1, 2))}), 1e-6, 1e-6, "select");
  check(record({binary(BinaryOp::add, expand(data({1, 8}), {6, 8}), a)}), 1e-6, 1e-6, "expand");
  check(record({unsqueeze(binary(BinaryOp::add, a, d), 1)}), 1e-6, 1e-6, "unsqueeze");
  // Views of computed values.
  const Tensor sum = binary(BinaryOp::add, a, d);
  check(record({binary(BinaryOp::sub, transpose(sum, 0, 1), b)}), 1e-6, 1e-6, "transpose of sum");
  check(record({narrow(select(unary(UnaryOp::exp, c), 1, 2), 1, 1, 2)}), 1e-5, 1e-6,
        "select and narrow of exp");
  // Reshapes: of inputs (strides), of a transposed input (a copy first),
  // of a computed value (stored first), squeeze-like ones of anything.
  check(record({binary(BinaryOp::add, reshape(a, {4, 12}), data({4, 12}))}), 1e-6, 1e-6,
        "reshape of input");
  check(record({reshape(transpose(a, 0, 1), {48})}), 0, 0, "flatten of transpose");
  const Plan& plan = check(record({reshape(binary(BinaryOp::mul, a, d), {2, 24})}), 1e-6, 1e-6,
                           "reshape of product");
  EXPECT_LE(plan.kernel_count, 2);
  check(record({transpose(reshape(narrow(c, 2, 1, 2), {3, 2, 2}), 0, 2)}), 0, 0,
        "reshape of narrow");
  check(record({binary(BinaryOp::add, squeeze(unsqueeze(sum, 0), 0), a)}), 1e-6, 1e-6,
        "squeeze of unsqueeze");
  // A transposed output is written contiguously.
  check(record({transpose(b, 0, 1)}), 0, 0, "transposed output");
  // Big transposes go in tiles (partial ones at the edges too).
  const Tensor big = data({100, 300});
  check(
      record({transpose(big, 0, 1), binary(BinaryOp::add, transpose(big, 0, 1), data({300, 100}))}),
      1e-6, 1e-6, "tiled transpose");
  check(record({permute(data({5, 40, 70}), {0, 2, 1}), permute(data({33, 3, 65}), {2, 1, 0})}), 0,
        0, "tiled permutes");
}

// cat and in-place writes through views (slice_update, select_update):
// a kernel per region of the output, with the parts' producers fused.
TEST_F(Codegen, CatAndUpdatesWriteRegions) {
  const Tensor a = data({4, 5}), b = data({4, 3}, DType::i32), c = data({4, 1}, DType::f64);
  const Plan& plan = check(
      record({cat({unary(UnaryOp::exp, a), b, c}, 1), stack({a, binary(BinaryOp::mul, a, a)}, 0)}),
      1e-6, 1e-6, "cat");
  EXPECT_EQ(count_steps(plan, Step::Kind::reference), 0) << plan.summary;
  Tensor t = data({6, 8});
  copy_(narrow(t, 1, 2, 3), unary(UnaryOp::exp, data({6, 3})));
  fill_(select(t, 0, 4), ops::Scalar::from_double(2.5));
  binary_(BinaryOp::add, narrow(select(t, 1, 7), 0, 2, 3), ops::Scalar::from_integer(10));
  const Plan& updates = check(record({t}), 1e-6, 1e-6, "updates");
  EXPECT_EQ(count_steps(updates, Step::Kind::reference), 0) << updates.summary;
  Tensor i = data({5, 4}, DType::i64, 9);
  copy_(transpose(i, 0, 1), data({4, 5}, DType::i64, 9));
  binary_(BinaryOp::mul, select(i, 1, 0), ops::Scalar::from_integer(-3));
  check(record({i}), 0, 0, "integer updates");
}

// Issue 12: a cat's same-shaped regions are one C function (the region's
// offset goes into its pointers), also when they are slices of one tensor;
// a long elementwise chain is cut into kernels of bounded size.
TEST_F(Codegen, ManyRegionsShareOneFunction) {
  std::vector<Tensor> parts;
  for (int k = 0; k < 40; k++) parts.push_back(data({3, 2}));
  const Plan& separate = check(record({cat(parts, 1)}), 0, 0, "cat of inputs");
  EXPECT_EQ(separate.kernel_count, 40) << separate.summary;
  EXPECT_EQ(separate.function_count, 1) << separate.summary;
  const Tensor whole = data({50, 4}, DType::i64, 100);
  std::vector<Tensor> slices;
  for (int k = 0; k < 25; k++) slices.push_back(narrow(whole, 0, 49 - 2 * k, 1));
  const Plan& reversed = check(record({cat(slices, 0)}), 0, 0, "cat of slices");
  EXPECT_EQ(reversed.function_count, 1) << reversed.summary;
}

TEST_F(Codegen, LongChainsAreCut) {
  Tensor x = data({37});
  for (int k = 0; k < 1000; k++) {
    x = binary(k % 2 ? BinaryOp::add : BinaryOp::mul, x,
               ops::Scalar::from_double(k % 2 ? 0.25 : 0.5));
  }
  const Plan& plan = check(record({reduce(ReduceOp::sum, x, 0, false)}), 1e-5, 1e-5, "chain");
  EXPECT_GE(plan.kernel_count, 4) << plan.summary;
  EXPECT_LE(plan.function_count, 4) << plan.summary;
}

// ---- Steps that are not kernels ----

TEST_F(Codegen, MatmulAndReferenceStepsBetweenKernels) {
  const Tensor x = data({16, 32}), w = data({24, 32}), bias = data({24});
  const Tensor h = unary(UnaryOp::relu, binary(BinaryOp::add, matmul(x, transpose(w, 0, 1)), bias));
  // Softmax over a dim other than the last has no kernel: an eager step.
  const Tensor c = softmax(h, 0, false);
  const Tensor out = binary(BinaryOp::mul, c, ops::Scalar::from_double(0.5));
  const Plan& plan = check(record({out}), 1e-5, 1e-5);
  EXPECT_EQ(count_steps(plan, Step::Kind::matmul), 1) << plan.summary;
  EXPECT_EQ(count_steps(plan, Step::Kind::reference), 1) << plan.summary;
  EXPECT_GE(count_steps(plan, Step::Kind::kernel), 2) << plan.summary;
  // Indexing ops read their input at computed positions, mixed with kernels.
  const Tensor index = make_tensor(context.get(), random_array({5}, DType::i64, rng, 0));
  const Tensor picked = index_select(unary(UnaryOp::exp, x), 0,
                                     binary(BinaryOp::add, index, ops::Scalar::from_integer(3)));
  check(record({binary(BinaryOp::mul, picked, picked), cat({x, x}, 0)}), 1e-5, 1e-6, "indexing");
}

TEST_F(Codegen, IdenticalKernelsShareOneFunction) {
  // Two layers' updates: same shapes, same ops, other data.
  const Tensor w1 = data({64, 32}), g1 = data({64, 32}), w2 = data({64, 32}), g2 = data({64, 32});
  auto update = [](const Tensor& w, const Tensor& g) {
    return binary(BinaryOp::sub, w, binary(BinaryOp::mul, g, ops::Scalar::from_double(0.1)));
  };
  const Tensor a = update(w1, g1), b = update(w2, g2);
  // A reduction in between keeps the two from fusing into one kernel.
  const Tensor total = reduce(ReduceOp::sum, a, std::nullopt, false);
  const Plan& plan = check(record({a, total, b}), 1e-6, 1e-5);
  EXPECT_EQ(count_steps(plan, Step::Kind::kernel), 3) << plan.summary;
  std::vector<std::string> functions;
  for (const Step& step : plan.steps) {
    if (step.kind == Step::Kind::kernel) functions.push_back(step.function);
  }
  ASSERT_EQ(functions.size(), 3u);
  EXPECT_EQ(functions[0], functions[2]) << "the two updates should share their C function";
  EXPECT_NE(functions[0], functions[1]);
  size_t definitions = 0;
  for (size_t at = plan.source.find("(char* const* buffers"); at != std::string::npos;
       at = plan.source.find("(char* const* buffers", at + 1)) {
    definitions++;
  }
  EXPECT_EQ(definitions, 2u) << "one definition per distinct kernel";
}

TEST_F(Codegen, IntegerDivisionByZeroReturnsTheErrorCode) {
  for (DType dtype : {DType::i32, DType::i64}) {
    for (BinaryOp op : {BinaryOp::floordiv, BinaryOp::mod}) {
      Array divisor = random_array({100}, dtype, rng, 5);
      for (int64_t i = 0; i < 100; i++) {
        if (dtype == DType::i32) divisor.data<int32_t>()[i] = i == 77 ? 0 : 3;
        if (dtype == DType::i64) divisor.data<int64_t>()[i] = i == 77 ? 0 : 3;
      }
      const Tensor y = binary(op, data({100}, dtype, 50), make_tensor(context.get(), divisor));
      const Recorded recorded = record({binary(BinaryOp::add, y, ops::Scalar::from_integer(2))});
      const Plan plan = plan_program(recorded.program);
      std::shared_ptr<Library> library = build(plan.source);
      ASSERT_TRUE(library);
      int instruction = -1;
      for (size_t i = 0; i < recorded.program.instructions.size(); i++) {
        if (recorded.program.instructions[i].op == Op::binary &&
            recorded.program.instructions[i].sub_op == static_cast<uint8_t>(op)) {
          instruction = static_cast<int>(i);
        }
      }
      const KernelError kind = op == BinaryOp::floordiv ? KernelError::integer_divide_by_zero
                                                        : KernelError::integer_modulo_by_zero;
      for (int pieces : {1, 4}) {
        const Outcome outcome = run_plan(plan, *library, recorded.program, recorded.inputs, pieces);
        EXPECT_EQ(outcome.error, error_code(instruction, kind)) << plan.source;
      }
      EXPECT_THROW(interpret(recorded.program, recorded.inputs), Error);
    }
  }
  // minint // -1 wraps and minint % -1 is 0, without trapping.
  Array minimum = Array::empty({2}, DType::i64);
  minimum.data<int64_t>()[0] = INT64_MIN;
  minimum.data<int64_t>()[1] = 7;
  const Tensor m = make_tensor(context.get(), minimum);
  check(record({binary(BinaryOp::floordiv, m, ops::Scalar::from_integer(-1)),
                binary(BinaryOp::mod, m, ops::Scalar::from_integer(-1))}),
        0, 0, "minint");
}

// ---- Reductions ----

constexpr ReduceOp kAllReduceOps[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::mean, ReduceOp::max,
                                      ReduceOp::min, ReduceOp::any,  ReduceOp::all};

TEST_F(Codegen, ReductionsOverEveryDimAndAll) {
  for (ReduceOp op : kAllReduceOps) {
    for (DType dtype : kAllDtypes) {
      // prod of many values overflows; keep them near 1 there.
      const double range = op == ReduceOp::prod ? 1.2 : 5;
      const Tensor x = data({6, 5, 7}, dtype, range, op != ReduceOp::prod);
      const Tensor xt = permute(data({7, 6, 5}, dtype, range), {1, 2, 0});
      for (const Tensor& input : {x, xt}) {
        for (int dim = -1; dim < 3; dim++) {
          for (bool keepdim : {false, true}) {
            Tensor y;
            try {
              y = reduce(op, input, dim < 0 ? std::nullopt : std::optional<int>(dim), keepdim);
            } catch (const Error&) {
              continue;
            }
            check(record({y}), 1e-5, 1e-6,
                  fmt::format("{} {} dim {} keepdim {}", reduce_op_name(op), dtype_name(dtype), dim,
                              keepdim));
          }
        }
      }
    }
  }
}

// Long lines, long columns, and everything: the block folds, the column
// accumulators and the partials of a full reduction.
TEST_F(Codegen, LargeReductions) {
  const Tensor x = data({300, 4000});
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::mean, ReduceOp::max, ReduceOp::min}) {
    check(record({reduce(op, x, 0, false), reduce(op, x, 1, true)}), 4000 * 1e-7, 1e-5,
          reduce_op_name(op));
    const Plan& plan = check(record({reduce(op, x, std::nullopt, false)}), 1.2e6 * 1e-7, 1e-3,
                             std::string("all ") + reduce_op_name(op));
    EXPECT_EQ(count_steps(plan, Step::Kind::kernel), 2) << plan.summary;  // partials, then total
    EXPECT_EQ(temporary_slots(plan), 1);
  }
  const Tensor i = data({1000, 1500}, DType::i32, 1000);
  check(record({reduce(ReduceOp::sum, i, std::nullopt, false), reduce(ReduceOp::sum, i, 0, false),
                reduce(ReduceOp::max, transpose(i, 0, 1), 1, false)}),
        0, 0, "i32");
  const Tensor b = data({999, 777}, DType::boolean);
  check(record({reduce(ReduceOp::any, b, 0, false), reduce(ReduceOp::all, b, 1, false),
                reduce(ReduceOp::sum, b, std::nullopt, false)}),
        0, 0, "bool");
  // Empty extents: identities; max/min of nothing are errors when recorded
  // (they have no identity), as in eager mode.
  const Tensor empty = data({4, 0, 3});
  for (ReduceOp op : kAllReduceOps) {
    if (op == ReduceOp::max || op == ReduceOp::min) {
      EXPECT_THROW(reduce(op, empty, 1, false), Error) << reduce_op_name(op);
      continue;
    }
    check(record({reduce(op, empty, 1, false)}), 0, 0, std::string("empty ") + reduce_op_name(op));
  }
}

TEST_F(Codegen, ProducersFuseIntoReductions) {
  const Tensor a = data({8, 9, 10}), b = data({8, 9, 10});
  const Plan& plan = check(record({reduce(ReduceOp::sum, binary(BinaryOp::mul, a, b), 2, false)}),
                           1e-5, 1e-6, "(a*b):sum(3)");
  EXPECT_EQ(plan.steps.size(), 1u) << plan.summary;
  EXPECT_EQ(plan.slots.size(), 3u);  // a, b, the sums: no slot for a*b
  // Broadcasts, views and casts inside the reduced expression.
  const Tensor row = data({10}), t = data({10, 9, 8});
  check(record({reduce(ReduceOp::max, binary(BinaryOp::sub, permute(t, {2, 1, 0}), row), 1, true)}),
        1e-6, 1e-6, "max(t' - row)");
  check(
      record({reduce(ReduceOp::mean,
                     unary(UnaryOp::exp, cast(data({40, 50}, DType::i32), DType::f64)), 0, false)}),
      1e-9, 1e-9, "mean(exp(f64(i)))");
  // A reduction's result feeding elementwise work and another reduction.
  const Tensor m = reduce(ReduceOp::max, a, 2, true);
  const Tensor centered = binary(BinaryOp::sub, a, m);
  check(record({reduce(ReduceOp::sum, unary(UnaryOp::exp, centered), 2, true), centered}), 1e-5,
        1e-6, "exp(a - max)");
}

TEST_F(Codegen, SoftmaxOverTheLastDimIsOneKernel) {
  for (DType dtype : {DType::f32, DType::f64, DType::i64}) {
    for (bool log : {false, true}) {
      const Tensor x = data({33, 70}, dtype, 10);
      const Plan& plan = check(record({softmax(x, 1, log)}), 1e-5, 1e-7,
                               fmt::format("softmax {} log {}", dtype_name(dtype), log));
      EXPECT_EQ(plan.steps.size(), 1u) << plan.summary;
      // A fused producer, a long row, another dim (eager), a 1-d input.
      const Tensor scaled = binary(BinaryOp::mul, transpose(data({70, 33}, dtype), 0, 1),
                                   ops::Scalar::from_double(2.5));
      const Plan& fused = check(record({softmax(scaled, 1, log)}), 1e-5, 1e-7, "fused softmax");
      EXPECT_EQ(fused.steps.size(), 1u) << fused.summary;
      check(record({softmax(data({3, 5000}, dtype), 1, log)}), 1e-5, 1e-9, "long rows");
      const Plan& other = check(record({softmax(x, 0, log)}), 1e-5, 1e-7, "dim 1");
      EXPECT_EQ(count_steps(other, Step::Kind::reference), 1);
      check(record({softmax(data({17}, dtype), 0, log)}), 1e-5, 1e-7, "1-d");
    }
  }
  // Rows with infinities and NaN behave as in eager mode.
  Array special = random_array({4, 6}, DType::f32, rng);
  special.data<float>()[3] = std::numeric_limits<float>::infinity();
  special.data<float>()[8] = -std::numeric_limits<float>::infinity();
  special.data<float>()[15] = std::nan("");
  for (bool log : {false, true}) {
    check(record({softmax(make_tensor(context.get(), special), 1, log)}), 1e-5, 1e-7, "special");
  }
}

// ---- Fusion decisions ----

class Fuse : public Codegen {
 protected:
  // The instruction of `program` computed by op `name` (the last one).
  static int find(const Program& program, const std::string& name) {
    int found = -1;
    for (size_t i = 0; i < program.instructions.size(); i++) {
      if (program.instructions[i].name() == name) found = static_cast<int>(i);
    }
    return found;
  }
};

TEST_F(Fuse, ExpensiveValueReadByTwoKernelsIsStored) {
  const Tensor a = data({50, 60});
  const Tensor e = unary(UnaryOp::exp, a);
  const Recorded recorded =
      record({reduce(ReduceOp::sum, e, 1, false), binary(BinaryOp::mul, e, data({50, 60}))});
  const Fusion fusion = fuse_program(recorded.program);
  EXPECT_TRUE(fusion.materialized[find(recorded.program, "exp")]);
  check(recorded, 1e-5, 1e-6);
}

TEST_F(Fuse, CheapValueReadByTwoKernelsIsRecomputed) {
  const Tensor d = binary(BinaryOp::sub, data({50, 60}), data({50, 60}));
  const Recorded recorded =
      record({reduce(ReduceOp::sum, d, 1, false), binary(BinaryOp::mul, d, d)});
  const Fusion fusion = fuse_program(recorded.program);
  EXPECT_FALSE(fusion.materialized[find(recorded.program, "sub")]);
  EXPECT_EQ(fusion.steps.size(), 2u);
  check(recorded, 1e-5, 1e-6);
}

// Outputs of one shape share a loop: the later one reads the earlier one
// where it is computed, not from memory.
TEST_F(Fuse, OutputsOfOneShapeShareAKernel) {
  const Tensor a = data({1000}), b = data({1000}), c = data({1000});
  const Tensor u = binary(BinaryOp::mul, a, b);
  const Tensor y = unary(UnaryOp::tanh, binary(BinaryOp::add, u, c));
  const Tensor z = binary(BinaryOp::sub, c, a);
  const Plan& plan = check(record({u, y, z}), 4e-6, 1e-6);
  EXPECT_EQ(plan.steps.size(), 1u) << plan.summary;
  EXPECT_EQ(plan.steps[0].slots.size(), 6u);  // a, b, c, u, y, z
  // A transposed read of an output cannot share its loop.
  const Tensor square = data({30, 30});
  const Tensor s = binary(BinaryOp::mul, square, square);
  const Plan& split = check(record({s, binary(BinaryOp::add, transpose(s, 0, 1), square)}));
  EXPECT_EQ(split.steps.size(), 2u) << split.summary;
}

// eager mode checks every divisor of an integer //, also those a slice
// drops: such a division is computed whole.
TEST_F(Fuse, IntegerDivisionSeenThroughASliceIsStored) {
  const Tensor q =
      binary(BinaryOp::floordiv, data({10, 8}, DType::i64, 20), data({8}, DType::i64, 3));
  const Recorded recorded = record({narrow(q, 1, 2, 3)});
  ASSERT_GE(find(recorded.program, "floordiv"), 0) << recorded.program.text();
  const Fusion fusion = fuse_program(recorded.program);
  EXPECT_TRUE(fusion.materialized[find(recorded.program, "floordiv")]);
  check(recorded, 0, 0);
}

// A view chain over an output that comes back to the element being written
// (the write-back of an in-place op through a permute of extent-1 dims and
// a flatten, audit M0) shares the output's loop and reads the value the
// loop computed, never the output's slot before the store (run_plan fills
// new slots with garbage). A chain that reaches other elements is computed
// in kernels of its own, after the store.
TEST_F(Fuse, ViewChainsOverAnOutputReadTheComputedValue) {
  struct Chain {
    Shape shape;             // the output's value seen as this shape ...
    std::vector<int> order;  // ... permuted, then flattened
    bool same_element;
  };
  const Chain kChains[] = {
      {{2, 1, 3}, {0, 2, 1}, true},  {{2, 3, 1}, {0, 2, 1}, true},
      {{1, 2, 3}, {1, 0, 2}, true},  {{2, 1, 1, 3}, {2, 0, 1, 3}, true},
      {{6, 1}, {1, 0}, true},        {{2, 3}, {1, 0}, false},
      {{3, 1, 2}, {2, 1, 0}, false},
  };
  for (DType dtype : {DType::f32, DType::f64}) {
    for (const Chain& chain : kChains) {
      const Tensor x = data({6}, dtype);
      const Tensor sum = binary(BinaryOp::add, x, ops::Scalar::from_double(1.5));
      const Tensor back = reshape(permute(reshape(sum, chain.shape), chain.order), {6});
      const Recorded recorded = record({sum, back});
      const Plan& plan =
          check(recorded, 0, 0, fmt::format("{} {}", dtype_name(dtype), shape_string(chain.shape)));
      const int kernels = count_steps(plan, Step::Kind::kernel);
      EXPECT_TRUE(chain.same_element ? kernels == 1 : kernels > 1)
          << kernels << " kernels: " << shape_string(chain.shape) << "\n"
          << recorded.program.text() << plan.summary;
    }
  }
}

TEST_F(Fuse, ReshapeNeedsMemoryOrSqueezes) {
  const Tensor a = data({6, 4}), b = data({6, 4});
  // Flattening a computed value: the value is stored, the reshape is a view.
  const Recorded flat = record({reshape(binary(BinaryOp::add, a, b), {3, 8})});
  EXPECT_TRUE(fuse_program(flat.program).materialized[find(flat.program, "add")]);
  check(flat, 1e-6, 1e-6);
  // Adding extent-1 dims is index arithmetic on any value.
  const Recorded squeezed =
      record({reduce(ReduceOp::sum, unsqueeze(binary(BinaryOp::add, a, b), 1), 0, false)});
  const Fusion fusion = fuse_program(squeezed.program);
  EXPECT_FALSE(fusion.materialized[find(squeezed.program, "add")]);
  check(squeezed, 1e-6, 1e-6);
}

}  // namespace
}  // namespace lazylua::compiler
