// bench_compiler.cpp - the compiler's targets, each measured side by side
// with its reference in one run (docs/architecture.md §8):
//  W1  y = tanh((a*b + c)*0.5) + a on 16M f32: lazylua (native) against a
//      hand-written fused C loop on the same threads, and against lazylua's
//      eager mode;
//  W4  row softmax 4096x1024 and W5 the sum of 16M floats against
//      hand-written C;
//  cold compile of a 100-node graph, a disk-cache hit, and the overhead of
//  syncing a cached graph beyond its kernels.
// Every figure is the best of several interleaved repetitions.
//
// Usage: bench_compiler [scale]   (scale < 1 shortens the run)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <dlfcn.h>
#include <unistd.h>

#include <lua.hpp>

#include "interp/runtime.h"
#include "tensor/thread_pool.h"

extern "C" {
#include "tensor/kernels/kernel_math.h"
}

namespace {

double seconds(const std::function<void()>& work) {
  const auto start = std::chrono::steady_clock::now();
  work();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

lua_State* new_interpreter() {
  lua_State* L = luaL_newstate();
  lua_pushcfunction(L, [](lua_State* state) {
    lazylua::open_lazylua(state);
    return 0;
  });
  if (lua_pcall(L, 0, 0, 0) != LUA_OK) {
    std::fprintf(stderr, "bench_compiler: %s\n", lua_tostring(L, -1));
    std::exit(1);
  }
  return L;
}

void run(lua_State* L, const std::string& code) {
  if (luaL_dostring(L, code.c_str()) != LUA_OK) {
    std::fprintf(stderr, "bench_compiler: %s\n", lua_tostring(L, -1));
    std::exit(1);
  }
}

double number(lua_State* L, const std::string& expression) {
  run(L, "return " + expression);
  const double value = lua_tonumber(L, -1);
  lua_pop(L, 1);
  return value;
}

// Best time of `repeats` runs of a Lua function taking no arguments.
double best_lua(lua_State* L, const char* function, int repeats) {
  double best = 1e30;
  for (int r = 0; r < repeats; r++) {
    lua_getglobal(L, function);
    const double t = seconds([&] {
      if (lua_pcall(L, 0, 0, 0) != LUA_OK) {
        std::fprintf(stderr, "bench_compiler: %s\n", lua_tostring(L, -1));
        std::exit(1);
      }
    });
    best = std::min(best, t);
  }
  return best;
}

double best_of(int repeats, const std::function<void()>& work) {
  double best = 1e30;
  for (int r = 0; r < repeats; r++) best = std::min(best, seconds(work));
  return best;
}

// The hand-written references: plain loops over restrict pointers, built
// with the generated code's flags (see CMakeLists.txt), on the same pool.
void w1_rows(const float* __restrict a, const float* __restrict b, const float* __restrict c,
             float* __restrict y, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; i++) y[i] = ll_tanhf((a[i] * b[i] + c[i]) * 0.5f) + a[i];
}

void softmax_row(const float* __restrict in, float* __restrict out, int64_t cols) {
  float max = in[0];
  for (int64_t j = 1; j < cols; j++) max = in[j] > max ? in[j] : max;
  float sum = 0;
  for (int64_t j = 0; j < cols; j++) {
    out[j] = ll_expf(in[j] - max);
    sum += out[j];
  }
  const float inverse = 1.0f / sum;
  for (int64_t j = 0; j < cols; j++) out[j] *= inverse;
}

double sum_range(const float* __restrict a, int64_t lo, int64_t hi) {
  float lanes[16] = {};
  int64_t i = lo;
  for (; i + 16 <= hi; i += 16) {
    for (int j = 0; j < 16; j++) lanes[j] += a[i + j];
  }
  double total = 0;
  for (; i < hi; i++) total += a[i];
  for (float lane : lanes) total += lane;
  return total;
}

constexpr const char* kWorkloads = R"lua(
local n = N
a, b, c = tensor.rand(n), tensor.rand(n), tensor.rand(n)
function w1() local y <close> = ((a * b + c) * 0.5):tanh() + a; tensor.sync(y) end
x = tensor.randn(4096, 1024)
function w4() local y <close> = x:softmax(2); tensor.sync(y) end
function w5() local s <close> = a:sum(); tensor.sync(s) end
)lua";

}  // namespace

int main(int argc, char** argv) {
  const double scale = argc > 1 ? std::atof(argv[1]) : 1.0;
  const int64_t n = std::max<int64_t>(1 << 16, static_cast<int64_t>((1 << 24) * scale));
  const int repeats = 7;
  const std::string cache =
      std::filesystem::temp_directory_path() / ("lazylua-bench-cache-" + std::to_string(getpid()));
  setenv("LAZYLUA_CACHE_DIR", cache.c_str(), 1);
  setenv("LAZYLUA_COMPILE", "sync", 1);
  std::printf("bench_compiler: %lld elements, %d threads, best of %d\n\n",
              static_cast<long long>(n), lazylua::thread_count(), repeats);

  lua_State* L = new_interpreter();
  std::string workloads = kWorkloads;
  workloads.replace(workloads.find("N"), 1, std::to_string(n));
  run(L, workloads);

  // Hand-written references on the same data and thread pool.
  lua_getglobal(L, "a");
  lua_pop(L, 1);
  std::vector<float> a(n), b(n), c(n), y(n);
  for (int64_t i = 0; i < n; i++) {
    a[i] = static_cast<float>(std::rand()) / RAND_MAX;
    b[i] = static_cast<float>(std::rand()) / RAND_MAX;
    c[i] = static_cast<float>(std::rand()) / RAND_MAX;
  }
  auto hand_w1 = [&] {
    lazylua::parallel_for(n, 1 << 16, [&](int64_t begin, int64_t end) {
      w1_rows(a.data(), b.data(), c.data(), y.data(), begin, end);
    });
  };
  const int64_t rows = 4096, cols = 1024;
  std::vector<float> x(rows * cols), soft(rows * cols);
  for (float& v : x) v = static_cast<float>(std::rand()) / RAND_MAX * 4 - 2;
  auto hand_w4 = [&] {
    lazylua::parallel_for(rows, 16, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; r++) softmax_row(&x[r * cols], &soft[r * cols], cols);
    });
  };
  double total = 0;
  auto hand_w5 = [&] {
    const int chunks = lazylua::thread_count() * 4;
    std::vector<double> partial(chunks);
    lazylua::parallel_for(chunks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t k = begin; k < end; k++) {
        partial[k] = sum_range(a.data(), n * k / chunks, n * (k + 1) / chunks);
      }
    });
    total = 0;
    for (double p : partial) total += p;
  };

  // First runs compile (sync mode); the timings below are of cached graphs.
  run(L, "w1(); w4(); w5()");
  double lazy_w1 = 1e30, hand1 = 1e30, eager_w1 = 1e30, lazy_w4 = 1e30, hand4 = 1e30,
         lazy_w5 = 1e30, hand5 = 1e30;
  for (int r = 0; r < repeats; r++) {
    lazy_w1 = std::min(lazy_w1, best_lua(L, "w1", 1));
    hand1 = std::min(hand1, best_of(1, hand_w1));
    run(L, "tensor.set_eager(true)");
    eager_w1 = std::min(eager_w1, best_lua(L, "w1", 1));
    run(L, "tensor.set_eager(false)");
    lazy_w4 = std::min(lazy_w4, best_lua(L, "w4", 1));
    hand4 = std::min(hand4, best_of(1, hand_w4));
    lazy_w5 = std::min(lazy_w5, best_lua(L, "w5", 1));
    hand5 = std::min(hand5, best_of(1, hand_w5));
  }
  const double floor_w1 = 16.0 * n / 28e9;  // 16 bytes an element at ~28 GB/s (PERF_NOTES)
  std::printf(
      "W1 tanh((a*b + c)*0.5) + a   lazylua %.2f ms   hand-written C %.2f ms   eager %.2f ms\n",
      lazy_w1 * 1e3, hand1 * 1e3, eager_w1 * 1e3);
  std::printf(
      "   lazylua / hand C = %.2f (target <= 1.15)   eager / lazylua = %.1fx (target >= 3)"
      "   bandwidth floor %.2f ms\n",
      lazy_w1 / hand1, eager_w1 / lazy_w1, floor_w1 * 1e3);
  std::printf(
      "W4 row softmax 4096x1024     lazylua %.2f ms   hand-written C %.2f ms   ratio %.2f "
      "(target <= 1.2)\n",
      lazy_w4 * 1e3, hand4 * 1e3, lazy_w4 / hand4);
  std::printf(
      "W5 sum of %lld floats        lazylua %.2f ms   hand-written C %.2f ms   ratio %.2f "
      "(target <= 1.2)\n",
      static_cast<long long>(n), lazy_w5 * 1e3, hand5 * 1e3, lazy_w5 / hand5);

  // Cold compiles of two 100-node graphs: a typical mix (products, biases,
  // activations, row statistics), and a chain of 33 tanh that fuses into
  // one loop with every tanh inlined (the worst case for the C compiler).
  run(L, R"lua(
    local x, w = tensor.rand(64, 128), tensor.rand(128, 128) * 0.01
    tensor.reset_metrics()
    local h = x
    for i = 1, 12 do h = (h:matmul(w) + 0.5):relu() - h:mean(2, true) * 0.1 end
    tensor.sync(h)
  )lua");
  const double cold_mixed = number(L, "tensor.metrics().compile_seconds");
  const double nodes_mixed = number(L, "tensor.metrics().nodes_executed");
  run(L, R"lua(
    local u = tensor.rand(1000)
    tensor.reset_metrics()
    local v = u
    for i = 1, 33 do v = (v * 1.5 + u):tanh() end
    tensor.sync(v)
  )lua");
  const double cold = number(L, "tensor.metrics().compile_seconds");
  const double nodes = number(L, "tensor.metrics().nodes_executed");
  std::printf("cold compile of a %.0f-node mixed graph %.3f s (target <= 0.5)\n", nodes_mixed,
              cold_mixed);
  lua_close(L);
  // A fresh interpreter has an empty memory cache: the same graph comes
  // from the disk cache.
  lua_State* second = new_interpreter();
  run(second, R"lua(
    local u = tensor.rand(1000)
    local v = u
    for i = 1, 33 do v = (v * 1.5 + u):tanh() end
    tensor.reset_metrics()
    tensor.sync(v)
  )lua");
  const double disk = number(second, "tensor.metrics().compile_seconds");
  const double disk_hits = number(second, "tensor.metrics().disk_hits");
  std::printf("cold compile of a %.0f-node chain of 33 tanh %.3f s (target <= 0.5)\n", nodes, cold);
  std::printf(
      "disk-cache hit of that graph in a new interpreter %.2f ms (target <= 10; %.0f disk "
      "hit)\n",
      disk * 1e3, disk_hits);

  // Sync overhead of a cached tiny graph beyond its kernels.
  run(second, R"lua(
    local p, q = tensor.rand(4), tensor.rand(4)
    function tiny(n) for i = 1, n do local r = ((p * q + 0.5):tanh() * 2 - p):exp(); tensor.sync(r) end end
    tiny(100)
    tensor.reset_metrics()
  )lua");
  double best_overhead = 1e30;
  for (int r = 0; r < repeats; r++) {
    run(second, "tensor.reset_metrics(); tiny(2000)");
    const double syncs = number(second, "tensor.metrics().graphs_executed");
    const double overhead = (number(second, "tensor.metrics().sync_seconds") -
                             number(second, "tensor.metrics().execute_seconds")) /
                            syncs;
    best_overhead = std::min(best_overhead, overhead);
  }
  std::printf("cached in-memory sync overhead %.2f us per sync (target <= 10)\n",
              best_overhead * 1e6);
  lua_close(second);
  // The hit's floor: dlopen of the same object alone (the newest object in
  // the cache: the chain was built last), best of several.
  std::filesystem::path newest;
  std::filesystem::file_time_type newest_time{};
  for (const auto& file : std::filesystem::directory_iterator(cache)) {
    if (file.path().extension() != ".so" || file.path().filename().string()[0] == '.') continue;
    if (newest.empty() || file.last_write_time() > newest_time) {
      newest = file.path();
      newest_time = file.last_write_time();
    }
  }
  const double dlopen_alone = best_of(repeats, [&] {
    if (void* handle = dlopen(newest.c_str(), RTLD_NOW | RTLD_LOCAL)) dlclose(handle);
  });
  std::printf(
      "dlopen of the chain's cached object alone %.2f ms; the disk-cache hit beyond it %.2f ms "
      "(target <= 0.2)\n",
      dlopen_alone * 1e3, (disk - dlopen_alone) * 1e3);
  std::filesystem::remove_all(cache);
  return 0;
}
