// runtime.cpp - turning a lua_State into a lazylua interpreter.
#include "interp/runtime.h"

#include <lua.hpp>

#include "interp/coroutines.h"
#include "interp/lua_tensor.h"
#include "interp/state_data.h"

#ifndef LAZYLUA_VERSION
#define LAZYLUA_VERSION "0.0.0"
#endif

namespace lazylua {

const char* version() {
  return LAZYLUA_VERSION;
}

namespace {

// require "lazylua" inside a lazylua interpreter gives its own tensor
// module, never a second copy loaded from lazylua.so.
int load_own_tensor_module(lua_State* L) {
  lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_getfield(L, -1, "tensor");
  return 1;
}

}  // namespace

void open_lazylua(lua_State* L) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  if (!install_state_data(lua_tothread(L, -1))) luaL_error(L, "not enough memory");
  lua_pop(L, 1);
  luaL_openlibs(L);
  install_coroutine_tracking(L);  // interrupts must reach busy coroutines
  // package.searchers is {preload, Lua files, C libraries, C roots} now.
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "searchers");
  lua_createtable(L, 3, 0);
  for (int i = 2; i <= 4; i++) {
    lua_rawgeti(L, -2, i);
    lua_rawseti(L, -2, i - 1);
  }
  lua_setfield(L, LUA_REGISTRYINDEX, kFileSearchersKey);
  lua_pop(L, 2);
  luaL_requiref(L, "tensor", open_tensor_module, 1);  // also package.loaded.tensor
  lua_pop(L, 1);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(L, load_own_tensor_module);
  lua_setfield(L, -2, "lazylua");
  lua_pop(L, 1);
}

bool is_sandboxed(lua_State* L) {
  lua_getfield(L, LUA_REGISTRYINDEX, kSandboxKey);
  const bool sandboxed = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return sandboxed;
}

void push_tensor_methods(lua_State* L) {
  luaL_getmetatable(L, kTensorMetatableName);
  if (lua_istable(L, -1)) {
    lua_getfield(L, -1, "methods");
    lua_remove(L, -2);
  }
}

}  // namespace lazylua
