// codegen.h - the C source of a fused program's kernels, and the Plan that
// runs them (the driver in lower.h runs the stages before it).
//
// Each kernel is `int lazylua_kernel_N(char* const* buffers, int64_t begin,
// int64_t end)` (plan.h). Its outer loop is split by [begin, end); the
// inner loop runs over the last dim of what it writes (or reduces), reads
// every operand at an affine offset (views and broadcasts are strides,
// 0 for a broadcast), and is plain enough for the C compiler to vectorize.
// Kernel forms:
//  - elementwise: one or more outputs of one shape; the index space is
//    collapsed to as few dims as the operands allow (same-shape contiguous
//    operands give one flat loop) and cut into chunks of kChunk elements;
//    a loop that reads a transposed operand goes in tiles instead;
//  - cat, slice_update, select_update: elementwise kernels that write
//    regions of their output; the region's offset (and the lowest offset
//    each input is read at) goes into the pointers (Step::byte_offsets),
//    so regions of one shape are one C function however many there are;
//  - reduction over one dim: a line per output when the reduced elements
//    are adjacent in memory (vectorized folds of blocks), else columns
//    (a row of accumulators, vectorized along the outputs);
//  - reduction over everything: per-chunk partials in a temporary slot,
//    then a one-iteration kernel that folds them in a fixed order (so the
//    result does not depend on the thread count);
//  - softmax / log-softmax over the last dim: per row, the input is
//    computed into the output row, then max, exp + sum and scale passes run
//    over the row while it is in cache.
#pragma once

#include <functional>

#include "compiler/fuse.h"
#include "compiler/plan.h"

namespace lazylua::compiler {

// A scan body's own lowering (the driver, lower.cpp), with kernel names
// starting with `prefix`: codegen calls it at each scan step, where the
// prefix (the step's number) is known.
using ScanLowering = std::function<ScanPlan(const Ref<ScanBody>& body, const std::string& prefix)>;

// `donor` (empty, or per instruction): the input instruction whose slot an
// output instruction takes over (-1: its own slot), from choose_donors.
// Kernels are named `prefix`N; `standalone`: the source starts with the
// prelude and kernel math (a scan body's does not: it joins its parent's).
Plan generate_plan(const Program& program, const Fusion& fusion, const std::vector<int>& donor,
                   const std::string& prefix, bool standalone, const ScanLowering& lower_scan);

// How many times generate_plan has run in this process (scan bodies
// included): lets a test check that a compile generates its code once.
uint64_t generate_plan_count();

// Which outputs can be computed into the memory of a donated input
// (compiler/donate.cpp): empty when none. It reads the program and the
// fusion only, so that it runs before codegen and codegen runs once.
std::vector<int> choose_donors(const Program& program, const Fusion& fusion);

// The partial results of a reduction over all of `total` elements: more
// than one makes two kernels, a second one folding the partials in order.
int64_t reduce_partial_count(int64_t total);

// tensor/kernels/kernel_math.h, embedded at build time: the math functions the
// kernels call (ll_expf ...). Pasted into every source with kernels.
const char* kernel_math_source();

// The text every standalone source starts with: codegen_prelude() (codegen_c.h)
// and kernel_math_source(). The disk cache compiles it once per toolchain
// (precompiled_header.h).
const std::string& common_source_text();

}  // namespace lazylua::compiler
