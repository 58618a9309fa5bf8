// embedded_stdlib.h - the Lua modules of stdlib/, compiled into liblazylua,
// and the package searcher that lets `require` find them.
#pragma once

#include <cstddef>

struct lua_State;

namespace lazylua {

// One stdlib/NAME.lua file. The table kEmbeddedModules ends with a row
// whose name is null.
struct EmbeddedModule {
  const char* name;        // "nn": what require takes
  const char* chunk_name;  // "@stdlib/nn.lua": what error messages show
  const char* source;
  size_t size;
};
// Generated at build time by cmake/embed_stdlib.cmake.
extern const EmbeddedModule kEmbeddedModules[];

// The embedded module called `name`, or nullptr.
const EmbeddedModule* find_embedded_module(const char* name);

// Inserts the embedded-stdlib searcher into package.searchers right after
// the preload searcher, so `require "nn"` gets the stdlib that was built
// into the library whatever package.path says. Also registers the native
// helper module "stdlib.native" there. Does nothing when the package
// library is not open.
void install_stdlib_searcher(lua_State* L);

}  // namespace lazylua
