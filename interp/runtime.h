// runtime.h - setting up a lua_State as lazylua: standard libraries, the
// `tensor` module and the embedded standard library modules.
#pragma once

struct lua_State;

namespace lazylua {

// The program's version, e.g. "0.1.0".
const char* version();

// Opens Lua's standard libraries, loads the `tensor` module into the global
// `tensor` (and package.loaded.tensor), and makes the embedded stdlib
// modules (nn, optim, ...) resolvable with require. Raises a Lua error on
// failure, so call it inside a protected call.
void open_lazylua(lua_State* L);

// Registry field where open_lazylua keeps Lua's standard file searchers
// (Lua files, C libraries) as a list, so a sandbox can take them out.
constexpr const char* kFileSearchersKey = "lazylua.file_searchers";

// Registry field that is true in a sandboxed interpreter (lazylua_options
// .sandbox). Set before any library opens, so that the tensor module and the
// stdlib leave out every function that touches the file system instead of
// relying on a later clean-up to find them all.
constexpr const char* kSandboxKey = "lazylua.sandbox";
// Whether L belongs to a sandboxed interpreter.
bool is_sandboxed(lua_State* L);

// Tab completion needs the names of tensor methods: returns the method table
// of the Tensor metatable pushed onto the stack (or nil).
void push_tensor_methods(lua_State* L);

}  // namespace lazylua
