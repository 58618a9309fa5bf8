-- test_onnx_ops_nn.lua - the ONNX nn and shape ops (stdlib/onnx_ops_nn.lua),
-- called directly with hand-built tensors and attribute tables. Expected
-- values are by hand or computed with PyTorch 1.13 (torch.nn.functional, in
-- float64) and pasted as constants; the inputs are the same closed-form
-- sequences in both.
local h = dofile("helpers.lua")
local gh = dofile("grad_helpers.lua")(h)
local ops = {}
for _, name in ipairs({"onnx_ops_nn", "onnx_ops_shape", "onnx_ops_vision"}) do
  for op_type, fn in pairs(require("lazylua." .. name)) do ops[op_type] = fn end
end

-- A context as the runtime gives one (ctx:error, ctx:unsupported, ctx:host).
local function context(opset, outputs)
  local ctx = {opset = opset or 17, node = {name = "n", op_type = "T", outputs = outputs or {"y"}}}
  function ctx.error(self, fmt, ...) error("onnx: " .. string.format(fmt, ...), 0) end
  function ctx.unsupported(self, fmt, ...) error("onnx: unsupported: " .. string.format(fmt, ...), 0) end
  function ctx.host(self, t) return t:reshape(-1):tolist() end
  return ctx
end

local function call(op, inputs, attrs, opset, outputs)
  inputs.n = inputs.n or #inputs
  return ops[op](context(opset, outputs), inputs, attrs or {})
end

-- ((i * 7) % m - m // 2) / d for i = 0 .. n-1, f64, as the PyTorch script.
local function seq(shape, m, d)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  local list = {}
  for i = 0, n - 1 do list[i + 1] = ((i * 7) % m - m // 2) / d end
  return tensor.new(list, {dtype = "f64"}):reshape(table.unpack(shape))
end

local TOL = {rel = 1e-9, abs = 1e-9}

h.test("Conv: groups, dilation, stride, asymmetric pads and bias", function()
  local x, w = seq({2, 4, 5, 6}, 11, 4.0), seq({6, 2, 3, 2}, 13, 3.0)
  local b = tensor.new({0.5, -1, 0.25, 2, 0, 1}, {dtype = "f64"})
  local y = call("Conv", {x, w, b}, {group = 2, dilations = {2, 1}, strides = {1, 2}, pads = {1, 0, 0, 1}})
  h.shape(y, {2, 6, 2, 3})
  h.near(y:sum(4):sum(3), {{3.7499999999999964, -5.833333333333334, -4.333333333333332, 9.0, -3.000000000000001, 5.166666666666667},
    {4.083333333333334, -5.416666666666666, 9.166666666666664, 14.333333333333334, 4.583333333333334, 0.9166666666666674}}, TOL)
  h.near(y:select(1, 1):select(2, 1), {{-4.166666666666668, 3.2499999999999996, 2.4166666666666665},
    {2.833333333333333, -1.7500000000000002, -1.75}, {-4.75, 2.5000000000000004, 3.333333333333334},
    {1.4166666666666665, -1.5, 1.0833333333333335}, {-2.6666666666666665, -2.4166666666666665, 3.3333333333333335},
    {2.75, 2.9166666666666665, -3.333333333333333}}, TOL)
end)

h.test("Conv: auto_pad SAME_UPPER keeps the size; 1-d by hand; gradient reaches the weight", function()
  local x = tensor.ones(1, 1, 4, 4)
  local w = tensor.ones(1, 1, 2, 2)
  w:requires_grad(true)
  local y = call("Conv", {x, w}, {auto_pad = "SAME_UPPER"})
  -- the extra row and column go at the end: the last row/column sees 2, the corner 1.
  h.near(y:select(1, 1):select(1, 1), {{4, 4, 4, 2}, {4, 4, 4, 2}, {4, 4, 4, 2}, {2, 2, 2, 1}})
  y:sum():backward()
  h.near(w:grad(), {{{{16, 12}, {12, 9}}}})   -- taps that meet the end padding see fewer ones
  local y1 = call("Conv", {tensor.new({{{1.0, 2, 3, 4}}}), tensor.new({{{1.0, -1}}})}, {})
  h.near(y1, {{{-1, -1, -1}}})
end)

h.test("ConvTranspose: stride 2, pads 1, output_padding 1", function()
  local x, w = seq({1, 2, 3, 3}, 11, 4.0), seq({2, 3, 3, 3}, 7, 2.0)
  local y = call("ConvTranspose", {x, w}, {strides = {2, 2}, pads = {1, 1, 1, 1}, output_padding = {1, 1}})
  h.shape(y, {1, 3, 6, 6})
  h.near(y:select(1, 1):select(1, 2), {{0.75, 0.375, -0.375, 2.25, 2.625, 2.625},
    {-1.875, -1.875, 0.0, 1.875, 1.875, 1.875}, {-2.625, -2.25, 0.375, -0.375, -0.75, -0.75},
    {-4.5, -3.0, 1.5, 0.75, -0.75, -0.75}, {-1.875, -0.75, 1.125, 1.125, 0.0, 0.0},
    {-1.875, -0.75, 1.125, 1.125, 0.0, 0.0}}, TOL)
end)

h.test("MaxPool: ceil_mode and the Indices output", function()
  local x = seq({1, 1, 5, 5}, 17, 1.0)
  local y, idx = call("MaxPool", {x}, {kernel_shape = {2, 2}, strides = {2, 2}, ceil_mode = 1}, 12, {"y", "i"})
  h.near(y:select(1, 1):select(1, 1), {{0.0, 7.0, 4.0}, {2.0, 8.0, 6.0}, {3.0, 0.0, 7.0}}, TOL)
  h.check(idx:select(1, 1):select(1, 1), "i64", {{6, 7, 9}, {16, 12, 19}, {21, 23, 24}})
  -- storage_order 1: the flat index with the spatial dims column-major (h + w * H).
  local _, cidx = call("MaxPool", {x}, {kernel_shape = {2, 2}, strides = {2, 2}, ceil_mode = 1, storage_order = 1},
    12, {"y", "i"})
  h.check(cidx:select(1, 1):select(1, 1), "i64", {{6, 11, 21}, {8, 12, 23}, {9, 19, 24}})
end)

h.test("AveragePool: pads with and without count_include_pad", function()
  local x = seq({1, 1, 5, 5}, 17, 1.0)
  local attrs = {kernel_shape = {3, 3}, strides = {2, 2}, pads = {1, 1, 1, 1}}
  h.near(call("AveragePool", {x}, attrs):select(1, 1):select(1, 1), {{-4.0, 0.8333333333333334, 0.0},
    {-2.5, 0.4444444444444444, 1.5}, {-1.0, -1.8333333333333333, 3.0}}, TOL)
  attrs.count_include_pad = 1
  h.near(call("AveragePool", {x}, attrs):select(1, 1):select(1, 1), {{-1.7777777777777777, 0.5555555555555556, 0.0},
    {-1.6666666666666667, 0.4444444444444444, 1.0}, {-0.4444444444444444, -1.2222222222222223, 1.3333333333333333}}, TOL)
  h.near(call("GlobalAveragePool", {tensor.new({{{{1.0, 2}, {3, 6}}}})}), {{{{3}}}})
  h.near(call("GlobalMaxPool", {tensor.new({{{{1.0, 2}, {3, 6}}}})}), {{{{6}}}})
end)

-- ONNX MaxPool of one output by a direct loop over [N, C, spatial...] (1 or
-- 2 spatial dims; flat Lua lists, row-major): begin/end pads and ceil_mode
-- as the spec states them, padding never an element, a window's first
-- maximum in row-major order or its first NaN.
local function max_pool_loop(flat, size, kernel, strides, pads, ceil_mode)
  local n = #size - 2
  local out_size, ins = {size[1], size[2]}, {}
  for i = 1, n do
    local span = size[i + 2] + pads[i] + pads[n + i] - kernel[i]
    local o = (ceil_mode and math.ceil(span / strides[i]) or span // strides[i]) + 1
    -- ceil_mode: a window that would start in the end padding is dropped
    if ceil_mode and (o - 1) * strides[i] >= size[i + 2] + pads[i] then o = o - 1 end
    out_size[i + 2], ins[i] = o, size[i + 2]
  end
  local H, W = n == 2 and ins[1] or 1, ins[n]
  local OH, OW = n == 2 and out_size[3] or 1, out_size[n + 2]
  local kh, kw = n == 2 and kernel[1] or 1, kernel[n]
  local sh, sw = n == 2 and strides[1] or 1, strides[n]
  local ph, pw = n == 2 and pads[1] or 0, pads[n]
  local out = {}
  for plane = 0, size[1] * size[2] - 1 do
    for oh = 0, OH - 1 do
      for ow = 0, OW - 1 do
        local best, seen = -math.huge, false
        for i = 0, kh - 1 do
          for j = 0, kw - 1 do
            local r, c = oh * sh - ph + i, ow * sw - pw + j
            if r >= 0 and r < H and c >= 0 and c < W then
              local v = flat[plane * H * W + r * W + c + 1]
              if not seen or v > best or (v ~= v and best == best) then best, seen = v, true end
            end
          end
        end
        out[#out + 1] = best
      end
    end
  end
  return out, out_size
end

h.test("MaxPool by the kernel: 1-d, asymmetric pads, pads over half the kernel, ceil_mode's extra end", function()
  local nan = 0 / 0
  local cases = {  -- size, kernel, strides, pads (begins, then ends), ceil_mode
    {{2, 3, 9, 37}, {3, 3}, {2, 2}, {1, 1, 1, 1}, false},
    {{2, 3, 10, 36}, {3, 3}, {2, 2}, {0, 0, 0, 0}, true},    -- one extra row and column
    {{2, 3, 9, 35}, {2, 3}, {2, 2}, {0, 1, 1, 2}, false},    -- asymmetric, end pad above half
    {{2, 3, 8, 33}, {3, 4}, {3, 3}, {2, 0, 1, 3}, true},     -- ceil_mode on top of asymmetric pads
    {{2, 3, 45}, {3}, {2}, {1, 1}, false},                   -- 1-d
    {{2, 3, 44}, {4}, {3}, {3, 0}, true},                    -- 1-d, begin pad above half
  }
  for ci, c in ipairs(cases) do
    local size, kernel, strides, pads, ceil_mode = table.unpack(c)
    local count = 1
    for _, s in ipairs(size) do count = count * s end
    -- Small integers, +0/-0, -inf runs and a few NaNs.
    local flat = h.flatten(h.map(h.rand_list(40 + ci, {count}, 0, 1), function(u)
      if u < 0.03 then return nan elseif u < 0.25 then return -math.huge elseif u < 0.35 then return -0.0 end
      return math.floor(u * 4)
    end))
    local want, out_size = max_pool_loop(flat, size, kernel, strides, pads, ceil_mode)
    for _, dtype in ipairs({"f32", "f64"}) do
      local x = tensor.new(flat, {dtype = dtype}):reshape(table.unpack(size))
      local y = call("MaxPool", {x}, {kernel_shape = kernel, strides = strides, pads = pads, ceil_mode = ceil_mode and 1 or 0})
      h.shape(y, out_size)
      local got = h.flatten(y:tolist())
      for i = 1, #want do
        assert(string.format("%a", got[i]) == string.format("%a", want[i]),
          string.format("case %d %s output %d: %a, expected %a", ci, dtype, i, got[i], want[i]))
      end
    end
  end
end)

h.test("GlobalAveragePool and GlobalMaxPool over 1 to 3 spatial dims, by loops", function()
  for _, size in ipairs({{2, 3, 7}, {2, 3, 5, 7}, {2, 3, 2, 3, 4}}) do
    local area = 1
    for d = 3, #size do area = area * size[d] end
    local flat = h.flatten(h.rand_list(50 + #size, {size[1] * size[2] * area}, -2, 2))
    local x = tensor.new(flat, {dtype = "f64"}):reshape(table.unpack(size))
    local means, maxima, shape = {}, {}, {size[1], size[2]}
    for d = 3, #size do shape[d] = 1 end
    for plane = 0, size[1] * size[2] - 1 do
      local sum, best = 0, -math.huge
      for i = 1, area do
        local v = flat[plane * area + i]
        sum, best = sum + v, math.max(best, v)
      end
      means[#means + 1], maxima[#maxima + 1] = sum / area, best
    end
    local average, maximum = call("GlobalAveragePool", {x}), call("GlobalMaxPool", {x})
    h.shape(average, shape)
    h.shape(maximum, shape)
    h.near(average:reshape(-1), means, TOL)
    h.near(maximum:reshape(-1), maxima, h.EXACT)
  end
  -- A NaN anywhere in a plane is its maximum and its mean.
  local y = call("GlobalMaxPool", {tensor.new({{{{1.0, 0 / 0}, {3, 2}}}})})
  assert(y:item() ~= y:item())
  h.err(function() call("GlobalAveragePool", {tensor.ones(3)}) end, "expected an input [N, C, spatial...], got a 1-d tensor")
  h.still_works()
end)

h.test("BatchNormalization (inference, training outputs), InstanceNormalization, LRN", function()
  local x = tensor.new({{{1.0, 3}}, {{5.0, 7}}})                 -- [2, 1, 2]
  local one, zero = tensor.new({1.0}), tensor.new({0.0})
  local y = call("BatchNormalization", {x, tensor.new({2.0}), tensor.new({1.0}), tensor.new({4.0}), tensor.new({4.0})},
    {epsilon = 0})
  h.near(y, {{{-2, 0}}, {{2, 4}}})                             -- (x - 4) / 2 * 2 + 1
  local yt, rm, rv = call("BatchNormalization", {x, one, zero, tensor.new({0.0}), tensor.new({1.0})},
    {epsilon = 0, training_mode = 1, momentum = 0.5}, 15, {"y", "m", "v"})
  -- batch mean 4, variance 5 (population)
  h.near(yt, {{{-3 / math.sqrt(5), -1 / math.sqrt(5)}}, {{1 / math.sqrt(5), 3 / math.sqrt(5)}}})
  h.near(rm, {2}); h.near(rv, {3})
  local xi = seq({2, 3, 4}, 11, 4.0)
  local yi = call("InstanceNormalization", {xi, tensor.new({1.0, 2, 3}, {dtype = "f64"}), tensor.new({0.0, 1, -1}, {dtype = "f64"})},
    {epsilon = 1e-5})
  h.near(yi:select(1, 2), {{0.199997440049151, -1.3999820803440568, 1.3999820803440568, -0.19999744004915093},
    {-0.4457828527057216, 4.052208244600967, 1.4819276175685738, -1.08835300946382},
    {2.13252951419573, -1.7228914263528607, -5.578312366901452, 1.1686742790585822}}, TOL)
  local yl = call("LRN", {seq({1, 5, 2, 1}, 11, 4.0)}, {size = 3, alpha = 0.3, beta = 0.75, bias = 2.0})
  h.near(yl:select(1, 1):select(3, 1), {{-0.696435546678453, 0.27857421867138116},
    {-0.27797706046831855, 0.6832627270935012}, {0.14173079115978415, -0.41342696938326046},
    {0.5524067261585818, 0.0}, {-0.5535833116504121, 0.4367715348685377}}, TOL)
end)

h.test("Reshape, Flatten, Squeeze, Unsqueeze, Transpose: opset forms", function()
  local x = tensor.arange(24):reshape(2, 3, 4)
  h.shape(call("Reshape", {x, tensor.new({0, -1})}, {}, 13), {2, 12})
  h.shape(call("Reshape", {x}, {shape = {4, 0, 2}}, 1), {4, 3, 2})
  h.shape(call("Reshape", {tensor.zeros(0, 3), tensor.new({3, 0})}, {allowzero = 1}, 14), {3, 0})
  h.shape(call("Flatten", {x}, {axis = 0}), {1, 24})
  h.shape(call("Flatten", {x}, {axis = -1}), {6, 4})
  local u = call("Unsqueeze", {x, tensor.new({0, -1})}, {}, 13)
  h.shape(u, {1, 2, 3, 4, 1})
  h.shape(call("Unsqueeze", {x}, {axes = {1}}, 11), {2, 1, 3, 4})
  h.shape(call("Squeeze", {u}, {}, 13), {2, 3, 4})
  h.shape(call("Squeeze", {u}, {axes = {4}}, 11), {1, 2, 3, 4})
  h.check(call("Transpose", {tensor.new({{1, 2}, {3, 4}})}, {}), "i64", {{1, 3}, {2, 4}})
  h.err(function() call("Reshape", {x, tensor.new({5, -1})}, {}, 13) end, "cannot reshape [2, 3, 4] to [5, -1]")
  h.err(function() call("Squeeze", {u, tensor.new({1})}, {}, 13) end, "cannot squeeze axis 1 of size 2")
end)

h.test("Slice (negative steps, clamping), Split, Concat", function()
  local x = tensor.arange(10)
  h.check(call("Slice", {x, tensor.new({-2}), tensor.new({-100}), tensor.new({0}), tensor.new({-3})}, {}, 13),
    "i64", {8, 5, 2})
  h.check(call("Slice", {x}, {starts = {2}, ends = {1000}}, 9), "i64", {2, 3, 4, 5, 6, 7, 8, 9})
  local m = tensor.arange(12):reshape(3, 4)
  h.check(call("Slice", {m, tensor.new({1, 3}), tensor.new({3, 0}), tensor.new({0, 1}), tensor.new({1, -2})}, {}, 13),
    "i64", {{7, 5}, {11, 9}})
  local a, b = call("Split", {x, tensor.new({3, 7})}, {}, 13, {"a", "b"})
  h.check(a, "i64", {0, 1, 2}); h.shape(b, {7})
  local p, q, r = call("Split", {tensor.arange(7)}, {}, 11, {"p", "q", "r"})
  h.check(p, "i64", {0, 1, 2}); h.check(q, "i64", {3, 4, 5}); h.check(r, "i64", {6})
  h.check(call("Concat", {m, m}, {axis = -1}), "i64", {{0, 1, 2, 3, 0, 1, 2, 3}, {4, 5, 6, 7, 4, 5, 6, 7},
    {8, 9, 10, 11, 8, 9, 10, 11}})
  h.err(function() call("Split", {x, tensor.new({3, 3})}, {}, 13, {"a", "b"}) end, "add up to 6, the axis has 10")
end)

h.test("Gather, GatherElements, GatherND, ScatterElements, ScatterND", function()
  local data = tensor.new({{1.0, 2}, {3, 4}, {5, 6}})
  h.near(call("Gather", {data, tensor.new({{0, -1}, {1, 0}})}, {axis = 0}),
    {{{1, 2}, {5, 6}}, {{3, 4}, {1, 2}}})
  h.near(call("Gather", {data, tensor.new(1)}, {axis = 1}), {2, 4, 6})
  h.near(call("GatherElements", {data, tensor.new({{1, 0}, {0, 0}, {-1, 1}})}, {axis = 1}), {{2, 1}, {3, 3}, {6, 6}})
  local cube = tensor.arange(8):reshape(2, 2, 2)
  h.check(call("GatherND", {cube, tensor.new({{0, 1}, {1, 0}})}, {}), "i64", {{2, 3}, {4, 5}})
  h.check(call("GatherND", {cube, tensor.new({{1}, {0}})}, {batch_dims = 1}), "i64", {{2, 3}, {4, 5}})
  local base = tensor.zeros(3, 3)
  local upd = tensor.new({{1.0, 2, 3}})
  h.near(call("ScatterElements", {base + 7, tensor.new({{2, 0, 1}}), upd}, {axis = 0}),
    {{7, 2, 7}, {7, 7, 3}, {1, 7, 7}})
  h.near(call("ScatterElements", {base + 1, tensor.new({{1, 1, 1}}), upd}, {axis = 1, reduction = "add"}),
    {{1, 7, 1}, {1, 1, 1}, {1, 1, 1}})
  h.near(call("ScatterND", {base, tensor.new({{2}, {0}}), tensor.new({{1.0, 2, 3}, {4, 5, 6}})}, {}),
    {{4, 5, 6}, {0, 0, 0}, {1, 2, 3}})
  h.near(call("ScatterND", {base + 2, tensor.new({{1, 1}, {1, 1}}), tensor.new({3.0, -1})}, {reduction = "mul"}),
    {{2, 2, 2}, {2, -6, 2}, {2, 2, 2}})
end)

h.test("Pad, Expand, Tile, Shape, Size, ConstantOfShape, Constant, Range, OneHot", function()
  local x = tensor.new({{1.0, 2}, {3, 4}})
  h.near(call("Pad", {x, tensor.new({0, 1, 1, 0}), tensor.new(9.0)}, {}, 13), {{9, 1, 2}, {9, 3, 4}, {9, 9, 9}})
  h.near(call("Pad", {x}, {pads = {1, 0, 0, 0}, mode = "edge"}, 2), {{1, 2}, {1, 2}, {3, 4}})
  h.near(call("Pad", {tensor.new({1.0, 2, 3})}, {pads = {2, 1}, mode = "reflect"}, 2), {3, 2, 1, 2, 3, 2})
  h.near(call("Expand", {tensor.new({{1.0}, {2}}), tensor.new({2, 1, 3})}, {}), {{{1, 1, 1}, {2, 2, 2}}, {{1, 1, 1}, {2, 2, 2}}})
  h.check(call("Tile", {tensor.new({1, 2}), tensor.new({2})}, {}), "i64", {1, 2, 1, 2})
  h.check(call("Shape", {tensor.zeros(2, 3, 4)}, {start = -2}), "i64", {3, 4})
  h.check(call("Size", {tensor.zeros(2, 3, 4)}, {}), "i64", 24)
  h.check(call("ConstantOfShape", {tensor.new({2})}, {value = tensor.new({7})}), "i64", {7, 7})
  h.check(call("Constant", {}, {value_ints = {1, 2}}), "i64", {1, 2})
  h.near(call("Range", {tensor.new(1.0), tensor.new(2.0), tensor.new(0.25)}, {}), {1, 1.25, 1.5, 1.75})
  h.near(call("OneHot", {tensor.new({0, -1, 2}), tensor.new(3), tensor.new({0.0, 5})}, {axis = 0}),
    {{5, 0, 0}, {0, 0, 0}, {0, 5, 5}})
end)

h.test("NonZero, Trilu, EyeLike, DepthToSpace, SpaceToDepth, Compress", function()
  h.check(call("NonZero", {tensor.new({{1, 0}, {0, 3}})}, {}), "i64", {{0, 1}, {0, 1}})
  h.check(call("Trilu", {tensor.new({{1, 2}, {3, 4}}), tensor.new(-1)}, {upper = 0}), "i64", {{0, 0}, {3, 0}})
  h.check(call("EyeLike", {tensor.zeros(2, 3)}, {k = 1}), "f32", {{0, 1, 0}, {0, 0, 1}})
  local x = tensor.arange(8):reshape(1, 8, 1, 1)
  local d = call("DepthToSpace", {x}, {blocksize = 2})
  h.check(d, "i64", {{{{0, 2}, {4, 6}}, {{1, 3}, {5, 7}}}})
  h.check(call("SpaceToDepth", {d}, {blocksize = 2}), "i64", {{{{0}}, {{1}}, {{2}}, {{3}}, {{4}}, {{5}}, {{6}}, {{7}}}})
  h.check(call("DepthToSpace", {x}, {blocksize = 2, mode = "CRD"}), "i64", {{{{0, 1}, {2, 3}}, {{4, 5}, {6, 7}}}})
  h.check(call("Compress", {tensor.new({{1, 2}, {3, 4}}), tensor.new({false, true})}, {axis = 1}), "i64", {{2}, {4}})
end)

h.test("Resize: linear half_pixel, nearest; Upsample", function()
  local x = tensor.new({{{{1.0, 2}, {3, 4}}}})
  local y = call("Resize", {x, tensor.new({}), tensor.new({}), tensor.new({1, 1, 3, 4})}, {mode = "linear"}, 13)
  h.near(y:select(1, 1):select(1, 1), {{1.0, 1.25, 1.75, 2.0}, {2.0, 2.25, 2.75, 3.0}, {3.0, 3.25, 3.75, 4.0}})
  local n = call("Upsample", {x, tensor.new({1.0, 1, 2, 1})}, {mode = "nearest"}, 9)
  h.near(n, {{{{1, 2}, {1, 2}, {3, 4}, {3, 4}}}})
end)

h.test("Unique and NonMaxSuppression (values read on the host)", function()
  local y, first, inverse, counts = call("Unique", {tensor.new({2.0, 1, 1, 3, 4, 3})}, {}, 11,
    {"y", "i", "inv", "c"})
  h.near(y, {1, 2, 3, 4}); h.check(first, "i64", {1, 0, 3, 4})
  h.check(inverse, "i64", {1, 0, 0, 2, 3, 2}); h.check(counts, "i64", {2, 1, 2, 1})
  local unsorted = call("Unique", {tensor.new({2.0, 1, 1, 3})}, {sorted = 0}, 11)
  h.near(unsorted, {2, 1, 3})
  -- box 1 overlaps box 0 with IoU 0.9 / 1.1 > 0.5 and a lower score: dropped.
  local boxes = tensor.new({{{0.0, 0, 1, 1}, {0, 0.1, 1, 1.1}, {0, 2, 1, 3}}})
  local scores = tensor.new({{{0.9, 0.8, 0.7}}})
  h.check(call("NonMaxSuppression", {boxes, scores, tensor.new({3}), tensor.new({0.5})}, {}, 11), "i64",
    {{0, 0, 0}, {0, 0, 2}})
  h.check(call("NonMaxSuppression", {boxes, scores, tensor.new({3}), tensor.new({0.9}), tensor.new({0.75})}, {}, 11),
    "i64", {{0, 0, 0}, {0, 0, 1}})
end)

h.test("Dropout in inference, errors for bad models and missing features", function()
  local x = tensor.new({1.0, 2})
  local y, mask = call("Dropout", {x}, {ratio = 0.3}, 13, {"y", "mask"})
  h.near(y, {1, 2}); h.check(mask, "bool", {true, true})
  h.err(function() call("Dropout", {x, tensor.new(0.5), tensor.new(true)}, {}, 13) end, "unsupported", "training")
  h.err(function() call("Conv", {tensor.ones(1, 1, 2, 2, 2, 2), tensor.ones(1, 1, 1, 1, 1, 1)}, {}) end,
    "unsupported", "4-d convolution")
  h.err(function() call("Conv", {tensor.ones(1, 2, 4, 4), tensor.ones(1, 3, 1, 1)}, {}) end,
    "input has 2 channels, the weight expects 3")
  h.err(function() call("Conv", {tensor.ones(1, 1, 4, 4), tensor.ones(1, 1, 3, 3)}, {auto_pad = "BOGUS"}) end,
    "unknown auto_pad 'BOGUS'")
  h.err(function() call("Transpose", {tensor.ones(2, 2)}, {perm = {0, 5}}) end, "axis 5 is out of range for rank 2")
  h.err(function() call("Resize", {x, tensor.new({}), tensor.new({2.0})}, {mode = "area"}, 13) end, "unknown mode 'area'")
  h.still_works()
end)

-- Gradients through the compositions, against central differences.
gh.gradcheck("ConvTranspose gradient (stride 2, groups 2)", function(x, w)
  return call("ConvTranspose", {x, w}, {strides = {2, 2}, pads = {1, 0, 0, 1}, group = 2})
end, {gh.values({1, 2, 3, 3}, -1, 1), gh.values({2, 1, 2, 3}, -1, 1)})
gh.gradcheck("Conv gradient (dilation, 3-d)", function(x, w)
  return call("Conv", {x, w}, {dilations = {1, 2, 1}, pads = {0, 1, 1, 0, 0, 1}})
end, {gh.values({1, 2, 3, 4, 3}, -1, 1), gh.values({2, 2, 2, 2, 2}, -1, 1)})
gh.gradcheck("AveragePool gradient (ceil_mode, pads)", function(x)
  return call("AveragePool", {x}, {kernel_shape = {2, 3}, strides = {2, 2}, pads = {1, 1, 0, 0}, ceil_mode = 1})
end, {gh.values({1, 1, 4, 5}, -1, 1)})
gh.gradcheck("Resize cubic and GridSample bilinear gradients", function(x, grid)
  local y = call("Resize", {x, tensor.new({}), tensor.new({1.0, 1, 1.5, 2})}, {mode = "cubic"}, 13)
  return call("GridSample", {y, grid}, {padding_mode = "border"}, 16)
end, {gh.values({1, 2, 2, 3}, -1, 1), gh.values({1, 2, 3, 2}, -0.9, 0.9)})
gh.gradcheck("Gather, ScatterND and Pad (reflect) gradients", function(x, u)
  local g = call("Gather", {x, tensor.new({2, 0, 2})}, {axis = 1})
  local s = call("ScatterND", {g, tensor.new({{1}}), u}, {reduction = "add"})
  return call("Pad", {s, tensor.new({0, 2, 0, 1})}, {mode = "reflect"}, 13)
end, {gh.values({2, 4}, -1, 1), gh.values({1, 3}, -1, 1)})

h.done("test_onnx_ops_nn")
