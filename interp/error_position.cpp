// error_position.cpp - the user's line for errors raised inside the stdlib
// (see error_position.h).
//
// Stdlib chunks see an `error` of their own (their _ENV is the globals plus
// that one function), so every `error(message, level)` in stdlib/*.lua,
// including files added later, names the script's line whatever `level`
// says: the stdlib cannot know how deep the user's frame is (a loss called
// through nn.Module's __call, a layer inside a Sequential inside a scan).
// The C++ tensor errors (binding::run_guarded) use the same code. Nothing
// runs on the non-error path except one extra table hop for a global read
// in stdlib code.
#include "interp/error_position.h"

#include <cstring>

namespace lazylua {
namespace {

// Registry key of the stdlib environment (the address is the key).
const char kEnvironmentKey = 0;

// How far up an error looks for the user's frame: deeper than the 24 levels
// the per-op location lookup allows, since this runs only on errors.
constexpr int kErrorSearchDepth = 200;

// The local that nn.Sequential's forward keeps its layer number in
// (stdlib/nn.lua); an error passing through that frame names the layer.
constexpr const char* kSequentialMarker = "sequential_layer";

// lua_pcall'd: (sequential, index) -> sequential:_describe_layer(index).
int describe_layer(lua_State* L) {
  lua_getfield(L, 1, "_describe_layer");
  lua_pushvalue(L, 1);
  lua_pushvalue(L, 2);
  lua_call(L, 2, 1);
  return 1;
}

// If `frame` is a Sequential forward (a stdlib frame with the marker local),
// pushes "nn.Sequential layer i (Type(...)): " and returns true.
bool push_sequential_label(lua_State* L, lua_Debug* frame) {
  const int top = lua_gettop(L);
  int self_slot = 0;
  int layer_slot = 0;
  for (int n = 1;; n++) {
    const char* name = lua_getlocal(L, frame, n);
    if (!name) break;
    if (self_slot == 0 && std::strcmp(name, "self") == 0) {
      self_slot = lua_gettop(L);
    } else if (std::strcmp(name, kSequentialMarker) == 0 && lua_isinteger(L, -1)) {
      layer_slot = lua_gettop(L);
    } else {
      lua_pop(L, 1);
    }
  }
  if (self_slot == 0 || layer_slot == 0) {
    lua_settop(L, top);
    return false;
  }
  const lua_Integer layer = lua_tointeger(L, layer_slot);
  lua_pushcfunction(L, describe_layer);
  lua_pushvalue(L, self_slot);
  lua_pushvalue(L, layer_slot);
  if (lua_pcall(L, 2, 1, 0) == LUA_OK && lua_type(L, -1) == LUA_TSTRING) {
    lua_pushliteral(L, ": ");
    lua_concat(L, 2);
  } else {
    lua_pop(L, 1);
    lua_pushfstring(L, "nn.Sequential layer %I: ", layer);
  }
  lua_replace(L, top + 1);
  lua_settop(L, top + 1);
  return true;
}

// The `error` of stdlib chunks: as Lua's, but a string message with a
// level above 0 gets the user's position (and Sequential layers) instead
// of the position `level` points at.
int stdlib_error(lua_State* L) {
  const lua_Integer level = luaL_optinteger(L, 2, 1);
  lua_settop(L, 1);
  if (lua_type(L, 1) == LUA_TSTRING && level > 0) {
    push_positioned_message(L, lua_tostring(L, 1), true);
  }
  return lua_error(L);
}

}  // namespace

bool is_stdlib_source(const char* source) {
  return std::strncmp(source, "@stdlib/", 8) == 0;
}

bool nearest_user_frame(lua_State* L, lua_Debug* info, int max_depth) {
  bool found = false;
  lua_Debug frame;
  for (int level = 1; level < max_depth && lua_getstack(L, level, &frame); level++) {
    if (!lua_getinfo(L, "Sl", &frame) || frame.currentline <= 0) continue;
    const bool user = !is_stdlib_source(frame.source);
    if (!found || user) *info = frame;
    found = true;
    if (user) return true;
  }
  return found;
}

void push_positioned_message(lua_State* L, const char* message, bool name_layers) {
  const int base = lua_gettop(L);
  lua_Debug frame;
  lua_Debug position;
  bool have_position = false;
  int labels = 0;
  for (int level = 1; level < kErrorSearchDepth && lua_getstack(L, level, &frame); level++) {
    if (!lua_getinfo(L, "Sl", &frame) || frame.currentline <= 0) continue;
    if (!is_stdlib_source(frame.source)) {
      position = frame;
      have_position = true;
      break;
    }
    if (!have_position) position = frame;
    have_position = true;
    if (name_layers && push_sequential_label(L, &frame)) labels++;
  }
  if (have_position) {
    lua_pushfstring(L, "%s:%d: ", position.short_src, position.currentline);
  } else {
    lua_pushliteral(L, "");
  }
  // The labels were pushed innermost first; the message reads outermost first.
  for (int i = labels; i >= 1; i--) lua_pushvalue(L, base + i);
  lua_pushstring(L, message);
  lua_concat(L, labels + 2);
  if (labels > 0) {
    lua_replace(L, base + 1);
    lua_settop(L, base + 1);
  }
}

void push_stdlib_environment(lua_State* L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &kEnvironmentKey) == LUA_TTABLE) return;
  lua_pop(L, 1);
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, stdlib_error);
  lua_setfield(L, -2, "error");
  // Reads fall through to the globals and writes go to them, as without an
  // environment of their own.
  lua_createtable(L, 0, 2);
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
  lua_pushvalue(L, -1);
  lua_setfield(L, -3, "__index");
  lua_setfield(L, -2, "__newindex");
  lua_setmetatable(L, -2);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &kEnvironmentKey);
}

}  // namespace lazylua
