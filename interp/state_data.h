// state_data.h - what lazylua keeps per lua_State it sets up itself.
//
// open_lazylua wraps the state's allocator with one whose user data is a
// StateData: finding the tensor context is then two loads (no registry
// lookup on every op), the embedding API can count the Lua heap against a
// memory limit, and the allocator knows the state is closing when Lua frees
// its main block. States set up by someone else (the stock lua5.4 loading
// lazylua.so) have no StateData; the context is then found in the registry.
#pragma once

#include <lua.hpp>

#include <atomic>

#include "tensor/interrupt.h"
#include "tensor/memory_budget.h"

namespace lazylua {

class Context;

struct StateData {
  lua_Alloc inner_allocator = nullptr;  // the allocator the state had before
  void* inner_user = nullptr;
  void* main_block = nullptr;  // freed last by lua_close
  Context* context = nullptr;  // set by open_tensor_module, cleared at close
  // Lua heap bytes are charged here when set (the embedding API's limit).
  Ref<MemoryBudget> budget;
  // The embedding API's interpreter handle (lazylua_interpreter*), if any.
  void* host = nullptr;
  // Interrupts (interp/coroutines.h). Atomics: a signal handler or another
  // OS thread sets them while the state runs.
  std::atomic<lua_State*> running_coroutine{nullptr};  // null: the main thread
  std::atomic<lua_Hook> pending_interrupt{nullptr};    // until the call ends
  std::atomic<lua_Hook> last_interrupt{nullptr};       // to recognize stale hooks
  std::atomic<int> arming{0};                          // interrupters at work
  // The flag tensor work obeys (tensor/interrupt.h): set with the hook,
  // cleared when tensor work stopped for it or the interrupt is over.
  InterruptFlag interrupt_requested{false};
  // After tensor work stopped for an interrupt: whether the hook stays on
  // the Lua thread (the embedding API: until the call ends) or comes off it
  // as it does after raising once (the CLI, like lua.c). Set at creation.
  bool interrupt_stays_armed = false;
};

// Wraps L's allocator (once; later calls return the same data). L must be a
// main thread. StateData is freed with the state.
StateData* install_state_data(lua_State* L);

// The allocator itself (exposed only for state_data's comparison).
void* state_allocate(void* user, void* block, size_t old_size, size_t new_size);

// L's StateData, or nullptr if lazylua did not set up this state.
inline StateData* state_data(lua_State* L) {
  void* user = nullptr;
  return lua_getallocf(L, &user) == state_allocate ? static_cast<StateData*>(user) : nullptr;
}

}  // namespace lazylua
