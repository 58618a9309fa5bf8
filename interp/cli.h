// cli.h - the `lazylua` program: the command line of the stock lua5.4.
#pragma once

struct lua_State;

namespace lazylua {

// Runs the program as lua.c's main does: parses the options, handles
// LUA_INIT, runs scripts, -e, -l, stdin and the REPL. Returns the exit status.
int run_cli(int argc, char** argv);

// The pieces below are shared with the REPL (repl.cpp), as in lua.c.

// Calls the function sitting below `nargs` arguments on top of the stack in
// protected mode, with a message handler that appends a traceback. Ctrl-C
// while it runs makes it fail with "interrupted!". Returns the pcall status;
// on error the message is left on top of the stack.
//
// As in lua.c, a second Ctrl-C before the chunk stops kills the program (a
// script stuck in a long C function), unless `from_repl`: there every Ctrl-C
// just asks again, so a person pressing it twice never loses the session.
int call_with_traceback(lua_State* L, int nargs, int nresults, bool from_repl = false);

// If `status` is an error, prints the message on top of the stack to stderr
// (prefixed by "progname: " unless progname is null) and pops it. Returns
// `status` unchanged.
int report_status(lua_State* L, int status, const char* progname);

// Prints "progname: message\n" (or just "message\n") to stderr.
void print_message(const char* progname, const char* message);

}  // namespace lazylua
