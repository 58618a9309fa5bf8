// lower.h - the lowering driver: a canonical program to a Plan and its C
// source, through the stages of docs/architecture.md §5 in order.
//
// Example (native_executor.cpp, on a compile-cache miss):
//   Lowered lowered = lower(program_from_graph(graph), {.debug_level = 2});
//   library = cache.build(key, lowered.plan.source, ...);   // the toolchain
//
// The stages, each one call in lower() and one LAZYLUA_DEBUG=2 line:
//   optimize      passes.h       CSE, folding, simplification, DCE
//   fuse          fuse.h         which values get slots; steps of kernels
//   choose donors donate.cpp     outputs computed over donated inputs
//   codegen       codegen.h      the plan and the C source, once
//   plan memory   memory_plan.h  which slots share buffers, when each is let go
// A scan body is lowered by the same function (codegen calls back into it
// with the body's kernel prefix); its lines name the prefix. The toolchain
// (compiling the source) is the caller's: a disk-cache hit skips lower().
#pragma once

#include <string>

#include "compiler/plan.h"
#include "compiler/program.h"

namespace lazylua::compiler {

// The C names of a program's kernels start with this (a scan body's add
// their step: lazylua_kernel_s3_0).
inline constexpr const char* kKernelPrefix = "lazylua_kernel_";

struct LowerOptions {
  int debug_level = 0;  // LAZYLUA_DEBUG: 2 prints a line per stage
  // false: the program is lowered as given (codegen tests of op forms that
  // the passes would fold away).
  bool optimize = true;
  std::string prefix = kKernelPrefix;  // of the kernels' C names
  // The source is a whole C file (a scan body's joins its parent's).
  bool standalone = true;
};

struct Lowered {
  Program program;  // as optimized: the program the plan runs
  Plan plan;
};

Lowered lower(const Program& canonical, const LowerOptions& options = {});

// A LAZYLUA_DEBUG=2 line for stage `stage` of the lowering of the kernels
// named `prefix`..., in one format: for lower()'s stages and the toolchain
// step that follows them (native_executor.cpp).
void print_stage(const std::string& prefix, const char* stage, double seconds,
                 const std::string& what);

}  // namespace lazylua::compiler
