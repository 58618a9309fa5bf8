// reduce.h - reference kernels for reductions and softmax.
#pragma once

#include "../array.h"
#include "../x_enum.h"

namespace lazylua {

// The reductions, one row each; the enum, its count and the names come from
// this list (a test's coverage of every reduction counts kReduceOpCount).
// New rows go at the end: the values are in graph keys.
#define LAZYLUA_REDUCE_OPS(X) X(sum) X(prod) X(mean) X(max) X(min) X(any) X(all)

LAZYLUA_X_ENUM(ReduceOp, int, LAZYLUA_REDUCE_OPS)
inline const char* reduce_op_name(ReduceOp op) {
  return kReduceOpNames[static_cast<int>(op)];
}

// Reduces `in` (any strides) along 0-based `dim`, or over all elements when
// dim == -1. `out` is contiguous with in's shape minus `dim` (or kept as
// extent 1: same element order either way), or a scalar for dim == -1.
// Dtypes: sum/prod: out is i64 for bool/int inputs, else in's dtype;
// mean: float in and out (same dtype); max/min: same dtype in and out (NaN
// propagates); any/all: out bool. The op layer picks out's dtype and shape.
// Float sums use pairwise/blocked summation so f32 error stays ~sqrt(n) eps.
// Reducing an empty extent: sum 0, prod 1, mean NaN, any false, all true;
// max/min of nothing raises Error.
void reduce_kernel(ReduceOp op, const Array& in, int dim, const Array& out);

// Max or min along `dim` with positions: `values` like in's dtype and
// `indices` i64, both contiguous with `dim` removed (or kept as 1). Indices
// are 1-based (what the Lua user sees); ties take the first position; NaN
// wins (as in PyTorch). Either output may be undefined to skip it. dim == -1
// means over all elements (flattened, row-major position).
void arg_reduce_kernel(bool is_max, const Array& in, int dim, const Array& values,
                       const Array& indices);

// Softmax (or log-softmax) of f32/f64 `in` along `dim` into `out` (same shape
// and dtype, contiguous). Numerically stable: subtracts the row maximum.
void softmax_kernel(const Array& in, int dim, bool log, const Array& out);

// Cumulative sum along dim (same dtype rules as sum); out contiguous.
void cumsum_kernel(const Array& in, int dim, const Array& out);

}  // namespace lazylua
