// thread_pool.cpp - one pool of sleeping workers for the kernels.
#include "thread_pool.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "interrupt.h"
#include "profiler.h"

namespace lazylua {
namespace {

int default_thread_count() {
  if (const char* text = std::getenv("LAZYLUA_THREADS")) {
    const int n = std::atoi(text);
    if (n >= 1) return std::min(n, 256);
  }
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return cores >= 1 ? static_cast<int>(std::min(cores, 256L)) : 1;
}

thread_local bool inside_parallel_region = false;

int64_t slice_items(int64_t grain) {
  return std::min<int64_t>(grain, INT64_MAX / kSliceGrains) * kSliceGrains;
}

// fn over [begin, end) in slices of `slice` items, stopping between them
// when the current interrupt flag is set (see parallel_for_raw).
void run_in_slices(RangeFunction fn, void* context, int64_t begin, int64_t end, int64_t slice) {
  for (int64_t first = begin; first < end; first += slice) {
    check_interrupt();
    fn(context, first, std::min(end, first + slice));
  }
}

// Waits up to kSpin for ready() by polling (returns true), else returns
// false: a worker or caller about to sleep first watches for work for a few
// microseconds. Waking a sleeping thread costs tens of microseconds on a
// virtual machine, and a training step runs dozens of parallel jobs back
// to back; a bounded watch keeps the pool asleep between steps.
template <typename Ready>
bool watch(Ready&& ready) {
  constexpr auto kSpin = std::chrono::microseconds(40);
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (int round = 0;; round++) {
    if (ready()) return true;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if ((round & 63) == 63 && std::chrono::steady_clock::now() > deadline) return false;
  }
}

// One job at a time: the caller publishes it under the mutex, bumps the
// generation, wakes the workers that sleep, runs chunk 0 itself, then
// waits until the last chunk is done. Workers watch for a new generation
// for a moment after each job, then sleep on the condition variable.
class ThreadPool {
 public:
  explicit ThreadPool(int threads) { resize(threads); }
  ~ThreadPool() { stop_workers(); }

  int threads() const { return threads_; }

  // Waits for a running job: interpreters on other threads share the pool.
  void resize(int threads) {
    std::lock_guard job_lock(job_mutex_);
    stop_workers();
    threads_ = threads;
    stopping_ = false;
    // New workers must not mistake the last finished job for a new one.
    const uint64_t current = generation_.load();
    for (int i = 1; i < threads; i++) {
      workers_.emplace_back([this, i, current] { worker_loop(i, current); });
    }
  }

  void run(int64_t n, int64_t grain, RangeFunction fn, void* context) {
    std::lock_guard job_lock(job_mutex_);  // one parallel job at a time
    const int64_t chunks = std::min<int64_t>(threads_, (n + grain - 1) / grain);
    bool wake = false;
    {
      std::lock_guard lock(mutex_);
      // The caller's interrupt flag goes with the job: the workers obey the
      // interpreter that asked for the work (interrupt.h).
      // So do its profiler label: a BLAS call on a worker names the step.
      job_ = {n,
              chunks,
              slice_items(grain),
              fn,
              context,
              current_interrupt_flag(),
              profiler::active() ? profiler::current_label_pointer() : nullptr};
      pending_.store(static_cast<int>(chunks) - 1);
      error_ = nullptr;
      generation_.fetch_add(1);
      wake = sleeping_workers_ > 0;
    }
    if (wake) wake_workers_.notify_all();
    run_chunk(job_, 0);
    if (!watch([this] { return pending_.load() == 0; })) {
      std::unique_lock lock(mutex_);
      caller_sleeping_ = true;
      job_done_.wait(lock, [this] { return pending_.load() == 0; });
      caller_sleeping_ = false;
    }
    std::lock_guard lock(mutex_);
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  struct Job {
    int64_t n = 0, chunks = 0, slice = 1;
    RangeFunction fn = nullptr;
    void* context = nullptr;
    const InterruptFlag* interrupt = nullptr;
    const std::string* label = nullptr;  // the caller's profiler label
  };

  void run_chunk(const Job& job, int64_t chunk) {
    const int64_t begin = job.n * chunk / job.chunks;
    const int64_t end = job.n * (chunk + 1) / job.chunks;
    InterruptScope interrupt_scope(job.interrupt);  // also for nested loops inside fn
    const profiler::Label label(job.label);
    inside_parallel_region = true;
    try {
      run_in_slices(job.fn, job.context, begin, end, job.slice);
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    inside_parallel_region = false;
  }

  void worker_loop(int index, uint64_t seen) {
    for (;;) {
      const bool arrived = watch([&] { return stopping_.load() || generation_.load() != seen; });
      Job job;
      {
        std::unique_lock lock(mutex_);
        if (!arrived) {
          sleeping_workers_++;
          wake_workers_.wait(lock, [&] { return stopping_.load() || generation_.load() != seen; });
          sleeping_workers_--;
        }
        if (stopping_) return;
        // The job and its generation, read together under the mutex.
        seen = generation_.load();
        job = job_;
      }
      if (index >= job.chunks) continue;
      run_chunk(job, index);
      if (pending_.fetch_sub(1) == 1) {
        std::lock_guard lock(mutex_);
        if (caller_sleeping_) job_done_.notify_one();
      }
    }
  }

  void stop_workers() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_workers_.notify_all();
    for (std::thread& worker : workers_) worker.join();
    workers_.clear();
  }

  int threads_ = 1;
  std::vector<std::thread> workers_;
  std::mutex job_mutex_;
  std::mutex mutex_;
  std::condition_variable wake_workers_, job_done_;
  Job job_;
  std::atomic<int> pending_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stopping_{false};
  int sleeping_workers_ = 0;      // under mutex_
  bool caller_sleeping_ = false;  // under mutex_
  std::exception_ptr error_;
};

std::atomic<int> configured_threads{0};

ThreadPool& pool() {
  // Leaked on purpose: workers must outlive any static destructor that could
  // still run a kernel.
  static ThreadPool* instance = new ThreadPool(thread_count());
  return *instance;
}

}  // namespace

int thread_count() {
  int n = configured_threads.load(std::memory_order_relaxed);
  if (n == 0) {
    n = default_thread_count();
    configured_threads.store(n, std::memory_order_relaxed);
  }
  return n;
}

void set_thread_count(int n) {
  n = std::clamp(n, 1, 256);
  configured_threads.store(n, std::memory_order_relaxed);
  if (pool().threads() != n) pool().resize(n);
}

void parallel_for_raw(int64_t n, int64_t grain, RangeFunction fn, void* context) {
  grain = std::max<int64_t>(grain, 1);
  if (n <= grain) {
    if (n > 0) fn(context, 0, n);
    return;
  }
  if (inside_parallel_region || thread_count() == 1) {
    run_in_slices(fn, context, 0, n, slice_items(grain));
    return;
  }
  pool().run(n, grain, fn, context);
}

}  // namespace lazylua
