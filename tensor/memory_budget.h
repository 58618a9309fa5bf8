// memory_budget.h - a cap on the memory one embedded interpreter may hold.
//
// A host that embeds lazylua may give an interpreter a memory limit. The Lua
// heap is counted by the interpreter's lua_Alloc; tensor buffers come from
// the caching allocator, which serves every interpreter of the process, so
// each Buffer made while a budget is current on its thread is charged to
// that budget and gives the bytes back when it is freed (on any thread).
// So is each IR node recorded then (an estimate of its size, ir.cpp
// make_node), so that pending graphs count too. Executor slots and eager
// results are Buffers made on the interpreter's thread; only the small
// per-thread scratch of kernels on pool workers is not counted.
#pragma once

#include <atomic>
#include <cstdint>

#include "ref.h"

namespace lazylua {

class MemoryBudget : public RefCounted {
 public:
  explicit MemoryBudget(int64_t limit_bytes) : limit_(limit_bytes) {}

  // Adds `bytes` if that stays within the limit; false otherwise (counted
  // as a refusal unless count_refusal is false).
  bool try_charge(int64_t bytes, bool count_refusal = true);
  // Like try_charge, but before refusing it lets the reclaimer free what it
  // can (tensors the host's garbage collector has not got to yet) and tries
  // again. For tensor buffers, on the thread that runs the interpreter.
  bool try_charge_or_reclaim(int64_t bytes);
  // Installs (or, with null, removes) the reclaimer: a full collection of
  // the interpreter's Lua state. Set once, before any charge.
  void set_reclaimer(void (*reclaim)(void* user), void* user) {
    reclaim_ = reclaim;
    reclaim_user_ = user;
  }
  void give_back(int64_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }
  // Counts bytes that already exist (a Lua heap made before the budget).
  void charge_unchecked(int64_t bytes) { used_.fetch_add(bytes, std::memory_order_relaxed); }

  int64_t limit() const { return limit_; }
  int64_t used() const { return used_.load(std::memory_order_relaxed); }
  // How many charges were refused: lets the host tell a memory error from
  // other errors.
  int64_t refusals() const { return refusals_.load(std::memory_order_relaxed); }

 private:
  const int64_t limit_;
  std::atomic<int64_t> used_{0};
  std::atomic<int64_t> refusals_{0};
  void (*reclaim_)(void* user) = nullptr;
  void* reclaim_user_ = nullptr;
};

// The budget new buffers on this thread are charged to (null: none).
MemoryBudget* current_memory_budget();

// Makes `budget` current on this thread for its lifetime (null allowed).
class MemoryBudgetScope {
 public:
  explicit MemoryBudgetScope(MemoryBudget* budget);
  ~MemoryBudgetScope();
  MemoryBudgetScope(const MemoryBudgetScope&) = delete;
  MemoryBudgetScope& operator=(const MemoryBudgetScope&) = delete;

 private:
  MemoryBudget* previous_;
};

}  // namespace lazylua
