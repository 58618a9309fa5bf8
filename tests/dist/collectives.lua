-- collectives.lua - dist.all_reduce, dist.broadcast and dist.barrier on 2 or
-- 3 ranks against values computed here by formula: rank r contributes
-- (r + 1) * k at position k (sign alternating for max/min), so the sum is
-- k * n(n+1)/2, the mean k(n+1)/2, the max and min the ends of the range.
-- Every dtype, NaN, 0-d, empty, non-contiguous views and a 3M-element tensor.
local h = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")
local dist, r, n = h.dist, h.rank, h.size

if not dist.is_initialized() or n < 2 then h.fail("expected to run under mpirun with 2+ ranks") end
if r < 0 or r >= n then h.fail("rank out of range") end
-- Every rank has a different rank number, and they are 0 .. n-1.
do
  local ranks = tensor.zeros({n}, {dtype = "i64"})
  ranks[r + 1] = 1
  h.expect("each rank once", dist.all_reduce(ranks), "i64", {n}, (function()
    local ones = {}
    for i = 1, n do ones[i] = 1 end
    return ones
  end)())
end

local K = 7
local float_types = {f32 = true, f64 = true}

-- This rank's input: (r+1)*k, times (-1)^k for max/min (so both ends move).
local function input(dtype, signed)
  local values = {}
  for k = 1, K do
    local v = (r + 1) * k
    if signed and k % 2 == 1 then v = -v end
    values[k] = float_types[dtype] and v * 0.25 or v
  end
  return tensor.new(values, {dtype = dtype})
end

local function expected(dtype, op)
  local values = {}
  for k = 1, K do
    local v
    if op == "sum" then
      v = k * n * (n + 1) // 2
    elseif op == "mean" then
      v = k * (n + 1) / 2
    elseif op == "max" then
      v = k % 2 == 1 and -k or n * k
    else
      v = k % 2 == 1 and -n * k or k
    end
    values[k] = float_types[dtype] and v * 0.25 or v
  end
  return values
end

for _, dtype in ipairs({"f32", "f64", "i32", "i64"}) do
  for _, op in ipairs({"sum", "mean", "max", "min"}) do
    if op ~= "mean" or float_types[dtype] then
      local t = input(dtype, op == "max" or op == "min")
      local returned = dist.all_reduce(t, op)
      if returned ~= t then h.fail("all_reduce must return its argument") end
      h.expect(string.format("all_reduce %s %s", op, dtype), t, dtype, {K}, expected(dtype, op))
    end
  end
end

-- The default op is the sum; a wide i64 value keeps all its bits.
do
  local t = tensor.new({(r + 1) * (1 << 40) + r, -(1 << 50)})
  dist.all_reduce(t)
  h.expect("i64 wide sum", t, "i64", {2}, {(1 << 40) * n * (n + 1) // 2 + n * (n - 1) // 2, -n * (1 << 50)})
  local big = tensor.new({1e300 * (r + 1), -1e300 * (r + 1)}, {dtype = "f64"})
  dist.all_reduce(big, "max")
  h.expect("f64 beyond f32's range", big, "f64", {2}, {1e300 * n, -1e300})
end

-- bool: max is "any", min is "all". Element k is true on rank r when
-- k is a multiple of r + 2.
do
  local any, all = {}, {}
  local mine = {}
  for k = 1, 12 do
    mine[k] = k % (r + 2) == 0
    any[k], all[k] = false, true
    for q = 0, n - 1 do
      any[k] = any[k] or k % (q + 2) == 0
      all[k] = all[k] and k % (q + 2) == 0
    end
  end
  h.expect("bool max (any)", dist.all_reduce(tensor.new(mine), "max"), "bool", {12}, any)
  h.expect("bool min (all)", dist.all_reduce(tensor.new(mine), "min"), "bool", {12}, all)
end

-- NaN wins in float max and min, wherever it is: rank 0 has one at 1, the
-- last rank one at 2; position 3 is a NaN-free control.
local nan = 0 / 0
for _, dtype in ipairs({"f32", "f64"}) do
  local values = {r + 1.0, r + 1.0, r + 1.0}
  if r == 0 then values[1] = nan end
  if r == n - 1 then values[2] = nan end
  h.expect("max with NaN " .. dtype, dist.all_reduce(tensor.new(values):to(dtype), "max"), dtype, {3},
    {nan, nan, n + 0.0})
  h.expect("min with NaN " .. dtype, dist.all_reduce(tensor.new(values):to(dtype), "min"), dtype, {3},
    {nan, nan, 1.0})
  -- A sum with a NaN anywhere is NaN too.
  h.expect("sum with NaN " .. dtype, dist.all_reduce(tensor.new(values):to(dtype), "sum"), dtype, {3},
    {nan, nan, n * (n + 1) / 2})
end

-- Broadcast from every root, every dtype: rank q's tensor holds 10q + k.
for root = 0, n - 1 do
  for _, dtype in ipairs({"f32", "f64", "i32", "i64"}) do
    local values, want = {}, {}
    for k = 1, 5 do
      values[k] = 10 * r + k
      want[k] = float_types[dtype] and (10 * root + k) * 1.0 or 10 * root + k
    end
    local t = tensor.new(values):to(dtype)
    if dist.broadcast(t, root) ~= t then h.fail("broadcast must return its argument") end
    h.expect(string.format("broadcast %s from %d", dtype, root), t, dtype, {5}, want)
  end
  local flags = tensor.new({r == root, r ~= root, true})
  h.expect("broadcast bool from " .. root, dist.broadcast(flags, root), "bool", {3}, {true, false, true})
end
-- The default root is 0.
h.expect("broadcast default root", dist.broadcast(tensor.new({r, r})), "i64", {2}, {0, 0})

-- 0-d tensors.
h.expect("0-d sum", dist.all_reduce(tensor.new(r + 1)), "i64", {}, n * (n + 1) // 2)
h.expect("0-d f32 max", dist.all_reduce(tensor.new(r + 0.5), "max"), "f32", {}, n - 0.5)
h.expect("0-d broadcast", dist.broadcast(tensor.new(r * 2.0):double(), n - 1), "f64", {}, (n - 1) * 2.0)

-- Empty tensors keep their shape.
h.expect("empty sum", dist.all_reduce(tensor.zeros({0})), "f32", {0}, {})
h.expect("empty 2x0 max", dist.all_reduce(tensor.zeros({2, 0}, {dtype = "i32"}), "max"), "i32", {2, 0}, {})
h.expect("empty broadcast", dist.broadcast(tensor.zeros({0, 3}), n - 1), "f32", {0, 3}, {})

-- Non-contiguous inputs: a transposed view, written in place through to
-- its base; a narrowed view changes only its columns of the base.
do
  local base = (tensor.arange(12):reshape(3, 4) * (r + 1)):float()
  local view = base:t()
  if view:is_contiguous() then h.fail("the transposed view should not be contiguous") end
  dist.all_reduce(view)
  local s = n * (n + 1) // 2
  local want_view, want_base = {}, {}
  for i = 0, 3 do
    for j = 0, 2 do want_view[#want_view + 1] = (j * 4 + i) * s * 1.0 end
  end
  for k = 0, 11 do want_base[k + 1] = k * s * 1.0 end
  h.expect("transposed view", view, "f32", {4, 3}, want_view)
  h.expect("base of the transposed view", base, "f32", {3, 4}, want_base)

  local other = (tensor.arange(12):reshape(3, 4) * (r + 1)):double()
  local columns = other:narrow(2, 2, 2)
  dist.all_reduce(columns, "max")
  local want_columns, want_other = {}, {}
  for i = 0, 2 do
    for j = 0, 3 do
      local k = i * 4 + j
      local v = (j == 1 or j == 2) and k * n or k * (r + 1)
      want_other[#want_other + 1] = v * 1.0
      if j == 1 or j == 2 then want_columns[#want_columns + 1] = v * 1.0 end
    end
  end
  h.expect("narrowed view", columns, "f64", {3, 2}, want_columns)
  h.expect("base of the narrowed view", other, "f64", {3, 4}, want_other)

  -- A broadcast into a strided view (every other row).
  local rows = tensor.full({4, 2}, r):float()
  local odd = rows:narrow(1, 1, 1)
  dist.broadcast(odd, n - 1)
  h.expect("broadcast into a row view", rows, "f32", {4, 2},
    {(n - 1) * 1.0, (n - 1) * 1.0, r * 1.0, r * 1.0, r * 1.0, r * 1.0, r * 1.0, r * 1.0})
end

-- A large tensor (3M + 1 elements: not a multiple of 2 or 3, so the pieces
-- of the 3-rank sum are uneven): value (k mod 1000) * (r + 1), sum
-- (k mod 1000) * n(n+1)/2, all exact in f32. Checked with spot values by
-- formula and, whole, against the formula computed as a tensor.
do
  local N = 3000001
  local t = (tensor.arange(N) % 1000 * (r + 1)):float()
  dist.all_reduce(t)
  local s = n * (n + 1) // 2
  for _, k in ipairs({0, 1, 999, 1000, 1234567, N - 1}) do
    local got = t[k + 1]:item()
    if got ~= (k % 1000) * s then h.fail(string.format("large sum at %d: %s, expected %d", k, got, (k % 1000) * s)) end
  end
  local want = (tensor.arange(N) % 1000 * s):float()
  local worst = (t - want):abs():max():item()
  if worst ~= 0 then h.fail("large sum differs from the formula by up to " .. worst) end
  local m = dist.all_reduce((tensor.arange(N) % 1000 * (r + 1)):float(), "max")
  if m[N]:item() ~= ((N - 1) % 1000) * n or m[2]:item() ~= n then h.fail("large max wrong") end
end

-- Sums of random floats (where the order of additions shows) are the same
-- on every rank, to the bit.
do
  tensor.manual_seed(100 + r)
  local t = dist.all_reduce(tensor.randn(1000) * 1000)
  h.expect_same_everywhere("random f32 sum", t)
  local d = dist.all_reduce(tensor.randn(1001):double() / 3)
  h.expect_same_everywhere("random f64 sum", d)
  local m = dist.all_reduce(tensor.randn(257), "mean")
  h.expect_same_everywhere("random f32 mean", m)
end

-- Lazy values as inputs: a collective of a computed (unsynced) tensor, and
-- a computation on a collective's result before any sync.
do
  local x = tensor.arange(4):float() * (r + 1) + 1
  local y = dist.all_reduce(x * 2) * 3 - 1
  local s = n * (n + 1) // 2
  h.expect("collective inside a computation", y, "f32", {4},
    {(2 * n) * 3 - 1.0, (2 * s + 2 * n) * 3 - 1.0, (4 * s + 2 * n) * 3 - 1.0, (6 * s + 2 * n) * 3 - 1.0})
end

-- The barrier: rank 0 arrives 0.4 s late, so every other rank waits for it.
do
  local now = require("progress").now
  tensor.mark_step()
  dist.barrier()
  if r == 0 then os.execute("sleep 0.4") end
  local start = now()
  dist.barrier()
  local waited = now() - start
  if r ~= 0 and waited < 0.3 then h.fail(string.format("barrier returned after %.3f s, before rank 0 came", waited)) end
end

h.done("collectives")
