// lint.h - finds likely graph breaks in a Lua script without running it.
//
// A lazy tensor program is fast when each loop iteration records one graph
// and ends it once (tensor.mark_step(), or optim's step(), which ends with
// it). Reading a value inside the loop (`loss:item()`, `print(t)`, a tensor
// in an `if`) forces a sync of everything it depends on, every iteration;
// a loop that records and never ends the step grows one graph without
// bound. lazylua-lint reports both, reading the chunk as Lua's own parser
// compiled it (lua_bytecode.h):
//
//   train.lua:42:23: loss:item() syncs on every iteration of the loop at
//   line 30: log every N steps, or read it after mark_step
//
// What counts as a tensor is inferred along each function's instructions:
// results of `tensor.*` functions, of tensor methods, of arithmetic on a
// tensor, and of calls that take a tensor (model(x), criterion(y, t)). A
// read is reported only when it runs on every iteration, so the usual
// `if step % 100 == 0 then print(loss:item()) end` passes.
#pragma once

#include <string>
#include <vector>

#include "lint/lua_bytecode.h"

namespace lazylua::lint {

struct Finding {
  int line = 0;
  int column = 0;  // 1-based, of the name or keyword the message is about
  std::string message;
};

// The findings for `main` (compiled from `text`), ordered by line and column.
std::vector<Finding> lint_chunk(const Proto& main, const std::string& text);

}  // namespace lazylua::lint
