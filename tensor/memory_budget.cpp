// memory_budget.cpp - per-interpreter memory limits.
#include "memory_budget.h"

namespace lazylua {
namespace {
thread_local MemoryBudget* current_budget = nullptr;
}  // namespace

bool MemoryBudget::try_charge(int64_t bytes) {
  int64_t used = used_.load(std::memory_order_relaxed);
  do {
    if (bytes > limit_ - used) {
      refusals_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
  } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  return true;
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
