-- test_reductions.lua - sum mean prod max min any all (whole tensor, by dim,
-- keepdim, negative dims), max/min with indices, argmax/argmin, cumsum,
-- softmax and log_softmax. References are plain Lua loops.
local h = dofile("helpers.lua")

local nan = 0 / 0

-- Reference reduction of a nested 2-D or 3-D list along a 1-based dim.
local function reduce_dim(v, dim, f, init)
  local shape = h.shape_of(v)
  local rank = #shape
  local out_shape = {}
  for d = 1, rank do
    if d ~= dim then out_shape[#out_shape + 1] = shape[d] end
  end
  local function get(index)
    local x = v
    for d = 1, rank do x = x[index[d]] end
    return x
  end
  local index = {}
  local function build(d, od)
    if d > rank then
      local acc = init
      for i = 1, shape[dim] do
        index[dim] = i
        acc = f(acc, get(index))
      end
      return acc
    end
    if d == dim then return build(d + 1, od) end
    local out = {}
    for i = 1, shape[d] do
      index[d] = i
      out[i] = build(d + 1, od + 1)
    end
    return out
  end
  return build(1, 1), out_shape
end

-- Inserts an extent-1 level at dim (what keepdim does to the nested list).
local function keep(v, dim, rank)
  if dim == 1 then return {v} end
  local out = {}
  for i = 1, #v do out[i] = keep(v[i], dim - 1, rank) end
  return out
end

local function add(a, x) return a + x end
local function mul(a, x) return a * x end

local M = {{1, 2, 3}, {4, 5, 6}}
local Mf = {{1.5, -2, 3.25}, {0.5, 4, -1.75}}

-- Whole-tensor reductions give 0-dim tensors.
h.test("Whole-tensor reductions give 0-dim tensors", function()
  local t = tensor.new(M)
  h.check(t:sum(), "i64", 21)
  h.check(t:prod(), "i64", 720)
  h.check(t:mean(), "f32", 3.5)
  h.check(t:max(), "i64", 6)
  h.check(t:min(), "i64", 1)
  h.check(t:any(), "bool", true)
  h.check(t:all(), "bool", true)
  h.check(tensor.sum(t), "i64", 21)
  h.check(tensor.mean(t), "f32", 3.5)
  assert(t:sum():dim() == 0)
  assert(t:sum():item() == 21)
  local f = tensor.new(Mf)
  local flat = h.flatten(Mf)
  local s, p, mx, mn = 0, 1, -math.huge, math.huge
  for _, x in ipairs(flat) do
    s, p, mx, mn = s + x, p * x, math.max(mx, x), math.min(mn, x)
  end
  h.check(f:sum(), "f32", s, h.REDUCE(6))
  h.check(f:prod(), "f32", p, h.REDUCE(6))
  h.check(f:mean(), "f32", s / 6, h.REDUCE(6))
  h.check(f:max(), "f32", mx)
  h.check(f:min(), "f32", mn)
  h.check(tensor.new({0, 0.0}):any(), "bool", false)
  h.check(tensor.new({0, 0.5}):any(), "bool", true)
  h.check(tensor.new({1, 0.0}):all(), "bool", false)
  h.check(tensor.new({true, true}):all(), "bool", true)
  h.check(tensor.new({false, false}):any(), "bool", false)
  -- NaN propagates through max/min and sum
  h.check(tensor.new({1, nan, 3}):max(), "f32", nan)
  h.check(tensor.new({1, nan, 3}):min(), "f32", nan)
  h.check(tensor.new({1, nan}):sum(), "f32", nan)
  -- empty: sum 0, prod 1, any false, all true
  h.check(tensor.zeros(0):sum(), "f32", 0)
  h.check(tensor.zeros(0):prod(), "f32", 1)
  h.check(tensor.zeros(0):any(), "bool", false)
  h.check(tensor.zeros(0):all(), "bool", true)
  -- integer sums wrap like Lua
  h.check(tensor.new({math.maxinteger, 1}):sum(), "i64", math.mininteger)
  -- i32 sums are i64 and do not wrap at 32 bits
  h.check(tensor.new({2147483647, 2147483647}, {dtype = "i32"}):sum(), "i64", 4294967294)
end)

-- By dim, with keepdim and negative dims, for every reduction.
h.test("By dim, with keepdim and negative dims, for every reduction", function()
  local cases = {
    {"sum", add, 0, "i64"},
    {"prod", mul, 1, "i64"},
    {"max", math.max, -math.huge, "i64"},
    {"min", math.min, math.huge, "i64"},
  }
  local t = tensor.new(M)
  for _, case in ipairs(cases) do
    local name, f, init, dtype = case[1], case[2], case[3], case[4]
    for dim = 1, 2 do
      local want = reduce_dim(M, dim, f, init)
      local got = t[name](t, dim)   -- max/min also return indices; only values here
      h.check(got, dtype, want)
      h.check(t[name](t, dim - 3), dtype, want)           -- -2, -1
      h.check(t[name](t, dim, true), dtype, keep(want, dim, 2))
      h.check(t[name](t, dim, false), dtype, want)
      h.check(tensor[name](t, dim), dtype, want)
    end
  end
  -- mean by dim: f32 for integers
  h.check(t:mean(1), "f32", {2.5, 3.5, 4.5})
  h.check(t:mean(2), "f32", {2, 5})
  h.check(t:mean(-1, true), "f32", {{2}, {5}})
  -- any / all by dim
  local b = tensor.new({{true, false, false}, {true, true, false}})
  h.check(b:any(1), "bool", {true, true, false})
  h.check(b:all(1), "bool", {true, false, false})
  h.check(b:any(2), "bool", {true, true})
  h.check(b:all(2, true), "bool", {{false}, {false}})
  h.check(tensor.new({{0, 1}, {2, 3}}):all(2), "bool", {false, true})
  -- bool sums by dim are i64
  h.check(b:sum(1), "i64", {2, 1, 0})
  h.check(b:sum(2, true), "i64", {{1}, {2}})
  -- whole-tensor keepdim is not part of the API; dim on a 1-D tensor gives 0-dim
  h.check(tensor.new({1, 2, 3}):sum(1), "i64", 6)
  h.check(tensor.new({1, 2, 3}):sum(1, true), "i64", {6})
end)

-- 3-D, every dim, random f32 data, against Lua loops.
h.test("3-D, every dim, random f32 data, against Lua loops", function()
  local v = h.rand_list(21, {4, 5, 6}, -1, 1)
  local t = tensor.new(v)
  for dim = 1, 3 do
    local n = ({4, 5, 6})[dim]
    local want = reduce_dim(v, dim, add, 0)
    h.check(t:sum(dim), "f32", want, h.REDUCE(n))
    h.check(t:sum(dim, true), "f32", keep(want, dim, 3), h.REDUCE(n))
    local mean = h.map(want, function(x) return x / n end)
    -- a sum of n values in (-1, 1): the absolute error is at most ~n^2 1e-7
    h.check(t:mean(dim), "f32", mean, {rel = n * 1e-7, abs = n * 1e-7})
    h.check(t:max(dim), "f32", (reduce_dim(v, dim, math.max, -math.huge)))
    h.check(t:min(dim), "f32", (reduce_dim(v, dim, math.min, math.huge)))
  end
  local total = 0
  for _, x in ipairs(h.flatten(v)) do total = total + x end
  h.check(t:sum(), "f32", total, h.REDUCE(120))
  -- reductions of a non-contiguous view
  local tt = t:transpose(1, 3)                 -- [6, 5, 4]
  local by_first = reduce_dim(v, 1, add, 0)     -- [5, 6]
  local want = {}
  for k = 1, 6 do
    want[k] = {}
    for j = 1, 5 do want[k][j] = by_first[j][k] end
  end
  h.check(tt:sum(3), "f32", want, h.REDUCE(4))
end)

-- A long f32 sum stays accurate (blocked / pairwise summation).
h.test("A long f32 sum stays accurate (blocked / pairwise summation)", function()
  local n = 100000
  local t = tensor.full({n}, 0.1)
  -- pairwise/blocked summation keeps the error near sqrt(n) eps (~2e-5 here);
  -- a naive running f32 sum drifts by ~1e-3.
  h.check(t:sum(), "f32", n * h.f32(0.1), {rel = 1e-4, abs = 0})
  h.check(t:mean(), "f32", h.f32(0.1), {rel = 1e-4, abs = 0})
end)

-- max/min with dim return values and 1-based i64 indices; ties take the first.
h.test("max/min with dim return values and 1-based i64 indices; t...", function()
  local t = tensor.new({{1, 3, 3}, {2, 2, 1}, {5, 0, 5}})
  local v, i = t:max(2)
  h.check(v, "i64", {3, 2, 5})
  h.check(i, "i64", {2, 1, 1})
  v, i = t:min(2)
  h.check(v, "i64", {1, 1, 0})
  h.check(i, "i64", {1, 3, 2})
  v, i = t:max(1)
  h.check(v, "i64", {5, 3, 5})
  h.check(i, "i64", {3, 1, 3})
  v, i = t:min(1)
  h.check(v, "i64", {1, 0, 1})
  h.check(i, "i64", {1, 3, 2})
  v, i = t:max(-1, true)
  h.check(v, "i64", {{3}, {2}, {5}})
  h.check(i, "i64", {{2}, {1}, {1}})
  v, i = tensor.max(t, 1)
  h.check(i, "i64", {3, 1, 3})
  -- floats, with NaN winning
  local f = tensor.new({{0.5, -1, 2.5}, {nan, 1, 0}})
  v, i = f:max(2)
  h.check(v, "f32", {2.5, nan})
  h.check(i, "i64", {3, 1})
  v, i = f:min(2)
  h.check(v, "f32", {-1, nan})
  h.check(i, "i64", {2, 1})
  -- 1-D: 0-dim results
  v, i = tensor.new({4, 9, 9, 1}):max(1)
  h.check(v, "i64", 9)
  h.check(i, "i64", 2)
  -- random 3-D against Lua loops
  local data = h.rand_list(31, {3, 4, 5}, 0, 1)
  local rt = tensor.new(data)
  local vals, idx = rt:max(2)
  local wv, wi = {}, {}
  for a = 1, 3 do
    wv[a], wi[a] = {}, {}
    for c = 1, 5 do
      local best, at = -math.huge, 0
      for b = 1, 4 do
        if data[a][b][c] > best then best, at = data[a][b][c], b end
      end
      wv[a][c], wi[a][c] = best, at
    end
  end
  h.check(vals, "f32", wv)
  h.check(idx, "i64", wi)
end)

-- argmax / argmin: by dim (1-based) and over the flattened tensor.
h.test("argmax / argmin: by dim (1-based) and over the flattened ...", function()
  local t = tensor.new({{1, 7, 3}, {9, 2, 9}})
  h.check(t:argmax(2), "i64", {2, 1})
  h.check(t:argmin(2), "i64", {1, 2})
  h.check(t:argmax(1), "i64", {2, 1, 2})
  h.check(t:argmin(1), "i64", {1, 2, 1})
  h.check(t:argmax(-1), "i64", {2, 1})
  h.check(t:argmax(), "i64", 4)          -- flattened position of the first 9
  h.check(t:argmin(), "i64", 1)
  h.check(tensor.argmax(t, 2), "i64", {2, 1})
  h.check(tensor.new({{0.5, 0.25}, {-3, 0.75}}):argmin(), "i64", 3)
  h.check(tensor.new({{0.5, 0.25}, {-3, 0.75}}):argmax(), "i64", 4)
  -- of a transposed view: positions in the view's own row-major order
  h.check(t:t():argmax(), "i64", 2)      -- t:t() is {{1, 9}, {7, 2}, {3, 9}}
end)

-- cumsum along each dim; ints and bools give i64.
h.test("cumsum along each dim; ints and bools give i64", function()
  local t = tensor.new(M)
  h.check(t:cumsum(2), "i64", {{1, 3, 6}, {4, 9, 15}})
  h.check(t:cumsum(1), "i64", {{1, 2, 3}, {5, 7, 9}})
  h.check(t:cumsum(-1), "i64", {{1, 3, 6}, {4, 9, 15}})
  h.check(tensor.cumsum(t, 1), "i64", {{1, 2, 3}, {5, 7, 9}})
  h.check(tensor.new({true, false, true}):cumsum(1), "i64", {1, 1, 2})
  local v = h.rand_list(41, {3, 50}, -1, 1)
  local want = {}
  for r = 1, 3 do
    local acc, row = 0, {}
    for c = 1, 50 do
      acc = acc + v[r][c]
      row[c] = acc
    end
    want[r] = row
  end
  h.check(tensor.new(v):cumsum(2), "f32", want, h.REDUCE(50))
  h.check(tensor.new(v):t():cumsum(1):t(), "f32", want, h.REDUCE(50))
end)

-- softmax / log_softmax along a dim, numerically stable.
h.test("softmax / log_softmax along a dim, numerically stable", function()
  local function ref_softmax(row, log)
    local mx = -math.huge
    for _, x in ipairs(row) do mx = math.max(mx, x) end
    local s = 0
    for _, x in ipairs(row) do s = s + math.exp(x - mx) end
    local out = {}
    for i, x in ipairs(row) do
      out[i] = log and (x - mx - math.log(s)) or math.exp(x - mx) / s
    end
    return out
  end
  local v = {{1, 2, 3, 4}, {-1, 0.5, 0, 2}, {1000, 1001, 999, 1000}}
  local t = tensor.new(v)
  local want, wantlog = {}, {}
  for r = 1, 3 do
    want[r] = ref_softmax(v[r], false)
    wantlog[r] = ref_softmax(v[r], true)
  end
  h.check(t:softmax(2), "f32", want, h.TRANS)
  h.check(t:softmax(-1), "f32", want, h.TRANS)
  h.check(t:log_softmax(2), "f32", wantlog, {rel = 2e-6, abs = 4e-6})
  h.check(tensor.softmax(t, 2), "f32", want, h.TRANS)
  h.check(tensor.log_softmax(t, 2), "f32", wantlog, {rel = 2e-6, abs = 4e-6})
  -- along dim 1: the transpose of the row-wise result
  local ct = t:t()
  local got = ct:softmax(1):t()
  h.check(got, "f32", want, h.TRANS)
  h.check(ct:log_softmax(1):t(), "f32", wantlog, {rel = 2e-6, abs = 4e-6})
  -- integers become f32
  h.check(tensor.new({{1, 2}}):softmax(2), "f32", {ref_softmax({1, 2})}, h.TRANS)
  h.check(tensor.new({1, 2}):log_softmax(1), "f32", ref_softmax({1, 2}, true), h.TRANS)
  -- f64 stays f64
  h.check(tensor.new(v, {dtype = "f64"}):softmax(2), "f64", want, {rel = 1e-12, abs = 1e-15})
  -- 3-D, middle dim, random
  local r = h.rand_list(51, {2, 7, 3}, -3, 3)
  local got3 = tensor.new(r):softmax(2):tolist()
  for a = 1, 2 do
    for c = 1, 3 do
      local col = {}
      for b = 1, 7 do col[b] = r[a][b][c] end
      local w = ref_softmax(col)
      for b = 1, 7 do
        assert(h.near_value(got3[a][b][c], w[b], h.TRANS), "softmax 3-D")
      end
    end
  end
end)

h.test("a list of dims reduces them all, as torch's dim=(0, 2)", function()
  -- x[i][j][k] = 12 (i - 1) + 4 (j - 1) + (k - 1), hand-summed below
  local x = tensor.arange(24):reshape(2, 3, 4):float()
  h.check(x:sum({1, 3}), "f32", {60, 92, 124})
  h.check(x:sum({3, 1}, true), "f32", {{{60}, {92}, {124}}})
  h.check(tensor.sum(x, {1, 2}), "f32", {60, 66, 72, 78})
  h.check(x:mean({-1, -2}), "f32", {5.5, 17.5})
  h.check(x:sum({1, 2, 3}), "f32", 276)
  h.check(tensor.arange(6):reshape(2, 3):prod({1, 2}), "i64", 0)
  h.check((tensor.arange(6):reshape(2, 3):gt(0)):all({2}), "bool", {false, true})
  -- the gradient reaches every element once
  local w = tensor.ones(2, 3, 4, {dtype = "f64"}):requires_grad(true)
  local loss = (w * x:double()):sum({1, 3}):sum()
  loss:backward()
  h.check(w:grad(), "f64", x:tolist())
  h.err(function() return x:sum({1, 1}) end, "dim 1 appears twice in the list")
  h.err(function() return x:sum({}) end, "the list of dims is empty")
  h.err(function() return x:sum({1.5}) end, "dim 1 of the list is not an integer")
  h.err(function() return x:sum({4}) end, "out of range")
  h.err(function() return x:var({1, 3}) end, "a list is not accepted here")
  h.still_works()
end)

h.done("test_reductions")
