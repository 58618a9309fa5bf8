// allocator.h - the caching allocator every tensor buffer comes from.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lazylua {

// Freshly mapped memory costs a page fault per 4 KiB page on first touch
// (~2 µs each on our machines), which would dominate elementwise kernels. So
// freed blocks are kept in size classes and handed out again; large blocks
// are mmap'ed with transparent huge pages requested. Thread-safe.
//
// Blocks are 64-byte aligned. allocate() throws Error when the request is
// absurd or the system has no memory; it never returns null.
void* allocate_buffer(size_t nbytes);
void free_buffer(void* data, size_t nbytes);
// Throws allocate_buffer's Error if a request of nbytes is beyond the
// machine's memory. Lazy mode checks every result it records, so a graph
// whose value eager mode could not hold fails at the same line, whether
// or not its compiled code would have fused the value away.
void check_allocation_possible(size_t nbytes);

struct AllocatorStats {
  int64_t allocations = 0;   // calls to allocate_buffer
  int64_t cache_hits = 0;    // of those, served from the cache
  int64_t bytes_in_use = 0;  // handed out and not yet freed
  int64_t bytes_cached = 0;  // freed and kept for reuse
  // The most bytes_in_use has been since the process started or the last
  // reset_peak_bytes_in_use(): what the live values needed at their peak.
  int64_t peak_bytes_in_use = 0;
};
AllocatorStats allocator_stats();
// Starts a new peak: peak_bytes_in_use becomes bytes_in_use.
void reset_peak_bytes_in_use();

// Returns all cached blocks to the system.
void release_cached_buffers();

// AllocatorStats::bytes_in_use without taking the allocator's lock: cheap
// enough to read after every op. Lua's collector sees a tensor as a small
// userdata, not its buffer; the binding (interp/lua_tensor.cpp) watches
// this to collect when dead tensors pile up.
int64_t allocator_bytes_in_use();

}  // namespace lazylua
