-- test_autograd.lua - every differentiable op's gradient against central
-- finite differences in f64, plus the engine's rules: accumulation, no_grad,
-- detach, freed graphs and the errors for what cannot be differentiated.
-- Runs lazy, eager and compiled (tests/CMakeLists.txt): backward is recorded
-- like any other op, so all three must agree with the numbers.
local h = dofile("helpers.lua")

local gh = dofile("grad_helpers.lua")(h)
local values, f64, gradcheck = gh.values, gh.f64, gh.gradcheck

local S = {2, 3}
-- ---------------------------------------------------------------------------
-- Unary ops, on inputs inside their domain and away from kinks.
local unary_domains = {
  neg = {-2, 2}, abs = {0.2, 2}, square = {-2, 2}, exp = {-2, 2}, expm1 = {-2, 2},
  log = {0.2, 3}, log1p = {0.1, 3}, log2 = {0.2, 3}, sqrt = {0.2, 3}, rsqrt = {0.2, 3},
  reciprocal = {0.3, 3}, sin = {-3, 3}, cos = {-3, 3}, tan = {-1, 1}, tanh = {-2, 2},
  sigmoid = {-3, 3}, relu = {0.1, 2}, gelu = {-3, 3}, erf = {-2.5, 2.5}, erfc = {-2.5, 2.5},
  exp2 = {-3, 3}, frac = {0.1, 0.9}, asin = {-0.8, 0.8}, acos = {-0.8, 0.8}, atan = {-2, 2},
  sinh = {-2, 2}, cosh = {-2, 2}, asinh = {-2, 2}, acosh = {1.2, 3}, atanh = {-0.8, 0.8},
  log10 = {0.2, 3},
}
for name, domain in pairs(unary_domains) do
  gradcheck("unary " .. name, function(x) return x[name](x) end, {values(S, domain[1], domain[2])})
end
gradcheck("frac below zero", function(x) return x:frac() end, {values(S, -2.9, -2.1)})
gradcheck("flip", function(x) return x:flip(1, 2) end, {values(S, -2, 2)})
gradcheck("flip of a 3-D middle dim", function(x) return x:flip(2) * x end,
          {values({2, 3, 2}, -2, 2)})
gradcheck("relu below zero", function(x) return x:relu() end, {values(S, -2, -0.1)})
gradcheck("abs below zero", function(x) return x:abs() end, {values(S, -2, -0.1)})
gradcheck("gelu at zero and far out", function(x) return x:gelu() end, {{0, -9, 9}})
h.test("floor, round, sign have zero gradient", function()
  for _, op in ipairs({"floor", "ceil", "round", "trunc", "sign"}) do
    local x = f64(values(S, -2, 2)):requires_grad(true)
    x[op](x):sum():backward()
    h.eq(x:grad():tolist(), {{0, 0, 0}, {0, 0, 0}})
  end
end)

-- ---------------------------------------------------------------------------
-- Binary ops, with broadcasting, and with Lua numbers on either side.
local binary_domains = {
  add = {-2, 2, -2, 2}, sub = {-2, 2, -2, 2}, mul = {-2, 2, -2, 2}, div = {-2, 2, 0.5, 2},
  pow = {0.5, 2, -1.5, 1.5}, maximum = {-2, 2, -2, 2}, minimum = {-2, 2, -2, 2},
  atan2 = {-2, 2, 0.5, 2}, remainder = {0.1, 5, 0.7, 1.3},
}
for name, d in pairs(binary_domains) do
  gradcheck("binary " .. name, function(a, b) return a[name](a, b) end,
            {values(S, d[1], d[2]), values(S, d[3], d[4])})
  gradcheck("binary " .. name .. " broadcast [2,3] with [3]",
            function(a, b) return a[name](a, b) end, {values(S, d[1], d[2]), values({3}, d[3], d[4])})
  gradcheck("binary " .. name .. " broadcast [2,1] with [1,3]",
            function(a, b) return a[name](a, b) end,
            {values({2, 1}, d[1], d[2]), values({1, 3}, d[3], d[4])})
end
gradcheck("operators with numbers", function(x)
  return (x * 3 + 1) / 2 - x ^ 3 + 2 ^ x - (1 - x) * (4 / x) + x % 0.75
end, {values(S, 0.5, 2)})
h.test("maximum splits a tie", function()
  local a, b = f64({1, 2}):requires_grad(true), f64({1, 3}):requires_grad(true)
  a:maximum(b):sum():backward()
  h.eq(a:grad():tolist(), {0.5, 0}); h.eq(b:grad():tolist(), {0.5, 1})
end)
h.test("pow at a zero base", function()
  local a, b = f64({0, 0}):requires_grad(true), f64({2, 0}):requires_grad(true)
  a:pow(b):sum():backward()
  h.eq(a:grad():tolist(), {0, 0}); h.eq(b:grad():tolist(), {0, 0})
end)

gradcheck("where", function(a, b)
  return tensor.where(f64({{1, 0, 1}, {0, 1, 0}}):bool(), a, b)
end, {values(S, -1, 1), values({3}, -1, 1)})
gradcheck("clamp both sides", function(x) return x:clamp(-0.5, 0.5) end, {{{-0.9, -0.2, 0.3}, {0.7, 0.1, -0.6}}})
gradcheck("clamp low only", function(x) return x:clamp(0) end, {{{-0.9, -0.2, 0.3}, {0.7, 0.1, -0.6}}})
gradcheck("clone and contiguous", function(x) return x:t():contiguous() * x:clone():t() end,
          {values(S, -1, 1)})
h.test("cast f64 -> f32 -> f64 carries the gradient", function()
  local x = f64({1, 2, 3}):requires_grad(true)
  ;(x:float() * 2):double():sum():backward()
  h.eq(x:grad():tolist(), {2, 2, 2})
  h.eq(x:grad():dtype(), "f64")
end)

-- ---------------------------------------------------------------------------
-- Reductions, softmax, cumsum, matmul.
local M = {3, 4}
gradcheck("sum all", function(x) return x:sum() end, {values(M, -1, 1)})
gradcheck("sum dim", function(x) return x:sum(2) end, {values(M, -1, 1)})
gradcheck("sum dim keepdim", function(x) return x:sum(1, true) end, {values(M, -1, 1)})
gradcheck("mean all and dim", function(x) return x:mean() + x:mean(1):sum() end, {values(M, -1, 1)})
gradcheck("prod", function(x) return x:prod(2) end, {values(M, 0.5, 1.5)})
gradcheck("prod all", function(x) return x:prod() end, {values(M, 0.5, 1.5)})
gradcheck("max and min all", function(x) return x:max() - x:min() end, {values(M, -1, 1)})
gradcheck("max(dim) values", function(x) local v = x:max(2) return v end, {values(M, -1, 1)})
gradcheck("min(dim, keepdim) values", function(x) local v = x:min(1, true) return v end,
          {values(M, -1, 1)})
gradcheck("softmax last dim", function(x) return x:softmax(2) end, {values(M, -2, 2)})
gradcheck("softmax first dim", function(x) return x:softmax(1) end, {values(M, -2, 2)})
gradcheck("log_softmax", function(x) return x:log_softmax(2) end, {values(M, -2, 2)})
gradcheck("cumsum", function(x) return x:cumsum(2) + x:cumsum(1) end, {values(M, -1, 1)})
gradcheck("matmul 2-d", function(a, b) return a:matmul(b) end, {values({2, 3}, -1, 1), values({3, 4}, -1, 1)})
gradcheck("matmul batched with broadcast", function(a, b) return a:matmul(b) end,
          {values({2, 2, 3}, -1, 1), values({3, 2}, -1, 1)})
gradcheck("matmul vector-matrix and matrix-vector", function(v, m)
  return v:matmul(m):sum() + m:t():matmul(v):sum()
end, {values({3}, -1, 1), values({3, 2}, -1, 1)})
gradcheck("dot", function(a, b) return a:matmul(b) end, {values({4}, -1, 1), values({4}, -1, 1)})

-- ---------------------------------------------------------------------------
-- Views and joins.
gradcheck("reshape, view, flatten", function(x)
  return x:reshape(4, 3):view(2, 6):flatten() * tensor.arange(12):double()
end, {values(M, -1, 1)})
local weights43 = values({4, 3}, -1, 1)
gradcheck("transpose, t, permute", function(x)
  return x:transpose(1, 2):t():permute(2, 1) * f64(weights43)
end, {values(M, -1, 1)})
gradcheck("narrow and select", function(x)
  return x:narrow(2, 2, 2):sum(2) + x:select(1, 2):narrow(1, 1, 3) + x[3]:narrow(1, 2, 3)
end, {values(M, -1, 1)})
gradcheck("indexing t[{i, j}]", function(x) return x[{2, 3}] * x[{1, 1}] end, {values(M, -1, 1)})
local weights34 = values({3, 4}, -1, 1)
gradcheck("squeeze, unsqueeze, expand", function(x)
  return x:unsqueeze(1):expand(3, 1, 4):squeeze(2) * f64(weights34)
end, {values({4}, -1, 1)})
gradcheck("cat and stack", function(a, b)
  return tensor.cat({a, b, a}, 2):sum(1) + tensor.stack({a:sum(2), b:sum(2)}, 1):sum()
end, {values({2, 2}, -1, 1), values({2, 3}, -1, 1)})
local gather_index = tensor.new({{1, 3, 3}, {2, 1, 1}})
gradcheck("gather", function(x) return x:gather(2, gather_index) end, {values({2, 4}, -1, 1)})
local select_index = tensor.new({3, 1, 3})
gradcheck("index_select", function(x) return x:index_select(1, select_index) end,
          {values({4, 2}, -1, 1)})
gradcheck("scatter_add", function(base, src)
  return base:scatter_add(2, gather_index, src)
end, {values({2, 4}, -1, 1), values({2, 3}, -1, 1)})
gradcheck("index_add", function(base, src)
  return base:index_add(1, select_index, src)
end, {values({4, 2}, -1, 1), values({3, 2}, -1, 1)})

-- ---------------------------------------------------------------------------
-- The engine.
h.test("gradients accumulate across backward calls until cleared", function()
  local w = f64({1, 2}):requires_grad(true)
  ;(w * 3):sum():backward()
  ;(w * w):sum():backward()
  h.eq(w:grad():tolist(), {3 + 2, 3 + 4})
  w:set_grad(nil)
  assert(w:grad() == nil)
  ;(w * 5):sum():backward()
  h.eq(w:grad():tolist(), {5, 5})
end)

h.test("a value used twice gets both gradients", function()
  local x = f64({0.5, -1}):requires_grad(true)
  local y = x:tanh()
  ;(y * y + y):sum():backward()
  local t1, t2 = math.tanh(0.5), math.tanh(-1)
  h.near(x:grad(), {(2 * t1 + 1) * (1 - t1 * t1), (2 * t2 + 1) * (1 - t2 * t2)}, {rel = 1e-12, abs = 1e-12}, "f64")
end)

h.test("no_grad, detach, requires_grad flags", function()
  local w = f64({1, 2}):requires_grad(true)
  assert(w:requires_grad() and w:is_leaf())
  local y = w * 2
  assert(y:requires_grad() and not y:is_leaf())
  local z, n = tensor.no_grad(function(a) return w * a, 7 end, 3)
  assert(n == 7 and not z:requires_grad())
  assert(tensor.is_grad_enabled())
  local d = y:detach()
  assert(not d:requires_grad() and d:is_leaf())
  h.eq(d:tolist(), {2, 4})
  -- an error inside no_grad restores grad mode
  assert(not pcall(tensor.no_grad, function() error("boom") end))
  assert(tensor.is_grad_enabled())
  -- in-place writes under no_grad are what optimizers do
  tensor.no_grad(function() w:sub_(w:grad() or 0.5) end)
  h.eq(w:tolist(), {0.5, 1.5})
end)

h.test("backward with an explicit gradient for a non-scalar", function()
  local x = f64({1, 2, 3}):requires_grad(true)
  local y = x * x
  y:backward(f64({1, 0.5, 2}))
  h.eq(x:grad():tolist(), {2, 2, 12})
end)

h.test("errors", function()
  local x = f64({1, 2}):requires_grad(true)
  h.err(function() (x * 2):backward() end, "single-element")
  local loss = (x * x):sum()
  loss:backward()
  h.err(function() loss:backward() end, "already used by an earlier backward")
  h.err(function() x:add_(1) end, "cannot write in place into a leaf")
  h.err(function() (x * 1):mul_(2) end, "cannot write in place")
  h.err(function() x[1] = 5 end, "in place")
  h.err(function() tensor.zeros(2):copy_(x) end, "requires grad")
  h.err(function() tensor.arange(3):requires_grad(true) end, "only floating")
  h.err(function() tensor.zeros(2):backward() end, "does not require grad")
  h.err(function() (x * 2):requires_grad(false) end, "detach")
  h.err(function() x:set_grad(tensor.zeros(3)) end, "set_grad")
  h.err(function() x:backward(f64({1, 2, 3})) end, "shape")
  -- and the process is still usable
  local y = f64({3}):requires_grad(true)
  ;(y * y):sum():backward()
  h.eq(y:grad():tolist(), {6})
end)

h.test("eager in-place change of a saved value is detected", function()
  if not tensor.is_eager() then return end
  local x = f64({1, 2}):requires_grad(true)
  local c = f64({3, 4})
  local y = (x * c):sum()
  c:add_(1)
  h.err(function() y:backward() end, "modified in place")
end)

h.test("lazy: saved values are snapshots, later writes do not change the gradient", function()
  if tensor.is_eager() then return end
  local x = f64({1, 2}):requires_grad(true)
  local c = f64({3, 4})
  local y = (x * c):sum()
  c:add_(1)
  y:backward()
  h.eq(x:grad():tolist(), {3, 4})
end)

h.test("a training step records one graph per step", function()
  if tensor.is_eager() then return end
  local w = tensor.randn(8, 4):requires_grad(true)
  local x = tensor.randn(16, 8)
  local first
  for step = 1, 4 do
    local loss = (x:matmul(w):tanh() ^ 2):mean()
    loss:backward()
    tensor.no_grad(function() w:sub_(w:grad() * 0.1) end)
    w:set_grad(nil)
    tensor.mark_step()
    if step == 2 then first = tensor.metrics().distinct_graphs end
  end
  assert(tensor.metrics().distinct_graphs == first, "steps after the second recompiled")
end)

h.test("cat and stack of more than 32 tensors give each its gradient", function()
  -- Inputs past the 31st have no "saved" bit in the gradient table.
  local xs = {}
  for i = 1, 40 do xs[i] = f64({i, -i}):requires_grad(true) end
  local w = tensor.arange(1, 41):double():unsqueeze(2)
  local loss = (tensor.stack(xs, 1) * w):sum() + (tensor.cat(xs, 1) * w:expand(40, 2):reshape(80)):sum()
  loss:backward()
  for i = 1, 40 do h.near(xs[i]:grad(), {2 * i, 2 * i}, nil, "f64") end
end)

h.done("test_autograd")
