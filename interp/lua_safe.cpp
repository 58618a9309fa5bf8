// lua_safe.cpp - Lua API calls that throw instead of raising (the rule:
// lua_safe.h). Each call runs a small C-style function under lua_pcall: a
// Lua error longjmps only over that function and Lua's own frames, none of
// which holds a C++ object, and comes back here as a status to throw.
#include "interp/lua_safe.h"

#include <climits>
#include <new>

namespace lazylua::lua_safe {
namespace {

// The protected bodies below: plain values only (see lua_safe.h).

// (table, key as light userdata) -> table[key], raw.
int raw_get_field_body(lua_State* L) {
  lua_pushstring(L, static_cast<const char*>(lua_touserdata(L, 2)));
  lua_rawget(L, 1);
  return 1;
}

// (text as light userdata, length) -> string.
int push_string_body(lua_State* L) {
  const auto* text = static_cast<const char*>(lua_touserdata(L, 1));
  lua_pushlstring(L, text, static_cast<size_t>(lua_tointeger(L, 2)));
  return 1;
}

// (array slots, record slots) -> table.
int create_table_body(lua_State* L) {
  lua_createtable(L, static_cast<int>(lua_tointeger(L, 1)), static_cast<int>(lua_tointeger(L, 2)));
  return 1;
}

// (size) -> userdata.
int new_userdata_body(lua_State* L) {
  lua_newuserdatauv(L, static_cast<size_t>(lua_tointeger(L, 1)), 0);
  return 1;
}

// (table, key, value): table[key] = value, raw.
int raw_set_body(lua_State* L) {
  lua_rawset(L, 1);
  return 0;
}

// (table, value, key as light userdata): table[key] = value, raw.
int raw_set_field_body(lua_State* L) {
  lua_pushstring(L, static_cast<const char*>(lua_touserdata(L, 3)));
  lua_insert(L, 2);  // table, key, value, light userdata
  lua_settop(L, 3);
  lua_rawset(L, 1);
  return 0;
}

// (table, value, i): table[i] = value, raw.
int raw_set_index_body(lua_State* L) {
  const lua_Integer i = lua_tointeger(L, 3);
  lua_settop(L, 2);
  lua_rawseti(L, 1, i);
  return 0;
}

// (value) -> luaL_ref(registry, value).
int new_reference_body(lua_State* L) {
  lua_pushinteger(L, luaL_ref(L, LUA_REGISTRYINDEX));
  return 1;
}

}  // namespace

void call(lua_State* L, lua_CFunction function, int arguments, int results) {
  ensure_stack(L, 2 + (results > arguments ? results - arguments : 0), "lua call");
  lua_pushcfunction(L, function);
  lua_insert(L, -(arguments + 1));
  const int status = lua_pcall(L, arguments, results, 0);
  if (status == LUA_OK) return;
  if (status == LUA_ERRMEM) {
    lua_pop(L, 1);
    throw std::bad_alloc();
  }
  std::string message = lua_type(L, -1) == LUA_TSTRING
                            ? std::string(lua_tostring(L, -1))
                            : std::string("(error object is a ") + luaL_typename(L, -1) + " value)";
  lua_pop(L, 1);
  throw LuaError(message);
}

void ensure_stack(lua_State* L, int slots, const char* what) {
  if (!lua_checkstack(L, slots)) throw LuaError(std::string("stack overflow (") + what + ")");
}

int read_field(lua_State* L, int table, const char* key) {
  table = lua_absindex(L, table);
  ensure_stack(L, 3, "read_field");
  lua_pushvalue(L, table);
  // A key string may have to be made (allocated): that too is protected.
  lua_pushlightuserdata(L, const_cast<char*>(key));
  call(L, raw_get_field_body, 2, 1);
  return lua_type(L, -1);
}

int read_index(lua_State* L, int table, lua_Integer i) {
  ensure_stack(L, 1, "read_index");
  return lua_rawgeti(L, table, i);
}

void push_string(lua_State* L, std::string_view text) {
  ensure_stack(L, 3, "push_string");
  lua_pushlightuserdata(L, const_cast<char*>(text.data()));
  lua_pushinteger(L, static_cast<lua_Integer>(text.size()));
  call(L, push_string_body, 2, 1);
}

void create_table(lua_State* L, int64_t array_slots, int64_t record_slots) {
  // A silently smaller table would make the caller's lua_rawseti grow it,
  // which allocates outside the protection.
  if (array_slots < 0 || array_slots > INT_MAX || record_slots < 0 || record_slots > INT_MAX) {
    throw LuaError("table overflow: a table of more than 2^31 - 1 entries");
  }
  ensure_stack(L, 3, "create_table");
  lua_pushinteger(L, array_slots);
  lua_pushinteger(L, record_slots);
  call(L, create_table_body, 2, 1);
}

void* new_userdata(lua_State* L, size_t size) {
  ensure_stack(L, 2, "new_userdata");
  lua_pushinteger(L, static_cast<lua_Integer>(size));
  call(L, new_userdata_body, 1, 1);
  return lua_touserdata(L, -1);
}

void set_field(lua_State* L, int table, const char* key) {
  table = lua_absindex(L, table);
  ensure_stack(L, 4, "set_field");
  lua_pushvalue(L, table);
  lua_insert(L, -2);  // table, value
  lua_pushlightuserdata(L, const_cast<char*>(key));
  call(L, raw_set_field_body, 3, 0);
}

void set_index(lua_State* L, int table, lua_Integer i) {
  table = lua_absindex(L, table);
  ensure_stack(L, 4, "set_index");
  lua_pushvalue(L, table);
  lua_insert(L, -2);  // table, value
  lua_pushinteger(L, i);
  call(L, raw_set_index_body, 3, 0);
}

void set_raw(lua_State* L, int table) {
  table = lua_absindex(L, table);
  ensure_stack(L, 3, "set_raw");
  lua_pushvalue(L, table);
  lua_insert(L, -3);  // table, key, value
  call(L, raw_set_body, 3, 0);
}

int new_reference(lua_State* L) {
  ensure_stack(L, 2, "new_reference");
  lua_pushboolean(L, true);
  call(L, new_reference_body, 1, 1);
  const auto reference = static_cast<int>(lua_tointeger(L, -1));
  lua_pop(L, 1);
  return reference;
}

}  // namespace lazylua::lua_safe
