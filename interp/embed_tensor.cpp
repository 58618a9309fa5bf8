// embed_tensor.cpp - the C API's tensors and values: host buffers in (copied
// or lent), tensors out (synced), and converting values between Lua and
// the host.
#include <cstdio>
#include <cstring>
#include <new>

#include "interp/coroutines.h"
#include "interp/embed_internal.h"
#include "interp/lua_tensor.h"
#include "tensor/eager_ops.h"

using lazylua::embed::CallScope;
using lazylua::embed::fail_with;

namespace lazylua::embed {
namespace {

lazylua_tensor* new_handle(lazylua_interpreter* interpreter, Tensor tensor, bool borrowed) {
  auto* handle = new (std::nothrow) lazylua_tensor;
  if (!handle) return nullptr;
  handle->tensor = std::move(tensor);
  handle->owner = interpreter;
  handle->borrowed = borrowed;
  if (!borrowed) {
    try {
      interpreter->tensors.insert(handle);
    } catch (...) {
      delete handle;
      return nullptr;
    }
  }
  return handle;
}

}  // namespace

bool to_value(lazylua_interpreter* interpreter, int index, lazylua_value* value, bool borrowed) {
  lua_State* L = interpreter->L;
  *value = lazylua_nil();
  switch (lua_type(L, index)) {
    case LUA_TNIL:
    case LUA_TNONE:
      return true;
    case LUA_TBOOLEAN:
      *value = lazylua_boolean(lua_toboolean(L, index));
      return true;
    case LUA_TNUMBER:
      *value = lua_isinteger(L, index) ? lazylua_integer(lua_tointeger(L, index))
                                       : lazylua_number(lua_tonumber(L, index));
      return true;
    case LUA_TSTRING:
      value->type = LAZYLUA_TYPE_STRING;
      value->as.string.data = lua_tolstring(L, index, &value->as.string.length);
      return true;
    default:
      break;
  }
  const Tensor* tensor = to_tensor(L, index);
  if (!tensor || !*tensor) {
    value->type = LAZYLUA_TYPE_OTHER;
    return true;
  }
  lazylua_tensor* handle = new_handle(interpreter, *tensor, borrowed);
  if (!handle) return false;
  *value = lazylua_tensor_value(handle);
  return true;
}

const char* check_value(const lazylua_interpreter* interpreter, const lazylua_value& value) {
  // A C host may store any int in the enum: read its bytes as an int (in
  // C++ loading an enum outside its range is undefined behaviour).
  int type;
  static_assert(sizeof type == sizeof value.type);
  std::memcpy(&type, &value.type, sizeof type);
  switch (type) {
    case LAZYLUA_TYPE_NIL:
    case LAZYLUA_TYPE_BOOLEAN:
    case LAZYLUA_TYPE_INTEGER:
    case LAZYLUA_TYPE_NUMBER:
      return nullptr;
    case LAZYLUA_TYPE_STRING:
      return value.as.string.data || value.as.string.length == 0 ? nullptr : "null string";
    case LAZYLUA_TYPE_TENSOR:
      if (!value.as.tensor || !value.as.tensor->tensor) return "null tensor";
      if (value.as.tensor->owner != interpreter) return "a tensor of another interpreter";
      return nullptr;
    default:  // LAZYLUA_TYPE_OTHER, or no type at all
      break;
  }
  return "a value of unknown type";
}

namespace {

// Pushes a tensor userdata; false (nothing pushed) on a memory error.
bool try_push_tensor(lua_State* L, const Tensor& tensor) {
  try {
    push_tensor(L, tensor);
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace

void push_value(lua_State* L, const lazylua_value& value) {
  switch (value.type) {
    case LAZYLUA_TYPE_BOOLEAN:
      lua_pushboolean(L, value.as.boolean);
      break;
    case LAZYLUA_TYPE_INTEGER:
      lua_pushinteger(L, static_cast<lua_Integer>(value.as.integer));
      break;
    case LAZYLUA_TYPE_NUMBER:
      lua_pushnumber(L, value.as.number);
      break;
    case LAZYLUA_TYPE_STRING:
      lua_pushlstring(L, value.as.string.data ? value.as.string.data : "", value.as.string.length);
      break;
    case LAZYLUA_TYPE_TENSOR:
      // push_tensor throws on a memory error (interp/lua_safe.h); this runs
      // as plain Lua API code, so the error is raised after the catch.
      if (!try_push_tensor(L, value.as.tensor->tensor)) {
        lua_pushliteral(L, "not enough memory");
        lua_error(L);
      }
      break;
    default:
      lua_pushnil(L);
  }
}

bool keep_string(lazylua_interpreter* interpreter, lazylua_value* value) {
  if (value->type != LAZYLUA_TYPE_STRING) return true;
  try {
    const std::string& kept =
        interpreter->result_strings.emplace_back(value->as.string.data, value->as.string.length);
    value->as.string.data = kept.c_str();
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace lazylua::embed

using namespace lazylua;

namespace {

bool to_dtype(lazylua_dtype host, DType* dtype) {
  switch (host) {
    case LAZYLUA_F32:
      *dtype = DType::f32;
      return true;
    case LAZYLUA_F64:
      *dtype = DType::f64;
      return true;
    case LAZYLUA_I32:
      *dtype = DType::i32;
      return true;
    case LAZYLUA_I64:
      *dtype = DType::i64;
      return true;
    case LAZYLUA_BOOL:
      *dtype = DType::boolean;
      return true;
  }
  return false;
}

lazylua_dtype to_host_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return LAZYLUA_F32;
    case DType::f64:
      return LAZYLUA_F64;
    case DType::i32:
      return LAZYLUA_I32;
    case DType::i64:
      return LAZYLUA_I64;
    case DType::boolean:
      return LAZYLUA_BOOL;
  }
  return LAZYLUA_F32;
}

// Validates a host array description; returns an error message or nullptr.
const char* check_array(lazylua_dtype host_dtype, const void* data, const int64_t* shape, int rank,
                        DType* dtype, Shape* dims) {
  if (!to_dtype(host_dtype, dtype)) return "unknown dtype";
  if (rank < 0 || rank > kMaxDims) return "rank must be between 0 and 8";
  if (rank > 0 && !shape) return "null shape";
  for (int i = 0; i < rank; i++) dims->push_back(shape[i]);
  try {
    if (checked_numel(*dims, "tensor") > 0 && !data) return "null data";
  } catch (const Error&) {
    return "bad shape (negative extent or too many elements)";
  }
  return nullptr;
}

// The tensor module's functions need the context's view of the running
// state; the API's own tensor work happens outside Lua, in protected mode
// anyway (a sync may run the collector), with C++ errors caught inside.
struct TensorWork {
  void (*work)(lua_State* L, void* data);
  void* data;
  char error[1024] = "";
  bool out_of_memory = false;
  bool interrupted = false;
};

int tensor_work_body(lua_State* L, void* raw) {
  auto* work = static_cast<TensorWork*>(raw);
  try {
    work->work(L, work->data);
  } catch (const Interrupted&) {
    work->interrupted = true;
  } catch (const std::bad_alloc&) {
    work->out_of_memory = true;
  } catch (const std::exception& error) {
    std::snprintf(work->error, sizeof work->error, "%s", error.what());
  }
  return 0;
}

lazylua_status run_tensor_work(lazylua_interpreter* interpreter, CallScope& scope,
                               TensorWork& work) {
  Context* context = tensor_context(interpreter->L);
  context->location_user = interpreter->L;
  context->collect_garbage_user = interpreter->L;
  const lazylua_status status =
      scope.finish(embed::protected_call(interpreter->L, tensor_work_body, &work, 0));
  if (status != LAZYLUA_OK) return status;
  if (work.interrupted) {
    interrupt_delivered(interpreter->L);
    return fail_with(interpreter, LAZYLUA_ERROR_INTERRUPTED, "interrupted!");
  }
  if (work.out_of_memory) return fail_with(interpreter, LAZYLUA_ERROR_MEMORY, "not enough memory");
  if (work.error[0]) {
    // A refused charge means the memory limit, whatever the message.
    return fail_with(interpreter,
                     scope.memory_refused() ? LAZYLUA_ERROR_MEMORY : LAZYLUA_ERROR_RUNTIME,
                     work.error);
  }
  return LAZYLUA_OK;
}

struct MakeTensor {
  lazylua_interpreter* interpreter = nullptr;
  Array array{};
  const void* copy_from = nullptr;
  Shape shape{};
  DType dtype = DType::f32;
  Tensor result{};
};

void make_tensor_work(lua_State* L, void* raw) {
  auto* make = static_cast<MakeTensor*>(raw);
  if (!make->array.defined()) {
    make->array = Array::empty(make->shape, make->dtype, "tensor_from_buffer");
    std::memcpy(make->array.raw_data(), make->copy_from,
                static_cast<size_t>(make->array.numel()) * dtype_size(make->dtype));
  }
  make->result = make_tensor(tensor_context(L), make->array);
}

lazylua_status finish_tensor(lazylua_interpreter* interpreter, MakeTensor& make,
                             lazylua_tensor** tensor) {
  CallScope scope(interpreter);
  TensorWork work{make_tensor_work, &make};
  const lazylua_status status = run_tensor_work(interpreter, scope, work);
  if (status != LAZYLUA_OK) return status;
  lazylua_tensor* handle = embed::new_handle(interpreter, std::move(make.result), false);
  if (!handle) return fail_with(interpreter, LAZYLUA_ERROR_MEMORY, "not enough memory");
  *tensor = handle;
  return LAZYLUA_OK;
}

struct ReadTensor {
  Tensor tensor;
  DType dtype;
  void* out;
  size_t out_bytes;
};

void read_tensor_work(lua_State* /*L*/, void* raw) {
  auto* read = static_cast<ReadTensor*>(raw);
  const Array values =
      contiguous(ops::cast(observe(read->tensor, SyncCause::host_read), read->dtype));
  const size_t bytes = static_cast<size_t>(values.numel()) * dtype_size(read->dtype);
  if (bytes > read->out_bytes) {
    fail("tensor_read: the tensor needs {} bytes, the buffer has {}", bytes, read->out_bytes);
  }
  if (bytes > 0) std::memcpy(read->out, values.raw_data(), bytes);
}

}  // namespace

extern "C" {

size_t lazylua_dtype_size(lazylua_dtype host_dtype) {
  DType dtype;
  return to_dtype(host_dtype, &dtype) ? static_cast<size_t>(dtype_size(dtype)) : 0;
}

lazylua_status lazylua_tensor_from_buffer(lazylua_interpreter* interpreter, lazylua_dtype dtype,
                                          const void* data, const int64_t* shape, int rank,
                                          lazylua_tensor** tensor) {
  if (!interpreter || !interpreter->L) return LAZYLUA_ERROR_ARGUMENT;
  if (!tensor) return fail_with(interpreter, LAZYLUA_ERROR_ARGUMENT, "null tensor pointer");
  *tensor = nullptr;
  MakeTensor make{interpreter};
  if (const char* problem = check_array(dtype, data, shape, rank, &make.dtype, &make.shape)) {
    return fail_with(interpreter, LAZYLUA_ERROR_ARGUMENT, problem);
  }
  make.copy_from = data;
  return finish_tensor(interpreter, make, tensor);
}

lazylua_status lazylua_tensor_wrap_buffer(lazylua_interpreter* interpreter, lazylua_dtype dtype,
                                          void* data, const int64_t* shape, int rank,
                                          lazylua_release_function release, void* user_data,
                                          lazylua_tensor** tensor) {
  const auto give_back = [&] {
    if (release) release(data, user_data);
  };
  if (tensor) *tensor = nullptr;
  if (!interpreter || !interpreter->L) {
    give_back();
    return LAZYLUA_ERROR_ARGUMENT;
  }
  MakeTensor make{interpreter};
  const char* problem = check_array(dtype, data, shape, rank, &make.dtype, &make.shape);
  if (!problem && !tensor) problem = "null tensor pointer";
  if (problem) {
    give_back();
    return fail_with(interpreter, LAZYLUA_ERROR_ARGUMENT, problem);
  }
  try {
    const size_t bytes = static_cast<size_t>(numel(make.shape)) * dtype_size(make.dtype);
    // From here the Buffer owns the release: it runs when the last array
    // sharing the memory goes, whatever happens next.
    make.array.buffer = make_ref<Buffer>(data, bytes, [release, user_data](void* memory) {
      if (release) release(memory, user_data);
    });
  } catch (...) {
    give_back();
    return fail_with(interpreter, LAZYLUA_ERROR_MEMORY, "not enough memory");
  }
  make.array.shape = make.shape;
  make.array.strides = contiguous_strides(make.shape);
  make.array.dtype = make.dtype;
  return finish_tensor(interpreter, make, tensor);
}

lazylua_status lazylua_tensor_read(lazylua_interpreter* interpreter, lazylua_tensor* tensor,
                                   lazylua_dtype dtype, void* out, size_t out_bytes) {
  if (!interpreter || !interpreter->L) return LAZYLUA_ERROR_ARGUMENT;
  ReadTensor read{};
  if (!tensor || !tensor->tensor || tensor->owner != interpreter) {
    return fail_with(interpreter, LAZYLUA_ERROR_ARGUMENT,
                     tensor ? "a tensor of another interpreter" : "null tensor");
  }
  if (!to_dtype(dtype, &read.dtype)) {
    return fail_with(interpreter, LAZYLUA_ERROR_ARGUMENT, "unknown dtype");
  }
  const size_t needed = static_cast<size_t>(numel(tensor->tensor->shape)) * dtype_size(read.dtype);
  if (out_bytes < needed || (needed > 0 && !out)) {
    return fail_with(interpreter, LAZYLUA_ERROR_ARGUMENT, "output buffer too small");
  }
  read.tensor = tensor->tensor;
  read.out = out;
  read.out_bytes = out_bytes;
  CallScope scope(interpreter);
  TensorWork work{read_tensor_work, &read};
  return run_tensor_work(interpreter, scope, work);
}

lazylua_status lazylua_tensor_info(const lazylua_tensor* tensor, lazylua_dtype* dtype, int* rank,
                                   int64_t* shape, int capacity) {
  if (!tensor || !tensor->tensor || capacity < 0 || (capacity > 0 && !shape)) {
    return LAZYLUA_ERROR_ARGUMENT;
  }
  const Shape& dims = tensor->tensor->shape;
  if (dtype) *dtype = to_host_dtype(tensor->tensor->dtype);
  if (rank) *rank = dims.rank();
  for (int i = 0; i < dims.rank() && i < capacity; i++) shape[i] = dims[i];
  return LAZYLUA_OK;
}

int64_t lazylua_tensor_numel(const lazylua_tensor* tensor) {
  return tensor && tensor->tensor ? numel(tensor->tensor->shape) : 0;
}

lazylua_tensor* lazylua_tensor_retain(lazylua_tensor* tensor) {
  if (!tensor || !tensor->tensor || !tensor->owner) return nullptr;
  return embed::new_handle(tensor->owner, tensor->tensor, false);
}

void lazylua_tensor_free(lazylua_tensor* tensor) {
  if (!tensor || tensor->borrowed) return;  // borrowed handles die with their call
  if (tensor->owner) tensor->owner->tensors.erase(tensor);
  delete tensor;
}

}  // extern "C"
