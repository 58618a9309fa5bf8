// reference_executor.cpp - the graph walker: runs a graph node by node with
// the eager kernels. Lazy mode works with no compiler at all on top of it,
// the compiler falls back to it while a graph compiles, and scan bodies and
// compiler::interpret run on it.
#include "context.h"
#include "interrupt.h"

namespace lazylua {

std::vector<Array> walk_graph(const Graph& graph, const PlaceholderValue& placeholder_value) {
  const int count = static_cast<int>(graph.nodes.size());
  // Each value is freed after its last use, so buffers go back to the
  // caching allocator while the walk goes on.
  std::vector<int> last_use(count, -1);
  for (int i = 0; i < count; i++) {
    for (int k = graph.input_offsets[i]; k < graph.input_offsets[i + 1]; k++) {
      last_use[graph.input_positions[k]] = i;
    }
  }
  for (int output : graph.outputs) last_use[output] = count;

  std::vector<Array> values(count);
  std::vector<Array> inputs;
  for (int i = 0; i < count; i++) {
    // Between nodes, and inside long kernels (thread_pool.cpp). Nothing
    // here writes into a graph input, so stopping leaves every tensor as
    // it was: the sync's tensors stay pending.
    check_interrupt();
    const Node& node = *graph.nodes[i];
    inputs.clear();
    for (int k = graph.input_offsets[i]; k < graph.input_offsets[i + 1]; k++) {
      inputs.push_back(values[graph.input_positions[k]]);
    }
    try {
      if (node.is_placeholder()) {
        LAZYLUA_ASSERT(placeholder_value);
        values[i] = placeholder_value(node);
      } else {
        values[i] = node.result.defined() ? node.result : evaluate_node(node, inputs);
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
      if (last_use[input] == i) values[input] = Array{};
    }
  }
  std::vector<Array> outputs;
  outputs.reserve(graph.outputs.size());
  for (int output : graph.outputs) outputs.push_back(values[output]);
  return outputs;
}

namespace {

class ReferenceExecutor final : public Executor {
 public:
  std::vector<Array> run(const Graph& graph, Metrics& metrics) override {
    metrics.interpreted_runs++;
    return walk_graph(graph);
  }
};

}  // namespace

std::unique_ptr<Executor> make_reference_executor() {
  return std::make_unique<ReferenceExecutor>();
}

}  // namespace lazylua
