// fold_constants.h - constant folding.
//
// The IR can spell only the constants 0 and 1 (docs/architecture.md §3: they are baked
// in, every other number is a run input). So an instruction is folded when
// its value is known at compile time and is 0, -0 or 1 in every element:
// `1 + 0` becomes the constant 1 of the add's dtype, and a known value of a
// larger shape becomes expand(constant). `1 + 1` stays, as 2 has no
// literal, but its value is still known, so `(1 + 1) - 1` folds to 1.
// Values are computed by the eager kernels (evaluate_instruction), and only
// with ops whose result does not depend on how a kernel is vectorized.
#pragma once

#include "compiler/program.h"

namespace lazylua::compiler {

Program fold_constants(const Program& program);

}  // namespace lazylua::compiler
