// lua_tensor_masked.cpp - boolean masks: t:masked_fill(mask, v),
// t:masked_select(mask), t[mask], t[mask] = v and t:nonzero().
//
// masked_fill is an elementwise `where`, lazy like any op. The others have
// a shape that depends on the mask's values, so they read the mask (a sync,
// counted as a host_read; PyTorch/XLA does the same) and then record an
// index_select of the flattened tensor at the true positions: the selected
// values stay lazy and gradients flow back to the tensor.
#include <algorithm>
#include <vector>

#include "interp/lua_tensor_internal.h"

namespace lazylua::binding {
namespace {

void check_mask(const Tensor& mask, const char* function) {
  if (mask->dtype != DType::boolean) {
    fail("{}: the mask must be a bool tensor, got {} (make one with a comparison, e.g. t:gt(0){})",
         function, dtype_name(mask->dtype),
         is_floating(mask->dtype) ? "" : "; for integer indices use t:index_select(dim, index)");
  }
}

// The 1-based row-major positions of the true elements of `mask` broadcast
// to `shape`. Reads the mask.
std::vector<int64_t> true_positions(const Tensor& mask, const Shape& shape) {
  const Array data = contiguous(observe(mask, SyncCause::host_read).expanded(shape));
  const bool* values = data.data<bool>();
  std::vector<int64_t> positions;
  for (int64_t i = 0; i < data.numel(); i++) {
    if (values[i]) positions.push_back(i + 1);
  }
  return positions;
}

// An i64 index tensor holding `positions`.
Tensor index_tensor(Context* context, const std::vector<int64_t>& positions, const char* function) {
  Array index = Array::empty(Shape{static_cast<int64_t>(positions.size())}, DType::i64, function);
  std::copy(positions.begin(), positions.end(), index.data<int64_t>());
  return make_tensor(context, std::move(index));
}

// The value to fill with, in the tensor's dtype: a number, or a tensor of
// one element (which keeps its gradient).
Tensor fill_value(lua_State* L, int arg, const Tensor& self, const char* function) {
  if (!to_tensor(L, arg)) {
    return scalar_tensor(self->context.get(), check_scalar(L, arg, function), self->dtype,
                         function);
  }
  const Tensor& value = check_tensor(L, arg, function);
  if (value->shape.rank() != 0) {
    fail("{}: the value must be a number or a 0-d tensor, got shape {}", function,
         shape_string(value->shape));
  }
  return value->dtype == self->dtype ? value : autograd::cast(value, self->dtype);
}

// Whether a tensor of shape `from` broadcasts to `to` (NumPy's rules).
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.rank() > to.rank()) return false;
  for (int d = 1; d <= from.rank(); d++) {
    const int64_t extent = from[from.rank() - d];
    if (extent != 1 && extent != to[to.rank() - d]) return false;
  }
  return true;
}

// The mask of masked_fill broadcasts to the tensor (not the other way).
void check_mask_broadcasts(const Tensor& self, const Tensor& mask, const char* function) {
  check_mask(mask, function);
  if (!broadcasts_to(mask->shape, self->shape)) {
    fail("{}: a mask of shape {} does not broadcast to the tensor's shape {}", function,
         shape_string(mask->shape), shape_string(self->shape));
  }
}

int masked_fill(lua_State* L) {
  const Tensor& self = check_tensor(L, 1, "masked_fill");
  const Tensor& mask = check_tensor(L, 2, "masked_fill");
  check_mask_broadcasts(self, mask, "masked_fill");
  push_tensor(L, autograd::where(mask, fill_value(L, 3, self, "masked_fill"), self));
  return 1;
}

int masked_fill_inplace(lua_State* L) {
  const Tensor& self = check_tensor(L, 1, "masked_fill_");
  const Tensor& mask = check_tensor(L, 2, "masked_fill_");
  check_mask_broadcasts(self, mask, "masked_fill_");
  const Tensor value = fill_value(L, 3, self, "masked_fill_");
  autograd::check_in_place(self, "masked_fill_", value);
  copy_(self, where(mask, value, self));
  lua_settop(L, 1);
  return 1;
}

// t:masked_select(mask): the elements where the mask (broadcast with t, as
// in PyTorch) is true, as a 1-D tensor in row-major order.
int masked_select(lua_State* L) {
  const Tensor& self = check_tensor(L, 1, "masked_select");
  const Tensor& mask = check_tensor(L, 2, "masked_select");
  check_mask(mask, "masked_select");
  const Shape shape = broadcast_shapes(self->shape, mask->shape, "masked_select");
  const Tensor values = self->shape == shape ? self : autograd::expand(self, shape);
  const Tensor flat = autograd::reshape(values, Shape{numel(shape)});
  const Tensor index =
      index_tensor(self->context.get(), true_positions(mask, shape), "masked_select");
  push_tensor(L, autograd::index_select(flat, 0, index));
  return 1;
}

// The 1-based indices of the non-zero elements of t in row-major order, n
// rows of t:dim() each, flat, and n. Reads t.
struct NonzeroIndices {
  int64_t count = 0;
  std::vector<int64_t> indices;
};

NonzeroIndices nonzero_indices(const Tensor& self) {
  const Array data = contiguous(ops::cast(observe(self, SyncCause::host_read), DType::boolean));
  const bool* values = data.data<bool>();
  const int rank = self->shape.rank();
  NonzeroIndices result;
  std::vector<int64_t>& indices = result.indices;
  for (int64_t i = 0; i < data.numel(); i++) {
    if (!values[i]) continue;
    result.count++;
    indices.resize(indices.size() + rank);
    int64_t rest = i;
    for (int d = rank - 1; d >= 0; d--) {
      indices[indices.size() - rank + d] = rest % self->shape[d] + 1;
      rest /= self->shape[d];
    }
  }
  return result;
}

// t:nonzero(): i64 [n, t:dim()].
int nonzero(lua_State* L) {
  const Tensor& self = check_tensor(L, 1, "nonzero");
  const NonzeroIndices found = nonzero_indices(self);
  Array result = Array::empty(Shape{found.count, self->shape.rank()}, DType::i64, "nonzero");
  std::copy(found.indices.begin(), found.indices.end(), result.data<int64_t>());
  push_tensor(L, std::move(result));
  return 1;
}

// t[mask] covers the leading dims of t that the mask has (as in PyTorch):
// t viewed as [rows, rest...], where rows is the mask's element count.
Shape rows_shape(const Tensor& self, const Tensor& mask, const char* function) {
  check_mask(mask, function);
  const int covered = mask->shape.rank();
  bool matches = covered <= self->shape.rank();
  for (int d = 0; matches && d < covered; d++) matches = mask->shape[d] == self->shape[d];
  if (!matches) {
    fail(
        "{}: a mask of shape {} does not match the leading dims of a tensor of shape {} "
        "(t[mask] selects along the dims the mask has; t:masked_select(mask) broadcasts)",
        function, shape_string(mask->shape), shape_string(self->shape));
  }
  Shape rows{numel(mask->shape)};
  for (int d = covered; d < self->shape.rank(); d++) rows.push_back(self->shape[d]);
  return rows;
}

}  // namespace

Tensor mask_index(const Tensor& self, const Tensor& mask) {
  const Shape rows = rows_shape(self, mask, "index");
  const Tensor index =
      index_tensor(self->context.get(), true_positions(mask, mask->shape), "index");
  return autograd::index_select(autograd::reshape(self, rows), 0, index);
}

void mask_assign(lua_State* L, const Tensor& self, const Tensor& mask, int value_arg) {
  const Shape rows = rows_shape(self, mask, "newindex");
  // The mask with ones for the dims it does not cover broadcasts to t.
  Shape mask_shape = mask->shape;
  for (int d = mask_shape.rank(); d < self->shape.rank(); d++) mask_shape.push_back(1);
  const Tensor wide_mask = reshape(mask, mask_shape);
  if (!to_tensor(L, value_arg)) {
    autograd::check_in_place(self, "newindex");
    const Tensor value = scalar_tensor(self->context.get(), check_scalar(L, value_arg, "newindex"),
                                       self->dtype, "newindex");
    copy_(self, where(wide_mask, value, self));
    return;
  }
  const Tensor& source = check_tensor(L, value_arg, "newindex");
  autograd::check_in_place(self, "newindex", source);
  const std::vector<int64_t> positions = true_positions(mask, mask->shape);
  // The selected slices: [n, rest...]; the value broadcasts to them, or has
  // exactly their number of elements.
  Shape selected = rows;
  selected[0] = static_cast<int64_t>(positions.size());
  Tensor values = source->dtype == self->dtype ? source : cast(source, self->dtype);
  if (numel(values->shape) == numel(selected) && values->shape != selected) {
    values = reshape(values, selected);
  } else if (values->shape != selected) {
    if (!broadcasts_to(values->shape, selected)) {
      fail("newindex: a value of shape {} does not fit the {} selected elements (shape {})",
           shape_string(values->shape), numel(selected), shape_string(selected));
    }
    values = expand(values, selected);
  }
  // Scattered into zeros at the true rows, then chosen where the mask is.
  Shape spread_shape = selected;
  for (int d = 1; d < spread_shape.rank(); d++) spread_shape[d] = 1;
  const Tensor spread = expand(
      reshape(index_tensor(self->context.get(), positions, "newindex"), spread_shape), selected);
  const Tensor zeros =
      expand(scalar_tensor(self->context.get(), ops::Scalar::from_integer(0), self->dtype), rows);
  const Tensor scattered = scatter_add(zeros, 0, spread, values);
  copy_(self, where(wide_mask, reshape(scattered, self->shape), self));
}

int where_indices(lua_State* L) {
  const Tensor& cond = check_tensor(L, 1, "where");
  const int rank = cond->shape.rank();
  if (rank == 0) fail("where: a 0-d condition has no indices (use cond:item())");
  const NonzeroIndices found = nonzero_indices(cond);
  for (int d = 0; d < rank; d++) {
    Array column = Array::empty(Shape{found.count}, DType::i64, "where");
    int64_t* out = column.data<int64_t>();
    for (int64_t row = 0; row < found.count; row++) out[row] = found.indices[row * rank + d];
    push_tensor(L, std::move(column));
  }
  return rank;
}

void register_masked_methods(lua_State* L) {
  static const luaL_Reg methods[] = {
      {"masked_fill", guarded<masked_fill>},
      {"masked_fill_", guarded<masked_fill_inplace>},
      {"masked_select", guarded<masked_select>},
      {"nonzero", guarded<nonzero>},
      {nullptr, nullptr},
  };
  luaL_setfuncs(L, methods, 0);
}

}  // namespace lazylua::binding
