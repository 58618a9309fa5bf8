// object_pool.h - recycled memory for the small objects every op makes.
#pragma once

#include <cstddef>

namespace lazylua {

// Every op makes a tensor handle, a buffer and (lazily) an IR node, and Lua's
// collector frees them in bursts, which defeats malloc's per-thread caches.
// These keep freed blocks in per-thread lists by size (multiples of 64
// bytes, up to 1 KiB); larger requests go to malloc.
void* pool_allocate(size_t size);
void pool_release(void* block, size_t size) noexcept;

// Gives a class pooled operator new/delete.
#define LAZYLUA_POOLED_OBJECT                                      \
  static void* operator new(size_t size) {                         \
    return ::lazylua::pool_allocate(size);                         \
  }                                                                \
  static void operator delete(void* block, size_t size) noexcept { \
    ::lazylua::pool_release(block, size);                          \
  }

}  // namespace lazylua
