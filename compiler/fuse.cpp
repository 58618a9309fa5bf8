// fuse.cpp - choosing the slots of a program and grouping its instructions
// into steps.
//
// Four passes over the instructions:
//  1. forced slots: inputs, outputs, results of non-inlined ops and the
//     inputs that a BLAS call or an eager kernel reads from memory;
//  2. forward: a reshape of a value that strides cannot express makes its
//     input a slot (reshape is affine only over contiguous memory);
//  3. backward: a value read by more than one kernel is stored when
//     recomputing it in each would cost more than storing it once, and an
//     integer // or % seen only in part (through a slice) is stored so that
//     every divisor is checked, as eager mode does;
//  4. forward: an expression of more than kMaxKernelOps ops has values in
//     it stored, so that no kernel grows past the C compiler's comfort.
// Then each stored value becomes a step, in program order; an elementwise
// kernel joins the previous one when both loop over the same shape and the
// new one reads the previous one's outputs only at the element it writes.
#include "compiler/fuse.h"

#include <algorithm>

#include "compiler/conv_epilogue.h"
#include "compiler/kernel_graph.h"

namespace lazylua::compiler {
namespace {

constexpr size_t kMaxKernelRoots = 16;
// The most ops one kernel computes (issue 12). The C compiler's time grows
// faster than the size of a function (a chain of 10,000 additions in one
// loop took it minutes), so a longer expression is cut: the value where the
// count passes the bound is stored, and the kernels after it read it back.
// Kernels of equal text are one C function, so a long chain of the same op
// compiles one piece. Training steps stay far below this.
constexpr int kMaxKernelOps = 256;

// Inlined ops that may raise an error (integer // and % by zero, integer
// powers with negative exponents, indices out of range): every element
// must be computed somewhere, as eager mode computes them all.
bool can_fail_inline(const Instruction& instruction) {
  if (is_indexed_read(instruction.op) || instruction.op == Op::scatter_add) return true;
  if (instruction.op != Op::binary || is_floating(instruction.dtype)) return false;
  return traits(static_cast<BinaryOp>(instruction.sub_op)).int_errors == OpIntErrors::may_fail;
}

bool has_index_dtype(const Program& program, int input) {
  const DType dtype = program.instructions[input].dtype;
  return dtype == DType::i64 || dtype == DType::i32;
}

// Ops worth storing rather than recomputing in a second kernel (the cost
// column of elementwise_ops.h).
bool is_expensive(const Instruction& instruction) {
  if (instruction.op == Op::unary) {
    return traits(static_cast<UnaryOp>(instruction.sub_op)).cost == OpCost::expensive;
  }
  if (instruction.op == Op::binary) {
    return traits(static_cast<BinaryOp>(instruction.sub_op)).cost == OpCost::expensive;
  }
  return false;
}

class Fuser {
 public:
  explicit Fuser(const Program& program)
      : program_(program),
        count_(static_cast<int>(program.instructions.size())),
        materialized_(count_, false),
        users_(count_) {
    for (int i = 0; i < count_; i++) {
      for (int input : program.instructions[i].inputs) {
        auto& users = users_[input];
        if (users.empty() || users.back() != i) users.push_back(i);
      }
    }
  }

  Fusion run() {
    force_slots();
    store_indexed_sources();
    store_reshape_inputs();
    store_shared_values();
    bound_kernel_sizes();
    Fusion fusion;
    fusion.materialized = materialized_;
    fusion.steps = group_steps();
    fold_conv_epilogues(program_, fusion);
    return fusion;
  }

 private:
  const Instruction& at(int i) const { return program_.instructions[i]; }

  void force_slots() {
    for (int i = 0; i < count_; i++) {
      const Lowering lowering = lowering_of(program_, i);
      if (lowering == Lowering::inlined) continue;
      materialized_[i] = true;
      if (lowering == Lowering::matmul || lowering == Lowering::library ||
          lowering == Lowering::reference || lowering == Lowering::scan) {
        for (int input : at(i).inputs) {
          const int source =
              lowering == Lowering::matmul ? blas_transposed_source(program_, input) : -1;
          materialized_[source >= 0 ? source : input] = true;
        }
      }
    }
    for (int output : program_.outputs) materialized_[output] = true;
  }

  // gather and index_select read their input at computed positions: it
  // must be in memory (a slot, or a view of one).
  void store_indexed_sources() {
    std::vector<Layout> layouts = compute_layouts(program_, materialized_);
    for (int i = 0; i < count_; i++) {
      if (!is_indexed_read(at(i).op)) continue;
      if (lowering_of(program_, i) != Lowering::inlined) continue;
      const int input = at(i).inputs[0];
      if (layouts[input].defined()) continue;
      store(input, layouts);
    }
  }

  // Materializes instruction i and updates `layouts` where that changes
  // them: i and the views over it. (Recomputing every layout after each
  // store made a graph of 10,000 reshapes quadratic, issue 12.)
  void store(int i, std::vector<Layout>& layouts) {
    materialized_[i] = true;
    std::vector<int> stack{i};
    while (!stack.empty()) {
      const int j = stack.back();
      stack.pop_back();
      layouts[j] = layout_of(program_, materialized_, layouts, j);
      for (int user : users_[j]) {
        if (!materialized_[user] && is_view(at(user).op)) stack.push_back(user);
      }
    }
  }

  void store_reshape_inputs() {
    std::vector<Layout> layouts = compute_layouts(program_, materialized_);
    for (int i = 0; i < count_; i++) {
      const Instruction& instruction = at(i);
      if (instruction.op != Op::reshape) continue;
      const int input = instruction.inputs[0];
      const Shape& from = at(input).shape;
      if (layouts[input].defined() && reshape_is_view(layouts[input], from, instruction.shape)) {
        continue;
      }
      if (reshape_is_squeeze(from, instruction.shape)) continue;
      store(input, layouts);
    }
  }

  // Whether recomputing `i` wherever it is needed is about as cheap as
  // reading it back: a few cheap ops over the values below it.
  bool is_cheap(int i) const {
    std::vector<int> stack{i}, seen;
    int ops = 0;
    while (!stack.empty()) {
      const int j = stack.back();
      stack.pop_back();
      if (std::find(seen.begin(), seen.end(), j) != seen.end()) continue;
      seen.push_back(j);
      if (j != i && materialized_[j]) continue;
      const Instruction& instruction = at(j);
      if (is_expensive(instruction)) return false;
      if (is_elementwise(instruction) && instruction.op != Op::constant) ops++;
      if (is_indexed_read(instruction.op)) ops += 2;
      if (instruction.op == Op::scatter_add) {
        ops += static_cast<int>(at(instruction.inputs[1]).shape[instruction.attrs.values[0]]);
      }
      if (ops > 3 || seen.size() > 16) return false;
      for (int input : instruction.inputs) stack.push_back(input);
    }
    return true;
  }

  void store_shared_values() {
    // The kernels (stored values) that read each value, up to two of them.
    std::vector<std::vector<int>> readers(count_);
    std::vector<bool> partial(count_, false);
    for (int i = count_ - 1; i >= 0; i--) {
      for (int user : users_[i]) {
        const std::vector<int> from = materialized_[user] ? std::vector<int>{user} : readers[user];
        for (int reader : from) {
          auto& list = readers[i];
          if (list.size() < 2 && std::find(list.begin(), list.end(), reader) == list.end()) {
            list.push_back(reader);
          }
        }
        const Op op = at(user).op;
        partial[i] = partial[i] || op == Op::slice || op == Op::select ||
                     (!materialized_[user] && partial[user]);
      }
      if (materialized_[i] || lowering_of(program_, i) != Lowering::inlined) continue;
      if (can_fail_inline(at(i)) && partial[i]) {
        materialized_[i] = true;
      } else if (readers[i].size() > 1 && !is_cheap(i)) {
        materialized_[i] = true;
      }
    }
  }

  // The ops a kernel computes to produce instruction i at one element,
  // counting a value every time a path reaches it (an upper bound of the
  // kernel's distinct nodes), saturated above kMaxKernelOps.
  int own_ops(int i) const {
    const Instruction& instruction = at(i);
    if (is_elementwise(instruction)) return instruction.op == Op::constant ? 0 : 1;
    if (is_indexed_read(instruction.op)) return 2;
    if (instruction.op == Op::scatter_add && lowering_of(program_, i) == Lowering::inlined) {
      return 2 * static_cast<int>(at(instruction.inputs[1]).shape[instruction.attrs.values[0]]);
    }
    return 0;  // views, and the ops of other kernel forms (their own loops)
  }

  // In program order: an instruction whose inlined expression passes
  // kMaxKernelOps has its costliest inlined inputs stored until it fits.
  // Storing only ever adds layouts, so the earlier passes stay valid.
  void bound_kernel_sizes() {
    kernel_ops_.assign(count_, 0);
    for (int i = 0; i < count_; i++) {
      const Lowering lowering = lowering_of(program_, i);
      if (lowering == Lowering::input || lowering == Lowering::scan_part) continue;
      auto total = [&] {
        int ops = own_ops(i);
        for (int input : at(i).inputs) {
          if (!materialized_[input]) ops = std::min(ops + kernel_ops_[input], kMaxKernelOps + 1);
        }
        return ops;
      };
      int ops = total();
      while (ops > kMaxKernelOps) {
        int costliest = -1;
        for (int input : at(i).inputs) {
          if (materialized_[input] || kernel_ops_[input] == 0) continue;
          if (costliest < 0 || kernel_ops_[input] > kernel_ops_[costliest]) costliest = input;
        }
        if (costliest < 0) break;  // one op alone (a wide scatter_add): left as it is
        // A view costs what its source does: the source is stored, so that
        // a broadcast stores no more elements than it reads.
        int source = costliest;
        while (is_view(at(source).op) && !materialized_[at(source).inputs[0]] &&
               kernel_ops_[at(source).inputs[0]] > 0) {
          kernel_ops_[source] = 0;
          source = at(source).inputs[0];
        }
        materialized_[source] = true;
        ops = total();
      }
      kernel_ops_[i] = ops;
    }
  }

  std::vector<FusedStep> group_steps() const {
    const std::vector<Layout> layouts = compute_layouts(program_, materialized_);
    std::vector<FusedStep> steps;
    int last_ops = 0;  // the ops of the last step's kernel (as bound_kernel_sizes counts)
    for (int i = 0; i < count_; i++) {
      if (!materialized_[i]) continue;
      const Lowering lowering = lowering_of(program_, i);
      if (lowering == Lowering::input || lowering == Lowering::scan_part) continue;
      if (lowering == Lowering::inlined && !steps.empty() &&
          steps.back().lowering == Lowering::inlined &&
          last_ops + kernel_ops_[i] <= kMaxKernelOps && can_join(steps.back(), i, layouts)) {
        steps.back().roots.push_back(i);
        last_ops += kernel_ops_[i];
        continue;
      }
      FusedStep step;
      step.lowering = lowering;
      step.roots = {i};
      steps.push_back(std::move(step));
      last_ops = kernel_ops_[i];
    }
    return steps;
  }

  // One loop can write `root` after the kernel's roots when it has their
  // shape and reads them only where it writes (there it reads the value
  // computed in the loop, never the slot: KernelGraph::read).
  bool can_join(const FusedStep& kernel, int root, const std::vector<Layout>& layouts) const {
    const Shape& shape = at(root).shape;
    if (at(kernel.roots[0]).shape != shape) return false;
    // A bound on the values one loop writes: this check rebuilds the
    // kernel for every root, and the C compiler's alias analysis grows
    // with the square of a function's outputs (2000 results of one shape
    // made one kernel that took cc 14 s). Adam writes 3 per parameter.
    if (kernel.roots.size() >= kMaxKernelRoots) return false;
    KernelGraph graph(program_, layouts, shape);
    const IndexMap identity = identity_map(shape);
    for (int existing : kernel.roots) graph.add_root(existing, graph.compute(existing, identity));
    graph.compute(root, identity);
    return !graph.reads_own_output;
  }

  const Program& program_;
  const int count_;
  std::vector<bool> materialized_;
  std::vector<int> kernel_ops_;  // per instruction: ops of the kernel that computes it
  std::vector<std::vector<int>> users_;
};

}  // namespace

Lowering lowering_of(const Program& program, int index) {
  const Instruction& instruction = program.instructions[index];
  switch (instruction.op) {
    case Op::parameter:
    case Op::scalar:
      return Lowering::input;
    case Op::gather:
    case Op::index_select:
      return has_index_dtype(program, instruction.inputs[1]) ? Lowering::inlined
                                                             : Lowering::reference;
    case Op::scatter_add:
      if (!has_index_dtype(program, instruction.inputs[1]) ||
          !scatter_covers_lines(program, instruction)) {
        return Lowering::reference;
      }
      return scatter_is_inlined(program, instruction) ? Lowering::inlined : Lowering::scatter;
    case Op::arg_reduce: {
      // The arg of nothing is an error: left to eager code.
      const Shape& input = program.instructions[instruction.inputs[0]].shape;
      const int64_t dim = instruction.attrs.values[0];
      const int64_t extent = dim < 0 ? numel(input) : input.rank() == 0 ? 1 : input[dim];
      return extent == 0 ? Lowering::reference : Lowering::arg_reduce;
    }
    case Op::cumsum:
      return Lowering::cumsum;
    case Op::binary:
    case Op::constant:
    case Op::unary:
    case Op::where:
    case Op::cast:
    case Op::clamp:
    case Op::reshape:
    case Op::permute:
    case Op::slice:
    case Op::select:
    case Op::expand:
      return Lowering::inlined;
    case Op::reduce: {
      // max/min of nothing is an error (no identity): left to eager code.
      const auto op = static_cast<ReduceOp>(instruction.sub_op);
      const Shape& input = program.instructions[instruction.inputs[0]].shape;
      const int64_t dim = instruction.attrs.values[0];
      const int64_t extent = dim < 0 ? numel(input) : input.rank() == 0 ? 1 : input[dim];
      if ((op == ReduceOp::max || op == ReduceOp::min) && extent == 0) return Lowering::reference;
      return Lowering::reduce;
    }
    case Op::softmax: {
      const int rank = instruction.shape.rank();
      return rank > 0 && instruction.attrs.values[0] == rank - 1 ? Lowering::softmax
                                                                 : Lowering::reference;
    }
    case Op::matmul:
      return Lowering::matmul;
    case Op::conv:
    case Op::conv_grad_input:
    case Op::conv_grad_weight:
    case Op::max_pool2d:
    case Op::max_pool2d_grad:
    case Op::argsort:
    case Op::collective:
      return Lowering::library;
    case Op::cat:
    case Op::slice_update:
    case Op::select_update:
      return Lowering::assemble;
    case Op::scan:
      return Lowering::scan;
    case Op::scan_output:
      return Lowering::scan_part;
    default:
      return Lowering::reference;
  }
}

const char* runner_name(Lowering lowering) {
  return lowering == Lowering::matmul      ? "blas"
         : lowering == Lowering::library   ? "library"
         : lowering == Lowering::reference ? "eager"
         : lowering == Lowering::scan      ? "scan"
                                           : "kernel";
}

int blas_transposed_source(const Program& program, int input) {
  const Instruction& instruction = program.instructions[input];
  const int rank = instruction.shape.rank();
  if (instruction.op != Op::permute || rank < 2) return -1;
  for (int d = 0; d < rank; d++) {
    const int expected = d == rank - 2 ? rank - 1 : d == rank - 1 ? rank - 2 : d;
    if (instruction.attrs.values[d] != expected) return -1;
  }
  return instruction.inputs[0];
}

Fusion fuse_program(const Program& program) {
  return Fuser(program).run();
}

}  // namespace lazylua::compiler
