-- onnx_ops_nn.lua - ONNX ops of the default domain: convolution, pooling,
-- normalization, and the shape and indexing ops (Reshape, Slice, Gather,
-- Pad, Resize ...). Each op is built from lazylua's tensor API, so an imported
-- graph records lazily and has gradients; only shape-like inputs (Reshape's
-- shape, Slice's starts ...) are read, through ctx:host.
--
-- ONNX axes are 0-based (negative counts from the end), lazylua's dims
-- 1-based; ONNX indices are 0-based, lazylua's gather/index_select 1-based.
local tensor = require "tensor"

local ops = {}

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
local function resolve_pads(ctx, attrs, in_sizes, kernel, strides, dilations)
  local n = #in_sizes
  local auto_pad = attrs.auto_pad or "NOTSET"
  local begins, ends = {}, {}
  if auto_pad == "SAME_UPPER" or auto_pad == "SAME_LOWER" then
    for i = 1, n do
      local keff = (kernel[i] - 1) * dilations[i] + 1
      local out = (in_sizes[i] + strides[i] - 1) // strides[i]
      local total = math.max(0, (out - 1) * strides[i] + keff - in_sizes[i])
      if auto_pad == "SAME_UPPER" then
        begins[i], ends[i] = total // 2, total - total // 2
      else
        begins[i], ends[i] = total - total // 2, total // 2
      end
    end
  elseif auto_pad == "VALID" then
    begins, ends = filled(n, 0), filled(n, 0)
  elseif auto_pad == "NOTSET" then
    local pads = attrs.pads or filled(2 * n, 0)
    if #pads ~= 2 * n then ctx:error("pads has %d values for %d spatial dims", #pads, n) end
    for i = 1, n do begins[i], ends[i] = pads[i], pads[n + i] end
  else
    ctx:error("unknown auto_pad '%s'", auto_pad)
  end
  return begins, ends
end

local function spatial_attrs(ctx, attrs, x, kernel)
  local n = x:dim() - 2
  if n < 1 then ctx:error("expected an input [N, C, spatial...], got rank %d", x:dim()) end
  kernel = kernel or attrs.kernel_shape
  if kernel == nil or #kernel ~= n then ctx:error("kernel_shape must have %d values", n) end
  local strides = attrs.strides or filled(n, 1)
  local dilations = attrs.dilations or filled(n, 1)
  local size = x:size()
  local in_sizes = {}
  for i = 1, n do in_sizes[i] = size[i + 2] end
  local begins, ends = resolve_pads(ctx, attrs, in_sizes, kernel, strides, dilations)
  return n, kernel, strides, dilations, begins, ends, in_sizes
end

-- Convolution of x [N, C, spatial (1 to 3)] with w [O, C/g, k...], stride
-- and dilation per dim, no padding. 2-d goes to tensor.conv2d; dilation is a
-- kernel with zeros spread in, 1-d a 2-d of height 1, 3-d a sum of 2-d
-- convolutions over the kernel's depth.
local function convolve(ctx, x, w, strides, dilations, group)
  local n = x:dim() - 2
  if not is_float(x) or not is_float(w) then ctx:error("expected f32 or f64 tensors, got %s", x:dtype()) end
  if n == 1 then
    local y = convolve(ctx, x:unsqueeze(3), w:unsqueeze(3), {1, strides[1]}, {1, dilations[1]}, group)
    return y:squeeze(3)
  end
  if n > 3 then ctx:unsupported("%d-d convolution", n) end
  if group > 1 then
    local channels, outs = x:size(2), w:size(1)
    if channels % group ~= 0 or outs % group ~= 0 then
      ctx:error("group %d does not divide the %d input and %d output channels", group, channels, outs)
    end
    local parts = {}
    for g = 1, group do
      parts[g] = convolve(ctx, x:narrow(2, (g - 1) * (channels // group) + 1, channels // group),
        w:narrow(1, (g - 1) * (outs // group) + 1, outs // group), strides, dilations, 1)
    end
    return tensor.cat(parts, 2)
  end
  if x:size(2) ~= w:size(2) then
    ctx:error("input has %d channels, the weight expects %d", x:size(2), w:size(2))
  end
  local wd = w
  for i = n - 1, n do wd = spread(wd, i + 2, dilations[i]) end
  if n == 2 then return tensor.conv2d(x, wd, {stride = {strides[1], strides[2]}}) end
  -- 3-d: output depth slice od = sum over kd of conv2d(x[:, :, od*s + kd*d], w[:, :, kd]).
  local size = x:size()
  local kd, sd, dd = w:size(3), strides[1], dilations[1]
  local out_depth = (size[3] - (kd - 1) * dd - 1) // sd + 1
  if out_depth < 1 then ctx:error("the kernel is larger than the padded input") end
  local total
  for k = 1, kd do
    local slices = strided(x, 3, (k - 1) * dd, out_depth, sd)           -- [N, C, OD, H, W]
    local batch = slices:permute(1, 3, 2, 4, 5):reshape(size[1] * out_depth, size[2], size[4], size[5])
    local y = tensor.conv2d(batch, wd:select(3, k), {stride = {strides[2], strides[3]}})
    total = total and total + y or y
  end
  local oh, ow = total:size(3), total:size(4)
  return total:reshape(size[1], out_depth, w:size(1), oh, ow):permute(1, 3, 2, 4, 5)
end

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

function ops.Conv(ctx, inputs, attrs)
  local x, w, b = inputs[1], inputs[2], inputs[3]
  local kernel = {}
  for i = 3, w:dim() do kernel[#kernel + 1] = w:size(i) end
  local _, _, strides, dilations, begins, ends = spatial_attrs(ctx, attrs, x, attrs.kernel_shape or kernel)
  local xp = pad_spatial(x, begins, ends)
  return add_bias(convolve(ctx, xp, w, strides, dilations, attrs.group or 1), b)
end

-- The transpose of a convolution: the input with stride-1 zeros spread in,
-- padded by keff-1-pad, convolved with the flipped kernel whose in and out
-- channels swap.
function ops.ConvTranspose(ctx, inputs, attrs)
  local x, w, b = inputs[1], inputs[2], inputs[3]
  local n = x:dim() - 2
  local group = attrs.group or 1
  local kernel = attrs.kernel_shape
  if kernel == nil then
    kernel = {}
    for i = 3, w:dim() do kernel[#kernel + 1] = w:size(i) end
  end
  local strides = attrs.strides or filled(n, 1)
  local dilations = attrs.dilations or filled(n, 1)
  local output_padding = attrs.output_padding or filled(n, 0)
  local size = x:size()
  local begins, ends = {}, {}
  local auto_pad = attrs.auto_pad or "NOTSET"
  for i = 1, n do
    local keff = (kernel[i] - 1) * dilations[i] + 1
    local full = strides[i] * (size[i + 2] - 1) + output_padding[i] + keff
    if attrs.output_shape then
      local want = attrs.output_shape[#attrs.output_shape - n + i]
      local total = full - want
      if auto_pad == "SAME_UPPER" then
        begins[i], ends[i] = total // 2, total - total // 2
      else
        begins[i], ends[i] = total - total // 2, total // 2
      end
    elseif auto_pad == "SAME_UPPER" or auto_pad == "SAME_LOWER" then
      local total = full - size[i + 2] * strides[i]
      if auto_pad == "SAME_UPPER" then
        begins[i], ends[i] = total // 2, total - total // 2
      else
        begins[i], ends[i] = total - total // 2, total // 2
      end
    elseif auto_pad == "VALID" then
      begins[i], ends[i] = 0, 0
    else
      local pads = attrs.pads or filled(2 * n, 0)
      begins[i], ends[i] = pads[i], pads[n + i]
    end
  end
  local cin, cout_g = w:size(1), w:size(2)
  if cin ~= size[2] then ctx:error("input has %d channels, the weight expects %d", size[2], cin) end
  -- weight [Cin, Cout/g, k...] -> per group [Cout/g, Cin/g, k...], flipped.
  local flip_dims = {}
  for i = 3, w:dim() do flip_dims[#flip_dims + 1] = i end
  local flipped = w:flip(flip_dims)
  local cin_g = cin // group
  local parts = {}
  for g = 1, group do
    parts[g] = flipped:narrow(1, (g - 1) * cin_g + 1, cin_g):transpose(1, 2)
  end
  local wt = tensor.cat(parts, 1)
  local xs = x
  local pb, pe = {}, {}
  for i = 1, n do
    xs = spread(xs, i + 2, strides[i])
    local keff = (kernel[i] - 1) * dilations[i] + 1
    pb[i] = keff - 1 - begins[i]
    pe[i] = keff - 1 - ends[i] + output_padding[i]
  end
  xs = pad_spatial(xs, pb, pe)
  return add_bias(convolve(ctx, xs:contiguous(), wt:contiguous(), filled(n, 1), dilations, group), b)
end

-- The windows of a pooling: a list (one per kernel offset) of tensors [N, C,
-- out...], from x padded with `fill`; also the padding used and out sizes.
local function pool_windows(ctx, x, attrs, fill)
  local n, kernel, strides, dilations, begins, ends, in_sizes = spatial_attrs(ctx, attrs, x)
  local ceil_mode = (attrs.ceil_mode or 0) == 1
  local out, extra = {}, {}
  for i = 1, n do
    local keff = (kernel[i] - 1) * dilations[i] + 1
    local span = in_sizes[i] + begins[i] + ends[i] - keff
    local o
    if ceil_mode then
      o = -((-span) // strides[i]) + 1
      if (o - 1) * strides[i] >= in_sizes[i] + begins[i] then o = o - 1 end
    else
      o = span // strides[i] + 1
    end
    if o < 1 then ctx:error("the kernel is larger than the padded input") end
    out[i] = o
    extra[i] = math.max(0, (o - 1) * strides[i] + keff - (in_sizes[i] + begins[i] + ends[i]))
  end
  local ends_all = {}
  for i = 1, n do ends_all[i] = ends[i] + extra[i] end
  local function windows(t, value, pad_begins, pad_ends)
    local padded = pad_spatial(t, pad_begins or begins, pad_ends or ends_all, value)
    local list = {}
    local offset = filled(n, 0)
    while true do
      local w = padded
      for i = 1, n do w = strided(w, i + 2, offset[i] * dilations[i], out[i], strides[i]) end
      list[#list + 1] = w
      local i = n
      while i >= 1 do
        offset[i] = offset[i] + 1
        if offset[i] < kernel[i] then break end
        offset[i] = 0
        i = i - 1
      end
      if i == 0 then break end
    end
    return list
  end
  return windows, {n = n, kernel = kernel, begins = begins, ends = ends, extra = extra, out = out,
    in_sizes = in_sizes, strides = strides, dilations = dilations}
end

local lowest = {i32 = -2147483648, i64 = math.mininteger}

function ops.MaxPool(ctx, inputs, attrs)
  local x = inputs[1]
  local want_indices = ctx.node.outputs[2] ~= nil and ctx.node.outputs[2] ~= ""
  local n = x:dim() - 2
  local fill = is_float(x) and -math.huge or lowest[x:dtype()]
  if fill == nil then ctx:error("dtype %s is not supported", x:dtype()) end
  local windows, info = pool_windows(ctx, x, attrs, fill)
  local list = windows(x, fill)
  local stacked = tensor.stack(list, 1)
  local values, where = stacked:max(1)
  if not want_indices then return values end
  -- Indices: flat positions in x (row-major), pooled the same way.
  -- storage_order 1: the spatial dims column-major.
  local positions
  if (attrs.storage_order or 0) == 1 then
    local size, reversed, perm = x:size(), {}, {1, 2}
    reversed[1], reversed[2] = size[1], size[2]
    for i = 3, #size do
      reversed[i] = size[#size + 3 - i]
      perm[i] = #size + 3 - i
    end
    positions = tensor.arange(x:numel()):reshape(table.unpack(reversed)):permute(table.unpack(perm))
  else
    positions = tensor.arange(x:numel()):reshape(table.unpack(x:size()))
  end
  local position_windows = tensor.stack(windows(positions, -1), 1)
  local indices = position_windows:gather(1, where:unsqueeze(1)):squeeze(1)
  return values, indices
end

function ops.AveragePool(ctx, inputs, attrs)
  local x = inputs[1]
  if not is_float(x) then ctx:error("expected f32 or f64, got %s", x:dtype()) end
  local windows, info = pool_windows(ctx, x, attrs, 0)
  local total
  for _, w in ipairs(windows(x, 0)) do total = total and total + w or w end
  local include_pad = (attrs.count_include_pad or 0) == 1
  local pad_only = true
  for i = 1, info.n do
    if info.begins[i] ~= 0 or info.ends[i] ~= 0 or info.extra[i] ~= 0 then pad_only = false end
  end
  if pad_only then return total / product(info.kernel) end
  -- The number of elements each window covers: ones pooled the same way
  -- (with the pads counted as ones when count_include_pad).
  local shape = {1, 1}
  for i = 1, info.n do shape[i + 2] = info.in_sizes[i] end
  local ones = tensor.ones(shape, {dtype = x:dtype()})
  local count
  if include_pad then
    local padded = pad_spatial(ones, info.begins, info.ends, 1)
    for _, w in ipairs(windows(padded, 0, filled(info.n, 0), info.extra)) do count = count and count + w or w end
  else
    for _, w in ipairs(windows(ones, 0)) do count = count and count + w or w end
  end
  return total / count
end

function ops.GlobalAveragePool(ctx, inputs)
  local x = inputs[1]
  local dims = {}
  for d = 3, x:dim() do dims[#dims + 1] = d end
  local y = x
  for i = #dims, 1, -1 do y = y:mean(dims[i], true) end
  return y
end

function ops.GlobalMaxPool(ctx, inputs)
  local x = inputs[1]
  local y = x
  for d = x:dim(), 3, -1 do y = y:amax(d, true) end
  return y
end

-- Shape [1, C, 1, ...] of a per-channel vector for a rank-r input.
local function per_channel(v, rank)
  local shape = filled(rank, 1)
  shape[2] = v:numel()
  return v:reshape(table.unpack(shape))
end

function ops.BatchNormalization(ctx, inputs, attrs)
  local x, scale, bias, mean, var = inputs[1], inputs[2], inputs[3], inputs[4], inputs[5]
  local eps = attrs.epsilon or 1e-5
  local r = x:dim()
  local training = (attrs.training_mode or 0) == 1
  if not training and ctx.opset < 7 and attrs.is_test == 0 and ctx.node.outputs[2] then
    training = true
  end
  if (attrs.spatial or 1) == 0 then ctx:unsupported("spatial = 0") end
  if not training then
    local inv = (per_channel(var, r) + eps):rsqrt()
    return (x - per_channel(mean, r)) * inv * per_channel(scale, r) + per_channel(bias, r)
  end
  if ctx.opset < 14 then ctx:unsupported("training mode before opset 14") end
  local momentum = attrs.momentum or 0.9
  local bm, bv = x, nil
  for d = r, 1, -1 do if d ~= 2 then bm = bm:mean(d, true) end end
  local centered = x - bm
  bv = centered * centered
  for d = r, 1, -1 do if d ~= 2 then bv = bv:mean(d, true) end end
  local y = centered * (bv + eps):rsqrt() * per_channel(scale, r) + per_channel(bias, r)
  local c = x:size(2)
  local running_mean = mean * momentum + bm:reshape(c) * (1 - momentum)
  local running_var = var * momentum + bv:reshape(c) * (1 - momentum)
  return y, running_mean, running_var
end

function ops.InstanceNormalization(ctx, inputs, attrs)
  local x, scale, bias = inputs[1], inputs[2], inputs[3]
  local eps = attrs.epsilon or 1e-5
  local r = x:dim()
  local m = x
  for d = r, 3, -1 do m = m:mean(d, true) end
  local centered = x - m
  local v = centered * centered
  for d = r, 3, -1 do v = v:mean(d, true) end
  return centered * (v + eps):rsqrt() * per_channel(scale, r) + per_channel(bias, r)
end

function ops.LayerNormalization(ctx, inputs, attrs)
  local x, scale, bias = inputs[1], inputs[2], inputs[3]
  local r = x:dim()
  local first = dim_of(ctx, attrs.axis or -1, r)
  local eps = attrs.epsilon or 1e-5
  local m = x
  for d = r, first, -1 do m = m:mean(d, true) end
  local centered = x - m
  local v = centered * centered
  for d = r, first, -1 do v = v:mean(d, true) end
  local inv = (v + eps):rsqrt()
  local y = centered * inv * scale
  if bias then y = y + bias end
  return y, m, inv
end

function ops.LpNormalization(ctx, inputs, attrs)
  local x = inputs[1]
  local d = dim_of(ctx, attrs.axis or -1, x:dim())
  local p = attrs.p or 2
  if p == 1 then return x / x:abs():sum(d, true) end
  if p == 2 then return x / (x * x):sum(d, true):sqrt() end
  ctx:error("p must be 1 or 2, got %s", tostring(p))
end

function ops.LRN(ctx, inputs, attrs)
  local x = inputs[1]
  local size = attrs.size
  if size == nil then ctx:error("LRN needs the attribute size") end
  local alpha, beta, bias = attrs.alpha or 1e-4, attrs.beta or 0.75, attrs.bias or 1.0
  local before, after = (size - 1) // 2, -((-(size - 1)) // 2)
  local sq = pad_dim(x * x, 2, before, after, 0)
  local c = x:size(2)
  local sum
  for k = 1, size do
    local part = sq:narrow(2, k, c)
    sum = sum and sum + part or part
  end
  return x / (sum * (alpha / size) + bias):pow(beta)
end

function ops.Dropout(ctx, inputs, attrs)
  local x = inputs[1]
  local training = false
  local ratio = attrs.ratio or 0.5
  if ctx.opset >= 12 then
    if inputs[2] then ratio = ctx:host(inputs[2])[1] end
    if inputs[3] then training = ctx:host(inputs[3])[1] == true or ctx:host(inputs[3])[1] == 1 end
  elseif ctx.opset < 7 then
    training = (attrs.is_test or 0) == 0 and false
  end
  if training and ratio ~= 0 then ctx:unsupported("dropout in training mode (random)") end
  local mask = nil
  if ctx.node.outputs[2] and ctx.node.outputs[2] ~= "" then
    mask = tensor.ones(x:size(), {dtype = ctx.opset >= 10 and "bool" or x:dtype()})
  end
  return x, mask
end

-- Shapes and indexing ------------------------------------------------------

local function int_list(ctx, t)
  local list = ctx:host(t)
  for i, v in ipairs(list) do list[i] = math.tointeger(v) or v end
  return list
end

local function reshape_to(t, shape)
  if #shape == 0 then return t:reshape({}) end
  return t:reshape(table.unpack(shape))
end

function ops.Flatten(ctx, inputs, attrs)
  local x = inputs[1]
  local r = x:dim()
  local axis = attrs.axis or 1
  if axis < 0 then axis = axis + r end
  if axis < 0 or axis > r then ctx:error("axis %d is out of range for rank %d", attrs.axis, r) end
  local size = x:size()
  return x:reshape(product(size, 1, axis), product(size, axis + 1, r))
end

function ops.Reshape(ctx, inputs, attrs)
  local x = inputs[1]
  local shape
  if ctx.opset < 5 then shape = attrs.shape else shape = int_list(ctx, inputs[2]) end
  if shape == nil then ctx:error("no target shape") end
  local size = x:size()
  local allowzero = (attrs.allowzero or 0) == 1
  local out, unknown, known = {}, nil, 1
  for i, v in ipairs(shape) do
    if v == 0 and not allowzero then
      if size[i] == nil then ctx:error("shape has 0 at %d beyond the input's rank %d", i - 1, #size) end
      v = size[i]
    end
    if v == -1 then
      if unknown then ctx:error("shape has more than one -1") end
      unknown = i
    else
      known = known * v
    end
    out[i] = v
  end
  if unknown then
    if known == 0 then ctx:error("cannot infer -1 with a zero dim") end
    out[unknown] = x:numel() // known
  end
  if product(out) ~= x:numel() then
    ctx:error("cannot reshape [%s] to [%s]", table.concat(size, ", "), table.concat(shape, ", "))
  end
  return reshape_to(x, out)
end

function ops.Transpose(ctx, inputs, attrs)
  local x = inputs[1]
  local r = x:dim()
  local perm = {}
  if attrs.perm then
    for i, p in ipairs(attrs.perm) do perm[i] = dim_of(ctx, p, r) end
  else
    for i = 1, r do perm[i] = r - i + 1 end
  end
  if r < 2 then return x end
  return x:permute(table.unpack(perm))
end

local function axes_of(ctx, inputs, attrs, index)
  if ctx.opset >= 13 then
    if inputs[index] then return int_list(ctx, inputs[index]) end
    return nil
  end
  return attrs.axes
end

function ops.Squeeze(ctx, inputs, attrs)
  local x = inputs[1]
  local axes = axes_of(ctx, inputs, attrs, 2)
  local size = x:size()
  local drop = {}
  if axes == nil then
    for i, s in ipairs(size) do drop[i] = s == 1 end
  else
    for _, a in ipairs(axes) do
      local d = dim_of(ctx, a, #size)
      if size[d] ~= 1 then ctx:error("cannot squeeze axis %d of size %d", a, size[d]) end
      drop[d] = true
    end
  end
  local out = {}
  for i, s in ipairs(size) do if not drop[i] then out[#out + 1] = s end end
  return reshape_to(x, out)
end

function ops.Unsqueeze(ctx, inputs, attrs)
  local x = inputs[1]
  local axes = axes_of(ctx, inputs, attrs, 2)
  if axes == nil then ctx:error("Unsqueeze needs axes") end
  local size = x:size()
  local rank = #size + #axes
  local new = {}
  for _, a in ipairs(axes) do
    local d = dim_of(ctx, a, rank)
    if new[d] then ctx:error("axis %d repeated", a) end
    new[d] = true
  end
  local out, k = {}, 1
  for i = 1, rank do
    if new[i] then out[i] = 1 else out[i] = size[k]; k = k + 1 end
  end
  return reshape_to(x, out)
end

function ops.Concat(ctx, inputs, attrs)
  local list = {}
  for i = 1, inputs.n do if inputs[i] then list[#list + 1] = inputs[i] end end
  if #list == 0 then ctx:error("no inputs") end
  local d = dim_of(ctx, attrs.axis or (ctx.opset < 4 and 1 or 0), list[1]:dim())
  -- Empty tensors of rank 1 are skipped by some exporters' graphs.
  local kept = {}
  for _, t in ipairs(list) do
    if not (t:numel() == 0 and t:dim() ~= list[1]:dim()) then kept[#kept + 1] = t end
  end
  if #kept == 1 then return kept[1] end
  return tensor.cat(kept, d)
end

function ops.Split(ctx, inputs, attrs)
  local x = inputs[1]
  local d = dim_of(ctx, attrs.axis or 0, x:dim())
  local n = x:size(d)
  local sizes
  if ctx.opset >= 13 then
    sizes = inputs[2] and int_list(ctx, inputs[2])
  else
    sizes = attrs.split
    if sizes == nil and ctx.opset < 2 and inputs[2] then sizes = int_list(ctx, inputs[2]) end
  end
  local count = #ctx.node.outputs
  if sizes == nil or #sizes == 0 then
    local parts = attrs.num_outputs or count
    local each = -((-n) // parts)
    sizes = {}
    local left = n
    for i = 1, parts do
      sizes[i] = math.min(each, left)
      left = left - sizes[i]
    end
  end
  local outputs, start = {}, 1
  for i, s in ipairs(sizes) do
    outputs[i] = x:narrow(d, start, s)
    start = start + s
  end
  if start - 1 ~= n then ctx:error("split sizes add up to %d, the axis has %d", start - 1, n) end
  return table.unpack(outputs, 1, #sizes)
end

function ops.Slice(ctx, inputs, attrs)
  local x = inputs[1]
  local starts, ends, axes, steps
  if ctx.opset < 10 then
    starts, ends, axes = attrs.starts, attrs.ends, attrs.axes
  else
    starts, ends = int_list(ctx, inputs[2]), int_list(ctx, inputs[3])
    axes = inputs[4] and int_list(ctx, inputs[4])
    steps = inputs[5] and int_list(ctx, inputs[5])
  end
  local r = x:dim()
  local y = x
  for i = 1, #starts do
    local d = dim_of(ctx, axes and axes[i] or i - 1, r)
    local n = x:size(d)
    local step = steps and steps[i] or 1
    if step == 0 then ctx:error("step 0") end
    local s, e = starts[i], ends[i]
    if s < 0 then s = s + n end
    if e < 0 then e = e + n end
    local count
    if step > 0 then
      s = math.max(0, math.min(s, n))
      e = math.max(0, math.min(e, n))
      count = math.max(0, (e - s + step - 1) // step)
    else
      s = math.max(-1, math.min(s, n - 1))
      e = math.max(-1, math.min(e, n - 1))
      count = math.max(0, (s - e + (-step) - 1) // (-step))
    end
    y = strided(y, d, s, count, step)
  end
  return y
end

local function gather_dim(x, d, index)
  -- index: any shape, 1-based i64: output = x's dims before d, index dims, after.
  local size = x:size()
  local flat = x:index_select(d, index:reshape(index:numel()))
  local out = {}
  for i = 1, d - 1 do out[#out + 1] = size[i] end
  for _, s in ipairs(index:size()) do out[#out + 1] = s end
  for i = d + 1, #size do out[#out + 1] = size[i] end
  return reshape_to(flat, out)
end

function ops.Gather(ctx, inputs, attrs)
  local x, index = inputs[1], inputs[2]
  local d = dim_of(ctx, attrs.axis or 0, x:dim())
  return gather_dim(x, d, one_based(index, x:size(d)))
end

function ops.GatherElements(ctx, inputs, attrs)
  local x, index = inputs[1], inputs[2]
  local d = dim_of(ctx, attrs.axis or 0, x:dim())
  return x:gather(d, one_based(index, x:size(d)))
end

-- Flat 0-based positions of the index tuples (last dim of `index`) into
-- `sizes` (one per tuple element), negative ones wrapped: an i64 tensor of
-- index's shape without its last dim.
local function linear_index(index, sizes)
  local k = #sizes
  local lin
  local stride = 1
  for j = k, 1, -1 do
    local part = index:select(index:dim(), j):long()
    part = tensor.where(part:lt(0), part + sizes[j], part)
    local term = part * stride
    lin = lin and lin + term or term
    stride = stride * sizes[j]
  end
  return lin
end

function ops.GatherND(ctx, inputs, attrs)
  local x, index = inputs[1], inputs[2]
  local b = attrs.batch_dims or 0
  local size, isize = x:size(), index:size()
  local k = isize[#isize]
  local batch = product(size, 1, b)
  local tuple_sizes = {}
  for j = 1, k do tuple_sizes[j] = size[b + j] end
  local inner = product(tuple_sizes)
  local rest = {}
  for i = b + k + 1, #size do rest[#rest + 1] = size[i] end
  local data = x:reshape(batch * inner, product(rest))
  local lin = linear_index(index, tuple_sizes)                      -- [b..., q...]
  local q = lin:numel() // math.max(batch, 1)
  if b > 0 then
    lin = lin:reshape(batch, q) + tensor.arange(batch):reshape(batch, 1) * inner
  end
  local picked = data:index_select(1, lin:reshape(lin:numel()) + 1)
  local out = {}
  for i = 1, #isize - 1 do out[#out + 1] = isize[i] end
  for _, s in ipairs(rest) do out[#out + 1] = s end
  return reshape_to(picked, out)
end

-- data with `updates` written (or added) at positions given as a scatter
-- along dim d; lazily through scatter_add and a mask.
local function scatter_elements(ctx, data, d, index, updates, reduction)
  local zeros = tensor.zeros(data:size(), {dtype = data:dtype()})
  local added = zeros:scatter_add(d, index, updates)
  if reduction == "add" then return data + added end
  local function count(flags)
    return tensor.zeros(data:size(), {dtype = "f64"}):scatter_add(d, index, flags:to("f64"))
  end
  local hits = count(tensor.ones(index:size(), {dtype = "f64"})):gt(0)
  if reduction == "none" then return tensor.where(hits, added, data) end
  if reduction ~= "mul" then ctx:unsupported("reduction '%s'", reduction) end
  -- The product of the updates per position: exp of the summed logs of
  -- their magnitudes, the sign from the parity of the negatives, 0 where
  -- one is 0.
  local u = updates:to("f64")
  local magnitude = count(tensor.where(u:eq(0), 1.0, u:abs()):log()):exp()
  local negatives = count(u:lt(0))
  local zeros = count(u:eq(0))
  local sign = 1 - (negatives % 2) * 2
  local factor = tensor.where(zeros:gt(0), 0.0, magnitude * sign)
  local product = data:to("f64") * factor
  if not is_float(data) then product = product:round() end
  return tensor.where(hits, product:to(data:dtype()), data)
end

function ops.ScatterElements(ctx, inputs, attrs)
  local data, index, updates = inputs[1], inputs[2], inputs[3]
  local d = dim_of(ctx, attrs.axis or 0, data:dim())
  return scatter_elements(ctx, data, d, one_based(index, data:size(d)), updates, attrs.reduction or "none")
end
ops.Scatter = ops.ScatterElements

function ops.ScatterND(ctx, inputs, attrs)
  local data, index, updates = inputs[1], inputs[2], inputs[3]
  local size, isize = data:size(), index:size()
  local k = isize[#isize]
  local tuple_sizes = {}
  for j = 1, k do tuple_sizes[j] = size[j] end
  local rest = {}
  for i = k + 1, #size do rest[#rest + 1] = size[i] end
  local width = product(rest)
  local flat = data:reshape(product(tuple_sizes), width)
  local lin = linear_index(index, tuple_sizes)
  local m = lin:numel()
  local idx = (lin:reshape(m, 1) + 1):expand(m, width)
  local upd = updates:reshape(m, width)
  local y = scatter_elements(ctx, flat, 1, idx, upd, attrs.reduction or "none")
  return reshape_to(y, size)
end

local function broadcast_shape(a, b)
  local out = {}
  local n = math.max(#a, #b)
  for i = 1, n do
    local x = a[#a - n + i] or 1
    local y = b[#b - n + i] or 1
    out[i] = x == 1 and y or x
  end
  return out
end

function ops.Expand(ctx, inputs)
  local x = inputs[1]
  local shape = broadcast_shape(x:size(), int_list(ctx, inputs[2]))
  local lifted = {}
  for i = 1, #shape - x:dim() do lifted[i] = 1 end
  for _, s in ipairs(x:size()) do lifted[#lifted + 1] = s end
  local y = reshape_to(x, lifted)
  if #shape == 0 then return y end
  return y:expand(table.unpack(shape)):contiguous()
end

function ops.Tile(ctx, inputs)
  local x = inputs[1]
  local reps = int_list(ctx, inputs[2])
  if #reps ~= x:dim() then ctx:error("repeats has %d values for rank %d", #reps, x:dim()) end
  if #reps == 0 then return x end
  return x:tile(table.unpack(reps))
end

function ops.Pad(ctx, inputs, attrs)
  local x = inputs[1]
  local pads, value
  local mode = attrs.mode or "constant"
  if ctx.opset < 11 then
    pads, value = attrs.pads or attrs.paddings, attrs.value or 0
  else
    pads = int_list(ctx, inputs[2])
    value = inputs[3] and ctx:host(inputs[3])[1] or 0
    if inputs[4] then ctx:unsupported("axes input") end
  end
  local r = x:dim()
  if #pads ~= 2 * r then ctx:error("pads has %d values for rank %d", #pads, r) end
  local torch_pads = {}
  for i = r, 1, -1 do
    torch_pads[#torch_pads + 1] = pads[i]
    torch_pads[#torch_pads + 1] = pads[r + i]
  end
  local modes = {constant = "constant", reflect = "reflect", edge = "replicate", wrap = "circular"}
  if modes[mode] == nil then ctx:error("unknown mode '%s'", mode) end
  if value == true then value = 1 elseif value == false then value = 0 end
  return tensor.pad(x, torch_pads, {mode = modes[mode], value = value})
end

function ops.Shape(ctx, inputs, attrs)
  local size = inputs[1]:size()
  local r = #size
  local s, e = attrs.start or 0, attrs["end"] or r
  if s < 0 then s = s + r end
  if e < 0 then e = e + r end
  s, e = math.max(0, math.min(s, r)), math.max(0, math.min(e, r))
  local out = {}
  for i = s + 1, e do out[#out + 1] = size[i] end
  if #out == 0 then return tensor.zeros({0}, {dtype = "i64"}) end
  return tensor.new(out)
end

function ops.Size(ctx, inputs)
  return tensor.new(inputs[1]:numel())
end

local onnx_dtypes = {[1] = "f32", [2] = "i32", [3] = "i32", [4] = "i32", [5] = "i32", [6] = "i32",
  [7] = "i64", [9] = "bool", [10] = "f32", [11] = "f64", [12] = "i64", [16] = "f32"}

function ops.ConstantOfShape(ctx, inputs, attrs)
  local shape = inputs[1] and int_list(ctx, inputs[1]) or {}
  local v, dtype = 0.0, "f32"
  if attrs.value then
    dtype = attrs.value:dtype()
    v = attrs.value:reshape(-1)[1]:item()
  end
  if #shape == 0 then return tensor.full({1}, v, {dtype = dtype}):reshape({}) end
  return tensor.full(shape, v, {dtype = dtype})
end

function ops.Constant(ctx, inputs, attrs)
  if attrs.value then return attrs.value end
  if attrs.value_float then return tensor.new(attrs.value_float):float() end
  if attrs.value_floats then return tensor.new(attrs.value_floats):float() end
  if attrs.value_int then return tensor.new(attrs.value_int):long() end
  if attrs.value_ints then
    if #attrs.value_ints == 0 then return tensor.zeros({0}, {dtype = "i64"}) end
    return tensor.new(attrs.value_ints):long()
  end
  if attrs.sparse_value then ctx:unsupported("sparse_value") end
  if attrs.value_string or attrs.value_strings then ctx:unsupported("string tensors") end
  ctx:error("no value attribute")
end

function ops.Identity(ctx, inputs)
  return inputs[1]
end

function ops.Range(ctx, inputs)
  local start, limit, delta = ctx:host(inputs[1])[1], ctx:host(inputs[2])[1], ctx:host(inputs[3])[1]
  local dtype = inputs[1]:dtype()
  if delta == 0 then ctx:error("delta is 0") end
  local n = math.max(0, math.ceil((limit - start) / delta))
  n = math.tointeger(n) or math.floor(n)
  if n == 0 then return tensor.zeros({0}, {dtype = dtype}) end
  local steps = tensor.arange(n):to(dtype)
  return steps * delta + start
end

function ops.OneHot(ctx, inputs, attrs)
  local index, depth_t, values = inputs[1], inputs[2], inputs[3]
  local depth = math.tointeger(ctx:host(depth_t)[1]) or math.floor(ctx:host(depth_t)[1])
  local r = index:dim() + 1
  local d = dim_of(ctx, attrs.axis or -1, r)
  local idx = index
  if not (idx:dtype() == "i64" or idx:dtype() == "i32") then idx = idx:to("f64"):floor():long() end
  idx = tensor.where(idx:lt(0), idx + depth, idx):long():unsqueeze(d)
  local shape = filled(r, 1)
  shape[d] = depth
  local classes = tensor.arange(depth):reshape(table.unpack(shape))
  local hot = idx:eq(classes)
  local off = values:reshape(-1):narrow(1, 1, 1):reshape({})
  local on = values:reshape(-1):narrow(1, 2, 1):reshape({})
  return tensor.where(hot, on, off)
end

function ops.NonZero(ctx, inputs)
  local x = inputs[1]
  if x:dim() == 0 then x = x:reshape(1) end
  local found = x:nonzero()
  return (found - 1):t():contiguous()
end

function ops.Trilu(ctx, inputs, attrs)
  local x = inputs[1]
  local k = inputs[2] and int_list(ctx, inputs[2])[1] or 0
  if (attrs.upper or 1) == 1 then return x:triu(k) end
  return x:tril(k)
end

function ops.DepthToSpace(ctx, inputs, attrs)
  local x = inputs[1]
  local b = attrs.blocksize
  local n, c, h, w = table.unpack(x:size())
  local y
  if (attrs.mode or "DCR") == "DCR" then
    y = x:reshape(n, b, b, c // (b * b), h, w):permute(1, 4, 5, 2, 6, 3)
  else
    y = x:reshape(n, c // (b * b), b, b, h, w):permute(1, 2, 5, 3, 6, 4)
  end
  return y:reshape(n, c // (b * b), h * b, w * b)
end

function ops.SpaceToDepth(ctx, inputs, attrs)
  local x = inputs[1]
  local b = attrs.blocksize
  local n, c, h, w = table.unpack(x:size())
  return x:reshape(n, c, h // b, b, w // b, b):permute(1, 4, 6, 2, 3, 5):reshape(n, c * b * b, h // b, w // b)
end

function ops.EyeLike(ctx, inputs, attrs)
  local x = inputs[1]
  local rows, cols = x:size(1), x:size(2)
  local k = attrs.k or 0
  local dtype = attrs.dtype and onnx_dtypes[attrs.dtype] or x:dtype()
  local hit = (tensor.arange(rows):reshape(rows, 1) + k):eq(tensor.arange(cols):reshape(1, cols))
  return hit:to(dtype)
end

function ops.Compress(ctx, inputs, attrs)
  local x, condition = inputs[1], inputs[2]
  local flags = ctx:host(condition)
  local picked = {}
  for i, f in ipairs(flags) do
    if f == true or (f ~= false and f ~= 0) then picked[#picked + 1] = i end
  end
  local source, d = x, nil
  if attrs.axis then
    d = dim_of(ctx, attrs.axis, x:dim())
  else
    source, d = x:reshape(x:numel()), 1
  end
  if #picked == 0 then return source:narrow(d, 1, 0) end
  return source:index_select(d, tensor.new(picked))
end

function ops.MaxUnpool(ctx, inputs, attrs)
  local x, index = inputs[1], inputs[2]
  local n = x:dim() - 2
  local kernel = attrs.kernel_shape
  if kernel == nil or #kernel ~= n then ctx:error("kernel_shape must have %d values", n) end
  local strides = attrs.strides or filled(n, 1)
  local pads = attrs.pads or filled(2 * n, 0)
  local shape = {x:size(1), x:size(2)}
  for i = 1, n do
    shape[i + 2] = (x:size(i + 2) - 1) * strides[i] + kernel[i] - pads[i] - pads[n + i]
  end
  -- Indices are flat positions in the default output: a scatter of the
  -- values there; a larger output_shape pads at the end.
  local flat = tensor.zeros({product(shape)}, {dtype = x:dtype()})
  local y = reshape_to(flat:scatter_add(1, index:reshape(index:numel()):long() + 1, x:reshape(x:numel())), shape)
  if inputs[3] then
    local want = int_list(ctx, inputs[3])
    for i = 1, n do y = pad_dim(y, i + 2, 0, want[#want - n + i] - shape[i + 2]) end
  end
  return y
end

-- ConvInteger: (x - x_zero_point) convolved with (w - w_zero_point), i32.
-- Integers up to 2^24 products sum exactly in f64.
function ops.ConvInteger(ctx, inputs, attrs)
  local x, w = inputs[1]:to("f64"), inputs[2]:to("f64")
  if inputs[3] then x = x - inputs[3]:to("f64") end
  if inputs[4] then
    local wz = inputs[4]:to("f64")
    if wz:numel() > 1 then wz = per_channel(wz, w:dim()):transpose(1, 2) end
    w = w - wz
  end
  local y = ops.Conv(ctx, {x, w, n = 2}, attrs)
  return y:round():to("i32")
end

function ops.MeanVarianceNormalization(ctx, inputs, attrs)
  local x = inputs[1]
  local axes = attrs.axes or {0, 2, 3}
  local dims = {}
  for i, a in ipairs(axes) do dims[i] = dim_of(ctx, a, x:dim()) end
  table.sort(dims)
  local m, sq = x, x * x
  for i = #dims, 1, -1 do
    m = m:mean(dims[i], true)
    sq = sq:mean(dims[i], true)
  end
  return (x - m) / ((sq - m * m):sqrt() + 1e-9)
end

-- Reverses the first sequence_lens[b] steps of each batch entry b: a gather
-- along the time axis with index len-1-t for t < len, t after.
function ops.ReverseSequence(ctx, inputs, attrs)
  local x, lens = inputs[1], inputs[2]:long()
  local time = dim_of(ctx, attrs.time_axis or 0, x:dim())
  local batch = dim_of(ctx, attrs.batch_axis or 1, x:dim())
  local steps, batches = x:size(time), x:size(batch)
  local shape = filled(x:dim(), 1)
  shape[time] = steps
  local t = tensor.arange(steps):reshape(table.unpack(shape))
  shape[time], shape[batch] = 1, batches
  local len = lens:reshape(table.unpack(shape))
  local index = tensor.where(t:lt(len), len - 1 - t, t) + 1
  return x:gather(time, index:expand(table.unpack(x:size())):contiguous())
end

-- Values of x [N, C, H, W] at integer positions iy, ix ([N, P] each, any
-- values): [N, C, P], 0 where the position is outside.
local function fetch(x, iy, ix)
  local n, c, hgt, wid = table.unpack(x:size())
  local inside = iy:ge(0):logical_and(iy:lt(hgt)):logical_and(ix:ge(0)):logical_and(ix:lt(wid))
  local flat = (iy:clamp(0, hgt - 1) * wid + ix:clamp(0, wid - 1)):long() + 1
  local p = flat:size(2)
  local values = x:reshape(n, c, hgt * wid):gather(3, flat:reshape(n, 1, p):expand(n, c, p):contiguous())
  return values * inside:to(x:dtype()):reshape(n, 1, p)
end

-- Reflects coordinates into [lo, hi] (a mirror at each end).
local function reflect(v, lo, hi)
  if hi <= lo then return v * 0 + lo end
  local span = hi - lo
  local d = (v - lo):abs()
  local flips = (d / span):floor()
  local extra = d - flips * span
  return tensor.where((flips % 2):eq(0), extra + lo, hi - extra)
end

local function cubic_taps(t, a)
  local function far(u) return ((u * a - 5 * a) * u + 8 * a) * u - 4 * a end
  local function near(u) return ((u * (a + 2)) - (a + 3)) * u * u + 1 end
  return {far(t + 1), near(t), near(1 - t), far(2 - t)}
end

function ops.GridSample(ctx, inputs, attrs)
  local x, grid = inputs[1], inputs[2]
  if x:dim() ~= 4 then ctx:unsupported("%d-d GridSample", x:dim() - 2) end
  local mode = attrs.mode or "bilinear"
  local padding = attrs.padding_mode or "zeros"
  local align = (attrs.align_corners or 0) == 1
  local n, c, hgt, wid = table.unpack(x:size())
  local ho, wo = grid:size(2), grid:size(3)
  local gx = grid:select(4, 1):reshape(n, ho * wo)
  local gy = grid:select(4, 2):reshape(n, ho * wo)
  local function unnormalize(g, size)
    if align then return (g + 1) * ((size - 1) / 2) end
    return ((g + 1) * size - 1) / 2
  end
  local function pad_coordinate(v, size)
    if padding == "border" then return v:clamp(0, size - 1) end
    if padding == "reflection" then
      if align then v = reflect(v, 0, size - 1) else v = reflect(v, -0.5, size - 0.5) end
      return v:clamp(0, size - 1)
    end
    return v
  end
  local px, py = unnormalize(gx, wid), unnormalize(gy, hgt)
  local y
  if mode == "nearest" then
    px, py = pad_coordinate(px, wid), pad_coordinate(py, hgt)
    y = fetch(x, py:round(), px:round())
  elseif mode == "bilinear" then
    px, py = pad_coordinate(px, wid), pad_coordinate(py, hgt)
    local x0, y0 = px:floor(), py:floor()
    local tx, ty = px - x0, py - y0
    y = fetch(x, y0, x0) * ((1 - tx) * (1 - ty)):unsqueeze(2)
      + fetch(x, y0, x0 + 1) * (tx * (1 - ty)):unsqueeze(2)
      + fetch(x, y0 + 1, x0) * ((1 - tx) * ty):unsqueeze(2)
      + fetch(x, y0 + 1, x0 + 1) * (tx * ty):unsqueeze(2)
  elseif mode == "bicubic" then
    local x0, y0 = px:floor(), py:floor()
    local wx, wy = cubic_taps(px - x0, -0.75), cubic_taps(py - y0, -0.75)
    for i = 1, 4 do
      for j = 1, 4 do
        local iy = pad_coordinate(y0 + (i - 2), hgt)
        local ix = pad_coordinate(x0 + (j - 2), wid)
        local term = fetch(x, iy, ix) * (wy[i] * wx[j]):unsqueeze(2)
        y = y and y + term or term
      end
    end
  else
    ctx:error("unknown mode '%s'", mode)
  end
  return y:reshape(n, c, ho, wo)
end

-- RoiAlign (average mode): each output bin the mean of sampling_ratio^2
-- bilinear samples of the region, as ONNX and torchvision.
function ops.RoiAlign(ctx, inputs, attrs)
  local x, rois, batch_index = inputs[1], inputs[2], inputs[3]
  if (attrs.mode or "avg") ~= "avg" then ctx:unsupported("RoiAlign mode '%s'", attrs.mode) end
  local g = attrs.sampling_ratio or 0
  if g <= 0 then ctx:unsupported("adaptive sampling_ratio (it depends on the regions' values)") end
  local oh, ow = attrs.output_height or 1, attrs.output_width or 1
  local scale = attrs.spatial_scale or 1.0
  local half = (attrs.coordinate_transformation_mode or (ctx.opset >= 16 and "half_pixel" or "output_half_pixel"))
    == "half_pixel"
  local offset = half and 0.5 or 0
  local _, c, hgt, wid = table.unpack(x:size())
  local r = rois:size(1)
  local function column(k) return rois:select(2, k):reshape(r, 1) end
  local sx, sy = column(1) * scale - offset, column(2) * scale - offset
  local rw, rh = column(3) * scale - offset - sx, column(4) * scale - offset - sy
  if not half then rw, rh = rw:clamp_min(1), rh:clamp_min(1) end
  -- Sample a of the flattened bins: start + (a + 0.5) * bin / g.
  local ay = (tensor.arange(oh * g):to(x:dtype()) + 0.5):reshape(1, oh * g)
  local ax = (tensor.arange(ow * g):to(x:dtype()) + 0.5):reshape(1, ow * g)
  local ys = sy + ay * (rh / (oh * g))                                 -- [R, oh*g]
  local xs = sx + ax * (rw / (ow * g))                                 -- [R, ow*g]
  local py = ys:reshape(r, oh * g, 1):expand(r, oh * g, ow * g):reshape(r, oh * g * ow * g)
  local px = xs:reshape(r, 1, ow * g):expand(r, oh * g, ow * g):reshape(r, oh * g * ow * g)
  local outside = py:lt(-1):logical_or(py:gt(hgt)):logical_or(px:lt(-1)):logical_or(px:gt(wid))
  py, px = py:clamp_min(0), px:clamp_min(0)
  local y0, x0 = py:floor():clamp_max(hgt - 1), px:floor():clamp_max(wid - 1)
  local y1, x1 = (y0 + 1):clamp_max(hgt - 1), (x0 + 1):clamp_max(wid - 1)
  py = tensor.where(y0:ge(hgt - 1), y0, py)
  px = tensor.where(x0:ge(wid - 1), x0, px)
  local ty, tx = py - y0, px - x0
  local source = x:index_select(1, batch_index:long() + 1)             -- [R, C, H, W]
  local v = fetch(source, y0, x0) * ((1 - ty) * (1 - tx)):unsqueeze(2)
    + fetch(source, y0, x1) * ((1 - ty) * tx):unsqueeze(2)
    + fetch(source, y1, x0) * (ty * (1 - tx)):unsqueeze(2)
    + fetch(source, y1, x1) * (ty * tx):unsqueeze(2)
  v = v * outside:logical_not():to(x:dtype()):unsqueeze(2)
  return v:reshape(r, c, oh, g, ow, g):mean(6):mean(4)
end

-- Resize ---------------------------------------------------------------------

-- The source coordinate of output position i (0-based) along one dim.
local function source_coordinate(mode, i, scale, in_size, out_size, roi_start, roi_end)
  if mode == "half_pixel" then return (i + 0.5) / scale - 0.5 end
  if mode == "pytorch_half_pixel" then
    if out_size > 1 then return (i + 0.5) / scale - 0.5 end
    return 0
  end
  if mode == "align_corners" then
    if out_size == 1 then return 0 end
    return i * (in_size - 1) / (out_size - 1)
  end
  if mode == "asymmetric" then return i / scale end
  if mode == "tf_half_pixel_for_nn" then return (i + 0.5) / scale end
  if mode == "tf_crop_and_resize" then
    if out_size > 1 then
      return roi_start * (in_size - 1) + i * (roi_end - roi_start) * (in_size - 1) / (out_size - 1)
    end
    return 0.5 * (roi_start + roi_end) * (in_size - 1)
  end
  return nil
end

local function round_half(x, nearest_mode)
  if nearest_mode == "round_prefer_ceil" then return math.floor(x + 0.5) end
  if nearest_mode == "floor" then return math.floor(x) end
  if nearest_mode == "ceil" then return math.ceil(x) end
  -- round_prefer_floor
  if x - math.floor(x) == 0.5 then return math.floor(x) end
  return math.floor(x + 0.5)
end

local function cubic_weights(t, a)
  local function w(d)
    d = math.abs(d)
    if d <= 1 then return ((a + 2) * d - (a + 3)) * d * d + 1 end
    if d < 2 then return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a end
    return 0
  end
  return {w(t + 1), w(t), w(1 - t), w(2 - t)}
end

-- One dim of a resize: out[i] = sum_k weight[i][k] * x[tap[i][k]] (taps may
-- fall outside: then the weights are renormalized or the extrapolation value
-- used).
local function resize_dim(ctx, x, d, out_size, out_length, scale, attrs, mode, roi_start, roi_end)
  local in_size = x:size(d)
  local coordinate_mode = attrs.coordinate_transformation_mode or "half_pixel"
  if ctx.op_type_is_upsample then coordinate_mode = "asymmetric" end
  local nearest_mode = attrs.nearest_mode or "round_prefer_floor"
  if ctx.opset < 11 then coordinate_mode, nearest_mode = "asymmetric", "floor" end
  local exclude_outside = (attrs.exclude_outside or 0) == 1
  local extrapolation = attrs.extrapolation_value or 0
  local taps, weights, outside = {}, {}, {}
  local width = mode == "nearest" and 1 or (mode == "linear" and 2 or 4)
  for i = 0, out_size - 1 do
    local xo = source_coordinate(coordinate_mode, i, scale, in_size, out_length, roi_start, roi_end)
    if xo == nil then ctx:error("unknown coordinate_transformation_mode '%s'", coordinate_mode) end
    local row_taps, row_weights = {}, {}
    if coordinate_mode == "tf_crop_and_resize" and (xo < 0 or xo > in_size - 1) then
      outside[i + 1] = true
    end
    if mode == "nearest" then
      local j = round_half(xo, nearest_mode)
      row_taps[1], row_weights[1] = math.max(0, math.min(in_size - 1, j)), 1
    elseif mode == "linear" then
      local clamped = math.max(0, math.min(in_size - 1, xo))
      if coordinate_mode == "tf_crop_and_resize" then clamped = xo end
      local j = math.floor(clamped)
      local t = clamped - j
      row_taps = {math.max(0, math.min(in_size - 1, j)), math.max(0, math.min(in_size - 1, j + 1))}
      row_weights = {1 - t, t}
    else
      local j = math.floor(xo)
      local t = xo - j
      local cw = cubic_weights(t, attrs.cubic_coeff_a or -0.75)
      local sum = 0
      for k = 1, 4 do
        local p = j - 2 + k
        if p < 0 or p >= in_size then
          if exclude_outside then cw[k] = 0 end
        end
        sum = sum + cw[k]
        row_taps[k] = math.max(0, math.min(in_size - 1, p))
      end
      if exclude_outside then for k = 1, 4 do cw[k] = cw[k] / sum end end
      row_weights = cw
    end
    taps[i + 1], weights[i + 1] = row_taps, row_weights
  end
  local y
  local shape = filled(x:dim(), 1)
  shape[d] = out_size
  for k = 1, width do
    local idx, wk = {}, {}
    for i = 1, out_size do
      idx[i] = taps[i][k] + 1
      wk[i] = weights[i][k]
    end
    local picked = x:index_select(d, tensor.new(idx))
    local term
    if width == 1 then
      term = picked
    else
      term = picked * tensor.new(wk):to(x:dtype()):reshape(table.unpack(shape))
    end
    y = y and y + term or term
  end
  if next(outside) then
    local mask = {}
    for i = 1, out_size do mask[i] = outside[i] == true end
    y = y:masked_fill(tensor.new(mask):reshape(table.unpack(shape)), extrapolation)
  end
  return y
end

local function resize(ctx, x, scales, sizes, attrs, mode, roi)
  local r = x:dim()
  if mode == "bilinear" then mode = "linear" end
  if mode == "cubic" and not is_float(x) then ctx:error("cubic needs a float input") end
  if mode ~= "nearest" and mode ~= "linear" and mode ~= "cubic" then ctx:error("unknown mode '%s'", mode) end
  local y = x
  for d = 1, r do
    local in_size = x:size(d)
    local out_size, scale, out_length
    if sizes then
      out_size = sizes[d]
      scale = out_size / in_size
      out_length = out_size
    else
      scale = scales[d]
      out_size = math.floor(in_size * scale + 1e-9)
      -- The coordinate formulas use the unrounded output length.
      out_length = in_size * scale
    end
    local roi_start, roi_end = 0, 1
    if roi and #roi == 2 * r then roi_start, roi_end = roi[d], roi[r + d] end
    local identity = out_size == in_size and scale == 1 and
      (attrs.coordinate_transformation_mode or "half_pixel") ~= "tf_crop_and_resize"
    if not identity then
      if mode ~= "nearest" and not is_float(y) then y = y:float() end
      y = resize_dim(ctx, y, d, out_size, out_length, scale, attrs, mode, roi_start, roi_end)
    end
  end
  return y
end

function ops.Resize(ctx, inputs, attrs)
  local x = inputs[1]
  local mode = attrs.mode or "nearest"
  local scales, sizes, roi
  if ctx.opset < 11 then
    scales = int_list(ctx, inputs[2])
  else
    roi = inputs[2] and inputs[2]:numel() > 0 and ctx:host(inputs[2]) or nil
    scales = inputs[3] and inputs[3]:numel() > 0 and ctx:host(inputs[3]) or nil
    sizes = inputs[4] and inputs[4]:numel() > 0 and int_list(ctx, inputs[4]) or nil
  end
  if (attrs.keep_aspect_ratio_policy or "stretch") ~= "stretch" then
    ctx:unsupported("keep_aspect_ratio_policy")
  end
  if attrs.axes then ctx:unsupported("axes") end
  if scales == nil and sizes == nil then ctx:error("neither scales nor sizes") end
  return resize(ctx, x, scales, sizes, attrs, mode, roi)
end

function ops.Upsample(ctx, inputs, attrs)
  local x = inputs[1]
  local scales = attrs.scales
  if scales == nil and inputs[2] then scales = ctx:host(inputs[2]) end
  if scales == nil then
    if attrs.height_scale then
      scales = {1, 1, attrs.height_scale, attrs.width_scale}
    else
      ctx:error("no scales")
    end
  end
  local c = setmetatable({op_type_is_upsample = true, opset = 9}, {__index = ctx})
  return resize(c, x, scales, nil, {}, attrs.mode or "nearest", nil)
end

return ops
