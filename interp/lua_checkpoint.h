// lua_checkpoint.h - tensor.save / tensor.load: tables of tensors, numbers,
// strings and booleans in a checksummed protobuf file (interp/checkpoint.proto).
#pragma once

struct lua_State;

namespace lazylua::binding {

// Registers save and load into the table on top of the stack.
void register_checkpoint_functions(lua_State* L);

}  // namespace lazylua::binding
