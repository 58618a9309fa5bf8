// ref.h - an intrusive reference-counted pointer for buffers, arrays and nodes.
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>

namespace lazylua {

// Base for reference-counted objects. The count is atomic because a
// background compile thread may hold references too.
class RefCounted {
 public:
  RefCounted() = default;
  RefCounted(const RefCounted&) = delete;
  RefCounted& operator=(const RefCounted&) = delete;

  void retain() const { count_.fetch_add(1, std::memory_order_relaxed); }
  // Returns true when this was the last reference.
  bool release() const { return count_.fetch_sub(1, std::memory_order_acq_rel) == 1; }
  int32_t use_count() const { return count_.load(std::memory_order_relaxed); }

 protected:
  ~RefCounted() = default;

 private:
  mutable std::atomic<int32_t> count_{0};
};

template <typename T>
class Ref {
 public:
  Ref() = default;
  Ref(T* object) : object_(object) {  // NOLINT: implicit by design, like a pointer
    if (object_) object_->retain();
  }
  Ref(const Ref& other) : Ref(other.object_) {}
  Ref(Ref&& other) noexcept : object_(std::exchange(other.object_, nullptr)) {}
  ~Ref() { reset(); }

  Ref& operator=(Ref other) noexcept {
    std::swap(object_, other.object_);
    return *this;
  }

  void reset() {
    if (object_ && object_->release()) delete object_;
    object_ = nullptr;
  }

  T* get() const { return object_; }
  T* operator->() const { return object_; }
  T& operator*() const { return *object_; }
  explicit operator bool() const { return object_ != nullptr; }
  friend bool operator==(const Ref& a, const Ref& b) { return a.object_ == b.object_; }

 private:
  T* object_ = nullptr;
};

template <typename T, typename... Args>
Ref<T> make_ref(Args&&... args) {
  return Ref<T>(new T(std::forward<Args>(args)...));
}

}  // namespace lazylua
