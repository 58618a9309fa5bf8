// embedded_stdlib.h - the Lua modules of stdlib/, compiled into liblazylua,
// and the package searcher that lets `require` find them.
#pragma once

#include <cstddef>

struct lua_State;

namespace lazylua {

// One stdlib/NAME.lua file. The table kEmbeddedModules ends with a row
// whose name is null.
struct EmbeddedModule {
  const char* name;        // "nn": require takes "lazylua.nn" (or "nn" in the program)
  const char* chunk_name;  // "@stdlib/nn.lua": what error messages show
  const char* source;
  size_t size;
};
// Generated at build time by cmake/embed_stdlib.cmake.
extern const EmbeddedModule kEmbeddedModules[];

// The embedded module called `name`, or nullptr.
const EmbeddedModule* find_embedded_module(const char* name);

// Inserts the embedded-stdlib searcher into package.searchers right after
// the preload searcher, so `require "lazylua.nn"` gets the stdlib that was built
// into the library whatever package.path says. Also registers the native
// helper module "stdlib.native" there. Does nothing when the package
// library is not open.
void install_stdlib_searcher(lua_State* L);

// Lets the searcher also take the short names ("nn" for "lazylua.nn") in
// every state of this process. Only the lazylua program calls it: a host's
// or the stock lua5.4's own modules called nn or data stay theirs.
void enable_short_stdlib_names();

// Loads the embedded module `qualified_name` ("lazylua.nn") as require's
// loader would and pushes its value; the searcher must be installed (the
// tensor module open). Raises a Lua error for an unknown name. For the
// luaopen_lazylua_* entry points of lazylua.so.
int open_embedded_module(lua_State* L, const char* qualified_name);

}  // namespace lazylua
