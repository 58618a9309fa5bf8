// repl_status.h - the REPL's lazy-tensor extras: a status line after a
// slow command that touched tensors, splitting its time into recording,
// compiling, running and syncs (as Torch7's trepl timed each command), and
// `%` shortcuts (no Lua chunk starts with `%`):
//
//   > for i = 1, 100 do w = w - x:t():matmul(x:matmul(w)) * 0.01 end
//   [0.21 s: record 0.01 s (500 ops); compile 0.15 s (1 new, 0 cached, 0 from disk);
//    run 0.05 s; 1 sync]
//   > %pending
#pragma once

#include <chrono>
#include <string>

#include <lua.hpp>

#include "tensor/context.h"

namespace lazylua {

struct CommandStart {
  std::chrono::steady_clock::time_point time;
  Metrics metrics;
};

// Taken before a command runs.
CommandStart start_command(lua_State* L);
// After it: the status line to show ("" when the command was fast, touched
// no tensors, or the line is turned off by `%status off` or
// LAZYLUA_REPL_STATUS=0). Dimmed when `colour`.
std::string command_status(lua_State* L, const CommandStart& start, bool colour);

// Runs a `%` line (`line` starts with '%'), printing what it shows.
void run_shortcut(lua_State* L, const char* line);

}  // namespace lazylua
