-- test_sorting.lua - sort, argsort, msort, topk, kthvalue, median (one IR op,
-- argsort, and gathers), and the statistics composed of existing ops: var,
-- std, var_mean, std_mean, norm, logsumexp, amax, amin, cumprod, cummax,
-- cummin. Values are
-- checked against hand-computed numbers, plain-Lua references and PyTorch
-- 1.13 output pasted as constants; gradients against finite differences in
-- f64. Runs lazy, eager and compiled (tests/CMakeLists.txt).
local h = dofile("helpers.lua")
local gh = dofile("grad_helpers.lua")(h)
local values, f64, gradcheck = gh.values, gh.f64, gh.gradcheck

local nan, inf = 0 / 0, math.huge

-- A stable sort of a plain list in Lua: positions ordered by value (NaN
-- largest), ties by position. The independent reference for sort.
local function lua_order(list, descending)
  local order = {}
  for i = 1, #list do order[i] = i end
  local function key_less(a, b)
    local x, y = list[a], list[b]
    if x ~= x then return false end
    if y ~= y then return true end
    return x < y
  end
  table.sort(order, function(a, b)
    local before, after
    if descending then before, after = key_less(b, a), key_less(a, b)
    else before, after = key_less(a, b), key_less(b, a) end
    if before then return true end
    if after then return false end
    return a < b
  end)
  return order
end

-- Groups of checks made after one sync of every tensor they read, all
-- groups together: one graph (one compile in the compiled mode) instead of
-- one per check. group(name, fn) runs fn(c) at once, c.check and c.near
-- queue checks (h.check, h.near); run_groups() syncs and runs each group's
-- checks as an h.test.
local groups = {}
local function group(name, fn)
  local items, c = {}, {}
  function c.check(...) items[#items + 1] = {h.check, table.pack(...)} end
  function c.near(...) items[#items + 1] = {h.near, table.pack(...)} end
  local ok, message = xpcall(fn, debug.traceback, c)
  local line = debug.getinfo(2, "l").currentline
  groups[#groups + 1] = {name = name .. ", line " .. line, items = items, ok = ok, message = message}
end
local function run_groups()
  local tensors = {}
  for _, g in ipairs(groups) do
    for _, item in ipairs(g.items) do tensors[#tensors + 1] = item[2][1] end
  end
  tensor.sync(table.unpack(tensors))
  for _, g in ipairs(groups) do
    h.test(g.name, function()
      if not g.ok then error(g.message, 0) end
      for _, item in ipairs(g.items) do item[1](table.unpack(item[2], 1, item[2].n)) end
    end)
  end
end

-- ---------------------------------------------------------------------------
group("sort: ties keep their order, NaN sorts largest, -0 equals 0", function(c)
  -- PyTorch 1.13, torch.sort(x, stable=True), indices + 1:
  local x = tensor.new({2, nan, -0.0, 0.0, 1, nan, 2})
  local v, i = x:sort()
  c.check(v, "f32", {-0.0, 0, 1, 2, 2, nan, nan})
  c.check(i, "i64", {3, 4, 5, 1, 7, 2, 6})
  v, i = x:sort(1, true)
  c.check(v, "f32", {nan, nan, 2, 2, 1, -0.0, 0})
  c.check(i, "i64", {2, 6, 1, 7, 5, 3, 4})
  c.check(tensor.argsort(x, 1, true), "i64", {2, 6, 1, 7, 5, 3, 4})
  c.check(x:argsort(), "i64", {3, 4, 5, 1, 7, 2, 6})
end)

group("sort along each dim of a 2-D tensor, and of a transposed view", function(c)
  local rows = {{3, 1, 2, 1}, {0, -5, 7, 7}, {2, 2, 2, 1}}
  local t = tensor.new(rows, {dtype = "f64"})
  local v, i = t:sort(2)
  c.check(v, "f64", {{1, 1, 2, 3}, {-5, 0, 7, 7}, {1, 2, 2, 2}})
  c.check(i, "i64", {{2, 4, 3, 1}, {2, 1, 3, 4}, {4, 1, 2, 3}})
  v, i = t:sort(1, true)
  c.check(v, "f64", {{3, 2, 7, 7}, {2, 1, 2, 1}, {0, -5, 2, 1}})
  c.check(i, "i64", {{1, 3, 2, 2}, {3, 1, 1, 1}, {2, 2, 3, 3}})
  -- sorting a transposed view along dim 2 is sorting t along dim 1
  local tv, ti = t:t():sort(2)
  c.check(ti:t(), "i64", {{2, 2, 1, 1}, {3, 1, 3, 3}, {1, 3, 2, 2}})
  c.check(tv:t(), "f64", {{0, -5, 2, 1}, {2, 1, 2, 1}, {3, 2, 7, 7}})
  -- -1 is the last dim; msort sorts along the first
  c.check(t:sort(-1), "f64", {{1, 1, 2, 3}, {-5, 0, 7, 7}, {1, 2, 2, 2}})
  c.check(t:msort(), "f64", {{0, -5, 2, 1}, {2, 1, 2, 1}, {3, 2, 7, 7}})
  c.check(tensor.msort(t), "f64", {{0, -5, 2, 1}, {2, 1, 2, 1}, {3, 2, 7, 7}})
end)

group("sort of integers, bools, a 0-dim tensor and an empty tensor", function(c)
  local v, i = tensor.new({5, -3, 9, -3, 0}):sort(1, true)
  c.check(v, "i64", {9, 5, 0, -3, -3})
  c.check(i, "i64", {3, 1, 5, 2, 4})
  v, i = tensor.new({5, -3, 9}):int():sort()
  c.check(v, "i32", {-3, 5, 9})
  c.check(i, "i64", {2, 1, 3})
  v, i = tensor.new({true, false, true, false}):sort()
  c.check(v, "bool", {false, false, true, true})
  c.check(i, "i64", {2, 4, 1, 3})
  v, i = tensor.new(2.5):sort()
  c.check(v, "f32", 2.5)
  c.check(i, "i64", 1)
  v, i = tensor.zeros(2, 0):sort()
  h.shape(v, {2, 0})
  c.check(i, "i64", {{}, {}}, nil, {2, 0})
end)

h.test("sort of random rows agrees with a stable sort in Lua, both directions", function()
  tensor.manual_seed(7)
  -- few distinct values, so that there are many ties
  local t = (tensor.rand(6, 37) * 5):floor()
  local rows = t:tolist()
  local up_v, up_i = t:sort(2)
  local down_v, down_i = t:sort(2, true)
  tensor.sync(up_v, up_i, down_v, down_i)
  for _, descending in ipairs({false, true}) do
    local v, i = up_v, up_i
    if descending then v, i = down_v, down_i end
    local got_v, got_i = v:tolist(), i:tolist()
    for r = 1, #rows do
      local order = lua_order(rows[r], descending)
      h.eq(got_i[r], order)
      for k = 1, #order do assert(got_v[r][k] == rows[r][order[k]]) end
    end
  end
end)

-- ---------------------------------------------------------------------------
group("topk: largest and smallest, sorted, ties take the first position", function(c)
  local x = tensor.new({{1, 5, 3, 5, -2}, {0, 0, 9, 8, 9}})
  local v, i = x:topk(3)
  c.check(v, "i64", {{5, 5, 3}, {9, 9, 8}})
  c.check(i, "i64", {{2, 4, 3}, {3, 5, 4}})
  v, i = x:topk(2, 2, false)
  c.check(v, "i64", {{-2, 1}, {0, 0}})
  c.check(i, "i64", {{5, 1}, {1, 2}})
  v, i = tensor.topk(x, 1, 1)
  c.check(v, "i64", {{1, 5, 9, 8, 9}})
  c.check(i, "i64", {{1, 1, 2, 2, 2}})
  -- NaN is the largest (PyTorch: values nan, 2)
  v, i = tensor.new({2, nan, 1, 2}):topk(2)
  c.check(v, "f32", {nan, 2})
  c.check(i, "i64", {2, 1})
  v, i = x:topk(0)
  h.shape(v, {2, 0})
  h.shape(i, {2, 0})
end)

group("kthvalue and median (the lower one), with and without keepdim", function(c)
  local x = tensor.new({{3, 1, 4, 1, 5}, {9, 2, 6, 5, 3}}, {dtype = "f64"})
  local v, i = x:kthvalue(2)
  c.check(v, "f64", {1, 3})
  c.check(i, "i64", {4, 5})
  v, i = x:kthvalue(1, 1, true)
  c.check(v, "f64", {{3, 1, 4, 1, 3}})
  c.check(i, "i64", {{1, 1, 1, 1, 2}})
  v, i = x:median(2)
  c.check(v, "f64", {3, 5})
  c.check(i, "i64", {1, 4})
  v, i = x:median(1, true)  -- two rows: the lower of each pair
  c.check(v, "f64", {{3, 1, 4, 1, 3}})
  c.check(i, "i64", {{1, 1, 1, 1, 2}})
  -- PyTorch: median of [4, 1, 3, 2] is 2; of [3, 1, 2, 0] along dim 1 is 1 at index 1 (0-based)
  c.check(tensor.new({4, 1, 3, 2}):median(), "i64", 2)
  c.check(tensor.median(tensor.new({{4.5, 1}, {3, 2}})), "f32", 2)
  v, i = tensor.new({{3, 1, 2, 0}}):median(2)
  c.check(v, "i64", {1})
  c.check(i, "i64", {2})
  c.check(tensor.new(7.5):median(), "f32", 7.5)
end)

group("median of a line holding NaN is NaN at its first NaN (as PyTorch)", function(c)
  -- PyTorch 1.13: values [nan, 1], indices [1, 1] (0-based)
  local v, i = tensor.new({{1, nan, 2, nan}, {3, 1, 2, 0}}):median(2)
  c.check(v, "f32", {nan, 1})
  c.check(i, "i64", {2, 2})
  c.check(tensor.new({1, nan, 2}):median(), "f32", nan)
  -- kthvalue orders NaN last: the 3rd of [1, nan, 2] is NaN at 2, the 2nd is 2 at 3
  v, i = tensor.new({1, nan, 2}):kthvalue(3)
  c.check(v, "f32", nan)
  c.check(i, "i64", 2)
  v, i = tensor.new({1, nan, 2}):kthvalue(2)
  c.check(v, "f32", 2)
  c.check(i, "i64", 3)
end)

-- ---------------------------------------------------------------------------
-- The numbers below are PyTorch 1.13's, in f64.
local X = {{0.5, -1.25, 2, 0.5, -3}, {4, 4, -0.0, 1.5, 0.0}}

group("var and std: dims, correction, unbiased, keepdim, no dim", function(c)
  local x = f64(X)
  c.near(x:var(2), {3.6875, 4.05}, h.F64, "f64")
  c.near(x:var(1, {unbiased = false}), {3.0625, 6.890625, 1, 0.25, 2.25}, h.F64)
  c.near(x:var(1, {correction = 0}), {3.0625, 6.890625, 1, 0.25, 2.25}, h.F64)
  c.near(x:var(), 4.7229166666666667, h.F64)
  c.near(x:std(2), {1.9202864369, 2.0124611797}, {rel = 1e-10, abs = 0})
  c.near(x:std(), 2.1732272469, {rel = 1e-10, abs = 0})
  c.near(x:std(1, {correction = 0}), {1.75, 2.625, 1, 0.5, 1.5}, h.F64)
  c.near(x:var(2, true), {{3.6875}, {4.05}}, h.F64)
  c.near(x:var(2, {keepdim = true, correction = 2}), {{3.6875 * 4 / 3}, {4.05 * 4 / 3}}, h.F64)
  c.near(tensor.var(x, 2), {3.6875, 4.05}, h.F64)
  -- one element: 0 / 0 with the default correction
  c.check(tensor.new({3.0}):var(), "f32", nan)
  -- integers compute in f32, as mean does
  c.check(tensor.new({1, 2, 3, 4}):var(), "f32", 5 / 3, h.F32)
  -- f32: sum of squared deviations, against the same in Lua doubles
  tensor.manual_seed(3)
  local big = tensor.rand(3, 500) * 10 + 1000
  local rows = big:tolist()
  local want = {}
  for r, row in ipairs(rows) do
    local mean = 0
    for _, v in ipairs(row) do mean = mean + v end
    mean = mean / #row
    local s = 0
    for _, v in ipairs(row) do s = s + (v - mean) ^ 2 end
    want[r] = s / (#row - 1)
  end
  c.near(big:var(2), want, {rel = 1e-4, abs = 0})
end)

group("var_mean and std_mean", function(c)
  local v, m = f64(X):var_mean(2)
  c.near(v, {3.6875, 4.05}, h.F64)
  c.near(m, {-0.25, 1.9}, h.F64)
  local s, m2 = tensor.std_mean(f64(X), 1, {correction = 0, keepdim = true})
  c.near(s, {{1.75, 2.625, 1, 0.5, 1.5}}, h.F64)
  c.near(m2, {{2.25, 1.375, 1, 1, -1.5}}, h.F64)
end)

group("norm: p = 2, 3, 1, inf, -inf, 0, fro; dims and keepdim", function(c)
  local x = f64(X)
  local tol = {rel = 1e-10, abs = 0}
  c.near(x:norm(), 7.0222859526, tol)
  c.near(x:norm(3), 5.5241704835, tol)
  c.near(x:norm(1, 2), {7.25, 9.5}, h.F64)
  c.near(x:norm(math.huge, 1), {4, 4, 2, 1.5, 3}, h.F64)
  c.near(x:norm("inf", 1), {4, 4, 2, 1.5, 3}, h.F64)
  c.near(x:norm("-inf", 2), {0.5, 0}, h.F64)
  c.near(x:norm(0, 2), {5, 3}, h.F64)
  c.near(x:norm("fro", 2), {3.8810436741, 5.8523499554}, tol)
  c.near(x:norm(2, 2, true), {{3.8810436741}, {5.8523499554}}, tol)
  c.near(tensor.norm(tensor.new({3, 4})), 5, h.F32)
end)

group("logsumexp: shifted by the maximum; -inf and +inf lines as PyTorch", function(c)
  local x = f64(X)
  local tol = {rel = 1e-10, abs = 1e-10}
  c.near(x:logsumexp(2), {2.3999649936, 4.7508103753}, tol)
  c.near(x:logsumexp(1),
         {4.0297504183, 4.0052337982, 2.1269280110, 1.8132616875, 0.0485873516}, tol)
  c.near(x:logsumexp(), 4.8418282408, tol)
  c.near(x:logsumexp(2, true), {{2.3999649936}, {4.7508103753}}, tol)
  -- exp(1000) overflows: only the shift keeps these finite
  c.near(tensor.new({{1000, 1000.5}, {-1000, -1001}}):logsumexp(2), {1000.9740600586, -999.6867675781},
         {rel = 1e-7, abs = 0})
  c.check(tensor.new({{-inf, -inf}, {inf, 1}, {nan, 1}}):logsumexp(2), "f32", {-inf, inf, nan})
  c.check(tensor.zeros(2, 0):logsumexp(2), "f32", {-inf, -inf})
end)

group("amax and amin: values only, any dim or all", function(c)
  local x = tensor.new({{1, 7, 3}, {7, -2, 0}})
  c.check(x:amax(), "i64", 7)
  c.check(x:amax(2), "i64", {7, 7})
  c.check(x:amin(1, true), "i64", {{1, -2, 0}})
  c.check(tensor.amin(x, -1), "i64", {1, -2})
end)

group("cumprod: floats, zeros, integers and bools (as i64)", function(c)
  -- PyTorch: cumprod along dim 2 of X
  c.near(f64(X):cumprod(2), {{0.5, -0.625, -1.25, -0.625, 1.875}, {4, 16, -0.0, -0.0, -0.0}},
         h.F64)
  c.check(tensor.new({1, 2, 3, 4, 5}):cumprod(1), "i64", {1, 2, 6, 24, 120})
  c.check(tensor.new({{1, 2}, {3, 4}}):int():cumprod(1), "i64", {{1, 2}, {3, 8}})
  c.check(tensor.new({true, true, false, true}):cumprod(1), "i64", {1, 1, 0, 0})
  -- a long line: against a running product in Lua
  local list, want, p = {}, {}, 1
  for k = 1, 37 do
    list[k] = 1 + (k % 5) / 40
    p = p * list[k]
    want[k] = p
  end
  c.near(f64(list):cumprod(1), want, {rel = 1e-14, abs = 0})
  c.check(tensor.new(3.5):cumprod(1), "f32", 3.5)
end)

group("cummax and cummin: a tie takes the later position, NaN stays (as PyTorch)", function(c)
  -- PyTorch 1.13 (indices + 1)
  local v, i = tensor.new({1, 3, 3, 2, nan, 5, nan, 1}):cummax(1)
  c.check(v, "f32", {1, 3, 3, 3, nan, nan, nan, nan})
  c.check(i, "i64", {1, 2, 3, 3, 5, 5, 7, 7})
  v, i = tensor.new({3, 1, 1, 2, nan, 0, nan}):cummin(1)
  c.check(v, "f32", {3, 1, 1, 1, nan, nan, nan})
  c.check(i, "i64", {1, 2, 3, 3, 5, 5, 7})
  v, i = tensor.new({{1, 4}, {3, 2}, {3, 5}}):cummax(1)
  c.check(v, "i64", {{1, 4}, {3, 4}, {3, 5}})
  c.check(i, "i64", {{1, 1}, {2, 1}, {3, 3}})
  v, i = tensor.cummin(tensor.new({true, false, true}), 1)
  c.check(v, "bool", {true, false, false})
  c.check(i, "i64", {1, 2, 2})
  v, i = tensor.new(2.5):cummax(1)
  c.check(v, "f32", 2.5)
  c.check(i, "i64", 1)
  -- a long line with many ties, against a running maximum in Lua
  local list, want_v, want_i = {}, {}, {}
  for k = 1, 45 do
    list[k] = (k * 7) % 11
    local best = want_v[k - 1]
    if not best or list[k] >= best then want_v[k], want_i[k] = list[k], k
    else want_v[k], want_i[k] = best, want_i[k - 1] end
  end
  v, i = tensor.new(list):cummax(1)
  c.check(v, "i64", want_v)
  c.check(i, "i64", want_i)
end)

-- ---------------------------------------------------------------------------
-- Gradients against finite differences (f64), several functions to a check
-- (their results flattened and joined) so that each check is one graph.
local function joined(...)
  local parts = {}
  for k, t in ipairs({...}) do parts[k] = t:reshape(-1) end
  return tensor.cat(parts, 1)
end
local S = {3, 5}
gradcheck("sort, topk, kthvalue, median values; var, std, norms of both signs", function(x)
  return joined(x:sort(2), x:sort(1, true) * x, x:msort(), x:topk(2), x:topk(2, 1, false),
                x:kthvalue(3, 2), x:median(1), x:median(), x:var(1), x:std(), x:norm(2, 1),
                x:norm(3))
end, {values(S, -2, 2)})
gradcheck("var, std, norms, logsumexp, amax, amin, cumprod, cummax, cummin", function(x)
  return joined(x:var(2), x:var({correction = 0}), x:std(1, true), x:norm(), x:norm(3, 2),
                x:norm(1, 1), x:norm("inf", 2), x:logsumexp(2), x:logsumexp(), x:amax(2),
                x:amin(1), x:cumprod(2), x:cumprod(1), x:cummax(2), x:cummin(1))
end, {values(S, 0.2, 2)})

group("gradients at ties and zeros, as PyTorch", function(c)
  -- amax splits the gradient among ties: [0, 0.5, 0.5]
  local x = f64({1, 3, 3}):requires_grad(true)
  x:amax():backward()
  c.near(x:grad(), {0, 0.5, 0.5}, h.F64)
  -- the inf-norm likewise, with the sign: [0, -0.5, 0.5]
  x = f64({1, -3, 3}):requires_grad(true)
  x:norm(math.huge):backward()
  c.near(x:grad(), {0, -0.5, 0.5}, h.F64)
  -- std and the 2-norm of constants: 0, not NaN
  x = f64({0, 0, 0}):requires_grad(true)
  x:std():backward()
  c.near(x:grad(), {0, 0, 0}, h.F64)
  x = f64({0, 0, 0}):requires_grad(true)
  x:norm():backward()
  c.near(x:grad(), {0, 0, 0}, h.F64)
  -- cumprod through a zero: PyTorch gives [1, 32, 0, 0]
  x = f64({2, 0, 3, 4}):requires_grad(true)
  x:cumprod(1):sum():backward()
  c.near(x:grad(), {1, 32, 0, 0}, h.F64)
  -- sort: the gradient goes back to where each value came from
  x = f64({3, 1, 2}):requires_grad(true)
  local v = x:sort();
  (v * f64({1, 10, 100})):sum():backward()
  c.near(x:grad(), {100, 1, 10}, h.F64)
  -- cummax: each running maximum's gradient goes to where it was reached: [1, 1, 2, 0]
  x = f64({1, 3, 3, 2}):requires_grad(true)
  x:cummax(1):sum():backward()
  c.near(x:grad(), {1, 1, 2, 0}, h.F64)
end)

run_groups()

-- ---------------------------------------------------------------------------
h.test("argsort is one IR op, run by its shared kernel in compiled plans", function()
  local x = tensor.new({{3, 1, 2}, {0, 5, 4}})
  local v, i = (x * 2):sort(2, true)
  if not os.getenv("LAZYLUA_EAGER") then
    local text = tensor.ir(v, i)
    assert(text:find("argsort(", 1, true), text)
    assert(text:find("descending", 1, true), text)
  end
  local before = tensor.metrics().fallbacks
  h.check(v, "i64", {{6, 4, 2}, {10, 8, 0}})
  h.check(i, "i64", {{1, 3, 2}, {2, 3, 1}})
  -- a library step, not an eager fallback
  h.eq(tensor.metrics().fallbacks, before)
end)

h.test("a training step with sort, var and logsumexp runs the same each step", function()
  local w = f64(values({4, 6}, -1, 1)):requires_grad(true)
  local losses = {}
  for step = 1, 3 do
    local top = w:topk(3, 2)
    local loss = top:var(2):sum() + w:logsumexp(2):sum() + w:median()
    loss:backward()
    tensor.no_grad(function() w:sub_(w:grad() * 0.1) end)
    w:set_grad(nil)
    tensor.mark_step()
    losses[step] = loss:item()
  end
  assert(losses[3] < losses[1], h.show(losses))
end)

h.test("errors name the problem and leave the interpreter usable", function()
  local x = tensor.new({{1, 2, 3}, {4, 5, 6}})
  h.err(function() x:topk(4) end, "topk", "k (4) out of range", "size 3")
  h.err(function() x:topk(-1) end, "topk", "out of range")
  h.err(function() x:kthvalue(0) end, "kthvalue", "k (0) out of range")
  h.err(function() x:sort(3) end, "sort", "dimension")
  h.err(function() x:argsort(1, "yes") end, "argsort", "boolean expected")
  h.err(function() x:norm("nuc") end, "norm", "unknown norm 'nuc'")
  h.err(function() x:var(1, {correction = 1, unbiased = true}) end, "var",
        "correction or unbiased, not both")
  h.err(function() x:std(1, {keepdims = true}) end, "std", "unknown option 'keepdims'")
  h.err(function() tensor.zeros(2, 0):median(2) end, "median", "empty")
  h.err(function() tensor.zeros(0):median() end, "median", "empty")
  h.err(function() x:cumprod(5) end, "cumprod", "dimension")
  h.err(function() x:amax(0) end, "amax", "dimension")
  h.check(x:sort(2, true), "i64", {{3, 2, 1}, {6, 5, 4}})
end)

h.done("test_sorting")
