// bench_foundation.cpp - the foundation's performance targets, each measured
// side by side with its reference in one run (docs/architecture.md §8):
//  (a) per-op overhead of tiny tensor ops called from Lua, against the
//      target and against a Lua table's __add metamethod;
//  (b) 16M-element f32 `c = a + b` from Lua against a plain C++ add loop
//      on the same thread pool;
//  (c) `a:matmul(b)` from Lua against OpenBLAS's sgemm called directly
//      (through tensor/blas.h: the same library and core lazylua uses).
// The machine is shared and noisy: every measurement is the best of several
// repetitions, and the repetitions of a pair are interleaved.
//
// Usage: bench_foundation [scale]   (scale < 1 shortens the run, e.g. 0.1)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <memory>
#include <string>

#include <lua.hpp>

#include "interp/runtime.h"
#include "tensor/blas.h"
#include "tensor/kernels/simd.h"
#include "tensor/thread_pool.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds(const std::function<void()>& work) {
  const Clock::time_point start = Clock::now();
  work();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

constexpr const char* kBenchmarkLua = R"lua(
local tensor = tensor
-- If ops are recorded lazily, make the large ones run.
local force = tensor.sync or function() end

-- Mode 1 runs each op at once (eager), 0 records it (lazy, the default).
local set_eager = tensor.set_eager or function() end
function use_eager(flag) set_eager(flag == 1) end
-- Untimed between loops: pending work and garbage of one loop must not be
-- paid for inside the next one's timing.
function settle() if tensor.mark_step then tensor.mark_step() end collectgarbage() end

local a4, b4 = tensor.rand(4), tensor.rand(4)
function loop_empty(n) local c for i = 1, n do c = a4 end return c end
function loop_add(n) local c for i = 1, n do c = a4 + b4 end return c end
function loop_exp(n) local c for i = 1, n do c = a4:exp() end return c end
function loop_sum(n) local c for i = 1, n do c = a4:sum() end return c end
-- What any Lua object with an arithmetic metamethod costs.
local meta = {__add = function(x, y) return x end}
local ta, tb = setmetatable({}, meta), setmetatable({}, meta)
function loop_table_add(n) local c for i = 1, n do c = ta + tb end return c end

-- <close> hands each result's buffer back at once, so the next iteration
-- reuses it instead of faulting in fresh pages.
local big_a, big_b = tensor.rand(16 * 1024 * 1024), tensor.rand(16 * 1024 * 1024)
function big_add(n) for i = 1, n do local c <close> = big_a + big_b; force(c) end end

local m1, m2 = tensor.rand(1024, 1024), tensor.rand(1024, 1024)
function matmul_square(n) for i = 1, n do local c <close> = m1:matmul(m2); force(c) end end
local x, w = tensor.rand(128, 784), tensor.rand(784, 256)
function matmul_mlp(n) for i = 1, n do local c <close> = x:matmul(w); force(c) end end
)lua";

class Interpreter {
 public:
  Interpreter() : state_(luaL_newstate()) {
    lua_pushcfunction(state_, [](lua_State* L) {
      lazylua::open_lazylua(L);
      return 0;
    });
    check(lua_pcall(state_, 0, 0, 0), "open_lazylua");
    check(luaL_loadstring(state_, kBenchmarkLua), "loading the benchmark chunk");
    check(lua_pcall(state_, 0, 0, 0), "running the benchmark chunk");
  }
  ~Interpreter() { lua_close(state_); }

  // Seconds that global function `name`(argument) takes.
  double time(const char* name, int64_t argument) {
    lua_getglobal(state_, name);
    lua_pushinteger(state_, argument);
    double elapsed = seconds([&] { check(lua_pcall(state_, 1, 0, 0), name); });
    lua_gc(state_, LUA_GCCOLLECT);  // each measurement starts from a clean heap
    return elapsed;
  }

 private:
  void check(int status, const char* what) {
    if (status == LUA_OK) return;
    std::fprintf(stderr, "bench_foundation: %s: %s\n", what, lua_tostring(state_, -1));
    std::exit(1);
  }
  lua_State* state_;
};

// z = x + y over count elements, written with explicit vectors: the build's
// -O2 would leave a plain loop scalar, and the reference must be the best
// simple loop, not a handicapped one.
void add_range(const float* x, const float* y, float* z, int64_t count) {
  namespace simd = lazylua::simd;
  constexpr int kWidth = simd::kLanes<float>;
  const int64_t vector_end = count / kWidth * kWidth;
  for (int64_t i = 0; i < vector_end; i += kWidth) {
    simd::store(z + i, simd::load(x + i) + simd::load(y + i));
  }
  for (int64_t i = vector_end; i < count; ++i) z[i] = x[i] + y[i];
}

// A float buffer with every page already touched.
std::unique_ptr<float[]> filled(int64_t count, float value) {
  auto buffer = std::make_unique<float[]>(count);
  std::fill(buffer.get(), buffer.get() + count, value);
  return buffer;
}

struct Best {
  double value = std::numeric_limits<double>::infinity();
  void add(double sample) { value = std::min(value, sample); }
};

const char* verdict(bool met) {
  return met ? "meets target" : "MISSES target";
}

void per_op_overhead(Interpreter& lua, int64_t iterations, int repetitions) {
  struct Row {
    const char* label;
    const char* function;
    Best time[2];  // per mode: lazy (recording), eager (running the kernel)
  };
  Row rows[] = {{"c = a + b", "loop_add", {}},
                {"c = a:exp()", "loop_exp", {}},
                {"c = a:sum()", "loop_sum", {}},
                {"(Lua table __add)", "loop_table_add", {}}};
  Best empty[2];
  for (int r = 0; r < repetitions; ++r) {
    for (int eager = 0; eager < 2; ++eager) {
      lua.time("use_eager", eager);
      lua.time("settle", 0);
      empty[eager].add(lua.time("loop_empty", iterations));
      for (Row& row : rows) {
        row.time[eager].add(lua.time(row.function, iterations));
        lua.time("settle", 0);
      }
    }
  }
  lua.time("use_eager", 0);
  auto microseconds = [&](const Row& row, int eager) {
    return (row.time[eager].value - empty[eager].value) / iterations * 1e6;
  };
  const double table_add_us = microseconds(rows[3], 0);
  std::printf(
      "\n(a) per-op overhead, 4-element f32 tensors, from Lua loops (%d slices of %lld "
      "iterations, best slice), minus the empty loop\n",
      repetitions, static_cast<long long>(iterations));
  std::printf("    %-18s %-6s %8s %16s %20s\n", "op", "mode", "us/op", "/ target 0.5us",
              "/ Lua table __add");
  for (const Row& row : rows) {
    for (int eager = 0; eager < 2; ++eager) {
      if (&row == &rows[3] && eager) continue;
      const double us = microseconds(row, eager);
      std::printf("    %-18s %-6s %8.3f %15.2fx %19.1fx", eager ? "" : row.label,
                  &row == &rows[3] ? ""
                  : eager          ? "eager"
                                   : "lazy",
                  us, us / 0.5, us / table_add_us);
      if (&row != &rows[3]) std::printf("   %s", verdict(us <= 0.5));
      std::printf("\n");
    }
  }
  std::printf("    (target <= 0.5 us/op, i.e. a ratio <= 1; PyTorch eager needs ~1.4 us/op)\n");
}

void large_add(Interpreter& lua, int repetitions) {
  const int64_t count = int64_t{16} << 20;
  auto a = filled(count, 1.0f), b = filled(count, 2.0f), c = filled(count, 0.0f);
  Best lua_time, reference_time;
  lua.time("big_add", 1);  // warm the allocator's cache
  for (int r = 0; r < repetitions; ++r) {
    lua_time.add(lua.time("big_add", 1));
    reference_time.add(seconds([&] {
      const float* x = a.get();
      const float* y = b.get();
      float* z = c.get();
      lazylua::parallel_for(count, lazylua::kElementwiseGrain, [&](int64_t begin, int64_t end) {
        add_range(x + begin, y + begin, z + begin, end - begin);
      });
    }));
  }
  const double bytes = 3.0 * count * sizeof(float);
  const double ratio = reference_time.value / lua_time.value;
  std::printf(
      "\n(b) 16M f32 c = a + b from Lua (lazy + tensor.sync) vs a C++ add loop on the "
      "same %d threads\n",
      lazylua::thread_count());
  std::printf("    lua %.1f GB/s, C++ loop %.1f GB/s: ratio %.2f (target >= 0.7)   %s\n",
              bytes / lua_time.value * 1e-9, bytes / reference_time.value * 1e-9, ratio,
              verdict(ratio >= 0.7));
}

void matmul(Interpreter& lua, const char* function, int64_t m, int64_t k, int64_t n,
            int repetitions) {
  auto a = filled(m * k, 0.5f), b = filled(k * n, 0.25f), c = filled(m * n, 0.0f);
  Best lua_time, blas_time;
  const int calls = std::max<int64_t>(1, 200'000'000 / (2 * m * k * n));  // >= ~0.2 GFLOP a sample
  lua.time(function, 1);
  for (int r = 0; r < repetitions; ++r) {
    lua_time.add(lua.time(function, calls) / calls);
    // lazylua runs OpenBLAS single-threaded and splits products on its own
    // pool; the reference is OpenBLAS with its own threads, as a C program
    // calling it would have them.
    lazylua::blas::set_threads(lazylua::thread_count());
    blas_time.add(seconds([&] {
                    for (int i = 0; i < calls; ++i) {
                      lazylua::blas::sgemm(false, false, m, n, k, 1.0f, a.get(), k, b.get(), n,
                                           0.0f, c.get(), n);
                    }
                  }) /
                  calls);
    lazylua::blas::set_threads(1);
  }
  const double flops = 2.0 * m * k * n;
  const double ratio = blas_time.value / lua_time.value;
  std::printf(
      "    %4lldx%-4lld @ %4lldx%-4lld  lua %6.1f GFLOP/s, cblas_sgemm %6.1f GFLOP/s: ratio "
      "%.2f (target >= 0.9)   %s\n",
      static_cast<long long>(m), static_cast<long long>(k), static_cast<long long>(k),
      static_cast<long long>(n), flops / lua_time.value * 1e-9, flops / blas_time.value * 1e-9,
      ratio, verdict(ratio >= 0.9));
}

}  // namespace

int main(int argc, char** argv) {
  const double scale = argc > 1 ? std::atof(argv[1]) : 1.0;
  if (!(scale > 0)) {
    std::fprintf(stderr, "usage: bench_foundation [scale > 0]\n");
    return 2;
  }
  const int repetitions = 5;
  Interpreter lua;
  std::printf("lazylua foundation benchmark: %d threads, best of %d interleaved repetitions\n",
              lazylua::thread_count(), repetitions);
  // 1e6 iterations per loop, timed in 5 interleaved slices of 2e5.
  per_op_overhead(lua, std::max<int64_t>(1000, static_cast<int64_t>(2e5 * scale)), 5);
  large_add(lua, repetitions);
  const lazylua::blas::Info blas = lazylua::blas::info();
  std::printf(
      "\n(c) f32 matmul from Lua (a:matmul(b), lazy + tensor.sync) vs cblas_sgemm on "
      "buffers of the same sizes (%s, core %s chosen by %s)\n",
      blas.name.c_str(), blas.core.c_str(), blas.core_source.c_str());
  matmul(lua, "matmul_square", 1024, 1024, 1024, repetitions);
  matmul(lua, "matmul_mlp", 128, 784, 256, repetitions);
  return 0;
}
