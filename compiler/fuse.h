// fuse.h - which values a compiled program stores, and the steps that
// compute them.
//
// Elementwise ops, broadcasts and views are inlined into the loops of the
// values that need them; a value gets memory (a slot) only when it must:
// a run input, a program output, the result of a reduction, softmax, matmul
// or an op without a lowering, an input of a matmul or of such an op, the
// input of a reshape that strides cannot express, or an expensive value
// that several kernels would otherwise recompute.
#pragma once

#include <vector>

#include "compiler/plan.h"
#include "compiler/program.h"

namespace lazylua::compiler {

// How one instruction runs in a compiled program.
enum class Lowering {
  input,       // parameter or scalar: a slot the executor fills
  inlined,     // elementwise op, view, constant, gather, index_select or a scatter_add
               // of few terms: index arithmetic in a loop
  reduce,      // a reduction kernel (the producers fused into its reads)
  softmax,     // softmax or log-softmax over the last dim: one kernel
  arg_reduce,  // argmax/argmin: a reduction kernel keeping the first best position
  cumsum,      // running sums along a dim: a kernel of lines or columns
  scatter,     // scatter_add of many terms: a kernel adding each line's terms
  assemble,    // cat, slice_update, select_update: a kernel per region written (regions of
               // one shape share one C function: the region's offset is in its pointer)
  matmul,      // a BLAS call
  library,     // convolution, pooling or argsort: the shared kernel of tensor/kernels/conv.cpp
               // or sort.cpp
  reference,   // the eager kernel, run inside the plan
  scan,        // a loop running the body's own plan (tensor/scan.h)
  scan_part,   // an output of a scan: a view its scan step sets
};
Lowering lowering_of(const Program& program, int instruction);
// What runs a step of this lowering, for summaries: "kernel" (generated C),
// "blas", "library", "eager" or "scan".
const char* runner_name(Lowering lowering);

struct FusedStep {
  Lowering lowering = Lowering::inlined;  // inlined: an elementwise kernel
  // The instructions it writes: elementwise kernels may write several
  // values of one shape in one loop; every other step writes one.
  std::vector<int> roots;
  // library (a convolution): the clamps folded into it (conv_epilogue.h);
  // it then writes `output`, the last clamp's value, in place of its root.
  std::vector<EpilogueStage> epilogue;
  int output = -1;
  int written() const { return output >= 0 ? output : roots[0]; }
};

struct Fusion {
  std::vector<bool> materialized;  // per instruction: it has a slot
  std::vector<FusedStep> steps;    // in execution order
};

Fusion fuse_program(const Program& program);

// For an input of a matmul: the instruction it transposes (a permute that
// swaps the last two dims), which BLAS reads with its transpose flag
// instead of a copy; -1 for any other input.
int blas_transposed_source(const Program& program, int input);

}  // namespace lazylua::compiler
