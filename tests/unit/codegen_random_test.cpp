// codegen_random_test.cpp - random recorded programs against interpret(), and speed against
// hand-written C (disabled; run by hand).
#include "codegen_test_util.h"

namespace lazylua::compiler {
namespace {

// ---- Random programs ----

// Records random programs with the lazy API: elementwise ops of every kind
// and dtype, numbers, broadcasts, views of inputs and of computed values,
// reductions, softmax, matmul and eager-only ops, several outputs. Values
// that carry rounding differences (transcendentals, float reductions,
// matmul) are "approximate": discontinuous ops (rounding, comparisons,
// conversions to integers, //, %) are not applied to them, since a last-bit
// difference could flip their result.
class RandomProgram {
 public:
  RandomProgram(Context* context, std::mt19937& rng) : context_(context), rng_(rng) {
    // Mostly small, sometimes big enough for chunked loops, folds of
    // blocks, column blocks and the partials of full reductions.
    const bool big = chance(10);
    rows_ = 1 + pick(big ? 150 : 9);
    cols_ = 1 + pick(big ? 3000 : 11);
    const int inputs = 2 + pick(3);
    for (int i = 0; i < inputs; i++) add_input();
    const int ops = 3 + pick(12);
    for (int i = 0; i < ops; i++) {
      for (int attempt = 0; attempt < 20; attempt++) {
        try {
          if (step()) break;
        } catch (const Error&) {
          // An invalid combination (bool - bool, a bad shape): try another.
        }
      }
    }
  }

  std::vector<Tensor> outputs() {
    std::vector<Tensor> result;
    const int count = 1 + pick(3);
    for (int k = 0; k < count; k++) {
      const Value& v = pool_[pool_.size() - 1 - pick(std::min<int>(4, pool_.size()))];
      result.push_back(v.tensor);
    }
    return result;
  }

  bool approximate() const {
    for (const Value& v : pool_) {
      if (v.approximate) return true;
    }
    return false;
  }

 private:
  struct Value {
    Tensor tensor;
    bool approximate;
  };

  int pick(int n) { return static_cast<int>(rng_() % static_cast<unsigned>(n)); }
  bool chance(int percent) { return pick(100) < percent; }

  DType random_dtype() {
    const DType kWeighted[] = {DType::f32, DType::f32, DType::f32,    DType::f64,
                               DType::i32, DType::i64, DType::boolean};
    return kWeighted[pick(std::size(kWeighted))];
  }
  Shape random_shape() {
    const Shape kShapes[] = {{rows_, cols_}, {rows_, cols_},   {cols_}, {rows_, 1}, {1, cols_}, {},
                             {cols_, rows_}, {2, rows_, cols_}};
    return kShapes[pick(std::size(kShapes))];
  }
  void add_input() {
    const DType dtype = random_dtype();
    pool_.push_back(
        {make_tensor(context_, random_array(random_shape(), dtype, rng_, 4, chance(20))), false});
  }
  const Value& any() { return pool_[pick(pool_.size())]; }
  const Value& recent() { return pool_[pool_.size() - 1 - pick(std::min<int>(3, pool_.size()))]; }
  bool is_float(const Value& v) const { return is_floating(v.tensor->dtype); }

  ops::Scalar random_number() {
    const double kNumbers[] = {0, 1, 2, -1, 3, 0.5, -2.25, 3.75, 7};
    const double v = kNumbers[pick(std::size(kNumbers))];
    return v == std::floor(v) && chance(70) ? ops::Scalar::from_integer(static_cast<int64_t>(v))
                                            : ops::Scalar::from_double(v);
  }

  void push(Tensor t, bool approximate) { pool_.push_back({std::move(t), approximate}); }

  bool step() {
    const Value& x = chance(60) ? recent() : any();
    const bool inexact = x.approximate && is_float(x);
    switch (pick(15)) {
      case 14: {  // cat, and writes through views of a copy
        const int rank = x.tensor->shape.rank();
        if (rank == 0) return false;
        const int dim = pick(rank);
        if (chance(40)) {
          const Value& y = any();
          push(cat({x.tensor, chance(50) ? y.tensor : x.tensor}, dim),
               x.approximate || y.approximate);
          return true;
        }
        const Shape& s = x.tensor->shape;
        Tensor base = clone(x.tensor);
        const int64_t first = pick(static_cast<int>(s[dim]));
        const Tensor region =
            chance(50) ? narrow(base, dim, first, 1 + pick(static_cast<int>(s[dim] - first)))
                       : select(base, dim, first);
        if (chance(50)) {
          fill_(region, random_number());
        } else {
          const Value& y = any();
          copy_(region, y.tensor);
          push(base, x.approximate || y.approximate);
          return true;
        }
        push(base, x.approximate);
        return true;
      }
      case 0:
      case 1: {  // unary
        const auto op = static_cast<UnaryOp>(pick(kUnaryOpCount));
        const bool discontinuous = op == UnaryOp::floor || op == UnaryOp::ceil ||
                                   op == UnaryOp::round || op == UnaryOp::trunc ||
                                   op == UnaryOp::sign || op == UnaryOp::frac ||
                                   traits(op).result == OpResult::boolean;
        if (inexact && discontinuous) return false;
        push(unary(op, x.tensor), x.approximate || is_transcendental(op));
        return true;
      }
      case 2:
      case 3:
      case 4: {  // binary, tensor with tensor or with a number
        const auto op = static_cast<BinaryOp>(pick(kBinaryOpCount));
        const bool discontinuous =
            binary_is_comparison(op) || op == BinaryOp::floordiv || op == BinaryOp::mod;
        const bool transcendental = op == BinaryOp::pow || op == BinaryOp::atan2;
        if (chance(30)) {
          if (inexact && discontinuous) return false;
          const ops::Scalar n = random_number();
          push(chance(50) ? binary(op, x.tensor, n) : binary(op, n, x.tensor),
               x.approximate || transcendental);
          return true;
        }
        const Value& y = any();
        if (discontinuous && (inexact || (y.approximate && is_float(y)))) return false;
        push(binary(op, x.tensor, y.tensor), x.approximate || y.approximate || transcendental);
        return true;
      }
      case 5: {  // where
        const Value& c = any();
        if (c.approximate && is_float(c)) return false;
        const Value& y = any();
        push(where(c.tensor, x.tensor, y.tensor), x.approximate || y.approximate);
        return true;
      }
      case 6: {  // cast, clamp
        if (chance(50)) {
          const DType to = random_dtype();
          if (inexact && !is_floating(to)) return false;
          if (to == x.tensor->dtype) return false;
          push(cast(x.tensor, to), x.approximate);
        } else {
          std::optional<ops::Scalar> low, high;
          if (chance(70)) low = random_number();
          if (chance(70)) high = random_number();
          push(clamp(x.tensor, low, high), x.approximate);
        }
        return true;
      }
      case 7:
      case 8: {  // reduce
        if (x.tensor->shape.rank() == 0) return false;
        const auto op = static_cast<ReduceOp>(pick(kReduceOpCount));
        const bool all = chance(25);
        const int dim = pick(x.tensor->shape.rank());
        // Long float products overflow in some orders of rounding only.
        const int64_t extent = all ? numel(x.tensor->shape) : x.tensor->shape[dim];
        if (op == ReduceOp::prod && extent > 16) return false;
        const Tensor y =
            reduce(op, x.tensor, all ? std::nullopt : std::optional<int>(dim), chance(50));
        const bool folds = op == ReduceOp::sum || op == ReduceOp::mean || op == ReduceOp::prod;
        push(y, x.approximate || (folds && is_floating(y->dtype)));
        return true;
      }
      case 9: {  // softmax, cumsum, matmul
        if (x.tensor->shape.rank() == 0) return false;
        const int which = pick(3);
        if (which == 0) {
          const int rank = x.tensor->shape.rank();
          push(softmax(x.tensor, chance(80) ? rank - 1 : 0, chance(50)), true);
        } else if (which == 1) {
          const Tensor y = cumsum(x.tensor, pick(x.tensor->shape.rank()));
          push(y, x.approximate || is_floating(y->dtype));
        } else {
          if (x.tensor->shape.rank() != 2 || !is_float(x)) return false;
          const Shape& s = x.tensor->shape;
          const Tensor w =
              make_tensor(context_, random_array({s[1], 1 + pick(6)}, x.tensor->dtype, rng_));
          push(matmul(x.tensor, w), true);
        }
        return true;
      }
      default: {  // views
        const Shape& s = x.tensor->shape;
        const int rank = s.rank();
        switch (pick(6)) {
          case 0:
            if (rank < 2) return false;
            push(transpose(x.tensor, 0, rank - 1), x.approximate);
            return true;
          case 1: {
            if (rank == 0) return false;
            const int dim = pick(rank);
            if (s[dim] < 2) return false;
            const int64_t start = pick(static_cast<int>(s[dim]) - 1);
            push(narrow(x.tensor, dim, start, 1 + pick(static_cast<int>(s[dim] - start))),
                 x.approximate);
            return true;
          }
          case 2: {
            if (rank == 0) return false;
            const int dim = pick(rank);
            push(select(x.tensor, dim, pick(static_cast<int>(s[dim]))), x.approximate);
            return true;
          }
          case 3:
            push(unsqueeze(x.tensor, pick(rank + 1)), x.approximate);
            return true;
          case 4: {
            Shape target = s;
            bool any_one = false;
            for (int d = 0; d < rank; d++) {
              if (target[d] == 1) {
                target[d] = 1 + pick(5);
                any_one = true;
              }
            }
            if (!any_one && rank > 0) return false;
            if (chance(30)) target.insert(0, 2);
            push(expand(x.tensor, target), x.approximate);
            return true;
          }
          default:
            push(chance(50) ? flatten(x.tensor, 0, std::max(rank, 1) - 1)
                            : reshape(x.tensor, {-1, 1}),
                 x.approximate);
            return true;
        }
      }
    }
  }

  Context* context_;
  std::mt19937& rng_;
  int64_t rows_, cols_;
  std::vector<Value> pool_;
};

// Its own suite: a fixture from the shared header is a different type in
// each file, and gtest wants one fixture per suite.
class CodegenRandom : public Codegen {};

TEST_F(CodegenRandom, RandomProgramsMatchTheInterpreter) {
  const char* count_text = std::getenv("LAZYLUA_TEST_RANDOM_PROGRAMS");
  const int count = count_text ? std::atoi(count_text) : 200;
  if (const char* seed = std::getenv("LAZYLUA_TEST_SEED")) rng.seed(std::atoi(seed));
  int approximate = 0, kernels = 0, programs = 0;
  int kinds[5] = {};  // per Step::Kind: kernel, matmul, library, reference, scan
  for (int i = 0; i < count; i++) {
    RandomProgram random(context.get(), rng);
    const Recorded recorded = record(random.outputs());
    if (recorded.program.outputs.empty()) continue;  // only inputs were picked
    const bool inexact = random.approximate();
    approximate += inexact;
    const Plan& plan = check(recorded, inexact ? 2e-4 : 1e-6, inexact ? 1e-4 : 1e-6,
                             fmt::format("random program {}", i));
    programs++;
    kernels += plan.kernel_count;
    for (const Step& step : plan.steps) {
      const int kind = static_cast<int>(step.kind);
      ASSERT_TRUE(kind >= 0 && kind < static_cast<int>(std::size(kinds))) << kind;
      kinds[kind]++;
    }
  }
  std::printf(
      "%d programs (%d approximate): %d kernels, %d matmul, %d library, %d reference and %d scan "
      "steps\n",
      programs, approximate, kinds[0], kinds[1], kinds[2], kinds[3], kinds[4]);
  EXPECT_GT(programs, count * 9 / 10);
  EXPECT_GT(kernels, programs);
}

// ---- Speed (run by hand: --gtest_also_run_disabled_tests) ----
//
// Generated kernels against hand-written C built by the same compiler with
// the same flags and math functions, on the same threads; prints ratios
// (tests never assert on time).

// The best of `repeats` runs of f, in milliseconds.
template <typename F>
double best_ms(F&& f, int repeats = 15) {
  double best = 1e30;
  for (int r = 0; r < repeats; r++) {
    const auto start = std::chrono::steady_clock::now();
    f();
    const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
    best = std::min(best, took.count());
  }
  return best;
}

const char kHandWritten[] = R"(
void hand_w1(const float* restrict a, const float* restrict b, const float* restrict c,
             float* restrict y, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; i++) y[i] = ll_tanhf((a[i] * b[i] + c[i]) * 0.5f) + a[i];
}
double hand_sum(const float* restrict p, int64_t begin, int64_t end) {
  llm_f32x8 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
  int64_t i = begin;
  for (; i + 32 <= end; i += 32) {
    llm_f32x8 x0, x1, x2, x3;
    memcpy(&x0, p + i, 32); memcpy(&x1, p + i + 8, 32);
    memcpy(&x2, p + i + 16, 32); memcpy(&x3, p + i + 24, 32);
    s0 += x0; s1 += x1; s2 += x2; s3 += x3;
  }
  s0 = (s0 + s1) + (s2 + s3);
  double s = 0;
  for (int l = 0; l < 8; l++) s += s0[l];
  for (; i < end; i++) s += p[i];
  return s;
}
void hand_softmax(const float* restrict x, float* restrict y, int64_t n, int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; r++) {
    const float* in = x + r * n;
    float* out = y + r * n;
    float m = ll_max_f32(in, n);
    for (int64_t k = 0; k < n; k++) out[k] = ll_expf(in[k] - m);
    float scale = 1.0f / ll_sum_f32(out, n);
    for (int64_t k = 0; k < n; k++) out[k] *= scale;
  }
}
)";

struct Timing {
  double generated, hand;
};

class CodegenBench : public Codegen {
 protected:
  // Runs `plan` (one input set) as the executor would, on the pool.
  static void run(const Plan& plan, const Library& library, const Recorded& recorded,
                  std::vector<Array>& slots) {
    for (const Step& step : plan.steps) {
      std::vector<char*> buffers;
      for (int s : step.slots) buffers.push_back(static_cast<char*>(slots[s].raw_data()));
      Library::Kernel kernel = library.kernel(step.function);
      parallel_for(step.iterations, step.grain,
                   [&](int64_t begin, int64_t end) { kernel(buffers.data(), begin, end); });
    }
  }
  static std::vector<Array> allocate(const Plan& plan, const Recorded& recorded) {
    std::vector<Array> slots;
    for (const Slot& slot : plan.slots) {
      Array a = slot.input_index >= 0 ? recorded.inputs[slot.input_index]
                                      : Array::empty(slot.shape, slot.dtype);
      if (slot.input_index < 0) std::memset(a.raw_data(), 0, a.numel() * dtype_size(a.dtype));
      slots.push_back(a);
    }
    return slots;
  }
  void report(const char* what, int threads, Timing t) {
    std::printf("%-34s %d thread%s: generated %7.2f ms, hand-written C %7.2f ms, ratio %.2f\n",
                what, threads, threads > 1 ? "s" : " ", t.generated, t.hand, t.generated / t.hand);
  }
};

TEST_F(CodegenBench, DISABLED_GeneratedAgainstHandWrittenC) {
  const int64_t n = 16 * 1024 * 1024;
  const Tensor a = data({n}), b = data({n}), c = data({n});
  const Recorded w1_program = record({w1(a, b, c)});
  const Recorded sum_program = record({reduce(ReduceOp::sum, a, std::nullopt, false)});
  const Tensor logits = data({4096, 1024});
  const Recorded softmax_program = record({softmax(logits, 1, false)});
  const Plan w1_plan = plan_program(w1_program.program);
  const Plan sum_plan = plan_program(sum_program.program);
  const Plan softmax_plan = plan_program(softmax_program.program);
  const std::string header = std::string(codegen_prelude()) + kernel_math_source();
  auto kernels = [&](const Plan& plan, const char* prefix) {
    return std::regex_replace(plan.source.substr(header.size()), std::regex("lazylua_kernel_"),
                              std::string(prefix) + "lazylua_kernel_");
  };
  std::shared_ptr<Library> library = build(header + kernels(w1_plan, "") + kernels(sum_plan, "s_") +
                                           kernels(softmax_plan, "x_") + kHandWritten);
  ASSERT_TRUE(library);
  auto symbol = [&](const char* name) { return library->symbol(name); };
  auto hand_w1 = reinterpret_cast<void (*)(const float*, const float*, const float*, float*,
                                           int64_t, int64_t)>(symbol("hand_w1"));
  auto hand_sum = reinterpret_cast<double (*)(const float*, int64_t, int64_t)>(symbol("hand_sum"));
  auto hand_softmax = reinterpret_cast<void (*)(const float*, float*, int64_t, int64_t, int64_t)>(
      symbol("hand_softmax"));
  ASSERT_TRUE(hand_w1 && hand_sum && hand_softmax);

  std::vector<Array> w1_slots = allocate(w1_plan, w1_program);
  Array y = Array::empty({n}, DType::f32);
  std::memset(y.raw_data(), 0, n * 4);
  const float* pa = w1_program.inputs[0].data<float>();
  const float* pb = w1_program.inputs[1].data<float>();
  const float* pc = w1_program.inputs[2].data<float>();
  std::vector<Array> sum_slots = allocate(sum_plan, sum_program);
  std::vector<Array> softmax_slots = allocate(softmax_plan, softmax_program);
  Array softmax_out = Array::empty({4096, 1024}, DType::f32);
  std::memset(softmax_out.raw_data(), 0, softmax_out.numel() * 4);

  Plan prefixed_sum = sum_plan, prefixed_softmax = softmax_plan;
  for (Step& step : prefixed_sum.steps) step.function = "s_" + step.function;
  for (Step& step : prefixed_softmax.steps) step.function = "x_" + step.function;
  const int saved_threads = thread_count();
  for (int threads : {1, 2}) {
    set_thread_count(threads);
    Timing w1_time;
    w1_time.generated = best_ms([&] { run(w1_plan, *library, w1_program, w1_slots); });
    w1_time.hand = best_ms([&] {
      constexpr int64_t kChunk = 16384;  // as the generated kernel
      parallel_for(n / kChunk, 2, [&](int64_t begin, int64_t end) {
        hand_w1(pa, pb, pc, y.data<float>(), begin * kChunk, end * kChunk);
      });
    });
    report("W1 tanh((a*b + c)*0.5) + a, 16M", threads, w1_time);
    Timing sum_time;
    sum_time.generated = best_ms([&] { run(prefixed_sum, *library, sum_program, sum_slots); });
    double total = 0;
    sum_time.hand = best_ms([&] {
      double partial[2] = {0, 0};
      parallel_for(2, 1, [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; t++) partial[t] = hand_sum(pa, t * n / 2, (t + 1) * n / 2);
      });
      total = partial[0] + partial[1];
    });
    report("W5 sum of 16M floats", threads, sum_time);
    Timing softmax_time;
    softmax_time.generated =
        best_ms([&] { run(prefixed_softmax, *library, softmax_program, softmax_slots); });
    softmax_time.hand = best_ms([&] {
      parallel_for(4096, 16, [&](int64_t begin, int64_t end) {
        hand_softmax(softmax_program.inputs[0].data<float>(), softmax_out.data<float>(), 1024,
                     begin, end);
      });
    });
    report("W4 row softmax 4096x1024", threads, softmax_time);
    EXPECT_NEAR(sum_slots[plan_program(sum_program.program).outputs[0]].data<float>()[0], total,
                1e-3 * std::fabs(total) + 1);
  }
  set_thread_count(saved_threads);
}

// A transposing copy (tiles) against a straight copy of the same bytes.
TEST_F(CodegenBench, DISABLED_TransposeAgainstCopy) {
  const Tensor square = data({4096, 4096});
  const Recorded transposed = record({transpose(square, 0, 1)});
  const Recorded copied = record({binary(BinaryOp::mul, square, ops::Scalar::from_integer(1))});
  const Plan transpose_plan = plan_program(transposed.program);
  const Plan copy_plan = plan_program(copied.program);
  std::shared_ptr<Library> transpose_library = build(transpose_plan.source);
  std::shared_ptr<Library> copy_library = build(copy_plan.source);
  ASSERT_TRUE(transpose_library && copy_library);
  std::vector<Array> transpose_slots = allocate(transpose_plan, transposed);
  std::vector<Array> copy_slots = allocate(copy_plan, copied);
  const int saved_threads = thread_count();
  for (int threads : {1, 2}) {
    set_thread_count(threads);
    Timing t;
    t.generated =
        best_ms([&] { run(transpose_plan, *transpose_library, transposed, transpose_slots); }, 5);
    t.hand = best_ms([&] { run(copy_plan, *copy_library, copied, copy_slots); }, 5);
    std::printf("transpose 4096x4096 %d thread%s: %.2f ms, generated copy %.2f ms, ratio %.2f\n",
                threads, threads > 1 ? "s" : "", t.generated, t.hand, t.generated / t.hand);
  }
  set_thread_count(saved_threads);
}

}  // namespace
}  // namespace lazylua::compiler
