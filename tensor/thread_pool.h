// thread_pool.h - the one pool of worker threads the kernels share.
#pragma once

#include <cstdint>
#include <type_traits>

namespace lazylua {

// Workers sleep on a condition variable between jobs instead of spinning:
// on a 2-core machine a spinning pool steals the cores OpenBLAS needs. BLAS
// calls and our kernels never run at the same time, so the two pools take
// turns instead of fighting.
//
// Number of threads kernels use (workers + the calling thread). Defaults to
// LAZYLUA_THREADS or the number of cores.
int thread_count();
// Changes the thread count for kernels and for OpenBLAS; n >= 1.
void set_thread_count(int n);

using RangeFunction = void (*)(void* context, int64_t begin, int64_t end);

// Splits [0, n) into contiguous chunks of at least `grain` items and runs
// fn(context, begin, end) on them, on the pool and the calling thread.
// Runs inline when n <= grain or there is one thread. Must not be called
// from inside a parallel region (it then runs inline).
//
// When n > grain, each thread's chunk is run as consecutive slices of
// kSliceGrains * grain items, with check_interrupt() (interrupt.h) between
// them: grain is about the work a split pays for (tens of microseconds for
// elementwise kernels; a 64K-element chunk of a fused reduction at most,
// milliseconds), so an interrupt stops a kernel within a slice, at the cost
// of a call per slice. fn must therefore accept any subrange, which it
// already must for the thread count to be free.
void parallel_for_raw(int64_t n, int64_t grain, RangeFunction fn, void* context);

constexpr int64_t kSliceGrains = 2;

template <typename F>
void parallel_for(int64_t n, int64_t grain, F&& body) {
  if (n <= grain) {
    if (n > 0) body(int64_t{0}, n);
    return;
  }
  using Body = std::remove_reference_t<F>;
  parallel_for_raw(
      n, grain,
      [](void* context, int64_t begin, int64_t end) { (*static_cast<Body*>(context))(begin, end); },
      &body);
}

// Elements per chunk below which elementwise work is not worth splitting.
constexpr int64_t kElementwiseGrain = 32768;

}  // namespace lazylua
