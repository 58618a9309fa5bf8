// lua_tensor.cpp - the Tensor userdata: argument checking, metamethods and
// the `tensor` module table.
#include "interp/lua_tensor.h"

#include <cstring>
#include <new>

#include "interp/lua_tensor_internal.h"
#include "interp/tensor_format.h"
#include "tensor/allocator.h"

namespace lazylua {
namespace {

// What a Tensor userdata holds. An undefined array means closed/collected.
struct TensorBox {
  Array array;
};

// Registry key of the metatable (the address is the key: no string lookup).
const char kMetatableKey = 0;

// Lua's collector does not see the memory tensor buffers hold, so it would
// let dead tensors pile up. After this many bytes of new results since the
// last collection we ask for one ourselves (Torch7 did the same).
constexpr int64_t kCollectEveryBytes = int64_t{256} << 20;
int64_t bytes_since_collection = 0;

TensorBox* to_box(lua_State* L, int index) {
  void* data = lua_touserdata(L, index);
  if (!data || !lua_getmetatable(L, index)) return nullptr;
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kMetatableKey);
  const bool is_tensor = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  return is_tensor ? static_cast<TensorBox*>(data) : nullptr;
}

int release(lua_State* L) {
  if (TensorBox* box = to_box(L, 1)) box->array = Array{};
  return 0;
}

// t[i] is select(1, i); t[{i, j}] selects along successive dims.
Array index_view(lua_State* L, const Array& base, int key, const char* function) {
  if (lua_type(L, key) == LUA_TTABLE) {
    Array view = base;
    const int64_t count = static_cast<int64_t>(lua_rawlen(L, key));
    if (count > base.rank()) {
      binding::argument_error(2, function, fmt::format("{} indices for a {}-d tensor", count,
                                                       base.rank()));
    }
    for (int64_t i = 1; i <= count; i++) {
      lua_rawgeti(L, key, i);
      const bool ok = lua_isinteger(L, -1);
      const int64_t index = ok ? lua_tointeger(L, -1) : 0;
      lua_pop(L, 1);
      if (!ok) binding::argument_error(2, function, "indices must be integers");
      view = ops::select(view, 0, normalize_index(index, view.shape[0], function));
    }
    return view;
  }
  if (base.rank() == 0) fail("{}: cannot index a 0-d tensor", function);
  const int64_t index = binding::check_integer(L, key, function);
  return ops::select(base, 0, normalize_index(index, base.shape[0], function));
}

int tensor_index(lua_State* L) {
  const int key_type = lua_type(L, 2);
  if (key_type == LUA_TSTRING) {
    lua_pushvalue(L, 2);
    lua_rawget(L, lua_upvalueindex(1));
    return 1;
  }
  if (key_type != LUA_TNUMBER && key_type != LUA_TTABLE) {
    lua_pushnil(L);
    return 1;
  }
  const Array& base = binding::check_tensor(L, 1, "index");
  push_tensor(L, index_view(L, base, 2, "index"));
  return 1;
}

int tensor_newindex(lua_State* L) {
  const Array& base = binding::check_tensor(L, 1, "newindex");
  const int key_type = lua_type(L, 2);
  if (key_type != LUA_TNUMBER && key_type != LUA_TTABLE) {
    fail("cannot set field '{}' of a tensor", lua_type(L, 2) == LUA_TSTRING
                                                  ? lua_tostring(L, 2)
                                                  : lua_typename(L, key_type));
  }
  const Array view = index_view(L, base, 2, "newindex");
  if (const Array* source = to_tensor(L, 3)) {
    if (!source->defined()) fail("newindex: attempt to use a closed tensor");
    // As in PyTorch, leading extents of 1 in the value do not count: t[i] = u
    // with u of shape [1, n] fills a row of shape [n].
    Array value = *source;
    while (value.rank() > view.rank() && value.shape[0] == 1) value = value.selected(0, 0);
    ops::copy_(view, value);
  } else {
    ops::fill_(view, binding::check_scalar(L, 3, "newindex"));
  }
  return 0;
}

int tensor_tostring(lua_State* L) {
  const Array& array = binding::check_tensor(L, 1, "tostring");
  const std::string text = format_tensor(array);
  lua_pushlstring(L, text.data(), text.size());
  return 1;
}

int tensor_len(lua_State* L) {
  const Array& array = binding::check_tensor(L, 1, "len");
  if (array.rank() == 0) fail("len: a 0-d tensor has no length");
  lua_pushinteger(L, array.shape[0]);
  return 1;
}

// a == b for two tensors: same shape and equal values (torch.equal).
int tensor_eq(lua_State* L) {
  const Array* a = to_tensor(L, 1);
  const Array* b = to_tensor(L, 2);
  if (!a || !b || !a->defined() || !b->defined()) {
    lua_pushboolean(L, false);
    return 1;
  }
  bool equal = a->shape == b->shape;
  if (equal) equal = all_nonzero(ops::binary(BinaryOp::eq, *a, *b));
  lua_pushboolean(L, equal);
  return 1;
}

// The value of a one-element tensor (or a number) taking part in a Lua
// comparison, as a double (integers beyond 2^53 compare approximately).
double comparison_operand(lua_State* L, int arg, const char* op) {
  if (binding::is_number(L, arg)) return lua_tonumber(L, arg);
  const Array& array = binding::check_tensor(L, arg, op);
  if (array.numel() != 1) {
    fail("{}: a tensor of {} elements has no single truth value; use the elementwise {} "
         "method instead",
         op, array.numel(), std::strcmp(op, "<") == 0 ? "lt" : "le");
  }
  const Array as_double = ops::cast(array, DType::f64);
  return *as_double.data<double>();
}

int tensor_lt(lua_State* L) {
  lua_pushboolean(L, comparison_operand(L, 1, "<") < comparison_operand(L, 2, "<"));
  return 1;
}

int tensor_le(lua_State* L) {
  lua_pushboolean(L, comparison_operand(L, 1, "<=") <= comparison_operand(L, 2, "<="));
  return 1;
}

}  // namespace

const Array* to_tensor(lua_State* L, int index) {
  TensorBox* box = to_box(L, index);
  return box ? &box->array : nullptr;
}

void push_tensor(lua_State* L, Array array) {
  const int64_t bytes = array.defined() ? static_cast<int64_t>(array.buffer->nbytes()) : 0;
  // The box is valid (empty) before anything else can fail.
  auto* box = new (lua_newuserdatauv(L, sizeof(TensorBox), 0)) TensorBox{};
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kMetatableKey);
  lua_setmetatable(L, -2);
  // Views share their base's buffer; only a fresh buffer counts as new memory.
  if (array.defined() && array.buffer->use_count() == 1) bytes_since_collection += bytes;
  box->array = std::move(array);
  if (bytes_since_collection > kCollectEveryBytes) {
    bytes_since_collection = 0;
    lua_gc(L, LUA_GCCOLLECT);
  }
}

int open_tensor_module(lua_State* L) {
  lua_newtable(L);  // the module
  const int module = lua_gettop(L);
  lua_newtable(L);  // the method table
  const int methods = lua_gettop(L);
  binding::register_methods(L);

  // Module functions: every method, plus the factories.
  lua_pushnil(L);
  while (lua_next(L, methods) != 0) {
    lua_pushvalue(L, -2);
    lua_insert(L, -2);
    lua_rawset(L, module);
  }
  lua_pushvalue(L, module);
  binding::register_factories(L);
  lua_pop(L, 1);

  luaL_newmetatable(L, kTensorMetatableName);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &kMetatableKey);
  const luaL_Reg metamethods[] = {
      {"__newindex", binding::guarded<tensor_newindex>},
      {"__tostring", binding::guarded<tensor_tostring>},
      {"__len", binding::guarded<tensor_len>},
      {"__eq", binding::guarded<tensor_eq>},
      {"__lt", binding::guarded<tensor_lt>},
      {"__le", binding::guarded<tensor_le>},
      {"__gc", release},
      {"__close", release},
      {nullptr, nullptr},
  };
  luaL_setfuncs(L, metamethods, 0);
  // Arithmetic metamethods are the methods of the same name.
  const char* arithmetic[][2] = {{"__add", "add"},      {"__sub", "sub"},
                                 {"__mul", "mul"},      {"__div", "div"},
                                 {"__mod", "remainder"}, {"__pow", "pow"},
                                 {"__idiv", "floor_divide"}, {"__unm", "neg"}};
  for (const auto& [metamethod, method] : arithmetic) {
    lua_getfield(L, methods, method);
    lua_setfield(L, -2, metamethod);
  }
  lua_pushvalue(L, methods);
  lua_pushcclosure(L, binding::guarded<tensor_index>, 1);
  lua_setfield(L, -2, "__index");
  lua_pushvalue(L, methods);
  lua_setfield(L, -2, "methods");  // for tab completion and introspection
  lua_pop(L, 2);                   // metatable, methods
  return 1;                        // the module
}

namespace binding {

int run_guarded(lua_State* L, Body body) {
  // A fixed buffer: nothing here needs a destructor when lua_error jumps.
  char message[1024];
  try {
    return body(L);
  } catch (const std::bad_alloc&) {
    std::snprintf(message, sizeof message, "not enough memory");
  } catch (const std::exception& error) {
    std::snprintf(message, sizeof message, "%s", error.what());
  }
  luaL_where(L, 1);
  lua_pushstring(L, message);
  lua_concat(L, 2);
  return lua_error(L);
}

}  // namespace binding
}  // namespace lazylua
