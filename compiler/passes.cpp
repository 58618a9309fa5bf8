// passes.cpp - the straight list of optimization passes.
#include "compiler/passes.h"

#include <cstdio>

#include "compiler/cse.h"
#include "compiler/dce.h"
#include "compiler/fold_constants.h"
#include "compiler/simplify.h"

namespace lazylua::compiler {
namespace {

// LAZYLUA_DEBUG=2 and above: the program as each pass leaves it.
Program dumped(Program program, const char* pass, int debug_level) {
  if (debug_level >= 2) {
    fmt::print(stderr, "-- after {} ({} instructions)\n{}", pass, program.instructions.size(),
               program.text());
  }
  return program;
}

}  // namespace

Program optimize(const Program& program, int debug_level) {
  Program result = dumped(cse(program), "cse", debug_level);
  result = dumped(fold_constants(result), "fold_constants", debug_level);
  result = dumped(simplify(result), "simplify", debug_level);
  result = dumped(cse(result), "cse", debug_level);
  result = dumped(dce(result), "dce", debug_level);
  return result;
}

}  // namespace lazylua::compiler
