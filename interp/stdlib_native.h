// stdlib_native.h - the native helpers of the embedded stdlib (data and
// progress): file readers, an eager row gather, terminal queries, a clock.
#pragma once

struct lua_State;

namespace lazylua {

// require name of the native module; stdlib/data.lua and stdlib/progress.lua
// load it. Not a public API: its functions take plain positional arguments.
constexpr const char* kStdlibNativeModule = "stdlib.native";

// Pushes the module table.
int open_stdlib_native(lua_State* L);
// Adds dist's functions to the table on top of the stack (lua_dist.cpp).
void add_dist_functions(lua_State* L);
// Adds the ONNX codec's functions (onnx_codec.cpp).
void add_onnx_functions(lua_State* L);
// Adds call replay's functions (lua_call_replay.cpp).
void add_call_replay_functions(lua_State* L);

}  // namespace lazylua
