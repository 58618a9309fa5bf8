// conv_epilogue.h - folds the activation that follows a convolution into it.
//
// Image models follow a convolution with ReLU, ReLU6 (ONNX's Clip, which
// the importer records as maximum, then minimum, with 0-d bounds) or SiLU
// (EfficientNet; PyTorch exports it as Sigmoid and Mul). As ops of their own
// they are a kernel of their own: a second pass over the convolution's
// output, 18% of MobileNetV2's time at batch 8. Folded, the convolution
// applies them to each block it writes while the block is in cache
// (tensor/kernels/conv.h, ConvEpilogue, computing what the elementwise ops
// compute), and the kernel and the convolution's own slot go. Eager mode
// runs the ops one by one and gets the same bits.
#pragma once

#include "compiler/fuse.h"

namespace lazylua::compiler {

// In `fusion` (fuse_program's for `program`): an f32 convolution followed
// by a chain of at most ConvEpilogue::kMaxStages stages, each a relu,
// maximum or minimum op (the other operand a 0-d f32 leaf) that is the only
// user of the value before it, or a mul of that value and its sigmoid, its
// only two users (silu), the last written by a kernel step of its own, takes
// the chain as its epilogue and writes the chain's value; that kernel step
// goes.
void fold_conv_epilogues(const Program& program, Fusion& fusion);

// What a library step computes from its input slots' values (`inputs`:
// every slot but the output): its instruction, with the step's epilogue if
// it has one (the bounds read from their slots at each run).
Array evaluate_library_step(const Step& step, const Instruction& instruction,
                            const std::vector<Array>& inputs);

}  // namespace lazylua::compiler
