// lua_module.cpp - `require "lazylua"` from a stock Lua 5.4: the entry point
// of the Lua C module lazylua.so (built from the same objects as liblazylua).
// `require "lazylua.nn"` (any stdlib module) enters through the generated
// luaopen_lazylua_nn (cmake/embed_stdlib.cmake), which comes here.
#include "interp/lua_module.h"

#include <lua.hpp>

#include "interp/embedded_stdlib.h"
#include "interp/lua_tensor.h"

// Returns the tensor module, also registered as package.loaded.tensor so
// that `require "tensor"` and the built-in modules (lazylua.nn, ...) find
// it. The state's extra space is left alone: the host may use it.
extern "C" int luaopen_lazylua(lua_State* L) {
  if (lazylua::has_tensor_context(L)) {
    // Opened before in this state (under another name): the same module.
    lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_getfield(L, -1, "tensor");
    if (lua_istable(L, -1)) return 1;
    lua_pop(L, 2);
  }
  luaL_requiref(L, "tensor", lazylua::open_tensor_module, 0);
  return 1;
}

namespace lazylua {

int open_stdlib_module(lua_State* L, const char* qualified_name) {
  // As if `require "lazylua"` had come first: package.loaded.lazylua too.
  luaL_requiref(L, "lazylua", luaopen_lazylua, 0);
  lua_pop(L, 1);
  return open_embedded_module(L, qualified_name);
}

}  // namespace lazylua
