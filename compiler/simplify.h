// simplify.h - algebraic simplification.
//
// A table of rewrite rules (simplify.cpp), each exact: the result has the
// same dtype, shape and bits as before for every input, NaN, inf and -0
// included. So `x * 1`, `x / 1` and `x - 0` go for every dtype, but `x + 0`
// only where x cannot be -0 (-0 + 0 is +0), `x * 0` only for integers and
// bools (NaN * 0 is NaN, -1 * 0 is -0), and the reductions of broadcast
// copies only where no summation order is involved. When the operator
// promotes (an i64 tensor times the f32 constant 1), the result is a cast
// of x; when it broadcasts, an expand of x.
//
// Rules left out because they are not exact:
//  - float x*0, float x + (+0);
//  - float 0 - x as -x: +0 - (+0) is +0, and neg flips the sign bit of a
//    NaN where -0 - NaN keeps it;
//  - sum over a broadcast dim of extent n as n*x: n has no literal (only 0
//    and 1 are constants), and a float sum of n copies rounds differently;
//  - float sum and mean over an extent of 1 (0 + -0 is +0), mean of
//    broadcast copies, float max/min of a whole expand (which of +0 and -0
//    wins depends on the order);
//  - float pow(x, 1) (pow takes shortcuts), casts through a narrower type.
#pragma once

#include "compiler/program.h"

namespace lazylua::compiler {

Program simplify(const Program& program);

}  // namespace lazylua::compiler
