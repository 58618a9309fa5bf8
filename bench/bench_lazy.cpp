// bench_lazy.cpp - what laziness costs, measured side by side in one run
// (docs/architecture.md §8):
//  (a) recording one op, against running the same op eagerly and against an
//      empty Lua loop (targets: recording at most 1 µs; PyTorch's lazy
//      tensor needs ~4.6 µs);
//  (b) syncing an already-seen 10-op graph of tiny tensors, beyond the time
//      its kernels take (target at most 10 µs; PyTorch's lazy tensor spends
//      ~80-100 µs), with tensor.sync and with mark_step.
// The machine is shared and noisy: each figure is the best of several
// repetitions, and the repetitions of a pair are interleaved.
//
// Usage: bench_lazy [scale]   (scale < 1 shortens the run)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <lua.hpp>

#include "interp/runtime.h"

namespace {

constexpr const char* kBenchmarkLua = R"lua(
local a, b = tensor.rand(4), tensor.rand(4)
function empty_loop(n) local c for i = 1, n do c = a end return c end
function add_loop(n) local c for i = 1, n do c = a + b end return c end
function mixed_loop(n)
  local c
  for i = 1, n do c = (a * 0.5):exp() end
  return c
end

-- Ten ops on tiny tensors, then a sync: the graph is the same every time.
local x, w = tensor.rand(4), tensor.rand(4)
local function ten_ops()
  local y = x * w + 0.5
  y = y:tanh() * 2 - x
  y = y:exp():sqrt()
  return (y + w):relu():neg()
end
function sync_loop(n)
  for i = 1, n do
    local y = ten_ops()
    tensor.sync(y)
  end
end
function mark_step_loop(n)
  for i = 1, n do
    x:add_(ten_ops() * 0.001)
    tensor.mark_step()
  end
end
function metrics() return tensor.metrics() end
)lua";

double time_lua(lua_State* L, const char* function, int iterations) {
  lua_getglobal(L, function);
  lua_pushinteger(L, iterations);
  const auto start = std::chrono::steady_clock::now();
  if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
    std::fprintf(stderr, "bench_lazy: %s\n", lua_tostring(L, -1));
    std::exit(1);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void run_lua(lua_State* L, const char* code) {
  if (luaL_dostring(L, code) != LUA_OK) {
    std::fprintf(stderr, "bench_lazy: %s\n", lua_tostring(L, -1));
    std::exit(1);
  }
}

double metric(lua_State* L, const char* name) {
  lua_getglobal(L, "metrics");
  lua_call(L, 0, 1);
  lua_getfield(L, -1, name);
  const double value = lua_tonumber(L, -1);
  lua_pop(L, 2);
  return value;
}

// Microseconds per iteration of `function`, best of `repeats`.
double best_us(lua_State* L, const char* function, int iterations, int repeats) {
  double best = 1e30;
  for (int r = 0; r < repeats; r++) {
    best = std::min(best, time_lua(L, function, iterations) / iterations * 1e6);
    run_lua(L, "tensor.mark_step(); collectgarbage()");
  }
  return best;
}

struct SyncFigures {
  double per_iteration_us, execute_us, sync_us;
};

// One loop's cost split by the metrics: the executor's time (the kernels)
// and the whole sync's time, per sync.
SyncFigures measure_syncs(lua_State* L, const char* function, int iterations, int repeats) {
  SyncFigures best{1e30, 0, 0};
  time_lua(L, function, 100);  // the first sync of a new graph is not the point
  for (int r = 0; r < repeats; r++) {
    run_lua(L, "tensor.reset_metrics()");
    const double total = time_lua(L, function, iterations);
    const double syncs = metric(L, "graphs_executed");
    SyncFigures figures{total / iterations * 1e6, metric(L, "execute_seconds") / syncs * 1e6,
                        metric(L, "sync_seconds") / syncs * 1e6};
    if (figures.per_iteration_us < best.per_iteration_us) best = figures;
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const double scale = argc > 1 ? std::atof(argv[1]) : 1.0;
  const int iterations = std::max(1000, static_cast<int>(200000 * scale));
  const int repeats = 5;
  lua_State* L = luaL_newstate();
  lua_pushcfunction(L, [](lua_State* state) {
    lazylua::open_lazylua(state);
    return 0;
  });
  if (lua_pcall(L, 0, 0, 0) != LUA_OK) return 1;
  run_lua(L, kBenchmarkLua);

  std::printf("bench_lazy: %d iterations, best of %d\n\n", iterations, repeats);
  // (a) Recording against eager execution, interleaved.
  double empty = 1e30, lazy_add = 1e30, eager_add = 1e30, lazy_mixed = 1e30, eager_mixed = 1e30;
  for (int r = 0; r < repeats; r++) {
    empty = std::min(empty, best_us(L, "empty_loop", iterations, 1));
    run_lua(L, "tensor.set_eager(false)");
    lazy_add = std::min(lazy_add, best_us(L, "add_loop", iterations, 1));
    lazy_mixed = std::min(lazy_mixed, best_us(L, "mixed_loop", iterations / 2, 1));
    run_lua(L, "tensor.set_eager(true)");
    eager_add = std::min(eager_add, best_us(L, "add_loop", iterations, 1));
    eager_mixed = std::min(eager_mixed, best_us(L, "mixed_loop", iterations / 2, 1));
    run_lua(L, "tensor.set_eager(false)");
  }
  const double record_add = lazy_add - empty, record_mixed = (lazy_mixed - empty) / 3;
  std::printf("(a) cost of one op on a 4-element tensor, beyond an empty Lua loop (%.3f us)\n",
              empty);
  std::printf("    c = a + b        record %.3f us   eager %.3f us   record/eager %.2f\n",
              record_add, eager_add - empty, record_add / (eager_add - empty));
  std::printf(
      "    (a*0.5):exp()    record %.3f us/op (3 ops: scalar, mul, exp)   eager %.3f us/op\n",
      record_mixed, (eager_mixed - empty) / 2);
  std::printf("    target: recording at most 1 us/op -> %s (PyTorch lazy ~4.6 us)\n\n",
              std::max(record_add, record_mixed) <= 1.0 ? "met" : "MISSED");

  // (b) Sync overhead of a cached 10-op graph.
  const int sync_iterations = std::max(500, iterations / 10);
  const SyncFigures by_sync = measure_syncs(L, "sync_loop", sync_iterations, repeats);
  const SyncFigures by_step = measure_syncs(L, "mark_step_loop", sync_iterations, repeats);
  std::printf("(b) a cached 10-op graph of 4-element tensors, per iteration\n");
  std::printf(
      "    tensor.sync(y):  total %.2f us = recording + sync %.2f us (kernels %.2f us,"
      " overhead %.2f us)\n",
      by_sync.per_iteration_us, by_sync.sync_us, by_sync.execute_us,
      by_sync.sync_us - by_sync.execute_us);
  std::printf(
      "    mark_step():     total %.2f us = recording + sync %.2f us (kernels %.2f us,"
      " overhead %.2f us)\n",
      by_step.per_iteration_us, by_step.sync_us, by_step.execute_us,
      by_step.sync_us - by_step.execute_us);
  const double overhead =
      std::max(by_sync.sync_us - by_sync.execute_us, by_step.sync_us - by_step.execute_us);
  std::printf(
      "    target: sync overhead beyond kernels at most 10 us -> %s (PyTorch lazy ~80-100 us)\n",
      overhead <= 10.0 ? "met" : "MISSED");
  std::printf(
      "    (the reference executor runs these kernels; the compiler of issue 4 replaces it)\n");
  lua_close(L);
  return 0;
}
