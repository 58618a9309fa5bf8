// passes.h - the optimization passes (docs/architecture.md §5, stage 3), in the order
// they run.
//
//   Program program = program_from_graph(graph);
//   Program optimized = optimize(program, context->debug_level);
//   // interpret(optimized, program_inputs(graph)) == interpret(program, ...)
//
// Every pass is exact (bitwise the same outputs, NaN and -0 included), keeps
// each leaf's input_index (a run passes the same inputs), and never adds
// instructions.
#pragma once

#include "compiler/program.h"

namespace lazylua::compiler {

// Runs CSE, constant folding, algebraic simplification, CSE again (the
// rewrites make equal instructions) and dead-code elimination. With
// debug_level >= 2, writes the program after each pass to stderr.
Program optimize(const Program& program, int debug_level);

}  // namespace lazylua::compiler
