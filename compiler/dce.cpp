// dce.cpp - dead-code elimination: a backward walk marks what the outputs
// use, a forward walk copies it.
#include "compiler/dce.h"

#include "compiler/rewriter.h"

namespace lazylua::compiler {

Program dce(const Program& program) {
  const int count = static_cast<int>(program.instructions.size());
  std::vector<bool> live(static_cast<size_t>(count), false);
  for (int output : program.outputs) live[output] = true;
  // Inputs come before their users, so one backward sweep sees every user
  // of an instruction before the instruction itself.
  for (int i = count - 1; i >= 0; i--) {
    if (!live[i]) continue;
    for (int input : program.instructions[i].inputs) live[input] = true;
  }
  Rewriter rewriter(program);
  for (int i = 0; i < count; i++) {
    if (live[i]) rewriter.copy(i);
  }
  return rewriter.finish();
}

}  // namespace lazylua::compiler
