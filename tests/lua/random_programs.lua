-- random_programs.lua - the representation and replay of the random
-- programs of test_lazy_random_programs.lua: operand and step text, the
-- interpreter that runs a step, snapshots and their statistics, and random
-- data; also the weighted menu, view chains and value text that the
-- differential fuzzer (fuzz_common.lua) draws from. Loaded with
-- `local rp = dofile("random_programs.lua")(h, lh)`, where h and lh are the
-- test's helpers.lua and lazy_helpers.lua.
return function(h, lh)
local R = math.random

local function pick(list) return list[R(#list)] end

local function is_float(dt) return dt == "f32" or dt == "f64" end

-- ---------------------------------------------------------------------------
-- Readable text for values in step descriptions

-- Lua text that reads back as the same value (numbers keep their subtype).
local function lit(v)
  if type(v) == "table" then
    local parts = {}
    for i = 1, #v do parts[i] = lit(v[i]) end
    return "{" .. table.concat(parts, ", ") .. "}"
  elseif math.type(v) == "float" then
    if v == math.floor(v) and math.abs(v) < 1e15 then return string.format("%.1f", v) end
    return string.format("%.17g", v)
  elseif type(v) == "string" then
    return string.format("%q", v)
  end
  return tostring(v)
end

local function var(i) return "v" .. i end

local function operand_text(x)
  if x.num ~= nil then return lit(x.num) end
  return var(x.slot)
end

-- ---------------------------------------------------------------------------
-- The interpreter: runs one step on env (slot -> tensor); observations go to
-- `observed`. Used at generation (eager) and for both replays.

local OPERATORS = {
  add = function(a, b) return a + b end, sub = function(a, b) return a - b end,
  mul = function(a, b) return a * b end, div = function(a, b) return a / b end,
  pow = function(a, b) return a ^ b end, floor_divide = function(a, b) return a // b end,
  remainder = function(a, b) return a % b end,
}

local function value_of(env, x)
  if x.num ~= nil then return x.num end
  return env[x.slot]
end

-- Applies a chain of view steps {fn, args} to t.
local function apply_chain(t, chain)
  for _, v in ipairs(chain) do
    if v.fn == "index" then
      t = t[v.args[1]]
    else
      t = t[v.fn](t, table.unpack(v.args))
    end
  end
  return t
end

-- Text of a chain of view steps, as a suffix of the viewed tensor's name.
local function chain_text(chain)
  local parts = {}
  for _, v in ipairs(chain) do
    if v.fn == "index" then
      parts[#parts + 1] = "[" .. lit(v.args[1]) .. "]"
    else
      local args = {}
      for i, x in ipairs(v.args) do args[i] = lit(x) end
      parts[#parts + 1] = ":" .. v.fn .. "(" .. table.concat(args, ", ") .. ")"
    end
  end
  return table.concat(parts)
end

-- A chain of up to max_len views from t, each drawn by random_view(cur)
-- (nil: none fits) and kept when it applies (evaluated in eager mode to stay
-- valid). Returns the chain and the view it gives.
local function random_chain(t, max_len, random_view)
  local chain, cur = {}, t
  for _ = 1, R(max_len or 2) do
    local v = random_view(cur)
    if v then
      local ok, nxt = pcall(apply_chain, cur, {v})
      if ok then
        chain[#chain + 1] = v
        cur = nxt
      end
    end
  end
  return chain, cur
end

-- View steps that both random_view()s draw (test_lazy_random_programs.lua
-- and fuzz_common.lua): a narrow of a random dim of `size` to at least
-- min_len elements, a select (nil when that dim is empty), each with a
-- start or index now and then counted from the end.
local function random_narrow(size, min_len)
  local d = R(#size)
  local len = R(min_len, size[d])
  local start = R(1, size[d] - len + 1)
  if R(4) == 1 then start = start - size[d] - 1 end   -- negative start
  return {fn = "narrow", args = {d, start, len}}
end

local function random_select(size)
  local d = R(#size)
  if size[d] == 0 then return nil end
  local i = R(size[d])
  if R(4) == 1 then i = i - size[d] - 1 end
  return {fn = "select", args = {d, i}}
end

-- A random order of 1..rank, as permute's argument.
local function random_permutation(rank)
  local order = {}
  for d = 1, rank do order[d] = d end
  for d = rank, 2, -1 do
    local j = R(d)
    order[d], order[j] = order[j], order[d]
  end
  return order
end

-- Adds to `choices` (a random_view()'s menu) the views that reorder the
-- dims of a tensor of rank `rank`: transpose and permute, and t for a
-- matrix.
local function add_reorder_views(choices, rank)
  if rank >= 2 then
    choices[#choices + 1] = function()
      local d1, d2 = R(rank), R(rank)
      return {fn = "transpose", args = {d1, d2}}
    end
    choices[#choices + 1] = function()
      return {fn = "permute", args = random_permutation(rank)}
    end
  end
  if rank == 2 then choices[#choices + 1] = function() return {fn = "t", args = {}} end end
end

-- A weighted menu of step generators: add(weight, name, f) appends one,
-- pick() draws one with probability weight / total weight.
local function new_menu()
  local entries, total = {}, 0
  local menu = {}
  function menu.add(weight, name, f)
    entries[#entries + 1] = {weight = weight, name = name, f = f}
    total = total + weight
  end
  function menu.pick()
    local r = R() * total
    for _, m in ipairs(entries) do
      r = r - m.weight
      if r <= 0 then return m end
    end
    return entries[#entries]
  end
  return menu
end

local RUN = {}
function RUN.input(env, s) env[s.out] = tensor.new(s.data, {dtype = s.dtype}) end
function RUN.unary(env, s)
  local a = env[s.a]
  env[s.out] = s.module and tensor[s.fn](a) or a[s.fn](a)
end
function RUN.binary(env, s)
  local a, b = value_of(env, s.x), value_of(env, s.y)
  if s.form == "operator" then
    env[s.out] = OPERATORS[s.fn](a, b)
  elseif s.form == "module" then
    env[s.out] = tensor[s.fn](a, b)
  else
    env[s.out] = a[s.fn](a, b)
  end
end
function RUN.where(env, s)
  env[s.out] = tensor.where(env[s.cond], value_of(env, s.x), value_of(env, s.y))
end
function RUN.clamp(env, s) env[s.out] = env[s.a]:clamp(s.lo, s.hi) end
function RUN.cast(env, s) env[s.out] = env[s.a]:to(s.dtype) end
function RUN.clone(env, s) env[s.out] = env[s.a][s.fn](env[s.a]) end
function RUN.reduce(env, s)
  local a = env[s.a]
  if s.dim == nil then
    env[s.out] = a[s.fn](a)
  else
    env[s.out] = a[s.fn](a, s.dim, s.keepdim)
  end
end
function RUN.maxmin(env, s)
  local a = env[s.a]
  local values, indices = a[s.fn](a, s.dim, s.keepdim)
  env[s.out] = values
  if s.out2 then env[s.out2] = indices end
end
function RUN.softmax(env, s) env[s.out] = env[s.a][s.fn](env[s.a], s.dim) end
function RUN.cumsum(env, s) env[s.out] = env[s.a]:cumsum(s.dim) end
function RUN.matmul(env, s) env[s.out] = env[s.a]:matmul(env[s.b]) end
function RUN.view(env, s) env[s.out] = apply_chain(env[s.a], s.chain) end
function RUN.cat(env, s)
  local list = {}
  for i, slot in ipairs(s.slots) do list[i] = env[slot] end
  env[s.out] = tensor[s.fn](list, s.dim)
end
function RUN.gather(env, s) env[s.out] = env[s.a][s.fn](env[s.a], s.dim, env[s.index]) end
function RUN.inplace(env, s)
  local t = apply_chain(env[s.target], s.chain)
  if s.x then
    t[s.fn](t, value_of(env, s.x))
  elseif s.lo ~= nil or s.hi ~= nil then
    t[s.fn](t, s.lo, s.hi)
  else
    t[s.fn](t)
  end
end
function RUN.setindex(env, s)
  local t = apply_chain(env[s.target], s.chain)
  t[s.index] = value_of(env, s.x)
end
function RUN.observe(env, s, observed)
  local t = env[s.a]
  local v
  if s.kind == "item" then
    v = (s.reduce and t:sum() or t):item()
  elseif s.kind == "tolist" then
    v = t:tolist()
  elseif s.kind == "print" then
    local text = tostring(t)
    -- float text may differ in the last printed digit within tolerance
    v = s.exact and text or t:tolist()
  elseif s.kind == "compare" then
    v = t:sum() < s.num
  elseif s.kind == "equal" then
    v = t == env[s.b]
  end
  if observed then observed[#observed + 1] = {step = s, value = v} end
end
function RUN.mark_step() tensor.mark_step() end
function RUN.sync(env, s)
  local list = {}
  for _, slot in ipairs(s.slots) do list[#list + 1] = env[slot] end
  tensor.sync(table.unpack(list))
end
function RUN.drop(env, s) env[s.a] = nil end
function RUN.gc() collectgarbage() end

local function run_step(env, s, observed)
  RUN[s.op](env, s, observed)
end

-- ---------------------------------------------------------------------------
-- Generation state: eager tensors plus metadata for exactness

local Gen = {}
Gen.__index = Gen

local F32_LIMIT, F64_LIMIT = 2 ^ 24, 2 ^ 53

local function flat(t)
  local v = t:tolist()
  if type(v) ~= "table" then return {v} end
  return h.flatten(v)
end

local function stats(t)
  local values = flat(t)
  local maxabs, minabs, minv, maxv, finite = 0, math.huge, math.huge, -math.huge, true
  for _, x in ipairs(values) do
    if type(x) == "boolean" then x = x and 1 or 0 end
    if x ~= x or x == math.huge or x == -math.huge then finite = false end
    local a = math.abs(x)
    if a > maxabs then maxabs = a end
    if a < minabs then minabs = a end
    if x < minv then minv = x end
    if x > maxv then maxv = x end
  end
  return {maxabs = maxabs, minabs = minabs, min = minv, max = maxv, finite = finite,
          n = #values}
end

function Gen.new()
  local g = setmetatable({}, Gen)
  g.env = {}          -- slot -> eager tensor
  g.meta = {}         -- slot -> {group = id}
  g.groups = {}       -- id -> {exact = bool, g = granularity exponent}
  g.next_slot = 1
  g.next_group = 1
  g.steps = {}
  return g
end

function Gen:new_group(exact, gran)
  local id = self.next_group
  self.next_group = id + 1
  self.groups[id] = {exact = exact, g = gran or 0}
  return id
end

function Gen:live(filter)
  local out = {}
  for slot = 1, self.next_slot - 1 do
    local t = self.env[slot]
    if t and (not filter or filter(t, slot)) then out[#out + 1] = slot end
  end
  return out
end

function Gen:exact(slot)
  local t = self.env[slot]
  if not is_float(t:dtype()) then return true end
  return self.groups[self.meta[slot].group].exact
end

function Gen:gran(slot)
  local t = self.env[slot]
  if not is_float(t:dtype()) then return 0 end
  return self.groups[self.meta[slot].group].g
end

-- Whether a float result of dtype dt with magnitude bound m and granularity
-- exponent gran is still exactly representable.
local function representable(dt, m, gran)
  local limit = dt == "f64" and F64_LIMIT or F32_LIMIT
  return m * 2 ^ gran < limit
end

-- Runs a candidate step in eager mode; keeps it if it succeeds. `check`
-- (optional) validates the results (returns false to reject a new result).
function Gen:try(step, check)
  local before = self.next_slot
  local ok, err = pcall(run_step, self.env, step)
  if ok and check then
    local good, why = check()
    if not good then
      ok, err = false, why or "rejected"
    end
  end
  if not ok then
    if step.out then self.env[step.out] = nil end
    if step.out2 then self.env[step.out2] = nil end
    self.next_slot = before
    return false, err
  end
  self.steps[#self.steps + 1] = step
  return true
end

function Gen:slot()
  local s = self.next_slot
  self.next_slot = s + 1
  return s
end

-- A fresh input tensor from a random Lua table.
local DTYPES = {"f32", "f32", "f32", "f32", "f64", "i64", "i64", "i32", "bool"}

local function random_value(dt)
  if is_float(dt) then return (R(0, 383) - 192) / 64 end
  if dt == "bool" then return R(0, 1) == 1 end
  return R(-6, 6)
end

local function random_table(shape, dt, value)
  return lh.nested(shape, function() return (value or random_value)(dt) end)
end

local function random_shape(max_rank)
  local rank = R(0, max_rank or 3)
  local shape = {}
  for d = 1, rank do shape[d] = R(1, 4) end
  return shape
end

local function shape_text(shape) return "{" .. table.concat(shape, ", ") .. "}" end

function Gen:input(shape, dt, value)
  shape = shape or random_shape()
  dt = dt or pick(DTYPES)
  local out = self:slot()
  local data = random_table(shape, dt, value)
  local step = {op = "input", out = out, data = data, dtype = dt,
                text = string.format("%s = tensor.new(%s, {dtype = %q})", var(out), lit(data), dt)}
  if #shape == 0 then
    step.text = string.format("%s = tensor.new(%s, {dtype = %q})", var(out), lit(data), dt)
  end
  assert(self:try(step))
  self.meta[out] = {group = self:new_group(true, 6)}
  return out
end

-- A shape that broadcasts with `shape`: some leading dims dropped, some
-- extents set to 1, or (the other direction) extra leading dims and 1s of
-- `shape` widened.
local function broadcast_partner(shape, into)
  local out = {}
  local mode = R(3)
  if into and mode == 2 then mode = 3 end
  if mode == 1 then
    local drop = R(0, #shape)
    for d = drop + 1, #shape do out[#out + 1] = R(2) == 1 and 1 or shape[d] end
  elseif mode == 2 then
    for d = 1, #shape do out[d] = shape[d] == 1 and R(1, 3) or shape[d] end
    if #out < 3 and R(2) == 1 then table.insert(out, 1, R(1, 3)) end
  else
    for d = 1, #shape do out[d] = shape[d] end
  end
  return out
end

local NUMBERS_FLOAT = {-2.0, -1.5, -1.0, -0.5, 0.0, 0.25, 0.5, 1.0, 2.0, 3.0, 0, 1, 2, -1}
local NUMBERS_INT = {-3, -2, -1, 0, 1, 2, 3}

-- An operand for a binary op with tensor `a`: a live tensor, a new input of
-- a broadcastable shape, or a number. `into`: the operand must broadcast
-- into a's shape (in-place ops).
function Gen:operand(a, allow_number, kind, into)
  local r = R(10)
  if allow_number and r <= 3 then
    local float = is_float(a:dtype())
    local n = float and pick(NUMBERS_FLOAT) or pick(NUMBERS_INT)
    if kind == "nonzero" and n == 0 then n = 2 end
    if kind == "exponent" then n = R(0, 3) end
    return {num = n}
  end
  if r <= 6 then
    local candidates = self:live()
    local slot = pick(candidates)
    return {slot = slot}
  end
  local dt = R(3) == 1 and pick(DTYPES) or a:dtype()
  local value = nil
  if kind == "nonzero" then
    value = function(d)
      if d == "bool" then return true end
      local v = R(1, 6)
      if is_float(d) then v = v / 2 end
      return R(2) == 1 and v or -v
    end
  elseif kind == "exponent" then
    value = function(d)
      if d == "bool" then return R(0, 1) == 1 end
      if is_float(d) then return R(0, 8) / 4 end
      return R(0, 3)
    end
  end
  return {slot = self:input(broadcast_partner(a:size(), into), dt, value)}
end

function Gen:pick_slot(filter)
  local list = self:live(filter)
  if #list == 0 then return nil end
  return pick(list)
end

-- Metadata of a new result: exact with granularity gran when every float
-- operand is exact and the magnitude bound keeps it representable.
function Gen:set_result(out, exact, gran, bound)
  if not out or not self.env[out] then return end
  local t = self.env[out]
  if is_float(t:dtype()) then
    local st = stats(t)
    local m = math.max(bound or 0, st.maxabs)
    exact = exact and representable(t:dtype(), m, gran)
  end
  self.meta[out] = {group = self:new_group(exact, gran)}
end

-- Views share the group of their base.
function Gen:set_view(out, base)
  self.meta[out] = {group = self.meta[base].group}
end

-- After an in-place write: the group stays exact only if the written value
-- was exact and representable.
function Gen:after_write(target, exact, gran)
  local group = self.groups[self.meta[target].group]
  local t = self.env[target]
  if not is_float(t:dtype()) then return end
  group.g = math.max(group.g, gran)
  if not exact then group.exact = false end
  -- every tensor of the group (base and views) must stay representable
  for slot = 1, self.next_slot - 1 do
    if self.env[slot] and self.meta[slot] and self.meta[slot].group == self.meta[target].group then
      local st = stats(self.env[slot])
      if not representable(self.env[slot]:dtype(), st.maxabs, group.g) then group.exact = false end
    end
  end
end

local function finite_bounded(t, limit)
  if not is_float(t:dtype()) then return true end
  local st = stats(t)
  return st.finite and st.maxabs <= (limit or 1e4)
end


return {
  R = R,
  pick = pick,
  is_float = is_float,
  lit = lit,
  var = var,
  operand_text = operand_text,
  OPERATORS = OPERATORS,
  value_of = value_of,
  apply_chain = apply_chain,
  chain_text = chain_text,
  random_chain = random_chain,
  random_narrow = random_narrow,
  random_select = random_select,
  add_reorder_views = add_reorder_views,
  new_menu = new_menu,
  RUN = RUN,
  run_step = run_step,
  Gen = Gen,
  F32_LIMIT = F32_LIMIT,
  F64_LIMIT = F64_LIMIT,
  flat = flat,
  stats = stats,
  representable = representable,
  DTYPES = DTYPES,
  random_value = random_value,
  random_table = random_table,
  random_shape = random_shape,
  shape_text = shape_text,
  broadcast_partner = broadcast_partner,
  NUMBERS_FLOAT = NUMBERS_FLOAT,
  NUMBERS_INT = NUMBERS_INT,
  finite_bounded = finite_bounded,
}
end
