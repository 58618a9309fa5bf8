// random.h - reproducible random tensors.
#pragma once

#include <cstdint>

#include "../array.h"

namespace lazylua {

// One global generator, reseeded by tensor.manual_seed. The stream depends
// only on the seed and the sequence of calls, never on the thread count.
void manual_seed(uint64_t seed);
uint64_t initial_seed();

// Where the generator stands: its seed and the next unused Philox block.
// Restoring it (tensor.set_rng_state) makes the following draws repeat
// exactly, which a resumed training run needs.
struct GeneratorState {
  uint64_t seed;
  uint64_t position;
};
GeneratorState generator_state();
void set_generator_state(GeneratorState state);

// Contiguous f32/f64 dst filled with uniform [low, high) values.
void uniform_kernel(const Array& dst, double low, double high);
// Contiguous f32/f64 dst filled with normal(mean, std) values.
void normal_kernel(const Array& dst, double mean, double std);
// Contiguous i64/i32 dst filled with integers uniform in [low, high).
void randint_kernel(const Array& dst, int64_t low, int64_t high);
// A uniformly random permutation of 1..n into a contiguous i64 dst of size n.
void randperm_kernel(const Array& dst);

}  // namespace lazylua
