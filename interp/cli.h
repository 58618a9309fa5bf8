// cli.h - the `lazylua` program: the command line of the stock lua5.4.
#pragma once

namespace lazylua {

// Runs the program as lua.c's main does: parses the options, handles
// LUA_INIT, runs scripts, -e, -l, stdin and the REPL. Returns the exit status.
int run_cli(int argc, char** argv);

}  // namespace lazylua
