// main.cpp - entry point of the `lazylua` program.
#include "interp/cli.h"

int main(int argc, char** argv) {
  return lazylua::run_cli(argc, argv);
}
