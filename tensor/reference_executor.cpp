// reference_executor.cpp - the graph walker: runs a graph node by node with
// the eager kernels. Lazy mode works with no compiler at all on top of it,
// the compiler falls back to it while a graph compiles, and scan bodies and
// compiler::interpret run on it.
#include "context.h"
#include "interrupt.h"
#include "profiler.h"

namespace lazylua {

GraphWalker::GraphWalker(const Graph& graph)
    : graph_(graph), last_use_(graph.nodes.size(), -1), values_(graph.nodes.size()) {
  // Each value is freed after its last use, so buffers go back to the
  // caching allocator while the walk goes on.
  const int count = static_cast<int>(graph.nodes.size());
  for (int i = 0; i < count; i++) {
    for (int k = graph.input_offsets[i]; k < graph.input_offsets[i + 1]; k++) {
      last_use_[graph.input_positions[k]] = i;
    }
  }
  // An output is used after the walk: by its last place in graph.outputs,
  // which takes the value (the same node may be bound to two tensors).
  for (size_t k = 0; k < graph.outputs.size(); k++) {
    last_use_[graph.outputs[k]] = count + static_cast<int>(k);
  }
}

std::vector<Array> GraphWalker::run(const std::vector<Array>& placeholders) {
  const Graph& graph = graph_;
  for (int i = 0; i < static_cast<int>(graph.nodes.size()); i++) {
    // Between nodes, and inside long kernels (thread_pool.cpp). Nothing
    // here writes into a graph input, so stopping leaves every tensor as
    // it was: the sync's tensors stay pending.
    check_interrupt();
    const Node& node = *graph.nodes[i];
    inputs_.clear();
    for (int k = graph.input_offsets[i]; k < graph.input_offsets[i + 1]; k++) {
      inputs_.push_back(values_[graph.input_positions[k]]);
    }
    try {
      if (node.is_placeholder()) {
        const size_t index = static_cast<size_t>(node.attrs[0]);
        LAZYLUA_ASSERT(index < placeholders.size());
        values_[i] = placeholders[index];
      } else if (node.result.defined()) {
        values_[i] = node.result;
      } else {
        profiler::Span span("reference");
        if (span.on() && !node.is_leaf()) {
          span.set_name(fmt::format("{} {}", node.name(), location_string(node.location)));
        }
        values_[i] = evaluate_node(node, inputs_);
      }
    } catch (const InternalError& error) {
      throw InternalError(fmt::format("{} in op {} recorded at {}", error.what(), node.name(),
                                      location_string(node.location)));
    } catch (const Error& error) {
      throw ExecutionError(error.what(), i);
    } catch (const std::bad_alloc&) {
      throw ExecutionError("not enough memory", i);
    }
    for (int k = graph.input_offsets[i]; k < graph.input_offsets[i + 1]; k++) {
      const int input = graph.input_positions[k];
      // Dropping the buffer is enough: the next run assigns the slot
      // before reading it.
      if (last_use_[input] == i) values_[input].buffer.reset();
    }
  }
  inputs_.clear();
  std::vector<Array> outputs;
  outputs.reserve(graph.outputs.size());
  const int count = static_cast<int>(graph.nodes.size());
  for (size_t k = 0; k < graph.outputs.size(); k++) {
    Array& value = values_[graph.outputs[k]];
    const bool last = last_use_[graph.outputs[k]] == count + static_cast<int>(k);
    if (last) {
      outputs.push_back(std::move(value));
    } else {
      outputs.push_back(value);
    }
  }
  return outputs;
}

namespace {

class ReferenceExecutor final : public Executor {
 public:
  std::vector<Array> run(const Graph& graph, Metrics& metrics) override {
    metrics.interpreted_runs++;
    return GraphWalker(graph).run();
  }
};

}  // namespace

std::unique_ptr<Executor> make_reference_executor() {
  return std::make_unique<ReferenceExecutor>();
}

}  // namespace lazylua
