-- onnx_nn_common.lua - helpers shared by the ONNX op modules onnx_ops_nn
-- and onnx_ops_shape: axis conversion, padding, strided slices, index
-- conversion (ONNX 0-based, negative from the end -> lazylua 1-based).
local tensor = require "tensor"

local H = {}

-- ONNX axis -> lazylua dim.
local function dim_of(ctx, axis, rank)
  if axis < -rank or axis >= math.max(rank, 1) then
    ctx:error("axis %d is out of range for rank %d", axis, rank)
  end
  if axis < 0 then axis = axis + rank end
  return axis + 1
end

local function product(list, from, to)
  local p = 1
  for i = from or 1, to or #list do p = p * list[i] end
  return p
end

local function filled(n, v)
  local list = {}
  for i = 1, n do list[i] = v end
  return list
end

local function is_float(t)
  local d = t:dtype()
  return d == "f32" or d == "f64"
end

-- Pads dim `d` (1-based) of `t` by `before` and `after` elements of `value`
-- (negative crops).
local function pad_dim(t, d, before, after, value, mode)
  if before == 0 and after == 0 then return t end
  local pads = filled(2 * (t:dim() - d + 1), 0)
  pads[#pads - 1], pads[#pads] = before, after
  return tensor.pad(t, pads, {mode = mode or "constant", value = value or 0})
end

-- `count` elements of dim `d` from 0-based `start`, every `step` (step may be
-- negative).
local function strided(t, d, start, count, step)
  if step == 1 then return t:narrow(d, start + 1, count) end
  if count == 0 then return t:narrow(d, 1, 0) end
  local index = tensor.arange(start + 1, start + 1 + count * step, step)
  return t:index_select(d, index)
end

-- Inserts `factor - 1` zeros between the elements of dim `d`.
local function spread(t, d, factor)
  if factor == 1 then return t end
  local size = t:size()
  local n = size[d]
  local with_unit = {}
  for i = 1, #size do
    with_unit[#with_unit + 1] = size[i]
    if i == d then with_unit[#with_unit + 1] = 1 end
  end
  local padded = pad_dim(t:reshape(table.unpack(with_unit)), d + 1, 0, factor - 1)
  local merged = {}
  for i = 1, #size do merged[i] = i == d and n * factor or size[i] end
  return padded:reshape(table.unpack(merged)):narrow(d, 1, (n - 1) * factor + 1)
end

-- Zero-based indices of 0-based `index` (negative counts from `n`), 1-based
-- i64, lazily.
local function one_based(index, n)
  if index:dtype() ~= "i64" then index = index:long() end
  return tensor.where(index:lt(0), index + (n + 1), index + 1)
end

-- The explicit begin/end pads of a conv or pool (auto_pad resolved).
local function pad_spatial(x, begins, ends, value)
  local pads = {}
  for i = #begins, 1, -1 do
    pads[#pads + 1] = begins[i]
    pads[#pads + 1] = ends[i]
  end
  for _, p in ipairs(pads) do
    if p ~= 0 then return tensor.pad(x, pads, {value = value or 0}) end
  end
  return x
end

local function add_bias(y, b)
  if b == nil then return y end
  local shape = filled(y:dim(), 1)
  shape[2] = b:numel()
  return y + b:reshape(table.unpack(shape))
end

-- Shape [1, C, 1, ...] of a per-channel vector for a rank-r input.
local function per_channel(v, rank)
  local shape = filled(rank, 1)
  shape[2] = v:numel()
  return v:reshape(table.unpack(shape))
end

-- The values of an integer tensor (a shape, axes, pads, indices ...) as a
-- Lua list; `what` names it in the error for a tensor of another type
-- (ONNX types these inputs int64, or int32/int64).
local function int_list(ctx, t, what)
  local dtype = t:dtype()
  if dtype ~= "i64" and dtype ~= "i32" then
    ctx:error("%s must be an integer tensor, got %s", what or "the input", dtype)
  end
  return ctx:host(t)
end

local function reshape_to(t, shape)
  if #shape == 0 then return t:reshape({}) end
  return t:reshape(table.unpack(shape))
end

H.dim_of, H.product, H.filled, H.is_float, H.pad_dim = dim_of, product, filled, is_float, pad_dim
H.strided, H.spread, H.one_based, H.pad_spatial, H.add_bias = strided, spread, one_based, pad_spatial, add_bias
H.per_channel, H.int_list, H.reshape_to = per_channel, int_list, reshape_to

return H
