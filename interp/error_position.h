// error_position.h - where an error is said to be: the user's line, not the
// stdlib's. Errors raised inside the embedded stdlib (a Lua `error` in
// stdlib/*.lua, or a C++ tensor error while stdlib code called an op) name
// the first stack frame that is user code, and the layers of the
// nn.Sequential models the error passed through.
#pragma once

#include <lua.hpp>

namespace lazylua {

// Is `source` (lua_Debug::source) a chunk of the embedded stdlib?
bool is_stdlib_source(const char* source);

// The nearest Lua function at stack level 1 or above (at most `max_depth`
// levels up) outside the embedded stdlib, or the nearest Lua function when
// all are inside. False when there is no Lua function at all.
bool nearest_user_frame(lua_State* L, lua_Debug* info, int max_depth = 24);

// Pushes "file:line: " (of nearest_user_frame) followed, with
// `name_layers`, by "nn.Sequential layer 3 (Linear(784 -> 256)): " for each
// Sequential forward between the error and that frame (outermost first),
// then `message`. Plain C: no C++ object lives across a Lua error here.
void push_positioned_message(lua_State* L, const char* message, bool name_layers);

// Pushes the environment the embedded stdlib chunks run in: the globals,
// except that `error` is the positioning one above (made once per state).
void push_stdlib_environment(lua_State* L);

}  // namespace lazylua
