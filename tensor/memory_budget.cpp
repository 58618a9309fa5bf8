// memory_budget.cpp - per-interpreter memory limits.
#include "memory_budget.h"

namespace lazylua {
namespace {
thread_local MemoryBudget* current_budget = nullptr;
}  // namespace

bool MemoryBudget::try_charge(int64_t bytes, bool count_refusal) {
  int64_t used = used_.load(std::memory_order_relaxed);
  do {
    if (bytes > limit_ - used) {
      if (count_refusal) refusals_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
  } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  return true;
}

bool MemoryBudget::try_charge_or_reclaim(int64_t bytes) {
  // Not from inside a reclaim: the collection may run finalizers that make
  // tensors, and a collection cannot start inside another.
  thread_local bool reclaiming = false;
  if (!reclaim_ || reclaiming) return try_charge(bytes);
  if (try_charge(bytes, false)) return true;
  reclaiming = true;
  try {
    reclaim_(reclaim_user_);
  } catch (...) {
    reclaiming = false;
    throw;
  }
  reclaiming = false;
  return try_charge(bytes);
}

MemoryBudget* current_memory_budget() {
  return current_budget;
}

MemoryBudgetScope::MemoryBudgetScope(MemoryBudget* budget) : previous_(current_budget) {
  current_budget = budget;
}

MemoryBudgetScope::~MemoryBudgetScope() {
  current_budget = previous_;
}

}  // namespace lazylua
