// autograd_internal.h - what the gradient rules (autograd_rules.cpp) share
// with the engine (autograd.cpp).
#pragma once

#include <functional>
#include <vector>

#include "autograd.h"

namespace lazylua::autograd {

// A value backward will need: the IR node in lazy mode (immutable), or the
// data and its buffer's version in eager mode.
struct Saved {
  NodeRef node;
  Array data;
  uint32_t version = 0;
  Shape shape;
};
Saved save(const Tensor& t);
// The saved value as a tensor; an error if eager code overwrote it since.
Tensor restore(Context* context, const Saved& saved);

// t requires grad and grad mode is on.
bool needs_grad(const Tensor& t);
// Gives `out` a GradNode over `inputs` (those that need no gradient are
// dropped) unless none needs one. Returns out.
Tensor attach(const Tensor& out, const char* name, std::vector<Tensor> inputs,
              std::function<std::vector<Tensor>(const Tensor&)> backward);

// g summed over the dims that broadcasting added or stretched to reach
// g's shape from `shape`.
Tensor sum_to(Tensor g, const Shape& shape);
// A tensor of `shape` filled with value (a broadcast scalar: no memory).
Tensor filled(Context* context, double value, DType dtype, const Shape& shape);

}  // namespace lazylua::autograd
