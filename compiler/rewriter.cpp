// rewriter.cpp - the new program a pass builds, and its renaming.
#include "compiler/rewriter.h"

#include <algorithm>
#include <cstring>

namespace lazylua::compiler {

Array constant_element(const Instruction& constant) {
  return ops::full(Shape{}, constant.constant, constant.dtype);
}

uint64_t element_bits(const Array& element) {
  uint64_t bits = 0;
  std::memcpy(&bits, element.raw_data(), static_cast<size_t>(dtype_size(element.dtype)));
  return bits;
}

bool is_constant_value(const Array& element) {
  const double value = ops::cast(element, DType::f64).data<double>()[0];
  return value == 0 || value == 1;
}

Rewriter::Rewriter(const Program& source)
    : source_(source),
      values_(source.instructions.size(), -1),
      source_uses_(source.instructions.size(), 0) {
  program_.input_count = source.input_count;
  program_.donated = source.donated;
  program_.instructions.reserve(source.instructions.size());
  for (const Instruction& instruction : source.instructions) {
    for (int input : instruction.inputs) source_uses_[input]++;
  }
  for (int output : source.outputs) source_uses_[output]++;
}

void Rewriter::set_value(int old_index, int new_index) {
  values_[old_index] = new_index;
  pending_[new_index] += source_uses_[old_index];
}

// Old instruction `old_index` is rewritten: its references to its inputs
// are no longer pending.
void Rewriter::consume_inputs(int old_index) {
  for (int input : source_.instructions[old_index].inputs) pending_[values_[input]]--;
}

Instruction Rewriter::renamed(int old_index) const {
  Instruction instruction = source_.instructions[old_index];
  for (int& input : instruction.inputs) {
    input = values_[input];
    LAZYLUA_ASSERT(input >= 0);
  }
  return instruction;
}

int Rewriter::emit(Instruction instruction) {
  for (int input : instruction.inputs) uses_[input]++;
  program_.instructions.push_back(std::move(instruction));
  uses_.push_back(0);
  pending_.push_back(0);
  return size() - 1;
}

int Rewriter::constant(const Array& element, SourceLocation location) {
  const std::pair<DType, uint64_t> key{element.dtype, element_bits(element)};
  for (const auto& [existing_key, position] : constants_) {
    if (existing_key == key) return position;
  }
  Instruction instruction;
  instruction.op = Op::constant;
  instruction.dtype = element.dtype;
  instruction.location = location;
  const double value = ops::cast(element, DType::f64).data<double>()[0];
  // Floats keep the sign of a zero; integers and bools are exact 0 or 1.
  instruction.constant = is_floating(element.dtype)
                             ? ops::Scalar::from_double(value)
                             : ops::Scalar::from_integer(static_cast<int64_t>(value));
  LAZYLUA_ASSERT(element.rank() == 0 && (value == 0 || value == 1));
  const int position = emit(std::move(instruction));
  constants_.push_back({key, position});
  return position;
}

void Rewriter::copy(int old_index) {
  const Instruction& old = source_.instructions[old_index];
  if (old.op == Op::constant) {
    const Array element = constant_element(old);
    if (is_constant_value(element)) {
      set_value(old_index, constant(element, old.location));
      return;
    }
  }
  consume_inputs(old_index);
  set_value(old_index, emit(renamed(old_index)));
}

// The inputs of old instruction `old_index` that nothing will use once it
// is replaced by `value`: no new instruction uses them, and no old one but
// this is still to be rewritten. Each pays for one instruction the
// replacement adds.
std::vector<int> Rewriter::inputs_left_dead(int old_index, int value) const {
  const Instruction renamed_instruction = renamed(old_index);
  const std::vector<int>& inputs = renamed_instruction.inputs;
  std::vector<int> dead;
  for (int position : inputs) {
    const auto references = std::count(inputs.begin(), inputs.end(), position);
    const bool counted = std::find(dead.begin(), dead.end(), position) != dead.end();
    if (!counted && position != value && uses_[position] == 0 && pending_[position] == references) {
      dead.push_back(position);
    }
  }
  return dead;
}

bool Rewriter::accept(int old_index, int mark, std::optional<int> value) {
  const int appended = size() - mark;
  std::vector<int> dead;
  if (value && appended > 1) dead = inputs_left_dead(old_index, *value);
  if (!value || appended > 1 + static_cast<int>(dead.size())) {
    truncate(mark);
    return false;
  }
  // Every rewrite keeps the value's type: a mismatch is a bug in a rule.
  const Instruction& old = source_.instructions[old_index];
  LAZYLUA_ASSERT(at(*value).dtype == old.dtype && at(*value).shape == old.shape);
  // A dead constant must not come back to life as a shared constant: it
  // was counted as gone.
  std::erase_if(constants_, [&](const auto& entry) {
    return std::find(dead.begin(), dead.end(), entry.second) != dead.end();
  });
  consume_inputs(old_index);
  set_value(old_index, *value);
  return true;
}

void Rewriter::truncate(int new_size) {
  for (int k = new_size; k < size(); k++) {
    for (int input : program_.instructions[k].inputs) uses_[input]--;
  }
  program_.instructions.resize(static_cast<size_t>(new_size));
  uses_.resize(static_cast<size_t>(new_size));
  pending_.resize(static_cast<size_t>(new_size));
  std::erase_if(constants_, [&](const auto& entry) { return entry.second >= new_size; });
}

Program Rewriter::finish() {
  program_.outputs.clear();
  for (int output : source_.outputs) {
    program_.outputs.push_back(values_[output]);
    LAZYLUA_ASSERT(program_.outputs.back() >= 0);
  }
  return std::move(program_);
}

}  // namespace lazylua::compiler
