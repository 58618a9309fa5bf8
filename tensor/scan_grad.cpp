// scan_grad.cpp - the gradient of a scan: a reverse scan whose body is the
// forward body replayed through autograd, from the carry that entered each
// iteration, with the gradients of the captured values summed in its carry.
#include <unordered_set>

#include "autograd_internal.h"
#include "scan_internal.h"

namespace lazylua::scan_detail {

bool body_reads(const ScanBody& body, int index) {
  for (const Node* node : body.graph.nodes) {
    if (node->op == Op::parameter && node->attrs[0] == index) return true;
  }
  return false;
}

namespace {

// One node of the body again, on the replay's inputs: the same op, and the
// gradient rule of its op (autograd::record), as any op recorded outside a
// scan. A Lua number in the body is an input here (a clamp's bounds too).
Tensor record_again(Context* context, const Node& node, const std::vector<Tensor>& inputs) {
  const autograd::GradKind kind = autograd::gradient_rule(node.op).kind;
  std::vector<NodeRef> values;
  for (const Tensor& t : inputs) {
    if (kind == autograd::GradKind::unsupported && autograd::needs_grad(t)) {
      fail("scan: the gradient of '{}' inside a scan body is not supported", node.name());
    }
    values.push_back(value_of(t));
  }
  context->metrics.ops_recorded++;
  NodeRef copy = copy_node(node, std::move(values), context->current_location());
  const Tensor out(new TensorImpl(context, std::move(copy)));
  if (kind != autograd::GradKind::differentiable) return out;
  return autograd::record(out, OpCall::of(node), inputs);
}

}  // namespace

std::vector<Tensor> replay(Context* context, const ScanBody& body,
                           const std::vector<Tensor>& inputs) {
  const Graph& graph = body.graph;
  std::vector<Tensor> values(graph.nodes.size());
  std::vector<Tensor> args;
  for (size_t p = 0; p < graph.nodes.size(); p++) {
    const Node& node = *graph.nodes[p];
    if (node.is_placeholder()) {
      values[p] = inputs[static_cast<size_t>(node.attrs[0])];
    } else if (node.op == Op::constant) {
      values[p] = scalar_tensor(context, node.scalar, node.dtype);
    } else {
      args.clear();
      for (int k = graph.input_offsets[p]; k < graph.input_offsets[p + 1]; k++) {
        args.push_back(values[static_cast<size_t>(graph.input_positions[k])]);
      }
      values[p] = record_again(context, node, args);
    }
  }
  std::vector<Tensor> outputs;
  for (int k = 0; k < body.carries + body.ys; k++) {
    outputs.push_back(values[static_cast<size_t>(graph.outputs[k])]);
  }
  return outputs;
}

std::vector<Tensor> differentiable_captures(Context* context, const std::vector<Tensor>& traced,
                                            const std::vector<NodeRef>& captured) {
  std::vector<Tensor> found(captured.size());
  if (!autograd::grad_enabled(context)) return found;
  std::unordered_set<const GradNode*> seen;
  std::vector<const GradNode*> stack;
  // Records t when its value is a captured one (the walk stops there: its
  // history is outside), else walks on into its history.
  auto visit = [&](const Tensor& t) {
    if (!t || !t->requires_grad || !t->error.empty()) return;
    const Node* value = t->pending ? t->pending.get() : nullptr;
    if (!value && !t->is_lazy_view()) value = t->data_node.get();
    if (!value && t->is_lazy_view() && t->view_cache_base == value_of(t->base)) {
      value = t->view_cache.get();
    }
    bool is_captured = false;
    for (size_t k = 0; k < captured.size(); k++) {
      if (captured[k].get() == value) {
        if (!found[k]) found[k] = t;
        is_captured = true;
      }
    }
    if (is_captured || t->scan_level < context->scan_depth) return;
    if (t->grad_fn && seen.insert(t->grad_fn.get()).second) stack.push_back(t->grad_fn.get());
  };
  // The traced results themselves first: a y computed in the body from
  // captured values alone (`return h, W * 2`) depends on no placeholder, so
  // the whole value is captured, and only the result itself can say so.
  for (const Tensor& t : traced) visit(t);
  while (!stack.empty()) {
    const GradNode* node = stack.back();
    stack.pop_back();
    for (const Tensor& input : node->inputs) visit(input);
  }
  return found;
}

namespace {

Tensor zeros_like_shape(Context* context, DType dtype, const Shape& shape) {
  return autograd::filled(context, 0, dtype, shape);
}

// Which xs get a gradient: those that need one and that the body reads. An
// x the body ignores has none, as in eager mode, where nothing reaches it
// (not zeros: an optimizer skips a parameter without a gradient).
std::vector<bool> wanted_xs(const ScanBody& body, const std::vector<Tensor>& xs) {
  std::vector<bool> want;
  for (size_t k = 0; k < xs.size(); k++) {
    want.push_back(autograd::needs_grad(xs[k]) &&
                   body_reads(body, body.carries + static_cast<int>(k)));
  }
  return want;
}

// The gradients of a scan's inputs (carries, xs, captured values) from
// the backward scan's results: initial-carry gradients, summed captured
// gradients, then the xs' gradients. An initial carry the body never reads
// gets none (as in eager mode).
std::vector<Tensor> input_gradients(const ScanBody& body, const std::vector<Tensor>& back, int nc,
                                    const std::vector<bool>& want_x,
                                    const std::vector<Tensor>& captured_tensors) {
  std::vector<Tensor> result;
  size_t next = 0;
  for (int k = 0; k < nc; k++) {
    const Tensor& g = back[next++];
    result.push_back(body_reads(body, k) ? g : Tensor{});
  }
  std::vector<Tensor> captured_grads;
  for (const Tensor& t : captured_tensors) captured_grads.push_back(t ? back[next++] : Tensor{});
  for (bool wanted : want_x) result.push_back(wanted ? back[next++] : Tensor{});
  for (const Tensor& g : captured_grads) result.push_back(g);
  return result;
}

// The scan's float results share one GradNode, each as its own output.
void give_grad_fn(const std::vector<Tensor>& results, const Ref<GradNode>& node) {
  for (size_t k = 0; k < results.size(); k++) {
    if (!is_floating(results[k]->dtype)) continue;
    results[k]->requires_grad = true;
    results[k]->grad_fn = node;
    results[k]->grad_output = static_cast<int>(k);
  }
}

// The replay's inputs for one iteration: the carries and xs given, marked
// as needing gradients where wanted, then each captured value as a fresh
// leaf (its gradient is per iteration; the scan sums them).
std::vector<Tensor> gradient_inputs(Context* context, const std::vector<Tensor>& carries,
                                    const std::vector<Tensor>& xs,
                                    const std::vector<NodeRef>& captured,
                                    const std::vector<Tensor>& captured_tensors,
                                    const std::vector<bool>& want_x) {
  std::vector<Tensor> inputs;
  for (const Tensor& c : carries) {
    if (is_floating(c->dtype)) autograd::set_requires_grad(c, true);
    inputs.push_back(c);
  }
  for (size_t k = 0; k < xs.size(); k++) {
    if (want_x[k]) autograd::set_requires_grad(xs[k], true);
    inputs.push_back(xs[k]);
  }
  for (size_t k = 0; k < captured.size(); k++) {
    Tensor cap(new TensorImpl(context, captured[k]));
    if (captured_tensors[k]) autograd::set_requires_grad(cap, true);
    inputs.push_back(cap);
  }
  return inputs;
}

// One iteration's backward, from the gradients of its outputs: the new
// carries (the carries' gradients, then each running sum plus its captured
// value's gradient) and the ys (the wanted xs' gradients).
std::pair<std::vector<Tensor>, std::vector<Tensor>> iteration_gradients(
    Context* context, int nc, int nx, const std::vector<Tensor>& inputs,
    const std::vector<Tensor>& outs, const std::vector<Tensor>& carry_grads,
    const std::vector<Tensor>& y_grads, const std::vector<Tensor>& running,
    const std::vector<int>& grad_captured, const std::vector<bool>& want_x) {
  // One scalar whose gradient is the vector-Jacobian product we need.
  Tensor objective;
  auto add_term = [&](const Tensor& out, const Tensor& grad) {
    if (!out->requires_grad || !is_floating(out->dtype)) return;
    Tensor term = autograd::reduce(ReduceOp::sum, autograd::binary(BinaryOp::mul, out, grad),
                                   std::nullopt, false);
    objective = objective ? autograd::binary(BinaryOp::add, objective, term) : term;
  };
  for (int k = 0; k < nc; k++) add_term(outs[k], carry_grads[k]);
  for (size_t k = 0; k < y_grads.size(); k++) add_term(outs[nc + k], y_grads[k]);
  if (objective) autograd::backward(objective, std::nullopt);
  std::vector<Tensor> carry_out, ys;
  for (int k = 0; k < nc; k++) {
    const Tensor& c = inputs[k];
    carry_out.push_back(c->grad ? lazylua::cast(Tensor(c->grad), c->dtype)
                                : autograd::filled(context, 0, c->dtype, c->shape));
  }
  for (size_t j = 0; j < grad_captured.size(); j++) {
    const Tensor& cap = inputs[nc + nx + grad_captured[j]];
    carry_out.push_back(cap->grad ? lazylua::binary(BinaryOp::add, running[j], cap->grad)
                                  : running[j]);
  }
  for (int k = 0; k < nx; k++) {
    if (!want_x[k]) continue;
    const Tensor& x = inputs[nc + k];
    ys.push_back(x->grad ? Tensor(x->grad) : autograd::filled(context, 0, x->dtype, x->shape));
  }
  return {carry_out, ys};
}

// The reverse scan. carries: the gradients of the forward carries, then a
// running sum per differentiable captured value; xs: the carry entering
// each iteration, the xs, and the gradients of the ys.
std::vector<Tensor> backward_scan(Context* context, const ScanBody& body, int64_t length,
                                  bool reverse, const std::vector<Tensor>& final_carry_grads,
                                  const std::vector<Tensor>& carry_sequences,
                                  const std::vector<Tensor>& xs, const std::vector<Tensor>& y_grads,
                                  const std::vector<NodeRef>& captured,
                                  const std::vector<Tensor>& captured_tensors,
                                  const std::vector<bool>& want_x) {
  std::vector<int> grad_captured;  // captured values that get a gradient
  for (size_t k = 0; k < captured.size(); k++) {
    if (captured_tensors[k]) grad_captured.push_back(static_cast<int>(k));
  }
  std::vector<Tensor> init = final_carry_grads;
  for (int k : grad_captured) {
    init.push_back(zeros_like_shape(context, captured[k]->dtype, captured[k]->shape));
  }
  std::vector<Tensor> sequences = carry_sequences;
  for (const Tensor& x : xs) sequences.push_back(x);
  for (const Tensor& g : y_grads) sequences.push_back(g);
  std::vector<std::pair<DType, Shape>> slice_like;
  for (const Tensor& s : sequences) {
    Shape shape = s->shape;
    shape.erase(0);
    slice_like.push_back({s->dtype, shape});
  }

  const bool was_enabled = autograd::grad_enabled(context);
  autograd::set_grad_enabled(context, true);
  std::vector<Tensor> results;
  try {
    BodyTrace trace(context, init, slice_like);
    const int nc = body.carries, nx = body.xs;
    const std::vector<Tensor> carries(trace.x_placeholders.begin(),
                                      trace.x_placeholders.begin() + nc);
    const std::vector<Tensor> slices(trace.x_placeholders.begin() + nc,
                                     trace.x_placeholders.begin() + nc + nx);
    const std::vector<Tensor> replay_inputs =
        gradient_inputs(context, carries, slices, captured, captured_tensors, want_x);
    const std::vector<Tensor> outs = replay(context, body, replay_inputs);
    const std::vector<Tensor> carry_grads(trace.carry_placeholders.begin(),
                                          trace.carry_placeholders.begin() + nc);
    const std::vector<Tensor> running(trace.carry_placeholders.begin() + nc,
                                      trace.carry_placeholders.end());
    const std::vector<Tensor> y_grad_slices(trace.x_placeholders.begin() + nc + nx,
                                            trace.x_placeholders.end());
    auto [carry_out, ys] = iteration_gradients(context, nc, nx, replay_inputs, outs, carry_grads,
                                               y_grad_slices, running, grad_captured, want_x);
    autograd::set_grad_enabled(context, false);
    std::vector<NodeRef> outputs;
    for (const Tensor& t : carry_out) outputs.push_back(value_of(t));
    for (const Tensor& t : ys) outputs.push_back(value_of(t));
    std::vector<NodeRef> inner_captured;
    Ref<ScanBody> backward_body =
        build_body(trace, outputs, static_cast<int>(carry_out.size()), &inner_captured);
    std::vector<NodeRef> inputs;
    for (const Tensor& t : init) inputs.push_back(value_of(t));
    for (const Tensor& t : sequences) inputs.push_back(value_of(t));
    for (const NodeRef& n : inner_captured) inputs.push_back(n);
    results = record_scan(context, backward_body, length, !reverse, inputs);
  } catch (...) {
    autograd::set_grad_enabled(context, was_enabled);
    throw;
  }
  autograd::set_grad_enabled(context, was_enabled);
  return results;
}

}  // namespace

void attach_gradient(Context* context, const Ref<ScanBody>& body, const Ref<ScanBody>& saving,
                     int64_t length, const ScanOptions& options, const std::vector<NodeRef>& inputs,
                     const std::vector<Tensor>& init, const std::vector<Tensor>& xs,
                     const std::vector<Tensor>& captured_tensors,
                     const std::vector<Tensor>& results) {
  const int nc = body->carries, nx = body->xs, ny = body->ys;
  std::vector<NodeRef> captured(inputs.begin() + nc + nx, inputs.end());
  std::vector<autograd::Saved> saved_xs;
  for (const Tensor& x : xs) saved_xs.push_back(autograd::save(x));
  std::vector<NodeRef> forward_inputs = inputs;
  const std::vector<bool> want_x = wanted_xs(*body, xs);
  std::vector<DType> carry_dtypes;
  std::vector<Shape> carry_shapes, y_shapes;
  std::vector<DType> y_dtypes;
  for (int k = 0; k < nc; k++) {
    carry_dtypes.push_back(results[k]->dtype);
    carry_shapes.push_back(results[k]->shape);
  }
  for (int k = 0; k < ny; k++) {
    y_dtypes.push_back(results[nc + k]->dtype);
    y_shapes.push_back(results[nc + k]->shape);
  }
  const bool reverse = options.reverse;
  std::vector<Tensor> grad_inputs = init;
  for (const Tensor& x : xs) grad_inputs.push_back(x);
  for (const Tensor& t : captured_tensors) grad_inputs.push_back(t);

  Ref<GradNode> node(new GradNode);
  node->call = {Op::scan};
  node->outputs = nc + ny;
  for (Tensor& t : grad_inputs) {
    if (!autograd::needs_grad(t)) t = Tensor{};
  }
  node->inputs = grad_inputs;
  node->backward_multi = [=](const std::vector<Tensor>& grads) -> std::vector<Tensor> {
    std::vector<Tensor> final_grads, y_grads, sequences, x_values;
    for (int k = 0; k < nc; k++) {
      final_grads.push_back(grads[k] ? grads[k]
                                     : zeros_like_shape(context, carry_dtypes[k], carry_shapes[k]));
    }
    for (int k = 0; k < ny; k++) {
      y_grads.push_back(grads[nc + k] ? grads[nc + k]
                                      : zeros_like_shape(context, y_dtypes[k], y_shapes[k]));
    }
    for (const autograd::Saved& x : saved_xs) x_values.push_back(autograd::restore(context, x));
    // The forward scan again, keeping the carries this time.
    const std::vector<Tensor> again = record_scan(context, saving, length, reverse, forward_inputs);
    sequences.assign(again.begin() + nc + ny, again.end());
    const std::vector<Tensor> back =
        backward_scan(context, *body, length, reverse, final_grads, sequences, x_values, y_grads,
                      captured, captured_tensors, want_x);
    return input_gradients(*body, back, nc, want_x, captured_tensors);
  };
  give_grad_fn(results, node);
}

}  // namespace lazylua::scan_detail

namespace lazylua::scan_detail {

// The forward scan when gradients will be needed, with residuals: the body
// is replayed through autograd on fresh placeholders, the backward of one
// iteration is traced right away, and every forward value that backward
// reads (a residual: a pre-activation, an input of a product) becomes an
// extra output of the forward scan, stacked per iteration. The backward
// scan then reads those slices instead of computing the forward again.
std::vector<Tensor> record_with_residuals(Context* context, const Ref<ScanBody>& body0,
                                          const std::vector<NodeRef>& captured,
                                          const std::vector<Tensor>& captured_tensors,
                                          const std::vector<Tensor>& init,
                                          const std::vector<Tensor>& xs, int64_t length,
                                          const ScanOptions& options) {
  const int nc = body0->carries, nx = body0->xs, ny = body0->ys;
  const std::vector<bool> want_x = wanted_xs(*body0, xs);
  std::vector<int> grad_captured;
  for (size_t k = 0; k < captured.size(); k++) {
    if (captured_tensors[k]) grad_captured.push_back(static_cast<int>(k));
  }
  std::vector<std::pair<DType, Shape>> x_like;
  for (const Tensor& x : xs) {
    Shape slice = x->shape;
    slice.erase(0);
    x_like.push_back({x->dtype, slice});
  }
  const bool was_enabled = autograd::grad_enabled(context);
  autograd::set_grad_enabled(context, true);
  Ref<ScanBody> forward, backward;
  std::vector<NodeRef> forward_captured, backward_captured;
  std::vector<const Node*> residuals;
  std::vector<NodeRef> residual_refs;  // keep them alive past the backward trace
  try {
    BodyTrace f(context, init, x_like);
    const std::vector<Tensor> inputs = gradient_inputs(
        context, f.carry_placeholders, f.x_placeholders, captured, captured_tensors, want_x);
    const std::vector<Tensor> outs = replay(context, *body0, inputs);
    std::vector<NodeRef> out_nodes;
    for (const Tensor& t : outs) out_nodes.push_back(value_of(t));
    {
      std::vector<Tensor> b_init;
      for (int k = 0; k < nc; k++) b_init.push_back(outs[k]);
      for (int k : grad_captured) b_init.push_back(inputs[nc + nx + k]);
      std::vector<std::pair<DType, Shape>> gy_like;
      for (int k = 0; k < ny; k++) gy_like.push_back({outs[nc + k]->dtype, outs[nc + k]->shape});
      BodyTrace b(context, b_init, gy_like);
      const std::vector<Tensor> carry_grads(b.carry_placeholders.begin(),
                                            b.carry_placeholders.begin() + nc);
      const std::vector<Tensor> running(b.carry_placeholders.begin() + nc,
                                        b.carry_placeholders.end());
      auto [carry_out, ys] = iteration_gradients(context, nc, nx, inputs, outs, carry_grads,
                                                 b.x_placeholders, running, grad_captured, want_x);
      autograd::set_grad_enabled(context, false);
      std::vector<NodeRef> b_outputs;
      for (const Tensor& t : carry_out) b_outputs.push_back(value_of(t));
      for (const Tensor& t : ys) b_outputs.push_back(value_of(t));
      // What backward reads from the forward iteration: residuals.
      std::vector<NodeRef> read;
      build_body(b, b_outputs, static_cast<int>(carry_out.size()), &read);
      for (const NodeRef& node : read) {
        if (!f.depends_on_placeholder(node.get())) continue;
        residuals.push_back(node.get());
        residual_refs.push_back(node);
      }
      backward = build_body(b, b_outputs, static_cast<int>(carry_out.size()), &backward_captured,
                            residuals);
    }
    std::vector<NodeRef> forward_outputs = out_nodes;
    for (const NodeRef& node : residual_refs) forward_outputs.push_back(node);
    forward = build_body(f, forward_outputs, nc, &forward_captured);
  } catch (...) {
    autograd::set_grad_enabled(context, was_enabled);
    throw;
  }
  autograd::set_grad_enabled(context, was_enabled);

  std::vector<NodeRef> inputs;
  for (const Tensor& t : init) inputs.push_back(value_of(t));
  for (const Tensor& t : xs) inputs.push_back(value_of(t));
  for (const NodeRef& node : forward_captured) inputs.push_back(node);
  std::vector<Tensor> results = record_scan(context, forward, length, options.reverse, inputs);
  const std::vector<Tensor> residual_sequences(results.begin() + nc + ny, results.end());
  results.resize(static_cast<size_t>(nc + ny));

  std::vector<autograd::Saved> saved_residuals;
  for (const Tensor& s : residual_sequences) saved_residuals.push_back(autograd::save(s));
  std::vector<DType> out_dtypes;
  std::vector<Shape> out_shapes;
  for (const Tensor& t : results) {
    out_dtypes.push_back(t->dtype);
    out_shapes.push_back(t->shape);
  }
  std::vector<DType> captured_dtypes;
  std::vector<Shape> captured_shapes;
  for (int k : grad_captured) {
    captured_dtypes.push_back(captured[k]->dtype);
    captured_shapes.push_back(captured[k]->shape);
  }
  const bool reverse = options.reverse;
  Ref<GradNode> node(new GradNode);
  node->call = {Op::scan};
  node->outputs = nc + ny;
  std::vector<Tensor> grad_inputs = init;
  for (const Tensor& x : xs) grad_inputs.push_back(x);
  for (const Tensor& t : captured_tensors) grad_inputs.push_back(t);
  for (Tensor& t : grad_inputs) {
    if (!autograd::needs_grad(t)) t = Tensor{};
  }
  node->inputs = grad_inputs;
  node->backward_multi = [=](const std::vector<Tensor>& grads) -> std::vector<Tensor> {
    std::vector<NodeRef> b_inputs;
    for (int k = 0; k < nc; k++) {
      const Tensor g =
          grads[k] ? grads[k] : autograd::filled(context, 0, out_dtypes[k], out_shapes[k]);
      b_inputs.push_back(value_of(g));
    }
    for (size_t j = 0; j < captured_dtypes.size(); j++) {
      b_inputs.push_back(
          value_of(autograd::filled(context, 0, captured_dtypes[j], captured_shapes[j])));
    }
    for (int k = 0; k < ny; k++) {
      const Tensor g = grads[nc + k]
                           ? grads[nc + k]
                           : autograd::filled(context, 0, out_dtypes[nc + k], out_shapes[nc + k]);
      b_inputs.push_back(value_of(g));
    }
    for (const autograd::Saved& s : saved_residuals) {
      b_inputs.push_back(value_of(autograd::restore(context, s)));
    }
    for (const NodeRef& n : backward_captured) b_inputs.push_back(n);
    const std::vector<Tensor> back = record_scan(context, backward, length, !reverse, b_inputs);
    return input_gradients(*body0, back, nc, want_x, captured_tensors);
  };
  give_grad_fn(results, node);
  return results;
}

}  // namespace lazylua::scan_detail
