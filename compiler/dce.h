// dce.h - dead-code elimination.
//
// Keeps only the instructions the outputs need. Unused parameters and
// scalars go too, but the leaves that stay keep their input_index (and the
// program its input_count): a run still passes every input, in order.
#pragma once

#include "compiler/program.h"

namespace lazylua::compiler {

Program dce(const Program& program);

}  // namespace lazylua::compiler
