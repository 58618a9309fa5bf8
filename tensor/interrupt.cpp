// interrupt.cpp - the current interrupt flag of each thread (interrupt.h).
#include "interrupt.h"

namespace lazylua {
namespace {
thread_local const InterruptFlag* current_flag = nullptr;
}  // namespace

const InterruptFlag* current_interrupt_flag() {
  return current_flag;
}

InterruptScope::InterruptScope(const InterruptFlag* flag) : previous_(current_flag) {
  current_flag = flag;
}

InterruptScope::~InterruptScope() {
  current_flag = previous_;
}

bool interrupt_requested() {
  const InterruptFlag* flag = current_flag;
  return flag && flag->load(std::memory_order_relaxed);
}

void check_interrupt() {
  if (interrupt_requested()) throw Interrupted();
}

}  // namespace lazylua
