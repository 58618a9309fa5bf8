-- onnx_ops_vision.lua - the ONNX ops of the default domain for images and
-- detection: Resize (and Upsample, its older form) and NonMaxSuppression.
-- Resize is separable, built from lazylua's tensor API (lazy, with
-- gradients); NonMaxSuppression reads its scores, since the number of
-- boxes it keeps depends on them. Scales, sizes and thresholds are read
-- through ctx:host.
local tensor = require "tensor"
local native = require "stdlib.native"

local H = require "lazylua.onnx_nn_common"
local filled, is_float, int_list = H.filled, H.is_float, H.int_list

local ops = {}

-- NonMaxSuppression ------------------------------------------------------------

-- The corners (y1, x1, y2, x2) and area of box `i` (1-based) of a flat
-- host list of [n, 4] boxes, in doubles: center_point_box gives
-- [x_center, y_center, width, height], else [y1, x1, y2, x2] with either
-- corner first.
local function box_corners(values, i, center)
  local base = (i - 1) * 4
  local a1, a2, a3, a4 = values[base + 1], values[base + 2], values[base + 3], values[base + 4]
  local y1, x1, y2, x2
  if center then
    y1, x1, y2, x2 = a2 - a4 / 2, a1 - a3 / 2, a2 + a4 / 2, a1 + a3 / 2
  else
    y1, x1, y2, x2 = math.min(a1, a3), math.min(a2, a4), math.max(a1, a3), math.max(a2, a4)
  end
  return y1, x1, y2, x2, (y2 - y1) * (x2 - x1)
end

-- Whether the IoU of the boxes at positions `rows` (an index tensor) with
-- those at `cols` (an index tensor, or nil: every box of `c`) exceeds the
-- threshold: bool [#rows, #cols]. The spec's per-pair formula in doubles,
-- in the same order (a union <= 0 gives an IoU of 0).
local function overlaps(c, rows, cols, threshold)
  local function as_row(t) return t:index_select(1, rows):unsqueeze(2) end
  local function as_col(t) return (cols and t:index_select(1, cols) or t):unsqueeze(1) end
  local ih = (as_row(c.y2):minimum(as_col(c.y2)) - as_row(c.y1):maximum(as_col(c.y1))):clamp_min(0)
  local iw = (as_row(c.x2):minimum(as_col(c.x2)) - as_row(c.x1):maximum(as_col(c.x1))):clamp_min(0)
  local inter = ih * iw
  local union = as_row(c.area) + as_col(c.area) - inter
  local empty = union:le(0)
  local iou = tensor.where(empty, 0.0, inter / tensor.where(empty, 1.0, union))
  return iou:gt(threshold)
end

-- ONNX's greedy selection for one batch entry and class. `order` lists the
-- candidates (1-based box numbers) by falling score; returns the kept
-- ones, at most max_out. The work over pairs is tensor ops, Lua's only
-- per block of candidates: the IoUs inside a block are read to pick its
-- boxes in order, then the picked suppress every later candidate in one
-- op, whose hits are read as positions. Every block's steps have the same
-- shapes (the last block and the picked rows padded by repetition), so
-- their buffers are reused from block to block.
local function greedy_selection(box_values, center, order, max_out, threshold)
  local m = #order
  local kept = {}
  if m == 0 or max_out <= 0 then return kept end
  local columns = {y1 = {}, x1 = {}, y2 = {}, x2 = {}, area = {}}
  for p, i in ipairs(order) do
    local y1, x1, y2, x2, area = box_corners(box_values, i, center)
    columns.y1[p], columns.x1[p], columns.y2[p], columns.x2[p], columns.area[p] = y1, x1, y2, x2, area
  end
  local c = {}
  for name, list in pairs(columns) do c[name] = tensor.new(list, {dtype = "f64"}) end
  local block = math.max(16, math.min(256, (1 << 22) // m, m))
  local position = tensor.arange(1, m + 1)
  local dead = {}
  for first = 1, m, block do
    local count = math.min(block, m - first + 1)
    local members = {}
    for j = 1, block do members[j] = first + math.min(j, count) - 1 end
    local index = tensor.new(members)
    local over = overlaps(c, index, index, threshold):reshape(-1):tolist()
    local picked = {}
    for j = 1, count do
      local p = first + j - 1
      if not dead[p] then
        kept[#kept + 1] = order[p]
        if #kept >= max_out then return kept end
        picked[#picked + 1] = p
        for l = j + 1, count do
          if over[(j - 1) * block + l] then dead[first + l - 1] = true end
        end
      end
    end
    local last = first + count - 1
    if #picked > 0 and last < m then
      local rows = {}
      for j = 1, block do rows[j] = picked[math.min(j, #picked)] end
      local later = position:gt(tensor.new({last}))
      local hit = overlaps(c, tensor.new(rows), nil, threshold):any(1):logical_and(later)
      for _, p in ipairs(hit:nonzero():reshape(-1):tolist()) do dead[p] = true end
    end
  end
  return kept
end

-- NonMaxSuppression reads the scores (the number of boxes kept depends on
-- them): [k, 3] rows of (batch, class, box), ONNX's greedy selection per
-- batch and class.
function ops.NonMaxSuppression(ctx, inputs, attrs)
  local boxes, scores = inputs[1], inputs[2]
  if boxes == nil or scores == nil then ctx:error("boxes and scores are required") end
  if boxes:dim() ~= 3 or boxes:size(3) ~= 4 then
    ctx:error("boxes must be [batches, boxes, 4], got [%s]", table.concat(boxes:size(), ", "))
  end
  if scores:dim() ~= 3 or scores:size(1) ~= boxes:size(1) or scores:size(3) ~= boxes:size(2) then
    ctx:error("scores must be [%d, classes, %d], got [%s]", boxes:size(1), boxes:size(2),
      table.concat(scores:size(), ", "))
  end
  local function scalar(slot, what, default)
    local t = inputs[slot]
    if t == nil or t:numel() == 0 then return default end
    if t:numel() ~= 1 then ctx:error("%s must hold one value, got %d", what, t:numel()) end
    local v = ctx:host(t)[1]
    if v ~= v then ctx:error("%s is NaN", what) end
    return v
  end
  local max_out = scalar(3, "max_output_boxes_per_class", 0)
  if math.type(max_out) ~= "integer" or max_out < 0 then
    ctx:error("max_output_boxes_per_class is %s (expected an integer >= 0)", tostring(max_out))
  end
  local iou_threshold = scalar(4, "iou_threshold", 0)
  if iou_threshold < 0 or iou_threshold > 1 then ctx:error("iou_threshold %s is outside [0, 1]", tostring(iou_threshold)) end
  local score_threshold = scalar(5, "score_threshold", nil)
  local center = (attrs.center_point_box or 0) == 1
  local nb, nbox, nc = boxes:size(1), boxes:size(2), scores:size(2)
  local rows = {}
  local box_values, score_values = ctx:host(boxes), ctx:host(scores)
  -- Eagerly: the block steps' shapes follow the candidate counts, which
  -- differ from call to call; compiling each would cost more than it runs.
  native.onnx_eager_call(function()
    for b = 1, nb do
      local batch_boxes = table.move(box_values, (b - 1) * nbox * 4 + 1, b * nbox * 4, 1, {})
      for class = 1, nc do
        local base = ((b - 1) * nc + (class - 1)) * nbox
        local order = {}
        for i = 1, nbox do
          local score = score_values[base + i]
          -- (a NaN score is never selected: it has no place in the order)
          if score == score and (score_threshold == nil or score > score_threshold) then order[#order + 1] = i end
        end
        table.sort(order, function(p, q)
          local sp, sq = score_values[base + p], score_values[base + q]
          if sp ~= sq then return sp > sq end
          return p < q
        end)
        for _, i in ipairs(greedy_selection(batch_boxes, center, order, max_out, iou_threshold)) do
          rows[#rows + 1] = {b - 1, class - 1, i - 1}
        end
      end
    end
  end)
  if #rows == 0 then return tensor.zeros({0, 3}, {dtype = "i64"}) end
  return tensor.new(rows)
end

-- Resize ---------------------------------------------------------------------

-- The largest tensor lazylua holds (tensor/shape.h's kMaxElements).
local max_elements = 1 << 40

local coordinate_modes = {half_pixel = true, pytorch_half_pixel = true, align_corners = true,
  asymmetric = true, tf_half_pixel_for_nn = true, tf_crop_and_resize = true}
local nearest_modes = {round_prefer_floor = true, round_prefer_ceil = true, floor = true, ceil = true}

-- The source coordinates of output positions `i` (an f64 tensor of 0, 1,
-- ...) along one dim: ONNX's coordinate_transformation_mode formulas.
local function source_coordinates(mode, i, scale, in_size, out_length, roi_start, roi_end)
  if mode == "half_pixel" then return (i + 0.5) / scale - 0.5 end
  if mode == "pytorch_half_pixel" then
    if out_length > 1 then return (i + 0.5) / scale - 0.5 end
    return i * 0
  end
  if mode == "align_corners" then
    if out_length == 1 then return i * 0 end
    return i * (in_size - 1) / (out_length - 1)
  end
  if mode == "asymmetric" then return i / scale end
  if mode == "tf_half_pixel_for_nn" then return (i + 0.5) / scale end
  -- tf_crop_and_resize
  if out_length > 1 then
    return i * (roi_end - roi_start) * (in_size - 1) / (out_length - 1) + roi_start * (in_size - 1)
  end
  return i * 0 + 0.5 * (roi_start + roi_end) * (in_size - 1)
end

local function round_half(x, nearest_mode)
  if nearest_mode == "round_prefer_ceil" then return (x + 0.5):floor() end
  if nearest_mode == "floor" then return x:floor() end
  if nearest_mode == "ceil" then return x:ceil() end
  -- round_prefer_floor
  return tensor.where((x - x:floor()):eq(0.5), x:floor(), (x + 0.5):floor())
end

-- Keys's cubic convolution weight of distances d (0 <= d <= 2) with
-- coefficient a.
local function cubic_weight(d, a)
  local near = ((d * (a + 2)) - (a + 3)) * d * d + 1
  local far = ((d * a - 5 * a) * d + 8 * a) * d - 4 * a
  return tensor.where(d:le(1), near, tensor.where(d:lt(2), far, 0.0))
end

-- The taps (1-based indices) and weights of one dim over its output
-- positions, and their source coordinates.
local function resize_taps(in_size, out_size, out_length, scale, attrs, mode, modes, roi_start,
                           roi_end)
  local i = tensor.arange(out_size):to("f64")
  local xo = source_coordinates(modes.coordinate, i, scale, in_size, out_length, roi_start, roi_end)
  local crop = modes.coordinate == "tf_crop_and_resize"
  local function clamp_index(t) return t:clamp(0, in_size - 1):long() + 1 end
  local taps, weights = {}, {}
  if mode == "nearest" then
    taps[1] = clamp_index(round_half(xo, modes.nearest))
  elseif mode == "linear" then
    local clamped = crop and xo or xo:clamp(0, in_size - 1)
    local j = clamped:floor()
    local t = clamped - j
    taps[1], taps[2] = clamp_index(j), clamp_index(j + 1)
    weights[1], weights[2] = 1 - t, t
  else
    local j = xo:floor()
    local t = xo - j
    local a = attrs.cubic_coeff_a or -0.75
    local sum
    for k = 1, 4 do
      local p = j + (k - 2)                                   -- taps j-1 .. j+2
      local w = cubic_weight((t - (k - 2)):abs(), a)
      if modes.exclude_outside then w = tensor.where(p:lt(0):logical_or(p:ge(in_size)), 0.0, w) end
      taps[k], weights[k] = clamp_index(p), w
      sum = sum and sum + w or w
    end
    if modes.exclude_outside then
      for k = 1, 4 do weights[k] = weights[k] / sum end
    end
  end
  return taps, weights, xo
end

-- Realized taps and weights by their parameters: computed once (a small
-- graph of its own), then data. Traced into the model's graph they were
-- recomputed for every output element of the fused gather (f64 divisions
-- and floors per element: DeepLabV3's final Resize took 31 ms a call).
local tap_cache, tap_cache_size = {}, 0

local function cached_taps(in_size, out_size, out_length, scale, attrs, mode, modes, roi_start,
                           roi_end)
  local key = string.format("%s %s %s %s %d %d %.17g %.17g %.17g %.17g %.17g", mode, modes.coordinate,
    modes.nearest, tostring(modes.exclude_outside), in_size, out_size, out_length, scale, roi_start,
    roi_end, attrs.cubic_coeff_a or -0.75)
  local entry = tap_cache[key]
  if entry == nil then
    local taps, weights, xo = tensor.no_grad(function()
      return resize_taps(in_size, out_size, out_length, scale, attrs, mode, modes, roi_start, roi_end)
    end)
    local function data(t, dtype)
      if t == nil or t:numel() == 0 then return t end
      return tensor.new(t:tolist(), {dtype = dtype})
    end
    entry = {taps = {}, weights = {}, xo = data(xo, "f64")}
    for k = 1, #taps do
      entry.taps[k], entry.weights[k] = data(taps[k], "i64"), data(weights[k], "f64")
    end
    if tap_cache_size >= 256 then tap_cache, tap_cache_size = {}, 0 end
    tap_cache[key], tap_cache_size = entry, tap_cache_size + 1
  end
  return entry.taps, entry.weights, entry.xo
end

-- One dim of a resize: out[i] = sum_k weight[k][i] * x[tap[k][i]] (taps may
-- fall outside: then the weights are renormalized or the extrapolation value
-- used). The taps and weights are tensors over the output positions (kept
-- by cached_taps), so the cost is a few tensor ops whatever out_size is.
local function resize_dim(x, d, out_size, out_length, scale, attrs, mode, modes, roi_start, roi_end)
  local taps, weights, xo = cached_taps(x:size(d), out_size, out_length, scale, attrs, mode, modes,
    roi_start, roi_end)
  local crop = modes.coordinate == "tf_crop_and_resize"
  local in_size = x:size(d)
  local shape = filled(x:dim(), 1)
  shape[d] = out_size
  local y
  for k = 1, #taps do
    local term = x:index_select(d, taps[k])
    if weights[k] then term = term * weights[k]:to(x:dtype()):reshape(table.unpack(shape)) end
    y = y and y + term or term
  end
  if crop then
    local outside = xo:lt(0):logical_or(xo:gt(in_size - 1))
    y = tensor.where(outside:reshape(table.unpack(shape)), attrs.extrapolation_value or 0, y)
  end
  return y
end

-- A scale, size, roi or coefficient as a finite Lua number, or an error
-- naming it.
local function finite(ctx, what, v)
  if type(v) ~= "number" or v ~= v or v == math.huge or v == -math.huge then
    ctx:error("%s is %s (expected a finite number)", what, v ~= v and "NaN" or tostring(v))
  end
  return v
end

-- The output extent of each dim, checked before any work: sizes are
-- integers >= 0, scales finite and > 0, and the output has at most 2^40
-- elements (a hostile scale must fail here, not allocate).
local function output_extents(ctx, x, scales, sizes)
  local r = x:dim()
  local given = sizes or scales
  if #given ~= r then
    ctx:error("%s has %d values for an input of rank %d", sizes and "sizes" or "scales", #given, r)
  end
  local extents, lengths, factors, total = {}, {}, {}, 1
  for d = 1, r do
    local in_size = x:size(d)
    local out_size, scale, out_length
    if sizes then
      out_size = sizes[d]
      if math.type(out_size) ~= "integer" or out_size < 0 then
        ctx:error("sizes[%d] is %s (expected an integer >= 0)", d - 1, tostring(out_size))
      end
      if in_size == 0 and out_size > 0 then
        ctx:error("cannot resize axis %d of size 0 to %d", d - 1, out_size)
      end
      scale = in_size == 0 and 1 or out_size / in_size
      out_length = out_size
    else
      scale = finite(ctx, string.format("scales[%d]", d - 1), scales[d])
      if scale <= 0 then ctx:error("scales[%d] is %s (expected a scale > 0)", d - 1, tostring(scale)) end
      out_length = in_size * scale
      if out_length + 1e-9 >= max_elements then
        ctx:error("output extent %.17g (scale %.17g x %d) of axis %d is too large (the limit is 2^40)",
          out_length, scale, in_size, d - 1)
      end
      out_size = math.tointeger(math.floor(out_length + 1e-9))
    end
    if out_size > 0 and total > max_elements // out_size then
      ctx:error("output has more than 2^40 elements (extent %d of axis %d)", out_size, d - 1)
    end
    total = total * out_size
    extents[d], lengths[d], factors[d] = out_size, out_length, scale
  end
  return extents, lengths, factors
end

local function resize(ctx, x, scales, sizes, attrs, mode, roi)
  local r = x:dim()
  if mode == "bilinear" then mode = "linear" end
  if mode ~= "nearest" and mode ~= "linear" and mode ~= "cubic" then ctx:error("unknown mode '%s'", mode) end
  if mode == "cubic" and not is_float(x) then ctx:error("cubic needs a float input") end
  local modes = {coordinate = attrs.coordinate_transformation_mode or "half_pixel",
    nearest = attrs.nearest_mode or "round_prefer_floor", exclude_outside = (attrs.exclude_outside or 0) == 1}
  if not coordinate_modes[modes.coordinate] then
    ctx:error("unknown coordinate_transformation_mode '%s'", tostring(modes.coordinate))
  end
  if not nearest_modes[modes.nearest] then ctx:error("unknown nearest_mode '%s'", tostring(modes.nearest)) end
  if ctx.op_type_is_upsample then modes.coordinate = "asymmetric" end
  if ctx.opset < 11 then modes.coordinate, modes.nearest = "asymmetric", "floor" end
  if mode == "cubic" then finite(ctx, "cubic_coeff_a", attrs.cubic_coeff_a or -0.75) end
  finite(ctx, "extrapolation_value", attrs.extrapolation_value or 0)
  local crop = modes.coordinate == "tf_crop_and_resize"
  if crop then
    if roi == nil or #roi ~= 2 * r then
      ctx:error("tf_crop_and_resize needs a roi of %d values, got %d", 2 * r, roi and #roi or 0)
    end
    for k, v in ipairs(roi) do finite(ctx, string.format("roi[%d]", k - 1), v) end
  end
  local extents, lengths, factors = output_extents(ctx, x, scales, sizes)
  local y = x
  for d = 1, r do
    local in_size = x:size(d)
    local identity = extents[d] == in_size and factors[d] == 1 and not crop
    if not identity then
      if mode ~= "nearest" and not is_float(y) then y = y:float() end
      local roi_start, roi_end = 0, 1
      if crop then roi_start, roi_end = roi[d], roi[r + d] end
      y = resize_dim(y, d, extents[d], lengths[d], factors[d], attrs, mode, modes, roi_start, roi_end)
    end
  end
  return y
end

function ops.Resize(ctx, inputs, attrs)
  local x = inputs[1]
  local mode = attrs.mode or "nearest"
  local scales, sizes, roi
  if ctx.opset < 11 then
    scales = ctx:host(inputs[2])
  else
    roi = inputs[2] and inputs[2]:numel() > 0 and ctx:host(inputs[2]) or nil
    scales = inputs[3] and inputs[3]:numel() > 0 and ctx:host(inputs[3]) or nil
    sizes = inputs[4] and inputs[4]:numel() > 0 and int_list(ctx, inputs[4], "sizes") or nil
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
