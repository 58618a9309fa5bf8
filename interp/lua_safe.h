// lua_safe.h - Lua API calls that throw a C++ exception instead of raising
// a Lua error, for the C++ functions Lua calls (the `guarded` bodies).
//
// liblua5.4 is C: a Lua error is a longjmp to the nearest pcall, and it
// skips the destructors of every C++ object on the way (UB; in practice
// leaks: docs/architecture.md, "Lua errors and C++ frames"). The rule for
// every C++ function called from Lua:
//
//   While a C++ object with a destructor is alive, call only Lua API
//   functions that cannot raise; make every other call through this file.
//
// Cannot raise (use directly): lua_type/lua_is*/lua_rawlen/lua_rawequal,
// lua_to* on a value that is not converted (lua_tointegerx, lua_tonumberx,
// lua_toboolean, lua_touserdata, lua_tolstring of a string), lua_rawgeti
// and lua_rawgetp, lua_next on a table nobody changes meanwhile, lua_push*
// of nil/booleans/numbers/light userdata/C functions without upvalues,
// lua_pushvalue, stack moves (lua_settop, lua_insert, lua_remove,
// lua_rotate), lua_checkstack, lua_getmetatable, lua_setmetatable, and
// lua_rawseti into the array part of a table made by create_table with
// that many slots.
//
// Can raise (go through here): anything that allocates (strings, tables,
// userdata, table growth), anything that may run a metamethod
// (lua_getfield, lua_gettable, lua_geti, lua_len, lua_compare, lua_concat),
// luaL_check*/luaL_arg*/luaL_error/luaL_Buffer, and calls of Lua code.
//
// User tables are read raw (read_field, read_index): metamethods are not
// consulted, as the options-key check (lua_next) does not consult them
// either, and no user code runs inside a binding's body.
#pragma once

#include <lua.hpp>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace lazylua::lua_safe {

// A Lua error caught by a protected call; run_guarded raises it again (its
// message) once the C++ frames are gone. A memory error is std::bad_alloc.
class LuaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Runs `function` under lua_pcall with the `arguments` values on the stack
// top as its arguments, leaving `results` values. On a Lua error, pops it
// and throws LuaError (std::bad_alloc for a memory error). `function` must
// hold no C++ object with a destructor either (a plain C-style function).
void call(lua_State* L, lua_CFunction function, int arguments, int results);

// lua_checkstack that throws ("stack overflow (what)") instead of failing.
void ensure_stack(lua_State* L, int slots, const char* what);

// Pushes t[key] of the table at `table`, read raw; returns its type.
int read_field(lua_State* L, int table, const char* key);
// Pushes t[i] of the table at `table`, read raw (lua_rawgeti); returns its type.
int read_index(lua_State* L, int table, lua_Integer i);

// Pushes a copy of the bytes as a Lua string.
void push_string(lua_State* L, std::string_view text);
// lua_createtable; more than INT_MAX slots is an error, not a wrap.
void create_table(lua_State* L, int64_t array_slots, int64_t record_slots);
// lua_newuserdatauv with no user values; the memory is uninitialised.
void* new_userdata(lua_State* L, size_t size);
// t[key] = v, raw, for the table at `table` and the value on the stack
// top (popped).
void set_field(lua_State* L, int table, const char* key);
// t[i] = v, raw (lua_rawseti), the value on the stack top (popped).
void set_index(lua_State* L, int table, lua_Integer i);
// t[k] = v, raw (lua_rawset): key and value on the stack top (popped).
void set_raw(lua_State* L, int table);
// A new registry reference (luaL_ref) holding `true`: a slot that a value
// can later be stored into with lua_rawseti(L, LUA_REGISTRYINDEX, ref),
// which allocates nothing. Release it with luaL_unref.
int new_reference(lua_State* L);

}  // namespace lazylua::lua_safe
