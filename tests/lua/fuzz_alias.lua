-- fuzz_alias.lua - the differential fuzzer's aliasing programs: a few base
-- tensors (often of hostile shapes: 0 extents, runs of 1, large), views of
-- them held in variables (narrow, select, t[i], transpose, permute, view,
-- unsqueeze, squeeze, expand), in-place writes through fresh chains of views
-- whose operands may overlap the target, and reads of every alias between
-- and after the writes, with syncs, barriers and dropped references in
-- between. Values stay multiples of 1/64 of bounded size, so everything
-- except large float sums is compared exactly.
-- Loaded with `local family = dofile("fuzz_alias.lua")(fc)`.
return function(fc)
local R, pick, lit, var, is_float = math.random, fc.pick, fc.lit, fc.var, fc.is_float
local apply_chain, chain_text, random_chain = fc.apply_chain, fc.chain_text, fc.random_chain

local DTYPES = {"f32", "f32", "f64", "i64", "i32", "bool"}
-- Float values stay exact while |x| * 64 < 2^24 (f32); writes keep well
-- below that.
local BOUND = 4096

local function new_base(p, hostile)
  local shape = fc.shape(3, hostile)
  local dt = pick(DTYPES)
  local seed = p:data_seed()
  local out = p:slot()
  p:try({text = string.format("%s = %s", var(out), fc.input_text(shape, dt, seed)),
         writes = {out},
         run = function(env) env[out] = fc.input(shape, dt, seed) end})
  p:set(out, true)
  return out
end

-- An operand for an in-place op on `view`: a number, a live slot (maybe an
-- alias of the target: overlapping reads), or a view of one, whose shape
-- broadcasts into view's. Returns {num} or {slot, chain}, or nil.
local function operand(p, view)
  if R(3) == 1 then
    local dt = view:dtype()
    if dt == "bool" then return {num = R(2) == 1} end
    if is_float(dt) and R(2) == 1 then return {num = pick({-1.5, -0.25, 0.5, 1.0, 2.0})} end
    return {num = R(-3, 3)}
  end
  local target = view:size()
  local candidates = p:live(function(t)
    local s = t:size()
    if #s > #target then return false end
    for i = 1, #s do
      local e, want = s[#s - i + 1], target[#target - i + 1]
      if e ~= want and e ~= 1 then return false end
    end
    return true
  end)
  if #candidates > 0 and R(3) > 1 then return {slot = pick(candidates), chain = {}} end
  -- a view of some slot that happens to fit: try a few chains
  for _ = 1, 4 do
    local slot = p:pick_slot()
    local chain, t = random_chain(p.env[slot], 2, false)
    local s = t:size()
    local fits = #s <= #target
    for i = 1, #s do
      if not fits then break end
      local e, want = s[#s - i + 1], target[#target - i + 1]
      fits = e == want or e == 1
    end
    if fits then return {slot = slot, chain = chain} end
  end
  return nil
end

local function operand_text(x)
  if x.num ~= nil then return lit(x.num) end
  return var(x.slot) .. chain_text(x.chain)
end

local function operand_value(env, x)
  if x.num ~= nil then return x.num end
  return apply_chain(env[x.slot], x.chain)
end

-- The menu: each entry generates (and tries) one step, or returns false.
-- Views share their base's info (exactness), as the values they show do.
local MENU = fc.new_menu()
local menu = MENU.add

menu(5, "view", function(p)
  local a = p:pick_slot()
  local chain = random_chain(p.env[a], 3, R(4) > 1)
  if #chain == 0 then return false end
  local out = p:slot()
  local ok = p:try({text = string.format("%s = %s%s", var(out), var(a), chain_text(chain)),
                    writes = {out},
                    run = function(env) env[out] = apply_chain(env[a], chain) end}, nil, true)
  if ok then p.info[out] = p.info[a] end
  return ok
end)

local UNARY_INPLACE = {"neg_", "abs_", "relu_", "zero_"}

menu(8, "write", function(p)
  local target = p:pick_slot()
  local chain, view = {}, p.env[target]
  if R(4) > 1 then chain, view = random_chain(view, 3, R(6) > 1) end
  local big = fc.maxabs(view) > BOUND / 4
  local prefix = var(target) .. chain_text(chain)
  local kind = R(9)
  local text, run
  if kind <= 3 and not big then
    local fn = pick({"add_", "sub_", "add_", "mul_"})
    local x = operand(p, view)
    if not x or (x.slot and not p:exact(x.slot)) then return false end
    if fn == "mul_" then
      if x.slot and fc.maxabs(operand_value(p.env, x)) > 2 then return false end
      if x.num ~= nil and type(x.num) == "number" then x.num = pick({-1, 0, 2, 3}) end
    end
    if x.slot and fc.maxabs(operand_value(p.env, x)) > BOUND / 4 then return false end
    text = string.format("%s:%s(%s)", prefix, fn, operand_text(x))
    run = function(env)
      local v = apply_chain(env[target], chain)
      v[fn](v, operand_value(env, x))
    end
  elseif kind == 4 then
    local fn = pick(UNARY_INPLACE)
    text = string.format("%s:%s()", prefix, fn)
    run = function(env)
      local v = apply_chain(env[target], chain)
      v[fn](v)
    end
  elseif kind == 5 then
    local lo = R(4) > 1 and pick({-1, -0.5, 0}) or nil
    local hi = (lo == nil or R(4) > 1) and pick({0.5, 1, 2}) or nil
    text = string.format("%s:clamp_(%s, %s)", prefix, lit(lo), lit(hi))
    run = function(env)
      local v = apply_chain(env[target], chain)
      v:clamp_(lo, hi)
    end
  elseif kind == 6 then
    local value = view:dtype() == "bool" and (R(2) == 1) or pick({-2, 0, 1, 0.5, -0.75})
    text = string.format("%s:fill_(%s)", prefix, lit(value))
    run = function(env)
      local v = apply_chain(env[target], chain)
      v:fill_(value)
    end
  elseif kind <= 8 then
    local x = operand(p, view)
    if not x or x.num ~= nil or not p:exact(x.slot) then return false end
    if fc.maxabs(operand_value(p.env, x)) > BOUND then return false end
    text = string.format("%s:copy_(%s)", prefix, operand_text(x))
    run = function(env)
      local v = apply_chain(env[target], chain)
      v:copy_(operand_value(env, x))
    end
  else
    if view:dim() == 0 or view:size(1) == 0 then return false end
    local index = R(view:size(1))
    if R(3) == 1 then index = -index end
    local value
    if R(2) == 1 then
      value = {num = view:dtype() == "bool" and true or pick({-1, 0.5, 3})}
    else
      local row = view[index]
      value = operand(p, row)
      if not value or (value.slot and not p:exact(value.slot)) then return false end
      if value.slot and fc.maxabs(operand_value(p.env, value)) > BOUND then return false end
    end
    text = string.format("%s[%d] = %s", prefix, index, operand_text(value))
    run = function(env)
      local v = apply_chain(env[target], chain)
      v[index] = operand_value(env, value)
    end
  end
  return p:try({text = text, run = run}, nil, true)
end)

menu(4, "compute from aliases", function(p)
  local a = p:pick_slot()
  local t = p.env[a]
  local out = p:slot()
  local kind = R(5)
  local text, run
  local exact = p:exact(a)
  if kind == 1 then
    local fn = pick({"clone", "contiguous"})
    text = string.format("%s = %s:%s()", var(out), var(a), fn)
    run = function(env) env[out] = env[a][fn](env[a]) end
  elseif kind == 2 then
    local dim = t:dim() > 0 and R(4) > 1 and R(t:dim()) or nil
    local dt = t:dtype()
    -- a float sum is exact while the partial sums are (64ths below 2^24)
    if is_float(dt) then
      local limit = dt == "f64" and 2 ^ 53 or 2 ^ 24
      exact = exact and t:numel() * (fc.maxabs(t) + 1) * 64 < limit
    end
    text = string.format("%s = %s:sum(%s)", var(out), var(a), dim and tostring(dim) or "")
    run = function(env)
      if dim then env[out] = env[a]:sum(dim) else env[out] = env[a]:sum() end
    end
  elseif kind == 3 then
    local b = p:pick_slot()
    if fc.broadcast_numel(t:size(), p.env[b]:size()) > fc.MAX_RESULT then
      p.next_slot = out
      return false
    end
    local fn = pick({"add", "maximum", "sub"})
    text = string.format("%s = %s:%s(%s)", var(out), var(a), fn, var(b))
    exact = exact and p:exact(b)
    run = function(env) env[out] = env[a][fn](env[a], env[b]) end
  elseif kind == 4 then
    if t:dim() == 0 then p.next_slot = out return false end
    local b = p:pick_slot()
    local dim = R(t:dim())
    text = string.format("%s = tensor.cat({%s, %s}, %d)", var(out), var(a), var(b), dim)
    exact = exact and p:exact(b)
    run = function(env) env[out] = tensor.cat({env[a], env[b]}, dim) end
  else
    local dt = pick({"f32", "f64", "i64", "bool"})
    if is_float(t:dtype()) and not is_float(dt) and not exact then p.next_slot = out return false end
    text = string.format("%s = %s:to(%q)", var(out), var(a), dt)
    run = function(env) env[out] = env[a]:to(dt) end
  end
  local ok = p:try({text = text, writes = {out}, run = run}, function()
    return fc.maxabs(p.env[out]) <= 2 ^ 20
  end, true)
  if ok then p:set(out, exact, a) end
  return ok
end)

menu(3, "observe", function(p)
  local a = p:pick_slot()
  local info = p.info[a] or {exact = true, scale = 0}
  local kind = R(3)
  if kind == 1 then
    return p:try({text = string.format("observe(%s)", var(a)),
                  run = function(env, obs) obs(env[a], info) end})
  elseif kind == 2 then
    return p:try({text = string.format("observe(%s:tolist())", var(a)),
                  run = function(env, obs) obs(env[a]:tolist(), info) end})
  end
  local b = p:pick_slot()
  return p:try({text = string.format("observe(%s == %s)", var(a), var(b)),
                run = function(env, obs) obs(env[a] == env[b]) end})
end)

menu(2, "barrier", function(p)
  if R(2) == 1 then
    return p:try({text = "tensor.mark_step()", run = function() tensor.mark_step() end})
  end
  local a, b = p:pick_slot(), p:pick_slot()
  return p:try({text = string.format("tensor.sync(%s, %s)", var(a), var(b)),
                run = function(env) tensor.sync(env[a], env[b]) end})
end)

menu(1, "drop", function(p)
  if #p:live() <= 2 then return false end
  local a = p:pick_slot()
  return p:try({text = var(a) .. " = nil; collectgarbage()", writes = {a},
                run = function(env)
                  env[a] = nil
                  collectgarbage()
                end})
end)

menu(1, "new base", function(p)
  new_base(p, R(2) == 1)
  return true
end)

local function generate(seed)
  local p = fc.Program.new("alias", seed)
  local hostile = R(3) > 1
  for _ = 1, R(1, 3) do new_base(p, hostile) end
  fc.grow(p, MENU, R(8, 30))
  return p:finish()
end

return {name = "alias", generate = generate}
end
