// runtime.cpp - turning a lua_State into a lazylua interpreter.
#include "interp/runtime.h"

#include <lua.hpp>

#include "interp/lua_tensor.h"

#ifndef LAZYLUA_VERSION
#define LAZYLUA_VERSION "0.0.0"
#endif

namespace lazylua {

const char* version() {
  return LAZYLUA_VERSION;
}

void open_lazylua(lua_State* L) {
  luaL_openlibs(L);
  luaL_requiref(L, "tensor", open_tensor_module, 1);  // also package.loaded.tensor
  lua_pop(L, 1);
}

void push_tensor_methods(lua_State* L) {
  luaL_getmetatable(L, kTensorMetatableName);
  if (lua_istable(L, -1)) {
    lua_getfield(L, -1, "methods");
    lua_remove(L, -2);
  }
}

}  // namespace lazylua
