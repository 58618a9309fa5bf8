// lua_tensor_args.cpp - reading Lua arguments for tensor functions. Every
// helper throws Error instead of raising a Lua error (see
// lua_tensor_internal.h for why).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "interp/lua_safe.h"
#include "interp/lua_tensor_internal.h"

namespace lazylua::binding {

void argument_error(int arg, const char* function, const std::string& message) {
  fail("bad argument #{} to '{}' ({})", arg, function, message);
}

void type_error(lua_State* L, int arg, const char* function, const char* expected) {
  const char* got = lua_type(L, arg) == LUA_TNONE ? "no value" : luaL_typename(L, arg);
  if (to_tensor(L, arg)) got = "tensor";
  argument_error(arg, function, fmt::format("{} expected, got {}", expected, got));
}

const Tensor& check_tensor(lua_State* L, int arg, const char* function) {
  const Tensor* tensor = to_tensor(L, arg);
  if (!tensor) type_error(L, arg, function, "tensor");
  if (!*tensor) argument_error(arg, function, "attempt to use a closed tensor");
  return *tensor;
}

bool is_number(lua_State* L, int arg) {
  return lua_type(L, arg) == LUA_TNUMBER;
}

ops::Scalar check_scalar(lua_State* L, int arg, const char* function) {
  if (lua_isinteger(L, arg)) return ops::Scalar::from_integer(lua_tointeger(L, arg));
  if (is_number(L, arg)) return ops::Scalar::from_double(lua_tonumber(L, arg));
  if (lua_type(L, arg) == LUA_TBOOLEAN) return ops::Scalar::from_integer(lua_toboolean(L, arg));
  type_error(L, arg, function, "number");
}

int64_t check_integer(lua_State* L, int arg, const char* function) {
  if (lua_isinteger(L, arg)) return lua_tointeger(L, arg);
  if (is_number(L, arg)) {
    const double value = lua_tonumber(L, arg);
    // Integral floats (1e6) are fine, as for Lua's own integer arguments.
    if (std::floor(value) == value && std::fabs(value) < 9.2e18) {
      return static_cast<int64_t>(value);
    }
    argument_error(arg, function, "number has no integer representation");
  }
  type_error(L, arg, function, "integer");
}

double check_double(lua_State* L, int arg, const char* function) {
  if (is_number(L, arg)) return lua_tonumber(L, arg);
  type_error(L, arg, function, "number");
}

std::optional<int64_t> optional_integer(lua_State* L, int arg, const char* function) {
  if (lua_isnoneornil(L, arg)) return std::nullopt;
  return check_integer(L, arg, function);
}

bool optional_boolean(lua_State* L, int arg, const char* function, bool fallback) {
  if (lua_isnoneornil(L, arg)) return fallback;
  if (lua_type(L, arg) != LUA_TBOOLEAN) type_error(L, arg, function, "boolean");
  return lua_toboolean(L, arg);
}

int check_dim(lua_State* L, int arg, int rank, const char* function, int rank_extra) {
  return normalize_dim(check_integer(L, arg, function), rank, function, rank_extra);
}

std::optional<int> optional_dim(lua_State* L, int arg, int rank, const char* function) {
  if (lua_isnoneornil(L, arg)) return std::nullopt;
  return check_dim(L, arg, rank, function);
}

bool is_options_table(lua_State* L, int arg) {
  if (lua_type(L, arg) != LUA_TTABLE || lua_rawlen(L, arg) != 0) return false;
  lua_pushnil(L);
  if (lua_next(L, arg < 0 ? arg - 1 : arg) == 0) return false;  // {} is an empty size
  lua_pop(L, 2);
  return true;
}

Shape check_sizes(lua_State* L, int first, int last, const char* function, bool allow_inferred) {
  Shape shape;
  if (first == last && lua_type(L, first) == LUA_TTABLE) {
    const int64_t count = static_cast<int64_t>(lua_rawlen(L, first));
    if (count > kMaxDims) fail("{}: tensors have at most {} dimensions", function, kMaxDims);
    for (int64_t i = 1; i <= count; i++) {
      lua_rawgeti(L, first, i);
      const bool integral =
          is_number(L, -1) && std::floor(lua_tonumber(L, -1)) == lua_tonumber(L, -1);
      const double value = integral ? lua_tonumber(L, -1) : 0;
      lua_pop(L, 1);
      if (!integral) argument_error(first, function, "sizes must be integers");
      if (value < 0 && !(allow_inferred && value == -1)) {
        fail("{}: negative size {}", function, value);
      }
      if (value > static_cast<double>(kMaxElements)) {
        fail("{}: size {:.0f} is too large (the limit is 2^40 elements)", function, value);
      }
      shape.push_back(static_cast<int64_t>(value));
    }
  } else {
    if (last - first + 1 > kMaxDims) {
      fail("{}: tensors have at most {} dimensions", function, kMaxDims);
    }
    for (int arg = first; arg <= last; arg++) {
      if (is_number(L, arg) && lua_tonumber(L, arg) > static_cast<double>(kMaxElements)) {
        fail("{}: size {:.0f} is too large (the limit is 2^40 elements)", function,
             lua_tonumber(L, arg));
      }
      const int64_t extent = check_integer(L, arg, function);
      if (extent < 0 && !(allow_inferred && extent == -1)) {
        fail("{}: negative size {}", function, extent);
      }
      shape.push_back(extent);
    }
  }
  if (!allow_inferred) checked_numel(shape, function);
  return shape;
}

// The message format of every options check, stdlib/options.lua's too:
// "conv2d: unknown option 'strde' (options: padding, stride)", the known
// names sorted.
void check_option_keys(lua_State* L, int arg, const char* function,
                       std::initializer_list<const char*> known) {
  arg = lua_absindex(L, arg);
  lua_pushnil(L);
  while (lua_next(L, arg) != 0) {
    lua_pop(L, 1);  // the value; the key stays for lua_next
    const char* key = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : nullptr;
    bool found = false;
    for (const char* name : known) found = found || (key && std::strcmp(key, name) == 0);
    if (!found) {
      std::vector<std::string> sorted(known.begin(), known.end());
      std::sort(sorted.begin(), sorted.end());
      std::string names;
      for (const std::string& name : sorted) names += (names.empty() ? "" : ", ") + name;
      if (!key) {
        // {1, 3}: a list where named options go (a list of dims, say).
        const std::string type = luaL_typename(L, -1);
        lua_pop(L, 1);
        argument_error(arg, function,
                       "expected an options table (" + names + "), got a table with a " + type +
                           " key (a list is not accepted here)");
      }
      const std::string shown = key;
      lua_pop(L, 1);
      fail("{}: unknown option '{}' (options: {})", function, shown, names);
    }
  }
}

std::optional<DType> options_dtype(lua_State* L, int arg, const char* function) {
  if (lua_isnoneornil(L, arg)) return std::nullopt;
  // a dtype given bare (linspace(0, 1, 5, "f64")) is refused, not ignored
  if (lua_type(L, arg) != LUA_TTABLE) type_error(L, arg, function, "options table");
  if (!is_options_table(L, arg)) return std::nullopt;
  check_option_keys(L, arg, function, {"dtype"});
  lua_safe::read_field(L, arg, "dtype");
  const int type = lua_type(L, -1);
  const char* name = type == LUA_TSTRING ? lua_tostring(L, -1) : nullptr;
  std::string copy = name ? name : "";
  lua_pop(L, 1);
  if (type == LUA_TNIL) return std::nullopt;
  if (!name) argument_error(arg, function, "dtype must be a string such as \"f32\"");
  return parse_dtype(copy);
}

Tensor tensor_or_scalar(lua_State* L, int arg, const char* function, DType other) {
  if (to_tensor(L, arg)) return check_tensor(L, arg, function);
  const ops::Scalar value = check_scalar(L, arg, function);
  return scalar_tensor(tensor_context(L), value, promote_with_scalar(other, value.is_integer));
}

void push_element(lua_State* L, const Array& a, const int64_t* index) {
  int64_t offset = 0;
  for (int d = 0; d < a.rank(); d++) offset += index[d] * a.strides[d];
  switch (a.dtype) {
    case DType::boolean:
      lua_pushboolean(L, a.data<bool>()[offset]);
      break;
    case DType::i32:
      lua_pushinteger(L, a.data<int32_t>()[offset]);
      break;
    case DType::i64:
      lua_pushinteger(L, a.data<int64_t>()[offset]);
      break;
    case DType::f32:
      lua_pushnumber(L, a.data<float>()[offset]);
      break;
    case DType::f64:
      lua_pushnumber(L, a.data<double>()[offset]);
      break;
  }
}

std::vector<Tensor> tensor_list(lua_State* L, int index, const char* function, const char* what) {
  if (lua_type(L, index) != LUA_TTABLE) fail("{}: {} must be a list of tensors", function, what);
  std::vector<Tensor> list;
  const auto count = static_cast<lua_Integer>(lua_rawlen(L, index));
  for (lua_Integer i = 1; i <= count; i++) {
    lua_rawgeti(L, index, i);
    const Tensor* t = to_tensor(L, -1);
    lua_pop(L, 1);
    if (!t || !*t) fail("{}: {} item {} is not a tensor", function, what, i);
    list.push_back(*t);
  }
  return list;
}

void push_tensor_list(lua_State* L, const std::vector<Tensor>& list) {
  lua_safe::create_table(L, static_cast<int64_t>(list.size()), 0);
  for (size_t i = 0; i < list.size(); i++) {
    push_tensor(L, list[i]);
    lua_safe::set_index(L, -2, static_cast<lua_Integer>(i + 1));
  }
}

}  // namespace lazylua::binding
