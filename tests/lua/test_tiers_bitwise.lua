-- test_tiers_bitwise.lua - elementwise arithmetic gives the same bits in
-- every tier: eager kernels, the reference interpreter (LAZYLUA_COMPILE=off
-- and a graph's first runs) and generated code (LAZYLUA_COMPILE=sync).
-- Chains such as x * s + t are where a C compiler that fuses a multiply
-- and an add into one FMA (one rounding instead of two) would differ from
-- the eager kernels; so are the parameter initializations of nn.Linear,
-- whose first sync then gave other weights once native code was ready.
local h = dofile("helpers.lua")
local lh = dofile("lazy_helpers.lua")

local function bits(t)
  local out = {}
  for i, v in ipairs(h.flatten(t:tolist())) do out[i] = string.format("%a", v) end
  return out
end

-- Runs f once eagerly and once in the current mode; the results must have
-- the same bits.
local function same_bits(name, f)
  h.test(name, function()
    local was = tensor.is_eager()
    tensor.set_eager(true)
    local eager = bits(f())
    tensor.set_eager(was)
    local lazy = bits(f())
    tensor.mark_step()
    assert(#eager == #lazy)
    for i = 1, #eager do
      assert(eager[i] == lazy[i], string.format("element %d: eager %s, this tier %s", i, eager[i], lazy[i]))
    end
  end, 3)
end

local function data(seed, dtype) return tensor.new(h.rand_list(seed, {37, 29}, -3, 3), {dtype = dtype}) end

for _, dtype in ipairs({"f32", "f64"}) do
  same_bits(dtype .. " x * s + t", function() return data(1, dtype) * 0.37 + 1.3 end)
  same_bits(dtype .. " a * b + c", function() return data(1, dtype) * data(2, dtype) + data(3, dtype) end)
  same_bits(dtype .. " a * b - c * d", function()
    return data(1, dtype) * data(2, dtype) - data(3, dtype) * data(4, dtype)
  end)
  same_bits(dtype .. " (a + b) * c + a / b", function()
    local a, b, c = data(1, dtype), data(2, dtype), data(3, dtype)
    return (a + b) * c + a / b
  end)
  same_bits(dtype .. " c - a * b, then squared plus one", function()
    local v = data(3, dtype) - data(1, dtype) * data(2, dtype)
    return v * v + 1.5
  end)
end

-- GCC 12 folds 0.0 - x into -x when it knows x is never -0 (a bool or an
-- integer converted to float, an abs): -0 where IEEE gives +0. Generated
-- code hides its zero constants from it (LZK_OPAQUE).
same_bits("0 - a bool, an integer, an abs", function()
  local x = data(1, "f32")
  return tensor.cat({0.0 - x:gt(0), 0.0 - (x * 2):int(), 0.0 - (x * 0):abs(), 0.0 - x:gt(0):double()})
end)

same_bits("nn.Linear's initialization and forward", function()
  local nn = require "nn"
  tensor.manual_seed(5)
  local model = nn.Sequential(nn.Linear(7, 5), nn.ReLU(), nn.Linear(5, 3))
  return model(tensor.randn(11, 7))
end)

-- The same graph run several times (interpreted first, native later in the
-- default background mode) keeps giving the same bits.
h.test("a graph's repeated runs give the same bits", function()
  local first
  for _ = 1, 30 do
    local got = bits(data(1, "f32") * 0.37 + data(2, "f32") * 1.7 - 0.2)
    tensor.mark_step()
    first = first or got
    for i = 1, #got do assert(got[i] == first[i], "element " .. i .. " changed between runs") end
  end
end)

h.done("test_tiers_bitwise")
