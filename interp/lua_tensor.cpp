// lua_tensor.cpp - the Tensor userdata: argument checking, metamethods and
// the `tensor` module table.
#include "interp/lua_tensor.h"

#include "compiler/native_executor.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "interp/coroutines.h"
#include "interp/embedded_stdlib.h"
#include "interp/error_position.h"
#include "interp/lua_checkpoint.h"
#include "interp/lua_npy.h"
#include "interp/lua_safe.h"
#include "interp/lua_tensor_internal.h"
#include "interp/state_data.h"
#include "interp/tensor_format.h"
#include "tensor/allocator.h"

namespace lazylua {
namespace {

// What a Tensor userdata holds. A null tensor means closed.
struct TensorBox {
  Tensor tensor;
};

// Registry key of the metatable (the address is the key: no string lookup).
const char kMetatableKey = 0;

// Lua's collector sees a tensor as a userdata of a few bytes, not the
// megabytes of its buffer, so on its own it would let dead tensors pile up
// (a loop of tensor.ones(1e6) reached gigabytes). So we run full
// collections ourselves:
//  - when the tensor bytes in use have grown, since right after the last
//    full collection, by as much as were in use then (or by this floor):
//    tensor memory counts towards major collections the way Lua's heap does
//    (a full collection once it has doubled);
//  - after every kResultBytesBetweenFullCollections of new results pushed
//    to Lua (Torch7's rule), so that tensors that died old (the
//    generational collector's young collections skip them) do not linger
//    for long even when they are too few to show as growth.
// Young collections stay Lua's and the barrier's business (Context::run).
constexpr int64_t kMinTensorGrowthBetweenFullCollections = int64_t{32} << 20;
constexpr int64_t kResultBytesBetweenFullCollections = int64_t{256} << 20;

TensorBox* to_box(lua_State* L, int index) {
  void* data = lua_touserdata(L, index);
  if (!data || !lua_getmetatable(L, index)) return nullptr;
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kMetatableKey);
  const bool is_tensor = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  return is_tensor ? static_cast<TensorBox*>(data) : nullptr;
}

int release(lua_State* L) {
  if (TensorBox* box = to_box(L, 1)) box->tensor.reset();
  return 0;
}

// t[i] is select(1, i); t[{i, j}] selects along successive dims.
Tensor index_view(lua_State* L, const Tensor& base, int key, const char* function) {
  if (lua_type(L, key) == LUA_TTABLE) {
    Tensor view = base;
    const int64_t count = static_cast<int64_t>(lua_rawlen(L, key));
    if (count > base->shape.rank()) {
      binding::argument_error(
          2, function, fmt::format("{} indices for a {}-d tensor", count, base->shape.rank()));
    }
    for (int64_t i = 1; i <= count; i++) {
      lua_rawgeti(L, key, i);
      const bool ok = lua_isinteger(L, -1);
      const int64_t index = ok ? lua_tointeger(L, -1) : 0;
      lua_pop(L, 1);
      if (!ok) binding::argument_error(2, function, "indices must be integers");
      view = autograd::select(view, 0, normalize_index(index, view->shape[0], function));
    }
    return view;
  }
  if (base->shape.rank() == 0) fail("{}: cannot index a 0-d tensor", function);
  const int64_t index = binding::check_integer(L, key, function);
  return autograd::select(base, 0, normalize_index(index, base->shape[0], function));
}

// Hints for the fields that PyTorch and NumPy users reach for.
struct FieldHint {
  const char* field;
  const char* hint;
};
constexpr FieldHint kFieldHints[] = {
    {"shape", "use t:size() (a table of extents) or t:size(d)"},
    {"T", "use t:t() (2-D) or t:transpose(d1, d2)"},
    {"mT", "use t:transpose(-2, -1)"},
    {"ndim", "use t:dim()"},
    {"data", "use t:detach() (the values without gradient history)"},
    {"device", "lazylua tensors are in host memory (there is no device)"},
};

// The edit distance between a and b, a transposition of neighbours
// counting as one edit ("sahpe" is one edit from "shape").
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); i++) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); j++) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); i++) {
    for (size_t j = 1; j <= b.size(); j++) {
      const size_t change = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + change});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// t.NAME found no method: an error naming the field, with a hint when one
// fits (a PyTorch field, or the nearest method name). Only on this path do
// we look further than one table lookup.
[[noreturn]] void unknown_field(lua_State* L, int methods) {
  const std::string_view field = lua_tostring(L, 2);
  for (const FieldHint& entry : kFieldHints) {
    if (field == entry.field) fail("index: a tensor has no field '{}': {}", field, entry.hint);
  }
  // One or two letters are too short to guess from.
  const size_t allowed = field.size() <= 2 ? 0 : field.size() <= 4 ? 1 : 2;
  std::string best;
  size_t best_distance = allowed + 1;
  lua_pushnil(L);
  while (lua_next(L, methods) != 0) {
    lua_pop(L, 1);
    if (lua_type(L, -1) != LUA_TSTRING) continue;
    const std::string_view name = lua_tostring(L, -1);
    const size_t distance = edit_distance(field, name);
    if (distance < best_distance || (distance == best_distance && name < best)) {
      best_distance = distance;
      best = name;
    }
  }
  if (allowed > 0 && best_distance <= allowed) {
    fail("index: a tensor has no field or method '{}'; did you mean '{}'?", field, best);
  }
  fail("index: a tensor has no field or method '{}'", field);
}

// Lua's ipairs iterator (a C function of the base library), found once:
// ipairs(t) asks for t[n + 1] to find the end, and gets nil only from it.
std::atomic<lua_CFunction> ipairs_iterator{nullptr};

void find_ipairs_iterator(lua_State* L) {
  if (ipairs_iterator.load(std::memory_order_relaxed)) return;
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
  lua_getfield(L, -1, "ipairs");
  lua_remove(L, -2);
  lua_newtable(L);
  if (lua_pcall(L, 1, 1, 0) == LUA_OK && lua_iscfunction(L, -1)) {
    ipairs_iterator.store(lua_tocfunction(L, -1), std::memory_order_relaxed);
  }
  lua_pop(L, 1);
}

// Whether the running C function (an __index) was called by ipairs's iterator.
bool called_by_ipairs(lua_State* L) {
  const lua_CFunction iterator = ipairs_iterator.load(std::memory_order_relaxed);
  lua_Debug caller;
  if (!iterator || !lua_getstack(L, 1, &caller) || !lua_getinfo(L, "f", &caller)) return false;
  const bool result = lua_tocfunction(L, -1) == iterator;
  lua_pop(L, 1);
  return result;
}

// t.name: the method (one raw lookup); t[i], t[{i, j}]: a view; t[mask]:
// the selected elements. Anything else is an error: a misspelt method must
// not read as nil. Out-of-range indices are errors too (as PyTorch's
// IndexError), except t[#t + 1] asked by ipairs, which ends the loop.
int tensor_index(lua_State* L) {
  const int key_type = lua_type(L, 2);
  if (key_type == LUA_TSTRING) {
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1;
    unknown_field(L, lua_upvalueindex(1));
  }
  const Tensor& base = binding::check_tensor(L, 1, "index");
  if (key_type == LUA_TNUMBER) {
    if (lua_isinteger(L, 2) && base->shape.rank() > 0 &&
        lua_tointeger(L, 2) == base->shape[0] + 1 && called_by_ipairs(L)) {
      lua_pushnil(L);
      return 1;
    }
  } else if (to_tensor(L, 2)) {
    push_tensor(L, binding::mask_index(base, binding::check_tensor(L, 2, "index")));
    return 1;
  } else if (key_type != LUA_TTABLE) {
    fail("index: a tensor cannot be indexed with a {}", lua_typename(L, key_type));
  }
  push_tensor(L, index_view(L, base, 2, "index"));
  return 1;
}

// pairs(t) is ipairs(t): i, t[i] for i = 1 .. #t.
int tensor_pairs(lua_State* L) {
  binding::check_tensor(L, 1, "pairs");
  const lua_CFunction iterator = ipairs_iterator.load(std::memory_order_relaxed);
  if (!iterator) fail("pairs: ipairs is not available");
  lua_pushcfunction(L, iterator);
  lua_pushvalue(L, 1);
  lua_pushinteger(L, 0);
  return 3;
}

int tensor_newindex(lua_State* L) {
  const Tensor& base = binding::check_tensor(L, 1, "newindex");
  if (to_tensor(L, 2)) {
    binding::mask_assign(L, base, binding::check_tensor(L, 2, "newindex"), 3);
    return 0;
  }
  const int key_type = lua_type(L, 2);
  if (key_type != LUA_TNUMBER && key_type != LUA_TTABLE) {
    fail("cannot set field '{}' of a tensor",
         lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : lua_typename(L, key_type));
  }
  const Tensor view = index_view(L, base, 2, "newindex");
  if (to_tensor(L, 3)) {
    // As in PyTorch, leading extents of 1 in the value do not count: t[i] = u
    // with u of shape [1, n] fills a row of shape [n].
    Tensor value = binding::check_tensor(L, 3, "newindex");
    autograd::check_in_place(view, "newindex", value);
    while (value->shape.rank() > view->shape.rank() && value->shape[0] == 1) {
      value = select(value, 0, 0);
    }
    copy_(view, value);
  } else {
    autograd::check_in_place(view, "newindex");
    fill_(view, binding::check_scalar(L, 3, "newindex"));
  }
  return 0;
}

// The metatable of t:size() tables: they print as "{2, 3}" and compare by
// value, and stay plain tables otherwise (#, ipairs, table.unpack, writes).
const char kSizeMetatableKey = 0;

int size_tostring(lua_State* L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_Buffer buffer;
  luaL_buffinit(L, &buffer);
  luaL_addchar(&buffer, '{');
  const lua_Integer count = static_cast<lua_Integer>(lua_rawlen(L, 1));
  for (lua_Integer i = 1; i <= count; i++) {
    if (i > 1) luaL_addstring(&buffer, ", ");
    lua_rawgeti(L, 1, i);
    luaL_tolstring(L, -1, nullptr);
    lua_remove(L, -2);
    luaL_addvalue(&buffer);
  }
  luaL_addchar(&buffer, '}');
  luaL_pushresult(&buffer);
  return 1;
}

int size_eq(lua_State* L) {
  bool equal = lua_istable(L, 1) && lua_istable(L, 2) && lua_rawlen(L, 1) == lua_rawlen(L, 2);
  const lua_Integer count = equal ? static_cast<lua_Integer>(lua_rawlen(L, 1)) : 0;
  for (lua_Integer i = 1; equal && i <= count; i++) {
    lua_rawgeti(L, 1, i);
    lua_rawgeti(L, 2, i);
    equal = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
  }
  lua_pushboolean(L, equal);
  return 1;
}

void create_size_metatable(lua_State* L) {
  lua_createtable(L, 0, 2);
  lua_pushcfunction(L, size_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pushcfunction(L, size_eq);
  lua_setfield(L, -2, "__eq");
  lua_rawsetp(L, LUA_REGISTRYINDEX, &kSizeMetatableKey);
}

int tensor_tostring(lua_State* L) {
  const Tensor& tensor = binding::check_tensor(L, 1, "tostring");
  const std::string text = format_tensor(observe(tensor, SyncCause::print));
  lua_safe::push_string(L, text);
  return 1;
}

int tensor_len(lua_State* L) {
  const Tensor& tensor = binding::check_tensor(L, 1, "len");
  if (tensor->shape.rank() == 0) fail("len: a 0-d tensor has no length");
  lua_pushinteger(L, tensor->shape[0]);
  return 1;
}

// a == b for two tensors: same shape and equal values (torch.equal).
int tensor_eq(lua_State* L) {
  const Tensor* a = to_tensor(L, 1);
  const Tensor* b = to_tensor(L, 2);
  if (!a || !b || !*a || !*b) {
    lua_pushboolean(L, false);
    return 1;
  }
  lua_pushboolean(L, tensors_equal(*a, *b));
  return 1;
}

// The value of a one-element tensor (or a number) taking part in a Lua
// comparison: an exact integer when it is one, else a double.
ops::Scalar comparison_operand(lua_State* L, int arg, const char* op) {
  if (binding::is_number(L, arg)) return binding::check_scalar(L, arg, op);
  const Tensor& tensor = binding::check_tensor(L, arg, op);
  if (numel(tensor->shape) != 1) {
    fail(
        "{}: a tensor of {} elements has no single truth value; use the elementwise {} "
        "method instead",
        op, numel(tensor->shape), std::strcmp(op, "<") == 0 ? "lt" : "le");
  }
  const Array data = observe(tensor, SyncCause::comparison);
  if (!is_floating(data.dtype)) {
    return ops::Scalar::from_integer(ops::cast(data, DType::i64).data<int64_t>()[0]);
  }
  return ops::Scalar::from_double(ops::cast(data, DType::f64).data<double>()[0]);
}

// a < b (or a <= b), exact between integers.
bool less(const ops::Scalar& a, const ops::Scalar& b, bool or_equal) {
  if (a.is_integer && b.is_integer)
    return or_equal ? a.integer <= b.integer : a.integer < b.integer;
  return or_equal ? a.value <= b.value : a.value < b.value;
}

int tensor_lt(lua_State* L) {
  lua_pushboolean(L, less(comparison_operand(L, 1, "<"), comparison_operand(L, 2, "<"), false));
  return 1;
}

int tensor_le(lua_State* L) {
  lua_pushboolean(L, less(comparison_operand(L, 1, "<="), comparison_operand(L, 2, "<="), true));
  return 1;
}

// Where the running Lua code is. The chunk name is interned once per source
// string.
SourceLocation lua_location(void* user) {
  auto* L = static_cast<lua_State*>(user);
  lua_Debug info;
  if (!L || !nearest_user_frame(L, &info)) return {};
  Context* context = tensor_context(L);
  thread_local const char* last_source = nullptr;
  thread_local const char* last_chunk = nullptr;
  thread_local Context* last_context = nullptr;
  if (info.source != last_source || context != last_context) {
    last_source = info.source;
    last_context = context;
    last_chunk = context->intern(info.short_src);
    // "@path": a file (tensor.graph gives it in full: onnx_export.lua).
    if (info.source[0] == '@' && !is_stdlib_source(info.source)) {
      context->note_chunk_file(last_chunk, info.source + 1);
    }
  }
  return {last_chunk, info.currentline};
}

// Forcing a young collection (LUA_GCSTEP with 0) first zeroes the
// collector's debt, and the debt is what triggers its major collections: a
// loop with a barrier every step would never run one, and objects that grew
// old would pile up. So we do what Lua's default major multiplier (100%)
// would: a full collection once the heap has doubled since the last one.
void collect_lua_garbage(void* user, bool full) {
  auto* L = static_cast<lua_State*>(user);
  if (!L) return;
  Context* context = tensor_context(L);
  const int heap_kb = lua_gc(L, LUA_GCCOUNT);
  if (full || heap_kb > 2 * context->host_heap_after_full_kb) {
    lua_gc(L, LUA_GCCOLLECT);
    context->host_heap_after_full_kb = lua_gc(L, LUA_GCCOUNT);
    // Buffers freed by the collection went back to the allocator already.
    const int64_t live = allocator_bytes_in_use();
    context->tensor_bytes_full_collection_at =
        live + std::max(kMinTensorGrowthBetweenFullCollections, live);
    context->result_bytes_since_full = 0;
  } else {
    lua_gc(L, LUA_GCSTEP, 0);  // in generational mode: a young collection
  }
}

// At a safe point (a new tensor userdata, holding `result_bytes` of new
// memory, was just made): runs the full collection that the tensor memory
// makes due.
void account_tensor_memory(lua_State* L, int64_t result_bytes) {
  Context* context = tensor_context(L);
  if (!context) return;
  context->result_bytes_since_full += result_bytes;
  if (allocator_bytes_in_use() > context->tensor_bytes_full_collection_at ||
      context->result_bytes_since_full > kResultBytesBetweenFullCollections) {
    collect_lua_garbage(L, true);
  }
}

// The registry's reference to the context: released with the Lua state.
struct ContextHolder {
  Ref<Context> context;
};

// Registry key of the ContextHolder (the address is the key).
const char kContextKey = 0;

int release_context(lua_State* L) {
  auto* holder = static_cast<ContextHolder*>(lua_touserdata(L, 1));
  if (!holder || !holder->context) return 0;
  // Tensors a host still holds keep the context alive after the state is
  // gone: it must not call back into the state any more.
  Context* context = holder->context.get();
  context->location_provider = nullptr;
  context->location_user = nullptr;
  context->collect_garbage = nullptr;
  context->collect_garbage_user = nullptr;
  if (StateData* data = state_data(L); data && data->context == context) data->context = nullptr;
  holder->context.reset();
  return 0;
}

ContextHolder* context_holder(lua_State* L) {
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kContextKey);
  auto* holder = static_cast<ContextHolder*>(lua_touserdata(L, -1));
  lua_pop(L, 1);
  return holder;
}

// Makes this interpreter's tensor context, kept in the registry. States set
// up by open_lazylua also keep a pointer in their StateData (the fast path
// of tensor_context); the state's extra space is left alone, since a host
// that loads lazylua.so may use it for itself.
void create_context(lua_State* L) {
  auto* holder = new (lua_newuserdatauv(L, sizeof(ContextHolder), 0)) ContextHolder{};
  lua_newtable(L);
  lua_pushcfunction(L, release_context);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &kContextKey);
  holder->context = make_ref<Context>();
  Context* context = holder->context.get();
  context->location_provider = lua_location;
  context->location_user = L;
  context->collect_garbage = collect_lua_garbage;
  context->collect_garbage_user = L;
  context->tensor_bytes_full_collection_at =
      allocator_bytes_in_use() + kMinTensorGrowthBetweenFullCollections;
  // The compiler runs the graphs (docs/architecture.md §2: interp installs it).
  context->executor = compiler::make_native_executor(compiler::compile_mode_from_environment(),
                                                     context->debug_level);
  if (StateData* data = state_data(L)) data->context = context;
}

}  // namespace

const Tensor* to_tensor(lua_State* L, int index) {
  TensorBox* box = to_box(L, index);
  return box ? &box->tensor : nullptr;
}

void push_tensor(lua_State* L, Tensor tensor) {
  // Data views share their base's buffer; only a fresh buffer, or a pending
  // value's future one, counts as a new result.
  int64_t bytes = numel(tensor->shape) * dtype_size(tensor->dtype);
  if (tensor->is_lazy_view() || (tensor->data.defined() && tensor->data.buffer->use_count() > 1)) {
    bytes = 0;
  }
  // The box is valid (empty) before anything else can fail, and making it
  // throws rather than raises (lua_safe.h): `tensor` is released on failure.
  auto* box = new (lua_safe::new_userdata(L, sizeof(TensorBox))) TensorBox{};
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kMetatableKey);
  lua_setmetatable(L, -2);
  box->tensor = std::move(tensor);
  account_tensor_memory(L, bytes);
}

void push_tensor(lua_State* L, Array data) {
  push_tensor(L, make_tensor(tensor_context(L), std::move(data)));
}

Context* tensor_context(lua_State* L) {
  if (StateData* data = state_data(L); data && data->context) return data->context;
  ContextHolder* holder = context_holder(L);
  return holder ? holder->context.get() : nullptr;
}

bool has_tensor_context(lua_State* L) {
  ContextHolder* holder = context_holder(L);
  return holder && holder->context;
}

int open_tensor_module(lua_State* L) {
  create_context(L);
  // Young collections at barriers are what keep liveness cheap and
  // deterministic (see Context::run); they need the generational mode.
  lua_gc(L, LUA_GCGEN, 0, 0);
  lua_newtable(L);  // the module
  const int module = lua_gettop(L);
  lua_newtable(L);  // the method table
  const int methods = lua_gettop(L);
  binding::register_methods(L);
  binding::register_autograd_methods(L);
  binding::register_conv_methods(L);

  // Module functions: every method, plus the factories.
  lua_pushnil(L);
  while (lua_next(L, methods) != 0) {
    lua_pushvalue(L, -2);
    lua_insert(L, -2);
    lua_rawset(L, module);
  }
  lua_pushvalue(L, module);
  binding::register_factories(L);
  binding::register_lazy_functions(L);
  binding::register_profile_functions(L);
  binding::register_graph_functions(L);
  binding::register_autograd_functions(L);
  binding::register_scan_functions(L);
  binding::register_optim_functions(L);
  binding::register_checkpoint_functions(L);
  binding::register_npy_functions(L);
  lua_pop(L, 1);
  install_stdlib_searcher(L);  // require "nn", "data", ... (stdlib/, built in)

  create_size_metatable(L);
  find_ipairs_iterator(L);
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
      {"__pairs", binding::guarded<tensor_pairs>},
      {"__gc", release},
      {"__close", release},
      {nullptr, nullptr},
  };
  luaL_setfuncs(L, metamethods, 0);
  // Arithmetic metamethods are the methods of the same name.
  const char* arithmetic[][2] = {
      {"__add", "add"},       {"__sub", "sub"}, {"__mul", "mul"},           {"__div", "div"},
      {"__mod", "remainder"}, {"__pow", "pow"}, {"__idiv", "floor_divide"}, {"__unm", "neg"}};
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

void push_size_table(lua_State* L, const Shape& shape) {
  lua_safe::create_table(L, shape.rank(), 0);
  for (int i = 0; i < shape.rank(); i++) {
    lua_pushinteger(L, shape[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kSizeMetatableKey);
  lua_setmetatable(L, -2);
}

int run_guarded(lua_State* L, Body body) {
  // A fixed buffer: nothing here needs a destructor when lua_error jumps.
  char message[1024];
  // The context asks this state for source locations and collections.
  Context* context = tensor_context(L);
  context->location_user = L;
  context->collect_garbage_user = L;
  bool interrupted = false;
  try {
    return body(L);
  } catch (const Interrupted& error) {
    // A sync or kernel stopped for Ctrl-C / lazylua_interrupt: the same
    // "interrupted!" the hook raises, at the script's line.
    interrupted = true;
    std::snprintf(message, sizeof message, "%s", error.what());
  } catch (const std::bad_alloc&) {
    std::snprintf(message, sizeof message, "not enough memory");
  } catch (const std::exception& error) {
    std::snprintf(message, sizeof message, "%s", error.what());
  }
  if (interrupted) interrupt_delivered(L);
  // At the user's line, naming the Sequential layer an nn model failed in.
  push_positioned_message(L, message, !interrupted);
  return lua_error(L);
}

}  // namespace binding
}  // namespace lazylua
