// embed_api.cpp - the C API's interpreters: open/close with options, running
// Lua, calling functions, globals, host functions and interrupts.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "compiler/disk_cache.h"
#include "compiler/native_executor.h"
#include "interp/coroutines.h"
#include "interp/embed_internal.h"
#include "interp/lua_tensor.h"
#include "interp/runtime.h"
#include "interp/sandbox_patterns.h"
#include "tensor/collectives.h"
#include "tensor/thread_pool.h"

using lazylua::embed::CallScope;
using lazylua::embed::fail_with;

namespace lazylua::embed {
namespace {

// Message handler of every protected call, as in lua.c: the message plus
// the traceback; an error object with __tostring gives its own message.
int add_traceback(lua_State* L) {
  const char* message = lua_tostring(L, 1);
  if (message == nullptr) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
    message = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, message, 1);
  return 1;
}

struct ProtectedBody {
  int (*body)(lua_State* L, void* data);
  void* data;
};

int run_protected_body(lua_State* L) {
  auto* call = static_cast<ProtectedBody*>(lua_touserdata(L, 1));
  lua_settop(L, 0);
  return call->body(L, call->data);
}

}  // namespace

lazylua_status fail_with(lazylua_interpreter* interpreter, lazylua_status status,
                         const char* message) {
  if (interpreter) {
    try {
      interpreter->error_message = message ? message : "";
    } catch (...) {
      interpreter->error_message.clear();
    }
  }
  return status;
}

int protected_call(lua_State* L, int (*body)(lua_State* L, void* data), void* data,
                   int result_count) {
  if (!lua_checkstack(L, 3)) return LUA_ERRMEM;
  ProtectedBody call{body, data};
  const int handler = lua_gettop(L) + 1;
  lua_pushcfunction(L, add_traceback);
  lua_pushcfunction(L, run_protected_body);
  lua_pushlightuserdata(L, &call);
  const int status = lua_pcall(L, 1, result_count, handler);
  lua_remove(L, handler);
  return status;
}

// ---- Interrupts ----

namespace {

// Runs on the interpreter's thread at the next Lua event after
// lazylua_interrupt armed it. It stays armed until the call ends, so a
// script that catches the error with pcall is stopped again at once.
void interrupt_hook(lua_State* L, lua_Debug* activation) {
  // Not at the call or return of a C function: the message handler
  // (add_traceback) of the "interrupted!" a stopped sync raises is one, and
  // raising inside it would replace that error's message and position. Lua
  // code running on gets the next event, except where Lua turns hooks off:
  // the message handler of the error raised here (so xpcall does not call
  // the script's handler once an interrupt is pending) and finalizers (the
  // sandbox refuses __gc; see sandbox_setmetatable).
  if (activation->event != LUA_HOOKCOUNT && activation->event != LUA_HOOKLINE &&
      lua_getinfo(L, "S", activation) && activation->what[0] == 'C') {
    return;
  }
  StateData* data = state_data(L);
  auto* interpreter = data ? static_cast<lazylua_interpreter*>(data->host) : nullptr;
  bool requested = false;
  if (interpreter) {
    std::lock_guard lock(interpreter->interrupt_mutex);
    requested = interpreter->interrupt_requested;
  }
  if (requested) luaL_error(L, "interrupted!");
}

// Whether lazylua_interrupt stopped the running call (the hook stays armed
// until the call ends).
bool interrupt_pending(lua_State* L) {
  StateData* data = state_data(L);
  auto* interpreter = data ? static_cast<lazylua_interpreter*>(data->host) : nullptr;
  if (!interpreter) return false;
  std::lock_guard lock(interpreter->interrupt_mutex);
  return interpreter->interrupt_requested;
}

// The message handler xpcall installs around the script's own (upvalue 1).
// When the hook raises "interrupted!", Lua calls the message handler from
// inside the hook, where hooks are off (L->allowhook is 0 while a hook
// runs, ldo.c luaD_hook): a handler that loops there could never be
// stopped. So while an interrupt is pending the error passes through
// unchanged and the script's handler is not called.
int interruptible_message_handler(lua_State* L) {
  if (interrupt_pending(L)) return 1;
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 1);
  return 1;
}

int finish_xpcall(lua_State* L, int status, lua_KContext results_below) {
  if (status != LUA_OK && status != LUA_YIELD) {
    lua_pushboolean(L, 0);
    lua_pushvalue(L, -2);  // the error object
    return 2;
  }
  return lua_gettop(L) - static_cast<int>(results_below);
}

// xpcall(f, handler, ...) as Lua's own (same results, yieldable), with the
// handler wrapped by interruptible_message_handler.
int interruptible_xpcall(lua_State* L) {
  const int argument_count = lua_gettop(L) - 2;
  luaL_checktype(L, 2, LUA_TFUNCTION);
  lua_pushvalue(L, 2);
  lua_pushcclosure(L, interruptible_message_handler, 1);
  lua_replace(L, 2);
  lua_pushboolean(L, 1);  // the first result on success
  lua_pushvalue(L, 1);    // the function
  lua_rotate(L, 3, 2);    // both below the arguments: handler, true, f, args...
  const int status = lua_pcallk(L, argument_count, LUA_MULTRET, 2, 2, finish_xpcall);
  return finish_xpcall(L, status, 2);
}

// setmetatable for the sandbox: as Lua's own, but a metatable with a __gc
// field is refused. Lua runs finalizers with hooks off (lgc.c GCTM sets
// L->allowhook to 0), so no interrupt could stop a finalizer that loops.
// Lua marks an object for finalization only if its metatable has __gc when
// setmetatable runs (a field added later is ignored), so checking here is
// enough; `debug.setmetatable` is gone in the sandbox.
int sandbox_setmetatable(lua_State* L) {
  const int metatable_type = lua_type(L, 2);
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_argexpected(L, metatable_type == LUA_TNIL || metatable_type == LUA_TTABLE, 2,
                   "nil or table");
  if (metatable_type == LUA_TTABLE) {
    lua_pushliteral(L, "__gc");
    const bool has_finalizer = lua_rawget(L, 2) != LUA_TNIL;
    lua_pop(L, 1);
    if (has_finalizer) {
      return luaL_error(L,
                        "setmetatable: __gc metamethods are not allowed in the sandbox (finalizers "
                        "run with interrupts off)");
    }
  }
  if (luaL_getmetafield(L, 1, "__metatable") != LUA_TNIL) {
    return luaL_error(L, "cannot change a protected metatable");
  }
  lua_settop(L, 2);
  lua_setmetatable(L, 1);
  return 1;
}

}  // namespace

CallScope::CallScope(lazylua_interpreter* interpreter)
    : interpreter_(interpreter),
      top_(lua_gettop(interpreter->L)),
      refusals_at_start_(interpreter->budget ? interpreter->budget->refusals() : 0),
      budget_scope_(interpreter->budget.get()),
      interrupt_scope_(interrupt_flag(interpreter->L)) {
  std::lock_guard lock(interpreter->interrupt_mutex);
  if (interpreter->running_depth++ == 0) interpreter->interrupt_requested = false;
}

CallScope::~CallScope() {
  lua_settop(interpreter_->L, top_);
  std::lock_guard lock(interpreter_->interrupt_mutex);
  if (--interpreter_->running_depth == 0 && interpreter_->interrupt_requested) {
    disarm_interrupt(interpreter_->L, interrupt_hook);
    interpreter_->interrupt_requested = false;
  }
}

bool CallScope::memory_refused() const {
  return interpreter_->budget && interpreter_->budget->refusals() > refusals_at_start_;
}

lazylua_status CallScope::finish(int lua_status) {
  if (lua_status == LUA_OK) return LAZYLUA_OK;
  lua_State* L = interpreter_->L;
  const char* message = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : nullptr;
  lazylua_status status = LAZYLUA_ERROR_RUNTIME;
  bool interrupted;
  {
    std::lock_guard lock(interpreter_->interrupt_mutex);
    interrupted = interpreter_->interrupt_requested;
  }
  const bool over_budget = memory_refused();
  if (interrupted) {
    status = LAZYLUA_ERROR_INTERRUPTED;
  } else if (lua_status == LUA_ERRMEM || over_budget) {
    status = LAZYLUA_ERROR_MEMORY;
  } else if (lua_status == LUA_ERRSYNTAX) {
    status = LAZYLUA_ERROR_SYNTAX;
  } else if (lua_status == LUA_ERRFILE) {
    status = LAZYLUA_ERROR_FILE;
  }
  if (!message) message = lua_status == LUA_ERRMEM ? "not enough memory" : "(no error message)";
  return fail_with(interpreter_, status, message);
}

}  // namespace lazylua::embed

using namespace lazylua;

namespace {

// ---- Opening ----

// What the sandbox removes from Lua's own libraries (lazylua's leave out
// their file functions by themselves, see kSandboxKey). The standard file
// searchers are the ones open_lazylua remembered right after luaL_openlibs
// (the first argument). package.searchpath opens files to test them.
constexpr const char* kSandboxScript = R"lua(
local file_searchers = ...
io, debug, loadfile, dofile = nil, nil, nil, nil
local loaded = package.loaded
loaded.io, loaded.debug = nil, nil
local full_os = os
os = {clock = full_os.clock, date = full_os.date, difftime = full_os.difftime,
      time = full_os.time}
loaded.os = os
package.loadlib, package.searchpath, package.path, package.cpath = nil, nil, "", ""
local dropped = {}
for _, searcher in ipairs(file_searchers) do dropped[searcher] = true end
local kept = {}
for _, searcher in ipairs(package.searchers) do
  if not dropped[searcher] then kept[#kept + 1] = searcher end
end
for i = #package.searchers, 1, -1 do package.searchers[i] = nil end
for i, searcher in ipairs(kept) do package.searchers[i] = searcher end
local text_load = load
load = function(chunk, name, mode, ...)
  if select("#", ...) > 0 then return text_load(chunk, name, "t", ...) end
  return text_load(chunk, name, "t")
end
if loaded.tensor then loaded.tensor.save, loaded.tensor.load = nil, nil end
)lua";

struct OpenData {
  bool sandbox;
};

int open_body(lua_State* L, void* data) {
  if (static_cast<OpenData*>(data)->sandbox) {
    // Before the libraries open: they ask for it (is_sandboxed).
    lua_pushboolean(L, 1);
    lua_setfield(L, LUA_REGISTRYINDEX, kSandboxKey);
  }
  open_lazylua(L);
  // Every interpreter: lazylua_interrupt promises to stop the call, and a
  // looping xpcall handler would escape it (interruptible_message_handler).
  lua_pushcfunction(L, embed::interruptible_xpcall);
  lua_setglobal(L, "xpcall");
  if (static_cast<OpenData*>(data)->sandbox) {
    if (luaL_loadbufferx(L, kSandboxScript, std::strlen(kSandboxScript), "=sandbox", "t") !=
        LUA_OK) {
      return lua_error(L);
    }
    lua_getfield(L, LUA_REGISTRYINDEX, kFileSearchersKey);
    lua_call(L, 1, 0);
    // Only in the sandbox: a host's own trusted scripts may need finalizers
    // (and can evade interrupts anyway, with debug.sethook).
    lua_pushcfunction(L, embed::sandbox_setmetatable);
    lua_setglobal(L, "setmetatable");
    install_pattern_limits(L);
  }
  return 0;
}

// The memory budget's last resort before it refuses a tensor buffer: a full
// collection frees the tensors the scripts dropped and the collector has
// not got to yet (it runs on the Lua thread that asked for the buffer).
void reclaim_memory(void* user) {
  auto* interpreter = static_cast<lazylua_interpreter*>(user);
  Context* context = interpreter->L ? tensor_context(interpreter->L) : nullptr;
  if (context && context->collect_garbage && context->collect_garbage_user) {
    context->collect_garbage(context->collect_garbage_user, true);
  }
}

// Puts a compile cache in `directory` behind the interpreter's context.
void use_cache_directory(lua_State* L, const char* directory) {
  Context* context = tensor_context(L);
  context->executor = compiler::make_native_executor(
      compiler::compile_mode_from_environment(), context->debug_level,
      &compiler::DiskCache::for_directory(directory));
}

// ---- Calling ----

struct CallData {
  lazylua_interpreter* interpreter;
  const char* path;
  const lazylua_value* arguments;
  int argument_count;
  int result_count;
  bool found = false;
};

// Pushes the value at a dotted path ("model.forward") starting from the
// globals; nil when a step is missing.
void push_path(lua_State* L, const char* path) {
  lua_pushglobaltable(L);
  const char* start = path;
  while (true) {
    const char* dot = std::strchr(start, '.');
    const size_t length = dot ? static_cast<size_t>(dot - start) : std::strlen(start);
    if (!lua_istable(L, -1) && !lua_isuserdata(L, -1)) {
      lua_pop(L, 1);
      lua_pushnil(L);
      return;
    }
    lua_pushlstring(L, start, length);
    lua_gettable(L, -2);
    lua_remove(L, -2);
    if (!dot) return;
    start = dot + 1;
  }
}

int call_body(lua_State* L, void* raw) {
  auto* data = static_cast<CallData*>(raw);
  push_path(L, data->path);
  if (!lua_isfunction(L, -1) && !luaL_getmetafield(L, -1, "__call")) return 0;
  if (lua_gettop(L) > 1) lua_pop(L, 1);  // the __call field: the value itself is called
  data->found = true;
  luaL_checkstack(L, data->argument_count + LUA_MINSTACK, "too many arguments");
  for (int i = 0; i < data->argument_count; i++) embed::push_value(L, data->arguments[i]);
  lua_call(L, data->argument_count, data->result_count);
  return data->result_count;
}

// Checks the host's values; returns an error message or nullptr.
const char* check_values(const lazylua_interpreter* interpreter, const lazylua_value* values,
                         int count) {
  if (count < 0) return "negative value count";
  if (count > 0 && !values) return "null value array";
  for (int i = 0; i < count; i++) {
    if (const char* problem = embed::check_value(interpreter, values[i])) return problem;
  }
  return nullptr;
}

// Moves `count` values from the top of the stack into `results`.
lazylua_status take_results(lazylua_interpreter* interpreter, lazylua_value* results, int count) {
  lua_State* L = interpreter->L;
  const int first = lua_gettop(L) - count + 1;
  for (int i = 0; i < count; i++) {
    if (!embed::to_value(interpreter, first + i, &results[i], false) ||
        !embed::keep_string(interpreter, &results[i])) {
      for (int j = 0; j <= i; j++) {
        if (results[j].type == LAZYLUA_TYPE_TENSOR) lazylua_tensor_free(results[j].as.tensor);
        results[j] = lazylua_nil();
      }
      return fail_with(interpreter, LAZYLUA_ERROR_MEMORY, "not enough memory");
    }
  }
  return LAZYLUA_OK;
}

// ---- Host functions ----

struct HostFunction {
  lazylua_function function;
  void* user_data;
  lazylua_interpreter* interpreter;
};

// Converts the arguments, calls the host, frees the borrowed handles. All
// its C++ objects are gone when it returns, so the caller may raise.
// Returns the result count, or -1 with interpreter->raised set.
int run_host_function(lua_State* L, const HostFunction& host, lazylua_value* results) {
  lazylua_interpreter* interpreter = host.interpreter;
  interpreter->raised = false;
  int count = -1;
  std::vector<lazylua_value> arguments;
  try {
    arguments.resize(static_cast<size_t>(lua_gettop(L)));
    bool converted = true;
    for (size_t i = 0; i < arguments.size() && converted; i++) {
      converted = embed::to_value(interpreter, static_cast<int>(i) + 1, &arguments[i], true);
    }
    if (!converted) throw std::bad_alloc();
    count = host.function(interpreter, host.user_data, arguments.data(),
                          static_cast<int>(arguments.size()), results, LAZYLUA_MAX_HOST_RESULTS);
    if (!interpreter->raised && (count < 0 || count > LAZYLUA_MAX_HOST_RESULTS)) {
      lazylua_raise(interpreter, "host function returned a bad result count");
    }
    for (int i = 0; !interpreter->raised && i < count; i++) {
      if (const char* problem = embed::check_value(interpreter, results[i])) {
        lazylua_raise(interpreter, problem);
      }
    }
  } catch (const std::exception& error) {
    lazylua_raise(interpreter, error.what());
  }
  for (const lazylua_value& argument : arguments) {
    if (argument.type == LAZYLUA_TYPE_TENSOR) delete argument.as.tensor;
  }
  return interpreter->raised ? -1 : count;
}

int call_host_function(lua_State* L) {
  const auto* host = static_cast<const HostFunction*>(lua_touserdata(L, lua_upvalueindex(1)));
  lazylua_value results[LAZYLUA_MAX_HOST_RESULTS];
  const int count = run_host_function(L, *host, results);
  if (count < 0) {
    // Copied to the Lua stack before raising; the C++ string stays behind.
    lua_pushstring(L, host->interpreter->raised_message.c_str());
    host->interpreter->raised = false;
    luaL_where(L, 1);
    lua_insert(L, -2);
    lua_concat(L, 2);
    return lua_error(L);
  }
  luaL_checkstack(L, count, "too many results");
  for (int i = 0; i < count; i++) embed::push_value(L, results[i]);
  return count;
}

struct RegisterData {
  const char* name;
  HostFunction host;
};

int register_body(lua_State* L, void* raw) {
  auto* data = static_cast<RegisterData*>(raw);
  auto* host = static_cast<HostFunction*>(lua_newuserdatauv(L, sizeof(HostFunction), 0));
  *host = data->host;
  lua_pushcclosure(L, call_host_function, 1);
  lua_setglobal(L, data->name);
  return 0;
}

struct GlobalData {
  const char* name;
  const lazylua_value* value;
};

int get_global_body(lua_State* L, void* raw) {
  lua_getglobal(L, static_cast<GlobalData*>(raw)->name);
  return 1;
}

int set_global_body(lua_State* L, void* raw) {
  auto* data = static_cast<GlobalData*>(raw);
  embed::push_value(L, *data->value);
  lua_setglobal(L, data->name);
  return 0;
}

bool usable(const lazylua_interpreter* interpreter) {
  return interpreter && interpreter->L;
}

}  // namespace

extern "C" {

const char* lazylua_status_name(lazylua_status status) {
  switch (status) {
    case LAZYLUA_OK:
      return "ok";
    case LAZYLUA_ERROR_RUNTIME:
      return "runtime error";
    case LAZYLUA_ERROR_SYNTAX:
      return "syntax error";
    case LAZYLUA_ERROR_MEMORY:
      return "memory error";
    case LAZYLUA_ERROR_INTERRUPTED:
      return "interrupted";
    case LAZYLUA_ERROR_FILE:
      return "file error";
    case LAZYLUA_ERROR_ARGUMENT:
      return "bad argument";
  }
  return "unknown status";
}

const char* lazylua_version(void) {
  return version();
}

void lazylua_options_init(lazylua_options* options) {
  if (options) *options = lazylua_options{};
}

lazylua_status lazylua_open(const lazylua_options* options, lazylua_interpreter** result) {
  if (!result) return LAZYLUA_ERROR_ARGUMENT;
  *result = nullptr;
  lazylua_options defaults{};
  if (!options) options = &defaults;
  if (options->threads < 0) return LAZYLUA_ERROR_ARGUMENT;
  auto* interpreter = new (std::nothrow) lazylua_interpreter;
  if (!interpreter) return LAZYLUA_ERROR_MEMORY;
  lua_State* L = luaL_newstate();
  StateData* data = L ? install_state_data(L) : nullptr;
  if (!data) {
    if (L) lua_close(L);
    delete interpreter;
    return LAZYLUA_ERROR_MEMORY;
  }
  interpreter->L = L;
  interpreter->sandbox = options->sandbox != 0;
  data->host = interpreter;
  // The hook stays armed until the call ends (interrupt_hook), also after a
  // sync stopped for the interrupt.
  data->interrupt_stays_armed = true;
  lazylua_status status = LAZYLUA_OK;
  try {
    if (options->memory_limit > 0) {
      const auto limit = static_cast<int64_t>(
          std::min<size_t>(options->memory_limit, static_cast<size_t>(INT64_MAX)));
      interpreter->budget = make_ref<MemoryBudget>(limit);
      // The heap luaL_newstate made so far counts too.
      interpreter->budget->charge_unchecked(int64_t{lua_gc(L, LUA_GCCOUNT)} * 1024 +
                                            lua_gc(L, LUA_GCCOUNTB));
      data->budget = interpreter->budget;
    }
    if (options->threads > 0) set_thread_count(options->threads);
    OpenData open_data{interpreter->sandbox};
    {
      CallScope scope(interpreter);
      status = scope.finish(embed::protected_call(L, open_body, &open_data, 0));
    }
    if (status == LAZYLUA_OK && options->cache_directory) {
      use_cache_directory(L, options->cache_directory);
    }
    if (status == LAZYLUA_OK && interpreter->budget) {
      interpreter->budget->set_reclaimer(reclaim_memory, interpreter);
    }
  } catch (const std::bad_alloc&) {
    status = LAZYLUA_ERROR_MEMORY;
  } catch (const std::exception&) {
    status = LAZYLUA_ERROR_RUNTIME;
  }
  if (status != LAZYLUA_OK) {
    lazylua_close(interpreter);
    return status;
  }
  *result = interpreter;
  return LAZYLUA_OK;
}

void lazylua_close(lazylua_interpreter* interpreter) {
  if (!interpreter) return;
  for (lazylua_tensor* tensor : interpreter->tensors) delete tensor;
  interpreter->tensors.clear();
  if (interpreter->L) {
    // No interrupt may arm the hook of a state being closed.
    {
      std::lock_guard lock(interpreter->interrupt_mutex);
      interpreter->running_depth = 0;
      interpreter->interrupt_requested = false;
    }
    lua_State* L = interpreter->L;
    interpreter->L = nullptr;
    if (interpreter->budget) interpreter->budget->set_reclaimer(nullptr, nullptr);
    if (StateData* data = state_data(L)) data->host = nullptr;
    lua_close(L);
  }
  delete interpreter;
}

const char* lazylua_error_message(const lazylua_interpreter* interpreter) {
  return interpreter ? interpreter->error_message.c_str() : "";
}

lazylua_status lazylua_run_string(lazylua_interpreter* interpreter, const char* source,
                                  const char* chunk_name) {
  if (!usable(interpreter)) return LAZYLUA_ERROR_ARGUMENT;
  if (!source) return fail_with(interpreter, LAZYLUA_ERROR_ARGUMENT, "null source");
  lua_State* L = interpreter->L;
  CallScope scope(interpreter);
  if (!lua_checkstack(L, 3)) return scope.finish(LUA_ERRMEM);
  lua_pushcfunction(L, embed::add_traceback);
  int status =
      luaL_loadbufferx(L, source, std::strlen(source), chunk_name ? chunk_name : "=(string)",
                       interpreter->sandbox ? "t" : nullptr);
  if (status == LUA_OK) status = lua_pcall(L, 0, 0, -2);
  return scope.finish(status);
}

lazylua_status lazylua_run_file(lazylua_interpreter* interpreter, const char* path) {
  if (!usable(interpreter)) return LAZYLUA_ERROR_ARGUMENT;
  if (!path) return fail_with(interpreter, LAZYLUA_ERROR_ARGUMENT, "null path");
  lua_State* L = interpreter->L;
  CallScope scope(interpreter);
  if (!lua_checkstack(L, 3)) return scope.finish(LUA_ERRMEM);
  lua_pushcfunction(L, embed::add_traceback);
  int status = luaL_loadfilex(L, path, interpreter->sandbox ? "t" : nullptr);
  if (status == LUA_OK) status = lua_pcall(L, 0, 0, -2);
  return scope.finish(status);
}

lazylua_status lazylua_dist_info(int* rank, int* size) {
  if (!rank || !size) return LAZYLUA_ERROR_ARGUMENT;
  try {
    lazylua::dist_initialize();
  } catch (const std::exception&) {
    return LAZYLUA_ERROR_RUNTIME;
  }
  *rank = lazylua::dist_rank();
  *size = lazylua::dist_size();
  return LAZYLUA_OK;
}

void lazylua_dist_abort(int exit_status) {
  lazylua::dist_abort_job(exit_status);
}

void lazylua_interrupt(lazylua_interpreter* interpreter) {
  if (!interpreter) return;
  std::lock_guard lock(interpreter->interrupt_mutex);
  if (interpreter->running_depth == 0 || !interpreter->L) return;
  interpreter->interrupt_requested = true;
  // lua.c's way (it does this from a signal handler): the hook is noticed
  // at the running function's next instruction, in the main thread or in
  // the coroutine that runs. The mutex keeps the state alive and the hook
  // from being disarmed meanwhile.
  arm_interrupt(interpreter->L, lazylua::embed::interrupt_hook);
}

lazylua_status lazylua_call(lazylua_interpreter* interpreter, const char* function,
                            const lazylua_value* arguments, int argument_count,
                            lazylua_value* results, int result_count) {
  if (!usable(interpreter)) return LAZYLUA_ERROR_ARGUMENT;
  if (!function) return fail_with(interpreter, LAZYLUA_ERROR_ARGUMENT, "null function name");
  if (const char* problem = check_values(interpreter, arguments, argument_count)) {
    return fail_with(interpreter, LAZYLUA_ERROR_ARGUMENT, problem);
  }
  if (result_count < 0 || (result_count > 0 && !results)) {
    return fail_with(interpreter, LAZYLUA_ERROR_ARGUMENT, "bad result array");
  }
  for (int i = 0; i < result_count; i++) results[i] = lazylua_nil();
  try {
    CallScope scope(interpreter);
    interpreter->result_strings.clear();
    CallData data{interpreter, function, arguments, argument_count, result_count};
    const lazylua_status status =
        scope.finish(embed::protected_call(interpreter->L, call_body, &data, result_count));
    if (status != LAZYLUA_OK) return status;
    if (!data.found) {
      const std::string message = std::string("no function named '") + function + "'";
      return fail_with(interpreter, LAZYLUA_ERROR_ARGUMENT, message.c_str());
    }
    return take_results(interpreter, results, result_count);
  } catch (const std::exception&) {
    return fail_with(interpreter, LAZYLUA_ERROR_MEMORY, "not enough memory");
  }
}

lazylua_status lazylua_get_global(lazylua_interpreter* interpreter, const char* name,
                                  lazylua_value* value) {
  if (!usable(interpreter)) return LAZYLUA_ERROR_ARGUMENT;
  if (!name || !value) return fail_with(interpreter, LAZYLUA_ERROR_ARGUMENT, "null argument");
  *value = lazylua_nil();
  try {
    CallScope scope(interpreter);
    interpreter->result_strings.clear();
    GlobalData data{name, nullptr};
    const lazylua_status status =
        scope.finish(embed::protected_call(interpreter->L, get_global_body, &data, 1));
    if (status != LAZYLUA_OK) return status;
    return take_results(interpreter, value, 1);
  } catch (const std::exception&) {
    return fail_with(interpreter, LAZYLUA_ERROR_MEMORY, "not enough memory");
  }
}

lazylua_status lazylua_set_global(lazylua_interpreter* interpreter, const char* name,
                                  const lazylua_value* value) {
  if (!usable(interpreter)) return LAZYLUA_ERROR_ARGUMENT;
  if (!name || !value) return fail_with(interpreter, LAZYLUA_ERROR_ARGUMENT, "null argument");
  if (const char* problem = embed::check_value(interpreter, *value)) {
    return fail_with(interpreter, LAZYLUA_ERROR_ARGUMENT, problem);
  }
  CallScope scope(interpreter);
  GlobalData data{name, value};
  return scope.finish(embed::protected_call(interpreter->L, set_global_body, &data, 0));
}

lazylua_status lazylua_register_function(lazylua_interpreter* interpreter, const char* name,
                                         lazylua_function function, void* user_data) {
  if (!usable(interpreter)) return LAZYLUA_ERROR_ARGUMENT;
  if (!name || !function) {
    return fail_with(interpreter, LAZYLUA_ERROR_ARGUMENT, "null name or function");
  }
  CallScope scope(interpreter);
  RegisterData data{name, {function, user_data, interpreter}};
  return scope.finish(embed::protected_call(interpreter->L, register_body, &data, 0));
}

int lazylua_raise(lazylua_interpreter* interpreter, const char* message) {
  if (!interpreter) return -1;
  try {
    interpreter->raised_message = message ? message : "error in host function";
  } catch (...) {
    interpreter->raised_message.clear();
  }
  interpreter->raised = true;
  return -1;
}

lua_State* lazylua_lua_state(lazylua_interpreter* interpreter) {
  return interpreter ? interpreter->L : nullptr;
}

}  // extern "C"
