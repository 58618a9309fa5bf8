// repl.h - the interactive read-eval-print loop.
#pragma once

struct lua_State;

namespace lazylua {

// Runs the REPL on L until end of input, as lua.c's doREPL does. Uses
// readline (editing, history in LAZYLUA_HISTORY or ~/.lazylua_history, Tab
// completion, Ctrl-C discards the line) when stdin is a terminal, and plain
// line reads otherwise. As in lua.c, errors of chunks typed at the prompt
// are printed without the program name. Call it inside a protected call.
void run_repl(lua_State* L);

}  // namespace lazylua
