// coroutines.h - interrupts that reach code running inside coroutines.
//
// Ctrl-C in the CLI and lazylua_interrupt in a host stop the running chunk
// the way lua.c does: they set a hook (lua_sethook), which raises
// "interrupted!" at the next instruction. But a hook belongs to one Lua
// thread, and a busy loop inside a coroutine
//   coroutine.wrap(function() while true do end end)()
// never runs an instruction of the main thread again. So lazylua's
// coroutine.resume and coroutine.wrap (same behaviour and messages as
// Lua's) remember which coroutine is running, and an interrupt sets its
// hook on that coroutine too; a coroutine resumed, or returned to, while
// an interrupt is pending gets the hook as well.
#pragma once

#include <lua.hpp>

#include "tensor/interrupt.h"

namespace lazylua {

struct StateData;

// Replaces coroutine.resume and coroutine.wrap of L (a state with
// StateData, after luaL_openlibs) by the tracking versions.
void install_coroutine_tracking(lua_State* L);

// Sets `hook` (every instruction) on L's main thread `main` and on the
// coroutine running now, and keeps it pending for coroutines resumed
// later. Async-signal-safe, and safe from another OS thread while the
// state runs (lazylua_interrupt).
void arm_interrupt(lua_State* main, lua_Hook hook);

// Ends the pending interrupt and takes `hook` off the main thread (if it is
// still there). A coroutine that still has it loses it when next resumed.
void disarm_interrupt(lua_State* main, lua_Hook hook);

// Tensor work running on `thread` (a sync, a long kernel, a sync compile)
// stopped for the pending interrupt, and the caller is about to raise
// "interrupted!" in its place, as the hook would have: clears the tensor
// flag, and takes the hook off `thread` unless the state's interrupts stay
// armed (StateData::interrupt_stays_armed). A state without StateData has
// no flag, so nothing to do.
void interrupt_delivered(lua_State* thread);

// The interrupt flag of L's state, for InterruptScope (null: none).
const InterruptFlag* interrupt_flag(lua_State* L);

}  // namespace lazylua
