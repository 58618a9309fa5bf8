-- fuzz_viewchain.lua - the differential fuzzer's view-chain programs (audit
-- M0 of 2026-11-27): bases of rank 2 to 4 with extent-1 dims, in-place ops
-- through a permute that moves only extent-1 dims followed by flatten(),
-- view(-1) or reshape(-1) (a view: the element order does not change), and
-- sometimes one more view (narrow, view(k, -1), t(), select); views held in
-- variables; then values that read both the views and their bases, with
-- observations, syncs and barriers in between. Compiled, the write-back of
-- such a write lands in the kernel that computes the written value, which
-- once read the value's slot before storing it. The generic alias programs
-- meet this shape about once in a thousand programs; these, in most.
-- Values stay multiples of 1/64 of bounded size (squares: 1/4096), so
-- everything but sums is compared exactly.
-- Loaded with `local family = dofile("fuzz_viewchain.lua")(fc)`.
return function(fc)
local R, pick, lit, var, is_float = math.random, fc.pick, fc.lit, fc.var, fc.is_float
local apply_chain, chain_text = fc.apply_chain, fc.chain_text

local DTYPES = {"f32", "f32", "f64"}
-- multiplications keep |x| below this (f32 stays exact: 4096 * 4096 < 2^24)
local BOUND = 64

-- A shape of rank 2 to 4 with at least one extent 1 and, but for rank 2
-- now and then, two extents above 1 (with one, flattening is a squeeze,
-- which never reads memory); now and then an extent 0.
local function base_shape()
  local rank = pick({2, 3, 3, 4, 4})
  local shape = {}
  for d = 1, rank do shape[d] = R(3) == 1 and 1 or R(2, 4) end
  local dims = {}
  for d = 1, rank do dims[d] = d end
  for d = rank, 2, -1 do
    local j = R(d)
    dims[d], dims[j] = dims[j], dims[d]
  end
  shape[dims[1]] = 1
  if rank > 2 then
    shape[dims[2]], shape[dims[3]] = R(2, 4), R(2, 4)
  end
  if R(20) == 1 then shape[R(rank)] = 0 end
  return shape
end

-- A permutation of the dims of `size` that moves only its extent-1 dims
-- (the others keep their order), or nil when there is none but the identity.
local function size1_permutation(size)
  local rank = #size
  local order = {}
  for d = 1, rank do order[d] = d end
  for d = rank, 2, -1 do
    local j = R(d)
    order[d], order[j] = order[j], order[d]
  end
  -- the dims of extent other than 1 back in their order, in the positions
  -- they were shuffled to
  local big = {}
  for d = 1, rank do if size[d] ~= 1 then big[#big + 1] = d end end
  local k = 0
  for p = 1, rank do
    if size[order[p]] ~= 1 then
      k = k + 1
      order[p] = big[k]
    end
  end
  for d = 1, rank do if order[d] ~= d then return order end end
  return nil
end

local FLATTENS = {{fn = "flatten", args = {}}, {fn = "view", args = {-1}},
                  {fn = "reshape", args = {-1}}}

-- A view after the flattening, of a tensor of n elements, or nil.
local function tail_view(n)
  local choices = {}
  if n >= 2 then
    choices[#choices + 1] = function()
      local len = R(1, n)
      return {fn = "narrow", args = {1, R(1, n - len + 1), len}}
    end
  end
  local divisors = {}
  for f = 2, math.min(n - 1, 12) do if n % f == 0 then divisors[#divisors + 1] = f end end
  if #divisors > 0 then
    local f = pick(divisors)
    choices[#choices + 1] = function() return {fn = "view", args = {f, -1}} end
    choices[#choices + 1] = function() return {fn = "view", args = {f, -1}}, {fn = "t", args = {}} end
    choices[#choices + 1] = function() return {fn = "view", args = {f, -1}}, {fn = "index", args = {R(f)}} end
  end
  if #choices == 0 then return nil end
  return pick(choices)()
end

-- The chain of views a write goes through, from `t`: a permute of extent-1
-- dims and a flattening (a rank-1 tensor is first viewed with an extent-1
-- dim inserted), sometimes more views; or nothing (a write to t itself).
local function write_chain(t)
  local chain = {}
  local size = t:size()
  if #size == 1 and R(4) > 1 then
    local n = size[1]
    local divisors = {}
    for f = 2, n - 1 do if n % f == 0 then divisors[#divisors + 1] = f end end
    if #divisors > 0 then
      local f = pick(divisors)
      chain[#chain + 1] = {fn = "view", args = {f, n // f, 1}}
      size = {f, n // f, 1}
    end
  end
  if #size >= 2 then
    local order = size1_permutation(size)
    if order then chain[#chain + 1] = {fn = "permute", args = order} end
    chain[#chain + 1] = pick(FLATTENS)
    if R(4) == 1 then
      local n = 1
      for _, e in ipairs(size) do n = n * e end
      local a, b = tail_view(n)
      chain[#chain + 1] = a
      chain[#chain + 1] = b
    end
  end
  return chain
end

local function new_base(p)
  local shape = base_shape()
  local dt = pick(DTYPES)
  local seed = p:data_seed()
  local out = p:slot()
  p:try({text = string.format("%s = %s", var(out), fc.input_text(shape, dt, seed)),
         writes = {out},
         run = function(env) env[out] = fc.input(shape, dt, seed) end})
  p:set(out, true)
  return out
end

local MENU = fc.new_menu()
local menu = MENU.add

menu(3, "hold a view", function(p)
  local a = p:pick_slot()
  local chain = write_chain(p.env[a])
  if #chain == 0 then return false end
  local out = p:slot()
  local ok = p:try({text = string.format("%s = %s%s", var(out), var(a), chain_text(chain)),
                    writes = {out},
                    run = function(env) env[out] = apply_chain(env[a], chain) end}, nil, true)
  if ok then p.info[out] = p.info[a] end
  return ok
end)

local SCALAR_OPS = {"add_", "sub_", "add_", "mul_"}
local UNARY_OPS = {"neg_", "relu_", "abs_"}

menu(10, "write through a chain", function(p)
  local target = p:pick_slot()
  local chain = write_chain(p.env[target])
  local ok, view = pcall(apply_chain, p.env[target], chain)
  if not ok then view = nil end
  local prefix = var(target) .. chain_text(chain)
  local small = view and fc.maxabs(view) <= BOUND / 8
  local kind = R(8)
  local text, run
  if kind <= 2 or not view then
    local fn = pick(SCALAR_OPS)
    local x = fn == "mul_" and pick({-1, 0, 2, 0.5}) or pick({1, -0.25, 0.5, 2.0, -3})
    if fn == "mul_" and view and fc.maxabs(view) > BOUND / 2 then return false end
    text = string.format("%s:%s(%s)", prefix, fn, lit(x))
    run = function(env)
      local v = apply_chain(env[target], chain)
      v[fn](v, x)
    end
  elseif kind == 3 then
    local fn = pick(UNARY_OPS)
    text = string.format("%s:%s()", prefix, fn)
    run = function(env)
      local v = apply_chain(env[target], chain)
      v[fn](v)
    end
  elseif kind == 4 then
    local lo = R(3) > 1 and pick({-1, -0.5, 0}) or nil
    local hi = (lo == nil or R(3) > 1) and pick({0.5, 1, 2}) or nil
    text = string.format("%s:clamp_(%s, %s)", prefix, lit(lo), lit(hi))
    run = function(env)
      local v = apply_chain(env[target], chain)
      v:clamp_(lo, hi)
    end
  elseif kind == 5 then
    -- a read-modify-write of the view by itself
    if not small then return false end
    text = string.format("v = %s; v:mul_(v)", prefix)
    run = function(env)
      local v = apply_chain(env[target], chain)
      v:mul_(v)
    end
  elseif kind == 6 then
    local threshold, value = pick({-0.5, 0, 0.25, 1}), pick({-1, 0.5, 3})
    text = string.format("v = %s; v:masked_fill_(v:gt(%s), %s)", prefix, lit(threshold), lit(value))
    run = function(env)
      local v = apply_chain(env[target], chain)
      v:masked_fill_(v:gt(threshold), value)
    end
  elseif kind == 7 then
    local value = pick({-2, 0, 1, 0.5, -0.75})
    text = string.format("%s:fill_(%s)", prefix, lit(value))
    run = function(env)
      local v = apply_chain(env[target], chain)
      v:fill_(value)
    end
  else
    local shape, dt, seed = view:size(), view:dtype(), p:data_seed()
    text = string.format("%s:copy_(%s)", prefix, fc.input_text(shape, dt, seed))
    run = function(env)
      local v = apply_chain(env[target], chain)
      v:copy_(fc.input(shape, dt, seed))
    end
  end
  return p:try({text = text, run = run}, nil, true)
end)

-- Values that read a slot through a permute-and-flatten chain and its base
-- (or another alias) as it is: kernels that read both a write-back and the
-- value written.
menu(4, "read both", function(p)
  local a = p:pick_slot()
  local t = p.env[a]
  local chain = write_chain(t)
  local ok, view = pcall(apply_chain, t, chain)
  if not ok then return false end
  local b = p:pick_slot()
  local out = p:slot()
  local kind = R(4)
  local text, run
  local exact = p:exact(a) and p:exact(b)
  if kind == 1 and view:numel() == p.env[b]:numel() then
    text = string.format("%s = %s%s * 2 + %s:reshape(-1)", var(out), var(a), chain_text(chain), var(b))
    run = function(env) env[out] = apply_chain(env[a], chain) * 2 + env[b]:reshape(-1) end
  elseif kind == 2 then
    text = string.format("%s = %s%s:sum()", var(out), var(a), chain_text(chain))
    exact = false
    run = function(env) env[out] = apply_chain(env[a], chain):sum() end
  elseif kind == 3 and view:numel() == t:numel() then
    text = string.format("%s = %s:flatten() - %s%s", var(out), var(a), var(a), chain_text(chain))
    run = function(env) env[out] = env[a]:flatten() - apply_chain(env[a], chain) end
  else
    text = string.format("%s = %s%s:clone()", var(out), var(a), chain_text(chain))
    run = function(env) env[out] = apply_chain(env[a], chain):clone() end
  end
  ok = p:try({text = text, writes = {out}, run = run}, function()
    return fc.maxabs(p.env[out]) <= 2 ^ 20
  end, true)
  if ok then p:set(out, exact, a, b) end
  return ok
end)

-- A base that is a pending value (not data): its write-backs stay in the graph.
menu(1, "computed base", function(p)
  local a = p:pick_slot()
  local out = p:slot()
  local fn = pick({"add", "sub"})
  local text = string.format("%s = %s:%s(0.5)", var(out), var(a), fn)
  local ok = p:try({text = text, writes = {out},
                    run = function(env) env[out] = env[a][fn](env[a], 0.5) end})
  if ok then p:set(out, p:exact(a), a) end
  return ok
end)

menu(2, "observe", function(p)
  local a = p:pick_slot()
  local info = p.info[a] or {exact = true, scale = 0}
  if R(2) == 1 then
    return p:try({text = string.format("observe(%s)", var(a)),
                  run = function(env, obs) obs(env[a], info) end})
  end
  return p:try({text = string.format("observe(%s:tolist())", var(a)),
                run = function(env, obs) obs(env[a]:tolist(), info) end})
end)

menu(1, "barrier", function(p)
  if R(2) == 1 then
    return p:try({text = "tensor.mark_step()", run = function() tensor.mark_step() end})
  end
  local a, b = p:pick_slot(), p:pick_slot()
  return p:try({text = string.format("tensor.sync(%s, %s)", var(a), var(b)),
                run = function(env) tensor.sync(env[a], env[b]) end})
end)

menu(1, "new base", function(p)
  new_base(p)
  return true
end)

local function generate(seed)
  local p = fc.Program.new("viewchain", seed)
  for _ = 1, R(1, 2) do new_base(p) end
  fc.grow(p, MENU, R(6, 18))
  return p:finish()
end

return {name = "viewchain", generate = generate}
end
