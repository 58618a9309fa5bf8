// object_pool.cpp - per-thread free lists of small blocks.
#include "object_pool.h"

#include <cstdlib>
#include <new>

namespace lazylua {
namespace {

constexpr size_t kGranule = 64;
constexpr size_t kClasses = 16;  // 64 .. 1024 bytes
constexpr size_t kMaxBlocksPerClass = 4096;

struct FreeBlock {
  FreeBlock* next;
};

struct FreeLists {
  FreeBlock* heads[kClasses] = {};
  size_t counts[kClasses] = {};

  ~FreeLists() {
    for (FreeBlock* head : heads) {
      while (head) {
        FreeBlock* next = head->next;
        std::free(head);
        head = next;
      }
    }
  }
};

thread_local FreeLists free_lists;

size_t size_class(size_t size) {
  return (size + kGranule - 1) / kGranule - 1;
}

}  // namespace

void* pool_allocate(size_t size) {
  const size_t index = size_class(size);
  if (index < kClasses) {
    if (FreeBlock* block = free_lists.heads[index]) {
      free_lists.heads[index] = block->next;
      free_lists.counts[index]--;
      return block;
    }
    size = (index + 1) * kGranule;
  }
  void* block = std::malloc(size);
  if (!block) throw std::bad_alloc();
  return block;
}

void pool_release(void* block, size_t size) noexcept {
  if (!block) return;
  const size_t index = size_class(size);
  if (index < kClasses && free_lists.counts[index] < kMaxBlocksPerClass) {
    auto* free_block = static_cast<FreeBlock*>(block);
    free_block->next = free_lists.heads[index];
    free_lists.heads[index] = free_block;
    free_lists.counts[index]++;
    return;
  }
  std::free(block);
}

}  // namespace lazylua
