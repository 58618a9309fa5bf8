// native_executor.cpp - runs graphs as compiled plans: a bounded in-memory
// cache of compiled programs, a compile thread, and the plan interpreter
// that calls generated kernels, OpenBLAS and (for ops with no lowering) the
// eager kernels.
#include "compiler/native_executor.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <list>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "compiler/build_schedule.h"
#include "compiler/conv_epilogue.h"
#include "compiler/disk_cache.h"
#include "compiler/lower.h"
#include "compiler/plan.h"
#include "compiler/plan_record.h"
#include "compiler/toolchain.h"
#include "tensor/interrupt.h"
#include "tensor/profiler.h"
#include "tensor/scan.h"
#include "tensor/thread_pool.h"

namespace lazylua::compiler {
namespace {

using KernelFunction = int (*)(char* const* buffers, int64_t begin, int64_t end);

// A program and, once built, its native form. Shared between the Lua thread
// (which runs it) and the compile thread (which builds it).
struct CompiledProgram {
  enum class State { building, ready, failed };
  std::atomic<State> state{State::building};
  Program program;  // as optimized
  Plan plan;
  std::shared_ptr<Library> library;
  double compile_seconds = 0;
  bool from_disk = false;
  bool reported = false;  // its compile (or failure) was counted or told
  bool no_compiler = false;
  bool internal_error = false;  // failed for a bug in lazylua (an InternalError)
  std::string error;
  // Set by the compile thread when the C compiler starts: when (steady
  // seconds, 0 = not yet) and how long it should take (build_schedule.h).
  std::atomic<double> toolchain_started{0};
  std::atomic<double> toolchain_expected{0};
  double interpreted_seconds = 0;  // its last reference run (the Lua thread's)
  int interpreted_runs = 0;        // its reference runs while building (Lua thread)
  bool gave_up_waiting = false;    // a run waited for the build in vain (Lua thread)
};

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// LAZYLUA_DEBUG=2: each plan's summary, and its scan bodies' indented.
void print_plan(const Plan& plan, const std::string& indent) {
  std::fprintf(stderr, "[lazylua] %splan: %s\n", indent.c_str(), plan.summary.c_str());
  for (const Step& step : plan.steps) {
    if (step.kind == Step::Kind::scan) print_plan(step.scan->plan, indent + "  scan body ");
  }
}

// Fills plan.functions (and those of scan bodies) from the loaded code.
void resolve_kernels(Plan& plan, const Library& library) {
  plan.functions.assign(plan.steps.size(), nullptr);
  for (size_t i = 0; i < plan.steps.size(); i++) {
    Step& step = plan.steps[i];
    if (step.kind == Step::Kind::scan) resolve_kernels(step.scan->plan, library);
    if (step.kind != Step::Kind::kernel) continue;
    void* symbol = library.symbol(step.function.c_str());
    if (!symbol) throw Error("generated code lacks " + step.function);
    plan.functions[i] = symbol;
  }
}

// ---- Profiling (tensor/profiler.h) ----

const char* step_category(Step::Kind kind) {
  switch (kind) {
    case Step::Kind::kernel:
      return "kernel";
    case Step::Kind::matmul:
      return "matmul";  // its BLAS call is the "blas" span inside
    case Step::Kind::library:
      return "library";
    case Step::Kind::reference:
      return "reference";
    case Step::Kind::scan:
      return "scan";
  }
  return "";
}

// The memory a step's buffers span (what it reads and writes at most).
int64_t step_bytes(const Plan& plan, const Step& step) {
  int64_t bytes = 0;
  for (int s : step.slots) {
    bytes += numel(plan.slots[s].shape) * static_cast<int64_t>(dtype_size(plan.slots[s].dtype));
  }
  return bytes;
}

// Each step's name for the profiler: its ops and the Lua lines that
// recorded them. A kernel covers the instructions it writes and those
// computed inside it (the ones without a slot of their own); so does a
// convolution with an epilogue, from the clamp it writes back to itself.
std::vector<std::string> step_labels(const Plan& plan, const Program& program) {
  std::vector<bool> has_slot(program.instructions.size(), false);
  for (const Slot& slot : plan.slots) {
    if (slot.instruction >= 0) has_slot[slot.instruction] = true;
  }
  std::vector<std::string> labels;
  for (const Step& step : plan.steps) {
    std::vector<int> covered;
    if (step.kind == Step::Kind::kernel || !step.epilogue.empty()) {
      std::vector<int> stack = step.roots;
      if (!step.epilogue.empty()) stack = {plan.slots[step.slots.back()].instruction};
      std::vector<bool> seen(program.instructions.size(), false);
      while (!stack.empty()) {
        const int at = stack.back();
        stack.pop_back();
        if (at < 0 || seen[at]) continue;
        seen[at] = true;
        covered.push_back(at);
        for (int input : program.instructions[at].inputs) {
          if (!has_slot[input]) stack.push_back(input);
        }
      }
      std::sort(covered.begin(), covered.end());
    } else if (step.instruction >= 0) {
      covered.push_back(step.instruction);
    }
    std::string ops, lines;
    std::vector<std::string> seen_lines;
    for (int at : covered) {
      const Instruction& instruction = program.instructions[at];
      if (instruction.op == Op::parameter || instruction.op == Op::scalar ||
          instruction.op == Op::constant) {
        continue;
      }
      ops += (ops.empty() ? "" : "+") + std::string(instruction.name());
      const std::string line = location_string(instruction.location);
      if (std::find(seen_lines.begin(), seen_lines.end(), line) == seen_lines.end()) {
        seen_lines.push_back(line);
        lines += (lines.empty() ? "" : ", ") + line;
      }
    }
    if (ops.size() > 60) ops = ops.substr(0, 57) + "...";
    labels.push_back(lines.empty() ? ops : ops + " (" + lines + ")");
  }
  return labels;
}

// Called with what a detached compiler would need to finish the build, once
// its C source exists (the compile thread keeps it for the exit).
using SourceReady = std::function<void(DiskCache::DetachedBuild build)>;

// The disk cache's plan for `program`, if it holds one: fills entry.program,
// entry.plan and entry.library. A damaged plan or a missing kernel is a miss
// (the build that follows replaces the entry).
bool load_from_disk(CompiledProgram& entry, uint64_t key, const Program& program,
                    DiskCache& cache) {
  std::string payload;
  std::shared_ptr<Library> library = cache.load(key, &payload);
  if (!library || !deserialize_plan(payload, program, &entry.program, &entry.plan)) return false;
  try {
    resolve_kernels(entry.plan, *library);
  } catch (const Error&) {
    return false;
  }
  entry.library = std::move(library);
  return true;
}

// Builds `entry` from `program` (program_from_graph of the graph): the plan
// the disk cache stored for `key`, else lower() (passes, fusion, donors,
// codegen), then the C compiler (the object and the plan go to the disk
// cache). Runs on the compile thread or, in sync mode, the caller's. In sync mode an interrupt
// stops it between stages or kills the C compiler (toolchain.cpp):
// Interrupted leaves `entry` building, and the caller forgets it. The
// compile thread has no interrupt flag: an interrupt never disturbs a
// background build.
void build(CompiledProgram& entry, uint64_t key, const Program& program, int debug_level,
           DiskCache& cache, const SourceReady& source_ready = nullptr) {
  const auto start = std::chrono::steady_clock::now();
  // Looking for the C compiler costs milliseconds, so it happens here, on
  // the first build, not when an interpreter starts; and in two steps: its
  // identity (`cc --version`) names the disk entry, the trial build (only
  // while no verdict is remembered) waits until something must be compiled,
  // after the source exists, so a process that exits meanwhile can hand
  // the build off.
  const auto no_compiler = [&entry](const Toolchain& tool) {
    entry.error = tool.why_not;
    entry.no_compiler = true;
    entry.state = CompiledProgram::State::failed;
  };
  if (identified_toolchain().identity.empty()) return no_compiler(identified_toolchain());
  profiler::Span span("compile", fmt::format("compile {:016x}", key));
  try {
    if (load_from_disk(entry, key, program, cache)) {
      span.set_detail("the disk cache's plan and object");
      entry.from_disk = true;
      if (debug_level >= 2) print_plan(entry.plan, "from the disk cache: ");
    } else {
      Lowered lowered = lower(program, {.debug_level = debug_level});
      entry.program = std::move(lowered.program);
      entry.plan = std::move(lowered.plan);
      if (debug_level >= 2) print_plan(entry.plan, "");
    }
    if (entry.plan.kernel_count > 0 && !entry.from_disk) {
      // The last stage of docs/architecture.md §5 after lower()'s: the C compiler.
      const auto toolchain_start = std::chrono::steady_clock::now();
      if (debug_level >= 3) std::fprintf(stderr, "%s\n", entry.plan.source.c_str());
      DiskCache::DetachedBuild detached{key, entry.plan.source, entry.plan.summary,
                                        serialize_plan(program, entry.program, entry.plan)};
      if (source_ready) source_ready(detached);
      if (!toolchain().works) return no_compiler(toolchain());
      const double expected = expected_toolchain_seconds(entry.plan.source, thread_count());
      entry.toolchain_expected = expected;
      entry.toolchain_started = steady_seconds();
      std::string error;
      entry.library =
          cache.build(key, entry.plan.source, entry.plan.summary, &error, detached.payload);
      if (entry.library)
        record_toolchain_seconds(expected, steady_seconds() - entry.toolchain_started);
      // A compiler killed for an interrupt failed for no fault of the graph.
      if (!entry.library) check_interrupt();
      if (!entry.library) throw Error("the C compiler failed: " + error);
      resolve_kernels(entry.plan, *entry.library);
      if (debug_level >= 2) {
        print_stage(
            kKernelPrefix, "toolchain",
            std::chrono::duration<double>(std::chrono::steady_clock::now() - toolchain_start)
                .count(),
            fmt::format("{} bytes of C built and loaded", entry.plan.source.size()));
      }
    }
    if (!entry.from_disk) {
      span.set_detail(fmt::format("built: {} kernels, {} bytes of C", entry.plan.kernel_count,
                                  entry.plan.source.size()));
    }
    entry.compile_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    entry.state = CompiledProgram::State::ready;
  } catch (const Interrupted&) {
    throw;
  } catch (const InternalError& error) {
    // A bug in the passes or codegen: raised at the graph's next run, not
    // hidden by running it interpreted.
    entry.error = error.what();
    entry.internal_error = true;
    entry.state = CompiledProgram::State::failed;
  } catch (const std::exception& error) {
    entry.error = error.what();
    entry.state = CompiledProgram::State::failed;
  }
}

// One compile thread for the process, sleeping while there is nothing to
// build. It is never joined. At exit (hand_off, from atexit) the builds in
// flight go to a detached compiler (DiskCache::build_detached) rather than
// being lost, so the next run of a short script finds them in the disk
// cache: the build whose source exists (its compiler is killed with the
// others by toolchain.cpp, and the detached one starts over). Jobs whose
// source does not exist yet are dropped, compiled by a later run: passes
// and codegen use the tensor runtime (its allocator's pools), which is
// being torn down at exit, and cost more than an exit should wait.
class CompileThread {
 public:
  static CompileThread& instance() {
    static CompileThread* thread = new CompileThread;
    return *thread;
  }

  void submit(std::shared_ptr<CompiledProgram> entry, uint64_t key, Program program,
              int debug_level, DiskCache* cache) {
    {
      std::lock_guard lock(mutex_);
      jobs_.push_back(std::make_shared<Job>(
          Job{std::move(entry), key, std::move(program), debug_level, cache}));
    }
    wake_.notify_one();
  }

  // Moves the queued build of `entry` to the front of the queue: a run is
  // about to wait for it, and the builds ahead of it are of graphs that may
  // never run again (a script's one-off graphs before its loop).
  void build_next(const CompiledProgram* entry) {
    std::lock_guard lock(mutex_);
    const auto queued = std::find_if(
        jobs_.begin(), jobs_.end(), [entry](const auto& job) { return job->entry.get() == entry; });
    if (queued == jobs_.end() || queued == jobs_.begin()) return;
    std::shared_ptr<Job> job = std::move(*queued);
    jobs_.erase(queued);
    jobs_.push_front(std::move(job));
  }

 private:
  struct Job {
    std::shared_ptr<CompiledProgram> entry;
    uint64_t key;
    Program program;
    int debug_level;
    DiskCache* cache;
  };

  CompileThread() {
    kill_compilers_at_exit();  // first, so that it runs after hand_off
    std::atexit([] { instance().hand_off(); });
    std::thread([this] { loop(); }).detach();
  }

  void loop() {
    for (;;) {
      std::shared_ptr<Job> job;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [this] { return !jobs_.empty() && !exiting_; });
        job = std::move(jobs_.front());
        jobs_.pop_front();
        current_ = job;
        current_build_.reset();
      }
      build(*job->entry, job->key, job->program, job->debug_level, *job->cache,
            [this, job](DiskCache::DetachedBuild detached) {
              std::lock_guard lock(mutex_);
              if (current_ == job) current_build_ = std::move(detached);
            });
      std::lock_guard lock(mutex_);
      current_.reset();
      current_build_.reset();
    }
  }

  void hand_off() noexcept {
    try {
      DiskCache* cache = nullptr;
      std::vector<DiskCache::DetachedBuild> builds;
      {
        std::lock_guard lock(mutex_);
        exiting_ = true;  // the compile thread starts nothing more
        if (!current_ || !current_build_) return;
        cache = current_->cache;
        builds.push_back(std::move(*current_build_));
      }
      cache->build_detached(builds);
    } catch (...) {  // nothing may escape an atexit handler; the build is lost
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> jobs_;
  bool exiting_ = false;
  std::shared_ptr<Job> current_;  // being built by the compile thread
  // Once current_ has its source: what a detached compiler needs.
  std::optional<DiskCache::DetachedBuild> current_build_;
};

class NativeExecutor final : public Executor {
 public:
  NativeExecutor(CompileMode mode, int debug_level, DiskCache* cache)
      : mode_(mode),
        debug_level_(debug_level),
        cache_(cache ? cache : &DiskCache::instance()),
        reference_(make_reference_executor()) {}

  std::vector<Array> run(const Graph& graph, Metrics& metrics) override {
    if (mode_ == CompileMode::off) return reference_->run(graph, metrics);
    std::shared_ptr<CompiledProgram> entry = find(graph.key);
    if (!entry) {
      metrics.memory_cache_misses++;
      entry = std::make_shared<CompiledProgram>();
      remember(graph.key, entry);
      Program program = program_from_graph(graph);
      if (mode_ == CompileMode::sync) {
        try {
          build(*entry, graph.key, program, debug_level_, *cache_);
        } catch (const Interrupted&) {
          forget(graph.key);  // the next sync of this graph builds it again
          throw;
        }
      } else if (!load_from_disk_now(*entry, graph.key, program)) {
        CompileThread::instance().submit(entry, graph.key, std::move(program), debug_level_,
                                         cache_);
      }
    } else {
      metrics.memory_cache_hits++;
    }
    if (entry->state.load() == CompiledProgram::State::building) wait_if_shorter(*entry);
    switch (entry->state.load()) {
      case CompiledProgram::State::building: {
        const double start = steady_seconds();
        std::vector<Array> outputs = reference_->run(graph, metrics);
        entry->interpreted_seconds = steady_seconds() - start;
        entry->interpreted_runs++;
        return outputs;
      }
      case CompiledProgram::State::failed:
        if (entry->internal_error) throw InternalError("compiling a graph: " + entry->error);
        if (entry->no_compiler) {
          std::fprintf(stderr,
                       "lazylua: no working C compiler (%s); graphs run on the reference "
                       "interpreter\n",
                       entry->error.c_str());
          mode_ = CompileMode::off;
        } else if (!entry->reported) {
          entry->reported = true;
          std::fprintf(stderr, "lazylua: compiling a graph failed (%s); it runs interpreted\n",
                       entry->error.c_str());
        }
        return reference_->run(graph, metrics);
      case CompiledProgram::State::ready:
        break;
    }
    if (!entry->reported) {
      entry->reported = true;
      metrics.compiles += entry->from_disk ? 0 : 1;
      metrics.disk_cache_hits += entry->from_disk ? 1 : 0;
      // Every disk hit now runs the stored plan; the count says so apart.
      metrics.codegen_skipped += entry->from_disk ? 1 : 0;
      metrics.compile_seconds += entry->compile_seconds;
    }
    bool inputs_overwritten = false;
    try {
      metrics.native_runs++;
      metrics.kernels = entry->plan.kernel_count;
      metrics.kernel_functions = entry->plan.function_count;
      return run_plan(entry->plan, entry->program, program_inputs(graph), metrics,
                      &inputs_overwritten);
    } catch (const Interrupted&) {
      throw;  // before any input was overwritten (run_plan): the sync can run again
    } catch (const InternalError&) {
      throw;  // a bug is reported, never retried on the reference interpreter
    } catch (const std::exception&) {
      // A failing kernel (integer division by zero) or fallback step (an
      // index out of range): the reference interpreter raises the same
      // error naming the exact node, which the plan cannot. Such steps
      // never follow a write into a donated input (compiler/donate.cpp);
      // anything else failing after one (memory) cannot be repeated.
      if (inputs_overwritten) throw;
      return reference_->run(graph, metrics);
    }
  }

 private:
  struct KernelFailure : std::exception {
    explicit KernelFailure(int error_code) : code(error_code) {}
    int code;
  };

  // `places` (optional, per program output): contiguous memory where that
  // output should be computed (a scan body's y goes straight into its row
  // of the stacked result).
  //
  // Memory follows plan.memory (compiler/memory_plan.h): a slot gets its
  // memory at the first step that names it, a view of a shared buffer where
  // the memory plan says so, and is let go after its last step, so the
  // buffers go back to the caching allocator while the plan runs.
  std::vector<Array> run_plan(const Plan& plan, const Program& program,
                              const std::vector<Array>& inputs, Metrics& metrics,
                              bool* inputs_overwritten,
                              const std::vector<Array>* places = nullptr) {
    const MemoryPlan& memory = plan.memory;
    LAZYLUA_ASSERT(memory.planned(plan.slots.size(), plan.steps.size()));
    std::vector<Array> slots(plan.slots.size());
    for (size_t s = 0; s < plan.slots.size(); s++) {
      if (plan.slots[s].input_index >= 0) slots[s] = contiguous(inputs[plan.slots[s].input_index]);
    }
    for (size_t k = 0; places && k < places->size(); k++) {
      const Array& place = (*places)[k];
      const int s = plan.outputs[k];
      if (!place.defined() || slots[s].defined() || !place.is_contiguous()) continue;
      if (place.dtype != plan.slots[s].dtype || place.shape != plan.slots[s].shape) continue;
      slots[s] = place;
    }
    std::vector<Ref<Buffer>> shared(memory.buffer_bytes.size());
    // Memory for slot s, when a step is about to fill it.
    const auto allocate = [&](int s) {
      const Slot& slot = plan.slots[static_cast<size_t>(s)];
      const int b = memory.buffer_of_slot[static_cast<size_t>(s)];
      if (b < 0) return Array::empty(slot.shape, slot.dtype);
      // The buffer's previous slots are let go by now; if something still
      // holds it (a step's result that is a view of its input), that keeps
      // its own memory and the slot gets new.
      Ref<Buffer>& buffer = shared[static_cast<size_t>(b)];
      if (!buffer || buffer->use_count() > 1) {
        buffer = make_ref<Buffer>(static_cast<size_t>(memory.buffer_bytes[static_cast<size_t>(b)]));
      }
      Array array;
      array.buffer = buffer;
      array.shape = slot.shape;
      array.strides = contiguous_strides(slot.shape);
      array.dtype = slot.dtype;
      return array;
    };
    std::vector<Array> arguments;
    std::vector<char*> buffers;
    // Once a step writes into a donated input, the graph can no longer run
    // again from its inputs, so an interrupt must not stop it half-way: the
    // rest of the plan (the last updates of an optimizer step, as a rule)
    // runs with no interrupt flag, and the interrupt is delivered at the
    // next check after the sync.
    std::optional<InterruptScope> uninterruptible;
    const std::vector<std::string> labels =
        profiler::active() ? step_labels(plan, program) : std::vector<std::string>{};
    for (size_t i = 0; i < plan.steps.size(); i++) {
      const Step& step = plan.steps[i];
      check_interrupt();
      // Profiling: kernels and eager steps are spans named by their ops'
      // lines; a BLAS call made by the step names them too.
      const profiler::Label label(labels.empty() ? nullptr : &labels[i]);
      profiler::Span span(step_category(step.kind),
                          labels.empty() ? std::string_view() : std::string_view(labels[i]));
      if (span.on()) span.set_work(step_bytes(plan, step), 0);
      if (step.kind == Step::Kind::kernel) {
        for (int slot : step.written) {
          if (plan.slots[slot].input_index < 0) continue;
          *inputs_overwritten = true;
          metrics.donated_buffers++;
          if (!uninterruptible) uninterruptible.emplace(nullptr);
        }
        buffers.clear();
        for (size_t k = 0; k < step.slots.size(); k++) {
          const int s = step.slots[k];
          if (!slots[s].defined()) slots[s] = allocate(s);
          buffers.push_back(static_cast<char*>(slots[s].raw_data()) + step.byte_offset(k));
        }
        std::atomic<int> failure{0};
        const auto kernel = reinterpret_cast<KernelFunction>(plan.functions[i]);
        char* const* data = buffers.data();
        parallel_for(step.iterations, step.grain, [&](int64_t begin, int64_t end) {
          const int code = kernel(data, begin, end);
          if (code != 0) failure.store(code);
        });
        if (failure.load() != 0) throw KernelFailure(failure.load());
      } else if (step.kind == Step::Kind::scan) {
        run_scan(step, slots, metrics);
      } else {
        run_eager_step(step, program, slots, metrics, inputs_overwritten, uninterruptible, allocate,
                       arguments);
      }
      for (int s : memory.slots_released_after[i]) slots[static_cast<size_t>(s)] = Array{};
      for (int b : memory.buffers_released_after[i]) shared[static_cast<size_t>(b)].reset();
    }
    std::vector<Array> outputs;
    outputs.reserve(plan.outputs.size());
    for (int s : plan.outputs) outputs.push_back(slots[s]);
    return outputs;
  }

  // A matrix product, a library step or an eager kernel (an op with no
  // lowering): its inputs from their slots, its result into its slot (a
  // product computes straight into the memory the slot is given).
  template <typename Allocate>
  void run_eager_step(const Step& step, const Program& program, std::vector<Array>& slots,
                      Metrics& metrics, bool* inputs_overwritten,
                      std::optional<InterruptScope>& uninterruptible, const Allocate& allocate,
                      std::vector<Array>& arguments) {
    arguments.clear();
    for (size_t k = 0; k + 1 < step.slots.size(); k++) {
      const Array& value = slots[step.slots[k]];
      const bool transposed = (step.transposed_inputs >> k) & 1u;
      arguments.push_back(transposed ? ops::transpose(value, value.rank() - 2, value.rank() - 1)
                                     : value);
    }
    const Instruction& instruction = program.instructions[step.instruction];
    Array result;
    Array& out = slots[step.slots.back()];
    if (step.kind == Step::Kind::matmul) {
      if (!out.defined()) out = allocate(step.slots.back());
      result = ops::matmul_into(arguments[0], arguments[1], out);
    } else if (step.kind == Step::Kind::library) {
      if (instruction.op == Op::collective) {
        // The other ranks have made this call too: the plan can no longer
        // be run again from the start (on the reference interpreter) nor
        // stop half-way (collectives.h).
        *inputs_overwritten = true;
        if (!uninterruptible) uninterruptible.emplace(nullptr);
      }
      result = evaluate_library_step(step, instruction, arguments);
    } else {
      metrics.fallbacks++;
      metrics.fallbacks_by_op[instruction.name()]++;
      result = evaluate_instruction(instruction, arguments);
    }
    // The inputs' references go now, so that a slot let go after this step
    // frees its memory (or its shared buffer is free for the next slot).
    arguments.clear();
    if (!out.defined()) {
      out = contiguous(result);
    } else if (result.buffer != out.buffer || result.offset != out.offset) {
      copy_kernel(result, out);  // a placed output
    }
  }

  // A scan step: the body's plan once per slice, each y computed straight
  // into its row of the stacked output where the plan can.
  void run_scan(const Step& step, std::vector<Array>& slots, Metrics& metrics) {
    const ScanPlan& scan = *step.scan;
    const ScanBody& body = *scan.body;
    const int inputs_count = body.carries + body.xs + body.captured;
    std::vector<Array> inputs(inputs_count);
    for (int k = 0; k < inputs_count; k++) inputs[k] = slots[step.slots[k]];
    bool unused = false;
    const Array packed = run_scan_iterations(
        body, inputs, [&](const std::vector<Array>& body_inputs, const std::vector<Array>& places) {
          return run_plan(scan.plan, scan.program, body_inputs, metrics, &unused, &places);
        });
    slots[step.slots[inputs_count]] = packed;
    for (size_t p = 0; p < step.parts.size(); p++) {
      const int k = step.parts[p];
      slots[step.slots[inputs_count + 1 + p]] = scan_output_view(
          packed, body.output_dtypes[k], body.output_shapes[k], body.output_offsets[k]);
    }
  }

  // A graph that an earlier process compiled is loaded here, at once (a
  // read and a dlopen: milliseconds), so a later process runs native code
  // from its first call; only a miss goes to the compile thread.
  bool load_from_disk_now(CompiledProgram& entry, uint64_t key, const Program& program) {
    const double start = steady_seconds();
    if (identified_toolchain().identity.empty()) return false;
    if (!load_from_disk(entry, key, program, *cache_)) return false;
    entry.from_disk = true;
    entry.compile_seconds = steady_seconds() - start;
    entry.state = CompiledProgram::State::ready;
    if (debug_level_ >= 2) print_plan(entry.plan, "from the disk cache: ");
    return true;
  }

  // The first run of a new graph runs on the reference interpreter while
  // the compile thread builds it. The second waits for the build instead
  // when it should end sooner than that run would take interpreted (a
  // bounded wait: the estimate may be wrong), rather than being
  // interpreted once more while the interpreter's threads slow the compiler
  // down. The third waits for the build to end (build_schedule.h,
  // kInterpretedRunsBeforeWaiting): an imported model's third call runs
  // native code. Every wait is interruptible.
  // Polls (interruptibly) until the build ends or the steady clock reaches
  // `until`; true when the build ended.
  static bool wait_while_building(const CompiledProgram& entry, double until) {
    while (entry.state.load() == CompiledProgram::State::building && steady_seconds() < until) {
      check_interrupt();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return entry.state.load() != CompiledProgram::State::building;
  }

  void wait_if_shorter(CompiledProgram& entry) {
    if (entry.interpreted_runs >= kInterpretedRunsBeforeWaiting) return wait_for_build(entry);
    const double started = entry.toolchain_started.load();
    // Not while queued or in passes and codegen (no estimate yet), nor
    // after a wait for this build gave up.
    if (started <= 0 || entry.gave_up_waiting) return;
    const double remaining =
        expected_remaining_seconds(entry.toolchain_expected.load(), steady_seconds() - started);
    if (!wait_for_build_is_shorter(remaining, entry.interpreted_seconds)) return;
    const double start = steady_seconds();
    entry.gave_up_waiting =
        !wait_while_building(entry, start + longest_build_wait_seconds(entry.interpreted_seconds));
    if (debug_level_ >= 1) {
      std::fprintf(stderr,
                   "[lazylua] waited %.1f ms for a graph's native code (expected in %.1f ms; "
                   "its interpreted run took %.1f ms)%s\n",
                   (steady_seconds() - start) * 1e3, remaining * 1e3,
                   entry.interpreted_seconds * 1e3, entry.gave_up_waiting ? ": gave up" : "");
    }
  }

  void wait_for_build(CompiledProgram& entry) {
    const double start = steady_seconds();
    CompileThread::instance().build_next(&entry);
    wait_while_building(entry, std::numeric_limits<double>::infinity());
    if (debug_level_ >= 1) {
      std::fprintf(stderr,
                   "[lazylua] waited %.1f ms for a graph's native code (after %d interpreted "
                   "runs)\n",
                   (steady_seconds() - start) * 1e3, entry.interpreted_runs);
    }
  }

  std::shared_ptr<CompiledProgram> find(uint64_t key) {
    auto found = entries_.find(key);
    if (found == entries_.end()) return nullptr;
    recent_.splice(recent_.begin(), recent_, found->second.second);
    return found->second.first;
  }

  void forget(uint64_t key) {
    auto found = entries_.find(key);
    if (found == entries_.end()) return;
    recent_.erase(found->second.second);
    entries_.erase(found);
  }

  // A bounded cache: the least recently run program goes first.
  void remember(uint64_t key, std::shared_ptr<CompiledProgram> entry) {
    recent_.push_front(key);
    entries_[key] = {std::move(entry), recent_.begin()};
    if (entries_.size() > kCapacity) {
      entries_.erase(recent_.back());
      recent_.pop_back();
    }
  }

  static constexpr size_t kCapacity = 512;
  CompileMode mode_;
  int debug_level_;
  DiskCache* cache_;  // lives as long as the process
  std::unique_ptr<Executor> reference_;
  std::list<uint64_t> recent_;
  std::unordered_map<uint64_t,
                     std::pair<std::shared_ptr<CompiledProgram>, std::list<uint64_t>::iterator>>
      entries_;
};

}  // namespace

CompileMode compile_mode_from_environment() {
  const char* text = std::getenv("LAZYLUA_COMPILE");
  if (!text || !*text || std::strcmp(text, "background") == 0) return CompileMode::background;
  if (std::strcmp(text, "sync") == 0) return CompileMode::sync;
  if (std::strcmp(text, "off") == 0 || std::strcmp(text, "0") == 0) return CompileMode::off;
  std::fprintf(stderr, "lazylua: unknown LAZYLUA_COMPILE=%s (expected background, sync or off)\n",
               text);
  return CompileMode::background;
}

std::unique_ptr<Executor> make_native_executor(CompileMode mode, int debug_level,
                                               DiskCache* cache) {
  return std::make_unique<NativeExecutor>(mode, debug_level, cache);
}

std::string generated_source(const Graph& graph) {
  return lower(program_from_graph(graph)).plan.source;
}

}  // namespace lazylua::compiler
