// cse.h - common-subexpression elimination.
//
// Instructions that compute the same thing from the same inputs become one:
// same op, sub-op, dtype, shape, the attributes that op reads, and inputs.
// Parameters and scalars are the same only when they are the same run input
// (input_index); constants when they hold the same value of the same dtype.
// The first instruction of a kind stays (its source location too).
#pragma once

#include "compiler/program.h"

namespace lazylua::compiler {

Program cse(const Program& program);

}  // namespace lazylua::compiler
