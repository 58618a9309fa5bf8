// array.cpp - buffers and strided views.
#include "array.h"

#include <algorithm>
#include <atomic>

#include "allocator.h"
#include "error.h"
#include "kernels/elementwise.h"

namespace lazylua {

Buffer::Buffer(size_t nbytes) : data_(nullptr), nbytes_(nbytes) {
  MemoryBudget* budget = current_memory_budget();
  if (budget) {
    // Dead tensors the Lua collector has not freed yet may be what stands
    // in the way: try_charge_or_reclaim collects them first.
    if (!budget->try_charge_or_reclaim(static_cast<int64_t>(nbytes))) {
      // The total says whether this one tensor is too big or the live ones
      // (the Lua heap counted too) leave no room for it.
      const auto mib = [](int64_t bytes) { return static_cast<double>(bytes) / 1048576.0; };
      const int64_t used = budget->used();
      fail(
          "not enough memory: a tensor of {:.1f} MiB would bring the interpreter to {:.1f} MiB, "
          "past its memory limit of {:.1f} MiB ({:.1f} MiB in use)",
          mib(static_cast<int64_t>(nbytes)), mib(used + static_cast<int64_t>(nbytes)),
          mib(budget->limit()), mib(used));
    }
    budget_ = budget;
  }
  try {
    data_ = allocate_buffer(nbytes);
  } catch (...) {
    if (budget_) budget_->give_back(static_cast<int64_t>(nbytes));
    throw;
  }
}

Buffer::Buffer(void* data, size_t nbytes, std::function<void(void*)> release)
    : data_(data), nbytes_(nbytes), release_(std::move(release)) {}

uint64_t Buffer::next_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

Buffer::~Buffer() {
  if (release_) {
    release_(data_);
  } else {
    free_buffer(data_, nbytes_);
  }
  if (budget_) budget_->give_back(static_cast<int64_t>(nbytes_));
}

namespace {
thread_local bool meta_scope_active = false;
}  // namespace

MetaScope::MetaScope() : previous_(meta_scope_active) {
  meta_scope_active = true;
}
MetaScope::~MetaScope() {
  meta_scope_active = previous_;
}
bool in_meta_scope() {
  return meta_scope_active;
}

Array Array::empty(const Shape& shape, DType dtype, const char* op) {
  const int64_t count = checked_numel(shape, op);
  Array array;
  if (!meta_scope_active) {
    array.buffer = make_ref<Buffer>(static_cast<size_t>(count) * dtype_size(dtype));
  } else {
    check_allocation_possible(static_cast<size_t>(count) * dtype_size(dtype));
  }
  array.shape = shape;
  array.strides = contiguous_strides(shape);
  array.dtype = dtype;
  return array;
}

bool Array::is_contiguous() const {
  int64_t expected = 1;
  for (int i = rank() - 1; i >= 0; i--) {
    if (shape[i] == 1) continue;
    if (strides[i] != expected) return numel() == 0;
    expected *= shape[i];
  }
  return true;
}

Array Array::view_as(const Shape& new_shape, const Strides& new_strides, int64_t new_offset) const {
  Array view;
  view.buffer = buffer;
  view.offset = new_offset;
  view.shape = new_shape;
  view.strides = new_strides;
  view.dtype = dtype;
  return view;
}

Array Array::transposed(int dim_a, int dim_b) const {
  Shape new_shape = shape;
  Strides new_strides = strides;
  std::swap(new_shape[dim_a], new_shape[dim_b]);
  std::swap(new_strides[dim_a], new_strides[dim_b]);
  return view_as(new_shape, new_strides, offset);
}

Array Array::narrowed(int dim, int64_t start, int64_t length) const {
  Shape new_shape = shape;
  new_shape[dim] = length;
  return view_as(new_shape, strides, offset + (length > 0 ? start * strides[dim] : 0));
}

Array Array::selected(int dim, int64_t index) const {
  Shape new_shape = shape;
  Strides new_strides = strides;
  new_shape.erase(dim);
  new_strides.erase(dim);
  return view_as(new_shape, new_strides, offset + index * strides[dim]);
}

Array Array::expanded(const Shape& target) const {
  LAZYLUA_ASSERT(target.rank() >= rank());
  Strides new_strides = Strides::filled(target.rank(), 0);
  const int lead = target.rank() - rank();
  for (int i = 0; i < rank(); i++) {
    LAZYLUA_ASSERT(shape[i] == target[lead + i] || shape[i] == 1);
    new_strides[lead + i] = shape[i] == target[lead + i] ? strides[i] : 0;
  }
  return view_as(target, new_strides, offset);
}

// Walks the old dims from the innermost, in runs that are contiguous among
// themselves, and lays the new extents over each run; a new dim that would
// straddle two runs means no view exists.
Array Array::try_reshape_view(const Shape& new_shape) const {
  if (numel() == 0 || is_contiguous()) {
    return view_as(new_shape, contiguous_strides(new_shape), offset);
  }
  Strides new_strides = Strides::filled(new_shape.rank(), 0);
  int view_dim = new_shape.rank() - 1;
  int64_t run_base_stride = strides[rank() - 1];
  int64_t run_numel = 1, view_numel = 1;
  for (int dim = rank() - 1; dim >= 0; dim--) {
    run_numel *= shape[dim];
    const bool run_ends =
        dim == 0 || (shape[dim - 1] != 1 && strides[dim - 1] != run_numel * run_base_stride);
    if (!run_ends) continue;
    while (view_dim >= 0 && (view_numel < run_numel || new_shape[view_dim] == 1)) {
      new_strides[view_dim] = view_numel * run_base_stride;
      view_numel *= new_shape[view_dim];
      view_dim--;
    }
    if (view_numel != run_numel) return Array{};
    if (dim > 0) {
      run_base_stride = strides[dim - 1];
      run_numel = 1;
      view_numel = 1;
    }
  }
  if (view_dim != -1) return Array{};
  return view_as(new_shape, new_strides, offset);
}

namespace {

// The [first, last] element offsets an array touches (strides may be 0 but
// are never negative).
std::pair<int64_t, int64_t> element_span(const Array& a) {
  int64_t last = a.offset;
  for (int i = 0; i < a.rank(); i++) last += (a.shape[i] - 1) * a.strides[i];
  return {a.offset, last};
}

}  // namespace

bool may_overlap(const Array& a, const Array& b) {
  if (a.buffer.get() != b.buffer.get() || a.numel() == 0 || b.numel() == 0) return false;
  const auto [a_first, a_last] = element_span(a);
  const auto [b_first, b_last] = element_span(b);
  const int64_t a_size = dtype_size(a.dtype), b_size = dtype_size(b.dtype);
  return a_first * a_size <= b_last * b_size + b_size - 1 &&
         b_first * b_size <= a_last * a_size + a_size - 1;
}

Array contiguous(const Array& a) {
  if (a.is_contiguous()) return a;
  Array copy = Array::empty(a.shape, a.dtype);
  if (!meta_scope_active) copy_kernel(a, copy);
  return copy;
}

}  // namespace lazylua
