// main.cpp - entry point of the `lazylua` program.
#include "interp/cli.h"
#include "interp/embedded_stdlib.h"

int main(int argc, char** argv) {
  // The program's scripts say require "nn"; hosts and stock Lua say
  // require "lazylua.nn" (the short names are this program's alone).
  lazylua::enable_short_stdlib_names();
  return lazylua::run_cli(argc, argv);
}
