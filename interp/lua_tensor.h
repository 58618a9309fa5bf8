// lua_tensor.h - the Tensor userdata and the `tensor` module.
#pragma once

#include <lua.hpp>

#include "tensor/tensor.h"

namespace lazylua {

// Name of the Tensor metatable in the registry (also its __name, which Lua
// uses in messages such as "got lazylua.Tensor").
constexpr const char* kTensorMetatableName = "lazylua.Tensor";

// Pushes the `tensor` module table (creating the metatable on first use).
int open_tensor_module(lua_State* L);

// The Tensor at `index`, or nullptr if the value there is not a Tensor. A
// closed tensor gives a null Tensor.
const Tensor* to_tensor(lua_State* L, int index);

// Pushes a new Tensor userdata holding `tensor`.
void push_tensor(lua_State* L, Tensor tensor);
// Pushes a new Tensor userdata holding data.
void push_tensor(lua_State* L, Array data);

// The tensor context of this interpreter (made by open_tensor_module).
Context* tensor_context(lua_State* L);
// Whether open_tensor_module has run in this state (and it is not closing).
bool has_tensor_context(lua_State* L);

}  // namespace lazylua
