// philox.h - the Philox4x32-10 counter-based generator (Salmon et al.,
// "Parallel random numbers: as easy as 1, 2, 3", SC 2011).
//
// Block i of a stream is philox(i, key): no state is carried from one block
// to the next, so any thread can produce any part of a random tensor and
// the values never depend on how the work was split.
#pragma once

#include <array>
#include <cstdint>

namespace lazylua {

using PhiloxBlock = std::array<uint32_t, 4>;

inline PhiloxBlock philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key) {
  constexpr uint64_t kMultiplier0 = 0xD2511F53, kMultiplier1 = 0xCD9E8D57;
  constexpr uint32_t kWeyl0 = 0x9E3779B9, kWeyl1 = 0xBB67AE85;
  uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; ++round) {
    const uint64_t product0 = kMultiplier0 * c0;
    const uint64_t product1 = kMultiplier1 * c2;
    c0 = static_cast<uint32_t>(product1 >> 32) ^ c1 ^ k0;
    c1 = static_cast<uint32_t>(product1);
    c2 = static_cast<uint32_t>(product0 >> 32) ^ c3 ^ k1;
    c3 = static_cast<uint32_t>(product0);
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return {c0, c1, c2, c3};
}

// Block `index` of the stream keyed by `seed`.
inline PhiloxBlock philox_block(uint64_t seed, uint64_t index) {
  return philox4x32({static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), 0, 0},
                    {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
}

// Blocks first .. first + kPhiloxGroup - 1 of a stream at once, the same
// values as philox_block: written over lanes so the compiler vectorizes
// the rounds (~5x the throughput of one block at a time).
constexpr int kPhiloxGroup = 8;

// Not inlined: inlined into a caller, GCC unrolls the rounds and then fails
// to vectorize them.
[[gnu::noinline]] inline void philox_group(uint64_t seed, uint64_t first, PhiloxBlock* out) {
  constexpr uint64_t kMultiplier0 = 0xD2511F53, kMultiplier1 = 0xCD9E8D57;
  constexpr uint32_t kWeyl0 = 0x9E3779B9, kWeyl1 = 0xBB67AE85;
  uint32_t c0[kPhiloxGroup], c1[kPhiloxGroup], c2[kPhiloxGroup], c3[kPhiloxGroup];
  for (int lane = 0; lane < kPhiloxGroup; ++lane) {
    const uint64_t index = first + lane;
    c0[lane] = static_cast<uint32_t>(index);
    c1[lane] = static_cast<uint32_t>(index >> 32);
    c2[lane] = 0;
    c3[lane] = 0;
  }
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    for (int lane = 0; lane < kPhiloxGroup; ++lane) {
      const uint64_t product0 = kMultiplier0 * c0[lane];
      const uint64_t product1 = kMultiplier1 * c2[lane];
      c0[lane] = static_cast<uint32_t>(product1 >> 32) ^ c1[lane] ^ k0;
      c1[lane] = static_cast<uint32_t>(product1);
      c2[lane] = static_cast<uint32_t>(product0 >> 32) ^ c3[lane] ^ k1;
      c3[lane] = static_cast<uint32_t>(product0);
    }
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  for (int lane = 0; lane < kPhiloxGroup; ++lane) {
    out[lane] = {c0[lane], c1[lane], c2[lane], c3[lane]};
  }
}

}  // namespace lazylua
