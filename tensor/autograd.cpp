// autograd.cpp - grad mode, leaves, saved values, recording and the backward
// engine (the gradient rules of the ops are in autograd_rules.cpp).
#include "autograd.h"

#include <algorithm>
#include <unordered_map>

#include "autograd_internal.h"

namespace lazylua {

OpCall OpCall::of(const Node& node) {
  return {node.op, node.sub_op, Attrs(node.attrs, kMaxDims)};
}

}  // namespace lazylua

namespace lazylua::autograd {

bool grad_enabled(const Context* context) {
  return context->grad_enabled;
}

void set_grad_enabled(Context* context, bool enabled) {
  context->grad_enabled = enabled;
}

void set_requires_grad(const Tensor& t, bool required) {
  if (t->grad_fn) {
    if (required) return;
    fail(
        "requires_grad(false) on a tensor computed from tensors that require grad; use detach() "
        "for a tensor without gradient history");
  }
  if (required && !is_floating(t->dtype)) {
    fail("only floating tensors can require grad (this one is {})", dtype_name(t->dtype));
  }
  t->requires_grad = required;
}

Tensor detach(const Tensor& t) {
  // A view with no steps of its own: the same memory, no history.
  Tensor alias = lazylua::view(t, t->shape);
  alias->requires_grad = false;
  alias->grad_fn = Ref<GradNode>{};
  return alias;
}

void check_in_place(const Tensor& self, const char* op, const Tensor& source) {
  if (!grad_enabled(self->context.get())) return;
  if (source && source->requires_grad) {
    fail(
        "{}: the value written requires grad, and gradients do not flow through in-place "
        "writes; build the tensor with out-of-place ops (tensor.cat, tensor.stack, where)",
        op);
  }
  const bool leaf = !self->grad_fn;
  if (self->requires_grad) {
    fail(
        "{}: cannot write in place into a {} that requires grad (its gradient would be wrong); "
        "use an out-of-place op, or write inside tensor.no_grad",
        op, leaf ? "leaf tensor" : "tensor");
  }
  if (self->is_lazy_view() && self->base->requires_grad) {
    fail("{}: cannot write in place into a view of a tensor that requires grad", op);
  }
}

// ---- Saved values ----

Saved save(const Tensor& t) {
  Saved saved;
  saved.kept = true;
  if (t->context->eager && !t->pending && !t->is_lazy_view() && t->data.defined()) {
    saved.data = t->data;
    saved.version = t->data.buffer ? t->data.buffer->version : 0;
  } else {
    saved.node = value_of(t);
  }
  saved.shape = t->shape;
  saved.dtype = t->dtype;
  return saved;
}

Tensor restore(Context* context, const Saved& saved) {
  if (!saved.kept) throw InternalError("backward: a gradient rule reads a value it did not save");
  if (saved.node) return Tensor(new TensorImpl(context, saved.node));
  if (saved.data.buffer && saved.data.buffer->version != saved.version) {
    fail(
        "backward: a tensor the gradient needs was modified in place after it was used; "
        "compute the gradient first, or write into a copy");
  }
  return make_tensor(context, saved.data);
}

// ---- Recording ----

bool needs_grad(const Tensor& t) {
  return t && t->requires_grad && grad_enabled(t->context.get());
}

Tensor record(const Tensor& out, const OpCall& call, const std::vector<Tensor>& inputs) {
  if (!is_floating(out->dtype)) return out;
  bool any = false;
  for (const Tensor& input : inputs) {
    // A result that is an input itself (a cast to its own dtype) has
    // nothing to record.
    if (input.get() == out.get()) return out;
    any = any || needs_grad(input);
  }
  if (!any) return out;
  const GradRule rule = gradient_rule(call.op);
  if (rule.kind != GradKind::differentiable) {
    throw InternalError(fmt::format("autograd: '{}' has no gradient rule",
                                    op_name(call.op, call.sub_op, call.attrs.values)));
  }
  Ref<GradNode> node(new GradNode);
  node->call = call;
  for (size_t k = 0; k < inputs.size(); k++) {
    const Tensor& input = inputs[k];
    node->inputs.push_back(needs_grad(input) ? input : Tensor{});
    Saved saved;
    if (rule.saves & saves_input(static_cast<int>(k))) {
      saved = save(input);
    } else {
      saved.shape = input->shape;
      saved.dtype = input->dtype;
    }
    node->saved.push_back(std::move(saved));
  }
  if (rule.saves & kSavesResult) node->result = save(out);
  out->requires_grad = true;
  out->grad_fn = std::move(node);
  return out;
}

// ---- Backward ----

namespace {

// Adds g into the leaf's gradient. The first gradient is kept as it is
// unless something else holds it too (a gradient passed through unchanged
// by an add): writing into one leaf's gradient must not change another's.
void accumulate(const Tensor& leaf, Tensor g) {
  if (g->dtype != leaf->dtype) g = lazylua::cast(g, leaf->dtype);
  if (g->shape != leaf->shape) g = sum_to(g, leaf->shape);
  if (leaf->grad) {
    leaf->grad = lazylua::binary(BinaryOp::add, leaf->grad, g);
    return;
  }
  const bool borrowed = g.get()->use_count() > 1 || g->is_lazy_view() ||
                        (g->data.defined() && !g->data.is_contiguous());
  leaf->grad = borrowed ? lazylua::clone(g) : g;
}

class GradModeOff {
 public:
  explicit GradModeOff(Context* context) : context_(context), before_(context->grad_enabled) {
    context->grad_enabled = false;
  }
  ~GradModeOff() { context_->grad_enabled = before_; }

 private:
  Context* context_;
  bool before_;
};

uint64_t next_epoch() {
  static uint64_t epoch = 0;
  return ++epoch;
}

// The nodes reachable from `root`, each after every node that uses it.
// Held by reference: freeing one node's inputs may drop another's last
// reference while the engine still walks the list.
std::vector<Ref<GradNode>> topological_order(GradNode* root) {
  const uint64_t epoch = next_epoch();
  std::vector<Ref<GradNode>> post_order;
  std::vector<std::pair<GradNode*, size_t>> stack{{root, 0}};
  root->visit_epoch = epoch;
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next == node->inputs.size()) {
      post_order.push_back(node);
      stack.pop_back();
      continue;
    }
    const Tensor& input = node->inputs[next++];
    if (!input || !input->grad_fn) continue;
    GradNode* child = input->grad_fn.get();
    if (child->visit_epoch == epoch) continue;
    child->visit_epoch = epoch;
    stack.push_back({child, 0});
  }
  std::reverse(post_order.begin(), post_order.end());
  return post_order;
}

}  // namespace

void backward(const Tensor& root, std::optional<Tensor> grad) {
  if (!root->requires_grad) {
    fail("backward: the tensor does not require grad (no input of its ops requires grad)");
  }
  Context* context = root->context.get();
  Tensor seed;
  if (grad) {
    seed = *grad;
    if (seed->shape != root->shape) {
      fail("backward: the gradient has shape {} but the tensor has shape {}",
           shape_string(seed->shape), shape_string(root->shape));
    }
  } else {
    if (numel(root->shape) != 1) {
      fail(
          "backward: a gradient can be implied only for a single-element tensor (this one has "
          "shape {}); pass the gradient: t:backward(grad)",
          shape_string(root->shape));
    }
    seed = lazylua::expand(scalar_tensor(context, ops::Scalar::from_double(1), root->dtype),
                           root->shape);
  }
  GradModeOff off(context);
  if (!root->grad_fn) {
    accumulate(root, seed);
    return;
  }
  const std::vector<Ref<GradNode>> order = topological_order(root->grad_fn.get());
  std::unordered_map<GradNode*, std::vector<Tensor>> grads;
  auto slot_of = [&](const Tensor& t) -> Tensor& {
    std::vector<Tensor>& list = grads[t->grad_fn.get()];
    list.resize(static_cast<size_t>(t->grad_fn->outputs));
    return list[static_cast<size_t>(t->grad_output)];
  };
  slot_of(root) = seed;
  for (const Ref<GradNode>& held : order) {
    GradNode* node = held.get();
    auto found = grads.find(node);
    if (found == grads.end()) continue;
    const std::vector<Tensor> g = std::move(found->second);
    grads.erase(found);
    if (node->freed) {
      fail(
          "backward: the graph through '{}' was already used by an earlier backward and freed; "
          "run the forward pass again",
          node->name());
    }
    const std::vector<Tensor> input_grads =
        node->backward_multi ? node->backward_multi(g)
                             : gradient_rule(node->call.op).backward(*node, g[0]);
    for (size_t k = 0; k < node->inputs.size(); k++) {
      const Tensor& input = node->inputs[k];
      if (!input || k >= input_grads.size() || !input_grads[k]) continue;
      if (!input->grad_fn) {
        accumulate(input, input_grads[k]);
        continue;
      }
      Tensor& slot = slot_of(input);
      Tensor gi = input_grads[k];
      if (gi->dtype != input->dtype) gi = lazylua::cast(gi, input->dtype);
      if (gi->shape != input->shape) gi = sum_to(gi, input->shape);
      slot = slot ? lazylua::binary(BinaryOp::add, slot, gi) : gi;
    }
  }
  // Free the graph as PyTorch does: saved values go now, not when the last
  // tensor of the forward pass is collected.
  for (const Ref<GradNode>& node : order) {
    node->freed = true;
    node->backward_multi = nullptr;
    node->inputs.clear();
    node->saved.clear();
    node->result = Saved{};
  }
}

// ---- Helpers shared with the rules ----

Tensor sum_to(Tensor g, const Shape& shape) {
  if (g->shape == shape) return g;
  while (g->shape.rank() > shape.rank()) g = lazylua::reduce(ReduceOp::sum, g, 0, false);
  for (int d = 0; d < shape.rank(); d++) {
    if (shape[d] == 1 && g->shape[d] != 1) g = lazylua::reduce(ReduceOp::sum, g, d, true);
  }
  return g;
}

Tensor filled(Context* context, double value, DType dtype, const Shape& shape) {
  return lazylua::expand(scalar_tensor(context, ops::Scalar::from_double(value), dtype), shape);
}

}  // namespace lazylua::autograd
