// shape_ops.cpp - chunk, split, unbind, tril/triu, diagonals, the matrix
// products and the rearrangements of shape_ops.h, each composed from the
// differentiable ops of autograd.h (einsum is in einsum.cpp).
#include "shape_ops.h"

#include <algorithm>

#include "checked.h"

namespace lazylua::shape_ops {
namespace {

using ops::Scalar;

// An i64 data tensor of 1-based positions (what index_select takes).
Tensor positions_tensor(const Tensor& like, const std::vector<int64_t>& zero_based) {
  Array data = Array::empty(Shape{static_cast<int64_t>(zero_based.size())}, DType::i64);
  int64_t* out = data.data<int64_t>();
  for (size_t i = 0; i < zero_based.size(); i++) out[i] = zero_based[i] + 1;
  return make_tensor(like->context.get(), std::move(data));
}

// A tensor of `shape` filled with `value` in a's dtype: a broadcast scalar
// (no memory of its own, fused into whatever reads it).
Tensor filled_like(const Tensor& a, const Shape& shape, Scalar value) {
  return autograd::expand(scalar_tensor(a->context.get(), value, a->dtype), shape);
}

bool is_one(Scalar s) {
  return s.value == 1;
}
bool is_zero(Scalar s) {
  return s.value == 0;
}

// a * s, skipped when s is 1.
Tensor scaled(const Tensor& a, Scalar s) {
  return is_one(s) ? a : autograd::binary(BinaryOp::mul, a, s);
}

// j - i for every element (i, j) of a rows x cols matrix (i64): the
// broadcast difference of two small position vectors, computed in the
// graph (and fused into whatever reads it) instead of a rows x cols mask
// of data.
Tensor diagonal_offsets(const Tensor& like, int64_t rows, int64_t cols) {
  auto positions = [&](int64_t n, const Shape& shape) {
    const Array data = ops::arange(Scalar::from_integer(0), Scalar::from_integer(n),
                                   Scalar::from_integer(1), DType::i64);
    return lazylua::reshape(make_tensor(like->context.get(), data), shape);
  };
  return lazylua::binary(BinaryOp::sub, positions(cols, Shape{1, cols}),
                         positions(rows, Shape{rows, 1}));
}

Tensor zero_like(const Tensor& a) {
  return scalar_tensor(a->context.get(), Scalar::from_integer(0), a->dtype);
}

// The triangle of the last two dims: element (i, j) is kept when j - i <= k
// (lower) or >= k (upper), else 0.
Tensor triangle(const Tensor& a, int64_t k, bool lower, const char* function) {
  const int rank = a->shape.rank();
  if (rank < 2) {
    fail("{}: expects a tensor with at least 2 dimensions, got shape {}", function,
         shape_string(a->shape));
  }
  // (An empty tensor needs no offsets, which for a dim of 2^40 next to a 0
  // would be 8 TB.)
  if (numel(a->shape) == 0) return autograd::clone(a);
  const Tensor offsets = diagonal_offsets(a, a->shape[rank - 2], a->shape[rank - 1]);
  const Tensor keep =
      lazylua::binary(lower ? BinaryOp::le : BinaryOp::ge, offsets, Scalar::from_integer(k));
  return autograd::where(keep, a, zero_like(a));
}

void check_rank(const Tensor& t, int rank, const char* function, const char* which) {
  if (t->shape.rank() != rank) {
    fail("{}: {} must be a {}-D tensor, got shape {}", function, which, rank,
         shape_string(t->shape));
  }
}

// beta * c + product, where the product is alpha * (a op b) already.
Tensor add_scaled(const Tensor& c, const Tensor& product, Scalar beta, const char* function) {
  if (broadcast_shapes(c->shape, product->shape, function) != product->shape) {
    fail("{}: the input of shape {} does not broadcast to the product's shape {}", function,
         shape_string(c->shape), shape_string(product->shape));
  }
  // beta == 0 ignores c entirely (a NaN in it does not reach the result).
  if (is_zero(beta)) return autograd::contiguous(product);
  return autograd::binary(BinaryOp::add, scaled(c, beta), product);
}

}  // namespace

Tensor reshaped(const Tensor& a, const Shape& shape) {
  return a->shape == shape ? a : autograd::reshape(a, shape);
}

Tensor permuted(const Tensor& a, const std::vector<int>& order) {
  for (size_t d = 0; d < order.size(); d++) {
    if (order[d] != static_cast<int>(d)) return autograd::permute(a, order);
  }
  return a;
}

// ---- Splitting ----

std::vector<Tensor> split_sizes(const Tensor& a, const std::vector<int64_t>& sizes, int dim) {
  const int64_t extent = a->shape[dim];
  int64_t total = 0;
  for (int64_t size : sizes) {
    if (size < 0) fail("split: sizes must be >= 0, got {}", size);
    if (add_overflows(total, size, &total)) {
      fail("split: sizes add up to more than the {} elements of dim {}", extent, dim + 1);
    }
  }
  if (total != extent) {
    fail("split: sizes add up to {}, but dim {} has {} elements", total, dim + 1, extent);
  }
  std::vector<Tensor> parts;
  int64_t start = 0;
  for (int64_t size : sizes) {
    parts.push_back(autograd::narrow(a, dim, start, size));
    start += size;
  }
  return parts;
}

std::vector<Tensor> split(const Tensor& a, int64_t size, int dim) {
  if (size <= 0) fail("split: the split size must be > 0, got {}", size);
  const int64_t extent = a->shape[dim];
  std::vector<int64_t> sizes;
  for (int64_t start = 0; start < extent; start += size)
    sizes.push_back(std::min(size, extent - start));
  // An empty dim splits into one empty part, as in PyTorch.
  if (sizes.empty()) sizes.push_back(0);
  return split_sizes(a, sizes, dim);
}

std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int dim) {
  if (chunks <= 0) fail("chunk: the number of chunks must be > 0, got {}", chunks);
  const int64_t extent = a->shape[dim];
  // An empty dim gives `chunks` empty parts, as in PyTorch.
  if (extent == 0) return split_sizes(a, std::vector<int64_t>(static_cast<size_t>(chunks), 0), dim);
  // The ceiling of extent / chunks without extent + chunks - 1, which
  // overflows for chunks near math.maxinteger (one chunk then, as PyTorch).
  return split(a, extent / chunks + (extent % chunks != 0), dim);
}

std::vector<Tensor> unbind(const Tensor& a, int dim) {
  std::vector<Tensor> parts;
  for (int64_t i = 0; i < a->shape[dim]; i++) parts.push_back(autograd::select(a, dim, i));
  return parts;
}

// ---- Triangles and diagonals ----

Tensor tril(const Tensor& a, int64_t k) {
  return triangle(a, k, true, "tril");
}

Tensor triu(const Tensor& a, int64_t k) {
  return triangle(a, k, false, "triu");
}

// d1 and d2 move last and merge into one dim (a reshape, which copies when
// the permute needs it), from which index_select takes the diagonal.
Tensor diagonal(const Tensor& a, int64_t offset, int d1, int d2) {
  const int rank = a->shape.rank();
  if (d1 == d2) fail("diagonal: dim1 and dim2 are the same dim ({})", d1 + 1);
  const int64_t rows = a->shape[d1], cols = a->shape[d2];
  // Past either edge the diagonal is empty: clamping keeps -offset defined.
  offset = std::clamp(offset, -rows, cols);
  const int64_t first_row = offset >= 0 ? 0 : -offset;
  const int64_t first_col = offset >= 0 ? offset : 0;
  const int64_t length = std::max<int64_t>(0, std::min(rows - first_row, cols - first_col));
  std::vector<int> order;
  Shape merged;
  for (int d = 0; d < rank; d++) {
    if (d != d1 && d != d2) {
      order.push_back(d);
      merged.push_back(a->shape[d]);
    }
  }
  order.push_back(d1);
  order.push_back(d2);
  merged.push_back(rows * cols);
  std::vector<int64_t> positions;
  for (int64_t i = 0; i < length; i++) positions.push_back((first_row + i) * cols + first_col + i);
  const Tensor flat = reshaped(permuted(a, order), merged);
  return autograd::index_select(flat, rank - 2, positions_tensor(a, positions));
}

// A vector becomes the diagonal of a zero matrix: with |k| zeros appended
// it is a column (k >= 0: row i holds v[i]) or a row (k < 0: column j
// holds v[j]), broadcast where j - i == k.
Tensor diag(const Tensor& a, int64_t k) {
  if (a->shape.rank() == 2) return diagonal(a, k, 0, 1);
  if (a->shape.rank() != 1) {
    fail("diag: expects a 1-D or 2-D tensor, got shape {}", shape_string(a->shape));
  }
  if (k > kMaxElements || k < -kMaxElements) fail("diag: diagonal {} is too far out", k);
  const int64_t extra = k >= 0 ? k : -k;
  const int64_t n = a->shape[0] + extra;
  checked_numel(Shape{n, n}, "diag");
  const Tensor padded =
      extra == 0 ? a : autograd::cat({a, filled_like(a, Shape{extra}, Scalar::from_integer(0))}, 0);
  const Tensor line = autograd::reshape(padded, k >= 0 ? Shape{n, 1} : Shape{1, n});
  const Tensor on_diagonal =
      lazylua::binary(BinaryOp::eq, diagonal_offsets(a, n, n), Scalar::from_integer(k));
  return autograd::where(on_diagonal, line, zero_like(a));
}

Tensor trace(const Tensor& a) {
  check_rank(a, 2, "trace", "the input");
  return autograd::reduce(ReduceOp::sum, diagonal(a, 0, 0, 1), std::nullopt, false);
}

// ---- Products ----

Tensor outer(const Tensor& a, const Tensor& b) {
  check_rank(a, 1, "outer", "the first argument");
  check_rank(b, 1, "outer", "the second argument");
  return autograd::binary(BinaryOp::mul, autograd::unsqueeze(a, 1), autograd::unsqueeze(b, 0));
}

Tensor mv(const Tensor& m, const Tensor& v) {
  check_rank(m, 2, "mv", "the matrix");
  check_rank(v, 1, "mv", "the vector");
  if (m->shape[1] != v->shape[0]) {
    fail("mv: a matrix of shape {} cannot multiply a vector of length {}", shape_string(m->shape),
         v->shape[0]);
  }
  return autograd::matmul(m, v);
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  check_rank(a, 3, "bmm", "the first argument");
  check_rank(b, 3, "bmm", "the second argument");
  if (a->shape[0] != b->shape[0]) {
    fail("bmm: batch sizes differ: shapes {} and {}", shape_string(a->shape),
         shape_string(b->shape));
  }
  if (a->shape[2] != b->shape[1]) {
    fail("bmm: shapes {} and {} cannot be multiplied ({} vs {})", shape_string(a->shape),
         shape_string(b->shape), a->shape[2], b->shape[1]);
  }
  return autograd::matmul(a, b);
}

Tensor addmm(const Tensor& c, const Tensor& a, const Tensor& b, Scalar beta, Scalar alpha) {
  check_rank(a, 2, "addmm", "the first matrix");
  check_rank(b, 2, "addmm", "the second matrix");
  if (a->shape[1] != b->shape[0]) {
    fail("addmm: shapes {} and {} cannot be multiplied ({} vs {})", shape_string(a->shape),
         shape_string(b->shape), a->shape[1], b->shape[0]);
  }
  return add_scaled(c, scaled(autograd::matmul(a, b), alpha), beta, "addmm");
}

Tensor baddbmm(const Tensor& c, const Tensor& a, const Tensor& b, Scalar beta, Scalar alpha) {
  return add_scaled(c, scaled(bmm(a, b), alpha), beta, "baddbmm");
}

Tensor addmv(const Tensor& c, const Tensor& m, const Tensor& v, Scalar beta, Scalar alpha) {
  return add_scaled(c, scaled(mv(m, v), alpha), beta, "addmv");
}

// ---- Rearrangements ----

// Each dim: the last `shift` elements, then the others (two narrows and a
// cat).
Tensor roll(const Tensor& a, const std::vector<int64_t>& shifts, const std::vector<int>& dims) {
  if (dims.empty()) {
    if (shifts.size() != 1) {
      fail("roll: without dims, shifts must be one number, got {}", shifts.size());
    }
    const Tensor flat = reshaped(a, Shape{numel(a->shape)});
    return reshaped(roll(flat, shifts, {0}), a->shape);
  }
  if (shifts.size() != dims.size()) {
    fail("roll: {} shifts for {} dims (they must pair up)", shifts.size(), dims.size());
  }
  Tensor out = a;
  for (size_t i = 0; i < dims.size(); i++) {
    const int dim = dims[i];
    const int64_t n = a->shape[dim];
    if (n == 0) continue;
    const int64_t shift = ((shifts[i] % n) + n) % n;
    if (shift == 0) continue;
    out = autograd::cat(
        {autograd::narrow(out, dim, n - shift, shift), autograd::narrow(out, dim, 0, n - shift)},
        dim);
  }
  return out.get() == a.get() ? autograd::clone(a) : out;
}

// Dim by dim, [before, n, after] gets a new dim of `count` in front of n
// (an expand) and merges with it: at most four dims at a time, so any rank
// works.
namespace {

Tensor repeat_as(const Tensor& a, const std::vector<int64_t>& sizes, const char* function) {
  const int rank = a->shape.rank();
  if (static_cast<int>(sizes.size()) < rank) {
    fail("{}: {} sizes for a tensor of {} dimensions (give at least one per dim)", function,
         sizes.size(), rank);
  }
  if (sizes.size() > static_cast<size_t>(kMaxDims)) {
    fail("{}: {} sizes, more than the {} dimensions a tensor can have", function, sizes.size(),
         kMaxDims);
  }
  for (int64_t size : sizes) {
    if (size < 0) fail("{}: sizes must be >= 0, got {}", function, size);
    // (so that extent * size cannot overflow before the shape is checked)
    if (size > kMaxElements) fail("{}: size {} is too large (the limit is 2^40)", function, size);
  }
  Shape shape, target;
  for (size_t i = 0; i < sizes.size() - rank; i++) shape.push_back(1);
  for (int64_t extent : a->shape) shape.push_back(extent);
  for (size_t i = 0; i < sizes.size(); i++) target.push_back(shape[i] * sizes[i]);
  checked_numel(target, function);
  Tensor out = reshaped(a, shape);
  for (int d = 0; d < shape.rank(); d++) {
    const int64_t count = sizes[d];
    if (count == 1) continue;
    int64_t before = 1, after = 1;
    for (int i = 0; i < d; i++) before *= target[i];
    for (int i = d + 1; i < shape.rank(); i++) after *= shape[i];
    const Tensor grouped = autograd::reshape(out, Shape{before, 1, shape[d], after});
    const Tensor copies = autograd::expand(grouped, Shape{before, count, shape[d], after});
    Shape next = target;
    for (int i = d + 1; i < shape.rank(); i++) next[i] = shape[i];
    out = autograd::reshape(copies, next);
  }
  return out.get() == a.get() ? autograd::clone(a) : out;
}

}  // namespace

Tensor repeat(const Tensor& a, const std::vector<int64_t>& sizes) {
  return repeat_as(a, sizes, "repeat");
}

Tensor tile(const Tensor& a, const std::vector<int64_t>& sizes) {
  std::vector<int64_t> full(sizes);
  while (static_cast<int>(full.size()) < a->shape.rank()) full.insert(full.begin(), 1);
  return repeat_as(a, full, "tile");
}

namespace {

const char* pad_mode_name(PadMode mode) {
  switch (mode) {
    case PadMode::constant:
      return "constant";
    case PadMode::reflect:
      return "reflect";
    case PadMode::replicate:
      return "replicate";
    case PadMode::circular:
      return "circular";
  }
  return "?";
}

// Crops the negative sides of one dim (a narrow), as F.pad does before it
// pads the positive ones.
Tensor crop(const Tensor& a, int dim, int64_t left, int64_t right) {
  const int64_t n = a->shape[dim];
  const int64_t start = left < 0 ? -left : 0;
  const int64_t kept = n - start - (right < 0 ? -right : 0);
  return (start > 0 || kept < n) ? autograd::narrow(a, dim, start, kept) : a;
}

// Constant padding of one dim: blocks of the value on the positive sides
// (cat).
Tensor pad_constant(const Tensor& a, int dim, int64_t left, int64_t right, Scalar value) {
  std::vector<Tensor> parts;
  auto block = [&](int64_t count) {
    Shape shape = a->shape;
    shape[dim] = count;
    return filled_like(a, shape, value);
  };
  if (left > 0) parts.push_back(block(left));
  parts.push_back(a);
  if (right > 0) parts.push_back(block(right));
  return parts.size() == 1 ? a : autograd::cat(parts, dim);
}

// The other modes add, on each side, a block taken from the input: copies
// of the edge element (replicate, an expand), the mirror image without the
// edge (reflect, a flipped narrow) or the far end (circular, a narrow).
// None of them builds a table of positions as long as the padded dim (a
// replicate pad of 2^28 would be gigabytes of host memory before the output,
// which the memory limit counts, is even allocated).
Tensor pad_indexed(const Tensor& a, int dim, int64_t left, int64_t right, PadMode mode) {
  left = std::max<int64_t>(left, 0);
  right = std::max<int64_t>(right, 0);
  if (left == 0 && right == 0) return a;
  const int64_t n = a->shape[dim];
  const char* name = pad_mode_name(mode);
  if (n == 0) fail("pad: {} padding of an empty dim ({})", name, dim + 1);
  const int64_t most = std::max(left, right);
  if (mode == PadMode::reflect && most >= n) {
    fail("pad: reflect padding of {} on dim {} of size {} (it must be less than the size)", most,
         dim + 1, n);
  }
  if (mode == PadMode::circular && most > n) {
    fail("pad: circular padding of {} on dim {} of size {} (it must be at most the size)", most,
         dim + 1, n);
  }
  // The block of `count` elements before (the left side) or after the input.
  auto block = [&](int64_t count, bool before) {
    switch (mode) {
      case PadMode::replicate: {
        Shape shape = a->shape;
        shape[dim] = count;
        return autograd::expand(autograd::narrow(a, dim, before ? 0 : n - 1, 1), shape);
      }
      case PadMode::reflect:
        // Position -j is input j (j = count..1); position n - 1 + j is n - 1 - j.
        return autograd::flip(autograd::narrow(a, dim, before ? 1 : n - 1 - count, count), {dim});
      case PadMode::circular:
        return autograd::narrow(a, dim, before ? n - count : 0, count);
      case PadMode::constant:
        break;  // pad_constant's
    }
    LAZYLUA_ASSERT(false);
    return a;
  };
  std::vector<Tensor> parts;
  if (left > 0) parts.push_back(block(left, true));
  parts.push_back(a);
  if (right > 0) parts.push_back(block(right, false));
  return autograd::cat(parts, dim);
}

}  // namespace

Tensor pad(const Tensor& a, const std::vector<int64_t>& pads, PadMode mode, Scalar value) {
  const int rank = a->shape.rank();
  if (pads.size() % 2 != 0) fail("pad: pads must come in pairs, got {} numbers", pads.size());
  if (static_cast<int>(pads.size() / 2) > rank) {
    fail("pad: {} pairs of pads for a tensor of {} dimensions", pads.size() / 2, rank);
  }
  if (mode == PadMode::constant) ops::check_storable(value, a->dtype, "pad");
  // The padded shape first, in 128 bits (a pad may be anything from
  // math.mininteger to math.maxinteger), checked whole before any work.
  Shape padded = a->shape;
  for (size_t pair = 0; pair < pads.size() / 2; pair++) {
    const int dim = rank - 1 - static_cast<int>(pair);
    const int64_t n = a->shape[dim], left = pads[2 * pair], right = pads[2 * pair + 1];
    const __int128 size = static_cast<__int128>(n) + left + right;
    if (size < 0) {
      fail("pad: pads {} and {} leave a negative size on dim {} of size {}", left, right, dim + 1,
           n);
    }
    if (left < -n || right < -n) {
      fail("pad: pads {} and {} crop more than the {} elements of dim {}", left, right, n, dim + 1);
    }
    if (size > kMaxElements) {
      fail("pad: pads {} and {} give dim {} too many elements (the limit is 2^40)", left, right,
           dim + 1);
    }
    padded[dim] = static_cast<int64_t>(size);
  }
  checked_numel(padded, "pad");
  Tensor out = a;
  for (size_t pair = 0; pair < pads.size() / 2; pair++) {
    const int dim = rank - 1 - static_cast<int>(pair);
    const int64_t left = pads[2 * pair], right = pads[2 * pair + 1];
    if (left == 0 && right == 0) continue;
    out = crop(out, dim, left, right);
    out = mode == PadMode::constant ? pad_constant(out, dim, left, right, value)
                                    : pad_indexed(out, dim, left, right, mode);
  }
  return out.get() == a.get() ? autograd::clone(a) : out;
}

std::vector<Tensor> meshgrid(const std::vector<Tensor>& inputs, bool xy_indexing) {
  if (inputs.empty()) fail("meshgrid: expects at least one tensor");
  if (inputs.size() > static_cast<size_t>(kMaxDims)) {
    fail("meshgrid: {} tensors, more than the {} dimensions a tensor can have", inputs.size(),
         kMaxDims);
  }
  Shape grid;
  for (size_t i = 0; i < inputs.size(); i++) {
    if (inputs[i]->shape.rank() > 1) {
      fail("meshgrid: tensor {} must be 0-D or 1-D, got shape {}", i + 1,
           shape_string(inputs[i]->shape));
    }
    grid.push_back(numel(inputs[i]->shape));
  }
  // "xy" swaps the first two dims of the grid (x varies along columns).
  const bool swap = xy_indexing && inputs.size() >= 2;
  if (swap) std::swap(grid[0], grid[1]);
  std::vector<Tensor> out;
  for (size_t i = 0; i < inputs.size(); i++) {
    size_t position = i;
    if (swap && i < 2) position = 1 - i;
    Shape shape = Shape::filled(grid.rank(), 1);
    shape[static_cast<int>(position)] = grid[static_cast<int>(position)];
    out.push_back(autograd::expand(reshaped(inputs[i], shape), grid));
  }
  return out;
}

// a x b = a[1,2,0] * b[2,0,1] - a[2,0,1] * b[1,2,0] along dim (index_selects
// of the rotated components).
Tensor cross(const Tensor& a, const Tensor& b, int dim) {
  const Shape shape = broadcast_shapes(a->shape, b->shape, "cross");
  if (dim < 0 || dim >= shape.rank() || shape[dim] != 3) {
    fail("cross: dim {} of the broadcast shape {} must have 3 elements", dim + 1,
         shape_string(shape));
  }
  const Tensor x = autograd::expand(a, shape), y = autograd::expand(b, shape);
  const Tensor next = positions_tensor(a, {1, 2, 0}), after = positions_tensor(a, {2, 0, 1});
  const Tensor left = autograd::binary(BinaryOp::mul, autograd::index_select(x, dim, next),
                                       autograd::index_select(y, dim, after));
  const Tensor right = autograd::binary(BinaryOp::mul, autograd::index_select(x, dim, after),
                                        autograd::index_select(y, dim, next));
  return autograd::binary(BinaryOp::sub, left, right);
}

}  // namespace lazylua::shape_ops
