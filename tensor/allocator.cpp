// allocator.cpp - a caching allocator for tensor buffers.
#include "allocator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "error.h"

namespace lazylua {
namespace {

constexpr size_t kAlignment = 64;
// From here on blocks come from mmap, with huge pages requested: fewer
// faults on first touch, and the memory goes back to the system on release.
constexpr size_t kMmapThreshold = size_t{1} << 20;
constexpr size_t kHugePage = size_t{2} << 20;

// Rounds a request up to its size class: a power of two or 1.25, 1.5 or 1.75
// times one, so a cached block is at most 25% bigger than what is asked.
size_t size_class(size_t nbytes) {
  if (nbytes <= kAlignment) return kAlignment;
  size_t power = kAlignment;
  while (power * 2 < nbytes) power *= 2;
  const size_t quarter = power / 4;
  size_t size = power;
  while (size < nbytes) size += quarter;
  if (size >= kMmapThreshold) size = (size + kHugePage - 1) / kHugePage * kHugePage;
  // aligned_alloc wants a multiple of the alignment.
  return (size + kAlignment - 1) / kAlignment * kAlignment;
}

size_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0 ? static_cast<size_t>(pages) * page_size : SIZE_MAX;
}

[[noreturn]] void fail_allocation(size_t nbytes) {
  fail("out of memory: cannot allocate {:.1f} MiB", static_cast<double>(nbytes) / 1048576.0);
}

class CachingAllocator {
 public:
  void* allocate(size_t nbytes) {
    const size_t size = size_class(nbytes);
    {
      std::lock_guard lock(mutex_);
      stats_.allocations++;
      auto found = free_blocks_.find(size);
      if (found != free_blocks_.end() && !found->second.empty()) {
        void* block = found->second.back();
        found->second.pop_back();
        stats_.cache_hits++;
        stats_.bytes_cached -= size;
        note_in_use(size);
        return block;
      }
    }
    void* block = allocate_fresh(size);
    if (!block) {
      // The cache may be what stands in the way: give it back and retry.
      release_cached();
      block = allocate_fresh(size);
    }
    if (!block) fail_allocation(nbytes);
    std::lock_guard lock(mutex_);
    note_in_use(size);
    return block;
  }

  void free(void* block, size_t nbytes) {
    if (!block) return;
    const size_t size = size_class(nbytes);
    {
      std::lock_guard lock(mutex_);
      stats_.bytes_in_use -= size;
      in_use_.store(stats_.bytes_in_use, std::memory_order_relaxed);
      // Keep at most a quarter of the machine's memory in the cache.
      if (stats_.bytes_cached + size <= cache_limit_) {
        free_blocks_[size].push_back(block);
        stats_.bytes_cached += size;
        return;
      }
    }
    release_block(block, size);
  }

  void release_cached() {
    std::unordered_map<size_t, std::vector<void*>> blocks;
    {
      std::lock_guard lock(mutex_);
      blocks.swap(free_blocks_);
      stats_.bytes_cached = 0;
    }
    for (auto& [size, list] : blocks) {
      for (void* block : list) release_block(block, size);
    }
  }

  AllocatorStats stats() {
    std::lock_guard lock(mutex_);
    return stats_;
  }

  int64_t bytes_in_use() const { return in_use_.load(std::memory_order_relaxed); }

  void reset_peak() {
    std::lock_guard lock(mutex_);
    stats_.peak_bytes_in_use = stats_.bytes_in_use;
  }

 private:
  // A block of `size` bytes was handed out (the caller holds mutex_).
  void note_in_use(size_t size) {
    stats_.bytes_in_use += static_cast<int64_t>(size);
    stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
    in_use_.store(stats_.bytes_in_use, std::memory_order_relaxed);
  }

  void* allocate_fresh(size_t size) {
    // A request beyond the machine's memory would only end in the kernel's
    // OOM killer once touched; refuse it while it is still an error.
    if (size > physical_memory_) return nullptr;
    if (size >= kMmapThreshold) {
      void* block = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (block == MAP_FAILED) return nullptr;
      madvise(block, size, MADV_HUGEPAGE);
      return block;
    }
    return std::aligned_alloc(kAlignment, size);
  }

  static void release_block(void* block, size_t size) {
    if (size >= kMmapThreshold) {
      munmap(block, size);
    } else {
      std::free(block);
    }
  }

  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_blocks_;
  AllocatorStats stats_;
  std::atomic<int64_t> in_use_{0};  // stats_.bytes_in_use, readable without the lock
  const size_t physical_memory_ = physical_memory_bytes();
  const size_t cache_limit_ = physical_memory_ / 4;
};

CachingAllocator& allocator() {
  // Never destroyed: buffers owned by Lua states may be freed during exit.
  static CachingAllocator* instance = new CachingAllocator;
  return *instance;
}

}  // namespace

void* allocate_buffer(size_t nbytes) {
  return allocator().allocate(nbytes);
}
void check_allocation_possible(size_t nbytes) {
  static const size_t physical_memory = physical_memory_bytes();
  if (size_class(nbytes) > physical_memory) fail_allocation(nbytes);
}
void free_buffer(void* data, size_t nbytes) {
  allocator().free(data, nbytes);
}
AllocatorStats allocator_stats() {
  return allocator().stats();
}
void reset_peak_bytes_in_use() {
  allocator().reset_peak();
}
int64_t allocator_bytes_in_use() {
  return allocator().bytes_in_use();
}
void release_cached_buffers() {
  allocator().release_cached();
}

}  // namespace lazylua
