// lua_tensor_factories.cpp - module-only functions of `tensor`: factories,
// tensors from Lua tables, random numbers, where/cat/stack.
#include <cmath>
#include <vector>

#include "interp/lua_safe.h"
#include "interp/lua_tensor_internal.h"
#include "tensor/kernels/random.h"
#include "tensor/scan.h"

namespace lazylua::binding {
namespace {

int push(lua_State* L, Array array) {
  push_tensor(L, std::move(array));
  return 1;
}

int push(lua_State* L, Tensor tensor) {
  push_tensor(L, std::move(tensor));
  return 1;
}

// Splits the arguments of a factory into sizes [1, last_size] and an
// optional trailing options table; returns the dtype asked for.
struct FactoryArgs {
  Shape shape;
  std::optional<DType> dtype;
};

FactoryArgs factory_args(lua_State* L, const char* function, int trailing_values = 0) {
  int top = lua_gettop(L);
  FactoryArgs args;
  if (top >= 1 && is_options_table(L, top)) {
    args.dtype = options_dtype(L, top, function);
    top--;
  }
  args.shape = check_sizes(L, 1, top - trailing_values, function);
  return args;
}

template <int fill_value>
int constant_factory(lua_State* L) {
  const char* name = fill_value == 0 ? "zeros" : "ones";
  const FactoryArgs args = factory_args(L, name);
  return push(L, ops::full(args.shape, ops::Scalar::from_integer(fill_value),
                           args.dtype.value_or(kDefaultFloat)));
}

int empty(lua_State* L) {
  const FactoryArgs args = factory_args(L, "empty");
  return push(L, Array::empty(args.shape, args.dtype.value_or(kDefaultFloat), "empty"));
}

// full(size..., value [, options]): the dtype follows the value unless given.
int full(lua_State* L) {
  int top = lua_gettop(L);
  if (top >= 1 && is_options_table(L, top)) top--;
  if (top < 2) fail("full: expected sizes and a value");
  const ops::Scalar value = check_scalar(L, top, "full");
  const FactoryArgs args = factory_args(L, "full", 1);
  DType fallback = value.is_integer ? DType::i64 : kDefaultFloat;
  if (lua_type(L, top) == LUA_TBOOLEAN) fallback = DType::boolean;
  return push(L, ops::full(args.shape, value, args.dtype.value_or(fallback)));
}

template <bool normal>
int random_factory(lua_State* L) {
  const char* name = normal ? "randn" : "rand";
  check_no_random_in_scan_body(tensor_context(L), name);
  const FactoryArgs args = factory_args(L, name);
  const DType type = args.dtype.value_or(kDefaultFloat);
  return push(L, normal ? ops::randn(args.shape, type) : ops::rand(args.shape, type));
}

int randint(lua_State* L) {
  check_no_random_in_scan_body(tensor_context(L), "randint");
  const int64_t low = check_integer(L, 1, "randint");
  const int64_t high = check_integer(L, 2, "randint");
  int top = lua_gettop(L);
  std::optional<DType> dtype;
  if (top >= 3 && is_options_table(L, top)) {
    dtype = options_dtype(L, top, "randint");
    top--;
  }
  const Shape shape = check_sizes(L, 3, top, "randint");
  return push(L, ops::randint(low, high, shape, dtype.value_or(DType::i64)));
}

int randperm(lua_State* L) {
  check_no_random_in_scan_body(tensor_context(L), "randperm");
  const int64_t n = check_integer(L, 1, "randperm");
  if (n < 0) fail("randperm: n must be non-negative, got {}", n);
  // randperm(n [, {dtype = ...}]): an options table is read, never ignored
  std::optional<DType> dtype;
  if (!lua_isnoneornil(L, 2)) {
    if (lua_type(L, 2) != LUA_TTABLE) type_error(L, 2, "randperm", "options table");
    check_option_keys(L, 2, "randperm", {"dtype"});
    dtype = options_dtype(L, 2, "randperm");
  }
  const Array order = ops::randperm(n);
  return push(L, dtype ? ops::cast(order, *dtype) : order);
}

int manual_seed(lua_State* L) {
  lazylua::manual_seed(static_cast<uint64_t>(check_integer(L, 1, "manual_seed")));
  return 0;
}

// tensor.get_rng_state(): {seed = s, position = p}, two integers (the
// unsigned values' bit patterns), a plain table that tensor.save keeps.
int get_rng_state(lua_State* L) {
  const GeneratorState state = generator_state();
  lua_safe::create_table(L, 0, 2);
  lua_pushinteger(L, static_cast<lua_Integer>(state.seed));
  lua_safe::set_field(L, -2, "seed");
  lua_pushinteger(L, static_cast<lua_Integer>(state.position));
  lua_safe::set_field(L, -2, "position");
  return 1;
}

// tensor.set_rng_state(state): the generator continues from a state that
// get_rng_state returned; every later draw repeats.
int set_rng_state(lua_State* L) {
  constexpr const char* expected =
      "set_rng_state: expected a table from tensor.get_rng_state() ({seed = integer, position = "
      "integer})";
  if (lua_type(L, 1) != LUA_TTABLE) fail("{}, got a {}", expected, luaL_typename(L, 1));
  uint64_t fields[2] = {0, 0};
  const char* names[2] = {"seed", "position"};
  for (int i = 0; i < 2; i++) {
    lua_safe::read_field(L, 1, names[i]);
    const bool integer = lua_isinteger(L, -1);
    const lua_Integer value = integer ? lua_tointeger(L, -1) : 0;
    const char* type = luaL_typename(L, -1);
    lua_pop(L, 1);
    if (!integer) fail("{}; its {} is a {}", expected, names[i], type);
    fields[i] = static_cast<uint64_t>(value);
  }
  set_generator_state({fields[0], fields[1]});
  return 0;
}

int arange(lua_State* L) {
  int top = lua_gettop(L);
  std::optional<DType> dtype;
  if (top >= 1 && is_options_table(L, top)) {
    dtype = options_dtype(L, top, "arange");
    top--;
  }
  if (top < 1 || top > 3) fail("arange: expected (stop), (start, stop) or (start, stop, step)");
  ops::Scalar start = ops::Scalar::from_integer(0), step = ops::Scalar::from_integer(1);
  ops::Scalar stop;
  if (top == 1) {
    stop = check_scalar(L, 1, "arange");
  } else {
    start = check_scalar(L, 1, "arange");
    stop = check_scalar(L, 2, "arange");
    if (top == 3) step = check_scalar(L, 3, "arange");
  }
  return push(L, ops::arange(start, stop, step, dtype));
}

int linspace(lua_State* L) {
  const double start = check_double(L, 1, "linspace");
  const double stop = check_double(L, 2, "linspace");
  const int64_t steps = check_integer(L, 3, "linspace");
  const std::optional<DType> dtype = options_dtype(L, 4, "linspace");
  return push(L, ops::linspace(start, stop, steps, dtype.value_or(kDefaultFloat)));
}

int eye(lua_State* L) {
  const int64_t rows = check_integer(L, 1, "eye");
  const int64_t cols = lua_isinteger(L, 2) || is_number(L, 2) ? check_integer(L, 2, "eye") : rows;
  const int options = lua_gettop(L);
  std::optional<DType> dtype =
      options >= 2 && !is_number(L, options) ? options_dtype(L, options, "eye") : std::nullopt;
  if (rows < 0 || cols < 0) fail("eye: sizes must be non-negative, got {} and {}", rows, cols);
  return push(L, ops::eye(rows, cols, dtype.value_or(kDefaultFloat)));
}

// tensor.new(nested tables [, options]): first finds the shape by walking
// the first elements, then checks every table against it while collecting
// the values.
class TableReader {
 public:
  TableReader(lua_State* L, const char* function) : L_(L), function_(function) {}

  // The values, as `dtype` or else as the type they suggest: all integers
  // i64, any float f32, booleans bool. Read through an exact staging array
  // (i64 or f64), so an f64 request gets every digit.
  Array read(int table, std::optional<DType> dtype) {
    find_shape(table);
    const int64_t count = checked_numel(shape_, function_);
    integers_.reserve(count);
    doubles_.reserve(count);
    collect(table, 0);
    DType inferred = DType::i64;
    if (saw_boolean_) inferred = DType::boolean;
    if (saw_float_) inferred = kDefaultFloat;
    Array staging = Array::empty(shape_, saw_float_ ? DType::f64 : DType::i64);
    if (saw_float_) {
      std::copy(doubles_.begin(), doubles_.end(), staging.data<double>());
    } else {
      std::copy(integers_.begin(), integers_.end(), staging.data<int64_t>());
    }
    return ops::cast(staging, dtype.value_or(inferred));
  }

 private:
  void find_shape(int table) {
    lua_pushvalue(L_, table);
    while (lua_type(L_, -1) == LUA_TTABLE) {
      shape_.push_back(static_cast<int64_t>(lua_rawlen(L_, -1)));
      if (shape_.back() == 0) break;
      lua_rawgeti(L_, -1, 1);
      lua_remove(L_, -2);
    }
    lua_pop(L_, 1);
  }

  void collect(int table, int dim) {
    const int64_t length = static_cast<int64_t>(lua_rawlen(L_, table));
    if (length != shape_[dim]) {
      fail("{}: ragged nested tables (a table of length {} where {} was expected at depth {})",
           function_, length, shape_[dim], dim + 1);
    }
    for (int64_t i = 1; i <= length; i++) {
      lua_rawgeti(L_, table, i);
      const int type = lua_type(L_, -1);
      if (dim + 1 < shape_.rank()) {
        if (type != LUA_TTABLE) {
          lua_pop(L_, 1);
          fail("{}: ragged nested tables (a {} where a table was expected at depth {})", function_,
               lua_typename(L_, type), dim + 2);
        }
        collect(lua_gettop(L_), dim + 1);
      } else {
        add_value(type);
      }
      lua_pop(L_, 1);
    }
  }

  void add_value(int type) {
    if (type == LUA_TNUMBER && lua_isinteger(L_, -1)) {
      integers_.push_back(lua_tointeger(L_, -1));
      doubles_.push_back(static_cast<double>(integers_.back()));
      saw_number_ = true;
    } else if (type == LUA_TNUMBER) {
      doubles_.push_back(lua_tonumber(L_, -1));
      integers_.push_back(0);
      saw_float_ = saw_number_ = true;
    } else if (type == LUA_TBOOLEAN) {
      integers_.push_back(lua_toboolean(L_, -1));
      doubles_.push_back(integers_.back());
      saw_boolean_ = true;
    } else {
      fail("{}: tables must hold numbers or booleans, found a {}", function_,
           lua_typename(L_, type));
    }
    if (saw_boolean_ && saw_number_) fail("{}: cannot mix booleans and numbers", function_);
  }

  lua_State* L_;
  const char* function_;
  Shape shape_;
  std::vector<int64_t> integers_;
  std::vector<double> doubles_;
  bool saw_float_ = false, saw_boolean_ = false, saw_number_ = false;
};

int new_tensor(lua_State* L) {
  const std::optional<DType> dtype = lua_gettop(L) >= 2 ? options_dtype(L, 2, "new") : std::nullopt;
  if (to_tensor(L, 1)) {
    const Tensor& input = check_tensor(L, 1, "new");
    const Tensor copy = autograd::clone(input);
    return push(L, dtype ? autograd::cast(copy, *dtype) : copy);
  }
  if (is_number(L, 1) || lua_type(L, 1) == LUA_TBOOLEAN) {
    const ops::Scalar value = check_scalar(L, 1, "new");
    DType fallback = value.is_integer ? DType::i64 : kDefaultFloat;
    if (lua_type(L, 1) == LUA_TBOOLEAN) fallback = DType::boolean;
    return push(L, ops::full(Shape{}, value, dtype.value_or(fallback)));
  }
  if (lua_type(L, 1) != LUA_TTABLE) type_error(L, 1, "new", "table, number or tensor");
  lua_safe::ensure_stack(L, kMaxDims + 4, "new");
  TableReader reader(L, "new");
  return push(L, reader.read(1, dtype));
}

int is_tensor(lua_State* L) {
  lua_pushboolean(L, to_tensor(L, 1) != nullptr);
  return 1;
}

int where(lua_State* L) {
  if (lua_gettop(L) == 1) return where_indices(L);  // lua_tensor_masked.cpp
  const Tensor& cond = check_tensor(L, 1, "where");
  const Tensor* a = to_tensor(L, 2);
  const Tensor* b = to_tensor(L, 3);
  if (!a && !b) {
    // Two numbers: the dtype follows them (i64 if both integers, else f32).
    const ops::Scalar x = check_scalar(L, 2, "where"), y = check_scalar(L, 3, "where");
    const DType type = x.is_integer && y.is_integer ? DType::i64 : kDefaultFloat;
    Context* context = tensor_context(L);
    return push(
        L, autograd::where(cond, scalar_tensor(context, x, type), scalar_tensor(context, y, type)));
  }
  const DType other = a ? check_tensor(L, 2, "where")->dtype : check_tensor(L, 3, "where")->dtype;
  return push(L, autograd::where(cond, tensor_or_scalar(L, 2, "where", other),
                                 tensor_or_scalar(L, 3, "where", other)));
}

std::vector<Tensor> tensor_list(lua_State* L, int arg, const char* function) {
  if (lua_type(L, arg) != LUA_TTABLE) type_error(L, arg, function, "table of tensors");
  std::vector<Tensor> list;
  const int64_t count = static_cast<int64_t>(lua_rawlen(L, arg));
  for (int64_t i = 1; i <= count; i++) {
    lua_rawgeti(L, arg, i);
    const Tensor* tensor = to_tensor(L, -1);
    lua_pop(L, 1);  // the table still holds it
    if (!tensor || !*tensor) {
      argument_error(arg, function, fmt::format("element {} is not a tensor", i));
    }
    list.push_back(*tensor);
  }
  return list;
}

template <bool stacking>
int join(lua_State* L) {
  const char* name = stacking ? "stack" : "cat";
  const std::vector<Tensor> list = tensor_list(L, 1, name);
  if (list.empty()) fail("{}: expected a non-empty list of tensors", name);
  const int rank = list[0]->shape.rank();
  const int dim = lua_isnoneornil(L, 2) ? 0 : check_dim(L, 2, rank, name, stacking ? 1 : 0);
  return push(L, stacking ? autograd::stack(list, dim) : autograd::cat(list, dim));
}

}  // namespace

void register_factories(lua_State* L) {
  static const luaL_Reg functions[] = {
      {"zeros", guarded<constant_factory<0>>},
      {"ones", guarded<constant_factory<1>>},
      {"empty", guarded<empty>},
      {"full", guarded<full>},
      {"rand", guarded<random_factory<false>>},
      {"randn", guarded<random_factory<true>>},
      {"randint", guarded<randint>},
      {"randperm", guarded<randperm>},
      {"manual_seed", guarded<manual_seed>},
      {"get_rng_state", guarded<get_rng_state>},
      {"set_rng_state", guarded<set_rng_state>},
      {"arange", guarded<arange>},
      {"linspace", guarded<linspace>},
      {"eye", guarded<eye>},
      {"new", guarded<new_tensor>},
      {"is_tensor", is_tensor},
      {"where", guarded<where>},
      {"cat", guarded<join<false>>},
      {"stack", guarded<join<true>>},
      {nullptr, nullptr},
  };
  luaL_setfuncs(L, functions, 0);
}

}  // namespace lazylua::binding
