-- test_onnx_hostile_ops.lua - malformed and hostile ONNX nodes: each is
-- refused by an error that names the node (and the interpreter stays
-- usable), or computes the spec's values, checked against values worked
-- out by hand or by a plain Lua reference (NonMaxSuppression). Each model
-- is one node built from a table (onnx.from_table), no file needed.
local h = dofile("helpers.lua")
local onnx = require "onnx"

-- A one-node model: node 'n1' of `op` reading `inputs` (names), writing
-- `outputs` (default {"y"}); `initializers` maps names to tensors, the
-- other inputs are the model's (given by `input_names`, default {"x"}).
local function model(op, inputs, attributes, initializers, input_names, opset, outputs)
  local inits = {}
  for name, t in pairs(initializers or {}) do inits[#inits + 1] = {name = name, tensor = t} end
  local ins = {}
  for _, n in ipairs(input_names or {"x"}) do ins[#ins + 1] = {name = n, elem_type = "f32"} end
  local outs = {}
  for _, n in ipairs(outputs or {"y"}) do outs[#outs + 1] = {name = n, elem_type = "f32"} end
  return onnx.from_table({ir_version = 8, opset = {[""] = opset or 13}, graph = {name = "g",
    nodes = {{name = "n1", op_type = op, domain = "", inputs = inputs, outputs = outputs or {"y"},
      attributes = attributes or {}}},
    initializers = inits, inputs = ins, outputs = outs}})
end

-- The model's call must fail with a message naming node n1 (and the op),
-- with each of the needles; the interpreter must work afterwards.
local function refused(op, call, ...)
  local needles = table.pack("node 'n1' (" .. op, ...)
  h.test("refused by " .. op, function()
    h.err(call, table.unpack(needles, 1, needles.n))
    h.still_works()
  end, 3)
end

local x4 = tensor.ones(1, 1, 2, 2)

------------------------------------------------------------------------
-- M1, S4: Resize / Upsample scales and sizes
------------------------------------------------------------------------
local function resize_scales(scales, attrs, opset)
  return model("Resize", {"x", "", "s"}, attrs, {s = tensor.new(scales):float()}, nil, opset)
end
local function resize_sizes(sizes, attrs)
  return model("Resize", {"x", "", "", "s"}, attrs, {s = tensor.new(sizes)})
end

refused("Resize", function() return resize_scales({1, 1, 1 / 0, 1})(x4) end, "scales[2] is inf")
refused("Resize", function() return resize_scales({1, 1, 0 / 0, 1})(x4) end, "scales[2] is NaN")
refused("Resize", function() return resize_scales({1, 1, 0, 1})(x4) end, "scales[2] is 0.0", "> 0")
refused("Resize", function() return resize_scales({1, 1, -2, 1})(x4) end, "scales[2] is -2.0", "> 0")
-- 2e12 rows: past the 2^40 element limit, refused before any work
refused("Resize", function() return resize_scales({1, 1, 1e12, 1})(x4) end, "too large", "2^40")
refused("Resize", function() return resize_sizes({1, 2, 1 << 40, 1 << 40})(x4) end, "more than 2^40 elements")
refused("Resize", function() return resize_sizes({1, 1, -2, 2})(x4) end, "sizes[2] is -2")
refused("Resize", function() return resize_scales({2})(x4) end, "scales has 1 values for an input of rank 4")
refused("Resize", function() return resize_scales({1, 1, 2, 2}, {nearest_mode = "evil"})(x4) end,
  "unknown nearest_mode 'evil'")
refused("Resize", function() return resize_scales({1, 1, 2, 2}, {coordinate_transformation_mode = "evil"})(x4) end,
  "unknown coordinate_transformation_mode 'evil'")
refused("Resize", function() return resize_scales({1, 1, 2, 2}, {mode = "evil"})(x4) end, "unknown mode 'evil'")
refused("Resize", function() return resize_scales({1, 1, 2, 2}, {mode = "cubic", cubic_coeff_a = 1 / 0})(x4) end,
  "cubic_coeff_a is inf")
refused("Resize", function()
  return resize_scales({1, 1, 1 / 0, 1}, {mode = "cubic", cubic_coeff_a = 1e300})(x4)
end, "scales[2] is inf")
refused("Upsample", function()
  return model("Upsample", {"x", "s"}, {}, {s = tensor.new({1, 1, 1e12, 1}):float()}, nil, 9)(x4)
end, "too large")

h.test("Resize computes the spec's values (nearest modes, linear, cubic, tf_crop_and_resize)", function()
  local row = tensor.new({0.0, 1, 2, 3}):reshape(1, 1, 1, 4)
  -- asymmetric, scale 2: source coordinates 0, .5, 1, ... 3.5
  local function nearest(mode)
    return resize_scales({1, 1, 1, 2}, {coordinate_transformation_mode = "asymmetric", nearest_mode = mode})(row)
  end
  local floor, ceil = nearest("round_prefer_floor"), nearest("round_prefer_ceil")
  local down, up = nearest("floor"), nearest("ceil")
  -- linear, half_pixel: coordinates -0.25, 0.25, 0.75, 1.25 clamped to [0, 1]
  local square = tensor.new({{0.0, 1}, {2, 3}}):reshape(1, 1, 2, 2)
  local linear = resize_scales({1, 1, 2, 2}, {mode = "linear"})(square)
  local cubic = resize_scales({1, 1, 1, 2}, {mode = "cubic", coordinate_transformation_mode = "asymmetric"})(row)
  local roi = tensor.new({0, 0, 0, 0.5, 1, 1, 1, 1.5}):float()
  local crop = model("Resize", {"x", "r", "", "s"}, {mode = "linear", coordinate_transformation_mode =
    "tf_crop_and_resize", extrapolation_value = -1.0}, {r = roi, s = tensor.new({1, 1, 1, 3})})(row)
  tensor.mark_step()                                   -- one graph for all (a native run compiles once)
  h.check(floor, "f32", {{{{0, 0, 1, 1, 2, 2, 3, 3}}}})
  h.check(ceil, "f32", {{{{0, 1, 1, 2, 2, 3, 3, 3}}}})
  h.check(down, "f32", {{{{0, 0, 1, 1, 2, 2, 3, 3}}}})
  h.check(up, "f32", {{{{0, 1, 1, 2, 2, 3, 3, 3}}}})
  h.near(linear, {{{{0, 0.25, 0.75, 1}, {0.5, 0.75, 1.25, 1.5}, {1.5, 1.75, 2.25, 2.5}, {2, 2.25, 2.75, 3}}}})
  -- cubic (a = -0.75), asymmetric: at t = .5 the weights are -0.09375,
  -- 0.59375, 0.59375, -0.09375 over the taps j-1 .. j+2 (clamped)
  h.near(cubic, {{{{0, 0.40625, 1, 1.5, 2, 2.59375, 3, 3.09375}}}})
  -- tf_crop_and_resize on the last axis, roi [0.5, 1.5]: coordinates 1.5,
  -- 3, 4.5; the last is outside and takes the extrapolation value
  h.near(crop, {{{{1.5, 3, -1}}}})
  -- a tiny positive scale is valid: an empty axis
  h.shape(resize_scales({1, 1, 1e-30, 1})(x4), {1, 1, 0, 2})
end)

------------------------------------------------------------------------
-- M6: GatherND / ScatterND index checks
------------------------------------------------------------------------
local cube = tensor.arange(50):float():reshape(1, 2, 5, 5)
local function gather_nd(index, attrs) return model("GatherND", {"x", "i"}, attrs, {i = tensor.new(index)}) end

refused("GatherND", function() return gather_nd({{0, 0, 1, 7}})(cube) end,
  "index 7 in column 3 of the indices is out of range for an axis of size 5")
refused("GatherND", function() return gather_nd({{0, 0, 1, -7}})(cube) end, "index -7", "size 5")
refused("GatherND", function() return gather_nd({{0, 2, 0, 0}})(cube) end, "index 2 in column 1", "size 2")
refused("GatherND", function() return gather_nd({{0, 0, 0, 0, 0, 0}})(cube) end, "index tuples have 6 values")
refused("GatherND", function() return gather_nd({{0}}, {batch_dims = 5})(cube) end, "batch_dims 5")
refused("GatherND", function()
  return model("GatherND", {"x", "i"}, {}, {i = tensor.new({{0.0, 0, 1, 1}})})(cube)
end, "indices must be an integer tensor")
refused("ScatterND", function()
  return model("ScatterND", {"x", "i", "u"}, {}, {i = tensor.new({{0, 0, 1, 7}}), u = tensor.new({-100.0})})(cube)
end, "index 7 in column 3")
refused("ScatterND", function()
  return model("ScatterND", {"x", "i", "u"}, {}, {i = tensor.new({{0, 0, 1, 1}}), u = tensor.new({1.0, 2})})(cube)
end, "updates have shape [2], expected [1]")

h.test("GatherND / ScatterND: in-range and negative indices read and write the right element", function()
  -- cube[0, 0, r, c] = 5r + c
  h.check(gather_nd({{0, 0, 2, 2}})(cube), "f32", {12})
  h.check(gather_nd({{0, 0, 1, -5}, {0, -1, -1, -1}})(cube), "f32", {5, 49})
  local y = model("ScatterND", {"x", "i", "u"}, {}, {i = tensor.new({{0, 1, -5, 4}}), u = tensor.new({-100.0})})(cube)
  local flat = y:reshape(-1):tolist()
  h.eq(flat[25 + 4 + 1], -100)                                          -- [0, 1, 0, 4]
  h.eq(flat[13], 12)                                                    -- untouched
end)

-- Indices computed in the graph are checked in it: the error comes at the
-- sync (lazily) or in the op (eagerly), and says which extent was passed.
h.test("GatherND: an out-of-range index computed in the graph fails, not reads another element", function()
  local m = model("GatherND", {"x", "i"}, {}, {}, {"x", "i"})
  h.err(function() return m(cube, tensor.new({{0, 0, 1, 7}})):tolist() end, "out of range for dimension 1 of size 5")
  h.err(function() return m(cube, tensor.new({{0, 0, -6, 0}})):tolist() end, "out of range for dimension 1 of size 5")
  h.check(m(cube, tensor.new({{0, 0, 1, -1}})), "f32", {9})
  h.still_works()
end)

------------------------------------------------------------------------
-- M7: Expand
------------------------------------------------------------------------
local function expand(shape) return model("Expand", {"x", "s"}, {}, {s = tensor.new(shape)}) end
refused("Expand", function() return expand({7, 7})(tensor.ones(2, 3)) end, "cannot expand [2, 3] to [7, 7]")
refused("Expand", function() return expand({3, 3, 5, 5})(tensor.ones(1, 2, 5, 5)) end, "cannot expand")
refused("Expand", function() return expand({-1, 2, 5, 5})(tensor.ones(1, 2, 5, 5)) end, "negative extent")

h.test("Expand broadcasts both ways, as NumPy", function()
  h.check(expand({2, 1, 2})(tensor.new({{1.0}, {2}, {3}})), "f32",
    {{{1, 1}, {2, 2}, {3, 3}}, {{1, 1}, {2, 2}, {3, 3}}})
  h.check(expand({1})(tensor.new({{1.0, 2}})), "f32", {{1, 2}})
end)

------------------------------------------------------------------------
-- M8: Range
------------------------------------------------------------------------
local function range(start, limit, delta)
  return model("Range", {"s", "l", "d"}, {}, {s = start, l = limit, d = delta}, {}, 11)()
end

h.test("Range: exact counts for large and wrapping i64 bounds", function()
  local r = range(tensor.new(0), tensor.new(3 * (1 << 55) + 1), tensor.new(1 << 55))
  h.check(r, "i64", {0, 1 << 55, 1 << 56, 3 * (1 << 55)})
  -- maxint - minint wraps in i64; the count is (2^64 - 1) / 2^62 rounded up
  h.shape(range(tensor.new(math.mininteger), tensor.new(math.maxinteger), tensor.new(1 << 62)), {4})
  -- (-(2^64 - 1)) / -2^63 rounded up: 2
  h.shape(range(tensor.new(math.maxinteger), tensor.new(math.mininteger), tensor.new(math.mininteger)), {2})
  h.check(range(tensor.new(5), tensor.new(-3), tensor.new(-3)), "i64", {5, 2, -1})
  h.near(range(tensor.new(1.0), tensor.new(2.0), tensor.new(0.25)), {1, 1.25, 1.5, 1.75}, h.EXACT, "f32")
end)
refused("Range", function() return range(tensor.new(0.0), tensor.new(0 / 0), tensor.new(1.0)) end, "limit is NaN")
refused("Range", function() return range(tensor.new(0.0), tensor.new(1 / 0), tensor.new(1.0)) end, "limit is inf")
refused("Range", function() return range(tensor.new(0), tensor.new(5), tensor.new(0)) end, "delta is 0")

------------------------------------------------------------------------
-- S2, S4: malformed attributes of conv and pool
------------------------------------------------------------------------
local image = tensor.ones(1, 2, 4, 4)
local weight = tensor.ones(2, 2, 3, 3)
local function conv(attrs, w) return model("Conv", {"x", "w"}, attrs, {w = w or weight})(image) end
local function conv_t(attrs) return model("ConvTranspose", {"x", "w"}, attrs, {w = weight})(image) end
local function pool(op, attrs, x) return model(op, {"x"}, attrs)(x or image) end

refused("ConvTranspose", function() return conv_t({group = 0}) end, "group is 0")
refused("ConvTranspose", function() return conv_t({strides = {0, 0}}) end, "strides[0] is 0")
refused("ConvTranspose", function() return conv_t({dilations = {0, 0}}) end, "dilations[0] is 0")
refused("ConvTranspose", function() return conv_t({pads = {-100, -100, -100, -100}}) end, "pads[0] is -100")
refused("Conv", function() return conv({group = 0}) end, "group is 0")
refused("Conv", function() return conv({group = -1}) end, "group is -1")
refused("Conv", function() return conv({group = 3}) end, "group 3 does not divide")
refused("Conv", function() return conv({kernel_shape = {5, 5}}) end, "kernel_shape [5, 5] disagrees")
refused("Conv", function() return conv({strides = {1, 1, 1, 1, 1}}) end, "strides has 5 values for 2 spatial dims")
refused("Conv", function() return conv({dilations = {0, 0}}) end, "dilations[0] is 0")
refused("Conv", function() return conv({pads = {-1, 0, 0, 0}}) end, "pads[0] is -1")
for _, op in ipairs({"MaxPool", "AveragePool"}) do
  refused(op, function() return pool(op, {kernel_shape = {2, 2}, strides = {0, 0}}) end, "strides[0] is 0")
  refused(op, function() return pool(op, {kernel_shape = {0, 0}}) end, "kernel_shape[0] is 0")
  refused(op, function() return pool(op, {kernel_shape = {-1, -1}}) end, "kernel_shape[0] is -1")
  refused(op, function() return pool(op, {kernel_shape = {2, 2}, dilations = {0, 0}}) end, "dilations[0] is 0")
  refused(op, function() return pool(op, {kernel_shape = {2, 2}, pads = {2, 0, 0, 0}}) end,
    "must be smaller than the kernel")
end
refused("AveragePool", function() return pool("AveragePool", {kernel_shape = {-1, -1, -1}}, tensor.ones(1, 1, 2, 2, 2)) end,
  "kernel_shape[0] is -1")
refused("LRN", function() return pool("LRN", {size = 0}) end, "size is 0")

h.test("valid conv and pool attributes still compute (by hand)", function()
  -- all-ones 4x4, two channels, 3x3 kernel of ones: every output is 18
  local plain, grouped = conv({}), conv({kernel_shape = {3, 3}, group = 2}, tensor.ones(2, 1, 3, 3))
  local ramp = tensor.arange(16):float():reshape(1, 1, 4, 4)
  local max = pool("MaxPool", {kernel_shape = {2, 2}, strides = {2, 2}}, ramp)
  local average = pool("AveragePool", {kernel_shape = {2, 2}, strides = {2, 2}, pads = {1, 1, 1, 1}}, ramp)
  tensor.mark_step()
  h.check(plain, "f32", {{{{18, 18}, {18, 18}}, {{18, 18}, {18, 18}}}})
  h.check(grouped, "f32", {{{{9, 9}, {9, 9}}, {{9, 9}, {9, 9}}}})
  h.check(max, "f32", {{{{5, 7}, {13, 15}}}})
  h.check(average, "f32", {{{{0, 1.5, 3}, {6, 7.5, 9}, {12, 13.5, 15}}}})
end)

------------------------------------------------------------------------
-- S2, S4: other malformed nodes
------------------------------------------------------------------------
refused("Slice", function()
  return model("Slice", {"x", "s", "e"}, {}, {s = tensor.new({0, 0}), e = tensor.new({1})})(image)
end, "starts has 2 values, ends 1")
refused("Split", function() return model("Split", {"x"}, {}, {}, nil, 13, {})(image) end, "cannot split into 0 parts")
for _, b in ipairs({0, 1 << 32}) do
  refused("DepthToSpace", function() return model("DepthToSpace", {"x"}, {blocksize = b})(image) end)
end
refused("DepthToSpace", function() return model("DepthToSpace", {"x"}, {blocksize = 0})(image) end, "blocksize is 0")
refused("SpaceToDepth", function() return model("SpaceToDepth", {"x"}, {blocksize = 0})(image) end, "blocksize is 0")
refused("SpaceToDepth", function() return model("SpaceToDepth", {"x"}, {blocksize = 3})(image) end, "does not divide")
refused("EyeLike", function() return model("EyeLike", {"x"}, {dtype = 99})(tensor.ones(2, 2)) end, "dtype 99")
refused("Relu", function() return model("Relu", {"x", "x", "x", "x"})(tensor.ones(2)) end,
  "4 inputs given, the op takes at most 1")
refused("TopK", function()
  return model("TopK", {"x", "k"}, {}, {k = tensor.new({{1, 2}})}, nil, 11, {"y", "i"})(tensor.ones(3))
end, "k must hold one value")
refused("ConstantOfShape", function()
  return model("ConstantOfShape", {"x"}, {value = tensor.new({1.0, 2})})(tensor.new({2}))
end, "value must hold one element")
refused("ConstantOfShape", function() return model("ConstantOfShape", {"x"})(tensor.new({2.0})) end,
  "shape must be an integer tensor, got f32")
refused("Reshape", function()
  return model("Reshape", {"x", "s"}, {}, {s = tensor.new({4.0})})(tensor.ones(2, 2))
end, "shape must be an integer tensor, got f32")
refused("Gather", function()
  return model("Gather", {"x", "i"}, {}, {i = tensor.new({0.0})})(tensor.ones(2, 2))
end, "indices must be an integer tensor, got f32")

h.bad(function()
  local graph = {name = "g", initializers = {}, inputs = {{name = "x", elem_type = "f32"}},
    outputs = {{name = "y", elem_type = "f32"}}, nodes = {
      {name = "a", op_type = "Relu", domain = "", inputs = {"x"}, outputs = {"y"}, attributes = {}},
      {name = "b", op_type = "Neg", domain = "", inputs = {"x"}, outputs = {"y"}, attributes = {}}}}
  return onnx.from_table({ir_version = 8, opset = {[""] = 13}, graph = graph})(tensor.ones(2))
end, "node 'b' (Neg", "output 'y' is already the output of node 'a' (Relu")

------------------------------------------------------------------------
-- S2, S3: BitShift, integer Div, and tensor errors inside a node
------------------------------------------------------------------------
local function shift(direction, amounts, values)
  return model("BitShift", {"x", "s"}, {direction = direction}, {s = tensor.new(amounts)})(tensor.new(values))
end
h.test("BitShift by 64 or more leaves 0; by 63 keeps the low bit", function()
  local left, right = shift("LEFT", {64, 1, 63, 0}, {3, 3, 3, 3}), shift("RIGHT", {64, 1, 63, 2}, {3, 3, 3, 12})
  tensor.mark_step()
  h.check(left, "i64", {0, 6, math.mininteger, 3})
  h.check(right, "i64", {0, 1, 0, 3})
end)
refused("BitShift", function() return shift("RIGHT", {-1}, {3}) end, "shift -1 is negative")
refused("Div", function() return model("Div", {"x", "d"}, {}, {d = tensor.new({0})})(tensor.new({3})) end,
  "integer division by zero")
h.bad(function()
  return model("Div", {"x", "d"}, {}, {}, {"x", "d"})(tensor.new({3}), tensor.new({0})):tolist()
end, "divide by zero")

h.test("S3: an error of a tensor op inside a node names the node and keeps its message", function()
  local msg = h.err(function()
    return model("MatMul", {"x", "w"}, {}, {w = tensor.ones(3, 2)})(tensor.ones(2, 4)):tolist()
  end, "onnx: node 'n1' (MatMul, opset 13): ", "matmul")
  local _, count = msg:gsub("onnx: node", "")
  assert(count == 1, "the node is named once: " .. msg)
  -- a node run eagerly on the host (both inputs known there)
  h.err(function()
    return model("Add", {"a", "b"}, {}, {a = tensor.new({1, 2}), b = tensor.new({1, 2, 3})}, {})():tolist()
  end, "onnx: node 'n1' (Add, opset 13): ")
  h.still_works()
end)

------------------------------------------------------------------------
-- S7, S12: Det of 0 x 0; float-only ops refuse integers
------------------------------------------------------------------------
h.test("Det of 0 x 0 matrices is 1", function()
  local empty, batch = model("Det", {"x"})(tensor.zeros(0, 0)), model("Det", {"x"})(tensor.zeros(3, 0, 0, {dtype = "f64"}))
  local two = model("Det", {"x"})(tensor.new({{1.0, 2}, {3, 4}}))
  tensor.mark_step()
  h.check(empty, "f32", 1)
  h.check(batch, "f64", {1, 1, 1})
  h.near(two, -2, h.F32, "f32")
end)

for _, case in ipairs({
  {"Mean", {"x", "x"}}, {"Sum", {"x", "x"}}, {"Softmax", {"x"}}, {"LogSoftmax", {"x"}}, {"Exp", {"x"}},
  {"Sigmoid", {"x"}}, {"Floor", {"x"}}, {"Hardmax", {"x"}},
}) do
  local op, inputs = case[1], case[2]
  refused(op, function() return model(op, inputs)(tensor.new({1, 2})) end,
    "input 0 is i64", "takes float tensors")
end
refused("Erf", function() return model("Erf", {"x"})(tensor.new({1, 2})) end, "unsupported: Erf of i64")

h.test("integer inputs where the spec admits them keep their type", function()
  local relu = model("Relu", {"x"}, {}, {}, nil, 14)(tensor.new({-1, 2}))
  local max = model("Max", {"x", "z"}, {}, {z = tensor.new({0, 0})}, nil, 13)(tensor.new({-1, 2}))
  local mean = model("Mean", {"x", "x"})(tensor.new({1.0, 2}))
  tensor.mark_step()
  h.check(relu, "i64", {0, 2})
  h.check(max, "i64", {0, 2})
  h.check(mean, "f32", {1, 2})
end)

------------------------------------------------------------------------
-- S2, S5: NonMaxSuppression against a plain Lua reference
------------------------------------------------------------------------
local function nms_model(center, max_out, iou, score)
  local inits = {{name = "m", tensor = tensor.new({max_out})}, {name = "i", tensor = tensor.new({iou}):float()}}
  local ins = {"b", "s", "m", "i"}
  if score then
    inits[#inits + 1] = {name = "t", tensor = tensor.new({score}):float()}
    ins[5] = "t"
  end
  return onnx.from_table({ir_version = 8, opset = {[""] = 13}, graph = {name = "g",
    nodes = {{name = "n1", op_type = "NonMaxSuppression", domain = "", inputs = ins, outputs = {"y"},
      attributes = {center_point_box = center and 1 or 0}}},
    initializers = inits, inputs = {{name = "b", elem_type = "f32"}, {name = "s", elem_type = "f32"}},
    outputs = {{name = "y", elem_type = "i64"}}}})
end

-- The spec's greedy selection, pair by pair, in doubles.
local function reference_nms(boxes, scores, center, max_out, iou_threshold, score_threshold)
  local function corners(b)
    if center then return b[2] - b[4] / 2, b[1] - b[3] / 2, b[2] + b[4] / 2, b[1] + b[3] / 2 end
    return math.min(b[1], b[3]), math.min(b[2], b[4]), math.max(b[1], b[3]), math.max(b[2], b[4])
  end
  local function iou(p, q)
    local ay1, ax1, ay2, ax2 = corners(p)
    local by1, bx1, by2, bx2 = corners(q)
    local inter = math.max(0, math.min(ay2, by2) - math.max(ay1, by1)) * math.max(0, math.min(ax2, bx2) - math.max(ax1, bx1))
    local union = (ay2 - ay1) * (ax2 - ax1) + (by2 - by1) * (bx2 - bx1) - inter
    if union <= 0 then return 0 end
    return inter / union
  end
  local rows = {}
  for b = 1, #boxes do
    for c = 1, #scores[b] do
      local candidates = {}
      for i, s in ipairs(scores[b][c]) do
        if score_threshold == nil or s > score_threshold then candidates[#candidates + 1] = i end
      end
      table.sort(candidates, function(p, q)
        local sp, sq = scores[b][c][p], scores[b][c][q]
        if sp ~= sq then return sp > sq end
        return p < q
      end)
      local kept = {}
      for _, i in ipairs(candidates) do
        if #kept >= max_out then break end
        local keep = true
        for _, k in ipairs(kept) do
          if iou(boxes[b][i], boxes[b][k]) > iou_threshold then keep = false break end
        end
        if keep then
          kept[#kept + 1] = i
          rows[#rows + 1] = {b - 1, c - 1, i - 1}
        end
      end
    end
  end
  return rows
end

h.test("NonMaxSuppression equals the greedy reference (random boxes, ties, both box formats)", function()
  math.randomseed(7)
  local function f32(v) return (string.unpack("f", string.pack("f", v))) end
  -- 2 batches, 2 classes, 600 boxes: more than one block of candidates;
  -- scores in 40 levels, so many tie
  local boxes, scores = {}, {}
  for b = 1, 2 do
    boxes[b], scores[b] = {}, {}
    for i = 1, 600 do
      local y, x = math.random() * 40, math.random() * 40
      boxes[b][i] = {f32(y), f32(x), f32(y + math.random() * 8), f32(x + math.random() * 8)}
    end
    for c = 1, 2 do
      scores[b][c] = {}
      for i = 1, 600 do scores[b][c][i] = f32(math.random(0, 39) / 40) end
    end
  end
  local bt, st = tensor.new(boxes), tensor.new(scores)
  for _, case in ipairs({{false, 1000, 0.5}, {false, 1000, 0.3, 0.4}, {true, 1000, 0.5}, {false, 7, 0.2},
    {true, 1000, 0.0}, {false, 0, 0.5}, {false, 1000, 1.0, 0.99}}) do
    local center, max_out, iou, score = case[1], case[2], case[3], case[4]
    local want = reference_nms(boxes, scores, center, max_out, f32(iou), score and f32(score))
    local got = nms_model(center, max_out, iou, score)(bt, st)
    if #want == 0 then h.shape(got, {0, 3}) else h.check(got, "i64", want) end
  end
end)

local boxes1, scores1 = tensor.new({{{0.0, 0, 1, 1}, {0, 0, 2, 2}}}), tensor.new({{{0.9, 0.8}}})
refused("NonMaxSuppression", function() return nms_model(false, 5, 0.5)(boxes1, tensor.new({{{0.9, 0.8, 0.7}}})) end,
  "scores must be [1, classes, 2]")
refused("NonMaxSuppression", function() return nms_model(false, 5, 1.5)(boxes1, scores1) end,
  "iou_threshold 1.5 is outside [0, 1]")
refused("NonMaxSuppression", function() return nms_model(false, -1, 0.5)(boxes1, scores1) end,
  "max_output_boxes_per_class is -1")

h.done("test_onnx_hostile_ops")
