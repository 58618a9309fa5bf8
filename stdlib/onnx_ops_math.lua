-- onnx_ops_math.lua - the ONNX ops of the default domain that compute:
-- elementwise math, activations, comparisons and logic, Clip, Cast,
-- MatMul and Gemm, Softmax and friends, reductions, ArgMax/ArgMin, CumSum,
-- TopK, Einsum and the two losses (NegativeLogLikelihoodLoss,
-- SoftmaxCrossEntropyLoss).
--
-- Each op is function(ctx, inputs, attrs) -> outputs (see docs/onnx.md),
-- built from the tensor API so that it records lazily and has gradients.
-- ONNX axes are 0-based; lazylua's dims 1-based (util.dim converts).
local tensor = require "tensor"
local util = require "lazylua.onnx_util"

local ops = {}
local attr, flag = util.attr, util.flag

-- The input at `slot`, or an error naming it when the model omits it.
local function required(ctx, inputs, slot)
  local t = inputs[slot]
  if t == nil then ctx:error("input %d is required", slot) end
  return t
end

-- A result back in the dtype of `like` (ONNX ops keep their input's type
-- where lazylua promotes: integer sums to i64, integer means to f32 ...).
local function as_dtype_of(t, like)
  if t:dtype() ~= like:dtype() then return t:to(like:dtype()) end
  return t
end

------------------------------------------------------------------------
-- Elementwise unary
------------------------------------------------------------------------
local function unary(method)
  return function(ctx, inputs) return required(ctx, inputs, 1)[method](required(ctx, inputs, 1)) end
end

for op_type, method in pairs({
  Abs = "abs", Neg = "neg", Exp = "exp", Log = "log", Sqrt = "sqrt", Reciprocal = "reciprocal",
  Floor = "floor", Ceil = "ceil", Round = "round", Sign = "sign", Sin = "sin", Cos = "cos",
  Tan = "tan", Asin = "asin", Acos = "acos", Atan = "atan", Sinh = "sinh", Cosh = "cosh",
  Asinh = "asinh", Acosh = "acosh", Atanh = "atanh", Erf = "erf", IsNaN = "isnan",
  Not = "logical_not", Relu = "relu", Sigmoid = "sigmoid", Tanh = "tanh",
}) do
  ops[op_type] = unary(method)
end

function ops.IsInf(ctx, inputs, attrs)
  local x = required(ctx, inputs, 1)
  local negative, positive = flag(attrs, "detect_negative", true), flag(attrs, "detect_positive", true)
  local inf = x:isinf()
  if negative and positive then return inf end
  if positive then return inf:logical_and(x:gt(0)) end
  if negative then return inf:logical_and(x:lt(0)) end
  return x:isinf():logical_and(x:ne(x))   -- neither: all false, in x's shape
end

------------------------------------------------------------------------
-- Activations
------------------------------------------------------------------------
function ops.LeakyRelu(ctx, inputs, attrs)
  local x = required(ctx, inputs, 1)
  return tensor.where(x:lt(0), x * attr(attrs, "alpha", 0.01), x)
end

function ops.Elu(ctx, inputs, attrs)
  local x = required(ctx, inputs, 1)
  return tensor.where(x:lt(0), x:expm1() * attr(attrs, "alpha", 1.0), x)
end

function ops.Selu(ctx, inputs, attrs)
  local x = required(ctx, inputs, 1)
  local alpha = attr(attrs, "alpha", 1.67326319217681884765625)
  local gamma = attr(attrs, "gamma", 1.05070102214813232421875)
  return tensor.where(x:le(0), x:expm1() * alpha, x) * gamma
end

function ops.Celu(ctx, inputs, attrs)
  local x = required(ctx, inputs, 1)
  local alpha = attr(attrs, "alpha", 1.0)
  return x:relu() + ((x / alpha):expm1() * alpha):clamp(nil, 0)
end

function ops.HardSigmoid(ctx, inputs, attrs)
  local x = required(ctx, inputs, 1)
  return (x * attr(attrs, "alpha", 0.2) + attr(attrs, "beta", 0.5)):clamp(0, 1)
end

function ops.HardSwish(ctx, inputs)
  local x = required(ctx, inputs, 1)
  return x * (x / 6 + 0.5):clamp(0, 1)
end

-- Gelu, an op of opset 20 (approximate "none": tensor.gelu, the exact erf
-- form; "tanh": PyTorch's tanh approximation, composed), and the node
-- stdlib/onnx_rewrite.lua makes of the exact-GELU pattern of older opsets.
-- That node's one-element constants broadcast x up to their rank
-- (gelu_constant_rank): a 0-d x times a [1] constant is [1].
function ops.Gelu(ctx, inputs, attrs)
  local x = required(ctx, inputs, 1)
  local rank = ctx.node.gelu_constant_rank
  if rank == nil and ctx.opset < 20 then
    ctx:error("Gelu is an op of opset 20 (the model's opset is %d)", ctx.opset)
  end
  local approximate = attr(attrs, "approximate", "none")
  local y
  if approximate == "none" then
    y = x:gelu()
  elseif approximate == "tanh" then
    y = x * 0.5 * (((x + x * x * x * 0.044715) * math.sqrt(2 / math.pi)):tanh() + 1)
  else
    ctx:error("approximate must be 'none' or 'tanh', got '%s'", tostring(approximate))
  end
  if rank and x:dim() < rank then
    local shape = x:size()
    for _ = x:dim() + 1, rank do table.insert(shape, 1, 1) end
    y = y:reshape(shape)
  end
  return y
end

-- log(1 + exp(x)) written so that large |x| neither overflows nor loses the
-- small term: max(x, 0) + log1p(exp(-|x|)).
local function softplus(x) return x:relu() + (-x:abs()):exp():log1p() end

function ops.Softplus(ctx, inputs) return softplus(required(ctx, inputs, 1)) end

function ops.Softsign(ctx, inputs)
  local x = required(ctx, inputs, 1)
  return x / (x:abs() + 1)
end

function ops.ThresholdedRelu(ctx, inputs, attrs)
  local x = required(ctx, inputs, 1)
  return tensor.where(x:gt(attr(attrs, "alpha", 1.0)), x, 0)
end

function ops.Mish(ctx, inputs)
  local x = required(ctx, inputs, 1)
  return x * softplus(x):tanh()
end

-- slope broadcasts to x (unidirectionally; NumPy rules cover it). Before
-- opset 7 a 1-d slope holds one value per channel (dim 2 of x).
function ops.PRelu(ctx, inputs)
  local x, slope = required(ctx, inputs, 1), required(ctx, inputs, 2)
  if ctx.opset < 7 and slope:dim() == 1 and slope:numel() > 1 and x:dim() >= 2 then
    local shape = {slope:numel()}
    for _ = 3, x:dim() do shape[#shape + 1] = 1 end
    slope = slope:reshape(shape)
  end
  return tensor.where(x:lt(0), x * slope, x)
end

function ops.Shrink(ctx, inputs, attrs)
  local x = required(ctx, inputs, 1)
  local bias, lambd = attr(attrs, "bias", 0.0), attr(attrs, "lambd", 0.5)
  local y = tensor.where(x:lt(-lambd), x + bias, tensor.where(x:gt(lambd), x - bias, 0))
  return as_dtype_of(y, x)
end

------------------------------------------------------------------------
-- Binary elementwise
------------------------------------------------------------------------
-- Before opset 7, a node broadcast its second input only with
-- `broadcast = 1`, aligning it at `axis` (default: the trailing dims).
local function legacy_broadcast(ctx, attrs, a, b)
  if ctx.opset >= 7 or not flag(attrs, "broadcast", false) or attrs.axis == nil then return b end
  local axis = util.dim(ctx, attrs.axis, a:dim())
  local shape = b:size()
  for _ = axis + b:dim(), a:dim() do shape[#shape + 1] = 1 end
  return b:reshape(shape)
end

local function binary(fn)
  return function(ctx, inputs, attrs)
    local a, b = required(ctx, inputs, 1), required(ctx, inputs, 2)
    return fn(a, legacy_broadcast(ctx, attrs, a, b), ctx)
  end
end

local function is_integer(t) local d = t:dtype() return d == "i32" or d == "i64" end

ops.Add = binary(function(a, b) return a + b end)
ops.Sub = binary(function(a, b) return a - b end)
ops.Mul = binary(function(a, b) return a * b end)

-- Integer division truncates toward zero in ONNX (as C); lazylua's `//`
-- floors, so the quotients of operands of opposite signs with a remainder
-- move up by one.
ops.Div = binary(function(a, b, ctx)
  if is_integer(a) and is_integer(b) then
    if ctx.on_host ~= nil and ctx:on_host(2) then
      for _, v in ipairs(ctx:host(b)) do
        if v == 0 then ctx:error("integer division by zero") end
      end
    end
    local q = a // b
    -- The remainder by a divisor of 1 where b is 0: only the quotient
    -- raises (at the sync, if b is not known here), as a division.
    local inexact = (a % tensor.where(b:eq(0), 1, b)):ne(0):logical_and(a:lt(0):logical_xor(b:lt(0)))
    return tensor.where(inexact, q + 1, q)
  end
  return a / b
end)

-- The result has the base's type (opset 12 allows another exponent type).
ops.Pow = binary(function(a, b)
  local y = a:pow(b)
  return as_dtype_of(y, a)
end)

-- fmod = 0: the sign of the divisor (Lua's %); fmod = 1: the sign of the
-- dividend (C's fmod), which differs from the former by the divisor where
-- the signs differ and the remainder is not 0.
function ops.Mod(ctx, inputs, attrs)
  local a, b = required(ctx, inputs, 1), required(ctx, inputs, 2)
  local floor_mod = a % b
  if not flag(attrs, "fmod", false) then
    if util.is_float(a) then ctx:error("Mod of floats needs fmod = 1") end
    return floor_mod
  end
  local fix = floor_mod:ne(0):logical_and(a:lt(0):logical_xor(b:lt(0)))
  return tensor.where(fix, floor_mod - b, floor_mod)
end

-- Shifts of unsigned integers, as multiplication and floor division by 2^y.
function ops.BitShift(ctx, inputs, attrs)
  local x, y = required(ctx, inputs, 1), required(ctx, inputs, 2)
  if not is_integer(x) or not is_integer(y) then ctx:error("BitShift needs integer inputs, got %s", x:dtype()) end
  local direction = attr(attrs, "direction", nil)
  if direction ~= "LEFT" and direction ~= "RIGHT" then
    ctx:error("direction must be LEFT or RIGHT, got %s", tostring(direction))
  end
  -- A shift by at least the width of the type shifts every bit out (0),
  -- as NumPy's; a negative shift is not one.
  local width = x:dtype() == "i32" and 32 or 64
  local shift = y:to("i64")
  if ctx.on_host ~= nil and ctx:on_host(2) then
    for _, v in ipairs(ctx:host(shift)) do
      if v < 0 then ctx:error("shift %d is negative", v) end
    end
  end
  local big = shift:ge(width)
  -- 2^shift in i64, exact up to 2^62; a shift of 63 is one more doubling
  -- (left) or leaves 0 of any value below 2^63 (right).
  local top = shift:eq(63)
  local power = tensor.where(big, 0, shift):clamp(0, 62):to("f64"):exp2():to("i64")
  local wide = x:to("i64")
  local shifted
  if direction == "LEFT" then
    shifted = tensor.where(top, wide * power * 2, wide * power)
  else
    shifted = tensor.where(top, 0, wide // power)
  end
  return tensor.where(big, 0, shifted):to(x:dtype())
end

ops.And = binary(function(a, b) return a:logical_and(b) end)
ops.Or = binary(function(a, b) return a:logical_or(b) end)
ops.Xor = binary(function(a, b) return a:logical_xor(b) end)
ops.Equal = binary(function(a, b) return a:eq(b) end)
ops.Less = binary(function(a, b) return a:lt(b) end)
ops.LessOrEqual = binary(function(a, b) return a:le(b) end)
ops.Greater = binary(function(a, b) return a:gt(b) end)
ops.GreaterOrEqual = binary(function(a, b) return a:ge(b) end)

------------------------------------------------------------------------
-- Variadic, Where, Clip
------------------------------------------------------------------------
local function fold(fn)
  return function(ctx, inputs)
    local acc = required(ctx, inputs, 1)
    for i = 2, inputs.n or #inputs do acc = fn(acc, required(ctx, inputs, i)) end
    return acc
  end
end

ops.Max = fold(function(a, b) return a:maximum(b) end)
ops.Min = fold(function(a, b) return a:minimum(b) end)
ops.Sum = fold(function(a, b) return a + b end)

function ops.Mean(ctx, inputs)
  local n = inputs.n or #inputs
  return ops.Sum(ctx, inputs) / n
end

function ops.Where(ctx, inputs)
  return tensor.where(required(ctx, inputs, 1), required(ctx, inputs, 2), required(ctx, inputs, 3))
end

-- Bounds are attributes before opset 11 and optional 0-d inputs after.
function ops.Clip(ctx, inputs, attrs)
  local x = required(ctx, inputs, 1)
  if ctx.opset < 11 then
    return x:clamp(attr(attrs, "min", -math.huge), attr(attrs, "max", math.huge))
  end
  local lo, hi = inputs[2], inputs[3]
  if lo ~= nil then x = x:maximum(as_dtype_of(lo, x)) end
  if hi ~= nil then x = x:minimum(as_dtype_of(hi, x)) end
  return x
end

------------------------------------------------------------------------
-- Cast, CastLike
------------------------------------------------------------------------
local type_numbers = {}
for number, name in pairs(util.onnx_type_names) do type_numbers[name] = number end

-- The integer types lazylua holds in a wider one (as the codec decodes
-- them): UINT8, INT8, UINT16, INT16 in i32, UINT32 in i64.
local narrow_integers = {
  [2] = {low = 0, count = 256, dtype = "i32"}, [3] = {low = -128, count = 256, dtype = "i32"},
  [4] = {low = 0, count = 65536, dtype = "i32"}, [5] = {low = -32768, count = 65536, dtype = "i32"},
  [12] = {low = 0, count = 1 << 32, dtype = "i64"},
}

function ops.Cast(ctx, inputs, attrs)
  local x = required(ctx, inputs, 1)
  local to = attrs.to
  if type(to) == "string" then to = type_numbers[to:upper()] or to end   -- opset < 6
  if to == nil then ctx:error("attribute 'to' is required") end
  local narrow = narrow_integers[to]
  if narrow ~= nil then
    -- The values wrap into the narrow type's range (as NumPy's astype),
    -- held in the wider lazylua type the codec uses for it.
    local wrapped = (x:to("i64") - narrow.low) % narrow.count + narrow.low
    return wrapped:to(narrow.dtype)
  end
  local dtype = util.onnx_dtypes[to]
  if dtype == nil then
    ctx:unsupported("Cast to %s (lazylua has f32, f64, i32, i64 and bool)", util.onnx_type_names[to] or tostring(to))
  end
  return x:to(dtype)
end

function ops.CastLike(ctx, inputs)
  return required(ctx, inputs, 1):to(required(ctx, inputs, 2):dtype())
end

------------------------------------------------------------------------
-- Quantization (8-bit values are held in i32)
------------------------------------------------------------------------
-- (x - zero_point) * scale in f32; a 1-d scale (and zero point) holds one
-- value per slice along `axis` (default 1).
function ops.DequantizeLinear(ctx, inputs, attrs)
  local x, scale, zero = required(ctx, inputs, 1), required(ctx, inputs, 2), inputs[3]
  local function along_axis(t)
    if t:dim() == 0 or t:numel() == 1 and x:dim() <= 1 then return t end
    local d = util.dim(ctx, attr(attrs, "axis", 1), x:dim())
    local shape = {}
    for i = 1, x:dim() do shape[i] = i == d and t:numel() or 1 end
    return t:reshape(shape)
  end
  local y = x:to("f32")
  if zero ~= nil then y = y - along_axis(zero):to("f32") end
  return y * along_axis(scale)
end

-- x (f32) -> y (uint8, held in i32), scale, zero point (uint8), over the
-- range of x widened to include 0, rounding half to even.
function ops.DynamicQuantizeLinear(ctx, inputs)
  local x = required(ctx, inputs, 1)
  local high, low = x:amax():clamp(0, nil), x:amin():clamp(nil, 0)
  local scale = (high - low) / 255
  local zero = (-low / scale):round():clamp(0, 255)
  local y = ((x / scale):round() + zero):clamp(0, 255)
  return y:to("i32"), scale, zero:to("i32")
end

------------------------------------------------------------------------
-- Products
------------------------------------------------------------------------
function ops.MatMul(ctx, inputs)
  return required(ctx, inputs, 1):matmul(required(ctx, inputs, 2))
end

-- (A - a_zero_point) @ (B - b_zero_point) in i32. The 8-bit inputs arrive
-- as i32 (exact); a 1-d a_zero_point holds one value per row of A, a 1-d
-- b_zero_point one per column of B (NumPy broadcasting gives the latter).
function ops.MatMulInteger(ctx, inputs)
  local a, b = required(ctx, inputs, 1):to("i32"), required(ctx, inputs, 2):to("i32")
  local a_zero, b_zero = inputs[3], inputs[4]
  if a_zero ~= nil then
    a_zero = a_zero:to("i32")
    if a_zero:dim() == 1 and a:dim() >= 2 then a_zero = a_zero:unsqueeze(2) end
    a = a - a_zero
  end
  if b_zero ~= nil then b = b - b_zero:to("i32") end
  return a:matmul(b)
end

function ops.Gemm(ctx, inputs, attrs)
  local a, b, c = required(ctx, inputs, 1), required(ctx, inputs, 2), inputs[3]
  if a:dim() ~= 2 or b:dim() ~= 2 then ctx:error("Gemm needs 2-d A and B, got %d-d and %d-d", a:dim(), b:dim()) end
  if flag(attrs, "transA", false) then a = a:t() end
  if flag(attrs, "transB", false) then b = b:t() end
  local alpha, beta = attr(attrs, "alpha", 1.0), attr(attrs, "beta", 1.0)
  local y = a:matmul(b)
  if alpha ~= 1 then y = y * alpha end
  if c ~= nil and beta ~= 0 then
    y = y + (beta ~= 1 and c * beta or c)
  end
  return y
end

-- Determinant of [..., n, n] by Gaussian elimination with partial
-- pivoting, all in tensor ops (no value is read): the row swap of step k
-- is the matrix I - (e_k - e_p)(e_k - e_p)^T built from the pivot's
-- one-hot row e_p, and flips the sign when p ~= k.
function ops.Det(ctx, inputs)
  local a = required(ctx, inputs, 1)
  if not util.is_float(a) then ctx:error("Det needs a float tensor, got %s", a:dtype()) end
  local rank = a:dim()
  if rank < 2 or a:size(rank) ~= a:size(rank - 1) then
    ctx:error("Det needs square matrices [..., n, n], got %d-d", rank)
  end
  local n, dtype = a:size(rank), a:dtype()
  -- The determinant of a 0 x 0 matrix is 1 (the empty product).
  if n == 0 then return a:sum(rank):sum(rank - 1) + 1 end
  local rows = tensor.arange(1, n + 1)                 -- 1 .. n, i64
  local identity = tensor.eye(n):to(dtype)
  local det = nil
  for k = 1, n do
    local column = a:narrow(rank - 1, k, n - k + 1):select(rank, k)   -- [..., n - k + 1]
    local pivot_row = column:abs():argmax(rank - 1, true) + (k - 1)  -- [..., 1], 1-based
    local e_p = rows:eq(pivot_row):to(dtype)                           -- [..., n]
    local e_k = rows:eq(k):to(dtype)
    local d = e_k - e_p
    local swap = identity - d:unsqueeze(-1) * d:unsqueeze(-2)
    a = swap:matmul(a)
    local sign = tensor.where(pivot_row:eq(k), 1.0, -1.0):to(dtype):squeeze(-1)
    local pivot = a:select(rank - 1, k):select(rank - 1, k)          -- [...]
    det = (det == nil and pivot or det * pivot) * sign
    if k < n then
      local safe = tensor.where(pivot:eq(0), 1.0, pivot):to(dtype)
      local below = rows:gt(k):to(dtype)
      local factor = a:select(rank, k) / safe:unsqueeze(-1) * below  -- [..., n]
      a = a - factor:unsqueeze(-1) * a:select(rank - 1, k):unsqueeze(-2)
    end
  end
  return det
end

function ops.Einsum(ctx, inputs, attrs)
  local equation = attrs.equation
  if type(equation) ~= "string" then ctx:error("attribute 'equation' is required") end
  local operands = {}
  for i = 1, inputs.n or #inputs do operands[i] = required(ctx, inputs, i) end
  return tensor.einsum(equation, operands)
end

------------------------------------------------------------------------
-- Softmax, LogSoftmax, Hardmax
------------------------------------------------------------------------
-- Before opset 13 the op sees x as 2-d: [prod(dims before axis),
-- prod(dims from axis)], and works along the second (default axis 1);
-- from 13 on it works along `axis` (default -1).
local function along_axis(fn)
  return function(ctx, inputs, attrs)
    local x = required(ctx, inputs, 1)
    local rank = x:dim()
    if ctx.opset >= 13 then return fn(x, util.dim(ctx, attr(attrs, "axis", -1), rank)) end
    local d = util.dim(ctx, attr(attrs, "axis", 1), rank)
    local shape, outer = x:size(), 1
    for i = 1, d - 1 do outer = outer * shape[i] end
    return fn(x:reshape(outer, -1), 2):reshape(shape)
  end
end

ops.Softmax = along_axis(function(x, d) return x:softmax(d) end)
ops.LogSoftmax = along_axis(function(x, d) return x:log_softmax(d) end)

-- 1 at the first maximum along d, else 0, in x's dtype.
ops.Hardmax = along_axis(function(x, d)
  local index = x:argmax(d, true)
  local shape = {}
  for i = 1, x:dim() do shape[i] = i == d and x:size(d) or 1 end
  local positions = tensor.arange(1, x:size(d) + 1):reshape(shape)
  return positions:eq(index):to(x:dtype())
end)

------------------------------------------------------------------------
-- Reductions
------------------------------------------------------------------------
-- The dims a Reduce* node reduces: from the `axes` attribute (or, for
-- ReduceSum from opset 13, the optional second input); none means all,
-- unless noop_with_empty_axes. Returns nil for "no reduction".
local function reduced_dims(ctx, inputs, attrs, x)
  local axes = attrs.axes
  if ctx.node.op_type == "ReduceSum" and ctx.opset >= 13 then
    axes = inputs[2] ~= nil and ctx:host(inputs[2]) or {}
  end
  if axes == nil or #axes == 0 then
    if flag(attrs, "noop_with_empty_axes", false) then return nil end
    local all = {}
    for i = 1, x:dim() do all[i] = i end
    return all
  end
  return util.dims(ctx, axes, x:dim())
end

-- A reduction op from fn(t, d) -> t reduced along d with keepdim; the
-- dims are reduced one at a time and squeezed at the end unless keepdims.
-- `before` and `after` map the tensor before and after (|x|, x^2, sqrt,
-- log). The result keeps x's dtype.
local function reduce(fn, before, after)
  return function(ctx, inputs, attrs)
    local x = required(ctx, inputs, 1)
    local dims = reduced_dims(ctx, inputs, attrs, x)
    if dims == nil then return x end
    local y = before and before(x) or x
    for _, d in ipairs(dims) do y = fn(y, d) end
    if after then y = after(y) end
    if not flag(attrs, "keepdims", true) then
      for i = #dims, 1, -1 do y = y:squeeze(dims[i]) end
    end
    return as_dtype_of(y, x)
  end
end

local function sum(t, d) return t:sum(d, true) end
local function square(t) return t * t end
ops.ReduceSum = reduce(sum)
-- Integer means truncate, as NumPy's mean cast back to the input type.
local function mean(t, d)
  local n = t:size(d)
  local s = t:sum(d, true)
  if util.is_float(t) then return s / n end
  return (s:to("f64") / n):trunc()
end
ops.ReduceMean = reduce(mean)
ops.ReduceMax = reduce(function(t, d) return t:amax(d, true) end)
ops.ReduceMin = reduce(function(t, d) return t:amin(d, true) end)
ops.ReduceProd = reduce(function(t, d) return t:prod(d, true) end)
ops.ReduceL1 = reduce(sum, function(t) return t:abs() end)
ops.ReduceL2 = reduce(sum, square, function(t) return util.is_float(t) and t:sqrt() or t:to("f64"):sqrt() end)
ops.ReduceSumSquare = reduce(sum, square)
ops.ReduceLogSum = reduce(sum, nil, function(t) return t:log() end)
ops.ReduceLogSumExp = reduce(function(t, d) return t:logsumexp(d, true) end)

------------------------------------------------------------------------
-- ArgMax, ArgMin, CumSum, TopK
------------------------------------------------------------------------
-- 0-based i64 indices; select_last_index takes the last of equal extrema
-- (the first of the flipped tensor, mirrored back).
local function arg_extremum(method)
  return function(ctx, inputs, attrs)
    local x = required(ctx, inputs, 1)
    local d = util.dim(ctx, attr(attrs, "axis", 0), x:dim())
    local keepdims = flag(attrs, "keepdims", true)
    local index
    if flag(attrs, "select_last_index", false) then
      index = (x:size(d) - x:flip(d)[method](x:flip(d), d, keepdims))
    else
      index = x[method](x, d, keepdims) - 1
    end
    return index:to("i64")
  end
end

ops.ArgMax = arg_extremum("argmax")
ops.ArgMin = arg_extremum("argmin")

function ops.CumSum(ctx, inputs, attrs)
  local x, axis = required(ctx, inputs, 1), ctx:host(required(ctx, inputs, 2))
  if #axis ~= 1 then ctx:error("axis must hold one value, got %d", #axis) end
  local d = util.dim(ctx, axis[1], x:dim())
  local reverse = flag(attrs, "reverse", false)
  local y = reverse and x:flip(d) or x
  local n = y:size(d)
  local sums = y:cumsum(d)
  if flag(attrs, "exclusive", false) then
    -- The sums shifted by one: 0 first, the last sum dropped.
    local zero_shape = y:size()
    zero_shape[d] = 1
    local zeros = tensor.zeros(zero_shape, {dtype = sums:dtype()})
    sums = n > 1 and tensor.cat({zeros, sums:narrow(d, 1, n - 1)}, d) or zeros:expand(y:size())
  end
  if reverse then sums = sums:flip(d) end
  return as_dtype_of(sums, x)
end

-- k is an attribute before opset 10 and a 1-element input after.
function ops.TopK(ctx, inputs, attrs)
  local x = required(ctx, inputs, 1)
  local k
  if ctx.opset < 10 then
    k = attrs.k
  else
    local values = ctx:host(required(ctx, inputs, 2))
    k = values[1]
  end
  if math.type(k) ~= "integer" then ctx:error("k must be an integer") end
  if ctx.opset >= 10 and inputs[2]:numel() ~= 1 then ctx:error("k must hold one value, got %d", inputs[2]:numel()) end
  local d = util.dim(ctx, attr(attrs, "axis", -1), x:dim())
  -- sorted = 0 allows any order: the sorted one is such an order.
  local values, indices = x:topk(k, d, flag(attrs, "largest", true))
  return values, (indices - 1):to("i64")
end

------------------------------------------------------------------------
-- Losses
------------------------------------------------------------------------
-- input [N, C, d1 ...] (log-probabilities), target [N, d1 ...] of 0-based
-- classes, weight [C] or nil. Targets equal to ignore_index count for
-- nothing (not even in the mean's divisor).
local function nll(ctx, input, target, weight, attrs)
  if input:dim() < 2 then ctx:error("input must have at least 2 dims, got %d", input:dim()) end
  if target:dim() ~= input:dim() - 1 then
    ctx:error("target must have %d dims, got %d", input:dim() - 1, target:dim())
  end
  local reduction = attr(attrs, "reduction", "mean")
  if reduction ~= "none" and reduction ~= "sum" and reduction ~= "mean" then
    ctx:error("reduction must be none, sum or mean, got %s", tostring(reduction))
  end
  local ignore_index = attrs.ignore_index
  local keep = nil
  local classes = target:to("i64")
  if ignore_index ~= nil then
    keep = classes:ne(ignore_index)
    classes = tensor.where(keep, classes, 0)
  end
  local picked = input:gather(2, (classes + 1):unsqueeze(2)):squeeze(2)
  local w
  if weight ~= nil then
    w = weight:index_select(1, (classes + 1):reshape(-1)):reshape(classes:size())
  else
    w = tensor.ones(classes:size(), {dtype = input:dtype()})
  end
  if keep ~= nil then w = w * keep:to(input:dtype()) end
  local loss = -picked * w
  if reduction == "none" then return loss end
  if reduction == "sum" then return loss:sum() end
  return loss:sum() / w:sum()
end

function ops.NegativeLogLikelihoodLoss(ctx, inputs, attrs)
  return nll(ctx, required(ctx, inputs, 1), required(ctx, inputs, 2), inputs[3], attrs)
end

function ops.SoftmaxCrossEntropyLoss(ctx, inputs, attrs)
  local scores = required(ctx, inputs, 1)
  if scores:dim() < 2 then ctx:error("scores must have at least 2 dims, got %d", scores:dim()) end
  local log_prob = scores:log_softmax(2)
  return nll(ctx, log_prob, required(ctx, inputs, 2), inputs[3], attrs), log_prob
end

------------------------------------------------------------------------
-- Type constraints
------------------------------------------------------------------------
-- The ops ONNX types float only (tensor(float16), float, double,
-- bfloat16) in every opset: their inputs at the given slots. lazylua would
-- compute most of them on an integer input in f32, changing the output's
-- type: a node error instead. (Relu, PRelu, Max, Min and Clip take
-- integers from some opset on, and keep an integer type in lazylua: they
-- take them in every opset.)
local float_only = {
  Exp = {}, Log = {}, Sqrt = {}, Reciprocal = {}, Floor = {}, Ceil = {}, Round = {},
  Sin = {}, Cos = {}, Tan = {}, Asin = {}, Acos = {}, Atan = {}, Sinh = {}, Cosh = {},
  Asinh = {}, Acosh = {}, Atanh = {}, IsNaN = {}, IsInf = {}, Sigmoid = {}, Tanh = {},
  LeakyRelu = {}, Elu = {}, Selu = {}, Celu = {}, HardSigmoid = {}, HardSwish = {}, Softplus = {},
  Softsign = {}, ThresholdedRelu = {}, Mish = {}, Gelu = {}, Softmax = {}, LogSoftmax = {}, Hardmax = {},
  Mean = {slots = "all"}, Sum = {slots = "all"},
  NegativeLogLikelihoodLoss = {slots = {1, 3}}, SoftmaxCrossEntropyLoss = {slots = {1, 3}},
}
for op_type, rule in pairs(float_only) do
  local fn, slots = ops[op_type], rule.slots or {1}
  ops[op_type] = function(ctx, inputs, attrs)
    local last = slots == "all" and (inputs.n or #inputs) or #slots
    for k = 1, last do
      local slot = slots == "all" and k or slots[k]
      local t = inputs[slot]
      if t ~= nil and not util.is_float(t) then
        ctx:error("input %d is %s; %s takes float tensors", slot - 1, t:dtype(), op_type)
      end
    end
    return fn(ctx, inputs, attrs)
  end
end

-- Erf: ONNX allows integers, whose erf lazylua would give in f32.
do
  local erf = ops.Erf
  ops.Erf = function(ctx, inputs, attrs)
    if not util.is_float(required(ctx, inputs, 1)) then ctx:unsupported("Erf of %s", inputs[1]:dtype()) end
    return erf(ctx, inputs, attrs)
  end
end

return ops
