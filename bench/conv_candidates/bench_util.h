// bench_util.h - what the modes of conv_bench share: the layer list, the
// inputs, the steady median time.
#pragma once

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>

#include "candidates.h"

namespace conv_bench {

inline double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The steady time of one call, over at least 7 calls and at least budget_ms:
// their median, or their minimum when CONV_BENCH_STAT=min (on a machine
// shared with other work, where a 2-thread call often waits a whole time
// slice for its second thread, the minimum estimates the quiet machine's
// time; run.sh's STAT).
template <class F>
inline double median_ms(F&& call, double budget_ms) {
  static const bool minimum = [] {
    const char* stat = std::getenv("CONV_BENCH_STAT");
    return stat && std::string(stat) == "min";
  }();
  call();
  call();
  std::vector<double> times;
  double total = 0;
  while ((times.size() < 7 || total < budget_ms) && times.size() < 400) {
    const double start = now_ms();
    call();
    times.push_back(now_ms() - start);
    total += times.back();
  }
  if (minimum) return *std::min_element(times.begin(), times.end());
  std::nth_element(times.begin(), times.begin() + long(times.size() / 2), times.end());
  return times[times.size() / 2];
}

inline std::vector<Layer> read_layers(const char* path) {
  std::ifstream file(path);
  check(bool(file), "cannot open the layers file");
  std::vector<Layer> layers;
  std::string line;
  while (std::getline(file, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    Layer l;
    in >> l.model >> l.index >> l.c >> l.h >> l.w >> l.o >> l.kh >> l.kw >> l.stride >> l.pad >>
        l.dilation >> l.groups;
    check(bool(in), "bad line in the layers file");
    layers.push_back(l);
  }
  return layers;
}

// Uniform values in [-1, 1), the same for every run.
inline std::vector<float> random_values(int64_t count, uint64_t seed) {
  std::vector<float> values(static_cast<size_t>(count));
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& v : values) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    v = float(double(state >> 40) / double(1ull << 24) * 2.0 - 1.0);
  }
  return values;
}

struct Inputs {
  std::vector<float> x, weight, bias, x_nhwc;
  explicit Inputs(const Layer& l)
      : x(random_values(l.src_size(), 1)),
        weight(random_values(l.weight_size(), 2)),
        bias(random_values(l.o, 3)),
        x_nhwc(size_t(l.src_size())) {
    nchw_to_nhwc(x.data(), x_nhwc.data(), l.n, l.c, l.h * l.w);
  }
};

}  // namespace conv_bench
