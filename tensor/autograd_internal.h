// autograd_internal.h - what the table of gradient rules (autograd_rules.cpp)
// shares with the engine (autograd.cpp), the differentiable entry points
// (autograd_ops.cpp) and scan bodies (scan_grad.cpp).
#pragma once

#include <vector>

#include "autograd.h"

namespace lazylua::autograd {

// The value of t, for backward (see Saved).
Saved save(const Tensor& t);
// The saved value as a tensor; an error if eager code overwrote it since.
Tensor restore(Context* context, const Saved& saved);

// t requires grad and grad mode is on.
bool needs_grad(const Tensor& t);

// What the table says of an op. differentiable: a rule gives the inputs'
// gradients. none: the result never carries a gradient (an index, a leaf).
// unsupported: a gradient through the op is an error (in-place updates,
// second derivatives; a scan records its own, see scan_grad.cpp).
enum class GradKind : uint8_t { differentiable, none, unsupported };

using Grads = std::vector<Tensor>;
// The gradients of node's inputs (null: none wanted or none exists) from
// the gradient g of its result.
using GradFunction = Grads (*)(const GradNode& node, const Tensor& g);

// Bits of GradRule::saves: input k is bit k; the result is kSavesResult.
// Only the first 31 inputs have a bit: the rules of variadic ops (cat,
// stack, whose inputs can be many) read their inputs' shapes, never values.
constexpr int kSavableInputs = 31;
constexpr uint32_t saves_input(int k) {
  return k < kSavableInputs ? 1u << k : 0u;
}
constexpr uint32_t kSavesResult = 1u << kSavableInputs;

struct GradRule {
  GradKind kind = GradKind::none;
  uint32_t saves = 0;  // the values the rule reads, saved when the op runs
  GradFunction backward = nullptr;
};
// The rule of an IR op: its row of the table in autograd_rules.cpp, which
// has one for every op (checked at compile time).
GradRule gradient_rule(Op op);

// Gives `out`, the result of `call` on `inputs` (all of the op's inputs, in
// the IR node's order), a GradNode if any input needs a gradient and the
// result is floating. Returns out.
Tensor record(const Tensor& out, const OpCall& call, const std::vector<Tensor>& inputs);

// g summed over the dims that broadcasting added or stretched to reach
// g's shape from `shape`.
Tensor sum_to(Tensor g, const Shape& shape);
// A tensor of `shape` filled with value (a broadcast scalar: no memory).
Tensor filled(Context* context, double value, DType dtype, const Shape& shape);

}  // namespace lazylua::autograd
