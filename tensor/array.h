// array.h - materialized tensor data: a buffer plus a strided view of it.
//
// An Array is what the eager kernels read and write: a reference to a Buffer,
// an element offset, a shape, strides (in elements, possibly 0 for broadcast
// dims) and a dtype. Views (transpose, narrow, select, expand ...) are Arrays
// that share the Buffer, so a write through a view reaches the base.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>

#include "dtype.h"
#include "memory_budget.h"
#include "object_pool.h"
#include "ref.h"
#include "shape.h"

namespace lazylua {

class Buffer : public RefCounted {
 public:
  LAZYLUA_POOLED_OBJECT
  // Uninitialized memory from the caching allocator, charged to the
  // thread's current memory budget if there is one (Error when over it).
  explicit Buffer(size_t nbytes);
  // Host memory lent to lazylua; `release` runs when the last reference goes.
  Buffer(void* data, size_t nbytes, std::function<void(void*)> release);
  ~Buffer();

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  // Memory a host program lent (it may write it behind lazylua's back).
  bool lent() const { return static_cast<bool>(release_); }

  // Bumped by every eager in-place write: autograd checks that a value it
  // saved was not overwritten before backward used it.
  uint32_t version = 0;
  // Never the same for two buffers of the process (an address may be reused).
  const uint64_t id = next_id();
  // References held by caches of derived data (conv_onednn.cpp's packed
  // weights): a compiled plan may still take the buffer over when only
  // these and one owner hold it, and bumps `version` when it does.
  std::atomic<uint32_t> cache_references{0};

 private:
  void* data_;
  size_t nbytes_;
  static uint64_t next_id();

  std::function<void(void*)> release_;  // empty: memory belongs to the allocator
  Ref<MemoryBudget> budget_;            // charged with nbytes_, if any
};

struct Array {
  Ref<Buffer> buffer;
  int64_t offset = 0;  // in elements
  Shape shape;
  Strides strides;
  DType dtype = DType::f32;

  // A new contiguous array with uninitialized contents. Throws Error for
  // negative or absurd sizes (naming `op`).
  static Array empty(const Shape& shape, DType dtype, const char* op = "empty");

  int rank() const { return shape.rank(); }
  int64_t numel() const { return lazylua::numel(shape); }
  bool defined() const { return static_cast<bool>(buffer); }

  // Row-major contiguous (strides of size-1 dims are ignored).
  bool is_contiguous() const;

  void* raw_data() const { return static_cast<char*>(buffer->data()) + offset * dtype_size(dtype); }
  template <typename T>
  T* data() const {
    return static_cast<T*>(buffer->data()) + offset;
  }

  // Views sharing this array's buffer. Dims and indices are 0-based here;
  // the caller has validated them.
  Array view_as(const Shape& new_shape, const Strides& new_strides, int64_t new_offset) const;
  Array transposed(int dim_a, int dim_b) const;
  Array narrowed(int dim, int64_t start, int64_t length) const;
  Array selected(int dim, int64_t index) const;  // drops `dim`
  Array expanded(const Shape& target) const;     // broadcast to `target` (0 strides)
  // A view with these extents, when the current strides allow one without a
  // copy; otherwise returns an undefined Array.
  Array try_reshape_view(const Shape& new_shape) const;
};

// Meta mode: while a MetaScope lives on this thread, Array::empty makes
// arrays without memory and the eager ops skip their kernels, so an op only
// validates its arguments and infers its result's shape and dtype. Lazy
// recording runs the eager op this way: one rule per op serves both modes.
class MetaScope {
 public:
  MetaScope();
  ~MetaScope();
  MetaScope(const MetaScope&) = delete;
  MetaScope& operator=(const MetaScope&) = delete;

 private:
  bool previous_;
};
bool in_meta_scope();

// True when the two arrays may refer to some common element.
bool may_overlap(const Array& a, const Array& b);

// Returns `a` itself if contiguous, otherwise a contiguous copy.
Array contiguous(const Array& a);

}  // namespace lazylua
