-- test_conv_epilogue.lua - a compiled plan folds the ReLU, Clip or SiLU
-- after a convolution into it (compiler/conv_epilogue.h): the convolution
-- applies them to each block it writes. The folded plan must give the bits of the ops run
-- one by one in eager mode, on every path a convolution takes (a 1x1 as one
-- product per sample or over several samples, oneDNN's direct and depthwise
-- kernels, the column and depthwise kernels of our own), with NaN, infinity
-- and -0 among the values; and the clamp must be gone from the plan.
local h = dofile("helpers.lua")
local mode_is_eager = tensor.is_eager()

local function bits(t)
  local out = {}
  for i, v in ipairs(h.flatten(t:tolist())) do out[i] = string.format("%a", v) end
  return out
end

-- Values of `shape` in [-3, 3], with NaN, +inf and -inf at the first three
-- positions when `special` is set.
local function data(seed, shape, dtype, special)
  local values = h.flatten(h.rand_list(seed, shape, -3, 3))
  if special then values[1], values[2], values[3] = 0 / 0, math.huge, -math.huge end
  return tensor.new(values, {dtype = dtype}):reshape(shape)
end

-- Bounds as 0-d f32 tensors, as the ONNX importer passes Clip's.
local function clip(low, high)
  return function(y)
    return y:maximum(tensor.full({}, low, {dtype = "f32"})):minimum(tensor.full({}, high, {dtype = "f32"}))
  end
end
local function relu(y) return y:relu() end
-- SiLU as PyTorch exports it (ONNX's Sigmoid and Mul), in both orders.
local function silu(y) return y * y:sigmoid() end
local function silu_gate_first(y) return y:sigmoid() * y end

-- Each case: input and weight shapes, options, the clamp chain.
local cases = {
  {name = "1x1, one product per sample (ReLU6)", x = {2, 8, 40, 40}, w = {16, 8, 1, 1},
   chain = clip(0, 6)},
  {name = "1x1 over several samples per product", x = {8, 16, 5, 5}, w = {32, 16, 1, 1},
   chain = clip(0, 6)},
  {name = "3x3 on oneDNN, ReLU", x = {2, 8, 12, 12}, w = {16, 8, 3, 3}, options = {padding = 1},
   chain = relu},
  {name = "depthwise on oneDNN, Clip", x = {3, 16, 11, 11}, w = {16, 1, 3, 3},
   options = {padding = 1, groups = 16, stride = 2}, chain = clip(-1, 1)},
  {name = "channel multiplier 2 (own depthwise kernel)", x = {2, 4, 9, 9}, w = {8, 1, 3, 3},
   options = {groups = 4}, chain = clip(0, 6)},
  {name = "grouped, no bias, bounds as first operands", x = {2, 8, 7, 7}, w = {8, 4, 3, 3},
   options = {groups = 2}, bias = false,
   chain = function(y) return tensor.full({}, -0.5):maximum(tensor.full({}, 0.5):minimum(y)) end},
  {name = "minimum, then maximum, Lua numbers", x = {2, 3, 10, 10}, w = {5, 3, 3, 3},
   chain = function(y) return y:minimum(2):maximum(-2) end},
  {name = "one-channel input, ReLU then Clip", x = {4, 1, 10, 10}, w = {8, 1, 3, 3},
   chain = function(y) return clip(0, 1)(y:relu()) end},
  {name = "1x1 of 8 channels (own pointwise kernel), SiLU", x = {2, 8, 40, 40}, w = {16, 8, 1, 1},
   chain = silu},
  {name = "1x1 over several samples per product, SiLU, the sigmoid first", x = {8, 80, 5, 5},
   w = {24, 80, 1, 1}, chain = silu_gate_first},
  {name = "3x3 on oneDNN, SiLU", x = {2, 8, 12, 12}, w = {16, 8, 3, 3}, options = {padding = 1},
   chain = silu},
  {name = "depthwise (own kernel), SiLU then Clip", x = {2, 4, 9, 9}, w = {8, 1, 3, 3},
   options = {groups = 4}, chain = function(y) return clip(-0.25, 2)(silu(y)) end},
  {name = "Clip then SiLU", x = {2, 3, 10, 10}, w = {5, 3, 3, 3},
   chain = function(y) return silu_gate_first(clip(-2, 2)(y)) end},
  {name = "SiLU whose input is used a third time (not folded)", x = {2, 3, 6, 6}, w = {4, 3, 1, 1},
   chain = function(y) return silu(y) + y end},
  {name = "integer bounds (not folded)", x = {2, 3, 6, 6}, w = {4, 3, 1, 1},
   chain = function(y) return y:maximum(tensor.full({}, 0)):minimum(tensor.full({}, 1)) end},
}

for _, case in ipairs(cases) do
  h.test(case.name, function()
    local function run()
      local x = data(1, case.x, "f32", true)
      local w = data(2, case.w, "f32")
      local b = case.bias ~= false and data(3, {case.w[1]}, "f32") or nil
      return case.chain(tensor.conv2d(x, w, b, case.options))
    end
    tensor.set_eager(true)
    local want = bits(run())
    tensor.set_eager(mode_is_eager)
    -- The third run of a graph waits for its native code (lazy mode).
    for _ = 1, 3 do
      local got = bits(run())
      assert(#got == #want)
      for i = 1, #want do
        assert(got[i] == want[i], string.format("element %d: eager %s, this tier %s", i, want[i], got[i]))
      end
    end
  end)
end

-- A zero weight and a -0 bias: the convolution's values are -0 (or +0),
-- where maximum(v, 0) keeps the sign of its second operand and relu its
-- input's.
h.test("signed zeros", function()
  local function run(chain)
    local x = -tensor.ones({1, 2, 4, 4})
    local w = tensor.zeros({3, 2, 1, 1})
    local b = tensor.new({-0.0, 0.0, -0.0})
    return chain(tensor.conv2d(x, w, b))
  end
  for _, chain in ipairs({relu, clip(0, 6), function(y) return y:maximum(-0.0) end}) do
    tensor.set_eager(true)
    local want = bits(run(chain))
    tensor.set_eager(mode_is_eager)
    for _ = 1, 3 do
      local got = bits(run(chain))
      for i = 1, #want do assert(got[i] == want[i], want[i] .. " vs " .. got[i]) end
    end
  end
end)

-- Folded: the plan's only step is the convolution, which tensor.profile
-- names with its clamps. Not folded: a convolution used twice, an f64 one.
local function kernel_names(f)
  for _ = 1, 3 do tensor.sync(f()) end
  tensor.profile(function() tensor.sync(f()) end)
  return tensor.profile_report(20)
end

if not mode_is_eager then
  local x = data(1, {2, 8, 20, 20}, "f32")
  local w = data(2, {16, 8, 3, 3}, "f32")
  local b = data(3, {16}, "f32")
  h.test("the clamp runs inside the convolution", function()
    local report = kernel_names(function() return clip(0, 6)(tensor.conv2d(x, w, b, {padding = 1})) end)
    assert(report:find("\n%s+1%s+[%d.]+%s+[%d.]+%s+[%d.-]+%s+[%d.-]+%s+conv2d%+maximum%+minimum"), report)
    assert(not report:find("\n%s+1%s+[%d.]+%s+[%d.]+%s+[%d.-]+%s+[%d.-]+%s+maximum"), report)
    report = kernel_names(function() return tensor.conv2d(x, w, b):relu() end)
    assert(report:find("conv2d%+relu"), report)
    assert(not report:find("%s%s+relu"), report)
    report = kernel_names(function() return silu(tensor.conv2d(x, w, b)) end)
    assert(report:find("conv2d%+sigmoid%+mul"), report)
    assert(not report:find("%s%s+sigmoid"), report)
  end)
  h.test("a convolution used twice keeps its clamp kernel", function()
    local report = kernel_names(function()
      local y = tensor.conv2d(x, w, b)
      return y:relu() + y
    end)
    assert(report:find("relu"), report)
    -- The sigmoid is an output too: it keeps a kernel of its own.
    report = kernel_names(function()
      local y = tensor.conv2d(x, w, b)
      local gate = y:sigmoid()
      return y * gate, gate
    end)
    assert(report:find("%s%ssigmoid"), report)
  end)
  h.test("f64 convolutions are not folded", function()
    local x64, w64 = x:double(), w:double()
    local want = bits((tensor.conv2d(x64, w64):relu()))
    local report = kernel_names(function() return tensor.conv2d(x64, w64):relu() end)
    assert(report:find("relu"), report)
    local got = bits(tensor.conv2d(x64, w64):relu())
    for i = 1, #want do assert(got[i] == want[i]) end
  end)
end

h.done("test_conv_epilogue")
