-- onnx_ops_nn.lua - ONNX ops of the default domain: convolution, pooling,
-- normalization, GridSample and RoiAlign (the shape and indexing ops are
-- in onnx_ops_shape.lua). Each op is built from lazylua's tensor API, so
-- an imported graph records lazily and has gradients.
--
-- ONNX axes are 0-based (negative counts from the end), lazylua's dims
-- 1-based; ONNX indices are 0-based, lazylua's gather/index_select 1-based.
local tensor = require "tensor"

local H = require "lazylua.onnx_nn_common"
local dim_of, product, filled, is_float, pad_dim = H.dim_of, H.product, H.filled, H.is_float, H.pad_dim
local strided, add_bias, per_channel, pad_spatial = H.strided, H.add_bias, H.per_channel, H.pad_spatial
local int_list, reshape_to = H.int_list, H.reshape_to

local ops = {}

-- The pads attribute: 2n integers >= 0 (begins, then ends).
local function explicit_pads(ctx, attrs, n)
  local pads = attrs.pads or filled(2 * n, 0)
  if #pads ~= 2 * n then ctx:error("pads has %d values for %d spatial dims", #pads, n) end
  for i, v in ipairs(pads) do
    if math.type(v) ~= "integer" or v < 0 then
      ctx:error("pads[%d] is %s (expected an integer >= 0)", i - 1, tostring(v))
    end
  end
  return pads
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
    local pads = explicit_pads(ctx, attrs, n)
    for i = 1, n do begins[i], ends[i] = pads[i], pads[n + i] end
  else
    ctx:error("unknown auto_pad '%s'", auto_pad)
  end
  return begins, ends
end

-- A per-spatial-dim attribute (kernel_shape, strides, dilations): `n`
-- integers >= `least`, or `default` filled in when the node omits it.
local function per_dim(ctx, attrs, name, n, least, default)
  local list = attrs[name]
  if list == nil then return filled(n, default) end
  if #list ~= n then ctx:error("%s has %d values for %d spatial dims", name, #list, n) end
  for i, v in ipairs(list) do
    if math.type(v) ~= "integer" or v < least then
      ctx:error("%s[%d] is %s (expected an integer >= %d)", name, i - 1, tostring(v), least)
    end
  end
  return list
end

-- The kernel extents of a conv's weight [O, C/g, k...]; a kernel_shape
-- attribute must agree with them.
local function weight_kernel(ctx, attrs, w, n)
  if w:dim() ~= n + 2 then ctx:error("the weight has rank %d, expected %d", w:dim(), n + 2) end
  local kernel = {}
  for i = 3, w:dim() do kernel[#kernel + 1] = w:size(i) end
  if attrs.kernel_shape then
    local given = per_dim(ctx, attrs, "kernel_shape", n, 1)
    for i = 1, n do
      if given[i] ~= kernel[i] then
        ctx:error("kernel_shape [%s] disagrees with the weight's kernel [%s]", table.concat(given, ", "),
          table.concat(kernel, ", "))
      end
    end
  end
  return kernel
end

-- The group attribute of a conv: an integer >= 1 dividing the channels
-- (and the output channels, when given).
local function conv_group(ctx, attrs, channels, outs)
  local group = attrs.group or 1
  if math.type(group) ~= "integer" or group < 1 then
    ctx:error("group is %s (expected an integer >= 1)", tostring(group))
  end
  outs = outs or group
  if channels % group ~= 0 or outs % group ~= 0 then
    ctx:error("group %d does not divide the %d input and %d output channels", group, channels, outs)
  end
  return group
end

local function spatial_attrs(ctx, attrs, x, kernel)
  local n = x:dim() - 2
  if n < 1 then ctx:error("expected an input [N, C, spatial...], got rank %d", x:dim()) end
  if kernel == nil then
    if attrs.kernel_shape == nil then ctx:error("kernel_shape must have %d values", n) end
    kernel = per_dim(ctx, attrs, "kernel_shape", n, 1)
  end
  local strides = per_dim(ctx, attrs, "strides", n, 1, 1)
  local dilations = per_dim(ctx, attrs, "dilations", n, 1, 1)
  local size = x:size()
  local in_sizes = {}
  for i = 1, n do in_sizes[i] = size[i + 2] end
  local begins, ends = resolve_pads(ctx, attrs, in_sizes, kernel, strides, dilations)
  return n, kernel, strides, dilations, begins, ends, in_sizes
end

-- The bias input of a conv: absent, or a vector of the output channels.
local function conv_bias(ctx, b, outs)
  if b == nil then return nil end
  if b:dim() ~= 1 or b:size(1) ~= outs then
    ctx:error("the bias has shape [%s], expected [%d]", table.concat(b:size(), ", "), outs)
  end
  return b
end

-- The input of a conv: rank 3 to 5 (1-d to 3-d), f32 or f64 as the weight.
local function conv_input(ctx, x, w)
  local n = x:dim() - 2
  if n < 1 then ctx:error("expected an input [N, C, spatial...], got rank %d", x:dim()) end
  if n > 3 then ctx:unsupported("%d-d convolution", n) end
  if not is_float(x) or x:dtype() ~= w:dtype() then
    ctx:error("expected f32 or f64 input and weight of one dtype, got %s and %s", x:dtype(), w:dtype())
  end
  return n
end

-- Each spatial output extent, refused below 1 with the numbers that made it.
local function check_extents(ctx, extents, in_sizes)
  for i, extent in ipairs(extents) do
    if extent < 1 then
      ctx:error("the output of spatial dim %d would have %d elements (input %d): the kernel is larger than the "
        .. "padded input", i - 1, extent, in_sizes[i])
    end
  end
end

-- One op: tensor.conv<n>d with ONNX's pads as {begin, end} pairs (auto_pad
-- resolved), strides, dilations, group and the bias, as docs/onnx.md says.
function ops.Conv(ctx, inputs, attrs)
  local x, w = inputs[1], inputs[2]
  local n = conv_input(ctx, x, w)
  local kernel = weight_kernel(ctx, attrs, w, n)
  local group = conv_group(ctx, attrs, x:size(2), w:size(1))
  if x:size(2) ~= w:size(2) * group then
    ctx:error("input has %d channels, the weight expects %d (group %d)", x:size(2), w:size(2) * group, group)
  end
  local b = conv_bias(ctx, inputs[3], w:size(1))
  local _, _, strides, dilations, begins, ends, in_sizes = spatial_attrs(ctx, attrs, x, kernel)
  local padding, extents = {}, {}
  for i = 1, n do
    padding[i] = {begins[i], ends[i]}
    local keff = (kernel[i] - 1) * dilations[i] + 1
    extents[i] = (in_sizes[i] + begins[i] + ends[i] - keff) // strides[i] + 1
  end
  check_extents(ctx, extents, in_sizes)
  return tensor["conv" .. n .. "d"](x, w, b, {stride = strides, padding = padding, dilation = dilations,
    groups = group})
end

-- One op: tensor.conv_transpose<n>d. ONNX's output per dim is
-- stride*(in-1) + output_padding + keff - pad_begin - pad_end, the pads
-- coming from pads, auto_pad or output_shape. A negative pad (an
-- output_shape or SAME output past the full one) is zeros added to the
-- op's output, then the bias.
function ops.ConvTranspose(ctx, inputs, attrs)
  local x, w = inputs[1], inputs[2]
  local n = conv_input(ctx, x, w)
  local kernel = weight_kernel(ctx, attrs, w, n)
  local group = conv_group(ctx, attrs, w:size(1))
  if x:size(2) ~= w:size(1) then ctx:error("input has %d channels, the weight expects %d", x:size(2), w:size(1)) end
  local outs = w:size(2) * group
  local b = conv_bias(ctx, inputs[3], outs)
  local strides = per_dim(ctx, attrs, "strides", n, 1, 1)
  local dilations = per_dim(ctx, attrs, "dilations", n, 1, 1)
  local output_padding = per_dim(ctx, attrs, "output_padding", n, 0, 0)
  for i = 1, n do
    if output_padding[i] >= math.max(strides[i], dilations[i]) then
      ctx:error("output_padding[%d] is %d (it must be below the stride or the dilation)", i - 1, output_padding[i])
    end
  end
  if attrs.output_shape and #attrs.output_shape ~= n and #attrs.output_shape ~= n + 2 then
    ctx:error("output_shape has %d values for %d spatial dims", #attrs.output_shape, n)
  end
  local auto_pad = attrs.auto_pad or "NOTSET"
  if auto_pad ~= "NOTSET" and auto_pad ~= "SAME_UPPER" and auto_pad ~= "SAME_LOWER" and auto_pad ~= "VALID" then
    ctx:error("unknown auto_pad '%s'", auto_pad)
  end
  local size = x:size()
  local pads = auto_pad == "NOTSET" and not attrs.output_shape and explicit_pads(ctx, attrs, n)
  local padding, cropped, zeros, extents, in_sizes = {}, {}, {}, {}, {}
  local needs_zeros = false
  for i = 1, n do
    in_sizes[i] = size[i + 2]
    local keff = (kernel[i] - 1) * dilations[i] + 1
    local full = strides[i] * (size[i + 2] - 1) + output_padding[i] + keff
    local begin, finish
    if attrs.output_shape or auto_pad == "SAME_UPPER" or auto_pad == "SAME_LOWER" then
      local want = attrs.output_shape and attrs.output_shape[#attrs.output_shape - n + i] or size[i + 2] * strides[i]
      if math.type(want) ~= "integer" or want < 1 then
        ctx:error("output_shape[%d] is %s (expected an integer >= 1)", i - 1, tostring(want))
      end
      local total = full - want
      if auto_pad == "SAME_UPPER" then
        begin, finish = total // 2, total - total // 2
      else
        begin, finish = total - total // 2, total // 2
      end
    elseif auto_pad == "VALID" then
      begin, finish = 0, 0
    else
      begin, finish = pads[i], pads[n + i]
    end
    extents[i] = full - begin - finish
    padding[i] = {math.max(begin, 0), math.max(finish, 0)}
    -- tensor.pad's order: the last dim first.
    zeros[2 * (n - i) + 1], zeros[2 * (n - i) + 2] = math.max(-begin, 0), math.max(-finish, 0)
    needs_zeros = needs_zeros or begin < 0 or finish < 0
    cropped[i] = full - padding[i][1] - padding[i][2]
  end
  check_extents(ctx, extents, in_sizes)
  if needs_zeros then check_extents(ctx, cropped, in_sizes) end
  local op = tensor["conv_transpose" .. n .. "d"]
  local options = {stride = strides, padding = padding, output_padding = output_padding, dilation = dilations,
    groups = group}
  if not needs_zeros then return op(x, w, b, options) end
  return add_bias(tensor.pad(op(x, w, options), zeros), b)
end

-- A pooling's geometry: per spatial dim the kernel, stride, dilation,
-- begin/end pads, the extra end padding ceil_mode needs, and the output size.
local function pool_geometry(ctx, x, attrs)
  local n, kernel, strides, dilations, begins, ends, in_sizes = spatial_attrs(ctx, attrs, x)
  local ceil_mode = (attrs.ceil_mode or 0) == 1
  -- A pad as wide as the kernel makes windows of padding only (-inf or a
  -- 0/0 mean); ONNX Runtime refuses it too.
  for i = 1, n do
    if begins[i] >= kernel[i] or ends[i] >= kernel[i] then
      ctx:error("pads %d and %d of spatial dim %d must be smaller than the kernel %d", begins[i], ends[i], i - 1,
        kernel[i])
    end
  end
  local out, extra, slack = {}, {}, {}
  for i = 1, n do
    local keff = (kernel[i] - 1) * dilations[i] + 1
    local span = in_sizes[i] + begins[i] + ends[i] - keff
    local o
    if ceil_mode then
      o = -((-span) // strides[i]) + 1
      -- The last window must start inside the input or its begin padding.
      if (o - 1) * strides[i] >= in_sizes[i] + begins[i] then o = o - 1 end
    else
      o = span // strides[i] + 1
    end
    if o < 1 then ctx:error("the kernel is larger than the padded input") end
    out[i] = o
    extra[i] = math.max(0, (o - 1) * strides[i] + keff - (in_sizes[i] + begins[i] + ends[i]))
    -- The room windows_along's views take past the last window.
    local padded = in_sizes[i] + begins[i] + ends[i] + extra[i]
    slack[i] = strides[i] == 1 and 0 or math.max(0, keff - 1 + o * strides[i] - padded)
  end
  return {n = n, kernel = kernel, begins = begins, ends = ends, extra = extra, slack = slack, out = out,
    in_sizes = in_sizes, strides = strides, dilations = dilations}
end

-- The windows of one spatial dim i (dim i + 2 of t, already padded): a list
-- of kernel[i] tensors, each the window's k-th element for every output.
-- A stride above 1 takes views, not gathers: the out * stride elements from
-- the window's k-th as [out, stride], their first column (pad_for_pool
-- leaves room for the last window's whole stride).
local function windows_along(t, g, i)
  local list, d, step, count = {}, i + 2, g.strides[i], g.out[i]
  local size = t:size()
  local split = {}
  for j = 1, #size do
    split[#split + 1] = j == d and count or size[j]
    if j == d then split[#split + 1] = step end
  end
  for k = 0, g.kernel[i] - 1 do
    local start = k * g.dilations[i]
    if step == 1 then
      list[k + 1] = t:narrow(d, start + 1, count)
    else
      list[k + 1] = t:narrow(d, start + 1, count * step):reshape(table.unpack(split)):select(d + 1, 1)
    end
  end
  return list
end

-- Pads dim i + 2 as the pooling does: the pads with `fill`, then ceil_mode's
-- extra with `extra_fill`.
local function pad_for_pool(t, g, i, fill, extra_fill, mode)
  t = pad_dim(t, i + 2, g.begins[i], g.ends[i], fill, mode)
  return pad_dim(t, i + 2, 0, g.extra[i] + g.slack[i], extra_fill)
end

local lowest = {i32 = -2147483648, i64 = math.mininteger}

-- A float max pool of 1 or 2 spatial dims without dilation or indices, by
-- lazylua's kernel (tensor.max_pool2d, whose -inf padding is the same on
-- both sides and at most half the kernel): a 1-D pool as a 2-D one of
-- height 1, and the pads beyond the kernel's (asymmetric ones, ceil_mode's
-- extra end, more than half the kernel) as -inf added to the input first.
-- Those give the same values as padding: a window's maximum passes over
-- -inf, and a window of -inf is -inf either way.
local function max_pool_by_kernel(x, g)
  local kernel, strides, begins, ends = g.kernel, g.strides, g.begins, {}
  for i = 1, g.n do ends[i] = g.ends[i] + g.extra[i] end
  local size = x:size()
  if g.n == 1 then
    x = x:reshape(size[1], size[2], 1, size[3])
    kernel, strides, begins, ends = {1, kernel[1]}, {1, strides[1]}, {0, begins[1]}, {0, ends[1]}
  end
  local padding, before, after = {}, {}, {}
  for i = 1, 2 do
    padding[i] = math.min(begins[i], ends[i], kernel[i] // 2)
    before[i], after[i] = begins[i] - padding[i], ends[i] - padding[i]
  end
  local y = tensor.max_pool2d(pad_spatial(x, before, after, -math.huge), kernel, {stride = strides, padding = padding})
  if g.n == 1 then y = y:reshape(size[1], size[2], g.out[1]) end
  return y
end

-- Max and sum pooling are separable: one dim at a time (the last first), so
-- a k1 x k2 window costs k1 + k2 slices, not k1 * k2. For the indices, the
-- positions ride along: the first maximum of each row, then the first row,
-- is the first maximum in row-major order.
function ops.MaxPool(ctx, inputs, attrs)
  local x = inputs[1]
  local want_indices = ctx.node.outputs[2] ~= nil and ctx.node.outputs[2] ~= ""
  local fill = is_float(x) and -math.huge or lowest[x:dtype()]
  if fill == nil then ctx:error("dtype %s is not supported", x:dtype()) end
  local g = pool_geometry(ctx, x, attrs)
  local positions
  if want_indices then
    -- storage_order 1: the spatial dims column-major.
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
  end
  if (g.n == 1 or g.n == 2) and is_float(x) and not positions and g.dilations[1] == 1 and
      (g.n == 1 or g.dilations[2] == 1) then
    return max_pool_by_kernel(x, g)
  end
  local y = x
  for i = g.n, 1, -1 do
    local stacked = tensor.stack(windows_along(pad_for_pool(y, g, i, fill, fill), g, i), 1)
    local where
    y, where = stacked:max(1)
    if positions then
      local pstack = tensor.stack(windows_along(pad_for_pool(positions, g, i, -1, -1), g, i), 1)
      positions = pstack:gather(1, where:unsqueeze(1)):squeeze(1)
    end
  end
  return y, positions
end

function ops.AveragePool(ctx, inputs, attrs)
  local x = inputs[1]
  if not is_float(x) then ctx:error("expected f32 or f64, got %s", x:dtype()) end
  local g = pool_geometry(ctx, x, attrs)
  local include_pad = (attrs.count_include_pad or 0) == 1
  local function window_sum(t, i, mode)
    local total
    for _, w in ipairs(windows_along(pad_for_pool(t, g, i, 0, 0, mode), g, i)) do
      total = total and total + w or w
    end
    return total
  end
  local total, count = x, nil
  -- The number of elements each window covers: ones pooled the same way.
  -- The pads count when count_include_pad (ceil_mode's extra never): before
  -- dim i is pooled, the counts are constant along it, so a padded slice
  -- counts as its neighbour (replicate).
  local shape = {1, 1}
  for i = 1, g.n do shape[i + 2] = g.in_sizes[i] end
  count = tensor.ones(shape, {dtype = x:dtype()})
  for i = g.n, 1, -1 do
    total = window_sum(total, i)
    count = window_sum(count, i, include_pad and "replicate" or nil)
  end
  return total / count
end

-- A global pool reduces [N, C, spatial...] as [N, C, area] along its last
-- dim: one reduction over contiguous rows, where a reduction per spatial
-- dim would run over rows as short as 7 (EfficientNet's last blocks), each
-- its own pass, with the producer's elementwise work fused into the first.
local function global_pool(ctx, x, reduce)
  local size = x:size()
  if #size < 2 then ctx:error("expected an input [N, C, spatial...], got a %d-d tensor", #size) end
  local area, shape = 1, {size[1], size[2]}
  for d = 3, #size do
    area = area * size[d]
    shape[d] = 1
  end
  return reduce(x:reshape(size[1], size[2], area)):reshape(table.unpack(shape))
end

function ops.GlobalAveragePool(ctx, inputs)
  return global_pool(ctx, inputs[1], function(t) return t:mean(3) end)
end

function ops.GlobalMaxPool(ctx, inputs)
  return global_pool(ctx, inputs[1], function(t) return t:amax(3) end)
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
  if math.type(size) ~= "integer" or size < 1 then ctx:error("size is %s (expected an integer >= 1)", tostring(size)) end
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
    local want = int_list(ctx, inputs[3], "output_shape")
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

return ops
