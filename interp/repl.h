// repl.h - the interactive read-eval-print loop.
#pragma once

struct lua_State;

namespace lazylua {

// Runs the REPL on L until end of input. Uses readline (editing, history in
// LAZYLUA_HISTORY or ~/.lazylua_history, Tab completion) when stdin is a
// terminal, and plain line reads otherwise. `progname` prefixes messages.
void run_repl(lua_State* L, const char* progname);

}  // namespace lazylua
