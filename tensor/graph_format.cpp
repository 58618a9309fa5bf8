// graph_format.cpp - the text and Graphviz forms of an extracted graph, in
// the style of the LazyTensor paper: `%7 = f32[2,4] add(%6, %3)`.
#include <string>

#include "collectives.h"
#include "context.h"

namespace lazylua {
namespace {

std::string type_string(const Node& node) {
  std::string text = dtype_name(node.dtype);
  text += "[";
  for (int i = 0; i < node.shape.rank(); i++) {
    if (i > 0) text += ",";
    text += std::to_string(node.shape[i]);
  }
  return text + "]";
}

// The op's attributes as `name=value` words (dims are 0-based, as in the IR).
std::string attr_string(const Node& node) {
  const int64_t* a = node.attrs;
  switch (node.op) {
    case Op::reduce:
    case Op::arg_reduce:
      return a[0] < 0 ? (a[1] ? "all, keepdim" : "all")
                      : fmt::format("dim={}{}", a[0], a[1] ? ", keepdim" : "");
    case Op::softmax:
    case Op::cumsum:
    case Op::cat:
    case Op::gather:
    case Op::index_select:
    case Op::scatter_add:
      return fmt::format("dim={}", a[0]);
    case Op::slice:
      return fmt::format("dim={}, start={}, length={}", a[0], a[1], a[2]);
    case Op::select:
      return fmt::format("dim={}, index={}", a[0], a[1]);
    case Op::slice_update:
      return fmt::format("dim={}, start={}", a[0], a[1]);
    case Op::select_update:
      return fmt::format("dim={}, index={}", a[0], a[1]);
    case Op::permute: {
      std::string text = "order=[";
      const int rank = node.inputs.empty() ? 0 : node.inputs[0]->shape.rank();
      for (int i = 0; i < rank; i++) text += fmt::format("{}{}", i ? "," : "", a[i]);
      return text + "]";
    }
    case Op::conv:
    case Op::conv_grad_input:
    case Op::conv_grad_weight: {
      const ConvWindow k = ops::conv_window_from_attrs(node.sub_op, a);
      auto list = [&](const int64_t* values) {
        std::string text;
        for (int d = 0; d < k.rank; d++) text += fmt::format("{}{}", d ? "x" : "", values[d]);
        return text;
      };
      return fmt::format("groups={}, stride={}, dilation={}, padding={} before {} after", k.groups,
                         list(k.stride), list(k.dilation), list(k.pad_before), list(k.pad_after));
    }
    case Op::max_pool2d:
    case Op::max_pool2d_grad:
      return fmt::format("kernel={}x{}, stride={}x{}, padding={}x{}", a[0], a[1], a[2], a[3], a[4],
                         a[5]);
    case Op::collective:
      return node.sub_op == static_cast<uint8_t>(CollectiveOp::broadcast)
                 ? fmt::format("root={}", a[0])
                 : std::string();
    case Op::argsort:
      return fmt::format("dim={}{}", a[0], a[1] ? ", descending" : "");
    case Op::clamp:
      return fmt::format("{}{}", node.sub_op & 1 ? "low" : "", node.sub_op & 2 ? " high" : "");
    default:
      return "";
  }
}

std::string leaf_string(const Graph& graph, int position, int parameter_number) {
  const Node& node = *graph.nodes[position];
  if (node.op == Op::constant) return fmt::format("constant({})", node.scalar.value);
  if (node.op == Op::scalar)
    return fmt::format("scalar({}: {})", parameter_number, node.scalar.value);
  return fmt::format("parameter({})", parameter_number);
}

}  // namespace

std::string graph_text(const Graph& graph) {
  std::string text;
  int parameter_number = 0;
  for (size_t i = 0; i < graph.nodes.size(); i++) {
    const Node& node = *graph.nodes[i];
    std::string line = fmt::format("%{} = {} ", i, type_string(node));
    if (graph.is_leaf(static_cast<int>(i))) {
      line += leaf_string(graph, static_cast<int>(i),
                          node.op == Op::constant ? -1 : parameter_number++);
    } else {
      line += node.name();
      line += "(";
      for (int k = graph.input_offsets[i]; k < graph.input_offsets[i + 1]; k++) {
        if (k > graph.input_offsets[i]) line += ", ";
        line += fmt::format("%{}", graph.input_positions[k]);
      }
      const std::string attrs = attr_string(node);
      if (!attrs.empty()) line += ", " + attrs;
      line += ")";
    }
    text += fmt::format("{:<48} -- {}\n", line, location_string(node.location));
  }
  text += "outputs:";
  for (int output : graph.outputs) text += " %" + std::to_string(output);
  return text + "\n";
}

std::string graph_dot(const Graph& graph) {
  std::string text = "digraph lazylua {\n  node [shape=box, fontname=\"monospace\"];\n";
  int parameter_number = 0;
  for (size_t i = 0; i < graph.nodes.size(); i++) {
    const Node& node = *graph.nodes[i];
    std::string label = graph.is_leaf(static_cast<int>(i))
                            ? leaf_string(graph, static_cast<int>(i),
                                          node.op == Op::constant ? -1 : parameter_number++)
                            : node.name();
    const std::string attrs = graph.is_leaf(static_cast<int>(i)) ? "" : attr_string(node);
    if (!attrs.empty()) label += "\\n" + attrs;
    label += "\\n" + type_string(node) + "\\n" + location_string(node.location);
    text += fmt::format("  n{} [label=\"%{} {}\"{}];\n", i, i, label,
                        graph.is_leaf(static_cast<int>(i)) ? ", style=rounded" : "");
    for (int k = graph.input_offsets[i]; k < graph.input_offsets[i + 1]; k++) {
      text += fmt::format("  n{} -> n{};\n", graph.input_positions[k], i);
    }
  }
  for (int output : graph.outputs) {
    text += fmt::format("  n{} [peripheries=2];\n", output);
  }
  return text + "}\n";
}

}  // namespace lazylua
