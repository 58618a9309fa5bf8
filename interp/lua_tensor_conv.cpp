// lua_tensor_conv.cpp - convolutions and max_pool2d, as methods and
// functions of the tensor module (torch.nn.functional's):
//   tensor.conv1d/conv2d/conv3d(x, weight [, bias] [, {stride =, padding =,
//                               dilation =, groups =}])
//   tensor.conv_transpose1d/2d/3d(x, weight [, bias] [, {stride =, padding =,
//                                 output_padding =, dilation =, groups =}])
//   tensor.max_pool2d(x, kernel_size [, {stride = kernel_size, padding = 0}])
// A per-dim size is an integer or a list of one per spatial dim; a
// convolution's padding may also be a list of {before, after} pairs,
// "valid" or "same" (docs/tensor_api.md).
#include <string>

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

// One integer per spatial dim from the value on the stack top: an integer
// (every dim) or a list of `rank` integers.
void read_dims(lua_State* L, const char* function, const char* what, int rank, int64_t* out) {
  const int at = lua_gettop(L);
  if (lua_isnil(L, at)) return;
  if (lua_type(L, at) == LUA_TTABLE) {
    if (lua_rawlen(L, at) != static_cast<lua_Unsigned>(rank))
      fail("{}: {} must be an integer or a list of {} integers, got a list of {}", function, what,
           rank, lua_rawlen(L, at));
    for (int d = 0; d < rank; d++) {
      lua_safe::read_index(L, at, d + 1);
      out[d] = check_integer(L, lua_gettop(L), function);
      lua_pop(L, 1);
    }
    return;
  }
  int exact = 0;
  const lua_Integer value = lua_tointegerx(L, at, &exact);
  if (lua_type(L, at) != LUA_TNUMBER || !exact)
    fail("{}: {} must be an integer or a list of {} integers, got {}", function, what, rank,
         lua_type(L, at) == LUA_TNUMBER ? "a fraction" : luaL_typename(L, at));
  for (int d = 0; d < rank; d++) out[d] = value;
}

// padding from the value on the stack top: an integer, a list of one per
// dim, a list of {before, after} pairs, or (not transposed) "valid" or
// "same". "same" needs the kernel: the weight's extents.
void read_padding(lua_State* L, const char* function, bool transposed, const Tensor& weight,
                  ConvWindow* k) {
  const int at = lua_gettop(L);
  if (lua_type(L, at) == LUA_TSTRING) {
    const std::string mode = lua_tostring(L, at);
    if (transposed || (mode != "valid" && mode != "same"))
      fail("{}: padding must be an integer, a list{} , got \"{}\"", function,
           transposed ? " or a list of {before, after} pairs" : ", \"valid\" or \"same\"", mode);
    if (mode == "valid") return;
    for (int d = 0; d < k->rank; d++) {
      if (k->stride[d] != 1)
        fail("{}: padding \"same\" needs stride 1, got stride {}", function, k->stride[d]);
    }
    if (weight->shape.rank() != k->rank + 2) return;  // the op's check reports the weight
    for (int d = 0; d < k->rank; d++) {
      const int64_t total = k->dilation[d] * (weight->shape[2 + d] - 1);
      k->pad_before[d] = total / 2;  // the odd one after, as PyTorch
      k->pad_after[d] = total - k->pad_before[d];
    }
    return;
  }
  if (lua_type(L, at) == LUA_TTABLE && lua_rawlen(L, at) == static_cast<lua_Unsigned>(k->rank)) {
    lua_safe::read_index(L, at, 1);
    const bool pairs = lua_type(L, -1) == LUA_TTABLE;
    lua_pop(L, 1);
    if (pairs) {
      for (int d = 0; d < k->rank; d++) {
        lua_safe::read_index(L, at, d + 1);
        const int pair = lua_gettop(L);
        if (lua_type(L, pair) != LUA_TTABLE || lua_rawlen(L, pair) != 2)
          fail("{}: padding must be a list of {} pairs {{before, after}}", function, k->rank);
        lua_safe::read_index(L, pair, 1);
        k->pad_before[d] = check_integer(L, lua_gettop(L), function);
        lua_safe::read_index(L, pair, 2);
        k->pad_after[d] = check_integer(L, lua_gettop(L), function);
        lua_pop(L, 3);
      }
      return;
    }
  }
  read_dims(L, function, "padding", k->rank, k->pad_before);
  std::copy(k->pad_before, k->pad_before + k->rank, k->pad_after);
}

// The options of a convolution at `arg` (nil: none) into the window and,
// when transposed, output_padding.
void read_conv_options(lua_State* L, int arg, const char* function, bool transposed,
                       const Tensor& weight, ConvWindow* k, int64_t* output_padding) {
  if (lua_isnoneornil(L, arg)) return;
  if (lua_type(L, arg) != LUA_TTABLE) type_error(L, arg, function, "options table");
  if (transposed) {
    check_option_keys(L, arg, function,
                      {"stride", "padding", "output_padding", "dilation", "groups"});
  } else {
    check_option_keys(L, arg, function, {"stride", "padding", "dilation", "groups"});
  }
  lua_safe::read_field(L, arg, "stride");
  read_dims(L, function, "stride", k->rank, k->stride);
  lua_safe::read_field(L, arg, "dilation");
  read_dims(L, function, "dilation", k->rank, k->dilation);
  lua_safe::read_field(L, arg, "groups");
  if (!lua_isnil(L, -1)) k->groups = check_integer(L, lua_gettop(L), function);
  lua_safe::read_field(L, arg, "padding");
  if (!lua_isnil(L, -1)) read_padding(L, function, transposed, weight, k);
  lua_pop(L, 4);
  if (transposed) {
    lua_safe::read_field(L, arg, "output_padding");
    read_dims(L, function, "output_padding", k->rank, output_padding);
    lua_pop(L, 1);
  }
}

// tensor.conv{rank}d / conv_transpose{rank}d(x, weight [, bias] [, opts]).
template <int kRank, bool kTransposed>
int convolution(lua_State* L) {
  const char* function = ops::conv_name(kRank, kTransposed);
  const Tensor& x = check_tensor(L, 1, function);
  const Tensor& weight = check_tensor(L, 2, function);
  const Tensor* bias = nullptr;
  int options = 3;
  if (lua_type(L, 3) == LUA_TUSERDATA) {
    bias = &check_tensor(L, 3, function);
    options = 4;
  } else if (lua_isnil(L, 3) && !lua_isnone(L, 4)) {
    options = 4;
  } else if (!lua_isnoneornil(L, 3) && lua_type(L, 3) != LUA_TTABLE) {
    type_error(L, 3, function, "bias tensor or options table");
  }
  ConvWindow window;
  window.rank = kRank;
  int64_t output_padding[ConvWindow::kMaxRank] = {0, 0, 0};
  read_conv_options(L, options, function, kTransposed, weight, &window, output_padding);
  if constexpr (kTransposed) {
    push_tensor(L, autograd::conv_transpose(x, weight, bias, window, output_padding));
  } else {
    push_tensor(L, autograd::conv(x, weight, bias, window));
  }
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
      {"conv1d", guarded<convolution<1, false>>},
      {"conv2d", guarded<convolution<2, false>>},
      {"conv3d", guarded<convolution<3, false>>},
      {"conv_transpose1d", guarded<convolution<1, true>>},
      {"conv_transpose2d", guarded<convolution<2, true>>},
      {"conv_transpose3d", guarded<convolution<3, true>>},
      {"max_pool2d", guarded<max_pool2d>},
      {nullptr, nullptr},
  };
  luaL_setfuncs(L, methods, 0);
}

}  // namespace lazylua::binding
