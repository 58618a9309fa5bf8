-- onnx_ops_shape.lua - ONNX ops of the default domain that move and select
-- values: Reshape, Transpose, Slice, Gather, Scatter, Pad, Shape, Range,
-- OneHot, Unique ... (Resize and NonMaxSuppression are in
-- onnx_ops_vision.lua). Built from lazylua's tensor API (lazy, with
-- gradients); shape-like inputs are read through ctx:host.
local tensor = require "tensor"

local H = require "lazylua.onnx_nn_common"
local dim_of, product, filled, is_float, strided = H.dim_of, H.product, H.filled, H.is_float, H.strided
local one_based, int_list, reshape_to = H.one_based, H.int_list, H.reshape_to

local ops = {}

-- An index input's values must be integers (ONNX types them int64, or
-- int32/int64).
local function integer_index(ctx, t, what)
  if t == nil then ctx:error("input '%s' is required", what) end
  local dtype = t:dtype()
  if dtype ~= "i64" and dtype ~= "i32" then ctx:error("%s must be an integer tensor, got %s", what, dtype) end
  return t
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
  if ctx.opset < 5 then shape = attrs.shape else shape = int_list(ctx, inputs[2], "shape") end
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
    if inputs[index] then return int_list(ctx, inputs[index], "axes") end
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
    sizes = inputs[2] and int_list(ctx, inputs[2], "split")
  else
    sizes = attrs.split
    if sizes == nil and ctx.opset < 2 and inputs[2] then sizes = int_list(ctx, inputs[2], "split") end
  end
  local count = #ctx.node.outputs
  if sizes == nil or #sizes == 0 then
    local parts = attrs.num_outputs or count
    if math.type(parts) ~= "integer" or parts < 1 then
      ctx:error("cannot split into %s parts (the node needs outputs or num_outputs >= 1)", tostring(parts))
    end
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
    if s < 0 then ctx:error("split size %d is negative", s) end
    if s > n - start + 1 then ctx:error("split sizes add up to more than the axis's %d", n) end
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
    starts, ends = int_list(ctx, inputs[2], "starts"), int_list(ctx, inputs[3], "ends")
    axes = inputs[4] and int_list(ctx, inputs[4], "axes")
    steps = inputs[5] and int_list(ctx, inputs[5], "steps")
  end
  if starts == nil or ends == nil then ctx:error("starts and ends are required") end
  for name, list in pairs({ends = ends, axes = axes or starts, steps = steps or starts}) do
    if #list ~= #starts then ctx:error("starts has %d values, %s %d", #starts, name, #list) end
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
  local x, index = inputs[1], integer_index(ctx, inputs[2], "indices")
  local d = dim_of(ctx, attrs.axis or 0, x:dim())
  return gather_dim(x, d, one_based(index, x:size(d)))
end

function ops.GatherElements(ctx, inputs, attrs)
  local x, index = inputs[1], integer_index(ctx, inputs[2], "indices")
  local d = dim_of(ctx, attrs.axis or 0, x:dim())
  return x:gather(d, one_based(index, x:size(d)))
end

-- Index column `part` (0-based, i64) wrapped into [0, size) and checked:
-- an index outside [-size, size - 1] is an error. Known on the host, the
-- values are checked here; else the check is in the graph (a lookup in
-- arange(size), which fails at the sync as index_select does).
local function checked_column(ctx, part, size, j, on_host)
  local wrapped = tensor.where(part:lt(0), part + size, part)
  if on_host then
    for _, v in ipairs(ctx:host(part)) do
      if v < -size or v >= size then
        ctx:error("index %d in column %d of the indices is out of range for an axis of size %d", v, j - 1, size)
      end
    end
    return wrapped
  end
  local flat = wrapped:reshape(-1) + 1
  return tensor.arange(size):index_select(1, flat):reshape(wrapped:size())
end

-- Flat 0-based positions of the index tuples (last dim of `index`) into
-- `sizes` (one per tuple element), negative ones wrapped, each checked
-- against its own extent: an i64 tensor of index's shape without its last
-- dim.
local function linear_index(ctx, index, sizes, on_host)
  local k = #sizes
  local lin
  local stride = 1
  for j = k, 1, -1 do
    local part = checked_column(ctx, index:select(index:dim(), j):long(), sizes[j], j, on_host)
    local term = part * stride
    lin = lin and lin + term or term
    stride = stride * sizes[j]
  end
  return lin
end

-- The tuple length k of GatherND/ScatterND's indices (their last extent),
-- checked against the data's rank after the batch dims.
local function tuple_length(ctx, data, index, batch_dims)
  if index:dim() < 1 then ctx:error("indices must have at least 1 dim") end
  local k = index:size(index:dim())
  if k < 1 or k > data:dim() - batch_dims then
    ctx:error("index tuples have %d values; data of rank %d with %d batch dims takes 1 to %d", k,
      data:dim(), batch_dims, data:dim() - batch_dims)
  end
  return k
end

function ops.GatherND(ctx, inputs, attrs)
  local x, index = inputs[1], integer_index(ctx, inputs[2], "indices")
  local b = attrs.batch_dims or 0
  if math.type(b) ~= "integer" or b < 0 or b >= math.min(x:dim(), index:dim()) then
    ctx:error("batch_dims %s must be in [0, %d) for data of rank %d and indices of rank %d", tostring(b),
      math.min(x:dim(), index:dim()), x:dim(), index:dim())
  end
  local size, isize = x:size(), index:size()
  for i = 1, b do
    if size[i] ~= isize[i] then
      ctx:error("batch dim %d has extent %d in the data and %d in the indices", i - 1, size[i], isize[i])
    end
  end
  local k = tuple_length(ctx, x, index, b)
  local batch = product(size, 1, b)
  local tuple_sizes = {}
  for j = 1, k do tuple_sizes[j] = size[b + j] end
  local inner = product(tuple_sizes)
  local rest = {}
  for i = b + k + 1, #size do rest[#rest + 1] = size[i] end
  local data = x:reshape(batch * inner, product(rest))
  local lin = linear_index(ctx, index, tuple_sizes, ctx.on_host ~= nil and ctx:on_host(2))   -- [b..., q...]
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
  local data, index, updates = inputs[1], integer_index(ctx, inputs[2], "indices"), inputs[3]
  local d = dim_of(ctx, attrs.axis or 0, data:dim())
  return scatter_elements(ctx, data, d, one_based(index, data:size(d)), updates, attrs.reduction or "none")
end

ops.Scatter = ops.ScatterElements

function ops.ScatterND(ctx, inputs, attrs)
  local data, index, updates = inputs[1], integer_index(ctx, inputs[2], "indices"), inputs[3]
  local size, isize = data:size(), index:size()
  local k = tuple_length(ctx, data, index, 0)
  local tuple_sizes = {}
  for j = 1, k do tuple_sizes[j] = size[j] end
  local rest = {}
  for i = k + 1, #size do rest[#rest + 1] = size[i] end
  -- updates: the indices' shape without the tuple, then the data's after it.
  local want = {}
  for i = 1, #isize - 1 do want[#want + 1] = isize[i] end
  for _, s in ipairs(rest) do want[#want + 1] = s end
  local got = updates:size()
  local same = #got == #want
  for i = 1, #want do same = same and got[i] == want[i] end
  if not same then
    ctx:error("updates have shape [%s], expected [%s]", table.concat(got, ", "), table.concat(want, ", "))
  end
  local width = product(rest)
  local flat = data:reshape(product(tuple_sizes), width)
  local lin = linear_index(ctx, index, tuple_sizes, ctx.on_host ~= nil and ctx:on_host(2))
  local m = lin:numel()
  local idx = (lin:reshape(m, 1) + 1):expand(m, width)
  local upd = updates:reshape(m, width)
  local y = scatter_elements(ctx, flat, 1, idx, upd, attrs.reduction or "none")
  return reshape_to(y, size)
end

-- The shape x of `size` broadcasts with `shape` to (NumPy rules, as
-- Expand's spec): an extent of 1 takes the other; unequal extents neither
-- of which is 1 are an error, as a negative extent is.
local function expanded_shape(ctx, size, shape)
  local out = {}
  local n = math.max(#size, #shape)
  for i = 1, n do
    local x = size[#size - n + i] or 1
    local y = shape[#shape - n + i] or 1
    if y < 0 then ctx:error("shape [%s] has a negative extent", table.concat(shape, ", ")) end
    if x ~= y and x ~= 1 and y ~= 1 then
      ctx:error("cannot expand [%s] to [%s] (extents %d and %d)", table.concat(size, ", "),
        table.concat(shape, ", "), x, y)
    end
    out[i] = x == 1 and y or x
  end
  return out
end

function ops.Expand(ctx, inputs)
  local x = inputs[1]
  local shape = expanded_shape(ctx, x:size(), int_list(ctx, inputs[2], "shape"))
  local lifted = {}
  for i = 1, #shape - x:dim() do lifted[i] = 1 end
  for _, s in ipairs(x:size()) do lifted[#lifted + 1] = s end
  local y = reshape_to(x, lifted)
  if #shape == 0 then return y end
  return y:expand(table.unpack(shape)):contiguous()
end

function ops.Tile(ctx, inputs)
  local x = inputs[1]
  local reps = int_list(ctx, inputs[2], "repeats")
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
    pads = int_list(ctx, inputs[2], "pads")
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
  local shape = inputs[1] and int_list(ctx, inputs[1], "shape") or {}
  local v, dtype = 0.0, "f32"
  for i, extent in ipairs(shape) do
    if extent < 0 then ctx:error("shape[%d] is %d (expected an extent >= 0)", i - 1, extent) end
  end
  if attrs.value then
    if attrs.value:numel() ~= 1 then ctx:error("value must hold one element, got %d", attrs.value:numel()) end
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

-- The count is exact for any i64 bounds (tensor.arange counts in 128
-- bits); a float range needs finite bounds.
function ops.Range(ctx, inputs)
  local bounds = {}
  for k, what in ipairs({"start", "limit", "delta"}) do
    local t = inputs[k]
    if t == nil then ctx:error("input '%s' is required", what) end
    if t:numel() ~= 1 then ctx:error("%s must hold one value, got %d", what, t:numel()) end
    bounds[k] = ctx:host(t)[1]
    if bounds[k] ~= bounds[k] or bounds[k] == math.huge or bounds[k] == -math.huge then
      ctx:error("%s is %s (expected a finite number)", what, bounds[k] ~= bounds[k] and "NaN" or tostring(bounds[k]))
    end
  end
  local start, limit, delta = bounds[1], bounds[2], bounds[3]
  if delta == 0 then ctx:error("delta is 0") end
  return tensor.arange(start, limit, delta, {dtype = inputs[1]:dtype()})
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
  local k = inputs[2] and int_list(ctx, inputs[2], "k")[1] or 0
  if (attrs.upper or 1) == 1 then return x:triu(k) end
  return x:tril(k)
end

-- The blocksize of DepthToSpace/SpaceToDepth: an integer >= 1, for a
-- rank-4 input.
local function block_size(ctx, x, attrs)
  if x:dim() ~= 4 then ctx:error("expected an input [N, C, H, W], got rank %d", x:dim()) end
  local b = attrs.blocksize
  if math.type(b) ~= "integer" or b < 1 then ctx:error("blocksize is %s (expected an integer >= 1)", tostring(b)) end
  return b
end

function ops.DepthToSpace(ctx, inputs, attrs)
  local x = inputs[1]
  local b = block_size(ctx, x, attrs)
  local n, c, h, w = table.unpack(x:size())
  if c > 0 and (b > c // b or c % (b * b) ~= 0) then
    ctx:error("blocksize %d squared does not divide the %d channels", b, c)
  end
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
  local b = block_size(ctx, x, attrs)
  local n, c, h, w = table.unpack(x:size())
  if h % b ~= 0 or w % b ~= 0 then ctx:error("blocksize %d does not divide the height %d and width %d", b, h, w) end
  return x:reshape(n, c, h // b, b, w // b, b):permute(1, 4, 6, 2, 3, 5):reshape(n, c * b * b, h // b, w // b)
end

function ops.EyeLike(ctx, inputs, attrs)
  local x = inputs[1]
  if x:dim() ~= 2 then ctx:error("expected a 2-d input, got rank %d", x:dim()) end
  local rows, cols = x:size(1), x:size(2)
  local k = attrs.k or 0
  if attrs.dtype ~= nil and onnx_dtypes[attrs.dtype] == nil then
    ctx:error("dtype %s is not a type EyeLike can give", tostring(attrs.dtype))
  end
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

-- Unique reads its input (the output's shape depends on the values); the
-- unique values are then an index_select of x, so they keep a gradient.
function ops.Unique(ctx, inputs, attrs)
  local x = inputs[1]
  local source, d = x, 1
  if attrs.axis then
    d = dim_of(ctx, attrs.axis, x:dim())
  else
    source = x:reshape(x:numel())
  end
  local n = source:size(d)
  -- Each slice along d as a list of values, in row-major order.
  local moved = source:transpose(1, d):contiguous()
  local flat = ctx:host(moved)
  local width = n > 0 and #flat // n or 0
  local function slice(i)
    local list = {}
    for k = 1, width do list[k] = flat[(i - 1) * width + k] end
    return list
  end
  local function less(a, b)
    for k = 1, width do
      if a[k] ~= b[k] then return a[k] < b[k] end
    end
    return false
  end
  local function key(list)
    local parts = {}
    for k, v in ipairs(list) do parts[k] = string.format("%.17g", v) end
    return table.concat(parts, ",")
  end
  local first, order, counts, slot_of = {}, {}, {}, {}
  local inverse_key = {}
  for i = 1, n do
    local k = key(slice(i))
    inverse_key[i] = k
    if slot_of[k] == nil then
      order[#order + 1] = k
      slot_of[k] = #order
      first[k] = i
      counts[k] = 0
    end
    counts[k] = counts[k] + 1
  end
  if (attrs.sorted or 1) == 1 then
    table.sort(order, function(a, b) return less(slice(first[a]), slice(first[b])) end)
  end
  local position, picked, first_list, count_list = {}, {}, {}, {}
  for j, k in ipairs(order) do
    position[k] = j - 1
    picked[j] = first[k]
    first_list[j] = first[k] - 1
    count_list[j] = counts[k]
  end
  local inverse = {}
  for i = 1, n do inverse[i] = position[inverse_key[i]] end
  local function ints(list)
    if #list == 0 then return tensor.zeros({0}, {dtype = "i64"}) end
    return tensor.new(list)
  end
  local y = #picked == 0 and source:narrow(d, 1, 0) or source:index_select(d, tensor.new(picked))
  return y, ints(first_list), ints(inverse), ints(count_list)
end

return ops
