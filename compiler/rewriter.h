// rewriter.h - how an optimization pass builds the program it returns.
//
// A pass walks the old program in order and, for each old instruction,
// copies it (its inputs renamed into the new program), drops it, or lets its
// value be some instruction of the new program. The Rewriter keeps that
// renaming, shares constants, and enforces the rule that keeps every pass
// from growing a program: one old instruction becomes at most one new one,
// plus one for each of its inputs that the replacement leaves dead.
//
//   Rewriter rewriter(program);
//   for (int i = 0; i < rewriter.source_size(); i++) {
//     const int mark = rewriter.size();
//     if (!rewriter.accept(i, mark, try_something(rewriter, rewriter.renamed(i))))
//       rewriter.copy(i);
//   }
//   return rewriter.finish();
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "compiler/program.h"

namespace lazylua::compiler {

// The value of a constant instruction as a 0-d array of its dtype.
Array constant_element(const Instruction& constant);
// The element of a 0-d array as raw bits: equal bits, equal value.
uint64_t element_bits(const Array& element);
// True for the values a constant can hold: 0, -0 and 1 (false/true).
bool is_constant_value(const Array& element);

class Rewriter {
 public:
  explicit Rewriter(const Program& source);

  const Program& source() const { return source_; }
  int source_size() const { return static_cast<int>(source_.instructions.size()); }
  // The new program so far.
  int size() const { return static_cast<int>(program_.instructions.size()); }
  const Instruction& at(int index) const { return program_.instructions[index]; }

  // Where the new program holds the value of old instruction `old_index`
  // (-1 while unknown or dropped).
  int value_of(int old_index) const { return values_[old_index]; }
  void set_value(int old_index, int new_index);
  // Old instruction `old_index` with its inputs renamed into the new program.
  Instruction renamed(int old_index) const;

  // Appends an instruction to the new program and returns its position.
  int emit(Instruction instruction);
  // A constant holding `element` (0-d, a constant value): the one the new
  // program already has, or a new one.
  int constant(const Array& element, SourceLocation location);
  // Copies old instruction `old_index` into the new program.
  void copy(int old_index);

  // Ends an attempt to replace old instruction `old_index` that began when
  // the program had `mark` instructions. With a value, and at most one new
  // instruction more than the inputs it leaves dead, the value stands for
  // the old instruction; otherwise what the attempt appended is removed.
  // Returns whether it was taken.
  bool accept(int old_index, int mark, std::optional<int> value);

  // The new program, its outputs renamed; its leaves keep their input_index.
  Program finish();

 private:
  void truncate(int size);
  std::vector<int> inputs_left_dead(int old_index, int value) const;
  void consume_inputs(int old_index);

  const Program& source_;
  Program program_;
  std::vector<int> values_;
  std::vector<int> source_uses_;  // per old instruction: its users, +1 for an output
  std::vector<int> uses_;         // per new instruction: its users in the new program
  std::vector<int> pending_;      // per new instruction: old users not yet rewritten
  // Constants of the new program by (dtype, element bits).
  std::vector<std::pair<std::pair<DType, uint64_t>, int>> constants_;
};

}  // namespace lazylua::compiler
