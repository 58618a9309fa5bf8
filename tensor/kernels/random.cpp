// random.cpp - random tensors from one global Philox stream.
//
// The generator is (seed, position): each call takes the next run of
// Philox blocks and advances the position past them, so a call's values
// depend only on the seed and on the calls made before it. Element e of a
// call comes from block position + e / per_block, which lets threads fill
// disjoint ranges without changing a single value.
#include "random.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <numbers>
#include <type_traits>

#include "../thread_pool.h"
#include "philox.h"

namespace lazylua {

namespace {

// PyTorch's default seed: a fixed default makes runs reproducible even
// without tensor.manual_seed.
constexpr uint64_t kDefaultSeed = 67280421310721ULL;

struct Generator {
  std::mutex mutex;
  uint64_t seed = kDefaultSeed;
  uint64_t position = 0;  // next unused block
};

Generator& generator() {
  static Generator instance;
  return instance;
}

struct Stream {
  uint64_t seed;
  uint64_t first_block;
};

// Reserves `blocks` consecutive blocks of the global stream.
Stream reserve(uint64_t blocks) {
  Generator& g = generator();
  std::lock_guard<std::mutex> lock(g.mutex);
  Stream stream{g.seed, g.position};
  g.position += blocks;
  return stream;
}

// Uniform doubles in [0, 1) from 53 random bits, and in (0, 1] (safe to
// take the logarithm of).
inline double unit_from_64(uint32_t high, uint32_t low) {
  const uint64_t bits = (static_cast<uint64_t>(high) << 32 | low) >> 11;
  return static_cast<double>(bits) * 0x1p-53;
}
inline double open_unit_from_64(uint32_t high, uint32_t low) {
  return unit_from_64(high, low) + 0x1p-53;
}

// Fills count elements, `per_block` of them from each Philox block:
// fill_block(block, first element, how many) writes them. Blocks are made
// in groups (vectorized) and handed out one by one.
template <typename FillBlock>
void fill_from_blocks(int64_t count, int per_block, FillBlock&& fill_block) {
  if (count <= 0) return;
  const int64_t blocks = (count + per_block - 1) / per_block;
  const int64_t groups = (blocks + kPhiloxGroup - 1) / kPhiloxGroup;
  const Stream stream = reserve(static_cast<uint64_t>(blocks));
  const int64_t elements_per_group = int64_t{per_block} * kPhiloxGroup;
  parallel_for(groups, std::max<int64_t>(1, kElementwiseGrain / (4 * elements_per_group)),
               [&](int64_t begin, int64_t end) {
                 PhiloxBlock group[kPhiloxGroup];
                 for (int64_t g = begin; g < end; ++g) {
                   philox_group(stream.seed, stream.first_block + g * kPhiloxGroup, group);
                   for (int lane = 0; lane < kPhiloxGroup; ++lane) {
                     const int64_t first = (g * kPhiloxGroup + lane) * per_block;
                     if (first >= count) break;
                     fill_block(group[lane], first, std::min<int64_t>(per_block, count - first));
                   }
                 }
               });
}

// Maps a uniform u in [0, 1) onto [low, high) in T, keeping the result
// below high even when the rounding to T would reach it.
template <typename T>
inline T scale_uniform(double u, double low, double high) {
  T value = static_cast<T>(low + (high - low) * u);
  if (static_cast<double>(value) >= high && high > low) {
    value = std::nextafter(static_cast<T>(high), static_cast<T>(low));
  }
  return value;
}

template <typename T>
void uniform_fill(T* data, int64_t count, double low, double high) {
  if constexpr (std::is_same_v<T, float>) {
    fill_from_blocks(count, 4, [&](const PhiloxBlock& block, int64_t first, int64_t n) {
      // 24 bits: every float in [0, 1) on the 2^-24 grid.
      for (int64_t i = 0; i < n; ++i) {
        data[first + i] = scale_uniform<float>((block[i] >> 8) * 0x1p-24, low, high);
      }
    });
  } else {
    fill_from_blocks(count, 2, [&](const PhiloxBlock& block, int64_t first, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        data[first + i] =
            scale_uniform<double>(unit_from_64(block[2 * i], block[2 * i + 1]), low, high);
      }
    });
  }
}

// Box-Muller: a pair of uniforms gives a pair of independent normals. f32
// uses float math (glibc's logf/sincosf are about twice as fast as the
// double versions); u1 keeps its 32 random bits' range, so the tails reach
// 6.66 sigma as in f64.
template <typename T>
void normal_fill(T* data, int64_t count, double mean, double std) {
  const T typed_mean = static_cast<T>(mean), typed_std = static_cast<T>(std);
  auto write_pair = [&](int64_t at, int64_t n, T u1, T u2) {
    const T radius = std::sqrt(T(-2) * std::log(u1));
    const T angle = T(2 * std::numbers::pi) * u2;
    data[at] = typed_mean + typed_std * radius * std::cos(angle);
    if (n > 1) data[at + 1] = typed_mean + typed_std * radius * std::sin(angle);
  };
  if constexpr (std::is_same_v<T, float>) {
    auto open_unit = [](uint32_t bits) {  // (0, 1]
      return static_cast<float>(static_cast<uint64_t>(bits) + 1) * 0x1p-32f;
    };
    auto unit = [](uint32_t bits) { return static_cast<float>(bits >> 8) * 0x1p-24f; };
    fill_from_blocks(count, 4, [&](const PhiloxBlock& block, int64_t first, int64_t n) {
      write_pair(first, n, open_unit(block[0]), unit(block[1]));
      if (n > 2) write_pair(first + 2, n - 2, open_unit(block[2]), unit(block[3]));
    });
  } else {
    fill_from_blocks(count, 2, [&](const PhiloxBlock& block, int64_t first, int64_t n) {
      write_pair(first, n, open_unit_from_64(block[0], block[1]), unit_from_64(block[2], block[3]));
    });
  }
}

// An integer uniform in [0, range) from 64 random bits by multiply-shift
// (Lemire); the bias is below range / 2^64, far under anything testable.
inline uint64_t below(uint64_t range, uint32_t high, uint32_t low) {
  const uint64_t bits = static_cast<uint64_t>(high) << 32 | low;
  return static_cast<uint64_t>((static_cast<unsigned __int128>(bits) * range) >> 64);
}

}  // namespace

void manual_seed(uint64_t seed) {
  Generator& g = generator();
  std::lock_guard<std::mutex> lock(g.mutex);
  g.seed = seed;
  g.position = 0;
}

uint64_t initial_seed() {
  Generator& g = generator();
  std::lock_guard<std::mutex> lock(g.mutex);
  return g.seed;
}

GeneratorState generator_state() {
  Generator& g = generator();
  std::lock_guard<std::mutex> lock(g.mutex);
  return {g.seed, g.position};
}

void set_generator_state(GeneratorState state) {
  Generator& g = generator();
  std::lock_guard<std::mutex> lock(g.mutex);
  g.seed = state.seed;
  g.position = state.position;
}

void uniform_kernel(const Array& dst, double low, double high) {
  LAZYLUA_ASSERT(dst.is_contiguous());
  if (dst.dtype == DType::f32) {
    uniform_fill(dst.data<float>(), dst.numel(), low, high);
  } else {
    LAZYLUA_ASSERT(dst.dtype == DType::f64);
    uniform_fill(dst.data<double>(), dst.numel(), low, high);
  }
}

void normal_kernel(const Array& dst, double mean, double std) {
  LAZYLUA_ASSERT(dst.is_contiguous());
  if (dst.dtype == DType::f32) {
    normal_fill(dst.data<float>(), dst.numel(), mean, std);
  } else {
    LAZYLUA_ASSERT(dst.dtype == DType::f64);
    normal_fill(dst.data<double>(), dst.numel(), mean, std);
  }
}

void randint_kernel(const Array& dst, int64_t low, int64_t high) {
  LAZYLUA_ASSERT(dst.is_contiguous());
  LAZYLUA_ASSERT(dst.dtype == DType::i64 || dst.dtype == DType::i32);
  const int64_t count = dst.numel();
  if (count == 0) return;
  if (high <= low) fail("randint: low ({}) must be less than high ({})", low, high);
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  auto value = [&](const PhiloxBlock& block, int i) {
    return static_cast<int64_t>(static_cast<uint64_t>(low) +
                                below(range, block[2 * i], block[2 * i + 1]));
  };
  if (dst.dtype == DType::i64) {
    int64_t* data = dst.data<int64_t>();
    fill_from_blocks(count, 2, [&](const PhiloxBlock& block, int64_t first, int64_t n) {
      for (int i = 0; i < n; ++i) data[first + i] = value(block, i);
    });
  } else {
    int32_t* data = dst.data<int32_t>();
    fill_from_blocks(count, 2, [&](const PhiloxBlock& block, int64_t first, int64_t n) {
      for (int i = 0; i < n; ++i) data[first + i] = static_cast<int32_t>(value(block, i));
    });
  }
}

// Fisher-Yates, from the last slot down: slot i swaps with a uniform slot
// in [0, i]. Inherently serial; draw k uses half of block k / 2.
void randperm_kernel(const Array& dst) {
  LAZYLUA_ASSERT(dst.is_contiguous());
  LAZYLUA_ASSERT(dst.dtype == DType::i64 && dst.rank() == 1);
  const int64_t n = dst.numel();
  int64_t* data = dst.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) data[i] = i + 1;
  if (n < 2) return;
  const uint64_t draws = static_cast<uint64_t>(n - 1);
  const Stream stream = reserve((draws + 1) / 2);
  PhiloxBlock block{};
  for (uint64_t k = 0; k < draws; ++k) {
    if (k % 2 == 0) block = philox_block(stream.seed, stream.first_block + k / 2);
    const int64_t i = n - 1 - static_cast<int64_t>(k);
    const int half = static_cast<int>(k % 2) * 2;
    const int64_t j =
        static_cast<int64_t>(below(static_cast<uint64_t>(i) + 1, block[half], block[half + 1]));
    std::swap(data[i], data[j]);
  }
}

}  // namespace lazylua
