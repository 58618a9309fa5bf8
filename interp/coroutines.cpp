// coroutines.cpp - coroutine.resume and coroutine.wrap that keep track of
// the running coroutine, so that interrupts reach it (coroutines.h).
//
// They behave as Lua's own (same results, same messages, same C-stack use:
// one C function per resume, as in Lua's library) and are written on the
// public API the same way: move the arguments, lua_resume, move the results
// or the error back. The only addition is enter/leave around lua_resume.
#include "interp/coroutines.h"

#include "interp/state_data.h"

namespace lazylua {
namespace {

constexpr int kHookMask = LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT;

// Gives `thread` the pending interrupt's hook, or takes a stale interrupt
// hook off it (one left from an interrupt that is over: it would slow every
// instruction). A hook the script set itself is left alone.
void update_hook(StateData* data, lua_State* thread) {
  const lua_Hook pending = data->pending_interrupt.load();
  const lua_Hook current = lua_gethook(thread);
  if (pending) {
    if (current != pending) lua_sethook(thread, pending, kHookMask, 1);
  } else if (current && current == data->last_interrupt.load()) {
    lua_sethook(thread, nullptr, 0, 0);
  }
}

// `co` runs from now on; returns the coroutine that ran before (null: the
// main thread).
lua_State* enter(StateData* data, lua_State* co) {
  lua_State* previous = data->running_coroutine.exchange(co);
  update_hook(data, co);
  return previous;
}

// Back in `resumer` (which runs `previous`) after lua_resume returned.
void leave(StateData* data, lua_State* resumer, lua_State* previous) {
  data->running_coroutine.store(previous);
  // An interrupter that read the coroutine before the store may still be
  // setting its hook: wait for it, so the coroutine (which may be collected
  // once we return) outlives that. It takes a few instructions.
  while (data->arming.load() != 0) {
  }
  update_hook(data, resumer);
}

// Moves `count` arguments from L to `co` and resumes it. Returns how many
// results it moved back onto L, or -1 with an error message on top of L.
int resume(lua_State* L, lua_State* co, int count) {
  if (!lua_checkstack(co, count)) {
    lua_pushliteral(L, "too many arguments to resume");
    return -1;
  }
  lua_xmove(L, co, count);
  StateData* data = state_data(L);
  lua_State* previous = data ? enter(data, co) : nullptr;
  int results = 0;
  const int status = lua_resume(co, L, count, &results);
  if (data) leave(data, L, previous);
  if (status != LUA_OK && status != LUA_YIELD) {
    lua_xmove(co, L, 1);  // the error object
    return -1;
  }
  if (!lua_checkstack(L, results + 1)) {
    lua_pop(co, results);
    lua_pushliteral(L, "too many results to resume");
    return -1;
  }
  lua_xmove(co, L, results);
  return results;
}

// coroutine.resume(co, ...) -> true, results... | false, message
int tracked_resume(lua_State* L) {
  luaL_checktype(L, 1, LUA_TTHREAD);
  lua_State* co = lua_tothread(L, 1);
  const int results = resume(L, co, lua_gettop(L) - 1);
  if (results < 0) {
    lua_pushboolean(L, 0);
    lua_insert(L, -2);
    return 2;
  }
  lua_pushboolean(L, 1);
  lua_insert(L, -(results + 1));
  return results + 1;
}

// Closes the pending to-be-closed variables of a coroutine that failed;
// returns its status, with the error object on top of co.
int close_thread(lua_State* co, lua_State* from) {
#if defined(LUA_VERSION_RELEASE_NUM) && LUA_VERSION_RELEASE_NUM >= 50406
  return lua_closethread(co, from);
#else
  (void)from;
  return lua_resetthread(co);
#endif
}

// The function coroutine.wrap returns: resumes its coroutine, and raises
// its error (with the caller's position in front of a message) in the
// caller.
int call_wrapped(lua_State* L) {
  lua_State* co = lua_tothread(L, lua_upvalueindex(1));
  const int results = resume(L, co, lua_gettop(L));
  if (results >= 0) return results;
  int status = lua_status(co);
  if (status != LUA_OK && status != LUA_YIELD) {
    status = close_thread(co, L);
    lua_xmove(co, L, 1);
  }
  if (status != LUA_ERRMEM && lua_type(L, -1) == LUA_TSTRING) {
    luaL_where(L, 1);
    lua_insert(L, -2);
    lua_concat(L, 2);
  }
  return lua_error(L);
}

// coroutine.wrap(f)
int tracked_wrap(lua_State* L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_State* co = lua_newthread(L);
  lua_pushvalue(L, 1);
  lua_xmove(L, co, 1);
  lua_pushcclosure(L, call_wrapped, 1);
  return 1;
}

}  // namespace

void install_coroutine_tracking(lua_State* L) {
  if (!state_data(L)) return;
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  if (lua_getfield(L, -1, LUA_COLIBNAME) == LUA_TTABLE) {
    lua_pushcfunction(L, tracked_resume);
    lua_setfield(L, -2, "resume");
    lua_pushcfunction(L, tracked_wrap);
    lua_setfield(L, -2, "wrap");
  }
  lua_pop(L, 2);
}

void arm_interrupt(lua_State* main, lua_Hook hook) {
  StateData* data = state_data(main);
  if (!data) {
    lua_sethook(main, hook, kHookMask, 1);
    return;
  }
  // Announced first: leave() must not let the coroutine we are about to
  // set the hook on go before we are done (see leave). Only atomics and
  // lua_sethook: a signal handler may call this.
  data->arming.fetch_add(1);
  data->interrupt_requested.store(true);  // tensor work (tensor/interrupt.h)
  data->last_interrupt.store(hook);
  data->pending_interrupt.store(hook);
  lua_sethook(main, hook, kHookMask, 1);
  if (lua_State* co = data->running_coroutine.load()) lua_sethook(co, hook, kHookMask, 1);
  data->arming.fetch_sub(1);
}

void disarm_interrupt(lua_State* main, lua_Hook hook) {
  if (StateData* data = state_data(main)) {
    data->pending_interrupt.store(nullptr);
    data->interrupt_requested.store(false);
  }
  if (lua_gethook(main) == hook) lua_sethook(main, nullptr, 0, 0);
}

void interrupt_delivered(lua_State* thread) {
  StateData* data = state_data(thread);
  if (!data) return;
  data->interrupt_requested.store(false);
  const lua_Hook pending = data->pending_interrupt.load();
  if (!data->interrupt_stays_armed && pending && lua_gethook(thread) == pending) {
    lua_sethook(thread, nullptr, 0, 0);
  }
}

const InterruptFlag* interrupt_flag(lua_State* L) {
  StateData* data = state_data(L);
  return data ? &data->interrupt_requested : nullptr;
}

}  // namespace lazylua
