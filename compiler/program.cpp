// program.cpp - graphs into programs, and the reference interpreter of
// programs.
#include "compiler/program.h"

#include "tensor/scan.h"

namespace lazylua::compiler {

const char* Instruction::name() const {
  Node node;
  node.op = op;
  node.sub_op = sub_op;
  node.attrs[1] = attrs.values[1];
  return node.name();
}

Program program_from_graph(const Graph& graph) {
  Program program;
  program.instructions.reserve(graph.nodes.size());
  int next_input = 0;
  for (size_t i = 0; i < graph.nodes.size(); i++) {
    const Node& node = *graph.nodes[i];
    Instruction instruction;
    instruction.dtype = node.dtype;
    instruction.shape = node.shape;
    instruction.location = node.location;
    if (graph.is_leaf(static_cast<int>(i))) {
      if (node.op == Op::constant) {
        instruction.op = Op::constant;
        instruction.constant = node.scalar;
      } else {
        // Data, a scalar, or the result of an earlier sync.
        instruction.op = node.op == Op::scalar ? Op::scalar : Op::parameter;
        instruction.input_index = next_input++;
        program.donated.push_back(graph.is_donated(static_cast<int>(i)));
      }
    } else {
      instruction.op = node.op;
      instruction.sub_op = node.sub_op;
      instruction.attrs = Attrs(node.attrs, kMaxDims);
      instruction.body = node.body;
      for (int k = graph.input_offsets[i]; k < graph.input_offsets[i + 1]; k++) {
        instruction.inputs.push_back(graph.input_positions[k]);
      }
    }
    program.instructions.push_back(std::move(instruction));
  }
  program.outputs = graph.outputs;
  program.input_count = next_input;
  return program;
}

Program program_from_scan_body(const ScanBody& body) {
  Program program = program_from_graph(body.graph);
  for (size_t i = 0; i < program.instructions.size(); i++) {
    const Node& node = *body.graph.nodes[i];
    if (node.is_placeholder())
      program.instructions[i].input_index = static_cast<int>(node.attrs[0]);
  }
  program.input_count = body.carries + body.xs + body.captured;
  program.donated.assign(static_cast<size_t>(program.input_count), false);
  return program;
}

std::vector<Array> program_inputs(const Graph& graph) {
  std::vector<Array> inputs;
  inputs.reserve(graph.parameters.size());
  for (int position : graph.parameters) {
    const Node& node = *graph.nodes[position];
    if (node.result.defined()) {
      inputs.push_back(node.result);
    } else if (node.op == Op::scalar) {
      inputs.push_back(ops::full(Shape{}, node.scalar, node.dtype));
    } else {
      inputs.push_back(node.data);
    }
  }
  return inputs;
}

namespace {

// The node an instruction stands for: instructions are evaluated by the same
// code as graph nodes (evaluate_node, GraphWalker).
void fill_node(Node& node, const Instruction& instruction) {
  node.op = instruction.op;
  node.sub_op = instruction.sub_op;
  node.dtype = instruction.dtype;
  node.shape = instruction.shape;
  std::copy(instruction.attrs.values, instruction.attrs.values + kMaxDims, node.attrs);
  node.scalar = instruction.constant;
  node.body = instruction.body;
  node.location = instruction.location;
}

}  // namespace

Array evaluate_instruction(const Instruction& instruction, const std::vector<Array>& inputs) {
  Node node;
  fill_node(node, instruction);
  return evaluate_node(node, inputs);
}

std::vector<Array> interpret(const Program& program, const std::vector<Array>& inputs) {
  // The program as a graph whose run inputs are placeholders, as in a scan
  // body.
  std::vector<NodeRef> nodes;
  Graph graph;
  graph.input_offsets.push_back(0);
  for (const Instruction& instruction : program.instructions) {
    NodeRef node(new Node);
    fill_node(*node, instruction);
    if (instruction.op == Op::parameter || instruction.op == Op::scalar) {
      node->op = Op::parameter;
      node->sub_op = 1;
      node->attrs[0] = instruction.input_index;
    }
    graph.input_positions.insert(graph.input_positions.end(), instruction.inputs.begin(),
                                 instruction.inputs.end());
    graph.input_offsets.push_back(static_cast<int>(graph.input_positions.size()));
    graph.nodes.push_back(node.get());
    nodes.push_back(std::move(node));
  }
  graph.outputs = program.outputs;
  return GraphWalker(graph).run(inputs);
}

std::string Program::text() const {
  std::string text;
  for (size_t i = 0; i < instructions.size(); i++) {
    const Instruction& instruction = instructions[i];
    std::string type = dtype_name(instruction.dtype);
    type += shape_string(instruction.shape);
    std::string line = fmt::format("%{} = {} ", i, type);
    if (instruction.op == Op::constant) {
      line += fmt::format("constant({})", instruction.constant.value);
    } else if (instruction.is_leaf()) {
      line += fmt::format("{}({})", op_name(instruction.op), instruction.input_index);
    } else {
      line += instruction.name();
      line += "(";
      for (size_t k = 0; k < instruction.inputs.size(); k++) {
        line += (k ? ", %" : "%") + std::to_string(instruction.inputs[k]);
      }
      line += ")";
    }
    text += fmt::format("{:<48} -- {}\n", line, location_string(instruction.location));
  }
  text += "outputs:";
  for (int output : outputs) text += " %" + std::to_string(output);
  return text + "\n";
}

}  // namespace lazylua::compiler
