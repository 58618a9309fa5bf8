// donate.cpp - which outputs a plan computes into donated input buffers.
//
// An optimizer step reads each weight and writes its new value: with the
// weight's buffer donated (Graph::donated), the kernel that writes the new
// value can write it over the old one, so a step allocates no new memory
// for its parameters and the weights stay where the caches have them.
//
// The choice is made from the program and its fusion, before codegen, so
// that the C source is generated once, with the donations in it. It needs
// to know what each step of the plan-to-be reads, writes and whether it can
// fail; that follows from the fusion as codegen lays steps out (one step
// per fused step, but two for a reduction over everything in chunks).
#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "compiler/codegen.h"
#include "compiler/kernel_graph.h"
#include "tensor/eager_ops.h"

namespace lazylua::compiler {

namespace {

// What one step of the plan will touch, by instruction (every instruction
// it names has a slot of its own before donation).
struct Access {
  bool kernel = false;    // a generated kernel: the only kind that writes into a donor
  bool fallible = false;  // it may fail, or runs eager or library code (which may)
  std::vector<int> used;  // read or written
  std::vector<int> written;
  // An elementwise kernel: its roots, from which AccessPlanner::
  // same_element_reads tells the inputs read only at the element being
  // written (Step::same_element_reads). That builds the kernel's graph, so
  // it is asked only where such an input could take an output.
  std::vector<int> elementwise_roots;
};

// Whether a kernel computing `instruction` checks for an error (the flags
// of KernelWriter::node_code, gather_code and scatter_code).
bool checked_in_kernel(const Program& program, const Instruction& instruction) {
  auto dtype_of = [&](int k) { return program.instructions[instruction.inputs[k]].dtype; };
  switch (instruction.op) {
    case Op::gather:
    case Op::index_select:
      return true;
    case Op::scatter_add:  // one check per term
      return program.instructions[instruction.inputs[1]].shape[instruction.attrs.values[0]] > 0;
    case Op::binary: {
      const auto op = static_cast<BinaryOp>(instruction.sub_op);
      if (op != BinaryOp::floordiv && op != BinaryOp::mod && op != BinaryOp::pow) return false;
      return !is_floating(ops::binary_compute_dtype(op, promote(dtype_of(0), dtype_of(1))));
    }
    case Op::cast:
      return is_floating(dtype_of(0)) && !is_floating(instruction.dtype) &&
             instruction.dtype != DType::boolean;
    default:
      return false;
  }
}

class AccessPlanner {
 public:
  AccessPlanner(const Program& program, const Fusion& fusion)
      : program_(program),
        fusion_(fusion),
        layouts_(compute_layouts(program, fusion.materialized)),
        seen_(program.instructions.size(), -1) {}

  std::vector<Access> run() {
    for (const FusedStep& fused : fusion_.steps) add(fused);
    return std::move(accesses_);
  }

  // As KernelWriter::elementwise builds its kernel.
  std::vector<int> same_element_reads(const std::vector<int>& roots) const {
    const Shape& shape = at(roots[0]).shape;
    KernelGraph graph(program_, layouts_, shape);
    const IndexMap identity = identity_map(shape);
    std::vector<int> values;
    for (int root : roots) {
      const int node = graph.compute(root, identity);
      graph.add_root(root, node);
      values.push_back(node);
    }
    Affine write{0, std::vector<int64_t>(shape.rank(), 0)};
    const Strides strides = contiguous_strides(shape);
    for (int d = 0; d < shape.rank(); d++) write.coef[d] = shape[d] == 1 ? 0 : strides[d];
    std::vector<int> reads;
    for (const auto& [base, only_same] : reads_at_written_element(graph, values, write)) {
      if (only_same) reads.push_back(base);
    }
    return reads;
  }

 private:
  const Instruction& at(int i) const { return program_.instructions[i]; }

  // The slots a kernel reads to compute `value` in its loop (the stored
  // values its inlined expression stops at), into access.used; and whether
  // that expression checks for errors. `computed`: the kernel computes
  // `value` itself even though it has a slot (it writes it).
  void walk(int value, bool computed, Access& access, bool& checked) {
    std::vector<int> stack{value};
    while (!stack.empty()) {
      const int i = stack.back();
      stack.pop_back();
      if (seen_[i] == mark_) continue;
      seen_[i] = mark_;
      if (fusion_.materialized[i] && !(computed && i == value)) {
        access.used.push_back(i);
        continue;
      }
      checked = checked || checked_in_kernel(program_, at(i));
      for (int input : at(i).inputs) stack.push_back(input);
    }
  }

  // A kernel writing `roots`, computed by expressions over `values` (roots
  // computed themselves, or inputs read through the loop).
  void kernel(const std::vector<int>& roots, const std::vector<int>& values, bool computed,
              bool checked) {
    Access access;
    access.kernel = true;
    mark_++;
    // A kernel of no elements computes nothing (KernelWriter::nothing).
    if (numel(at(roots[0]).shape) > 0) {
      for (int value : values) walk(value, computed, access, checked);
    }
    access.used.insert(access.used.end(), roots.begin(), roots.end());
    access.written = roots;
    access.fallible = checked;
    accesses_.push_back(std::move(access));
  }

  void add(const FusedStep& fused) {
    const int root = fused.roots[0];
    const Instruction& instruction = at(root);
    switch (fused.lowering) {
      case Lowering::inlined:
        kernel(fused.roots, fused.roots, true, false);
        if (numel(instruction.shape) > 0) accesses_.back().elementwise_roots = fused.roots;
        break;
      case Lowering::reduce:
        reduce(root);
        break;
      case Lowering::softmax:
      case Lowering::arg_reduce:
      case Lowering::cumsum:
        kernel({root}, {instruction.inputs[0]}, false, false);
        break;
      case Lowering::scatter:  // checks every index
        kernel({root}, instruction.inputs, false, true);
        break;
      case Lowering::assemble:
        kernel({root}, assembled_parts(instruction), false, false);
        break;
      case Lowering::matmul:
      case Lowering::library:
      case Lowering::reference: {
        Access access;
        access.fallible = fused.lowering != Lowering::matmul;
        for (int input : instruction.inputs) {
          const int source = fused.lowering == Lowering::matmul && !fusion_.materialized[input]
                                 ? blas_transposed_source(program_, input)
                                 : -1;
          access.used.push_back(source >= 0 ? source : input);
        }
        for (const EpilogueStage& stage : fused.epilogue) {
          if (stage.operand >= 0) access.used.push_back(stage.operand);
        }
        access.used.push_back(fused.written());
        access.written = {fused.written()};
        accesses_.push_back(std::move(access));
        break;
      }
      case Lowering::scan: {
        Access access;
        access.fallible = true;  // the body may fail
        access.used = instruction.inputs;
        access.used.push_back(root);
        for (size_t i = 0; i < program_.instructions.size(); i++) {
          const Instruction& part = at(static_cast<int>(i));
          if (part.op != Op::scan_output || part.inputs[0] != root) continue;
          if (!fusion_.materialized[i]) continue;
          access.used.push_back(static_cast<int>(i));
        }
        access.written.assign(access.used.begin() + static_cast<long>(instruction.inputs.size()),
                              access.used.end());
        accesses_.push_back(std::move(access));
        break;
      }
      case Lowering::input:
      case Lowering::scan_part:
        break;
    }
  }

  // A reduction over everything in several chunks is two kernels: partial
  // results into a temporary slot (where any error arises), then their fold
  // into the output (KernelWriter::reduce).
  void reduce(int root) {
    const Instruction& reduction = at(root);
    const Shape& shape = at(reduction.inputs[0]).shape;
    const bool full = reduction.attrs.values[0] < 0 || shape.rank() == 0;
    if (!full || numel(reduction.shape) == 0 || reduce_partial_count(numel(shape)) == 1) {
      return kernel({root}, {reduction.inputs[0]}, false, false);
    }
    Access partials;
    partials.kernel = true;
    bool checked = false;
    mark_++;
    walk(reduction.inputs[0], false, partials, checked);
    partials.fallible = checked;
    accesses_.push_back(std::move(partials));
    kernel({root}, {}, false, false);
  }

  // The inputs of a cat, slice_update or select_update whose region is not
  // empty (KernelWriter::assemble skips the others).
  std::vector<int> assembled_parts(const Instruction& instruction) const {
    std::vector<int> parts;
    if (instruction.op == Op::cat) {
      for (int input : instruction.inputs) {
        if (numel(at(input).shape) > 0) parts.push_back(input);
      }
      return parts;
    }
    parts.push_back(instruction.inputs[0]);
    const int dim = static_cast<int>(instruction.attrs.values[0]);
    if (instruction.op == Op::select_update || at(instruction.inputs[1]).shape[dim] > 0) {
      parts.push_back(instruction.inputs[1]);
    }
    return parts;
  }

  const Program& program_;
  const Fusion& fusion_;
  const std::vector<Layout> layouts_;
  std::vector<int> seen_;  // per instruction: the walk that last saw it
  int mark_ = 0;
  std::vector<Access> accesses_;
};

// Slots one can take over another's memory: dtype and extents.
std::vector<int64_t> key_of(const Instruction& instruction) {
  std::vector<int64_t> key{static_cast<int64_t>(instruction.dtype)};
  key.insert(key.end(), instruction.shape.begin(), instruction.shape.end());
  return key;
}

}  // namespace

// An output takes over a donated input's slot when:
//  - the output is written by an elementwise kernel that reads the input
//    only at the element it is writing (or not at all), so each element
//    is read before it is overwritten;
//  - no later step reads the input, and the input is not itself an output;
//  - no step from that kernel on can fail: a failed run is repeated by
//    the reference interpreter, which needs the inputs as they were.
// Slots are named by their instruction: before donation every stored value
// has its own slot, numbered in instruction order.
std::vector<int> choose_donors(const Program& program, const Fusion& fusion) {
  if (std::none_of(program.donated.begin(), program.donated.end(), [](bool d) { return d; })) {
    return {};
  }
  AccessPlanner planner(program, fusion);
  const std::vector<Access> steps = planner.run();
  const int step_count = static_cast<int>(steps.size());
  const size_t count = program.instructions.size();
  // fallible_from[k]: some step at k or later can fail.
  std::vector<bool> fallible_from(step_count + 1, false);
  for (int k = step_count - 1; k >= 0; k--) {
    fallible_from[k] = fallible_from[k + 1] || steps[k].fallible;
  }
  // last_use[i]: the last step that uses i's slot.
  std::vector<int> last_use(count, -1);
  for (int k = 0; k < step_count; k++) {
    for (int i : steps[k].used) last_use[i] = k;
  }
  std::vector<bool> is_output(count, false);
  for (int i : program.outputs) is_output[i] = true;
  auto donatable = [&](int i) {
    const int input = program.instructions[i].input_index;
    return input >= 0 && program.donated[input] && !is_output[i];
  };
  // The donated inputs, by the step after which nothing reads them; a pool
  // per dtype and shape of those free at the current step, lowest first.
  // (A scan of every slot for every output made a mark_step of 10,000
  // values quadratic, issue 12.)
  std::vector<std::vector<int>> freed_after(step_count + 1);
  for (size_t i = 0; i < count; i++) {
    if (fusion.materialized[i] && donatable(static_cast<int>(i))) {
      freed_after[last_use[i] + 1].push_back(static_cast<int>(i));
    }
  }
  std::map<std::vector<int64_t>, std::set<int>> free;
  std::vector<int> donor(count, -1);
  std::vector<bool> taken(count, false);
  bool any = false;
  for (int k = 0; k < step_count; k++) {
    for (int i : freed_after[k]) {
      if (!taken[i]) free[key_of(program.instructions[i])].insert(i);
    }
    const Access& step = steps[k];
    if (!step.kernel || fallible_from[k]) continue;
    std::optional<std::vector<int>> same_element_reads;  // of this step, once asked (sorted)
    for (int written : step.written) {
      if (!is_output[written]) continue;
      const std::vector<int64_t> key = key_of(program.instructions[written]);
      // The lowest free input of the output's type, or one this very step
      // reads last, only at the element it writes.
      int chosen = -1;
      auto pool = free.find(key);
      if (pool != free.end() && !pool->second.empty()) chosen = *pool->second.begin();
      for (int i : step.used) {
        if (step.elementwise_roots.empty()) break;
        if (!donatable(i) || taken[i] || last_use[i] != k) continue;
        if (key_of(program.instructions[i]) != key || (chosen >= 0 && i > chosen)) continue;
        if (!same_element_reads) {
          same_element_reads = planner.same_element_reads(step.elementwise_roots);
        }
        if (std::binary_search(same_element_reads->begin(), same_element_reads->end(), i)) {
          chosen = i;
        }
      }
      if (chosen < 0) continue;
      if (pool != free.end()) pool->second.erase(chosen);
      donor[written] = chosen;
      taken[chosen] = true;
      any = true;
    }
  }
  if (!any) return {};
  return donor;
}

}  // namespace lazylua::compiler
