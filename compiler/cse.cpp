// cse.cpp - common-subexpression elimination by hashing each instruction's
// renamed form.
#include "compiler/cse.h"

#include <algorithm>

#include "compiler/rewriter.h"

namespace lazylua::compiler {
namespace {

// How many of attrs an op reads (the rest may hold anything).
int meaningful_attrs(const Instruction& instruction, const Rewriter& rewriter) {
  const int input_rank =
      instruction.inputs.empty() ? 0 : rewriter.at(instruction.inputs[0]).shape.rank();
  return attr_count(instruction.op, input_rank);
}

// Everything that decides an instruction's value. Parameters and scalars
// differ by input_index; constants never get here (the Rewriter shares
// them).
bool same_computation(const Instruction& a, const Instruction& b, int attr_count) {
  return a.op == b.op && a.sub_op == b.sub_op && a.dtype == b.dtype && a.shape == b.shape &&
         a.input_index == b.input_index && a.inputs == b.inputs && a.body.get() == b.body.get() &&
         std::equal(a.attrs.values, a.attrs.values + attr_count, b.attrs.values);
}

uint64_t hash_computation(const Instruction& instruction, int attr_count) {
  uint64_t hash = hash_mix(static_cast<uint64_t>(instruction.op), instruction.sub_op);
  hash = hash_mix(hash, static_cast<uint64_t>(instruction.dtype));
  for (int64_t extent : instruction.shape) hash = hash_mix(hash, static_cast<uint64_t>(extent));
  for (int k = 0; k < attr_count; k++) {
    hash = hash_mix(hash, static_cast<uint64_t>(instruction.attrs.values[k]));
  }
  hash = hash_mix(hash, static_cast<uint64_t>(instruction.input_index));
  for (int input : instruction.inputs) hash = hash_mix(hash, static_cast<uint64_t>(input));
  return hash;
}

// The instructions of the new program by hash: open addressing in a flat
// table (a node-based map costs an allocation and a cache miss per entry,
// which dominated CSE on large programs).
class Seen {
 public:
  explicit Seen(size_t capacity) {
    size_t size = 16;
    while (size < 2 * capacity) size *= 2;
    slots_.assign(size, Slot{0, -1});
  }
  // The position of an earlier instruction with this hash for which
  // `equal(position)` holds; if none, records `position` and returns -1.
  template <typename Equal>
  int find_or_add(uint64_t hash, int position, Equal&& equal) {
    const size_t mask = slots_.size() - 1;
    for (size_t slot = hash & mask;; slot = (slot + 1) & mask) {
      if (slots_[slot].position < 0) {
        slots_[slot] = Slot{hash, position};
        return -1;
      }
      if (slots_[slot].hash == hash && equal(slots_[slot].position)) return slots_[slot].position;
    }
  }

 private:
  struct Slot {
    uint64_t hash;
    int position;
  };
  std::vector<Slot> slots_;
};

}  // namespace

Program cse(const Program& program) {
  Rewriter rewriter(program);
  Seen seen(program.instructions.size());
  for (int i = 0; i < rewriter.source_size(); i++) {
    if (program.instructions[i].op == Op::constant) {
      rewriter.copy(i);  // the rewriter already shares equal constants
      continue;
    }
    if (program.instructions[i].op == Op::collective) {
      rewriter.copy(i);  // each is one MPI call that every rank makes: never merged
      continue;
    }
    const Instruction instruction = rewriter.renamed(i);
    const int attr_count = meaningful_attrs(instruction, rewriter);
    const int existing = seen.find_or_add(
        hash_computation(instruction, attr_count), rewriter.size(),
        [&](int other) { return same_computation(instruction, rewriter.at(other), attr_count); });
    if (existing >= 0) {
      rewriter.set_value(i, existing);
    } else {
      rewriter.copy(i);
    }
  }
  return rewriter.finish();
}

}  // namespace lazylua::compiler
