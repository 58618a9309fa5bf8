// lua_tensor_sorting.cpp - sorting and statistics, as methods and functions
// of the tensor module (tensor/sorting.h):
//   t:sort([dim [, descending]])  t:argsort([dim [, descending]])  t:msort()
//   t:topk(k [, dim [, largest [, sorted]]])  t:kthvalue(k [, dim [, keepdim]])
//   t:median()  t:median(dim [, keepdim])
//   t:var([dim] [, keepdim | options])  t:std(...)  t:var_mean(...)  t:std_mean(...)
//     options: {correction = 1, unbiased = true, keepdim = false}
//   t:norm([p [, dim [, keepdim]]])   p: a number, math.huge, "inf", "-inf" or "fro"
//   t:logsumexp([dim [, keepdim]])  t:amax([dim [, keepdim]])  t:amin(...)
//   t:cumprod(dim)  t:cummax(dim)  t:cummin(dim)
// dim defaults to the last for the sorting functions (as PyTorch).
#include <cmath>
#include <cstring>
#include <limits>

#include "interp/lua_safe.h"
#include "interp/lua_tensor_internal.h"
#include "tensor/sorting.h"

namespace lazylua::binding {
namespace {

int rank_of(const Tensor& t) {
  return t->shape.rank();
}

int push_pair(lua_State* L, std::pair<Tensor, Tensor> results) {
  push_tensor(L, std::move(results.first));
  push_tensor(L, std::move(results.second));
  return 2;
}

int push_one(lua_State* L, Tensor result) {
  push_tensor(L, std::move(result));
  return 1;
}

// The dim at `arg` (1-based or negative; a 0-dim tensor has dim 1), the
// last one when absent.
int dim_or_last(lua_State* L, int arg, const Tensor& t, const char* function) {
  const int rank = std::max(rank_of(t), 1);
  return lua_isnoneornil(L, arg) ? rank - 1 : check_dim(L, arg, rank, function);
}

// As sum's dim: a 0-dim tensor has none.
std::optional<int> dim_or_all(lua_State* L, int arg, const Tensor& t, const char* function) {
  return optional_dim(L, arg, rank_of(t), function);
}

int sort(lua_State* L) {
  const Tensor& self = check_tensor(L, 1, "sort");
  const int dim = dim_or_last(L, 2, self, "sort");
  return push_pair(L, autograd::sort(self, dim, optional_boolean(L, 3, "sort", false)));
}

int argsort(lua_State* L) {
  const Tensor& self = check_tensor(L, 1, "argsort");
  const int dim = dim_or_last(L, 2, self, "argsort");
  return push_one(L, lazylua::argsort(self, dim, optional_boolean(L, 3, "argsort", false)));
}

int msort(lua_State* L) {
  return push_one(L, autograd::sort(check_tensor(L, 1, "msort"), 0, false).first);
}

int topk(lua_State* L) {
  const Tensor& self = check_tensor(L, 1, "topk");
  const int64_t k = check_integer(L, 2, "topk");
  const int dim = dim_or_last(L, 3, self, "topk");
  const bool largest = optional_boolean(L, 4, "topk", true);
  optional_boolean(L, 5, "topk", true);  // sorted: the values always are
  return push_pair(L, autograd::topk(self, k, dim, largest));
}

int kthvalue(lua_State* L) {
  const Tensor& self = check_tensor(L, 1, "kthvalue");
  const int64_t k = check_integer(L, 2, "kthvalue");
  const int dim = dim_or_last(L, 3, self, "kthvalue");
  return push_pair(L, autograd::kthvalue(self, k, dim, optional_boolean(L, 4, "kthvalue", false)));
}

int median(lua_State* L) {
  const Tensor& self = check_tensor(L, 1, "median");
  if (lua_isnoneornil(L, 2)) return push_one(L, autograd::median(self));
  const int dim = check_dim(L, 2, std::max(rank_of(self), 1), "median");
  return push_pair(L, autograd::median(self, dim, optional_boolean(L, 3, "median", false)));
}

// var/std arguments: ([dim] [, keepdim | {correction =, unbiased =, keepdim =}]), or
// just the options table.
struct SpreadArguments {
  std::optional<int> dim;
  double correction = 1;
  bool keepdim = false;
};

SpreadArguments spread_arguments(lua_State* L, const Tensor& self, const char* function) {
  SpreadArguments result;
  int options = 3;
  if (lua_type(L, 2) == LUA_TTABLE) {
    options = 2;
  } else {
    result.dim = dim_or_all(L, 2, self, function);
  }
  if (lua_type(L, options) == LUA_TBOOLEAN) {
    result.keepdim = lua_toboolean(L, options);
    return result;
  }
  if (lua_isnoneornil(L, options)) return result;
  if (lua_type(L, options) != LUA_TTABLE)
    type_error(L, options, function, "boolean or options table");
  check_option_keys(L, options, function, {"correction", "unbiased", "keepdim"});
  lua_safe::read_field(L, options, "correction");
  lua_safe::read_field(L, options, "unbiased");
  lua_safe::read_field(L, options, "keepdim");
  const int top = lua_gettop(L);
  const bool has_correction = !lua_isnil(L, top - 2), has_unbiased = !lua_isnil(L, top - 1);
  if (has_correction && has_unbiased) {
    fail("{}: give correction or unbiased, not both", function);
  }
  if (has_correction) {
    if (!is_number(L, top - 2)) fail("{}: correction must be a number", function);
    result.correction = lua_tonumber(L, top - 2);
  }
  if (has_unbiased) {
    if (lua_type(L, top - 1) != LUA_TBOOLEAN) fail("{}: unbiased must be a boolean", function);
    result.correction = lua_toboolean(L, top - 1) ? 1 : 0;
  }
  if (!lua_isnil(L, top)) {
    if (lua_type(L, top) != LUA_TBOOLEAN) fail("{}: keepdim must be a boolean", function);
    result.keepdim = lua_toboolean(L, top);
  }
  lua_pop(L, 3);
  return result;
}

template <bool is_std>
int spread(lua_State* L) {
  const char* function = is_std ? "std" : "var";
  const Tensor& self = check_tensor(L, 1, function);
  const SpreadArguments a = spread_arguments(L, self, function);
  return push_one(L, is_std ? autograd::standard_deviation(self, a.dim, a.correction, a.keepdim)
                            : autograd::var(self, a.dim, a.correction, a.keepdim));
}

// (var or std, mean), as torch.var_mean and std_mean.
template <bool is_std>
int spread_mean(lua_State* L) {
  const char* function = is_std ? "std_mean" : "var_mean";
  const Tensor& self = check_tensor(L, 1, function);
  const SpreadArguments a = spread_arguments(L, self, function);
  Tensor result = is_std ? autograd::standard_deviation(self, a.dim, a.correction, a.keepdim)
                         : autograd::var(self, a.dim, a.correction, a.keepdim);
  const Tensor x = is_floating(self->dtype) ? self : autograd::cast(self, kDefaultFloat);
  return push_pair(L, {std::move(result), autograd::reduce(ReduceOp::mean, x, a.dim, a.keepdim)});
}

double check_norm_order(lua_State* L, int arg) {
  if (lua_isnoneornil(L, arg)) return 2;
  if (is_number(L, arg)) {
    const double p = lua_tonumber(L, arg);
    if (std::isnan(p)) argument_error(arg, "norm", "p is NaN");
    return p;
  }
  if (lua_type(L, arg) == LUA_TSTRING) {
    const char* name = lua_tostring(L, arg);
    const double inf = std::numeric_limits<double>::infinity();
    if (std::strcmp(name, "fro") == 0) return 2;
    if (std::strcmp(name, "inf") == 0) return inf;
    if (std::strcmp(name, "-inf") == 0) return -inf;
    argument_error(arg, "norm",
                   fmt::format("unknown norm '{}' (a number, \"inf\", \"-inf\" or \"fro\")", name));
  }
  type_error(L, arg, "norm", "number or norm name");
}

int norm(lua_State* L) {
  const Tensor& self = check_tensor(L, 1, "norm");
  const double p = check_norm_order(L, 2);
  const std::optional<int> dim = dim_or_all(L, 3, self, "norm");
  return push_one(L, autograd::norm(self, p, dim, optional_boolean(L, 4, "norm", false)));
}

int logsumexp(lua_State* L) {
  const Tensor& self = check_tensor(L, 1, "logsumexp");
  const std::optional<int> dim = dim_or_all(L, 2, self, "logsumexp");
  return push_one(L, autograd::logsumexp(self, dim, optional_boolean(L, 3, "logsumexp", false)));
}

// Values only; the gradient is split evenly among ties (the max/min
// reduction's rule), as torch.amax.
template <bool is_max>
int amax_amin(lua_State* L) {
  const char* function = is_max ? "amax" : "amin";
  const Tensor& self = check_tensor(L, 1, function);
  const std::optional<int> dim = dim_or_all(L, 2, self, function);
  return push_one(L, autograd::reduce(is_max ? ReduceOp::max : ReduceOp::min, self, dim,
                                      optional_boolean(L, 3, function, false)));
}

template <bool is_max>
int cummax_cummin(lua_State* L) {
  const char* function = is_max ? "cummax" : "cummin";
  const Tensor& self = check_tensor(L, 1, function);
  return push_pair(L, autograd::cummax_cummin(
                          is_max, self, check_dim(L, 2, std::max(rank_of(self), 1), function)));
}

int cumprod(lua_State* L) {
  const Tensor& self = check_tensor(L, 1, "cumprod");
  return push_one(L,
                  autograd::cumprod(self, check_dim(L, 2, std::max(rank_of(self), 1), "cumprod")));
}

}  // namespace

void register_sorting_methods(lua_State* L) {
  static const luaL_Reg methods[] = {
      {"sort", guarded<sort>},
      {"argsort", guarded<argsort>},
      {"msort", guarded<msort>},
      {"topk", guarded<topk>},
      {"kthvalue", guarded<kthvalue>},
      {"median", guarded<median>},
      {"var", guarded<spread<false>>},
      {"std", guarded<spread<true>>},
      {"var_mean", guarded<spread_mean<false>>},
      {"std_mean", guarded<spread_mean<true>>},
      {"norm", guarded<norm>},
      {"logsumexp", guarded<logsumexp>},
      {"amax", guarded<amax_amin<true>>},
      {"amin", guarded<amax_amin<false>>},
      {"cumprod", guarded<cumprod>},
      {"cummax", guarded<cummax_cummin<true>>},
      {"cummin", guarded<cummax_cummin<false>>},
      {nullptr, nullptr},
  };
  luaL_setfuncs(L, methods, 0);
}

}  // namespace lazylua::binding
