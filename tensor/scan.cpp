// scan.cpp - tracing a scan body into a ScanBody, the scan node and its
// outputs, the eager loop, and the loop that runs a scan node (the
// gradient is in scan_grad.cpp).
#include "scan.h"

#include <algorithm>
#include <unordered_map>

#include "autograd_internal.h"
#include "checked.h"
#include "interrupt.h"
#include "scan_internal.h"

namespace lazylua {

void check_not_in_scan_body(const Context* context, const char* what) {
  if (context->scan_depth > 0) {
    fail(
        "cannot sync inside a scan body ({}): the body is recorded once, not run; return the "
        "value from the body and look at it after the scan",
        what);
  }
}

// A scan body is traced once in lazy mode, so numbers drawn inside it would
// repeat on every iteration there, and differ in eager mode: refused in both.
void check_no_random_in_scan_body(const Context* context, const char* op) {
  if (context->scan_depth > 0) {
    fail(
        "{}: cannot draw random numbers inside a tensor.scan body (the body is recorded "
        "once); draw them before the scan and pass them in xs",
        op);
  }
}

namespace {

constexpr int64_t kOutputAlignment = 64;

std::string describe(DType dtype, const Shape& shape) {
  return std::string(dtype_name(dtype)) + shape_string(shape);
}

NodeRef make_placeholder(DType dtype, const Shape& shape, int index, SourceLocation location) {
  NodeRef node = make_node(Op::parameter, 1, dtype, shape, {}, {index}, location);
  return node;
}

}  // namespace

// ---- Building a body from traced outputs ----

namespace scan_detail {

Ref<ScanBody> build_body(const BodyTrace& trace, const std::vector<NodeRef>& outputs,
                         int carry_outputs, std::vector<NodeRef>* captured_nodes,
                         const std::vector<const Node*>& extra_xs) {
  // Which traced nodes depend on a placeholder: those are the body; the
  // inputs of the body that do not are values from outside.
  std::unordered_map<const Node*, bool> dependent;
  std::vector<std::pair<const Node*, size_t>> stack;
  auto visit = [&](const Node* root) {
    if (dependent.count(root)) return;
    stack.push_back({root, 0});
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (next < node->inputs.size()) {
        const Node* input = node->inputs[next++].get();
        if (!dependent.count(input)) stack.push_back({input, 0});
        continue;
      }
      bool depends = trace.owns(node);
      for (const NodeRef& input : node->inputs) depends = depends || dependent.at(input.get());
      dependent[node] = depends;
      stack.pop_back();
    }
  };
  for (const NodeRef& output : outputs) visit(output.get());

  Ref<ScanBody> body(new ScanBody);
  body->carries = trace.carries;
  body->xs = trace.xs + static_cast<int>(extra_xs.size());
  // Clean copies of the body's nodes: placeholders renumbered, captured
  // values replaced by new placeholders after the carries and xs.
  std::unordered_map<const Node*, NodeRef> copies;
  std::vector<const Node*> captured;
  auto captured_placeholder = [&](const Node* node) {
    auto found = std::find(captured.begin(), captured.end(), node);
    int index = static_cast<int>(found - captured.begin());
    if (found == captured.end()) captured.push_back(node);
    return make_placeholder(node->dtype, node->shape, body->carries + body->xs + index,
                            node->location);
  };
  std::unordered_map<const Node*, NodeRef> captured_copies;
  std::function<NodeRef(const Node*)> copy_of = [&](const Node* node) -> NodeRef {
    if (auto found = copies.find(node); found != copies.end()) return found->second;
    NodeRef copy;
    if (!dependent.at(node)) {
      if (node->op == Op::constant) {
        copy = make_scalar(node->scalar, node->dtype, node->location);
      } else {
        auto found = captured_copies.find(node);
        if (found == captured_copies.end()) {
          // A value given per iteration (extra_xs), or one for all of them.
          auto extra = std::find(extra_xs.begin(), extra_xs.end(), node);
          NodeRef placeholder =
              extra != extra_xs.end()
                  ? make_placeholder(
                        node->dtype, node->shape,
                        trace.carries + trace.xs + static_cast<int>(extra - extra_xs.begin()),
                        node->location)
                  : captured_placeholder(node);
          found = captured_copies.emplace(node, placeholder).first;
        }
        copy = found->second;
      }
    } else if (trace.owns(node)) {
      copy = make_placeholder(node->dtype, node->shape, static_cast<int>(node->attrs[0]),
                              node->location);
    } else {
      std::vector<NodeRef> inputs;
      for (const NodeRef& input : node->inputs) inputs.push_back(copy_of(input.get()));
      copy = copy_node(*node, std::move(inputs), node->location);
    }
    copies[node] = copy;
    return copy;
  };
  std::vector<NodeRef> body_outputs;
  for (const NodeRef& output : outputs) body_outputs.push_back(copy_of(output.get()));
  body->captured = static_cast<int>(captured.size());
  body->ys = static_cast<int>(outputs.size()) - carry_outputs;
  captured_nodes->clear();
  for (const Node* node : captured) captured_nodes->push_back(NodeRef(const_cast<Node*>(node)));

  // The body graph: post-order from the outputs, as Context::extract.
  Graph& graph = body->graph;
  graph.input_offsets.push_back(0);
  std::unordered_map<const Node*, int> position;
  std::vector<std::pair<const Node*, size_t>> walk;
  for (const NodeRef& output : body_outputs) {
    if (!position.count(output.get())) {
      walk.push_back({output.get(), 0});
      while (!walk.empty()) {
        auto& [node, next] = walk.back();
        if (next < node->inputs.size()) {
          const Node* input = node->inputs[next++].get();
          if (!position.count(input)) walk.push_back({input, 0});
          continue;
        }
        if (!position.count(node)) {
          const int index = static_cast<int>(graph.nodes.size());
          position[node] = index;
          graph.nodes.push_back(node);
          body->nodes.push_back(NodeRef(const_cast<Node*>(node)));
          for (const NodeRef& input : node->inputs)
            graph.input_positions.push_back(position.at(input.get()));
          graph.input_offsets.push_back(static_cast<int>(graph.input_positions.size()));
          if (node->is_leaf() && node->op != Op::constant) graph.parameters.push_back(index);
        }
        walk.pop_back();
      }
    }
    graph.outputs.push_back(position.at(output.get()));
  }
  uint64_t hash = hash_mix(0x7363616eULL, graph.nodes.size());
  hash =
      hash_mix(hash, static_cast<uint64_t>(body->carries) << 32 | static_cast<uint32_t>(body->xs));
  hash =
      hash_mix(hash, static_cast<uint64_t>(body->captured) << 32 | static_cast<uint32_t>(body->ys));
  for (size_t i = 0; i < graph.nodes.size(); i++) {
    const Node* node = graph.nodes[i];
    hash = hash_mix(hash, node->local_hash);
    if (node->is_placeholder()) hash = hash_mix(hash, static_cast<uint64_t>(node->attrs[0]));
    for (int k = graph.input_offsets[i]; k < graph.input_offsets[i + 1]; k++) {
      hash = hash_mix(hash, static_cast<uint64_t>(graph.input_positions[k]));
    }
  }
  for (int output : graph.outputs) hash = hash_mix(hash, static_cast<uint64_t>(output) + 1);
  body->hash = hash;
  return body;
}

std::vector<Tensor> record_scan(Context* context, Ref<ScanBody> body, int64_t length, bool reverse,
                                const std::vector<NodeRef>& inputs) {
  body->length = length;
  body->reverse = reverse;
  body->output_dtypes.clear();
  body->output_shapes.clear();
  body->output_offsets.clear();
  // Outputs: the final carries, then each y stacked along a new dim 0.
  int64_t offset = 0;
  const Graph& graph = body->graph;
  for (int k = 0; k < body->carries + body->ys; k++) {
    const Node* out = graph.nodes[graph.outputs[k]];
    Shape shape = out->shape;
    if (k >= body->carries) shape.insert(0, length);
    body->output_dtypes.push_back(out->dtype);
    body->output_shapes.push_back(shape);
    body->output_offsets.push_back(offset);
    // The length comes from the script: the stacked ys may be absurdly big.
    const int64_t bytes = checked_numel(shape, "scan") * dtype_size(out->dtype);
    offset = checked_add(
        offset, (bytes + kOutputAlignment - 1) / kOutputAlignment * kOutputAlignment, "scan");
  }
  body->total_bytes = std::max<int64_t>(offset, 1);
  const SourceLocation location = context->current_location();
  context->metrics.ops_recorded++;
  NodeRef node =
      make_node(Op::scan, 0, DType::boolean, Shape{body->total_bytes}, inputs,
                {body->carries, body->xs, body->captured, body->ys, length, reverse}, location);
  node->body = body;
  node->local_hash = hash_mix(node->local_hash, body->hash);
  node->hash = hash_mix(node->hash, body->hash);
  std::vector<Tensor> results;
  for (int k = 0; k < body->carries + body->ys; k++) {
    context->metrics.ops_recorded++;
    NodeRef output = make_node(Op::scan_output, 0, body->output_dtypes[k], body->output_shapes[k],
                               {node}, {k, body->output_offsets[k]}, location);
    results.push_back(Tensor(new TensorImpl(context, std::move(output))));
  }
  return results;
}

BodyTrace::BodyTrace(Context* context, const std::vector<Tensor>& carry_like,
                     const std::vector<std::pair<DType, Shape>>& x_like)
    : carries(static_cast<int>(carry_like.size())),
      xs(static_cast<int>(x_like.size())),
      context_(context) {
  const SourceLocation location = context->current_location();
  saved_created_ = context->scan_created;
  context->scan_created = &created_;
  context->scan_depth++;
  for (int k = 0; k < carries; k++) {
    NodeRef node = make_placeholder(carry_like[k]->dtype, carry_like[k]->shape, k, location);
    placeholders_.push_back(node.get());
    carry_placeholders.push_back(Tensor(new TensorImpl(context, node)));
  }
  for (int k = 0; k < xs; k++) {
    NodeRef node = make_placeholder(x_like[k].first, x_like[k].second, carries + k, location);
    placeholders_.push_back(node.get());
    x_placeholders.push_back(Tensor(new TensorImpl(context, node)));
  }
}

BodyTrace::~BodyTrace() {
  context_->scan_depth--;
  context_->scan_created = saved_created_;
  // Tensors computed from the placeholders mean nothing outside the body.
  for (const Tensor& t : created_) {
    if (!t->pending || !depends_on_placeholder(t->pending.get())) continue;
    t->set_pending(NodeRef{});
    t->data_node = NodeRef{};
    t->error = "it was computed inside a scan body, and such tensors exist only there";
  }
  if (saved_created_) {
    // An enclosing trace still checks the survivors.
    for (const Tensor& t : created_) saved_created_->push_back(t);
  }
}

bool BodyTrace::depends_on_placeholder(const Node* root) {
  if (auto found = memo_.find(root); found != memo_.end()) return found->second;
  std::vector<std::pair<const Node*, size_t>> stack{{root, 0}};
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next < node->inputs.size()) {
      const Node* input = node->inputs[next++].get();
      if (!memo_.count(input)) stack.push_back({input, 0});
      continue;
    }
    bool depends = owns(node);
    for (const NodeRef& input : node->inputs) depends = depends || memo_.at(input.get());
    memo_[node] = depends;
    memo_held_.push_back(NodeRef(const_cast<Node*>(node)));
    stack.pop_back();
  }
  return memo_.at(root);
}

}  // namespace scan_detail

// ---- scan ----

namespace {

using scan_detail::BodyTrace;

void check_carries(const std::vector<Tensor>& init, const std::vector<Tensor>& out) {
  if (out.size() != init.size()) {
    fail("scan: the body returned {} carry tensors, but the carry has {}", out.size(), init.size());
  }
  for (size_t k = 0; k < init.size(); k++) {
    if (out[k]->dtype != init[k]->dtype || out[k]->shape != init[k]->shape) {
      fail(
          "scan: carry {} is {} going into the body but {} coming out; a carry must keep its "
          "shape and dtype",
          k + 1, describe(init[k]->dtype, init[k]->shape), describe(out[k]->dtype, out[k]->shape));
    }
  }
}

std::vector<Tensor> eager_scan(Context* context, const ScanFunction& fn,
                               const std::vector<Tensor>& init, const std::vector<Tensor>& xs,
                               int64_t length, bool reverse) {
  std::vector<Tensor> carries = init;
  std::vector<std::vector<Tensor>> ys;
  for (int64_t i = 0; i < length; i++) {
    const int64_t t = reverse ? length - 1 - i : i;
    std::vector<Tensor> slices;
    for (const Tensor& x : xs) slices.push_back(autograd::select(x, 0, t));
    std::pair<std::vector<Tensor>, std::vector<Tensor>> out;
    context->scan_depth++;
    try {
      out = fn(carries, slices);
    } catch (...) {
      context->scan_depth--;
      throw;
    }
    context->scan_depth--;
    check_carries(init, out.first);
    if (i == 0) {
      ys.resize(out.second.size());
      // As in lazy mode (record_scan): stacked ys of an absurd length are
      // an error now, not after `length` iterations.
      for (const Tensor& y : out.second) {
        Shape stacked = y->shape;
        stacked.insert(0, length);
        checked_numel(stacked, "scan");
      }
    }
    if (out.second.size() != ys.size()) fail("scan: the body returned a different number of ys");
    for (size_t k = 0; k < ys.size(); k++) ys[k].push_back(out.second[k]);
    carries = std::move(out.first);
  }
  if (reverse) {
    for (auto& list : ys) std::reverse(list.begin(), list.end());
  }
  std::vector<Tensor> results = carries;
  for (const auto& list : ys) results.push_back(autograd::stack(list, 0));
  return results;
}

// A scan of no slices: the carry comes out as it went in and each y is an
// empty stack. The body is recorded once, as in lazy mode (in eager mode
// too, where it would otherwise never run), only to learn the ys' shapes
// and dtypes and to check the carry; what it computed is dropped.
std::vector<Tensor> empty_scan(Context* context, const ScanFunction& fn,
                               const std::vector<Tensor>& init,
                               const std::vector<std::pair<DType, Shape>>& x_like) {
  std::vector<std::pair<DType, Shape>> y_like;
  const bool eager = context->eager;
  context->eager = false;  // placeholders have no data to compute on
  try {
    BodyTrace trace(context, init, x_like);
    auto [carry_out, ys] = fn(trace.carry_placeholders, trace.x_placeholders);
    check_carries(init, carry_out);
    for (const Tensor& y : ys) y_like.push_back({y->dtype, y->shape});
  } catch (...) {
    context->eager = eager;
    throw;
  }
  context->eager = eager;
  std::vector<Tensor> results;
  // Copies, as a scan's results are new tensors: writing into one later
  // must not change init. clone keeps the path of gradients to init.
  for (const Tensor& t : init) results.push_back(autograd::clone(t));
  for (const auto& [dtype, shape] : y_like) {
    Shape stacked = shape;
    stacked.insert(0, 0);
    results.push_back(make_tensor(context, Array::empty(stacked, dtype)));
  }
  return results;
}

}  // namespace

std::vector<Tensor> scan(Context* context, const ScanFunction& fn, const std::vector<Tensor>& init,
                         const std::vector<Tensor>& xs, int64_t length,
                         const ScanOptions& options) {
  if (length < 0) fail("scan: the length must be at least 0, got {}", length);
  for (size_t k = 0; k < xs.size(); k++) {
    if (xs[k]->shape.rank() == 0 || xs[k]->shape[0] != length) {
      fail("scan: xs {} has shape {}, but the scan has length {}", k + 1,
           shape_string(xs[k]->shape), length);
    }
  }
  std::vector<std::pair<DType, Shape>> x_like;
  for (const Tensor& x : xs) {
    Shape slice = x->shape;
    slice.erase(0);
    x_like.push_back({x->dtype, slice});
  }
  if (length == 0) return empty_scan(context, fn, init, x_like);
  if (context->eager) return eager_scan(context, fn, init, xs, length, options.reverse);

  BodyTrace trace(context, init, x_like);
  auto [carry_out, ys] = fn(trace.carry_placeholders, trace.x_placeholders);
  check_carries(init, carry_out);
  std::vector<Tensor> traced;
  for (const Tensor& t : carry_out) traced.push_back(t);
  for (const Tensor& t : ys) traced.push_back(t);
  std::vector<NodeRef> outputs;
  for (const Tensor& t : traced) outputs.push_back(value_of(t));
  const int carry_count = static_cast<int>(carry_out.size());
  std::vector<NodeRef> captured;
  Ref<ScanBody> body = scan_detail::build_body(trace, outputs, carry_count, &captured);
  const std::vector<Tensor> captured_tensors =
      scan_detail::differentiable_captures(context, traced, captured);
  // Only inputs the body reads make the results differentiable, as in eager
  // mode, where nothing connects an ignored input to them.
  bool needs_gradient = false;
  for (size_t k = 0; k < init.size(); k++) {
    needs_gradient = needs_gradient || (autograd::needs_grad(init[k]) &&
                                        scan_detail::body_reads(*body, static_cast<int>(k)));
  }
  for (size_t k = 0; k < xs.size(); k++) {
    needs_gradient =
        needs_gradient || (autograd::needs_grad(xs[k]) &&
                           scan_detail::body_reads(*body, static_cast<int>(init.size() + k)));
  }
  for (const Tensor& t : captured_tensors) needs_gradient = needs_gradient || t;
  if (needs_gradient && !options.recompute_carries) {
    return scan_detail::record_with_residuals(context, body, captured, captured_tensors, init, xs,
                                              length, options);
  }
  std::vector<NodeRef> inputs;
  for (const Tensor& t : init) inputs.push_back(value_of(t));
  for (const Tensor& t : xs) inputs.push_back(value_of(t));
  for (const NodeRef& node : captured) inputs.push_back(node);
  std::vector<Tensor> results =
      scan_detail::record_scan(context, body, length, options.reverse, inputs);
  if (needs_gradient) {
    // Recomputing: backward first runs the forward scan again, this time
    // keeping the carry that went into each iteration as extra ys.
    std::vector<NodeRef> with_carries = outputs;
    for (const Tensor& c : trace.carry_placeholders) with_carries.push_back(c->pending);
    std::vector<NodeRef> same_captured;
    const Ref<ScanBody> saving =
        scan_detail::build_body(trace, with_carries, carry_count, &same_captured);
    scan_detail::attach_gradient(context, body, saving, length, options, inputs, init, xs,
                                 captured_tensors, results);
  }
  return results;
}

// ---- Running a scan node ----

Array scan_output_view(const Array& packed, DType dtype, const Shape& shape, int64_t byte_offset) {
  Array view;
  view.buffer = packed.buffer;
  view.dtype = dtype;
  view.shape = shape;
  view.strides = contiguous_strides(shape);
  view.offset = (packed.offset * dtype_size(packed.dtype) + byte_offset) / dtype_size(dtype);
  return view;
}

Array run_scan_iterations(const ScanBody& body, const std::vector<Array>& inputs,
                          const ScanIteration& iteration) {
  const int carries = body.carries;
  Array packed = Array::empty(Shape{body.total_bytes}, DType::boolean, "scan");
  std::vector<Array> outputs;  // views of packed
  for (int k = 0; k < carries + body.ys; k++) {
    outputs.push_back(scan_output_view(packed, body.output_dtypes[k], body.output_shapes[k],
                                       body.output_offsets[k]));
  }
  std::vector<Array> body_inputs = inputs;
  std::vector<Array> places(carries + body.ys);
  for (int64_t i = 0; i < body.length; i++) {
    // A long scan of small steps never reaches a parallel_for's check.
    check_interrupt();
    const int64_t t = body.reverse ? body.length - 1 - i : i;
    for (int k = carries; k < carries + body.xs; k++) body_inputs[k] = inputs[k].selected(0, t);
    for (int k = carries; k < carries + body.ys; k++) places[k] = outputs[k].selected(0, t);
    std::vector<Array> results = iteration(body_inputs, places);
    for (int k = 0; k < carries; k++) {
      Array& carry = results[k];
      body_inputs[k] = carry.is_contiguous() ? std::move(carry) : contiguous(carry);
    }
    for (int k = carries; k < carries + body.ys; k++) {
      const Array& y = results[k];
      if (y.buffer != places[k].buffer || y.offset != places[k].offset) copy_kernel(y, places[k]);
    }
  }
  for (int k = 0; k < carries; k++) copy_kernel(body_inputs[k], outputs[k]);
  return packed;
}

Array evaluate_scan(const Node& node, const std::vector<Array>& inputs) {
  GraphWalker walker(node.body->graph);
  const auto walk = [&walker](const std::vector<Array>& body_inputs, const std::vector<Array>&) {
    return walker.run(body_inputs);
  };
  try {
    return run_scan_iterations(*node.body, inputs, walk);
  } catch (const ExecutionError& error) {
    // Its position is in the body, which means nothing to the graph that
    // holds the scan (whose walk names the scan node instead).
    throw Error(error.what());
  }
}

}  // namespace lazylua
