-- test_erf.lua - f32 erf and erfc (tensor/kernels/kernel_math.h): eager
-- kernels and the process's tier (lazy: the reference interpreter, then
-- generated code; LAZYLUA_COMPILE=sync: generated code at once) give the
-- same bits on a dense range of inputs, alone and fused with other ops; the
-- values are within the stated accuracy of a series computed in Lua; and
-- gelu agrees with the 0.5 x (1 + erf(x / sqrt 2)) it stands for.
local h = dofile("helpers.lua")

local function float_of_bits(bits) return (string.unpack("<f", string.pack("<I4", bits))) end
local function bits_of_float(x) return (string.unpack("<I4", string.pack("<f", x))) end

-- Every 2^17-th float bit pattern up to 10.5 (4.3k per sign: subnormals, tiny,
-- the whole range of both approximations), the 256 floats around 1 (where
-- they switch), 3.92 (erf reaches 1), 9.2 and 10.06 (erfc becomes subnormal,
-- then 0), 10.1 (where |x| is clamped), with both signs, and the specials.
local inputs = {}
local function both_signs(x)
  inputs[#inputs + 1] = x
  inputs[#inputs + 1] = -x
end
for bits = 0, bits_of_float(10.5), 1 << 17 do both_signs(float_of_bits(bits)) end
for _, center in ipairs({1.0, 3.92, 9.2, 10.06, 10.1}) do
  local middle = bits_of_float(center)
  for bits = middle - 128, middle + 128 do both_signs(float_of_bits(bits)) end
end
for _, x in ipairs({0.0, 1e-45, 1.1754942e-38, 1e-30, 11.0, 26.5, 1e10, 3.4e38, math.huge}) do
  both_signs(x)
end
inputs[#inputs + 1] = 0 / 0

local function bits(t)
  local out = {}
  for i, v in ipairs(t:tolist()) do out[i] = v ~= v and "nan" or string.format("%08x", bits_of_float(v)) end
  return out
end

local function same_bits(name, want, got)
  for i = 1, #want do
    if want[i] ~= got[i] then
      error(string.format("%s: x = %a: eager %s, this tier %s", name, inputs[i], want[i], got[i]), 2)
    end
  end
end

local cases = {
  erf = function(x) return x:erf() end,
  erfc = function(x) return x:erfc() end,
  ["erf(x) * 0.5 + erfc(x)"] = function(x) return x:erf() * 0.5 + x:erfc() end,
  ["exact gelu pattern"] = function(x) return x * 0.5 * ((x / math.sqrt(2)):erf() + 1) end,
}

h.test("eager and this tier give the same bits", function()
  local was = tensor.is_eager()
  tensor.set_eager(true)
  local x = tensor.new(inputs)
  local eager = {}
  for name, f in pairs(cases) do eager[name] = bits(f(x)) end
  tensor.set_eager(was)
  local lazy_x = tensor.new(inputs)
  for round = 1, 3 do  -- a lazy tier's first runs interpret, later ones run compiled code
    for name, f in pairs(cases) do same_bits(name .. " (run " .. round .. ")", eager[name], bits(f(lazy_x))) end
    tensor.mark_step()
  end
end)

-- The distance between f32 neighbours at v.
local function ulp(v)
  v = math.abs(h.f32(v))
  if v == math.huge then return math.huge end
  return float_of_bits(bits_of_float(v) + 1) - v
end

h.test("erf within 0.51 ulp and erfc within 0.56 ulp of a series", function()
  local x = tensor.new(inputs)
  local erf, erfc = x:erf():tolist(), x:erfc():tolist()
  for i, v in ipairs(inputs) do
    if v ~= v then
      assert(erf[i] ~= erf[i] and erfc[i] ~= erfc[i], "erf(NaN), erfc(NaN) are NaN")
    else
      local want = h.erf(v)
      -- where h.erf is good to 1e-12 (its series) or 1e-13 (its tail; 1e-8 at 3.1)
      if math.abs(v) <= 3 or math.abs(v) >= 4.5 then
        local err = math.abs(erf[i] - want) / ulp(want)
        assert(err <= 0.51, string.format("erf(%a) = %a, want %.17g: %.3f ulp", v, erf[i], want, err))
      end
      if v <= 0.5 and v >= -3 then  -- where 1 - erf does not cancel
        local err = math.abs(erfc[i] - (1 - want)) / ulp(1 - want)
        assert(err <= 0.56, string.format("erfc(%a) = %a, want %.17g: %.3f ulp", v, erfc[i], 1 - want, err))
      end
    end
  end
  h.check(tensor.new({0.0, -0.0, math.huge, -math.huge, 4.0, 1e10}):erf(), "f32", {0, -0.0, 1, -1, 1, 1})
  h.check(tensor.new({0.0, math.huge, -math.huge, 10.06, 1e10, -1e10}):erfc(), "f32", {1, 0, 2, 0, 0, 2})
  assert(1 / tensor.new({-0.0}):erf():item() < 0, "erf(-0) = -0")
  assert(tensor.new({10.0}):erfc():item() > 0, "erfc(10) = 2.1e-45 is a subnormal, not 0")
end)

h.test("gelu agrees with 0.5 x (1 + erf(x / sqrt 2))", function()
  local values = {}
  for i = 1, 2001 do values[i] = (i - 1001) * 0.006 end  -- [-6, 6]
  local x = tensor.new(values)
  local gelu, pattern = x:gelu():tolist(), (x * 0.5 * ((x / math.sqrt(2)):erf() + 1)):tolist()
  for i, v in ipairs(values) do
    local want = h.gelu(v)
    -- the pattern rounds 1 + erf (one ulp of 1 to 2, times x/2) and three products
    local tolerance = 1.2e-7 * math.abs(v) + 3 * ulp(want)
    assert(math.abs(gelu[i] - want) <= tolerance and math.abs(pattern[i] - want) <= tolerance,
      string.format("x = %a: gelu %a, pattern %a, want %.17g", v, gelu[i], pattern[i], want))
  end
end)

h.test("erf of an integer tensor is f32", function()
  h.check(tensor.new({0, 1, -2}, {dtype = "i32"}):erf(), "f32", {0, h.erf(1), h.erf(-2)}, h.TRANS)
end)

h.done("test_erf.lua")
