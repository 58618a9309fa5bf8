// sorting.h - sorting and the statistics built on reductions: sort, argsort,
// topk, kthvalue, median; var, std, norm, logsumexp, cumprod.
//
// One IR op does the sorting: argsort (1-based, stable, NaN largest),
// whose kernel (kernels/sort.h) eager mode and compiled plans share. Every
// function that returns sorted values records `values = gather(x, dim,
// indices)`, so gather's gradient rule carries their gradient. The rest
// are compositions of existing differentiable ops, written for their
// numerics (max-shifted logsumexp; sqrt whose gradient is 0 at 0, as
// PyTorch's std and norm).
#pragma once

#include <optional>
#include <utility>

#include "tensor.h"

namespace lazylua {

namespace ops {
// 0-based dim (any dim of a 0-dim array is its only one): i64 positions.
Array argsort(const Array& a, int dim, bool descending);
}  // namespace ops

// The positions that sort `a` along dim: i64, 1-based, stable. No gradient.
Tensor argsort(const Tensor& a, int dim, bool descending);

namespace autograd {

// values, indices (PyTorch's sort with stable=True).
std::pair<Tensor, Tensor> sort(const Tensor& a, int dim, bool descending);
// The k largest (or smallest) along dim, sorted; ties: the first position.
std::pair<Tensor, Tensor> topk(const Tensor& a, int64_t k, int dim, bool largest);
// The k-th smallest (k 1-based) along dim.
std::pair<Tensor, Tensor> kthvalue(const Tensor& a, int64_t k, int dim, bool keepdim);
// The lower median along dim; a line holding NaN gives NaN and the position
// of its first NaN (as PyTorch).
std::pair<Tensor, Tensor> median(const Tensor& a, int dim, bool keepdim);
// The lower median of all elements: a 0-dim value.
Tensor median(const Tensor& a);
// The running maximum (or minimum) along dim and where it was last reached
// (a tie takes the later position; NaN, once met, stays), as torch.cummax.
std::pair<Tensor, Tensor> cummax_cummin(bool is_max, const Tensor& a, int dim);

// Variance over dim (nullopt: all elements) with the divisor
// max(0, n - correction). Integer and bool tensors compute in f32.
Tensor var(const Tensor& a, std::optional<int> dim, double correction, bool keepdim);
Tensor standard_deviation(const Tensor& a, std::optional<int> dim, double correction, bool keepdim);
// The p-norm over dim (nullopt: all elements); p may be +-inf or 0.
Tensor norm(const Tensor& a, double p, std::optional<int> dim, bool keepdim);
// log(sum(exp(a))) over dim (nullopt: all), shifted by the maximum.
Tensor logsumexp(const Tensor& a, std::optional<int> dim, bool keepdim);
// Running products along dim (integers and bools give i64).
Tensor cumprod(const Tensor& a, int dim);

}  // namespace autograd
}  // namespace lazylua
