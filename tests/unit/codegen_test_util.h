// codegen_test_util.h - what the codegen tests share: building generated C,
// running a plan the way the executor does, comparing with interpret(),
// and recording programs through the lazy API.
#pragma once
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
#include "compiler/conv_epilogue.h"
#include "compiler/fuse.h"
#include "compiler/lower.h"
#include "compiler/plan.h"
#include "tensor/tensor.h"
#include "tensor/thread_pool.h"

namespace lazylua::compiler {
namespace {

namespace fs = std::filesystem;

// The plan of a recorded program by the lowering driver, without the
// passes: each test checks how the ops it records are lowered, which the
// passes might fold away or rewrite.
inline Plan plan_program(const Program& program) {
  return lower(program, {.optimize = false}).plan;
}

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

inline std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Builds `source` into a shared object and loads it; `log` gets the
// compiler's messages. Null on failure.
inline std::shared_ptr<Library> build(const std::string& source,
                                      const std::string& extra_flags = "",
                                      std::string* log = nullptr) {
  std::string pattern = fs::temp_directory_path() / "lazylua-codegen-XXXXXX";
  if (!mkdtemp(pattern.data())) return nullptr;
  const fs::path dir = pattern;
  std::ofstream(dir / "k.c") << source;
  const std::string command =
      "cd '" + dir.string() +
      "' && cc -O2 -march=native -mprefer-vector-width=512 -ffp-contract=off -fPIC -shared "
      "-fno-math-errno "
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
inline Outcome run_plan(const Plan& plan, const Library& library, const Program& program,
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
      for (size_t k = 0; k < arguments.size(); k++) {
        buffers.push_back(static_cast<char*>(arguments[k].raw_data()) + step.byte_offset(k));
      }
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
    for (size_t k = 0; k < operands.size(); k++) {
      // BLAS reads these operands through its transpose flag (Step::transposed_inputs).
      if ((step.transposed_inputs >> k) & 1u) {
        operands[k] = ops::transpose(operands[k], operands[k].rank() - 2, operands[k].rank() - 1);
      }
    }
    Array result;
    try {
      result = step.kind == Step::Kind::matmul ? ops::matmul(operands[0], operands[1])
               : step.kind == Step::Kind::library
                   ? evaluate_library_step(step, instruction, operands)
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

inline double element(const Array& a, int64_t i) {
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

inline Recorded record(Context* context, const std::vector<Tensor>& outputs) {
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
inline Array random_array(const Shape& shape, DType dtype, std::mt19937& rng, double range = 3,
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

inline int count_steps(const Plan& plan, Step::Kind kind) {
  int count = 0;
  for (const Step& step : plan.steps) count += step.kind == kind;
  return count;
}

inline int temporary_slots(const Plan& plan) {
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

inline ops::Scalar number(double v) {
  return v == std::floor(v) ? ops::Scalar::from_integer(static_cast<int64_t>(v))
                            : ops::Scalar::from_double(v);
}

inline Tensor w1(const Tensor& a, const Tensor& b, const Tensor& c) {
  const Tensor sum = binary(BinaryOp::add, binary(BinaryOp::mul, a, b), c);
  const Tensor half = binary(BinaryOp::mul, sum, ops::Scalar::from_double(0.5));
  return binary(BinaryOp::add, unary(UnaryOp::tanh, half), a);
}

// Ops whose f32 results come from kernel_math.h approximations (looser
// tolerance): the table's approximate unary ops.
inline bool is_transcendental(UnaryOp op) {
  return traits(op).fold == OpFold::approx;
}

}  // namespace
}  // namespace lazylua::compiler
