// lua_tensor_math_extra.cpp - the Lua side of tensor/tensor_math_extra.h:
// isclose, allclose, lerp, addcmul, addcdiv, clamp_min, clamp_max, xlogy,
// one_hot, and the random uniform_, normal_, bernoulli, bernoulli_ and
// multinomial. Each is a method and a function of the tensor module.
#include "interp/lua_safe.h"
#include "interp/lua_tensor_internal.h"
#include "tensor/tensor_math_extra.h"

namespace lazylua::binding {
namespace {

int push(lua_State* L, Tensor tensor) {
  push_tensor(L, std::move(tensor));
  return 1;
}

int push_self(lua_State* L) {
  lua_settop(L, 1);
  return 1;
}

// The options table at `arg` (nil or none: no options), checked against `known`.
bool has_options(lua_State* L, int arg, const char* function,
                 std::initializer_list<const char*> known) {
  if (lua_isnoneornil(L, arg)) return false;
  if (lua_type(L, arg) != LUA_TTABLE) type_error(L, arg, function, "options table");
  check_option_keys(L, arg, function, known);
  return true;
}

double number_option(lua_State* L, int arg, const char* key, double fallback,
                     const char* function) {
  lua_safe::read_field(L, arg, key);
  const bool absent = lua_isnil(L, -1);
  const bool number = is_number(L, -1);
  const double value = number ? lua_tonumber(L, -1) : fallback;
  lua_pop(L, 1);
  if (!absent && !number) argument_error(arg, function, std::string(key) + " must be a number");
  return value;
}

bool boolean_option(lua_State* L, int arg, const char* key, bool fallback, const char* function) {
  lua_safe::read_field(L, arg, key);
  const int type = lua_type(L, -1);
  const bool value = type == LUA_TBOOLEAN ? lua_toboolean(L, -1) : fallback;
  lua_pop(L, 1);
  if (type != LUA_TNIL && type != LUA_TBOOLEAN) {
    argument_error(arg, function, std::string(key) + " must be a boolean");
  }
  return value;
}

CloseTolerance close_options(lua_State* L, int arg, const char* function) {
  CloseTolerance tolerance;
  if (has_options(L, arg, function, {"rtol", "atol", "equal_nan"})) {
    tolerance.rtol = number_option(L, arg, "rtol", tolerance.rtol, function);
    tolerance.atol = number_option(L, arg, "atol", tolerance.atol, function);
    tolerance.equal_nan = boolean_option(L, arg, "equal_nan", tolerance.equal_nan, function);
  }
  return tolerance;
}

int isclose(lua_State* L) {
  const Tensor& a = check_tensor(L, 1, "isclose");
  const Tensor b = tensor_or_scalar(L, 2, "isclose", a->dtype);
  return push(L, lazylua::isclose(a, b, close_options(L, 3, "isclose")));
}

int allclose(lua_State* L) {
  const Tensor& a = check_tensor(L, 1, "allclose");
  const Tensor b = tensor_or_scalar(L, 2, "allclose", a->dtype);
  lua_pushboolean(L, lazylua::allclose(a, b, close_options(L, 3, "allclose")));
  return 1;
}

int lerp(lua_State* L) {
  const Tensor& a = check_tensor(L, 1, "lerp");
  const Tensor b = tensor_or_scalar(L, 2, "lerp", a->dtype);
  if (to_tensor(L, 3)) return push(L, lazylua::lerp(a, b, check_tensor(L, 3, "lerp")));
  return push(L, lazylua::lerp(a, b, check_double(L, 3, "lerp")));
}

ops::Scalar value_option(lua_State* L, int arg, const char* function) {
  if (!has_options(L, arg, function, {"value"})) return ops::Scalar::from_integer(1);
  lua_safe::read_field(L, arg, "value");
  const int top = lua_gettop(L);
  const ops::Scalar value =
      lua_isnil(L, top) ? ops::Scalar::from_integer(1) : check_scalar(L, top, function);
  lua_pop(L, 1);
  return value;
}

template <bool divide>
int addc(lua_State* L) {
  const char* name = divide ? "addcdiv" : "addcmul";
  const Tensor& t = check_tensor(L, 1, name);
  const Tensor& a = check_tensor(L, 2, name);
  const Tensor& b = check_tensor(L, 3, name);
  const ops::Scalar value = value_option(L, 4, name);
  return push(L, divide ? addcdiv(t, a, b, value) : addcmul(t, a, b, value));
}

// A number bound clamps (as clamp); a tensor bound is the elementwise
// maximum/minimum (broadcasting).
template <bool lower>
int clamp_bound(lua_State* L) {
  const char* name = lower ? "clamp_min" : "clamp_max";
  const Tensor& self = check_tensor(L, 1, name);
  if (to_tensor(L, 2)) {
    return push(L, autograd::binary(lower ? BinaryOp::maximum : BinaryOp::minimum, self,
                                    check_tensor(L, 2, name)));
  }
  if (!is_number(L, 2)) type_error(L, 2, name, "number or tensor");
  const ops::Scalar bound = check_scalar(L, 2, name);
  return push(L, lower ? autograd::clamp(self, bound, std::nullopt)
                       : autograd::clamp(self, std::nullopt, bound));
}

int xlogy(lua_State* L) {
  if (!to_tensor(L, 1)) {  // a number x: the tensor y sets the dtype
    const Tensor& y = check_tensor(L, 2, "xlogy");
    return push(L, lazylua::xlogy(tensor_or_scalar(L, 1, "xlogy", y->dtype), y));
  }
  const Tensor& x = check_tensor(L, 1, "xlogy");
  return push(L, lazylua::xlogy(x, tensor_or_scalar(L, 2, "xlogy", x->dtype)));
}

int one_hot(lua_State* L) {
  const Tensor& index = check_tensor(L, 1, "one_hot");
  return push(L, lazylua::one_hot(index, optional_integer(L, 2, "one_hot")));
}

int uniform_inplace(lua_State* L) {
  const Tensor& self = check_tensor(L, 1, "uniform_");
  const double low = lua_isnoneornil(L, 2) ? 0.0 : check_double(L, 2, "uniform_");
  const double high = lua_isnoneornil(L, 3) ? 1.0 : check_double(L, 3, "uniform_");
  autograd::check_in_place(self, "uniform_");
  uniform_(self, low, high);
  return push_self(L);
}

int normal_inplace(lua_State* L) {
  const Tensor& self = check_tensor(L, 1, "normal_");
  const double mean = lua_isnoneornil(L, 2) ? 0.0 : check_double(L, 2, "normal_");
  const double std = lua_isnoneornil(L, 3) ? 1.0 : check_double(L, 3, "normal_");
  autograd::check_in_place(self, "normal_");
  normal_(self, mean, std);
  return push_self(L);
}

int bernoulli(lua_State* L) {
  return push(L, lazylua::bernoulli(check_tensor(L, 1, "bernoulli")));
}

int bernoulli_inplace(lua_State* L) {
  const Tensor& self = check_tensor(L, 1, "bernoulli_");
  autograd::check_in_place(self, "bernoulli_");
  if (to_tensor(L, 2)) {
    bernoulli_(self, check_tensor(L, 2, "bernoulli_"));
  } else {
    bernoulli_(self, lua_isnoneornil(L, 2) ? 0.5 : check_double(L, 2, "bernoulli_"));
  }
  return push_self(L);
}

int multinomial(lua_State* L) {
  const Tensor& probs = check_tensor(L, 1, "multinomial");
  const int64_t n = check_integer(L, 2, "multinomial");
  bool replacement = false;
  if (has_options(L, 3, "multinomial", {"replacement"})) {
    replacement = boolean_option(L, 3, "replacement", false, "multinomial");
  }
  return push(L, lazylua::multinomial(probs, n, replacement));
}

}  // namespace

void register_math_extra_methods(lua_State* L) {
  static const luaL_Reg methods[] = {
      {"isclose", guarded<isclose>},
      {"allclose", guarded<allclose>},
      {"lerp", guarded<lerp>},
      {"addcmul", guarded<addc<false>>},
      {"addcdiv", guarded<addc<true>>},
      {"clamp_min", guarded<clamp_bound<true>>},
      {"clamp_max", guarded<clamp_bound<false>>},
      {"xlogy", guarded<xlogy>},
      {"one_hot", guarded<one_hot>},
      {"uniform_", guarded<uniform_inplace>},
      {"normal_", guarded<normal_inplace>},
      {"bernoulli", guarded<bernoulli>},
      {"bernoulli_", guarded<bernoulli_inplace>},
      {"multinomial", guarded<multinomial>},
      {nullptr, nullptr},
  };
  luaL_setfuncs(L, methods, 0);
}

}  // namespace lazylua::binding
