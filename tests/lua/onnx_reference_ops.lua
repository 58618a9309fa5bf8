-- onnx_reference_ops.lua - plain ONNX op implementations for the tests that
-- re-import what onnx.export wrote (test_onnx_export.lua, and
-- tests/cli/test_onnx_export_scripts.sh): `dofile(...).install(onnx)`.
-- The import op library (stdlib/onnx_ops_*.lua) is written in parallel; until
-- an op is there, this file supplies a plain implementation of it for the
-- re-import (tensor API only, following the ONNX operator docs), so the
-- exported graphs' meaning is checked either way. onnx.ops wins when it has
-- the op.
local function dims(axes, rank)
  local list = {}
  for k, axis in ipairs(axes) do list[k] = (axis < 0 and axis + rank or axis) + 1 end
  return list
end
local function elementwise(method)
  return function(_, inputs) return inputs[1][method](inputs[1], inputs[2]) end
end
local dtype_of_onnx = {[1] = "f32", [6] = "i32", [7] = "i64", [9] = "bool", [11] = "f64"}
local local_ops = {
  Identity = function(_, inputs) return inputs[1] end,
  Add = elementwise("add"), Sub = elementwise("sub"), Mul = elementwise("mul"),
  Div = function(_, inputs)  -- integers: C's truncating division
    local a, b = inputs[1], inputs[2]
    if a:dtype():match("^i") then
      local q = a:abs() // b:abs()
      return tensor.where((a:lt(0)):logical_xor(b:lt(0)), -q, q)
    end
    return a / b
  end,
  Mod = function(_, inputs, attrs)
    assert((attrs.fmod or 0) == 0, "fmod = 1 not implemented here")
    return inputs[1] % inputs[2]  -- the sign of the divisor, as numpy.mod
  end,
  Floor = function(_, inputs) return inputs[1]:floor() end,
  Reciprocal = function(_, inputs) return inputs[1]:reciprocal() end,
  IsNaN = function(_, inputs) return inputs[1]:isnan() end,
  IsInf = function(_, inputs) return inputs[1]:isinf() end,
  ReduceMin = function(_, inputs, attrs)
    if not attrs.axes then return inputs[1]:min() end
    return (inputs[1]:min(dims(attrs.axes, inputs[1]:dim())[1], attrs.keepdims ~= 0))
  end,
  ReduceProd = function(_, inputs, attrs)
    return inputs[1]:prod(dims(attrs.axes, inputs[1]:dim())[1], attrs.keepdims ~= 0)
  end,
  ArgMin = function(_, inputs, attrs)
    return inputs[1]:argmin(dims({attrs.axis}, inputs[1]:dim())[1], attrs.keepdims ~= 0) - 1
  end,
  ScatterElements = function(_, inputs, attrs)
    assert(attrs.reduction == "add")
    return inputs[1]:scatter_add(dims({attrs.axis}, inputs[1]:dim())[1], inputs[2] + 1, inputs[3])
  end,
  Pow = elementwise("pow"), Max = elementwise("maximum"), Min = elementwise("minimum"),
  Equal = elementwise("eq"), Less = elementwise("lt"), Greater = elementwise("gt"),
  LessOrEqual = elementwise("le"), GreaterOrEqual = elementwise("ge"), And = elementwise("logical_and"),
  Or = elementwise("logical_or"),
  Relu = function(_, inputs) return inputs[1]:relu() end,
  Exp = function(_, inputs) return inputs[1]:exp() end,
  Log = function(_, inputs) return inputs[1]:log() end,
  Tanh = function(_, inputs) return inputs[1]:tanh() end,
  Sigmoid = function(_, inputs) return inputs[1]:sigmoid() end,
  Neg = function(_, inputs) return inputs[1]:neg() end,
  Abs = function(_, inputs) return inputs[1]:abs() end,
  Sqrt = function(_, inputs) return inputs[1]:sqrt() end,
  Erf = function(_, inputs) return inputs[1]:erf() end,
  Not = function(_, inputs) return inputs[1]:logical_not() end,
  Cast = function(_, inputs, attrs) return inputs[1]:to(dtype_of_onnx[attrs.to]) end,
  MatMul = function(_, inputs) return inputs[1]:matmul(inputs[2]) end,
  Reshape = function(ctx, inputs)
    local shape = ctx:host(inputs[2])
    for d, extent in ipairs(shape) do if extent == 0 then shape[d] = inputs[1]:size(d) end end
    return inputs[1]:reshape(shape)
  end,
  Transpose = function(_, inputs, attrs)
    local order = {}
    for k, axis in ipairs(attrs.perm) do order[k] = axis + 1 end
    return inputs[1]:permute(order)
  end,
  Conv = function(_, inputs, attrs)
    assert((attrs.group or 1) == 1 and attrs.pads[1] == attrs.pads[3] and attrs.pads[2] == attrs.pads[4])
    local y = tensor.conv2d(inputs[1], inputs[2], {stride = attrs.strides, padding = {attrs.pads[1], attrs.pads[2]}})
    if inputs[3] then y = y + inputs[3]:reshape(-1, 1, 1) end
    return y
  end,
  MaxPool = function(_, inputs, attrs)
    return tensor.max_pool2d(inputs[1], attrs.kernel_shape,
      {stride = attrs.strides, padding = {attrs.pads[1], attrs.pads[2]}})
  end,
  Softmax = function(_, inputs, attrs) return inputs[1]:softmax(dims({attrs.axis}, inputs[1]:dim())[1]) end,
  LogSoftmax = function(_, inputs, attrs) return inputs[1]:log_softmax(dims({attrs.axis}, inputs[1]:dim())[1]) end,
  ReduceSum = function(ctx, inputs, attrs)
    if not inputs[2] then
      assert(attrs.keepdims == 0)
      return inputs[1]:sum()
    end
    local d = dims(ctx:host(inputs[2]), inputs[1]:dim())[1]
    return inputs[1]:sum(d, attrs.keepdims ~= 0)
  end,
  ReduceMax = function(_, inputs, attrs)
    if not attrs.axes then return inputs[1]:max() end
    return (inputs[1]:max(dims(attrs.axes, inputs[1]:dim())[1], attrs.keepdims ~= 0))
  end,
  ReduceMean = function(_, inputs, attrs)
    return inputs[1]:mean(dims(attrs.axes, inputs[1]:dim())[1], attrs.keepdims ~= 0)
  end,
  ArgMax = function(_, inputs, attrs)
    return inputs[1]:argmax(dims({attrs.axis}, inputs[1]:dim())[1], attrs.keepdims ~= 0) - 1
  end,
  Where = function(_, inputs) return tensor.where(inputs[1], inputs[2], inputs[3]) end,
  Clip = function(_, inputs)
    local low = inputs[2] and inputs[2]:item() or nil
    local high = inputs[3] and inputs[3]:item() or nil
    return inputs[1]:clamp(low, high)
  end,
  Concat = function(_, inputs, attrs)
    return tensor.cat({table.unpack(inputs, 1, inputs.n)}, dims({attrs.axis}, inputs[1]:dim())[1])
  end,
  Gather = function(_, inputs, attrs)
    local d = dims({attrs.axis}, inputs[1]:dim())[1]
    local index = inputs[2] + 1
    if index:dim() == 0 then return inputs[1]:select(d, index:item()) end
    return inputs[1]:index_select(d, index)
  end,
  GatherElements = function(_, inputs, attrs)
    return inputs[1]:gather(dims({attrs.axis}, inputs[1]:dim())[1], inputs[2] + 1)
  end,
  Slice = function(ctx, inputs)
    local start, stop, axis = ctx:host(inputs[2])[1], ctx:host(inputs[3])[1], ctx:host(inputs[4])[1]
    return inputs[1]:narrow(axis + 1, start + 1, stop - start)
  end,
  Expand = function(ctx, inputs)
    local shape = ctx:host(inputs[2])
    for d, extent in ipairs(shape) do if extent == 1 then shape[d] = -1 end end
    return inputs[1]:expand(shape)
  end,
  CumSum = function(ctx, inputs) return inputs[1]:cumsum(ctx:host(inputs[2])[1] + 1) end,
}

-- Registers the ops onnx.ops lacks; returns their names, sorted.
local function install(onnx)
  local supplied = {}
  for op_type, fn in pairs(local_ops) do
    if onnx.ops[op_type] == nil then
      onnx.ops[op_type] = fn
      supplied[#supplied + 1] = op_type
    end
  end
  table.sort(supplied)
  return supplied
end

return {ops = local_ops, install = install}

