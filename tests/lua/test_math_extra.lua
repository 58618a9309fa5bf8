-- test_math_extra.lua - isclose, allclose, lerp, addcmul, addcdiv,
-- clamp_min, clamp_max, xlogy, one_hot and the random fills (uniform_,
-- normal_, bernoulli, bernoulli_, multinomial). Expected values are by hand
-- or from PyTorch 1.13 / NumPy (pasted); random ones are checked
-- statistically on fixed seeds and against tensor.rand/randn's stream.
local h = dofile("helpers.lua")
local gh = dofile("grad_helpers.lua")(h)
local values, gradcheck = gh.values, gh.gradcheck

local inf, nan = math.huge, 0 / 0
local T, F = true, false

-- ---------------------------------------------------------------------------
h.test("isclose: PyTorch's values, infinities, NaN", function()
  local a = tensor.new({1, 1 + 1e-6, 1 + 1e-4, inf, inf, -inf, nan, nan, 0, 1e-9})
  local b = tensor.new({1, 1, 1, inf, -inf, -inf, nan, 1, 1e-9, 0})
  -- torch.isclose(a, b) and np.isclose(a, b) (float32)
  h.check(a:isclose(b), "bool", {T, T, F, T, F, T, F, F, T, T})
  h.check(tensor.isclose(a, b, {equal_nan = true}), "bool", {T, T, F, T, F, T, T, F, T, T})
  h.check(a:isclose(b, {rtol = 0, atol = 0}), "bool", {T, F, F, T, F, T, F, F, F, F})
  -- |a - b| <= rtol |b|, the bound included: 1 <= 0.01 * 100.
  h.check(tensor.new({100, 101, 1e6}, {dtype = "f64"}):isclose(
    tensor.new({101, 100, 1e6 + 5}, {dtype = "f64"}), {rtol = 1e-2, atol = 0}), "bool", {T, T, T})
  h.check(tensor.new({100.0}):isclose(tensor.new({98.9}), {rtol = 1e-2, atol = 0}), "bool", {F})
  -- atol alone
  h.check(tensor.new({0, 0, 0}):isclose(tensor.new({0.05, -0.1, 0.2}), {atol = 0.1, rtol = 0}),
          "bool", {T, T, F})
  -- integers, a number, broadcasting, mixed dtypes
  h.check(tensor.new({1, 2, 3}):isclose(tensor.new({1, 2, 4})), "bool", {T, T, F})
  h.check(tensor.new({1, 1.000001, 2}):isclose(1), "bool", {T, T, F})
  h.check(tensor.new({{1}, {2}}):isclose(tensor.new({1.0, 2.0}, {dtype = "f64"})), "bool",
          {{T, F}, {F, T}})
end)

h.test("allclose gives a Lua boolean", function()
  local a = tensor.new({1, 2, 3})
  assert(a:allclose(tensor.new({1, 2, 3 + 1e-6})) == true)
  assert(a:allclose(tensor.new({1, 2, 3.1})) == false)
  assert(tensor.allclose(a, a * 1.05, {rtol = 0.06}) == true)
  assert(tensor.new({nan}):allclose(tensor.new({nan})) == false)
  assert(tensor.new({nan}):allclose(tensor.new({nan}), {equal_nan = true}) == true)
  assert(tensor.new({inf, -inf}):allclose(tensor.new({inf, -inf})) == true)
  assert(type((a + 1):allclose(a + 1)) == "boolean")
end)

h.test("isclose, allclose: errors", function()
  local a = tensor.new({1, 2})
  h.err(function() a:isclose(a, {rtol = -1}) end, "rtol and atol must be >= 0")
  h.err(function() a:isclose(a, {tol = 1}) end, "unknown option 'tol'")
  h.err(function() a:isclose(a, {rtol = "x"}) end, "rtol must be a number")
  h.err(function() a:allclose(a, {equal_nan = 1}) end, "equal_nan must be a boolean")
  h.err(function() a:isclose("x") end, "isclose")
  h.err(function() a:isclose(tensor.new({1, 2, 3})) end, "")
  h.still_works()
end)

-- ---------------------------------------------------------------------------
h.test("lerp, addcmul, addcdiv, clamp_min, clamp_max: values", function()
  local a, b = tensor.new({0, 1, 2}), tensor.new({10, 11, 12})
  h.check(a:lerp(b, 0.25), "f32", {2.5, 3.5, 4.5})
  h.check(tensor.lerp(a, b, tensor.new({0, 0.5, 1})), "f32", {0, 6, 12})
  -- exact at both ends, also where a + (b - a) would round
  local x, y = tensor.new({0.1, 1e8}), tensor.new({0.7, 3})
  h.check(x:lerp(y, 1), "f32", y:tolist(), h.EXACT)
  h.check(x:lerp(y, 0), "f32", x:tolist(), h.EXACT)
  h.check(a:lerp(20, 0.5), "f32", {10, 10.5, 11})
  -- t + value a b, t + value a / b (torch.addcdiv: 1.3, 2.3333333)
  local t = tensor.new({1, 2}, {dtype = "f32"})
  h.check(t:addcmul(tensor.new({3, 4}), tensor.new({5, 6}), {value = 0.5}), "f32", {8.5, 14})
  h.check(tensor.addcmul(t, tensor.new({3, 4}), tensor.new({5, 6})), "f32", {16, 26})
  h.check(t:addcdiv(tensor.new({3, 4}), tensor.new({5, 6}), {value = 0.5}), "f32",
          {1.2999999523162842, 2.3333332538604736}, h.EXACT)
  h.check(tensor.new({1, 2}, {dtype = "i64"}):addcmul(tensor.new({2}), tensor.new({3}), {value = 2}),
          "i64", {13, 14})
  local c = tensor.new({-2, -0.5, 0.5, 3, nan})
  h.check(c:clamp_min(0), "f32", {0, 0, 0.5, 3, nan})
  h.check(c:clamp_max(0.5), "f32", {-2, -0.5, 0.5, 0.5, nan})
  h.check(c:clamp_min(tensor.new({0, 0, 1, 1, 1})), "f32", {0, 0, 1, 3, nan})
  h.check(tensor.clamp_max(c, tensor.new({0})), "f32", {-2, -0.5, 0, 0, nan})
  h.check(tensor.new({-3, 4}):clamp_min(0), "i64", {0, 4})
end)

h.test("xlogy: PyTorch's values", function()
  local x = tensor.new({0, 0, 2, 1, 0})
  local y = tensor.new({0, nan, 3, 0, inf})
  h.check(x:xlogy(y), "f32", {0, nan, 2.1972246170043945, -inf, 0}, h.TRANS)
  h.check(tensor.xlogy(x, 2), "f32", {0, 0, 2 * math.log(2), math.log(2), 0}, h.TRANS)
  h.check(tensor.xlogy(3, tensor.new({1, math.exp(1)}, {dtype = "f64"})), "f64", {0, 3}, h.F64)
  h.check(tensor.new({1, 2}):xlogy(tensor.new({4, 8})), "f32", {math.log(4), 2 * math.log(8)},
          h.TRANS)
end)

gradcheck("lerp by a number", function(a, b) return a:lerp(b, 0.3) end,
          {values({2, 3}, -2, 2), values({2, 3}, -2, 2)})
gradcheck("lerp by a number >= 0.5", function(a, b) return a:lerp(b, 0.8) end,
          {values({2, 3}, -2, 2), values({2, 3}, -2, 2)})
gradcheck("lerp by a tensor", function(a, b, w) return a:lerp(b, w) end,
          {values({2, 3}, -2, 2), values({3}, -2, 2), values({2, 3}, -0.4, 1.2)})
gradcheck("addcmul", function(t, a, b) return t:addcmul(a, b, {value = -1.5}) end,
          {values({2, 3}, -2, 2), values({2, 3}, -2, 2), values({3}, -2, 2)})
gradcheck("addcdiv", function(t, a, b) return t:addcdiv(a, b, {value = 0.5}) end,
          {values({2, 3}, -2, 2), values({2, 3}, -2, 2), values({2, 3}, 0.5, 2)})
gradcheck("clamp_min and clamp_max by numbers",
          function(x) return x:clamp_min(-0.5) + x:clamp_max(0.5) * 2 end,
          {{{-2, -0.7, -0.3}, {0.2, 0.6, 1.9}}})
gradcheck("clamp_min by a tensor", function(x, m) return x:clamp_min(m) end,
          {{{-2, -0.7, -0.3}, {0.2, 0.6, 1.9}}, {{0.1, 0.1, 0.1}, {0.5, 0.5, 0.5}}})
gradcheck("xlogy", function(x, y) return x:xlogy(y) end,
          {values({2, 3}, 0.2, 2), values({2, 3}, 0.2, 3)})
h.test("xlogy: no gradient through the x = 0 branch (PyTorch 2's rule)", function()
  local x = tensor.new({0, 2}, {dtype = "f64"}):requires_grad(true)
  local y = tensor.new({3, 3}, {dtype = "f64"}):requires_grad(true)
  x:xlogy(y):sum():backward()
  h.check(x:grad(), "f64", {0, math.log(3)}, h.F64)
  h.check(y:grad(), "f64", {0, 2 / 3}, h.F64)
end)

h.test("composites: errors", function()
  local a = tensor.new({1, 2})
  h.err(function() a:addcmul(a, a, {scale = 2}) end, "unknown option 'scale'")
  h.err(function() a:addcdiv(a, 3) end, "addcdiv")
  h.err(function() a:lerp(a) end, "lerp")
  h.err(function() a:clamp_min("x") end, "clamp_min")
  h.err(function() a:clamp_max() end, "clamp_max")
  h.still_works()
end)

-- ---------------------------------------------------------------------------
h.test("one_hot: 1-based classes, i64 out", function()
  h.check(tensor.one_hot(tensor.new({3, 1, 2}), 4), "i64", {{0, 0, 1, 0}, {1, 0, 0, 0}, {0, 1, 0, 0}})
  -- default num_classes: the largest index
  h.check(tensor.new({2, 3}):one_hot(), "i64", {{0, 1, 0}, {0, 0, 1}})
  -- torch one_hot([[2, 0], [1, 3]], 4) in 1-based indices
  h.check(tensor.new({{3, 1}, {2, 4}}):one_hot(4), "i64",
          {{{0, 0, 1, 0}, {1, 0, 0, 0}}, {{0, 1, 0, 0}, {0, 0, 0, 1}}})
  h.check(tensor.new({2, 1}):int():one_hot(2), "i64", {{0, 1}, {1, 0}})
  h.shape(tensor.new({}, {dtype = "i64"}):one_hot(5), {0, 5})
  -- lazy indices (computed, then read)
  h.check((tensor.new({1, 2}) + 1):one_hot(3):sum(1), "i64", {0, 1, 1})
end)

h.test("one_hot: errors", function()
  h.err(function() tensor.new({1, 5}):one_hot(4) end, "class 5 is out of range 1..4")
  h.err(function() tensor.new({0, 1}):one_hot(4) end, "class 0 is out of range 1..4",
        "1-based")
  h.err(function() tensor.new({1.0, 2.0}):one_hot(3) end, "must be an i64 or i32 tensor")
  h.err(function() tensor.new({}, {dtype = "i64"}):one_hot() end, "cannot infer num_classes")
  h.err(function() tensor.new({1}):one_hot(0) end, "num_classes must be >= 1")
  h.still_works()
end)

-- ---------------------------------------------------------------------------
-- Random. Mean and variance bounds are 5 standard errors or more on fixed
-- seeds (they pass or fail the same way on every run).
local function moments(t)
  local list = h.flatten(t:double():tolist())
  local sum, n = 0, #list
  for _, v in ipairs(list) do sum = sum + v end
  local mean, squares = sum / n, 0
  for _, v in ipairs(list) do squares = squares + (v - mean) ^ 2 end
  return mean, squares / (n - 1), list
end

h.test("uniform_ and normal_: the stream of rand and randn", function()
  for _, dtype in ipairs({"f32", "f64"}) do
    tensor.manual_seed(2024)
    local a = tensor.empty(7, {dtype = dtype}):uniform_()
    local n = tensor.empty(2, 3, {dtype = dtype}):normal_()
    tensor.manual_seed(2024)
    h.eq(a:tolist(), tensor.rand(7, {dtype = dtype}):tolist())
    h.eq(n:tolist(), tensor.randn(2, 3, {dtype = dtype}):tolist())
  end
  -- The same seed and calls give the same numbers; the first values are
  -- pinned so that lazy, eager and native runs agree with each other.
  tensor.manual_seed(42)
  local u = tensor.zeros(3):uniform_(-1, 1)
  h.check(u, "f32", {0.2259, -0.0628, -0.8536}, {rel = 0, abs = 1e-4})
  tensor.manual_seed(42)
  h.eq(tensor.zeros(3):uniform_(-1, 1):tolist(), u:tolist())
end)

h.test("uniform_: range and moments", function()
  tensor.manual_seed(7)
  local t = tensor.empty(4000):uniform_(2, 4)
  assert(t:min():item() >= 2 and t:max():item() < 4, "values in [2, 4)")
  local mean, var = moments(t)
  assert(math.abs(mean - 3) < 0.05, "mean " .. mean)  -- standard error 0.009
  assert(math.abs(var - 1 / 3) < 0.04, "variance " .. var)
  local d = tensor.empty(20, 100, {dtype = "f64"}):uniform_()
  local dmean = moments(d)
  assert(math.abs(dmean - 0.5) < 0.035, "f64 mean " .. dmean)
  -- through a view: only the view's elements change
  local base = tensor.zeros(4, 5)
  base:narrow(2, 2, 2):uniform_(5, 6)
  h.check(base:select(2, 1), "f32", {0, 0, 0, 0})
  h.check(base:select(2, 5), "f32", {0, 0, 0, 0})
  assert(base:narrow(2, 2, 2):min():item() >= 5)
  -- a constant range
  h.check(tensor.empty(3):uniform_(1.5, 1.5), "f32", {1.5, 1.5, 1.5})
end)

h.test("normal_: moments", function()
  tensor.manual_seed(11)
  local t = tensor.empty(4000):normal_(1, 2)
  local mean, var = moments(t)
  assert(math.abs(mean - 1) < 0.16, "mean " .. mean)  -- standard error 0.032
  assert(math.abs(var - 4) < 0.5, "variance " .. var)
  local z = tensor.empty(10, {dtype = "f64"}):normal_(3, 0)
  h.check(z, "f64", {3, 3, 3, 3, 3, 3, 3, 3, 3, 3})
end)

h.test("uniform_ and normal_ as initialization of a parameter", function()
  tensor.manual_seed(3)
  local w = tensor.empty(3, 2):requires_grad(true)
  tensor.no_grad(function() w:uniform_(-0.1, 0.1) end)
  assert(w:abs():max():item() <= 0.1)
  local loss = (w * 2):sum()
  loss:backward()
  h.check(w:grad(), "f32", {{2, 2}, {2, 2}, {2, 2}})
end)

h.test("bernoulli and bernoulli_", function()
  tensor.manual_seed(5)
  h.check(tensor.bernoulli(tensor.zeros(50)), "f32", h.flatten(tensor.zeros(50):tolist()), h.EXACT)
  h.check(tensor.ones(2, 25, {dtype = "f64"}):bernoulli(), "f64",
          tensor.ones(2, 25):tolist(), h.EXACT)
  local p = tensor.full({4000}, 0.3)
  local draw = tensor.bernoulli(p)
  local mean = moments(draw)
  assert(math.abs(mean - 0.3) < 0.04, "mean " .. mean)  -- standard error 0.0072
  assert(draw:eq(0):logical_or(draw:eq(1)):all():item(), "only 0 and 1")
  -- per-element probabilities
  local mixed = tensor.new({0, 1, 0, 1}):reshape(4, 1):expand(4, 500):contiguous()
  h.check(tensor.bernoulli(mixed:float()):sum(2), "f32", {0, 500, 0, 500})
  -- in place: any dtype, p a number or a tensor that broadcasts
  local i = tensor.zeros(3000, {dtype = "i64"}):bernoulli_(0.75)
  local imean = moments(i)
  assert(math.abs(imean - 0.75) < 0.04, "i64 mean " .. imean)
  h.check(tensor.zeros(2, 3, {dtype = "bool"}):bernoulli_(1), "bool", {{T, T, T}, {T, T, T}})
  h.check(tensor.ones(2, 3):bernoulli_(0), "f32", {{0, 0, 0}, {0, 0, 0}})
  h.check(tensor.zeros(2, 3):bernoulli_(tensor.new({1.0, 0, 1})), "f32", {{1, 0, 1}, {1, 0, 1}})
  -- reproducible
  tensor.manual_seed(9)
  local first = tensor.bernoulli(tensor.full({20}, 0.5)):tolist()
  tensor.manual_seed(9)
  h.eq(tensor.bernoulli(tensor.full({20}, 0.5)):tolist(), first)
end)

h.test("bernoulli: errors", function()
  h.err(function() tensor.bernoulli(tensor.new({0, 1})) end, "must be an f32 or f64 tensor")
  h.err(function() tensor.zeros(2):bernoulli_(1.5) end, "p must be in [0, 1]")
  h.err(function() tensor.zeros(2):bernoulli_(tensor.new({0.5, 0.5, 0.5})) end, "")
  h.err(function() tensor.zeros(2):bernoulli_(tensor.zeros(3, 2)) end, "")
  h.err(function() tensor.new({1, 2}):uniform_() end, "uniform_: needs an f32 or f64 tensor")
  h.err(function() tensor.zeros(2):uniform_(1, 0) end, "expected finite low <= high")
  h.err(function() tensor.zeros(2):normal_(0, -1) end, "std >= 0")
  h.err(function() tensor.zeros(2):requires_grad(true):normal_() end, "normal_")
  h.still_works()
end)

h.test("multinomial", function()
  tensor.manual_seed(17)
  -- a single category with weight: always it
  h.check(tensor.new({0, 2.5, 0}):multinomial(6, {replacement = true}), "i64", {2, 2, 2, 2, 2, 2})
  -- without replacement: distinct, and all of them when n = categories
  for _ = 1, 5 do
    local picks = tensor.multinomial(tensor.new({1, 1, 5, 1, 0.5}), 5):tolist()
    table.sort(picks)
    h.eq(picks, {1, 2, 3, 4, 5})
  end
  local some = tensor.multinomial(tensor.new({1, 0, 3, 2, 0, 4}), 4):tolist()
  local seen = {}
  for _, k in ipairs(some) do
    assert(k ~= 2 and k ~= 5, "a zero-weight category was drawn")
    assert(not seen[k], "drawn twice: " .. k)
    seen[k] = true
  end
  -- rows of a 2-D probs, unnormalized weights; frequencies
  local probs = tensor.new({{1, 4}, {3, 1}, {0, 1}}, {dtype = "f64"})
  local draws = probs:multinomial(2000, {replacement = true})
  h.shape(draws, {3, 2000})
  local twos = draws:eq(2):sum(2):tolist()
  assert(math.abs(twos[1] - 1600) < 100, "row 1: " .. twos[1])  -- standard error 18
  assert(math.abs(twos[2] - 500) < 100, "row 2: " .. twos[2])
  assert(twos[3] == 2000, "row 3: " .. twos[3])
  -- the first pick without replacement follows the weights too
  local first = 0
  for _ = 1, 400 do
    if tensor.multinomial(tensor.new({1, 3}), 2):tolist()[1] == 2 then first = first + 1 end
  end
  assert(math.abs(first - 300) < 45, "first pick " .. first)  -- standard error 8.7
  -- computed (lazy) weights are read first
  h.check((tensor.new({1.0, 0, 0}) * 2 + tensor.new({0, 0, 0})):multinomial(3, {replacement = true}),
          "i64", {1, 1, 1})
  -- reproducible
  tensor.manual_seed(4)
  local a = tensor.multinomial(tensor.new({0.2, 0.3, 0.5}), 10, {replacement = true}):tolist()
  tensor.manual_seed(4)
  h.eq(tensor.multinomial(tensor.new({0.2, 0.3, 0.5}), 10, {replacement = true}):tolist(), a)
end)

h.test("multinomial: errors", function()
  local p = tensor.new({0.5, 0.5})
  h.err(function() p:multinomial(3) end, "cannot draw 3 samples from 2 categories")
  h.err(function() tensor.new({1, -0.5}):multinomial(1) end, "negative")
  h.err(function() tensor.new({{1, 1}, {0, 0}}):multinomial(1) end, "row 2 sums to zero")
  h.err(function() tensor.new({1, 0, 0}):multinomial(2) end, "1 nonzero categories")
  h.err(function() tensor.new({1, nan}):multinomial(1) end, "NaN")
  h.err(function() tensor.new({true, false}):multinomial(1) end, "must be a number tensor")
  h.err(function() tensor.zeros(2, 2, 2):multinomial(1) end, "1-D or 2-D")
  h.err(function() p:multinomial(0) end, "n must be >= 1")
  h.err(function() p:multinomial(1, {replace = true}) end, "unknown option 'replace'")
  h.still_works()
end)

h.test("random draws (factories, dropout too) and one_hot inside a scan body are errors in every mode", function()
  local function body_with(f)
    return function()
      tensor.scan(function(c, x) return c + f(x), nil end, tensor.zeros(2), tensor.zeros(3, 2))
    end
  end
  h.err(body_with(function(x) return tensor.bernoulli(x + 0.5) end), "bernoulli: cannot draw")
  h.err(body_with(function(x) return x:clone():uniform_() end), "uniform_: cannot draw",
        "before the scan")
  h.err(body_with(function(x) return x:clone():normal_() end), "normal_: cannot draw")
  h.err(body_with(function(x) return x:clone():bernoulli_(0.5) end), "bernoulli_: cannot draw")
  h.err(body_with(function(x)
    return x + tensor.multinomial(tensor.new({1.0, 1}), 2):double():float()
  end), "multinomial: cannot draw")
  h.err(body_with(function(x) return x + tensor.new({1, 2}):one_hot(2):sum(1):float() end),
        "one_hot")
  -- The factories too: in lazy mode the one traced draw would repeat every iteration.
  h.err(body_with(function(x) return x + tensor.rand(2) end), "rand: cannot draw")
  h.err(body_with(function(x) return x + tensor.randn(2) end), "randn: cannot draw")
  h.err(body_with(function(x) return x + tensor.randint(0, 3, 2):float() end), "randint: cannot draw")
  h.err(body_with(function(x) return x + tensor.randperm(2):float() end), "randperm: cannot draw")
  h.err(body_with(function(x) return require("nn").Dropout(0.5)(x) end), "rand: cannot draw")
  h.still_works()
end)

h.done("test_math_extra")
