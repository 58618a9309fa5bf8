// shape_ops.h - tensor functions composed from the IR's ops: splitting
// (chunk, split, unbind), triangles and diagonals (tril, triu, diag,
// diagonal, trace), products (outer, mv, bmm, addmm, baddbmm, addmv,
// einsum) and rearrangements (roll, repeat, tile, pad, meshgrid, cross).
//
// None of them is an IR op of its own: each is written with the
// differentiable ops of autograd.h (narrow, select, cat, index_select,
// where, matmul, reshape, permute, expand, sum ...), so every one is lazy,
// fuses with its neighbours, runs in every tier and gets its gradient from
// the rules of the ops it is made of. The positions they need (the
// diagonal's, a pad's, the rows and columns a triangle's mask compares) are
// small i64 data tensors, graph inputs like flip's, so a training step's
// graph stays the same.
//
// Dims are 0-based here (the Lua binding converts); errors are Errors
// naming the function and the shapes.
#pragma once

#include <string>
#include <vector>

#include "autograd.h"

namespace lazylua::shape_ops {

// a reshaped to `shape`, or a itself when it has that shape already (no
// node recorded).
Tensor reshaped(const Tensor& a, const Shape& shape);
// a permuted by `order`, or a itself for the identity order.
Tensor permuted(const Tensor& a, const std::vector<int>& order);

// `chunks` views along `dim` of ceil(n / chunks) elements (the last may be
// smaller; fewer than `chunks` when n is small), as torch.chunk.
std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int dim);
// Views of `size` elements along `dim` (the last may be smaller).
std::vector<Tensor> split(const Tensor& a, int64_t size, int dim);
// Views of the given sizes along `dim`; they must add up to its extent.
std::vector<Tensor> split_sizes(const Tensor& a, const std::vector<int64_t>& sizes, int dim);
// The selects along `dim`, one per index.
std::vector<Tensor> unbind(const Tensor& a, int dim);

// The lower (upper) triangle of the last two dims, from diagonal `k` (0:
// main, > 0 above, < 0 below); other elements are 0.
Tensor tril(const Tensor& a, int64_t k);
Tensor triu(const Tensor& a, int64_t k);
// The elements (i, i + offset) of dims d1 and d2, as a last dim (a new
// tensor: PyTorch's is a view).
Tensor diagonal(const Tensor& a, int64_t offset, int d1, int d2);
// 1-D: a square matrix with `a` on diagonal k; 2-D: diagonal k as a vector.
Tensor diag(const Tensor& a, int64_t k);
// Sum of a matrix's main diagonal.
Tensor trace(const Tensor& a);

Tensor outer(const Tensor& a, const Tensor& b);
Tensor mv(const Tensor& m, const Tensor& v);
// Batched matrix product of two 3-D tensors with the same batch extent.
Tensor bmm(const Tensor& a, const Tensor& b);
// beta * c + alpha * (a @ b) for a @ b of mm (2-D), bmm (3-D) or mv; c
// broadcasts to the product's shape. beta == 0 ignores c's values (its NaNs
// too), as PyTorch does.
Tensor addmm(const Tensor& c, const Tensor& a, const Tensor& b, ops::Scalar beta,
             ops::Scalar alpha);
Tensor baddbmm(const Tensor& c, const Tensor& a, const Tensor& b, ops::Scalar beta,
               ops::Scalar alpha);
Tensor addmv(const Tensor& c, const Tensor& m, const Tensor& v, ops::Scalar beta,
             ops::Scalar alpha);
// Einstein summation (torch.einsum): letters, '...', implicit or explicit
// output ('->'). Lowered to diagonal, expand, sum, permute, reshape and
// matmul.
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);

// Elements shifted by shifts[i] along dims[i], wrapping around; no dims:
// along the flattened tensor, shape kept.
Tensor roll(const Tensor& a, const std::vector<int64_t>& shifts, const std::vector<int>& dims);
// torch's repeat: sizes has at least a's rank entries (leading ones add dims).
Tensor repeat(const Tensor& a, const std::vector<int64_t>& sizes);
// torch's tile: as repeat, with ones prepended to short sizes.
Tensor tile(const Tensor& a, const std::vector<int64_t>& sizes);

enum class PadMode { constant, reflect, replicate, circular };
// F.pad: pads = {left, right} of the last dim, then of the one before ...;
// a negative pad crops.
Tensor pad(const Tensor& a, const std::vector<int64_t>& pads, PadMode mode, ops::Scalar value);
// Grids of 1-D tensors: "ij" (matrix) or "xy" (Cartesian) indexing.
std::vector<Tensor> meshgrid(const std::vector<Tensor>& inputs, bool xy_indexing);
// The cross product along `dim` (extent 3), a and b broadcast.
Tensor cross(const Tensor& a, const Tensor& b, int dim);

}  // namespace lazylua::shape_ops
