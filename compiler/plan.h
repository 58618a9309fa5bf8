// plan.h - how a compiled program runs: buffers ("slots"), and steps that
// fill them (a generated C kernel, a BLAS product, or an eager kernel for an
// op the compiler does not lower).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compiler/memory_plan.h"
#include "compiler/program.h"
#include "tensor/kernels/conv.h"

namespace lazylua::compiler {

struct ScanPlan;

// A buffer that holds one instruction's value while the plan runs: always
// contiguous and row-major. Inputs are the run's inputs (parameters and
// scalars, made contiguous by the executor); the others are allocated by the
// executor before the step that writes them.
struct Slot {
  DType dtype;
  Shape shape;
  int instruction = -1;  // the Program instruction whose value this is
  int input_index = -1;  // >= 0: this slot is run input number input_index
};

// The C signature of every generated kernel:
//   int NAME(char* const* buffers, int64_t begin, int64_t end);
// `buffers[k]` is the data of slot `Step::slots[k]`; the kernel does the
// iterations [begin, end) of its outer loop (the executor splits
// [0, Step::iterations) across threads, at least Step::grain per chunk).
// It returns 0, or an error code made by error_code() below.
enum class KernelError : int {
  integer_divide_by_zero = 1,
  integer_modulo_by_zero = 2,
  index_out_of_range = 3,      // gather, index_select, scatter_add
  negative_integer_power = 4,  // an integer to a negative power (base not 1 or -1)
  no_integer_value = 5,        // a cast of NaN, +-inf or out-of-range floats to an integer
};
constexpr int error_code(int instruction, KernelError error) {
  return (instruction + 1) * 8 + static_cast<int>(error);
}

// A clamp that a convolution's step applies to each value it writes
// (compiler/conv_epilogue.h). In a Step, `operand` is the step's input
// holding the other operand (a 0-d value), or a constant (an Op::constant:
// 0, -0 or 1); in a FusedStep, the operand's instruction (-1 for relu,
// which has none).
struct EpilogueStage {
  static constexpr int kConstantZero = -1, kConstantOne = -2, kConstantMinusZero = -3;
  static double constant_value(int operand) {
    return operand == kConstantOne ? 1.0 : operand == kConstantMinusZero ? -0.0 : 0.0;
  }
  ConvEpilogue::Kind kind = ConvEpilogue::Kind::relu;
  bool value_first = true;  // maximum, minimum: the convolution's value is operand a
  int operand = -1;
};

struct Step {
  // library: a convolution or pooling kernel shared with eager mode.
  enum class Kind { kernel, matmul, library, reference, scan };
  Kind kind = Kind::reference;
  std::string function;    // kernel: the C function's name in Plan::source
  int64_t iterations = 0;  // kernel: trip count of the outer loop
  int64_t grain = 1;       // kernel: fewest iterations worth a thread
  std::vector<int> slots;  // kernel: its buffers in argument order;
                           // matmul/library/reference: input slots, then the output slot
  // kernel (empty, or per argument): bytes added to the slot's data pointer
  // before the call. A cat writes each input's region through a pointer
  // moved to the region, so that every same-shaped region is one function
  // rather than one per offset (issue 12: 10,000 inputs made 10,000).
  std::vector<int64_t> byte_offsets;
  int instruction = -1;      // matmul/library/reference: the instruction computed;
                             // kernel: the first instruction it covers
  std::vector<int> written;  // kernel: the slots it writes
  // kernel: the instructions whose values it writes (the fused group's
  // roots), for naming it by their ops and lines (profiler).
  std::vector<int> roots;
  // kernel: slots an elementwise kernel reads only at the element it is
  // writing, so an output may take over such a slot's memory (donation).
  std::vector<int> same_element_reads;
  bool can_fail = false;  // it may return an error (checked integer division)
  int64_t byte_offset(size_t argument) const {
    return byte_offsets.empty() ? 0 : byte_offsets[argument];
  }
  // matmul: bit k set when input k is read transposed from its slot (BLAS's
  // transpose flag, no copy).
  uint8_t transposed_inputs = 0;
  // library (a convolution): the clamps it applies; their operands follow
  // the instruction's inputs in `slots`, before the output slot.
  std::vector<EpilogueStage> epilogue;
  // scan: slots are the inputs (carries, xs, captured), the packed value,
  // then one slot per used output (`parts`: which output each one is).
  std::shared_ptr<ScanPlan> scan;
  std::vector<int> parts;
};

struct Plan {
  std::vector<Slot> slots;
  std::vector<Step> steps;   // in order
  std::vector<int> outputs;  // the slot of each Program output, in order
  std::string source;        // C source of every kernel (empty if none)
  int kernel_count = 0;      // with the kernels of scan bodies
  int function_count = 0;    // distinct C functions among them (identical kernels share one)
  std::string summary;       // one line: ops and shapes, for cache records
  // Which slots share buffers and when each is let go: computed once, when
  // the plan is lowered or read from the disk cache (not stored there).
  MemoryPlan memory;
  // Filled when the compiled code is loaded: each kernel step's function
  // (null for other steps).
  std::vector<void*> functions;
};

// A scan step's body: its own program and plan, whose kernels live in the
// same C source under their own names; run `body.length` times.
struct ScanPlan {
  Ref<ScanBody> body;
  Program program;
  Plan plan;
};

}  // namespace lazylua::compiler
