// call_replay.cpp - see call_replay.h.
#include "call_replay.h"

#include <unordered_map>
#include <utility>

#include "ir.h"

namespace lazylua {

// What a recording needs from the call's start (one at a time per context).
struct CallRecordingStart {
  uint64_t serial = 0;  // node_serial() at the start: later nodes were made by the call
  int64_t syncs = 0;
  GeneratorState random{};
  std::vector<NodeRef> inputs;  // the inputs' values at the start
};

namespace {

bool needs_gradient(const Tensor& t) {
  return t->requires_grad && t->context->grad_enabled;
}

bool any_needs_gradient(const std::vector<Tensor>& tensors) {
  for (const Tensor& t : tensors) {
    if (needs_gradient(t)) return true;
  }
  return false;
}

bool same_values(const std::vector<Tensor>& tensors, const std::vector<NodeRef>& values) {
  if (tensors.size() != values.size()) return false;
  for (size_t i = 0; i < tensors.size(); i++) {
    if (!(value_of(tensors[i]) == values[i])) return false;
  }
  return true;
}

bool can_replay_here(const Context* context) {
  return !context->eager && context->scan_depth == 0;
}

// Where a node the call made finds its input `input`.
RecordedCall::Source source_of(const CallRecordingStart& start, const NodeRef& input,
                               const std::unordered_map<const Node*, int>& positions) {
  RecordedCall::Source source;
  const auto made = positions.find(input.get());
  if (made != positions.end()) {
    source.made = made->second;
    return source;
  }
  for (size_t i = 0; i < start.inputs.size(); i++) {
    if (start.inputs[i] == input) {
      source.input = static_cast<int>(i);
      return source;
    }
  }
  source.node = input;
  return source;
}

// Appends to call.made the nodes the call made (later serials, not leaves)
// that `output` reads, inputs before users, and returns the output's
// position; -1 when one of them cannot be made again. Iterative: a call's
// chain of nodes may be long.
int add_made(RecordedCall& call, const CallRecordingStart& start, const NodeRef& output,
             std::unordered_map<const Node*, int>& positions) {
  std::vector<std::pair<const Node*, size_t>> stack{{output.get(), 0}};
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (positions.count(node)) {
      stack.pop_back();
      continue;
    }
    if (next < node->inputs.size()) {
      const Node* input = node->inputs[next++].get();
      if (input->serial > start.serial && !input->is_leaf() && !positions.count(input)) {
        stack.emplace_back(input, 0);
      }
      continue;
    }
    // A collective joins the other ranks' steps; a computed node is a value
    // the call saw on the host (a sync: refused before this).
    if (node->op == Op::collective || node->result.defined()) return -1;
    RecordedCall::Step step;
    for (const NodeRef& input : node->inputs)
      step.inputs.push_back(source_of(start, input, positions));
    step.op = copy_node(*node, {}, node->location);
    positions[node] = static_cast<int>(call.made.size());
    call.made.push_back(std::move(step));
    stack.pop_back();
  }
  return positions.at(output.get());
}

}  // namespace

std::vector<Tensor> start_call_recording(Context* context, const std::vector<Tensor>& inputs,
                                         const std::vector<Tensor>& watched) {
  // A stand-in would take the gradient meant for its input.
  if (!can_replay_here(context) || context->call_recording || any_needs_gradient(inputs) ||
      any_needs_gradient(watched)) {
    return {};
  }
  auto start = std::make_shared<CallRecordingStart>();
  start->syncs = context->metrics.syncs;
  start->random = generator_state();
  std::vector<Tensor> stand_ins;
  for (const Tensor& t : inputs) {
    start->inputs.push_back(value_of(t));
    stand_ins.push_back(Tensor(new TensorImpl(context, start->inputs.back())));
  }
  start->serial = node_serial();
  context->call_recording = std::move(start);
  return stand_ins;
}

void cancel_call_recording(Context* context) {
  context->call_recording.reset();
}

std::unique_ptr<RecordedCall> finish_call_recording(Context* context,
                                                    const std::vector<Tensor>& inputs,
                                                    std::vector<Tensor>& outputs,
                                                    const std::vector<Tensor>& watched) {
  const std::shared_ptr<CallRecordingStart> start = context->call_recording;
  cancel_call_recording(context);
  if (!start) return nullptr;
  const GeneratorState random = generator_state();
  // The stand-ins hold pending values: reading an input's values on the
  // host is a sync.
  if (!can_replay_here(context) || context->metrics.syncs != start->syncs ||
      random.seed != start->random.seed || random.position != start->random.position) {
    return nullptr;
  }
  // A stand-in written in place (a new node) would replay the old value.
  if (!same_values(inputs, start->inputs) || any_needs_gradient(watched) ||
      any_needs_gradient(outputs)) {
    return nullptr;
  }
  auto call = std::make_unique<RecordedCall>();
  for (const Tensor& t : inputs) {
    call->input_dtypes.push_back(t->dtype);
    call->input_shapes.push_back(t->shape);
  }
  std::unordered_map<const Node*, int> positions;
  for (const Tensor& t : outputs) {
    // An output the call made as an op's result is made again per replay;
    // anything else (an input, a weight, a value computed on the host)
    // would be one tensor's memory shared between the calls' results.
    const NodeRef value = value_of(t);
    if (value->serial <= start->serial || value->is_leaf()) return nullptr;
    const int position = add_made(*call, *start, value, positions);
    if (position < 0) return nullptr;
    call->outputs.push_back(position);
  }
  for (const Tensor& t : watched) call->watched.push_back(value_of(t));
  for (Tensor& t : outputs) t = Tensor(new TensorImpl(context, value_of(t)));
  return call;
}

std::vector<Tensor> replay_call(Context* context, const RecordedCall& call,
                                const std::vector<Tensor>& inputs,
                                const std::vector<Tensor>& watched) {
  if (!can_replay_here(context) || inputs.size() != call.input_dtypes.size()) return {};
  for (size_t i = 0; i < inputs.size(); i++) {
    if (inputs[i]->dtype != call.input_dtypes[i] || inputs[i]->shape != call.input_shapes[i]) {
      return {};
    }
  }
  if (!same_values(watched, call.watched) || any_needs_gradient(inputs) ||
      any_needs_gradient(watched)) {
    return {};
  }
  std::vector<NodeRef> values;
  for (const Tensor& t : inputs) values.push_back(value_of(t));
  std::vector<NodeRef> made;
  made.reserve(call.made.size());
  for (const RecordedCall::Step& step : call.made) {
    std::vector<NodeRef> step_inputs;
    step_inputs.reserve(step.inputs.size());
    for (const RecordedCall::Source& source : step.inputs) {
      step_inputs.push_back(source.made >= 0    ? made[static_cast<size_t>(source.made)]
                            : source.input >= 0 ? values[static_cast<size_t>(source.input)]
                                                : source.node);
    }
    made.push_back(copy_node(*step.op, std::move(step_inputs), step.op->location));
  }
  context->metrics.ops_recorded += static_cast<int64_t>(call.made.size());
  context->metrics.calls_replayed++;
  std::vector<Tensor> outputs;
  for (const int output : call.outputs) {
    outputs.push_back(Tensor(new TensorImpl(context, made[static_cast<size_t>(output)])));
  }
  return outputs;
}

}  // namespace lazylua
