// lua_call_replay.cpp - the importer's entry to call replay
// (tensor/call_replay.h), in the stdlib's native module:
//   call_recording_start(inputs, watched) -> the inputs' stand-ins, or nil
//     when no recording started
//   call_recording_finish(inputs, outputs, watched) -> recorded call and
//     the outputs as its replays return them, or nil
//   call_recording_cancel()
//   call_replay(recorded, inputs, watched) -> outputs, or nil to run the call
// Each argument named so is a list of tensors.
#include <lua.hpp>

#include <memory>
#include <vector>

#include "interp/lua_safe.h"
#include "interp/lua_tensor.h"
#include "interp/lua_tensor_internal.h"
#include "interp/stdlib_native.h"
#include "tensor/call_replay.h"
#include "tensor/error.h"

namespace lazylua {
namespace {

using binding::guarded;
using binding::push_tensor_list;
using binding::tensor_list;

const char kRecordedCallKey = 0;  // the registry slot of the recorded calls' metatable

struct RecordedCallBox {
  RecordedCall* call;
};

// Pushes the list of `tensors`, or nil when there are none.
int push_list(lua_State* L, const std::vector<Tensor>& tensors) {
  if (tensors.empty()) {
    lua_pushnil(L);
  } else {
    push_tensor_list(L, tensors);
  }
  return 1;
}

int recording_start(lua_State* L) {
  const char* name = "call_recording_start";
  return push_list(L, start_call_recording(tensor_context(L), tensor_list(L, 1, name, "the inputs"),
                                           tensor_list(L, 2, name, "the watched tensors")));
}

int recording_cancel(lua_State* L) {
  cancel_call_recording(tensor_context(L));
  return 0;
}

int recording_finish(lua_State* L) {
  const char* name = "call_recording_finish";
  Context* context = tensor_context(L);
  std::vector<Tensor> inputs, outputs, watched;
  try {
    inputs = tensor_list(L, 1, name, "the inputs");
    outputs = tensor_list(L, 2, name, "the outputs");
    watched = tensor_list(L, 3, name, "the watched tensors");
  } catch (...) {
    cancel_call_recording(context);
    throw;
  }
  std::unique_ptr<RecordedCall> call = finish_call_recording(context, inputs, outputs, watched);
  if (!call) {
    lua_pushnil(L);
    return 1;
  }
  push_tensor_list(L, outputs);
  auto* box = static_cast<RecordedCallBox*>(lua_safe::new_userdata(L, sizeof(RecordedCallBox)));
  box->call = call.release();
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kRecordedCallKey);
  lua_setmetatable(L, -2);
  lua_insert(L, -2);
  return 2;
}

const RecordedCall& recorded_call(lua_State* L, int arg, const char* function) {
  void* data = lua_touserdata(L, arg);
  bool is_call = data && lua_getmetatable(L, arg);
  if (is_call) {
    lua_rawgetp(L, LUA_REGISTRYINDEX, &kRecordedCallKey);
    is_call = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
  }
  if (!is_call || !static_cast<RecordedCallBox*>(data)->call) {
    binding::type_error(L, arg, function, "recorded call");
  }
  return *static_cast<RecordedCallBox*>(data)->call;
}

int replay(lua_State* L) {
  const char* name = "call_replay";
  const RecordedCall& call = recorded_call(L, 1, name);
  return push_list(L, replay_call(tensor_context(L), call, tensor_list(L, 2, name, "the inputs"),
                                  tensor_list(L, 3, name, "the watched tensors")));
}

// __gc: plain C, no Lua error can arise.
int release_recorded_call(lua_State* L) {
  auto* box = static_cast<RecordedCallBox*>(lua_touserdata(L, 1));
  delete box->call;
  box->call = nullptr;
  return 0;
}

}  // namespace

void add_call_replay_functions(lua_State* L) {
  lua_newtable(L);
  lua_pushcfunction(L, release_recorded_call);
  lua_setfield(L, -2, "__gc");
  lua_pushliteral(L, "recorded call");
  lua_setfield(L, -2, "__name");
  lua_rawsetp(L, LUA_REGISTRYINDEX, &kRecordedCallKey);
  const luaL_Reg functions[] = {
      {"call_recording_start", guarded<recording_start>},
      {"call_recording_finish", guarded<recording_finish>},
      {"call_recording_cancel", guarded<recording_cancel>},
      {"call_replay", guarded<replay>},
      {nullptr, nullptr},
  };
  luaL_setfuncs(L, functions, 0);
}

}  // namespace lazylua
