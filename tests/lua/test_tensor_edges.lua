-- test_tensor_edges.lua - tensor ops at the edges of their number ranges:
-- arange near the i64 limits and past 2^53 (exact values), chunk and split
-- with counts near math.maxinteger, pad with huge or cropping pads, numbers
-- an integer tensor cannot hold (NaN, inf, beyond the range) in fills and
-- clamp bounds, ops on empty tensors with a 2^40 extent (no work for the
-- extent), and norm for huge p and empty inputs. Expected values are
-- integer literals or worked out by hand; every error leaves the
-- interpreter usable. Runs lazy, eager and compiled (tests/CMakeLists.txt).
local h = dofile("helpers.lua")

local minint, maxint = math.mininteger, math.maxinteger
local nan, inf = 0 / 0, math.huge

-- ---- arange: exact integers ----

h.test("arange of integers near the i64 limits is exact", function()
  h.check(tensor.arange(minint, minint + 3), "i64",
          {-9223372036854775807 - 1, -9223372036854775807, -9223372036854775806})
  h.check(tensor.arange(maxint - 2, maxint), "i64",
          {9223372036854775805, 9223372036854775806})
  -- 2^53 + 1 is not a double: through doubles it came out as 2^53.
  h.check(tensor.arange((1 << 53) + 1, (1 << 53) + 3), "i64",
          {9007199254740993, 9007199254740994})
  -- Down from maxint in steps of 2^62: 4 values, the last below zero.
  h.check(tensor.arange(maxint, minint, -(1 << 62)), "i64",
          {9223372036854775807, 4611686018427387903, -1, -4611686018427387905})
  h.check(tensor.arange(minint, maxint, 1 << 62), "i64",
          {-9223372036854775807 - 1, -4611686018427387904, 0, 4611686018427387904})
end)

h.test("arange values feed lazy and compiled graphs exactly", function()
  local top = tensor.arange(maxint - 3, maxint)
  h.check(top - (maxint - 3), "i64", {0, 1, 2})
  h.check((top - maxint):abs(), "i64", {3, 2, 1})
  local low = tensor.arange(minint, minint + 2)
  h.check(low:eq(minint), "bool", {true, false})
end)

h.test("arange of integers into f32 and i32 rounds or converts each exact value once", function()
  -- 16777217 = 2^24 + 1 is not an f32: it rounds to even (2^24).
  h.check(tensor.arange(16777217, 16777220, {dtype = "f32"}), "f32",
          {16777216, 16777218, 16777220})
  h.check(tensor.arange(-3, 3, 2, {dtype = "i32"}), "i32", {-3, -1, 1})
  h.check(tensor.arange(0.5, 2), "f32", {0.5, 1.5})
end)

-- ---- chunk, split ----

h.test("chunk with a count near math.maxinteger gives one chunk", function()
  local t = tensor.arange(7):float()
  for _, count in ipairs({maxint, maxint - 1, 7 + 1}) do
    local parts = t:chunk(count)
    -- ceil(7 / 8) = 1 per chunk: 7 chunks; the others: 1 per chunk too.
    assert(#parts == 7, string.format("chunk(%d): %d parts", count, #parts))
    h.check(parts[7], "f32", {6})
  end
  local one = tensor.arange(7):float():reshape(7, 1):chunk(maxint, 2)
  assert(#one == 1, "a dim of 1 in maxint chunks is one chunk")
  h.shape(one[1], {7, 1})
  -- ceil(7 / 3) = 3 per chunk: 3, 3, 1.
  local sizes = {}
  for i, p in ipairs(t:chunk(3)) do sizes[i] = p:size(1) end
  h.eq(sizes, {3, 3, 1})
  h.check(t:split(maxint)[1], "f32", {0, 1, 2, 3, 4, 5, 6})
end)

h.bad(function() return tensor.arange(7):split({maxint, maxint, 9}) end,
      "split: sizes add up to more than the 7 elements of dim 1")

-- ---- pad ----

h.bad(function() return tensor.pad(tensor.ones(1, 2, 5, 5), {0, 0, maxint, 0}) end,
      "pad: pads 9223372036854775807 and 0 give dim 3 too many elements")
h.bad(function() return tensor.pad(tensor.ones(5), {maxint, maxint}) end, "pad:",
      "too many elements")
h.bad(function() return tensor.pad(tensor.ones(5), {minint, 0}) end,
      "pad: pads -9223372036854775808 and 0 leave a negative size on dim 1 of size 5")
h.bad(function() return tensor.pad(tensor.ones(5), {minint, maxint}) end,
      "pad: pads -9223372036854775808 and 9223372036854775807 crop more than the 5 elements of dim 1")
h.bad(function() return tensor.pad(tensor.ones(5), {-7, 10}) end, "crop more than the 5 elements")
h.bad(function() return tensor.pad(tensor.ones(1, 1), {0, 1 << 41}, {mode = "replicate"}) end,
      "pad:", "too many elements")
h.bad(function() return tensor.pad(tensor.zeros(0, 2, 1 << 39), {0, 0, 0, 1}) end, "pad:",
      "too many elements")

h.test("pad modes: the values of each side", function()
  local t = tensor.new({1, 2, 3})
  h.check(tensor.pad(t, {2, 3}, {mode = "replicate"}), "i64", {1, 1, 1, 2, 3, 3, 3, 3})
  h.check(tensor.pad(t, {2, 2}, {mode = "reflect"}), "i64", {3, 2, 1, 2, 3, 2, 1})
  h.check(tensor.pad(t, {1, 2}, {mode = "reflect"}), "i64", {2, 1, 2, 3, 2, 1})
  h.check(tensor.pad(t, {2, 3}, {mode = "circular"}), "i64", {2, 3, 1, 2, 3, 1, 2, 3})
  h.check(tensor.pad(t, {0, 1}, {mode = "circular"}), "i64", {1, 2, 3, 1})
  -- Negative pads crop first, then the other side pads.
  h.check(tensor.pad(t, {-1, 2}, {mode = "replicate"}), "i64", {2, 3, 3, 3})
  h.check(tensor.pad(t, {2, -2}, {mode = "constant", value = 9}), "i64", {9, 9, 1})
  local m = tensor.new({{1, 2}, {3, 4}})
  h.check(tensor.pad(m, {1, 1, 1, 0}, {mode = "replicate"}), "i64",
          {{1, 1, 2, 2}, {1, 1, 2, 2}, {3, 3, 4, 4}})
  h.check(tensor.pad(m, {1, 0, 0, 1}, {mode = "reflect"}), "i64",
          {{2, 1, 2}, {4, 3, 4}, {2, 1, 2}})
end)

h.test("pad modes: gradients sum the copies into their source", function()
  local x = tensor.new({1, 2, 3}, {dtype = "f64"}):requires_grad(true)
  -- replicate {2, 1}: x1 appears 3 times, x2 once, x3 twice.
  tensor.pad(x, {2, 1}, {mode = "replicate"}):sum():backward()
  h.check(x:grad(), "f64", {3, 1, 2})
  local y = tensor.new({1, 2, 3}, {dtype = "f64"}):requires_grad(true)
  -- reflect {2, 1}: 3 2 | 1 2 3 | 2
  local w = tensor.new({10, 20, 1, 2, 3, 30}, {dtype = "f64"})
  local reflected = tensor.pad(y, {2, 1}, {mode = "reflect"}) * w
  reflected:sum():backward()
  h.check(y:grad(), "f64", {1, 2 + 20 + 30, 3 + 10})
  local z = tensor.new({1, 2, 3}, {dtype = "f64"}):requires_grad(true)
  -- circular {1, 2}: 3 | 1 2 3 | 1 2
  local circular = tensor.pad(z, {1, 2}, {mode = "circular"}) *
                   tensor.new({10, 1, 2, 3, 20, 30}, {dtype = "f64"})
  circular:sum():backward()
  h.check(z:grad(), "f64", {1 + 20, 2 + 30, 3 + 10})
end)

-- ---- numbers an integer tensor cannot hold ----

h.test("a fill with NaN, inf or out-of-range into an integer tensor is the cast's error", function()
  local mask = tensor.new({true, false})
  local t = tensor.new({1, 2})
  h.err(function() return t:long():masked_fill(mask, nan):tolist() end,
        "masked_fill: nan has no i64 value")
  h.err(function() return t:int():masked_fill(mask, 1e20):tolist() end,
        "masked_fill: 1e+20 has no i32 value")
  h.err(function() return t:masked_fill(mask, -inf):tolist() end,
        "masked_fill: -inf has no i64 value")
  h.err(function() t:masked_fill_(mask, inf) end, "masked_fill_: inf has no i64 value")
  h.err(function() t[mask] = nan end, "newindex: nan has no i64 value")
  h.err(function() return tensor.full({2}, nan, {dtype = "i64"}):tolist() end,
        "full: nan has no i64 value")
  h.err(function() return tensor.full({2}, 2 ^ 31, {dtype = "i32"}):tolist() end,
        "full: 2147483648 has no i32 value")
  h.err(function() t:fill_(1e19) end, "fill_: 1e+19 has no i64 value")
  h.err(function() t[1] = nan end, "nan has no i64 value")
  h.err(function() return tensor.new(inf, {dtype = "i64"}):tolist() end, "inf has no i64 value")
  h.err(function() return tensor.pad(t, {1, 0}, {value = nan}):tolist() end,
        "pad: nan has no i64 value")
  -- The same as the cast of such a value.
  h.err(function() return tensor.new({1e19}, {dtype = "f64"}):long():tolist() end,
        "cast: 1e+19 has no i64 value")
  -- Untouched by the failed calls, and numbers that fit still fill.
  h.check(t, "i64", {1, 2})
  h.check(t:masked_fill(mask, 7.0), "i64", {7, 2})
  h.check(t:int():masked_fill(mask, -2147483648.0), "i32", {-2147483648, 2})
  h.check(tensor.full({2}, -2 ^ 63, {dtype = "i64"}), "i64", {minint, minint})
  h.check(t:float():masked_fill(mask, inf), "f32", {inf, 2})
  h.check(tensor.new({true, false}):masked_fill(mask, false), "bool", {false, false})
  h.still_works()
end)

h.test("a clamp bound the integer result would have to hold is an error", function()
  local t = tensor.new({-5, 0, 5})
  h.err(function() return t:clamp(1e20):tolist() end, "clamp: 1e+20 has no i64 value")
  h.err(function() return t:clamp(nil, -inf):tolist() end, "clamp: -inf has no i64 value")
  h.err(function() return t:int():clamp(2 ^ 31):tolist() end, "clamp: 2147483648 has no i32 value")
  h.err(function() return t:int():clamp(nil, minint):tolist() end,
        "clamp: -9223372036854775808 has no i32 value")
  h.err(function() t:clamp_(inf) end, "clamp_: inf has no i64 value")
  h.err(function() return t:clamp_min(2 ^ 63):tolist() end, "has no i64 value")
  -- Bounds on the far side of the range clamp nothing.
  h.check(t:clamp(-inf, inf), "i64", {-5, 0, 5})
  h.check(t:clamp(-1e20, 1e20), "i64", {-5, 0, 5})
  h.check(t:int():clamp(minint, maxint), "i32", {-5, 0, 5})
  h.check(t:clamp(-0.5, 4.5), "i64", {0, 0, 4})
  h.check(t, "i64", {-5, 0, 5})
end)

-- ---- empty tensors with a huge extent ----

h.test("ops on an empty tensor with a 2^40 extent do no work for the extent", function()
  local e = tensor.zeros(0, 1 << 40)
  for _, result in ipairs({e:flip(2), e:flip(1, 2), e:tril(), e:triu(1), e:roll(3, 2),
                           e:roll(-1), e:repeat_tensor(1, 1)}) do
    h.shape(result, {0, 1 << 40})
  end
  local values, indices = e:cummax(2)
  h.shape(values, {0, 1 << 40})
  h.shape(indices, {0, 1 << 40})
  assert(indices:dtype() == "i64")
  local low, where = e:cummin(2)
  h.shape(low, {0, 1 << 40})
  h.shape(where, {0, 1 << 40})
  h.shape(e:max(2), {0})
  local g = tensor.zeros(0, 1 << 40, {dtype = "f64"}):requires_grad(true)
  local top = g:max(2)
  top:sum():backward()
  h.shape(g:grad(), {0, 1 << 40})
end)

-- ---- norm ----

h.test("norm of a huge order is the largest magnitude (the smallest for a negative one)", function()
  h.check(tensor.new({1, 2}):norm(1e300), "f32", 2)
  h.check(tensor.new({1, -2}, {dtype = "f64"}):norm(1e300), "f64", 2)
  h.check(tensor.new({-3, 2, 3}):norm(1e300), "f32", 3)
  h.check(tensor.new({1, 2}):norm(-1e300), "f32", 1)
  h.check(tensor.new({{1, 2}, {-5, 4}}):norm(1e300, 2), "f32", {2, 5})
  h.check(tensor.new({{1, 2}, {-5, 4}}):norm(1e300, 1, true), "f32", {{5, 4}})
  -- Ordinary orders: 3-4-5, and (1 + 8)^(1/3) = 9^(1/3).
  h.near(tensor.new({3, 4}, {dtype = "f64"}):norm(3), 91 ^ (1 / 3), h.F64)
  h.near(tensor.new({1, 2}):norm(3), 9 ^ (1 / 3))
  h.near(tensor.new({1, 4}, {dtype = "f64"}):norm(0.5), 9, h.F64)
  h.near(tensor.new({2, 2}, {dtype = "f64"}):norm(-1), 1, h.F64)
  -- Large elements whose powers overflow: (3e30, 4e30) in f32, p = 4.
  h.near(tensor.new({3e30, 4e30}):norm(4), (3 ^ 4 + 4 ^ 4) ^ 0.25 * 1e30, {rel = 1e-5, abs = 0})
  -- Zeros, infinities, NaN.
  h.check(tensor.zeros(3):norm(3), "f32", 0)
  h.check(tensor.new({0, 1}):norm(-2), "f32", 0)
  h.check(tensor.new({1, inf}):norm(3), "f32", inf)
  assert(h.is_nan(tensor.new({1, nan}):norm(3):item()))
  h.check(tensor.zeros(0):norm(3), "f32", 0)
end)

h.test("norm of a huge order: the gradient is the norm's", function()
  -- d/dx (sum |x|^3)^(1/3) = x |x| / N^2, N^3 = 27 + 64 = 91.
  local x = tensor.new({3, -4}, {dtype = "f64"}):requires_grad(true)
  x:norm(3):backward()
  local n2 = 91 ^ (2 / 3)
  h.near(x:grad(), {9 / n2, -16 / n2}, h.F64)
  local y = tensor.new({1, 2}, {dtype = "f64"}):requires_grad(true)
  y:norm(1e300):backward()
  h.near(y:grad(), {0, 1}, h.F64)
  local z = tensor.zeros(2, {dtype = "f64"}):requires_grad(true)
  z:norm(3):backward()
  h.check(z:grad(), "f64", {0, 0})
end)

h.bad(function() return tensor.zeros(0, 3):norm(math.huge) end,
      "norm: the inf norm of an empty tensor has no value")
h.bad(function() return tensor.zeros(0, 3):norm(-math.huge, 1) end,
      "norm: the -inf norm of an empty dimension 1 has no value")

h.test("the inf norm over a non-empty dim of an empty tensor is empty", function()
  h.shape(tensor.zeros(0, 3):norm(math.huge, 2), {0})
end)

h.done("test_tensor_edges")
