// lua_tensor_conv.cpp - conv2d and max_pool2d, as methods and functions of
// the tensor module (torch.nn.functional's conv2d and max_pool2d):
//   tensor.conv2d(x, weight [, {stride = s, padding = p}])
//   tensor.max_pool2d(x, kernel_size [, {stride = kernel_size, padding = 0}])
// A size is an integer or a pair {height, width}.
#include "interp/lua_safe.h"
#include "interp/lua_tensor_internal.h"

namespace lazylua::binding {
namespace {

// The pair at `arg` (an integer, or a table of two), or `fallback` when nil.
std::pair<int64_t, int64_t> check_pair(lua_State* L, int arg, const char* function,
                                       const char* what, std::pair<int64_t, int64_t> fallback) {
  if (lua_isnoneornil(L, arg)) return fallback;
  if (lua_type(L, arg) == LUA_TTABLE) {
    if (lua_rawlen(L, arg) != 2)
      fail("{}: {} must be an integer or a pair {{height, width}}", function, what);
    lua_rawgeti(L, arg, 1);
    lua_rawgeti(L, arg, 2);
    const int top = lua_gettop(L);
    std::pair<int64_t, int64_t> value{check_integer(L, top - 1, function),
                                      check_integer(L, top, function)};
    lua_pop(L, 2);
    return value;
  }
  int exact = 0;
  const lua_Integer value = lua_tointegerx(L, arg, &exact);
  if (lua_type(L, arg) != LUA_TNUMBER || !exact)
    fail("{}: {} must be an integer or a pair {{height, width}}, got {}", function, what,
         lua_type(L, arg) == LUA_TNUMBER ? "a fraction" : luaL_typename(L, arg));
  return {value, value};
}

// stride and padding from the options table at `arg` (nil: none).
void read_options(lua_State* L, int arg, const char* function, Window2d* window) {
  if (lua_isnoneornil(L, arg)) return;
  if (lua_type(L, arg) != LUA_TTABLE) type_error(L, arg, function, "options table");
  check_option_keys(L, arg, function, {"stride", "padding"});
  lua_safe::read_field(L, arg, "stride");
  std::tie(window->sh, window->sw) =
      check_pair(L, lua_gettop(L), function, "stride", {window->sh, window->sw});
  lua_pop(L, 1);
  lua_safe::read_field(L, arg, "padding");
  std::tie(window->ph, window->pw) =
      check_pair(L, lua_gettop(L), function, "padding", {window->ph, window->pw});
  lua_pop(L, 1);
}

int conv2d(lua_State* L) {
  const char* function = "conv2d";
  const Tensor& x = check_tensor(L, 1, function);
  const Tensor& weight = check_tensor(L, 2, function);
  Window2d window;
  if (weight->shape.rank() == 4) {
    window.kh = weight->shape[2];
    window.kw = weight->shape[3];
  }
  read_options(L, 3, function, &window);
  push_tensor(L, autograd::conv2d(x, weight, window));
  return 1;
}

int max_pool2d(lua_State* L) {
  const char* function = "max_pool2d";
  const Tensor& x = check_tensor(L, 1, function);
  if (lua_isnoneornil(L, 2)) argument_error(2, function, "kernel size expected");
  Window2d window;
  std::tie(window.kh, window.kw) = check_pair(L, 2, function, "kernel size", {1, 1});
  window.sh = window.kh;
  window.sw = window.kw;
  read_options(L, 3, function, &window);
  push_tensor(L, autograd::max_pool2d(x, window));
  return 1;
}

}  // namespace

void register_conv_methods(lua_State* L) {
  static const luaL_Reg methods[] = {
      {"conv2d", guarded<conv2d>},
      {"max_pool2d", guarded<max_pool2d>},
      {nullptr, nullptr},
  };
  luaL_setfuncs(L, methods, 0);
}

}  // namespace lazylua::binding
