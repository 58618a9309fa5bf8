// lua_tensor_scan.cpp - tensor.scan: the Lua side (nested tables, error
// messages with paths) is stdlib/tensor_scan.lua; this is its primitive,
// tensor._scan(body, init, xs, length, reverse, recompute, where), over flat
// lists; `where` ("file:line: ") is the user's call, prefixed to errors.
#include <exception>

#include "interp/coroutines.h"
#include "interp/lua_safe.h"
#include "interp/lua_tensor_internal.h"
#include "tensor/scan.h"

namespace lazylua::binding {
namespace {

// The body raised a Lua error: its value waits in the registry.
struct LuaBodyError : std::exception {
  explicit LuaBodyError(int ref) : reference(ref) {}
  const char* what() const noexcept override { return "error in the scan body"; }
  int reference;
};

// A body's Lua error goes to the registry slot *error_ref, reserved first:
// storing into it then needs no allocation (none may raise in here).
int scan_body(lua_State* L, char* message, size_t size, int* error_ref, bool* body_failed,
              bool* interrupted) {
  try {
    lua_safe::ensure_stack(L, 8, "scan");
    const int error_slot = *error_ref = lua_safe::new_reference(L);
    if (lua_type(L, 1) != LUA_TFUNCTION) fail("scan: the body must be a function");
    const std::vector<Tensor> init = tensor_list(L, 2, "scan", "init");
    const std::vector<Tensor> xs = tensor_list(L, 3, "scan", "xs");
    const int64_t length = check_integer(L, 4, "scan");
    ScanOptions options;
    options.reverse = lua_toboolean(L, 5);
    options.recompute_carries = lua_toboolean(L, 6);
    ScanFunction fn = [L, error_slot](const std::vector<Tensor>& carries,
                                      const std::vector<Tensor>& slices) {
      lua_pushvalue(L, 1);
      push_tensor_list(L, carries);
      push_tensor_list(L, slices);
      if (lua_pcall(L, 2, 2, 0) != LUA_OK) {
        lua_rawseti(L, LUA_REGISTRYINDEX, error_slot);
        throw LuaBodyError(error_slot);
      }
      std::pair<std::vector<Tensor>, std::vector<Tensor>> out;
      const int top = lua_gettop(L);
      try {
        out.first = tensor_list(L, top - 1, "scan", "the body's carry");
        out.second = tensor_list(L, top, "scan", "the body's ys");
      } catch (...) {
        lua_settop(L, top - 2);
        throw;
      }
      lua_settop(L, top - 2);
      return out;
    };
    const std::vector<Tensor> results = scan(tensor_context(L), fn, init, xs, length, options);
    push_tensor_list(L, results);
    return 1;
  } catch (const LuaBodyError&) {
    *body_failed = true;
  } catch (const Interrupted& error) {
    *interrupted = true;
    std::snprintf(message, size, "%s", error.what());
  } catch (const std::bad_alloc&) {
    std::snprintf(message, size, "not enough memory");
  } catch (const std::exception& error) {
    std::snprintf(message, size, "%s", error.what());
  }
  return -1;
}

// No C++ object lives here, so lua_error may jump out.
int scan_primitive(lua_State* L) {
  char message[1024] = "";
  int error_ref = LUA_NOREF;
  bool body_failed = false;
  bool interrupted = false;
  Context* context = tensor_context(L);
  context->location_user = L;
  context->collect_garbage_user = L;
  const int results = scan_body(L, message, sizeof message, &error_ref, &body_failed, &interrupted);
  if (body_failed) lua_rawgeti(L, LUA_REGISTRYINDEX, error_ref);
  luaL_unref(L, LUA_REGISTRYINDEX, error_ref);  // LUA_NOREF: nothing
  if (results >= 0) return results;
  if (interrupted) interrupt_delivered(L);
  if (body_failed) return lua_error(L);
  // The user's line, not this C function's (which has none).
  if (lua_type(L, 7) == LUA_TSTRING) {
    lua_pushvalue(L, 7);
  } else {
    luaL_where(L, 1);
  }
  lua_pushstring(L, message);
  lua_concat(L, 2);
  return lua_error(L);
}

// tensor.scan loads stdlib/tensor_scan.lua on first use.
int scan_entry(lua_State* L) {
  const int args = lua_gettop(L);
  lua_getglobal(L, "require");
  lua_pushstring(L, "lazylua.tensor_scan");
  lua_call(L, 1, 1);
  lua_insert(L, 1);
  lua_call(L, args, LUA_MULTRET);
  return lua_gettop(L);
}

}  // namespace

void register_scan_functions(lua_State* L) {
  static const luaL_Reg functions[] = {
      {"_scan", scan_primitive},
      {"scan", scan_entry},
      {nullptr, nullptr},
  };
  luaL_setfuncs(L, functions, 0);
}

}  // namespace lazylua::binding
