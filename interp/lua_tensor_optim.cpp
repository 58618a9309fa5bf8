// lua_tensor_optim.cpp - tensor._adam_step, the update optim.Adam and
// optim.AdamW record for each parameter. It records exactly the ops of the
// Lua formula (so eager and lazy mode, and earlier checkpoints' runs, give
// the same bits), but from C++: the thirteen ops of a parameter cost one
// Lua call instead of thirteen, with no userdata for the intermediates.
// That is about a twentieth of an MLP training step.
#include <cmath>

#include "interp/lua_tensor_internal.h"

namespace lazylua::binding {
namespace {

ops::Scalar number(double value) {
  return ops::Scalar::from_double(value);
}

// tensor._adam_step(p, g, exp_avg, exp_avg_sq, lr, beta1, beta2, eps,
//                   correction1, correction2):
//   exp_avg:mul_(beta1):add_(g * (1 - beta1))
//   exp_avg_sq:mul_(beta2):add_(g * g * (1 - beta2))
//   p:sub_(exp_avg / (exp_avg_sq:sqrt() * (1 / sqrt(correction2)) + eps) * (lr / correction1))
// Runs in no-grad mode (optim's step); p, exp_avg and exp_avg_sq change in place.
int adam_step(lua_State* L) {
  const char* function = "_adam_step";
  const Tensor& p = check_tensor(L, 1, function);
  const Tensor& g = check_tensor(L, 2, function);
  const Tensor& exp_avg = check_tensor(L, 3, function);
  const Tensor& exp_avg_sq = check_tensor(L, 4, function);
  const double lr = check_double(L, 5, function), beta1 = check_double(L, 6, function);
  const double beta2 = check_double(L, 7, function), eps = check_double(L, 8, function);
  const double correction1 = check_double(L, 9, function);
  const double correction2 = check_double(L, 10, function);
  for (const Tensor* t : {&p, &exp_avg, &exp_avg_sq}) autograd::check_in_place(*t, function);

  lazylua::binary_(BinaryOp::mul, exp_avg, number(beta1));
  lazylua::binary_(BinaryOp::add, exp_avg, lazylua::binary(BinaryOp::mul, g, number(1 - beta1)));
  lazylua::binary_(BinaryOp::mul, exp_avg_sq, number(beta2));
  const Tensor g_squared = lazylua::binary(BinaryOp::mul, g, g);
  lazylua::binary_(BinaryOp::add, exp_avg_sq,
                   lazylua::binary(BinaryOp::mul, g_squared, number(1 - beta2)));
  Tensor denominator = lazylua::unary(UnaryOp::sqrt, exp_avg_sq);
  denominator = lazylua::binary(BinaryOp::mul, denominator, number(1 / std::sqrt(correction2)));
  denominator = lazylua::binary(BinaryOp::add, denominator, number(eps));
  const Tensor step =
      lazylua::binary(BinaryOp::mul, lazylua::binary(BinaryOp::div, exp_avg, denominator),
                      number(lr / correction1));
  lazylua::binary_(BinaryOp::sub, p, step);
  return 0;
}

}  // namespace

void register_optim_functions(lua_State* L) {
  static const luaL_Reg functions[] = {
      {"_adam_step", guarded<adam_step>},
      {nullptr, nullptr},
  };
  luaL_setfuncs(L, functions, 0);
}

}  // namespace lazylua::binding
