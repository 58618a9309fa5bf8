// lua_module.h - the entry points of the Lua C module lazylua.so.
#pragma once

struct lua_State;

namespace lazylua {

// The body of every luaopen_lazylua_<name> (generated from stdlib/ by
// cmake/embed_stdlib.cmake): opens the tensor module if this state has not
// yet, then returns the embedded stdlib module `qualified_name`
// ("lazylua.nn") as require's loader would.
int open_stdlib_module(lua_State* L, const char* qualified_name);

}  // namespace lazylua
