// embedded_stdlib.cpp - `require` for the stdlib modules built into the
// library (docs/architecture.md §2): a searcher in package.searchers.
#include "interp/embedded_stdlib.h"

#include <lua.hpp>

#include <cstring>

#include "interp/error_position.h"
#include "interp/stdlib_native.h"

namespace lazylua {
namespace {

// The loader require calls: runs the chunk with the module name and the
// "file" name as arguments, as Lua's own file searchers do.
int load_native_module(lua_State* L) {
  return open_stdlib_native(L);
}

// Every stdlib module is `lazylua.<file name>`; the short `<file name>` is
// the lazylua program's own (enable_short_stdlib_names), so that a host or
// the stock lua5.4 never has `nn` or `data` taken from its package space.
constexpr char kQualifiedPrefix[] = "lazylua.";
constexpr size_t kQualifiedPrefixLength = sizeof kQualifiedPrefix - 1;
bool short_names_enabled = false;

// True when the `require` running this searcher was called by an embedded
// stdlib file (its chunk name is one of theirs): `require "nn_conv"` inside
// stdlib/nn.lua finds its sibling wherever the stdlib runs (stock lua5.4
// too). Level 0 is this searcher, 1 is require, 2 its caller.
bool required_from_stdlib(lua_State* L) {
  lua_Debug caller;
  if (!lua_getstack(L, 2, &caller) || !lua_getinfo(L, "S", &caller)) return false;
  for (const EmbeddedModule* module = kEmbeddedModules; module->name; module++) {
    if (std::strcmp(caller.source, module->chunk_name) == 0) return true;
  }
  return false;
}

// The loader of a short name: require "nn" is require "lazylua.nn", so both
// names give one module table (one nn, whichever name a script uses).
int load_through_qualified_name(lua_State* L) {
  const char* qualified = lua_pushfstring(L, "%s%s", kQualifiedPrefix, luaL_checkstring(L, 1));
  lua_getglobal(L, "require");
  if (!lua_isfunction(L, -1)) return luaL_error(L, "module '%s': no require function", qualified);
  lua_pushvalue(L, -2);  // the qualified name
  lua_call(L, 1, 1);
  return 1;
}

// package.searchers entry: (name) -> loader, where | nothing. Plain C
// style (no C++ object lives across a Lua error): a syntax error in an
// embedded file is raised like Lua's own "error loading module" error.
//
// A name it does not know gets no message at all (require then drops this
// searcher's line), so that "module 'x' not found" lists exactly what the
// stock lua5.4 lists: scripts match that message.
int search_embedded(lua_State* L) {
  const char* name = luaL_checkstring(L, 1);
  if (std::strcmp(name, kStdlibNativeModule) == 0) {
    lua_pushcfunction(L, load_native_module);
    lua_pushliteral(L, ":embedded:");
    return 2;
  }
  const bool qualified = std::strncmp(name, kQualifiedPrefix, kQualifiedPrefixLength) == 0;
  if (!qualified && !short_names_enabled && !required_from_stdlib(L)) return 0;
  const EmbeddedModule* module =
      find_embedded_module(qualified ? name + kQualifiedPrefixLength : name);
  if (!module) return 0;
  if (!qualified) {
    lua_pushcfunction(L, load_through_qualified_name);
    lua_pushstring(L, module->chunk_name + 1);  // "stdlib/nn.lua", as for lazylua.nn
    return 2;
  }
  if (luaL_loadbufferx(L, module->source, module->size, module->chunk_name, "t") != LUA_OK) {
    return luaL_error(L, "error loading module '%s' from embedded file '%s':\n\t%s", name,
                      module->chunk_name + 1, lua_tostring(L, -1));
  }
  // Its errors name the user's line (error_position.h).
  push_stdlib_environment(L);
  lua_setupvalue(L, -2, 1);                   // _ENV
  lua_pushstring(L, module->chunk_name + 1);  // "stdlib/nn.lua", without the '@'
  return 2;
}

}  // namespace

void enable_short_stdlib_names() {
  short_names_enabled = true;
}

int open_embedded_module(lua_State* L, const char* qualified_name) {
  lua_pushcfunction(L, search_embedded);
  lua_pushstring(L, qualified_name);
  lua_call(L, 1, 2);  // loader, file name
  if (!lua_isfunction(L, -2))
    return luaL_error(L, "module '%s' is not built into lazylua", qualified_name);
  lua_pushstring(L, qualified_name);
  lua_insert(L, -2);
  lua_call(L, 2, 1);  // as require calls it: (name, file name)
  return 1;
}

const EmbeddedModule* find_embedded_module(const char* name) {
  for (const EmbeddedModule* module = kEmbeddedModules; module->name; module++) {
    if (std::strcmp(module->name, name) == 0) return module;
  }
  return nullptr;
}

void install_stdlib_searcher(lua_State* L) {
  lua_getglobal(L, "package");
  if (!lua_istable(L, -1)) {
    lua_pop(L, 1);
    return;
  }
  lua_getfield(L, -1, "searchers");
  if (!lua_istable(L, -1)) {
    lua_pop(L, 2);
    return;
  }
  const lua_Integer count = static_cast<lua_Integer>(lua_rawlen(L, -1));
  // A second open of the tensor module in the same state adds nothing.
  for (lua_Integer i = 1; i <= count; i++) {
    lua_rawgeti(L, -1, i);
    const bool ours = lua_tocfunction(L, -1) == search_embedded;
    lua_pop(L, 1);
    if (ours) {
      lua_pop(L, 2);
      return;
    }
  }
  // Shift searchers 2..n up by one and put ours at 2 (1 is the preload one).
  for (lua_Integer i = count; i >= 2; i--) {
    lua_rawgeti(L, -1, i);
    lua_rawseti(L, -2, i + 1);
  }
  lua_pushcfunction(L, search_embedded);
  lua_rawseti(L, -2, count >= 1 ? 2 : 1);
  lua_pop(L, 2);
}

}  // namespace lazylua
