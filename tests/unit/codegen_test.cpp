// codegen_test.cpp - fusion (compiler/fuse.cpp) and C code generation
// (compiler/codegen*.cpp) against the reference interpreter.
//
// Each test records a program with the lazy tensor API, plans it, builds
// the generated C with the system compiler (cc -O2 -march=native -fPIC
// -shared -fno-math-errno, as the toolchain does), runs the plan with a
// small runner of its own (kernels called over their iterations in one
// call and in several pieces, BLAS and reference steps through the eager
// ops) and compares every output with interpret().
//
// Tolerances: integers and bools exact; floats 1e-6 relative for plain
// arithmetic, 1e-5 for transcendental functions (kernel_math.h: a few ulp),
// n * 1e-7 for reductions over n elements (the folds associate differently
// from eager's pairwise sums); NaN must meet NaN and infinities their equal.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "compiler/codegen.h"
#include "compiler/codegen_c.h"
#include "compiler/fuse.h"
#include "compiler/plan.h"
#include "tensor/tensor.h"
#include "tensor/thread_pool.h"

namespace lazylua::compiler {
namespace {

namespace fs = std::filesystem;

// ---- Building generated C ----

class Library {
 public:
  explicit Library(void* handle) : handle_(handle) {}
  ~Library() {
    if (handle_) dlclose(handle_);
  }
  using Kernel = int (*)(char* const*, int64_t, int64_t);
  Kernel kernel(const std::string& name) const { return reinterpret_cast<Kernel>(symbol(name)); }
  void* symbol(const std::string& name) const { return dlsym(handle_, name.c_str()); }

 private:
  void* handle_;
};

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Builds `source` into a shared object and loads it; `log` gets the
// compiler's messages. Null on failure.
std::shared_ptr<Library> build(const std::string& source, const std::string& extra_flags = "",
                               std::string* log = nullptr) {
  std::string pattern = fs::temp_directory_path() / "lazylua-codegen-XXXXXX";
  if (!mkdtemp(pattern.data())) return nullptr;
  const fs::path dir = pattern;
  std::ofstream(dir / "k.c") << source;
  const std::string command = "cd '" + dir.string() +
                              "' && cc -O2 -march=native -fPIC -shared -fno-math-errno "
                              "-Werror=implicit-function-declaration " +
                              extra_flags + " -o k.so k.c > log.txt 2>&1";
  const int status = std::system(command.c_str());
  const std::string messages = read_text(dir / "log.txt");
  if (log) *log = messages;
  void* handle = status == 0 ? dlopen((dir / "k.so").c_str(), RTLD_NOW | RTLD_LOCAL) : nullptr;
  if (!handle) {
    ADD_FAILURE() << "building generated C failed:\n" << messages.substr(0, 4000);
    fs::path kept = fs::temp_directory_path() / "lazylua-codegen-failed.c";
    std::ofstream(kept) << source;
  }
  std::error_code ignored;
  fs::remove_all(dir, ignored);
  return handle ? std::make_shared<Library>(handle) : nullptr;
}

// ---- Running a plan (what the executor does, minus its cleverness) ----

struct Outcome {
  std::vector<Array> outputs;
  int error = 0;            // a kernel's error code
  std::string eager_error;  // an Error raised by a reference step
};

// Runs each kernel's iterations in `pieces` calls; with `threaded` the
// pieces go to the thread pool.
Outcome run_plan(const Plan& plan, const Library& library, const Program& program,
                 const std::vector<Array>& inputs, int pieces, bool threaded = false,
                 const std::string& prefix = "") {
  Outcome outcome;
  // Slots are allocated when a kernel first uses them; eager steps
  // replace theirs with their result (as the native executor does).
  std::vector<Array> slots(plan.slots.size());
  for (size_t s = 0; s < plan.slots.size(); s++) {
    const Slot& slot = plan.slots[s];
    if (slot.input_index >= 0) {
      slots[s] = contiguous(inputs.at(slot.input_index));
      EXPECT_EQ(slots[s].dtype, slot.dtype);
      EXPECT_EQ(slots[s].shape, slot.shape);
    }
  }
  for (const Step& step : plan.steps) {
    std::vector<Array> arguments;
    for (int s : step.slots) {
      if (!slots[s].defined() && step.kind == Step::Kind::kernel) {
        slots[s] = Array::empty(plan.slots[s].shape, plan.slots[s].dtype);
        // Garbage, so that a kernel relying on zeroed memory fails.
        std::memset(slots[s].raw_data(), 0x7f, slots[s].numel() * dtype_size(slots[s].dtype));
      }
      arguments.push_back(slots[s]);
    }
    if (step.kind == Step::Kind::kernel) {
      Library::Kernel kernel = library.kernel(prefix + step.function);
      EXPECT_NE(kernel, nullptr) << step.function;
      if (!kernel) return outcome;
      std::vector<char*> buffers;
      for (const Array& a : arguments) buffers.push_back(static_cast<char*>(a.raw_data()));
      const int64_t n = step.iterations;
      if (threaded) {
        std::atomic<int> error{0};
        parallel_for(n, step.grain, [&](int64_t begin, int64_t end) {
          const int code = kernel(buffers.data(), begin, end);
          if (code) error = code;
        });
        outcome.error = error;
      } else {
        for (int p = 0; p < pieces && !outcome.error; p++) {
          const int64_t begin = n * p / pieces, end = n * (p + 1) / pieces;
          if (begin < end) outcome.error = kernel(buffers.data(), begin, end);
        }
      }
      if (outcome.error) return outcome;
      continue;
    }
    const Instruction& instruction = program.instructions[step.instruction];
    std::vector<Array> operands(arguments.begin(), arguments.end() - 1);
    Array result;
    try {
      result = step.kind == Step::Kind::matmul ? ops::matmul(operands[0], operands[1])
                                               : evaluate_instruction(instruction, operands);
    } catch (const Error& error) {
      outcome.eager_error = error.what();
      return outcome;
    }
    slots[step.slots.back()] = contiguous(result);
  }
  for (int output : plan.outputs) {
    EXPECT_TRUE(slots[output].defined()) << "output slot " << output << " was never written";
    if (!slots[output].defined()) return outcome;
    outcome.outputs.push_back(slots[output]);
  }
  return outcome;
}

// ---- Comparing ----

double element(const Array& a, int64_t i) {
  switch (a.dtype) {
    case DType::boolean:
      return a.data<uint8_t>()[i] != 0;
    case DType::i32:
      return a.data<int32_t>()[i];
    case DType::i64:
      return static_cast<double>(a.data<int64_t>()[i]);
    case DType::f32:
      return a.data<float>()[i];
    case DType::f64:
      return a.data<double>()[i];
  }
  return 0;
}

::testing::AssertionResult same_values(const Array& got_view, const Array& want_view, double rtol,
                                       double atol) {
  if (got_view.dtype != want_view.dtype) {
    return ::testing::AssertionFailure()
           << "dtype " << dtype_name(got_view.dtype) << " vs " << dtype_name(want_view.dtype);
  }
  if (got_view.shape != want_view.shape) {
    return ::testing::AssertionFailure()
           << "shape " << shape_string(got_view.shape) << " vs " << shape_string(want_view.shape);
  }
  const Array got = contiguous(got_view), want = contiguous(want_view);
  for (int64_t i = 0; i < got.numel(); i++) {
    if (got.dtype == DType::i64) {
      if (got.data<int64_t>()[i] != want.data<int64_t>()[i]) {
        return ::testing::AssertionFailure() << "element " << i << ": " << got.data<int64_t>()[i]
                                             << " vs " << want.data<int64_t>()[i];
      }
      continue;
    }
    const double g = element(got, i), w = element(want, i);
    bool ok;
    if (!is_floating(got.dtype)) {
      ok = g == w;
    } else if (std::isnan(w) || std::isnan(g)) {
      ok = std::isnan(w) && std::isnan(g);
    } else if (std::isinf(w) || std::isinf(g)) {
      // Loose comparisons also accept an overflow that happened in one
      // order of rounding and not in the other (products near the limit).
      const double huge = got.dtype == DType::f32 ? 1e36 : 1e305;
      ok = g == w || (rtol > 1e-5 && std::signbit(g) == std::signbit(w) &&
                      std::fabs(std::isinf(g) ? w : g) > huge);
    } else {
      ok = std::fabs(g - w) <= atol + rtol * std::fabs(w);
    }
    if (!ok) {
      return ::testing::AssertionFailure() << "element " << i << " of " << got.numel() << ": "
                                           << fmt::format("{:.9g} vs {:.9g}", g, w);
    }
  }
  return ::testing::AssertionSuccess();
}

// ---- Programs from the lazy API ----

struct Recorded {
  Program program;
  std::vector<Array> inputs;
};

Recorded record(Context* context, const std::vector<Tensor>& outputs) {
  // A lazy view has no pending value of its own: clone() makes the view's
  // value a pending node (the view ops applied to its base's value).
  std::vector<Tensor> values;
  for (const Tensor& t : outputs) values.push_back(t->is_lazy_view() ? clone(t) : t);
  std::vector<TensorImpl*> roots;
  for (const Tensor& t : values) roots.push_back(t.get());
  const Graph graph = context->extract(roots);
  return {program_from_graph(graph), program_inputs(graph)};
}

// Values spread over [-range, range] (integers: whole numbers), with a
// few special ones among floats when `specials`.
Array random_array(const Shape& shape, DType dtype, std::mt19937& rng, double range = 3,
                   bool specials = false) {
  Array a = Array::empty(shape, dtype);
  std::uniform_real_distribution<double> uniform(-range, range);
  const double kSpecial[] = {0.0,
                             -0.0,
                             0.5,
                             -0.5,
                             1.5,
                             2.5,
                             -2.5,
                             std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(),
                             std::numeric_limits<double>::quiet_NaN()};
  for (int64_t i = 0; i < a.numel(); i++) {
    double v = uniform(rng);
    if (specials && is_floating(dtype) && rng() % 8 == 0) v = kSpecial[rng() % std::size(kSpecial)];
    switch (dtype) {
      case DType::boolean:
        a.data<uint8_t>()[i] = v > 0;
        break;
      case DType::i32:
        a.data<int32_t>()[i] = static_cast<int32_t>(std::lround(v));
        break;
      case DType::i64:
        a.data<int64_t>()[i] = std::lround(v);
        break;
      case DType::f32:
        a.data<float>()[i] = static_cast<float>(v);
        break;
      case DType::f64:
        a.data<double>()[i] = v;
        break;
    }
  }
  return a;
}

constexpr DType kAllDtypes[] = {DType::boolean, DType::i32, DType::i64, DType::f32, DType::f64};

// Plans recorded programs; run() builds all their kernels as one shared
// object (one compiler run instead of hundreds), runs each plan whole, in
// 3 pieces and on the thread pool, and compares with interpret().
class Batch {
 public:
  const Plan& add(const Recorded& recorded, double rtol, double atol, const std::string& what) {
    EXPECT_FALSE(recorded.program.outputs.empty()) << what;
    entries_.push_back({recorded, plan_program(recorded.program), rtol, atol, what,
                        fmt::format("b{}_", entries_.size())});
    if (std::getenv("LAZYLUA_TEST_DUMP")) {
      const std::string header = std::string(codegen_prelude()) + kernel_math_source();
      std::printf(
          "==== %s\n%s%s\n", what.c_str(), entries_.back().plan.summary.c_str(),
          entries_.back()
              .plan.source.substr(std::min(header.size(), entries_.back().plan.source.size()))
              .c_str());
    }
    return entries_.back().plan;
  }

  void run() {
    if (entries_.empty()) return;
    const std::string header = std::string(codegen_prelude()) + kernel_math_source();
    std::string source = header;
    for (const Entry& entry : entries_) {
      if (entry.plan.source.empty()) continue;
      EXPECT_EQ(entry.plan.source.compare(0, header.size(), header), 0);
      const std::string kernels = entry.plan.source.substr(header.size());
      source += std::regex_replace(kernels, std::regex("lazylua_kernel_"),
                                   entry.prefix + "lazylua_kernel_");
    }
    std::shared_ptr<Library> library = build(source);
    ASSERT_TRUE(library);
    for (const Entry& entry : entries_) compare(entry, *library);
    entries_.clear();
  }

 private:
  struct Entry {
    Recorded recorded;
    Plan plan;
    double rtol, atol;
    std::string what;
    std::string prefix;
  };

  static void compare(const Entry& entry, const Library& library) {
    const Recorded& recorded = entry.recorded;
    const Plan& plan = entry.plan;
    std::vector<Array> expected;
    std::string eager_error;
    try {
      expected = interpret(recorded.program, recorded.inputs);
    } catch (const Error& error) {
      eager_error = error.what();
    }
    for (int mode = 0; mode < 3; mode++) {
      const Outcome outcome = run_plan(plan, library, recorded.program, recorded.inputs,
                                       mode == 1 ? 3 : 1, mode == 2, entry.prefix);
      if (!eager_error.empty()) {
        EXPECT_TRUE(outcome.error != 0 || !outcome.eager_error.empty())
            << entry.what << ": eager failed with '" << eager_error << "' but the plan ran\n"
            << recorded.program.text();
        continue;
      }
      EXPECT_EQ(outcome.error, 0) << entry.what << "\n" << recorded.program.text();
      EXPECT_EQ(outcome.eager_error, "") << entry.what;
      if (outcome.error || !outcome.eager_error.empty()) return;
      for (size_t k = 0; k < expected.size(); k++) {
        EXPECT_TRUE(same_values(outcome.outputs[k], expected[k], entry.rtol, entry.atol))
            << entry.what << " output " << k << " (mode " << mode << ")\n"
            << recorded.program.text() << plan.summary;
      }
    }
  }

  std::deque<Entry> entries_;
};

int count_steps(const Plan& plan, Step::Kind kind) {
  int count = 0;
  for (const Step& step : plan.steps) count += step.kind == kind;
  return count;
}

int temporary_slots(const Plan& plan) {
  int count = 0;
  for (const Slot& slot : plan.slots) count += slot.instruction < 0;
  return count;
}

class Codegen : public ::testing::Test {
 protected:
  void TearDown() override { batch.run(); }
  // Queues a program for checking at the end of the test; returns its plan.
  const Plan& check(const Recorded& recorded, double rtol = 1e-6, double atol = 1e-6,
                    const std::string& what = "") {
    return batch.add(recorded, rtol, atol, what);
  }

  Batch batch;
  Ref<Context> context = make_ref<Context>();
  std::mt19937 rng{12345};
  Tensor data(const Shape& shape, DType dtype = DType::f32, double range = 3,
              bool specials = false) {
    return make_tensor(context.get(), random_array(shape, dtype, rng, range, specials));
  }
  Recorded record(const std::vector<Tensor>& outputs) {
    return compiler::record(context.get(), outputs);
  }
};

ops::Scalar number(double v) {
  return v == std::floor(v) ? ops::Scalar::from_integer(static_cast<int64_t>(v))
                            : ops::Scalar::from_double(v);
}

Tensor w1(const Tensor& a, const Tensor& b, const Tensor& c) {
  const Tensor sum = binary(BinaryOp::add, binary(BinaryOp::mul, a, b), c);
  const Tensor half = binary(BinaryOp::mul, sum, ops::Scalar::from_double(0.5));
  return binary(BinaryOp::add, unary(UnaryOp::tanh, half), a);
}

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

bool is_transcendental(UnaryOp op) {
  switch (op) {
    case UnaryOp::exp:
    case UnaryOp::expm1:
    case UnaryOp::log:
    case UnaryOp::log1p:
    case UnaryOp::log2:
    case UnaryOp::sin:
    case UnaryOp::cos:
    case UnaryOp::tan:
    case UnaryOp::tanh:
    case UnaryOp::sigmoid:
    case UnaryOp::gelu:
      return true;
    default:
      return false;
  }
}

TEST_F(Codegen, EveryUnaryOpOnEveryDtype) {
  const Shape shape{37, 13};  // not a multiple of any vector width
  int programs = 0;
  for (int k = 0; k <= static_cast<int>(UnaryOp::logical_not); k++) {
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

// ---- Steps that are not kernels ----

TEST_F(Codegen, MatmulAndReferenceStepsBetweenKernels) {
  const Tensor x = data({16, 32}), w = data({24, 32}), bias = data({24});
  const Tensor h = unary(UnaryOp::relu, binary(BinaryOp::add, matmul(x, transpose(w, 0, 1)), bias));
  const Tensor c = cumsum(h, 1);
  const Tensor out = binary(BinaryOp::mul, c, ops::Scalar::from_double(0.5));
  const Plan& plan = check(record({out}), 1e-5, 1e-5);
  EXPECT_EQ(count_steps(plan, Step::Kind::matmul), 1) << plan.summary;
  EXPECT_EQ(count_steps(plan, Step::Kind::reference), 1) << plan.summary;
  EXPECT_GE(count_steps(plan, Step::Kind::kernel), 2) << plan.summary;
  // Indexing ops fall back too, mixed with kernels.
  const Tensor index = make_tensor(context.get(), random_array({5}, DType::i64, rng, 0));
  const Tensor picked = index_select(unary(UnaryOp::exp, x), 0,
                                     binary(BinaryOp::add, index, ops::Scalar::from_integer(3)));
  check(record({binary(BinaryOp::mul, picked, picked), cat({x, x}, 0)}), 1e-5, 1e-6, "indexing");
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
  // Empty extents: identities (max/min of nothing go to eager code).
  const Tensor empty = data({4, 0, 3});
  for (ReduceOp op : kAllReduceOps) {
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
        const auto op = static_cast<UnaryOp>(pick(static_cast<int>(UnaryOp::logical_not) + 1));
        const bool discontinuous = op == UnaryOp::floor || op == UnaryOp::ceil ||
                                   op == UnaryOp::round || op == UnaryOp::trunc ||
                                   op == UnaryOp::sign || op == UnaryOp::logical_not;
        if (inexact && discontinuous) return false;
        push(unary(op, x.tensor), x.approximate || is_transcendental(op));
        return true;
      }
      case 2:
      case 3:
      case 4: {  // binary, tensor with tensor or with a number
        const auto op = static_cast<BinaryOp>(pick(static_cast<int>(BinaryOp::logical_xor) + 1));
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
        const auto op = static_cast<ReduceOp>(pick(7));
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

TEST_F(Codegen, RandomProgramsMatchTheInterpreter) {
  const char* count_text = std::getenv("LAZYLUA_TEST_RANDOM_PROGRAMS");
  const int count = count_text ? std::atoi(count_text) : 200;
  if (const char* seed = std::getenv("LAZYLUA_TEST_SEED")) rng.seed(std::atoi(seed));
  int approximate = 0, kernels = 0, programs = 0;
  int kinds[3] = {};
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
    for (const Step& step : plan.steps) kinds[static_cast<int>(step.kind)]++;
  }
  std::printf("%d programs (%d approximate): %d kernels, %d BLAS and %d eager steps\n", programs,
              approximate, kinds[0], kinds[1], kinds[2]);
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
  lzk_f32x8 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
  int64_t i = begin;
  for (; i + 32 <= end; i += 32) {
    lzk_f32x8 x0, x1, x2, x3;
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
    float m = lzk_max_f32(in, n);
    for (int64_t k = 0; k < n; k++) out[k] = ll_expf(in[k] - m);
    float scale = 1.0f / lzk_sum_f32(out, n);
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
