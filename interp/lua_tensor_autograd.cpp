// lua_tensor_autograd.cpp - gradients from Lua: requires_grad, backward,
// grad, detach, no_grad (tensor/autograd.h), and scatter_add/index_add,
// the ops the gradients of gather and index_select are made of.
#include "interp/lua_tensor_internal.h"

namespace lazylua::binding {
namespace {

int push(lua_State* L, Tensor tensor) {
  push_tensor(L, std::move(tensor));
  return 1;
}

// t:requires_grad() -> boolean; t:requires_grad(flag) sets it and returns t.
int requires_grad(lua_State* L) {
  const Tensor& self = check_tensor(L, 1, "requires_grad");
  if (lua_isnone(L, 2)) {
    lua_pushboolean(L, self->requires_grad);
    return 1;
  }
  if (!lua_isboolean(L, 2)) type_error(L, 2, "requires_grad", "boolean");
  autograd::set_requires_grad(self, lua_toboolean(L, 2));
  lua_settop(L, 1);
  return 1;
}

int grad(lua_State* L) {
  const Tensor& self = check_tensor(L, 1, "grad");
  if (!self->grad) {
    lua_pushnil(L);
    return 1;
  }
  return push(L, self->grad);
}

// t:set_grad(g) or t:set_grad(nil) (what optimizers' zero_grad does).
int set_grad(lua_State* L) {
  const Tensor& self = check_tensor(L, 1, "set_grad");
  if (lua_isnoneornil(L, 2)) {
    self->grad = Tensor{};
    return 0;
  }
  const Tensor& value = check_tensor(L, 2, "set_grad");
  if (value->shape != self->shape || value->dtype != self->dtype) {
    fail("set_grad: the gradient must be {}{} like the tensor, got {}{}", dtype_name(self->dtype),
         shape_string(self->shape), dtype_name(value->dtype), shape_string(value->shape));
  }
  self->grad = value;
  return 0;
}

int is_leaf(lua_State* L) {
  lua_pushboolean(L, !check_tensor(L, 1, "is_leaf")->grad_fn);
  return 1;
}

int detach(lua_State* L) {
  return push(L, autograd::detach(check_tensor(L, 1, "detach")));
}

int backward(lua_State* L) {
  const Tensor& self = check_tensor(L, 1, "backward");
  std::optional<Tensor> gradient;
  if (!lua_isnoneornil(L, 2)) gradient = check_tensor(L, 2, "backward");
  autograd::backward(self, gradient);
  return 0;
}

// Backward hooks: Lua functions called with the tensor after each
// t:backward() (nn.DistributedDataParallel averages gradients in one). The
// list lives in the registry; the functions below are plain C, so a hook's
// error unwinds no C++ frame.
constexpr char kBackwardHooks[] = "lazylua.backward_hooks";

int backward_then_hooks(lua_State* L) {
  run_guarded(L, backward);
  if (lua_getfield(L, LUA_REGISTRYINDEX, kBackwardHooks) != LUA_TTABLE) return 0;
  const int hooks = lua_gettop(L);
  const lua_Integer count = luaL_len(L, hooks);
  // Later hooks run even if an earlier one removes itself: each is looked
  // up once, by position, in a snapshot taken first.
  lua_createtable(L, static_cast<int>(count), 0);
  for (lua_Integer i = 1; i <= count; i++) {
    lua_rawgeti(L, hooks, i);
    lua_rawseti(L, -2, i);
  }
  for (lua_Integer i = 1; i <= count; i++) {
    lua_rawgeti(L, hooks + 1, i);
    lua_pushvalue(L, 1);
    lua_call(L, 1, 0);
  }
  return 0;
}

// handle:remove() for the hook in upvalue 1.
int remove_backward_hook(lua_State* L) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, kBackwardHooks) != LUA_TTABLE) return 0;
  const lua_Integer count = luaL_len(L, -1);
  for (lua_Integer i = 1; i <= count; i++) {
    lua_rawgeti(L, -1, i);
    const bool found = lua_rawequal(L, -1, lua_upvalueindex(1));
    lua_pop(L, 1);
    if (!found) continue;
    for (lua_Integer k = i; k < count; k++) {
      lua_rawgeti(L, -1, k + 1);
      lua_rawseti(L, -2, k);
    }
    lua_pushnil(L);
    lua_rawseti(L, -2, count);
    break;
  }
  return 0;
}

// tensor.register_backward_hook(fn) -> handle with handle:remove()
int register_backward_hook(lua_State* L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  if (lua_getfield(L, LUA_REGISTRYINDEX, kBackwardHooks) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, kBackwardHooks);
  }
  lua_pushvalue(L, 1);
  lua_rawseti(L, -2, luaL_len(L, -2) + 1);
  lua_createtable(L, 0, 1);
  lua_pushvalue(L, 1);
  lua_pushcclosure(L, remove_backward_hook, 1);
  lua_setfield(L, -2, "remove");
  return 1;
}

int is_grad_enabled(lua_State* L) {
  lua_pushboolean(L, autograd::grad_enabled(tensor_context(L)));
  return 1;
}

int set_grad_enabled(lua_State* L) {
  if (!lua_isboolean(L, 1)) type_error(L, 1, "set_grad_enabled", "boolean");
  autograd::set_grad_enabled(tensor_context(L), lua_toboolean(L, 1));
  return 0;
}

template <bool enabled>
int call_with_grad_mode(lua_State* L) {
  // Plain Lua API only (no C++ objects live here), so the error of the
  // call can be raised again once grad mode is back as it was.
  Context* context = tensor_context(L);
  luaL_checktype(L, 1, LUA_TFUNCTION);
  const bool before = context->grad_enabled;
  context->grad_enabled = enabled;
  const int base = 1;
  const int status = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
  context->grad_enabled = before;
  if (status != LUA_OK) return lua_error(L);
  return lua_gettop(L) - base + 1;
}

int scatter_add(lua_State* L) {
  const Tensor& self = check_tensor(L, 1, "scatter_add");
  const int d = check_dim(L, 2, std::max(self->shape.rank(), 1), "scatter_add");
  return push(L, autograd::scatter_add(self, d, check_tensor(L, 3, "scatter_add"),
                                       check_tensor(L, 4, "scatter_add")));
}

// t:index_add(dim, index, src): src's slice k added to t's slice index[k].
int index_add(lua_State* L) {
  const Tensor& self = check_tensor(L, 1, "index_add");
  const int d = check_dim(L, 2, std::max(self->shape.rank(), 1), "index_add");
  const Tensor& index = check_tensor(L, 3, "index_add");
  const Tensor& src = check_tensor(L, 4, "index_add");
  if (index->shape.rank() != 1)
    fail("index_add: index must be 1-d, got {}", shape_string(index->shape));
  // src is the tensor's shape but for dim d (torch.index_add): a narrower
  // src would update only part of each slice.
  bool fits = src->shape.rank() == self->shape.rank() && src->shape[d] == index->shape[0];
  for (int k = 0; fits && k < src->shape.rank(); k++)
    fits = k == d || src->shape[k] == self->shape[k];
  if (!fits) {
    Shape want = self->shape;
    if (want.rank() > 0) want[d] = index->shape[0];
    fail("index_add: src must be {} (the tensor's shape with {} slices along dim {}), got {}",
         shape_string(want), index->shape[0], d + 1, shape_string(src->shape));
  }
  Shape along = Dims::filled(src->shape.rank(), 1);
  along[d] = index->shape[0];
  const Tensor spread = lazylua::expand(lazylua::reshape(index, along), src->shape);
  return push(L, autograd::scatter_add(self, d, spread, src));
}

}  // namespace

void register_autograd_methods(lua_State* L) {
  static const luaL_Reg methods[] = {
      {"requires_grad", guarded<requires_grad>},
      {"grad", guarded<grad>},
      {"set_grad", guarded<set_grad>},
      {"is_leaf", guarded<is_leaf>},
      {"detach", guarded<detach>},
      {"backward", backward_then_hooks},
      {"scatter_add", guarded<scatter_add>},
      {"index_add", guarded<index_add>},
      {nullptr, nullptr},
  };
  luaL_setfuncs(L, methods, 0);
}

void register_autograd_functions(lua_State* L) {
  static const luaL_Reg functions[] = {
      {"no_grad", call_with_grad_mode<false>},
      {"enable_grad", call_with_grad_mode<true>},
      {"is_grad_enabled", guarded<is_grad_enabled>},
      {"set_grad_enabled", guarded<set_grad_enabled>},
      {"register_backward_hook", register_backward_hook},
      {nullptr, nullptr},
  };
  luaL_setfuncs(L, functions, 0);
}

}  // namespace lazylua::binding
