// program.h - the compiler's form of an extracted graph.
//
// A Program is a graph with the data taken out: instructions in dependency
// order, each naming its inputs by position. It holds no tensors, so it can
// be compiled on a background thread and cached: every run of the same key
// passes its own inputs (the graph's parameters and scalars, in order).
#pragma once

#include <string>
#include <vector>

#include "tensor/context.h"
#include "tensor/ir.h"
#include "tensor/scan.h"  // ScanBody, held by scan instructions

namespace lazylua::compiler {

struct Instruction {
  Op op;
  uint8_t sub_op = 0;
  DType dtype;
  Shape shape;
  Attrs attrs;
  std::vector<int> inputs;  // positions of earlier instructions
  int input_index = -1;     // parameter and scalar: which run input this is
  ops::Scalar constant;     // constant: its value (0 or 1)
  Ref<ScanBody> body;       // scan: the loop body (tensor/scan.h)
  SourceLocation location;

  bool is_leaf() const { return op == Op::parameter || op == Op::scalar || op == Op::constant; }
  // "add", "sum", "argmax" ...: as Node::name.
  const char* name() const;
};

struct Program {
  std::vector<Instruction> instructions;  // inputs always come first
  std::vector<int> outputs;               // positions whose values a run returns
  int input_count = 0;                    // parameters + scalars
  // Per run input: its buffer is donated (Graph::donated), so an output
  // may be computed into it.
  std::vector<bool> donated;

  // The same text form as graph_text (for LAZYLUA_DEBUG dumps).
  std::string text() const;
};

// Takes the structure of `graph`: leaves that act as parameters (data,
// results of earlier syncs) become `parameter` instructions, scalars stay
// scalars, numbered in graph.parameters order.
Program program_from_graph(const Graph& graph);

// The run inputs of `graph` for a Program made from it: each parameter's
// data, each scalar as a 0-d array of its dtype.
std::vector<Array> program_inputs(const Graph& graph);

// The body of a scan as a program: its inputs are the carries, one slice of
// each xs and the captured values, numbered as the body's placeholders;
// its outputs the new carries, then the ys.
Program program_from_scan_body(const ScanBody& body);

// Computes one instruction with the eager kernels (the reference fallback).
Array evaluate_instruction(const Instruction& instruction, const std::vector<Array>& inputs);

// Runs a whole program on the eager kernels (GraphWalker): the oracle for
// passes and for generated code in tests.
std::vector<Array> interpret(const Program& program, const std::vector<Array>& inputs);

}  // namespace lazylua::compiler
