// lua_tensor_methods.cpp - the Tensor methods (each also a function of the
// `tensor` module): elementwise ops, reductions, views, joins, in-place ops
// and observation.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "interp/lua_safe.h"
#include "interp/lua_tensor_internal.h"

namespace lazylua::binding {
namespace {

const Tensor& self_tensor(lua_State* L, const char* function) {
  return check_tensor(L, 1, function);
}

int rank_of(const Tensor& t) {
  return t->shape.rank();
}

int push(lua_State* L, Tensor tensor) {
  push_tensor(L, std::move(tensor));
  return 1;
}

int push_self(lua_State* L) {
  lua_settop(L, 1);
  return 1;
}

// ---- Elementwise ----

template <UnaryOp op>
int unary_method(lua_State* L) {
  return push(L, autograd::unary(op, self_tensor(L, unary_op_name(op))));
}

template <UnaryOp op>
int unary_inplace(lua_State* L) {
  const Tensor& self = self_tensor(L, unary_op_name(op));
  autograd::check_in_place(self, (std::string(unary_op_name(op)) + "_").c_str());
  lazylua::unary_(op, self);
  return push_self(L);
}

// Arithmetic on a boolean is an error, as in Lua (1 + true); comparisons
// and logical ops take booleans as 0/1 (t:eq(true) on a bool tensor).
template <BinaryOp op>
void check_not_boolean(lua_State* L, int arg) {
  if (!binary_is_comparison(op) && lua_type(L, arg) == LUA_TBOOLEAN) {
    type_error(L, arg, binary_op_name(op), "number or tensor");
  }
}

// Also the arithmetic metamethods, so either operand may be a number.
template <BinaryOp op>
int binary_method(lua_State* L) {
  const char* name = binary_op_name(op);
  check_not_boolean<op>(L, 1);
  check_not_boolean<op>(L, 2);
  const bool left_tensor = to_tensor(L, 1) != nullptr;
  const bool right_tensor = to_tensor(L, 2) != nullptr;
  if (left_tensor && right_tensor) {
    return push(L, autograd::binary(op, check_tensor(L, 1, name), check_tensor(L, 2, name)));
  }
  if (left_tensor)
    return push(L, autograd::binary(op, check_tensor(L, 1, name), check_scalar(L, 2, name)));
  if (right_tensor)
    return push(L, autograd::binary(op, check_scalar(L, 1, name), check_tensor(L, 2, name)));
  type_error(L, 1, name, "tensor");
}

template <BinaryOp op>
int binary_inplace(lua_State* L) {
  const char* name = binary_op_name(op);
  check_not_boolean<op>(L, 2);
  const Tensor& self = self_tensor(L, name);
  const std::string method = std::string(name) + "_";
  if (to_tensor(L, 2)) {
    autograd::check_in_place(self, method.c_str(), check_tensor(L, 2, name));
    lazylua::binary_(op, self, check_tensor(L, 2, name));
  } else {
    autograd::check_in_place(self, method.c_str());
    lazylua::binary_(op, self, check_scalar(L, 2, name));
  }
  return push_self(L);
}

std::optional<ops::Scalar> optional_bound(lua_State* L, int arg, const char* function) {
  if (lua_isnoneornil(L, arg)) return std::nullopt;
  if (!is_number(L, arg)) type_error(L, arg, function, "number");
  return check_scalar(L, arg, function);
}

int clamp(lua_State* L) {
  const Tensor& self = self_tensor(L, "clamp");
  return push(L,
              autograd::clamp(self, optional_bound(L, 2, "clamp"), optional_bound(L, 3, "clamp")));
}

int clamp_inplace(lua_State* L) {
  const Tensor& self = self_tensor(L, "clamp_");
  autograd::check_in_place(self, "clamp_");
  lazylua::clamp_(self, optional_bound(L, 2, "clamp_"), optional_bound(L, 3, "clamp_"));
  return push_self(L);
}

int fill_inplace(lua_State* L) {
  const Tensor& self = self_tensor(L, "fill_");
  autograd::check_in_place(self, "fill_");
  lazylua::fill_(self, check_scalar(L, 2, "fill_"));
  return push_self(L);
}

int zero_inplace(lua_State* L) {
  const Tensor& self = self_tensor(L, "zero_");
  autograd::check_in_place(self, "zero_");
  lazylua::fill_(self, ops::Scalar::from_integer(0));
  return push_self(L);
}

int copy_inplace(lua_State* L) {
  const Tensor& self = self_tensor(L, "copy_");
  const Tensor& source = check_tensor(L, 2, "copy_");
  autograd::check_in_place(self, "copy_", source);
  lazylua::copy_(self, source);
  return push_self(L);
}

// ---- Reductions ----

// A list of dims ({2, 3}, as torch's dim=(1, 2)): normalized, each once.
std::vector<int> check_dim_list(lua_State* L, int arg, int rank, const char* function) {
  std::vector<int> dims;
  const lua_Integer count = static_cast<lua_Integer>(lua_rawlen(L, arg));
  if (count == 0) argument_error(arg, function, "the list of dims is empty");
  for (lua_Integer i = 1; i <= count; i++) {
    lua_rawgeti(L, arg, i);
    if (!lua_isinteger(L, -1)) {
      argument_error(arg, function, fmt::format("dim {} of the list is not an integer", i));
    }
    const int dim = normalize_dim(lua_tointeger(L, -1), rank, function);
    lua_pop(L, 1);
    if (std::find(dims.begin(), dims.end(), dim) != dims.end()) {
      argument_error(arg, function, fmt::format("dim {} appears twice in the list", dim + 1));
    }
    dims.push_back(dim);
  }
  return dims;
}

// The reduction over several dims: one dim at a time, last first (kept, so
// the others stay in place), then the reduced dims dropped unless keepdim.
Tensor reduce_dims(ReduceOp op, const Tensor& self, std::vector<int> dims, bool keepdim) {
  std::sort(dims.begin(), dims.end(), std::greater<>());
  Tensor out = self;
  for (const int dim : dims) out = autograd::reduce(op, out, dim, true);
  if (keepdim) return out;
  Shape shape;
  for (int d = 0; d < out->shape.rank(); d++) {
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) shape.push_back(out->shape[d]);
  }
  return autograd::reshape(out, shape);
}

template <ReduceOp op>
int reduce_method(lua_State* L) {
  const char* name = reduce_op_name(op);
  const Tensor& self = self_tensor(L, name);
  if (lua_type(L, 2) == LUA_TTABLE) {
    return push(L, reduce_dims(op, self, check_dim_list(L, 2, rank_of(self), name),
                               optional_boolean(L, 3, name, false)));
  }
  const std::optional<int> dim = optional_dim(L, 2, rank_of(self), name);
  return push(L, autograd::reduce(op, self, dim, optional_boolean(L, 3, name, false)));
}

// max()/min(): everything; (dim [, keepdim]): values and indices; (tensor):
// the elementwise maximum/minimum.
template <bool is_max>
int max_min(lua_State* L) {
  const char* name = is_max ? "max" : "min";
  const Tensor& self = self_tensor(L, name);
  if (to_tensor(L, 2)) {
    const BinaryOp op = is_max ? BinaryOp::maximum : BinaryOp::minimum;
    return push(L, autograd::binary(op, self, check_tensor(L, 2, name)));
  }
  if (lua_isnoneornil(L, 2)) {
    return push(
        L, autograd::reduce(is_max ? ReduceOp::max : ReduceOp::min, self, std::nullopt, false));
  }
  const int dim = check_dim(L, 2, rank_of(self), name);
  auto [values, indices] =
      autograd::max_min_dim(is_max, self, dim, optional_boolean(L, 3, name, false));
  push_tensor(L, std::move(values));
  push_tensor(L, std::move(indices));
  return 2;
}

template <bool is_max>
int arg_max_min(lua_State* L) {
  const char* name = is_max ? "argmax" : "argmin";
  const Tensor& self = self_tensor(L, name);
  const std::optional<int> dim = optional_dim(L, 2, rank_of(self), name);
  return push(L, lazylua::arg_max_min(is_max, self, dim, optional_boolean(L, 3, name, false)));
}

template <bool log>
int softmax(lua_State* L) {
  const char* name = log ? "log_softmax" : "softmax";
  const Tensor& self = self_tensor(L, name);
  const int dim = lua_isnoneornil(L, 2) ? std::max(rank_of(self) - 1, 0)
                                        : check_dim(L, 2, std::max(rank_of(self), 1), name);
  return push(L, autograd::softmax(self, dim, log));
}

int cumsum(lua_State* L) {
  const Tensor& self = self_tensor(L, "cumsum");
  return push(L, autograd::cumsum(self, check_dim(L, 2, std::max(rank_of(self), 1), "cumsum")));
}

int matmul(lua_State* L) {
  return push(L, autograd::matmul(self_tensor(L, "matmul"), check_tensor(L, 2, "matmul")));
}

// ---- Properties and conversion ----

int size(lua_State* L) {
  const Tensor& self = self_tensor(L, "size");
  if (!lua_isnoneornil(L, 2)) {
    lua_pushinteger(L, self->shape[check_dim(L, 2, rank_of(self), "size")]);
    return 1;
  }
  push_size_table(L, self->shape);
  return 1;
}

int stride(lua_State* L) {
  const Tensor& self = self_tensor(L, "stride");
  if (!lua_isnoneornil(L, 2)) {
    lua_pushinteger(L, layout_of(self).strides[check_dim(L, 2, rank_of(self), "stride")]);
    return 1;
  }
  const Strides strides = layout_of(self).strides;
  lua_safe::create_table(L, rank_of(self), 0);
  for (int i = 0; i < rank_of(self); i++) {
    lua_pushinteger(L, strides[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

int dim(lua_State* L) {
  lua_pushinteger(L, rank_of(self_tensor(L, "dim")));
  return 1;
}

int numel(lua_State* L) {
  lua_pushinteger(L, numel(self_tensor(L, "numel")->shape));
  return 1;
}

int dtype(lua_State* L) {
  lua_safe::push_string(L, dtype_name(self_tensor(L, "dtype")->dtype));
  return 1;
}

int is_contiguous(lua_State* L) {
  lua_pushboolean(L, layout_of(self_tensor(L, "is_contiguous")).is_contiguous());
  return 1;
}

int to(lua_State* L) {
  const Tensor& self = self_tensor(L, "to");
  if (lua_type(L, 2) != LUA_TSTRING) type_error(L, 2, "to", "dtype name");
  return push(L, autograd::cast(self, parse_dtype(lua_tostring(L, 2))));
}

template <DType type>
int convert(lua_State* L) {
  return push(L, autograd::cast(self_tensor(L, dtype_name(type)), type));
}

int clone(lua_State* L) {
  return push(L, autograd::clone(self_tensor(L, "clone")));
}

int contiguous_method(lua_State* L) {
  return push(L, autograd::contiguous(self_tensor(L, "contiguous")));
}

int equal(lua_State* L) {
  lua_pushboolean(L, tensors_equal(self_tensor(L, "equal"), check_tensor(L, 2, "equal")));
  return 1;
}

int item(lua_State* L) {
  const Tensor& self = self_tensor(L, "item");
  if (numel(self->shape) != 1) {
    fail("item: a tensor of {} elements cannot be converted to a number (it needs exactly one)",
         numel(self->shape));
  }
  const int64_t zeros[kMaxDims] = {};
  push_element(L, observe(self, SyncCause::item), zeros);
  return 1;
}

void push_list(lua_State* L, const Array& a, int dim, int64_t* index) {
  if (dim == a.rank()) {
    push_element(L, a, index);
    return;
  }
  lua_safe::create_table(L, a.shape[dim], 0);
  for (int64_t i = 0; i < a.shape[dim]; i++) {
    index[dim] = i;
    push_list(L, a, dim + 1, index);
    lua_rawseti(L, -2, i + 1);
  }
}

int tolist(lua_State* L) {
  const Array data = observe(self_tensor(L, "tolist"), SyncCause::tolist);
  int64_t index[kMaxDims] = {};
  lua_safe::ensure_stack(L, data.rank() + 4, "tolist");
  push_list(L, data, 0, index);
  return 1;
}

// ---- Views ----

Shape sizes_after_self(lua_State* L, const char* function) {
  const int top = lua_gettop(L);
  if (top < 2) fail("{}: expected sizes", function);
  return check_sizes(L, 2, top, function, true);
}

int reshape(lua_State* L) {
  const Tensor& self = self_tensor(L, "reshape");
  return push(L, autograd::reshape(self, sizes_after_self(L, "reshape")));
}

int view(lua_State* L) {
  const Tensor& self = self_tensor(L, "view");
  return push(L, autograd::view(self, sizes_after_self(L, "view")));
}

int expand(lua_State* L) {
  const Tensor& self = self_tensor(L, "expand");
  return push(L, autograd::expand(self, sizes_after_self(L, "expand")));
}

int expand_as(lua_State* L) {
  const Tensor& self = self_tensor(L, "expand_as");
  return push(L, autograd::expand(self, check_tensor(L, 2, "expand_as")->shape));
}

int transpose(lua_State* L) {
  const Tensor& self = self_tensor(L, "transpose");
  const int rank = std::max(rank_of(self), 1);
  return push(L, autograd::transpose(self, check_dim(L, 2, rank, "transpose"),
                                     check_dim(L, 3, rank, "transpose")));
}

int t(lua_State* L) {
  const Tensor& self = self_tensor(L, "t");
  if (rank_of(self) > 2)
    fail("t: expects a tensor with at most 2 dimensions, got {}", rank_of(self));
  return push(L, rank_of(self) < 2 ? self : autograd::transpose(self, 0, 1));
}

// The dims of t:op(d1, d2, ...) or t:op({d1, d2, ...}) (Lua's 1-based dims),
// 0-based. Reading stops one past the most a tensor can have: enough for the
// op to say there are too many, without a loop over a huge table.
std::vector<int> dims_arguments(lua_State* L, const Tensor& self, const char* op) {
  std::vector<int> dims;
  if (lua_type(L, 2) == LUA_TTABLE) {
    const int count = static_cast<int>(lua_rawlen(L, 2));
    for (int i = 1; i <= count && i <= kMaxDims + 1; i++) {
      lua_rawgeti(L, 2, i);
      const int value = lua_isinteger(L, -1) ? static_cast<int>(lua_tointeger(L, -1)) : 0;
      lua_pop(L, 1);
      dims.push_back(normalize_dim(value, rank_of(self), op));
    }
  } else {
    for (int arg = 2; arg <= lua_gettop(L) && arg <= kMaxDims + 2; arg++) {
      dims.push_back(check_dim(L, arg, rank_of(self), op));
    }
  }
  return dims;
}

int permute(lua_State* L) {
  const Tensor& self = self_tensor(L, "permute");
  return push(L, autograd::permute(self, dims_arguments(L, self, "permute")));
}

// t:flip(dim, ...) or t:flip({dims}), as torch.flip.
int flip(lua_State* L) {
  const Tensor& self = self_tensor(L, "flip");
  return push(L, autograd::flip(self, dims_arguments(L, self, "flip")));
}

int narrow(lua_State* L) {
  const Tensor& self = self_tensor(L, "narrow");
  const int d = check_dim(L, 2, rank_of(self), "narrow");
  const int64_t start = check_integer(L, 3, "narrow");
  const int64_t length = check_integer(L, 4, "narrow");
  // start may be size + 1 for an empty slice at the end, as in PyTorch.
  const int64_t start0 = start < 0 ? start + self->shape[d] : start - 1;
  if (start == 0 || start0 < 0 || start0 > self->shape[d]) {
    fail("narrow: start {} out of range for size {} (indices start at 1)", start, self->shape[d]);
  }
  return push(L, autograd::narrow(self, d, start0, length));
}

int select(lua_State* L) {
  const Tensor& self = self_tensor(L, "select");
  const int d = check_dim(L, 2, rank_of(self), "select");
  const int64_t index = normalize_index(check_integer(L, 3, "select"), self->shape[d], "select");
  return push(L, autograd::select(self, d, index));
}

int squeeze(lua_State* L) {
  const Tensor& self = self_tensor(L, "squeeze");
  return push(L, autograd::squeeze(self, optional_dim(L, 2, rank_of(self), "squeeze")));
}

int unsqueeze(lua_State* L) {
  const Tensor& self = self_tensor(L, "unsqueeze");
  return push(L, autograd::unsqueeze(self, check_dim(L, 2, rank_of(self), "unsqueeze", 1)));
}

int flatten(lua_State* L) {
  const Tensor& self = self_tensor(L, "flatten");
  const int rank = std::max(rank_of(self), 1);
  const int start = lua_isnoneornil(L, 2) ? 0 : check_dim(L, 2, rank, "flatten");
  const int end = lua_isnoneornil(L, 3) ? rank - 1 : check_dim(L, 3, rank, "flatten");
  return push(L, autograd::flatten(self, start, end));
}

// ---- Indexing ----

int gather(lua_State* L) {
  const Tensor& self = self_tensor(L, "gather");
  const int d = check_dim(L, 2, rank_of(self), "gather");
  return push(L, autograd::gather(self, d, check_tensor(L, 3, "gather")));
}

int index_select(lua_State* L) {
  const Tensor& self = self_tensor(L, "index_select");
  const int d = check_dim(L, 2, rank_of(self), "index_select");
  return push(L, autograd::index_select(self, d, check_tensor(L, 3, "index_select")));
}

// The elementwise methods, from the op table (elementwise_ops.h): each op
// under its name, its alias if any, and `name_` where it has an in-place
// form.
void register_elementwise_methods(lua_State* L) {
  struct Entry {
    const char* name;
    const char* alias;
    bool in_place;
    lua_CFunction method;
    lua_CFunction in_place_method;
  };
  static const Entry entries[] = {
#define LAZYLUA_UNARY_ENTRY(name, dtypes, result, cost, fold, algebra, in_place)           \
  {#name, "", OpInPlace::in_place == OpInPlace::yes, guarded<unary_method<UnaryOp::name>>, \
   guarded<unary_inplace<UnaryOp::name>>},
      LAZYLUA_UNARY_OPS(LAZYLUA_UNARY_ENTRY)
#undef LAZYLUA_UNARY_ENTRY
#define LAZYLUA_BINARY_ENTRY(name, dtypes, result, cost, fold, in_place, int_errors, alias)     \
  {#name, alias, OpInPlace::in_place == OpInPlace::yes, guarded<binary_method<BinaryOp::name>>, \
   guarded<binary_inplace<BinaryOp::name>>},
          LAZYLUA_BINARY_OPS(LAZYLUA_BINARY_ENTRY)
#undef LAZYLUA_BINARY_ENTRY
  };
  for (const Entry& entry : entries) {
    lua_pushcfunction(L, entry.method);
    lua_setfield(L, -2, entry.name);
    if (entry.alias[0] != '\0') {
      lua_pushcfunction(L, entry.method);
      lua_setfield(L, -2, entry.alias);
    }
    if (entry.in_place) {
      lua_pushcfunction(L, entry.in_place_method);
      // A plain buffer: no destructor for a memory error to skip.
      char in_place_name[64];
      std::snprintf(in_place_name, sizeof in_place_name, "%s_", entry.name);
      lua_setfield(L, -2, in_place_name);
    }
  }
}

}  // namespace

void register_methods(lua_State* L) {
  register_elementwise_methods(L);
  register_masked_methods(L);
  register_math_extra_methods(L);
  static const luaL_Reg methods[] = {
      {"clamp", guarded<clamp>},
      {"clamp_", guarded<clamp_inplace>},
      {"fill_", guarded<fill_inplace>},
      {"zero_", guarded<zero_inplace>},
      {"copy_", guarded<copy_inplace>},
      {"sum", guarded<reduce_method<ReduceOp::sum>>},
      {"mean", guarded<reduce_method<ReduceOp::mean>>},
      {"prod", guarded<reduce_method<ReduceOp::prod>>},
      {"any", guarded<reduce_method<ReduceOp::any>>},
      {"all", guarded<reduce_method<ReduceOp::all>>},
      {"max", guarded<max_min<true>>},
      {"min", guarded<max_min<false>>},
      {"argmax", guarded<arg_max_min<true>>},
      {"argmin", guarded<arg_max_min<false>>},
      {"softmax", guarded<softmax<false>>},
      {"log_softmax", guarded<softmax<true>>},
      {"cumsum", guarded<cumsum>},
      {"matmul", guarded<matmul>},
      {"mm", guarded<matmul>},
      {"size", guarded<size>},
      {"stride", guarded<stride>},
      {"dim", guarded<dim>},
      {"numel", guarded<numel>},
      {"dtype", guarded<dtype>},
      {"is_contiguous", guarded<is_contiguous>},
      {"to", guarded<to>},
      {"float", guarded<convert<DType::f32>>},
      {"double", guarded<convert<DType::f64>>},
      {"int", guarded<convert<DType::i32>>},
      {"long", guarded<convert<DType::i64>>},
      {"bool", guarded<convert<DType::boolean>>},
      {"clone", guarded<clone>},
      {"contiguous", guarded<contiguous_method>},
      {"equal", guarded<equal>},
      {"item", guarded<item>},
      {"tolist", guarded<tolist>},
      {"reshape", guarded<reshape>},
      {"view", guarded<view>},
      {"expand", guarded<expand>},
      {"expand_as", guarded<expand_as>},
      {"transpose", guarded<transpose>},
      {"t", guarded<t>},
      {"permute", guarded<permute>},
      {"narrow", guarded<narrow>},
      {"select", guarded<select>},
      {"squeeze", guarded<squeeze>},
      {"unsqueeze", guarded<unsqueeze>},
      {"flatten", guarded<flatten>},
      {"gather", guarded<gather>},
      {"index_select", guarded<index_select>},
      {"flip", guarded<flip>},
      {nullptr, nullptr},
  };
  luaL_setfuncs(L, methods, 0);
  register_shape_methods(L);
  register_sorting_methods(L);
}

}  // namespace lazylua::binding
