// lua_tensor_shape.cpp - the functions of tensor/shape_ops.h as methods and
// functions of the tensor module: chunk, split, unbind, tril, triu, diag,
// diagonal, trace, outer, mv, bmm, addmm, baddbmm, addmv, einsum,
// roll, repeat, tile, pad, meshgrid and cross. Dims are Lua's (1-based,
// negative from the end); lists of tensors come back as Lua tables. There
// is no `dot`: tensor.dot is the Graphviz view of a graph (lua_tensor_lazy.cpp),
// and matmul of two vectors is their dot product.
#include <string>
#include <vector>

#include "interp/lua_safe.h"
#include "interp/lua_tensor_internal.h"
#include "tensor/shape_ops.h"

namespace lazylua::binding {
namespace {

int push(lua_State* L, Tensor tensor) {
  push_tensor(L, std::move(tensor));
  return 1;
}

int push_list(lua_State* L, const std::vector<Tensor>& tensors) {
  lua_safe::create_table(L, static_cast<int64_t>(tensors.size()), 0);
  for (size_t i = 0; i < tensors.size(); i++) {
    push_tensor(L, tensors[i]);
    lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  return 1;
}

int rank_of(const Tensor& t) {
  return t->shape.rank();
}

// The dim at `arg`, 1 (0-based 0) when absent.
int dim_or_first(lua_State* L, int arg, const Tensor& t, const char* function) {
  return lua_isnoneornil(L, arg) ? 0 : check_dim(L, arg, std::max(rank_of(t), 1), function);
}

// Integers given as one table at `first` or as the arguments first..last
// (negative values allowed: shifts, pads). At most `most` of them.
std::vector<int64_t> integer_list(lua_State* L, int first, int last, const char* function,
                                  size_t most) {
  std::vector<int64_t> values;
  if (lua_type(L, first) == LUA_TTABLE) {
    const size_t count = lua_rawlen(L, first);
    if (count > most) fail("{}: at most {} values, got {}", function, most, count);
    for (size_t i = 1; i <= count; i++) {
      lua_rawgeti(L, first, static_cast<lua_Integer>(i));
      const int top = lua_gettop(L);
      if (!is_number(L, top)) {
        lua_pop(L, 1);
        argument_error(first, function, fmt::format("element {} is not an integer", i));
      }
      values.push_back(check_integer(L, top, function));
      lua_pop(L, 1);
    }
    return values;
  }
  if (static_cast<size_t>(last - first + 1) > most) {
    fail("{}: at most {} values, got {}", function, most, last - first + 1);
  }
  for (int arg = first; arg <= last; arg++) values.push_back(check_integer(L, arg, function));
  return values;
}

// ---- Splitting ----

int chunk(lua_State* L) {
  const Tensor& self = check_tensor(L, 1, "chunk");
  if (rank_of(self) == 0) fail("chunk: a 0-dim tensor cannot be split");
  const int64_t chunks = check_integer(L, 2, "chunk");
  return push_list(L, shape_ops::chunk(self, chunks, dim_or_first(L, 3, self, "chunk")));
}

// t:split(size [, dim]) or t:split({sizes} [, dim]).
int split(lua_State* L) {
  const Tensor& self = check_tensor(L, 1, "split");
  if (rank_of(self) == 0) fail("split: a 0-dim tensor cannot be split");
  const int dim = dim_or_first(L, 3, self, "split");
  if (lua_type(L, 2) == LUA_TTABLE) {
    return push_list(L, shape_ops::split_sizes(self, integer_list(L, 2, 2, "split", 1 << 20), dim));
  }
  return push_list(L, shape_ops::split(self, check_integer(L, 2, "split"), dim));
}

int unbind(lua_State* L) {
  const Tensor& self = check_tensor(L, 1, "unbind");
  if (rank_of(self) == 0) fail("unbind: a 0-dim tensor has no dim to unbind");
  return push_list(L, shape_ops::unbind(self, dim_or_first(L, 2, self, "unbind")));
}

// ---- Triangles and diagonals ----

template <bool lower>
int triangle(lua_State* L) {
  const char* name = lower ? "tril" : "triu";
  const Tensor& self = check_tensor(L, 1, name);
  const int64_t k = optional_integer(L, 2, name).value_or(0);
  return push(L, lower ? shape_ops::tril(self, k) : shape_ops::triu(self, k));
}

int diag(lua_State* L) {
  const Tensor& self = check_tensor(L, 1, "diag");
  return push(L, shape_ops::diag(self, optional_integer(L, 2, "diag").value_or(0)));
}

// t:diagonal([offset [, dim1 [, dim2]]]), dims 1 and 2 by default.
int diagonal(lua_State* L) {
  const Tensor& self = check_tensor(L, 1, "diagonal");
  if (rank_of(self) < 2) {
    fail("diagonal: expects a tensor with at least 2 dimensions, got shape {}",
         shape_string(self->shape));
  }
  const int64_t offset = optional_integer(L, 2, "diagonal").value_or(0);
  const int d1 = lua_isnoneornil(L, 3) ? 0 : check_dim(L, 3, rank_of(self), "diagonal");
  const int d2 = lua_isnoneornil(L, 4) ? 1 : check_dim(L, 4, rank_of(self), "diagonal");
  return push(L, shape_ops::diagonal(self, offset, d1, d2));
}

int trace(lua_State* L) {
  return push(L, shape_ops::trace(check_tensor(L, 1, "trace")));
}

// ---- Products ----

template <Tensor (*product)(const Tensor&, const Tensor&)>
int two_tensors(lua_State* L, const char* name) {
  return push(L, product(check_tensor(L, 1, name), check_tensor(L, 2, name)));
}

int outer(lua_State* L) {
  return two_tensors<shape_ops::outer>(L, "outer");
}
int mv(lua_State* L) {
  return two_tensors<shape_ops::mv>(L, "mv");
}
int bmm(lua_State* L) {
  return two_tensors<shape_ops::bmm>(L, "bmm");
}

// beta and alpha from the options table at `arg` (both 1 when absent).
std::pair<ops::Scalar, ops::Scalar> beta_alpha(lua_State* L, int arg, const char* function) {
  std::pair<ops::Scalar, ops::Scalar> factors{ops::Scalar::from_integer(1),
                                              ops::Scalar::from_integer(1)};
  if (lua_isnoneornil(L, arg)) return factors;
  if (lua_type(L, arg) != LUA_TTABLE) type_error(L, arg, function, "options table");
  check_option_keys(L, arg, function, {"beta", "alpha"});
  const char* names[] = {"beta", "alpha"};
  ops::Scalar* slots[] = {&factors.first, &factors.second};
  for (int i = 0; i < 2; i++) {
    lua_safe::read_field(L, arg, names[i]);
    const int top = lua_gettop(L);
    if (!lua_isnil(L, top)) {
      if (!is_number(L, top)) {
        lua_pop(L, 1);
        fail("{}: option {} must be a number", function, names[i]);
      }
      *slots[i] = check_scalar(L, top, function);
    }
    lua_pop(L, 1);
  }
  return factors;
}

template <Tensor (*op)(const Tensor&, const Tensor&, const Tensor&, ops::Scalar, ops::Scalar)>
int add_product(lua_State* L, const char* name) {
  const Tensor& c = check_tensor(L, 1, name);
  const Tensor& a = check_tensor(L, 2, name);
  const Tensor& b = check_tensor(L, 3, name);
  const auto [beta, alpha] = beta_alpha(L, 4, name);
  return push(L, op(c, a, b, beta, alpha));
}

int addmm(lua_State* L) {
  return add_product<shape_ops::addmm>(L, "addmm");
}
int baddbmm(lua_State* L) {
  return add_product<shape_ops::baddbmm>(L, "baddbmm");
}
int addmv(lua_State* L) {
  return add_product<shape_ops::addmv>(L, "addmv");
}

// Tensors given as arguments first..top, or as one table at first.
std::vector<Tensor> tensor_arguments(lua_State* L, int first, int top, const char* function) {
  std::vector<Tensor> tensors;
  if (first == top && lua_type(L, first) == LUA_TTABLE) {
    const size_t count = lua_rawlen(L, first);
    for (size_t i = 1; i <= count; i++) {
      lua_rawgeti(L, first, static_cast<lua_Integer>(i));
      const Tensor* t = to_tensor(L, -1);
      if (!t || !*t) {
        lua_pop(L, 1);
        argument_error(first, function, fmt::format("element {} is not a tensor", i));
      }
      tensors.push_back(*t);
      lua_pop(L, 1);
    }
    return tensors;
  }
  for (int arg = first; arg <= top; arg++) tensors.push_back(check_tensor(L, arg, function));
  return tensors;
}

// tensor.einsum(equation, a, b, ...) or tensor.einsum(equation, {a, b, ...}).
int einsum(lua_State* L) {
  if (lua_type(L, 1) != LUA_TSTRING) type_error(L, 1, "einsum", "equation string");
  const std::string equation = lua_tostring(L, 1);
  return push(L, shape_ops::einsum(equation, tensor_arguments(L, 2, lua_gettop(L), "einsum")));
}

// ---- Rearrangements ----

// t:roll(shifts [, dims]): numbers or tables of numbers.
int roll(lua_State* L) {
  const Tensor& self = check_tensor(L, 1, "roll");
  const std::vector<int64_t> shifts = integer_list(L, 2, 2, "roll", kMaxDims);
  std::vector<int> dims;
  if (!lua_isnoneornil(L, 3)) {
    for (int64_t dim : integer_list(L, 3, 3, "roll", kMaxDims)) {
      dims.push_back(normalize_dim(dim, rank_of(self), "roll"));
    }
  }
  return push(L, shape_ops::roll(self, shifts, dims));
}

std::vector<int64_t> sizes_after_self(lua_State* L, const char* function) {
  const int top = lua_gettop(L);
  if (top < 2) fail("{}: expected sizes", function);
  return integer_list(L, 2, top, function, kMaxDims);
}

int repeat(lua_State* L) {
  const Tensor& self = check_tensor(L, 1, "repeat");
  return push(L, shape_ops::repeat(self, sizes_after_self(L, "repeat")));
}

int tile(lua_State* L) {
  const Tensor& self = check_tensor(L, 1, "tile");
  return push(L, shape_ops::tile(self, sizes_after_self(L, "tile")));
}

// tensor.pad(x, pads [, {mode = "constant", value = 0}]), as F.pad.
int pad(lua_State* L) {
  const Tensor& self = check_tensor(L, 1, "pad");
  if (lua_type(L, 2) != LUA_TTABLE) type_error(L, 2, "pad", "table of pads");
  const std::vector<int64_t> pads = integer_list(L, 2, 2, "pad", 2 * kMaxDims);
  shape_ops::PadMode mode = shape_ops::PadMode::constant;
  ops::Scalar value = ops::Scalar::from_integer(0);
  if (!lua_isnoneornil(L, 3)) {
    if (lua_type(L, 3) != LUA_TTABLE) type_error(L, 3, "pad", "options table");
    check_option_keys(L, 3, "pad", {"mode", "value"});
    lua_safe::read_field(L, 3, "mode");
    const std::string name = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "";
    const bool given = !lua_isnil(L, -1);
    lua_pop(L, 1);
    if (given) {
      if (name == "constant") {
        mode = shape_ops::PadMode::constant;
      } else if (name == "reflect") {
        mode = shape_ops::PadMode::reflect;
      } else if (name == "replicate") {
        mode = shape_ops::PadMode::replicate;
      } else if (name == "circular") {
        mode = shape_ops::PadMode::circular;
      } else {
        fail("pad: unknown mode '{}' (modes: constant, reflect, replicate, circular)", name);
      }
    }
    lua_safe::read_field(L, 3, "value");
    const int top = lua_gettop(L);
    if (!lua_isnil(L, top)) {
      if (!is_number(L, top) && lua_type(L, top) != LUA_TBOOLEAN) {
        lua_pop(L, 1);
        fail("pad: option value must be a number");
      }
      value = check_scalar(L, top, "pad");
      if (mode != shape_ops::PadMode::constant && value.value != 0) {
        lua_pop(L, 1);
        fail("pad: a value only goes with mode \"constant\"");
      }
    }
    lua_pop(L, 1);
  }
  return push(L, shape_ops::pad(self, pads, mode, value));
}

// tensor.meshgrid(a, b, ... [, {indexing = "ij"}]) or meshgrid({a, b, ...} [, options]).
int meshgrid(lua_State* L) {
  int top = lua_gettop(L);
  bool xy = false;
  if (top >= 2 && is_options_table(L, top)) {
    check_option_keys(L, top, "meshgrid", {"indexing"});
    lua_safe::read_field(L, top, "indexing");
    const std::string indexing = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "?";
    lua_pop(L, 1);
    if (indexing != "ij" && indexing != "xy") {
      fail("meshgrid: indexing must be \"ij\" or \"xy\", got {}", indexing);
    }
    xy = indexing == "xy";
    top--;
  }
  if (top < 1) fail("meshgrid: expects tensors");
  return push_list(L, shape_ops::meshgrid(tensor_arguments(L, 1, top, "meshgrid"), xy));
}

// tensor.cross(a, b [, dim]): dim -1 by default (torch.linalg.cross).
int cross(lua_State* L) {
  const Tensor& a = check_tensor(L, 1, "cross");
  const Tensor& b = check_tensor(L, 2, "cross");
  const int rank = std::max({rank_of(a), rank_of(b), 1});
  const int dim = lua_isnoneornil(L, 3) ? rank - 1 : check_dim(L, 3, rank, "cross");
  return push(L, shape_ops::cross(a, b, dim));
}

}  // namespace

void register_shape_methods(lua_State* L) {
  static const luaL_Reg methods[] = {
      {"chunk", guarded<chunk>},
      {"split", guarded<split>},
      {"unbind", guarded<unbind>},
      {"tril", guarded<triangle<true>>},
      {"triu", guarded<triangle<false>>},
      {"diag", guarded<diag>},
      {"diagonal", guarded<diagonal>},
      {"trace", guarded<trace>},
      {"outer", guarded<outer>},
      {"mv", guarded<mv>},
      {"bmm", guarded<bmm>},
      {"addmm", guarded<addmm>},
      {"baddbmm", guarded<baddbmm>},
      {"addmv", guarded<addmv>},
      {"einsum", guarded<einsum>},
      {"roll", guarded<roll>},
      {"repeat", guarded<repeat>},
      // `repeat` is a Lua keyword (t:repeat(2) does not parse): Torch7's
      // name for it, in this API's spelling.
      {"repeat_tensor", guarded<repeat>},
      {"tile", guarded<tile>},
      {"pad", guarded<pad>},
      {"meshgrid", guarded<meshgrid>},
      {"cross", guarded<cross>},
      {nullptr, nullptr},
  };
  luaL_setfuncs(L, methods, 0);
}

}  // namespace lazylua::binding
