-- onnx_util.lua - small helpers shared by the ONNX op modules
-- (stdlib/onnx_ops_*.lua): axis conversion and attribute defaults.
--
-- ONNX axes are 0-based and may be negative (counting from the end);
-- lazylua's dims are 1-based.
local util = {}

-- The 1-based lazylua dim of an ONNX axis in a tensor of `rank` dims.
-- Raises through ctx:error when the axis is outside [-rank, rank - 1] (with
-- `rank` 0 treated as 1, as a 0-d tensor's only axis).
function util.dim(ctx, axis, rank)
  local r = math.max(rank, 1)
  if math.type(axis) ~= "integer" or axis < -r or axis >= r then
    ctx:error("axis %s is outside [%d, %d] for a tensor of rank %d", tostring(axis), -r, r - 1, rank)
  end
  if axis < 0 then axis = axis + r end
  return axis + 1
end

-- A list of ONNX axes as sorted, distinct 1-based dims (a repeated axis is
-- an error of the model).
function util.dims(ctx, axes, rank)
  local dims, seen = {}, {}
  for _, axis in ipairs(axes) do
    local d = util.dim(ctx, axis, rank)
    if seen[d] then ctx:error("axis %d is given twice", axis) end
    seen[d] = true
    dims[#dims + 1] = d
  end
  table.sort(dims)
  return dims
end

-- attrs[name], or `default` when the node does not set it.
function util.attr(attrs, name, default)
  local value = attrs[name]
  if value == nil then return default end
  return value
end

-- An integer attribute used as a flag (ONNX has no boolean attributes).
function util.flag(attrs, name, default)
  local value = attrs[name]
  if value == nil then return default end
  return value ~= 0
end

local float_dtypes = {f32 = true, f64 = true}

-- Whether a tensor holds floating-point values.
function util.is_float(t) return float_dtypes[t:dtype()] == true end

-- ONNX TensorProto.DataType numbers -> lazylua dtypes, for the types whose
-- values lazylua holds exactly (the others map to nil).
util.onnx_dtypes = {[1] = "f32", [6] = "i32", [7] = "i64", [9] = "bool", [11] = "f64"}

-- Names of the ONNX types, for messages (and Cast's `to` before opset 6,
-- which was a string).
util.onnx_type_names = {
  [1] = "FLOAT", [2] = "UINT8", [3] = "INT8", [4] = "UINT16", [5] = "INT16", [6] = "INT32",
  [7] = "INT64", [8] = "STRING", [9] = "BOOL", [10] = "FLOAT16", [11] = "DOUBLE", [12] = "UINT32",
  [13] = "UINT64", [14] = "COMPLEX64", [15] = "COMPLEX128", [16] = "BFLOAT16",
}

-- The rank of a tensor (0 for a 0-d tensor).
function util.rank(t) return t:dim() end

return util
