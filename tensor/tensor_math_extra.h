// tensor_math_extra.h - composite math ops built from the differentiable
// ops of autograd.h (so gradients and lazy recording come for free), and the
// in-place random fills. The Lua binding is interp/lua_tensor_math_extra.cpp;
// docs/tensor_api.md describes each under "More math" and "Random".
#pragma once

#include <optional>

#include "tensor.h"

namespace lazylua {

// ---- Comparison with tolerances (PyTorch's isclose/allclose) ----
struct CloseTolerance {
  double rtol = 1e-5;
  double atol = 1e-8;
  bool equal_nan = false;
};
// |a - b| <= atol + rtol |b| elementwise, with infinities close only to
// themselves and NaN close to NaN only with equal_nan; a bool tensor of the
// broadcast shape. Integer and bool operands compare in f64.
Tensor isclose(const Tensor& a, const Tensor& b, const CloseTolerance& tolerance);
// Every element of isclose (syncs): a host boolean.
bool allclose(const Tensor& a, const Tensor& b, const CloseTolerance& tolerance);

// ---- Differentiable composites ----
// a + weight (b - a), computed as b - (b - a)(1 - weight) where weight >=
// 0.5 (PyTorch's form: exact at both ends).
Tensor lerp(const Tensor& a, const Tensor& b, const Tensor& weight);
Tensor lerp(const Tensor& a, const Tensor& b, double weight);
// t + value a b and t + value a / b.
Tensor addcmul(const Tensor& t, const Tensor& a, const Tensor& b, ops::Scalar value);
Tensor addcdiv(const Tensor& t, const Tensor& a, const Tensor& b, ops::Scalar value);
// x log(y), 0 where x == 0 and y is not NaN (scipy's and PyTorch's xlogy).
Tensor xlogy(const Tensor& x, const Tensor& y);

// one_hot of 1-based class indices (an i64 or i32 tensor) as i64 with a
// new last dim of num_classes (nullopt: the largest index). Reads the
// indices (syncs) to check that each is in 1..num_classes.
Tensor one_hot(const Tensor& index, std::optional<int64_t> num_classes);

// ---- Random, from the generator of tensor.manual_seed ----
// The numbers are drawn when the call is made (as rand does), so lazy,
// eager and compiled runs draw the same numbers for the same seed.
void uniform_(const Tensor& self, double low, double high);
void normal_(const Tensor& self, double mean, double std);
// 1 with probability p, else 0, in p's dtype (p a float tensor).
Tensor bernoulli(const Tensor& p);
// self filled with 0/1, 1 with probability p (a number or a tensor that
// broadcasts to self).
void bernoulli_(const Tensor& self, double p);
void bernoulli_(const Tensor& self, const Tensor& p);
// n 1-based category indices per row of probs (1-D or 2-D weights, any
// number dtype), i64; reads probs (syncs).
Tensor multinomial(const Tensor& probs, int64_t n, bool replacement);

}  // namespace lazylua
