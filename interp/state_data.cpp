// state_data.cpp - the allocator wrapper behind StateData.
#include "interp/state_data.h"

#include <new>

namespace lazylua {

void* state_allocate(void* user, void* block, size_t old_size, size_t new_size) {
  auto* data = static_cast<StateData*>(user);
  // With a null block, old_size is a type tag, not a size.
  const size_t old_bytes = block ? old_size : 0;
  MemoryBudget* budget = data->budget.get();
  const bool grows = new_size > old_bytes;
  if (budget && grows && !budget->try_charge(static_cast<int64_t>(new_size - old_bytes))) {
    return nullptr;  // Lua raises "not enough memory"
  }
  void* result = data->inner_allocator(data->inner_user, block, old_size, new_size);
  if (budget) {
    if (grows && !result) {
      budget->give_back(static_cast<int64_t>(new_size - old_bytes));
    } else if (!grows && (result || new_size == 0)) {
      budget->give_back(static_cast<int64_t>(old_bytes - new_size));
    }
  }
  // lua_close frees the main block last: nothing will call us again.
  if (new_size == 0 && block && block == data->main_block) delete data;
  return result;
}

StateData* install_state_data(lua_State* L) {
  if (StateData* existing = state_data(L)) return existing;
  auto* data = new (std::nothrow) StateData;
  if (!data) return nullptr;
  data->inner_allocator = lua_getallocf(L, &data->inner_user);
  // lua_getextraspace(L) is the start of the block lua_newstate allocated
  // (the extra space comes first in it), which lua_close frees last.
  data->main_block = lua_getextraspace(L);
  lua_setallocf(L, state_allocate, data);
  return data;
}

}  // namespace lazylua
