// eager_ops_structure.cpp - reductions, matmul, views and joins: the ops
// whose result shape is not simply the broadcast of their inputs.
#include <algorithm>
#include <numeric>

#include "checked.h"
#include "eager_ops.h"
#include "kernels/index.h"
#include "kernels/matmul.h"

namespace lazylua::ops {
namespace {

DType sum_dtype(DType input) {
  return is_floating(input) ? input : DType::i64;
}

Shape reduced_shape(const Shape& shape, std::optional<int> dim, bool keepdim) {
  if (!dim) return keepdim ? Shape::filled(shape.rank(), 1) : Shape{};
  Shape result = shape;
  if (keepdim) {
    result[*dim] = 1;
  } else {
    result.erase(*dim);
  }
  return result;
}

void check_dim(int dim, int rank, const char* op) {
  if (dim < 0 || dim >= rank)
    fail("{}: dimension {} out of range for a {}-d tensor", op, dim + 1, rank);
}

void check_index_dtype(const Array& index, const char* op) {
  if (!is_integral(index.dtype)) {
    fail("{}: index must be an i64 or i32 tensor, got {}", op, dtype_name(index.dtype));
  }
}

// Views `a` (rank >= 2, batch dims already broadcast) as [batch, rows, cols].
Array as_batched_matrices(const Array& a, int64_t batch) {
  const Shape shape{batch, a.shape[a.rank() - 2], a.shape[a.rank() - 1]};
  if (a.rank() == 3) return a;
  Array view = a.try_reshape_view(shape);
  if (view.defined()) return view;
  return contiguous(a).try_reshape_view(shape);
}

}  // namespace

Shape infer_shape(const Shape& shape, int64_t count, const char* op) {
  Shape result = shape;
  int inferred = -1;
  int64_t known = 1;
  for (int i = 0; i < shape.rank(); i++) {
    if (shape[i] == -1) {
      if (inferred >= 0) fail("{}: only one dimension can be -1 in {}", op, shape_string(shape));
      inferred = i;
    } else if (shape[i] < 0) {
      fail("{}: invalid size {} in {}", op, shape[i], shape_string(shape));
    } else if (mul_overflows(known, shape[i], &known) || known > kMaxElements) {
      fail("{}: shape {} has too many elements (the limit is 2^40)", op, shape_string(shape));
    }
  }
  if (inferred >= 0) {
    if (known == 0 || count % known != 0) {
      fail("{}: shape {} is invalid for a tensor of {} elements", op, shape_string(shape), count);
    }
    result[inferred] = count / known;
  }
  if (checked_numel(result, op) != count) {
    fail("{}: shape {} is invalid for a tensor of {} elements", op, shape_string(shape), count);
  }
  return result;
}

// ---- Reductions ----

namespace {

// Max, min and their indices have no identity: reducing nothing is an
// error. Checked here from shapes alone, so that lazy mode raises it when
// the op is recorded, as eager mode does, and not only when a value is read
// (the kernels check the same). `arg`: the message of the index kernels,
// which also refuse a 0-size dim when no result is left.
void check_reducible(const char* name, const Array& a, std::optional<int> dim, bool arg) {
  const char* no_identity = arg ? "" : ": the result has no identity";
  if (!dim) {
    if (a.numel() == 0) {
      fail("{}: cannot reduce an empty tensor (shape {}){}", name, shape_string(a.shape),
           no_identity);
    }
    return;
  }
  if (a.rank() == 0 || a.shape[*dim] != 0) return;
  Shape kept = a.shape;
  kept.erase(*dim);
  if (arg || numel(kept) != 0) {
    fail("{}: cannot reduce dimension {} of size 0 (shape {}){}", name, *dim + 1,
         shape_string(a.shape), no_identity);
  }
}

}  // namespace

Array reduce(ReduceOp op, const Array& a, std::optional<int> dim, bool keepdim) {
  const char* name = reduce_op_name(op);
  if (dim) check_dim(*dim, a.rank(), name);
  Array input = a;
  DType out_type = a.dtype;
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::prod:
      out_type = sum_dtype(a.dtype);
      break;
    case ReduceOp::mean:
      out_type = is_floating(a.dtype) ? a.dtype : kDefaultFloat;
      input = cast(a, out_type);
      break;
    case ReduceOp::any:
    case ReduceOp::all:
      out_type = DType::boolean;
      break;
    case ReduceOp::max:
    case ReduceOp::min:
      check_reducible(name, a, dim, false);
      break;
  }
  Array out = Array::empty(reduced_shape(a.shape, dim, keepdim), out_type, name);
  if (!in_meta_scope()) reduce_kernel(op, input, dim.value_or(-1), out);
  return out;
}

std::pair<Array, Array> max_min_dim(bool is_max, const Array& a, int dim, bool keepdim) {
  const char* name = is_max ? "max" : "min";
  check_dim(dim, a.rank(), name);
  check_reducible(name, a, dim, true);
  const Shape shape = reduced_shape(a.shape, dim, keepdim);
  Array values = Array::empty(shape, a.dtype, name);
  Array indices = Array::empty(shape, DType::i64, name);
  if (!in_meta_scope()) arg_reduce_kernel(is_max, a, dim, values, indices);
  return {values, indices};
}

Array arg_max_min(bool is_max, const Array& a, std::optional<int> dim, bool keepdim) {
  const char* name = is_max ? "argmax" : "argmin";
  if (dim) check_dim(*dim, a.rank(), name);
  check_reducible(is_max ? "max" : "min", a, dim, true);
  Array indices = Array::empty(reduced_shape(a.shape, dim, keepdim), DType::i64, name);
  if (!in_meta_scope()) arg_reduce_kernel(is_max, a, dim.value_or(-1), Array{}, indices);
  return indices;
}

Array softmax(const Array& a, int dim, bool log) {
  const char* name = log ? "log_softmax" : "softmax";
  check_dim(dim, std::max(a.rank(), 1), name);
  const DType type = is_floating(a.dtype) ? a.dtype : kDefaultFloat;
  Array out = Array::empty(a.shape, type, name);
  if (a.rank() == 0) {  // a single element: softmax 1, log_softmax 0
    if (!in_meta_scope()) fill_kernel(out, log ? 0.0 : 1.0);
    return out;
  }
  if (!in_meta_scope()) softmax_kernel(cast(a, type), dim, log, out);
  return out;
}

Array cumsum(const Array& a, int dim) {
  check_dim(dim, std::max(a.rank(), 1), "cumsum");
  Array out = Array::empty(a.shape, sum_dtype(a.dtype), "cumsum");
  if (a.rank() == 0) {
    if (!in_meta_scope()) copy_kernel(a, out);
    return out;
  }
  if (!in_meta_scope()) cumsum_kernel(a, dim, out);
  return out;
}

// ---- Matmul ----

Array matmul(const Array& a, const Array& b) {
  return matmul_into(a, b, Array{});
}

Array matmul_into(const Array& a, const Array& b, const Array& into) {
  if (a.rank() == 0 || b.rank() == 0) {
    fail("matmul: both arguments need at least 1 dimension, got shapes {} and {}",
         shape_string(a.shape), shape_string(b.shape));
  }
  // 1-D operands become matrices (a row for a, a column for b) and lose the
  // added dim again in the result, as in torch.matmul.
  Array left = a.rank() == 1 ? a.view_as(Shape{1, a.shape[0]},
                                         Strides{a.shape[0] * a.strides[0], a.strides[0]}, a.offset)
                             : a;
  Array right =
      b.rank() == 1 ? b.view_as(Shape{b.shape[0], 1}, Strides{b.strides[0], 1}, b.offset) : b;
  const int64_t rows = left.shape[left.rank() - 2], inner = left.shape[left.rank() - 1];
  const int64_t right_inner = right.shape[right.rank() - 2], cols = right.shape[right.rank() - 1];
  if (inner != right_inner) {
    fail("matmul: shapes {} and {} cannot be multiplied ({} vs {})", shape_string(a.shape),
         shape_string(b.shape), inner, right_inner);
  }
  Shape left_batch = left.shape, right_batch = right.shape;
  left_batch.resize(left.rank() - 2);
  right_batch.resize(right.rank() - 2);
  const Shape batch_shape = broadcast_shapes(left_batch, right_batch, "matmul");
  const int64_t batch = checked_numel(batch_shape, "matmul");

  Shape left_full = batch_shape, right_full = batch_shape;
  left_full.push_back(rows);
  left_full.push_back(inner);
  right_full.push_back(inner);
  right_full.push_back(cols);
  // Broadcast batch dims may make the operands' views (and the result) far
  // bigger than either input: check them before anything multiplies them.
  checked_numel(left_full, "matmul");
  checked_numel(right_full, "matmul");
  const int64_t out_count = checked_numel(Shape{batch, rows, cols}, "matmul");
  const DType type = promote(a.dtype, b.dtype);
  const Array left3 = as_batched_matrices(cast(left, type).expanded(left_full), batch);
  const Array right3 = as_batched_matrices(cast(right, type).expanded(right_full), batch);

  Shape out_shape = batch_shape;
  if (a.rank() > 1) out_shape.push_back(rows);
  if (b.rank() > 1) out_shape.push_back(cols);
  const bool fits =
      into.defined() && into.is_contiguous() && into.dtype == type && into.numel() == out_count;
  Array out = fits ? into.view_as(Shape{batch, rows, cols},
                                  contiguous_strides(Shape{batch, rows, cols}), into.offset)
                   : Array::empty(Shape{batch, rows, cols}, type, "matmul");
  if (!in_meta_scope()) matmul_kernel(left3, right3, out);
  return out.view_as(out_shape, contiguous_strides(out_shape), out.offset);
}

// ---- Views ----

Array view(const Array& a, const Shape& shape) {
  const Shape target = infer_shape(shape, a.numel(), "view");
  Array result = a.try_reshape_view(target);
  if (!result.defined()) {
    fail(
        "view: the strides of a tensor of shape {} do not allow a view of shape {}; use "
        "reshape (which copies)",
        shape_string(a.shape), shape_string(target));
  }
  return result;
}

Array reshape(const Array& a, const Shape& shape) {
  const Shape target = infer_shape(shape, a.numel(), "reshape");
  Array result = a.try_reshape_view(target);
  if (result.defined()) return result;
  return contiguous(a).try_reshape_view(target);
}

Array transpose(const Array& a, int dim_a, int dim_b) {
  if (a.rank() == 0) return a;
  check_dim(dim_a, a.rank(), "transpose");
  check_dim(dim_b, a.rank(), "transpose");
  return a.transposed(dim_a, dim_b);
}

Array permute(const Array& a, const std::vector<int>& order) {
  if (static_cast<int>(order.size()) != a.rank()) {
    fail("permute: got {} dimensions for a {}-d tensor", order.size(), a.rank());
  }
  bool seen[kMaxDims] = {};
  Shape shape;
  Strides strides;
  for (int dim : order) {
    check_dim(dim, a.rank(), "permute");
    if (seen[dim]) fail("permute: dimension {} appears twice", dim + 1);
    seen[dim] = true;
    shape.push_back(a.shape[dim]);
    strides.push_back(a.strides[dim]);
  }
  return a.view_as(shape, strides, a.offset);
}

Array narrow(const Array& a, int dim, int64_t start, int64_t length) {
  check_dim(dim, a.rank(), "narrow");
  if (length < 0) fail("narrow: length must be non-negative, got {}", length);
  // Not `start + length > size`: that sum overflows for a huge length.
  if (!range_fits(start, length, a.shape[dim])) {
    fail("narrow: start {} and length {} exceed the size {} of dimension {}", start + 1, length,
         a.shape[dim], dim + 1);
  }
  return a.narrowed(dim, start, length);
}

Array select(const Array& a, int dim, int64_t index) {
  check_dim(dim, a.rank(), "select");
  if (index < 0 || index >= a.shape[dim]) {
    fail("select: index {} out of range for size {}", index + 1, a.shape[dim]);
  }
  return a.selected(dim, index);
}

Array squeeze(const Array& a, std::optional<int> dim) {
  Shape shape;
  Strides strides;
  for (int i = 0; i < a.rank(); i++) {
    const bool drop = a.shape[i] == 1 && (!dim || *dim == i);
    if (drop) continue;
    shape.push_back(a.shape[i]);
    strides.push_back(a.strides[i]);
  }
  return a.view_as(shape, strides, a.offset);
}

Array unsqueeze(const Array& a, int dim) {
  if (dim < 0 || dim > a.rank()) fail("unsqueeze: dimension {} out of range", dim + 1);
  Shape shape = a.shape;
  Strides strides = a.strides;
  const int64_t stride =
      dim < a.rank() ? checked_mul(a.shape[dim], a.strides[dim], "unsqueeze") : 1;
  shape.insert(dim, 1);
  strides.insert(dim, stride);
  return a.view_as(shape, strides, a.offset);
}

Array expand(const Array& a, const Shape& shape) {
  if (shape.rank() < a.rank()) {
    fail("expand: cannot expand shape {} to {} (fewer dimensions)", shape_string(a.shape),
         shape_string(shape));
  }
  Shape target = shape;
  const int lead = shape.rank() - a.rank();
  for (int i = 0; i < shape.rank(); i++) {
    const int source = i - lead;
    if (shape[i] == -1) {
      if (source < 0) fail("expand: -1 is not allowed for a new leading dimension");
      target[i] = a.shape[source];
    } else if (shape[i] < 0) {
      fail("expand: invalid size {}", shape[i]);
    } else if (source >= 0 && a.shape[source] != 1 && a.shape[source] != shape[i]) {
      fail("expand: cannot expand shape {} to {}", shape_string(a.shape), shape_string(shape));
    }
  }
  checked_numel(target, "expand");
  return a.expanded(target);
}

Array flatten(const Array& a, int start_dim, int end_dim) {
  if (a.rank() == 0) return reshape(a, Shape{1});
  check_dim(start_dim, a.rank(), "flatten");
  check_dim(end_dim, a.rank(), "flatten");
  if (start_dim > end_dim) fail("flatten: start dimension comes after the end dimension");
  Shape shape;
  for (int i = 0; i < start_dim; i++) shape.push_back(a.shape[i]);
  int64_t merged = 1;
  for (int i = start_dim; i <= end_dim; i++) merged = checked_mul(merged, a.shape[i], "flatten");
  shape.push_back(merged);
  for (int i = end_dim + 1; i < a.rank(); i++) shape.push_back(a.shape[i]);
  return reshape(a, shape);
}

// ---- Joins and indexing ----

Array cat(const std::vector<Array>& inputs, int dim) {
  if (inputs.empty()) fail("cat: expected a non-empty list of tensors");
  const Array& first = inputs[0];
  check_dim(dim, first.rank(), "cat");
  DType type = first.dtype;
  Shape shape = first.shape;
  shape[dim] = 0;
  for (size_t i = 0; i < inputs.size(); i++) {
    const Array& input = inputs[i];
    bool fits = input.rank() == first.rank();
    for (int d = 0; fits && d < first.rank(); d++) {
      fits = d == dim || input.shape[d] == first.shape[d];
    }
    if (!fits) {
      fail("cat: tensor {} has shape {}, which does not match {} outside dimension {}", i + 1,
           shape_string(input.shape), shape_string(first.shape), dim + 1);
    }
    shape[dim] = checked_add(shape[dim], input.shape[dim], "cat");
    type = promote(type, input.dtype);
  }
  std::vector<Array> converted;
  converted.reserve(inputs.size());
  for (const Array& input : inputs) converted.push_back(cast(input, type));
  Array out = Array::empty(shape, type, "cat");
  if (!in_meta_scope()) cat_kernel(converted, dim, out);
  return out;
}

Array gather(const Array& a, int dim, const Array& index) {
  check_dim(dim, a.rank(), "gather");
  check_index_dtype(index, "gather");
  if (index.rank() != a.rank()) {
    fail("gather: index has {} dimensions but the input has {}", index.rank(), a.rank());
  }
  for (int d = 0; d < a.rank(); d++) {
    if (d != dim && index.shape[d] > a.shape[d]) {
      fail("gather: index shape {} exceeds input shape {} in dimension {}",
           shape_string(index.shape), shape_string(a.shape), d + 1);
    }
  }
  Array out = Array::empty(index.shape, a.dtype, "gather");
  if (!in_meta_scope()) gather_kernel(a, dim, index, out);
  return out;
}

Array scatter_add(const Array& base, int dim, const Array& index, const Array& src) {
  check_dim(dim, base.rank(), "scatter_add");
  check_index_dtype(index, "scatter_add");
  if (index.rank() != base.rank() || src.rank() != base.rank()) {
    fail("scatter_add: index ({} dimensions) and src ({}) must have the input's {} dimensions",
         index.rank(), src.rank(), base.rank());
  }
  if (src.dtype != base.dtype) {
    fail("scatter_add: src is {} but the input is {}", dtype_name(src.dtype),
         dtype_name(base.dtype));
  }
  for (int d = 0; d < base.rank(); d++) {
    if (index.shape[d] > src.shape[d] || (d != dim && index.shape[d] > base.shape[d])) {
      fail("scatter_add: index shape {} exceeds src shape {} or input shape {} in dimension {}",
           shape_string(index.shape), shape_string(src.shape), shape_string(base.shape), d + 1);
    }
  }
  Array out = Array::empty(base.shape, base.dtype, "scatter_add");
  if (!in_meta_scope()) {
    copy_kernel(base, out);
    scatter_kernel(out, dim, index, src, true);
  }
  return out;
}

Array index_select(const Array& a, int dim, const Array& index) {
  check_dim(dim, a.rank(), "index_select");
  check_index_dtype(index, "index_select");
  if (index.rank() > 1)
    fail("index_select: index must be 1-d, got shape {}", shape_string(index.shape));
  Shape shape = a.shape;
  shape[dim] = index.numel();
  const Array flat_index =
      index.rank() == 0 ? index.view_as(Shape{1}, Strides{1}, index.offset) : index;
  Array out = Array::empty(shape, a.dtype, "index_select");
  if (!in_meta_scope()) index_select_kernel(a, dim, flat_index, out);
  return out;
}

}  // namespace lazylua::ops
