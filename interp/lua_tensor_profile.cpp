// lua_tensor_profile.cpp - tensor.profile(fn, path), tensor.profile_report(),
// LAZYLUA_PROFILE=trace.json (tensor/profiler.h), and tensor.with_location,
// which names the ops a library records for them.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "interp/file_bytes.h"
#include "interp/lua_safe.h"
#include "interp/lua_tensor_internal.h"
#include "interp/runtime.h"
#include "tensor/profiler.h"

namespace lazylua::binding {
namespace {

// The events of the last profile, for profile_report(). One profiler serves
// the process: a profile of one interpreter sees another's kernels too.
std::vector<profiler::Event>& last_events() {
  static auto* events = new std::vector<profiler::Event>;
  return *events;
}

// Stops the profiler and keeps its events; writes them to `path` if given,
// through the safe writer (a FIFO or a device is refused, not waited on;
// the file is whole or not there). No exception leaves (the caller raises
// Lua errors): false and `message`, which starts with `function`.
bool finish_profile(const char* function, const char* path, char* message, size_t size) noexcept {
  try {
    last_events() = profiler::stop();
    if (path) write_file(path, profiler::chrome_trace(last_events()), function);
    return true;
  } catch (const std::exception& error) {
    std::snprintf(message, size, "%s", error.what());
    return false;
  }
}

// LAZYLUA_PROFILE's file, written when the interpreter that started the
// profile closes (its registry value's __gc).
struct ProfileAtExit {
  std::string path;
};
const char kProfileAtExitKey = 0;

int write_profile_at_exit(lua_State* L) {
  auto* at_exit = static_cast<ProfileAtExit*>(lua_touserdata(L, 1));
  if (!at_exit || at_exit->path.empty()) return 0;
  char message[512];
  if (!finish_profile("LAZYLUA_PROFILE", at_exit->path.c_str(), message, sizeof message)) {
    std::fprintf(stderr, "lazylua: %s\n", message);
  }
  at_exit->~ProfileAtExit();
  return 0;
}

// tensor.profile(fn [, path]): runs fn() with the profiler on and returns
// its results; with a path, writes the Chrome trace there. An error in fn
// propagates after the profiler stops. Plain Lua API only, as no_grad.
int profile(lua_State* L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  const char* path = luaL_optstring(L, 2, nullptr);
  lua_settop(L, 2);
  if (path && is_sandboxed(L)) {
    return luaL_error(L, "tensor.profile: writing files is not allowed in this sandbox");
  }
  if (profiler::running()) {
    return luaL_error(L,
                      "tensor.profile: a profile is already running (LAZYLUA_PROFILE, or "
                      "tensor.profile inside tensor.profile)");
  }
  try {
    profiler::start();
  } catch (const std::exception&) {
    return luaL_error(L, "tensor.profile: the profiler could not start");
  }
  lua_pushvalue(L, 1);
  const int status = lua_pcall(L, 0, LUA_MULTRET, 0);
  char message[512];
  const bool finished =
      finish_profile("tensor.profile", status == LUA_OK ? path : nullptr, message, sizeof message);
  if (status != LUA_OK) return lua_error(L);
  if (!finished) return luaL_error(L, "%s", message);
  return lua_gettop(L) - 2;
}

// tensor.profile_report([rows]): the last profile's top kernels as text.
int profile_report(lua_State* L) {
  // A guarded body: no luaL_ check, and the text is pushed through lua_safe.
  const int64_t rows = optional_integer(L, 1, "tensor.profile_report").value_or(20);
  if (rows < 1 || rows > INT32_MAX) {
    fail("tensor.profile_report: rows must be >= 1, got {}", rows);
  }
  if (last_events().empty()) {
    lua_safe::push_string(L,
                          "no profile yet: run code under tensor.profile(fn) or LAZYLUA_PROFILE\n");
    return 1;
  }
  const std::string text = profiler::kernel_table(last_events(), static_cast<int>(rows));
  lua_safe::push_string(L, text);
  return 1;
}

// Labels are cut to this many bytes: a profile row stays readable, and an
// interned label lives as long as the process.
constexpr size_t kMaxLocationLabelBytes = 200;

// Pushes with_location's label (argument 1) on the context's location
// labels, interned once per distinct text. A guarded body.
int push_location_label(lua_State* L) {
  if (lua_type(L, 1) != LUA_TSTRING) {
    type_error(L, 1, "tensor.with_location", "string");
  }
  if (lua_type(L, 2) != LUA_TFUNCTION) type_error(L, 2, "tensor.with_location", "function");
  size_t length = 0;
  const char* text = lua_tolstring(L, 1, &length);
  if (length == 0) argument_error(1, "tensor.with_location", "the label is empty");
  std::string label(text, length);
  if (label.size() > kMaxLocationLabelBytes) {
    size_t cut = kMaxLocationLabelBytes - 3;
    while (cut > 0 && (static_cast<unsigned char>(label[cut]) & 0xC0) == 0x80) cut--;  // UTF-8
    label.resize(cut);
    label += "...";
  }
  Context* context = tensor_context(L);
  context->location_labels.push_back(SourceLocation{context->intern(label), 0});
  return 0;
}

// tensor.with_location(label, fn, ...): fn(...)'s results; the ops it
// records are located at `label` (a name in profiles, errors, tensor.ir),
// not at Lua lines, so a library can name its own parts (stdlib/onnx.lua
// names each node of an imported model). The innermost label wins; the
// outer one is back however fn ends. Plain C around the call: an error in
// fn propagates as it is, and no C++ object is alive when it does.
int with_location(lua_State* L) {
  Context* context = tensor_context(L);
  const size_t depth = context->location_labels.size();
  guarded<push_location_label>(L);
  const int status = lua_pcall(L, lua_gettop(L) - 2, LUA_MULTRET, 0);
  context->location_labels.resize(depth);
  if (status != LUA_OK) return lua_error(L);
  return lua_gettop(L) - 1;
}

}  // namespace

void register_profile_functions(lua_State* L) {
  static const luaL_Reg functions[] = {
      {"profile", profile},
      {"profile_report", guarded<profile_report>},
      {"with_location", with_location},
      {nullptr, nullptr},
  };
  luaL_setfuncs(L, functions, 0);
  const char* path = std::getenv("LAZYLUA_PROFILE");
  if (!path || !*path || profiler::running() || is_sandboxed(L)) return;
  auto* at_exit = new (lua_newuserdatauv(L, sizeof(ProfileAtExit), 0)) ProfileAtExit{path};
  (void)at_exit;
  lua_newtable(L);
  lua_pushcfunction(L, write_profile_at_exit);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &kProfileAtExitKey);
  profiler::start();
}

}  // namespace lazylua::binding
