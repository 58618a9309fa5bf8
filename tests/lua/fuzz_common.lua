-- fuzz_common.lua - what the differential fuzzer's generators share
-- (test_fuzz_programs.lua, tools/fuzz.sh): programs as lists of readable
-- steps, their generation in eager mode, random shapes and inputs (hostile
-- ones too), replay in a given mode, and comparison of two replays.
-- Loaded with `local fc = dofile("fuzz_common.lua")(h, lh)`.
--
-- A program is generated once, in eager mode, from its own seed: a step is
-- a candidate {text, run} that is kept when running it eagerly succeeds
-- (so shapes and dtypes are always valid), or, for errors that do not
-- depend on data (shapes, dims, dtypes), kept as an expected error that
-- every mode must raise with the same message. The program is then replayed
-- eagerly and in the process's mode (lazy, or lazy with every graph
-- compiled under LAZYLUA_COMPILE=sync), and everything it observed and
-- every value live at the end must agree.
--
-- Tolerances. Integers and bools are compared exactly; so are floats the
-- generator knows are exact (built from multiples of 1/64 by ops that round
-- nothing). Other floats are compared within a tolerance relative to the
-- largest magnitude that went into them ("scale"): 1e-4 for f32 (chains of
-- transcendentals, reassociated sums), 1e-9 for f64.
return function(h, lh)
local R = math.random
-- the value text, view chains and weighted menus of the older random
-- programs (test_lazy_random_programs.lua)
local rp = dofile("random_programs.lua")(h, lh)

local fc = {}

fc.pick, fc.is_float, fc.lit, fc.var = rp.pick, rp.is_float, rp.lit, rp.var
fc.apply_chain, fc.chain_text, fc.new_menu = rp.apply_chain, rp.chain_text, rp.new_menu
local pick, is_float, lit, var = fc.pick, fc.is_float, fc.lit, fc.var

-- ---------------------------------------------------------------------------
-- Shapes. `hostile`: extents of 0, runs of 1 (broadcasts) and now and then a
-- large-but-valid tensor (up to ~200k elements, odd extents that leave
-- vector tails).

local LARGE = {{1, 65537}, {257, 300}, {3, 20011}, {70001}, {2, 129, 257}, {200003}, {513, 1, 129}}

function fc.shape(max_rank, hostile)
  if hostile and R(8) == 1 then
    local s = pick(LARGE)
    local out = {}
    for i = 1, #s do out[i] = s[i] end
    return out
  end
  local rank = R(0, max_rank or 3)
  local shape = {}
  for d = 1, rank do
    if hostile then
      local r = R(10)
      shape[d] = r == 1 and 0 or (r <= 4 and 1 or R(2, 6))
    else
      shape[d] = R(1, 4)
    end
  end
  return shape
end

function fc.numel(shape)
  local n = 1
  for _, e in ipairs(shape) do n = n * e end
  return n
end

-- Elements of the broadcast of two shapes (math.huge when they do not
-- broadcast): generators keep results small, as two large operands of
-- crossing shapes ({n, 1} and {1, m}) would make an n*m result.
fc.MAX_RESULT = 1 << 20

function fc.broadcast_numel(a, b)
  local n = 1
  for i = 1, math.max(#a, #b) do
    local x, y = a[#a - i + 1] or 1, b[#b - i + 1] or 1
    if x ~= y and x ~= 1 and y ~= 1 then return math.huge end
    n = n * math.max(x, y)
    if x == 0 or y == 0 then n = 0 end
  end
  return n
end

-- A shape that broadcasts with `shape` (result: `shape`, or wider when not
-- `into`): leading dims dropped, extents replaced by 1.
function fc.partner(shape, into)
  local out = {}
  local drop = R(3) == 1 and R(0, #shape) or 0
  for d = drop + 1, #shape do out[#out + 1] = R(3) == 1 and 1 or shape[d] end
  if not into and R(6) == 1 and #out < 4 then table.insert(out, 1, R(1, 3)) end
  return out
end

-- ---------------------------------------------------------------------------
-- Inputs: values from the program's own LCG, so a step's text names its
-- data by a seed instead of listing 200k numbers. Floats are multiples of
-- 1/64 in [-3, 3) (exact in f32), or in [lo, hi] for kind "positive".

local function values(n, dt, seed, kind)
  local state = seed & 0x7fffffff
  local out = {}
  for i = 1, n do
    state = (state * 1103515245 + 12345) & 0x7fffffff
    local r = state >> 8
    if dt == "bool" then
      out[i] = r % 2 == 1
    elseif is_float(dt) then
      out[i] = kind == "positive" and (r % 160 + 32) / 64 or (r % 384 - 192) / 64
    else
      out[i] = kind == "positive" and r % 6 + 1 or r % 13 - 6
    end
  end
  return out
end

-- input(shape, dtype, seed[, kind]): the tensor every mode builds alike.
function fc.input(shape, dt, seed, kind)
  local n = fc.numel(shape)
  local flat = values(n, dt, seed, kind)
  if #shape == 0 then return tensor.new(flat[1], {dtype = dt}) end
  return tensor.new(flat, {dtype = dt}):reshape(shape)
end

function fc.input_text(shape, dt, seed, kind)
  return string.format("input(%s, %q, %d%s)", lit(shape), dt, seed,
                       kind and (", " .. lit(kind)) or "")
end

-- Largest |value| of a tensor (0 for empty or non-float; inf if any is not
-- finite). Reads the tensor: generation only.
function fc.maxabs(t)
  if not is_float(t:dtype()) or t:numel() == 0 then
    if t:numel() == 0 or t:dtype() == "bool" then return 0 end
    return math.abs(t:abs():max():item())
  end
  local m = t:abs():max():item()
  if m ~= m then return math.huge end
  return m
end

function fc.minabs(t)
  if t:numel() == 0 then return math.huge end
  if t:dtype() == "bool" then return 0 end
  return math.abs(t:abs():min():item())
end

-- ---------------------------------------------------------------------------
-- Programs

local Program = {}
Program.__index = Program
fc.Program = Program

-- A new program for `family`, generated from math.random's current state.
function Program.new(family, seed)
  local p = setmetatable({}, Program)
  p.family, p.seed = family, seed
  p.steps = {}
  p.env = {}           -- slot -> eager tensor (generation)
  p.info = {}          -- slot -> {exact = bool, scale = number}
  p.next_slot = 1
  p.next_data = R(1, 1 << 30)
  return p
end

-- A program keeps its slots as random_programs.lua's generator does (env,
-- next_slot): the same slot allocation and live-slot picking.
Program.slot, Program.live, Program.pick_slot = rp.Gen.slot, rp.Gen.live, rp.Gen.pick_slot

function Program:data_seed()
  self.next_data = self.next_data + 7919
  return self.next_data
end

-- Runs the candidate `step` ({text, run(env, obs)}) eagerly. Kept when it
-- succeeds and `check` (optional, called after) accepts; `may_fail`: a
-- failure that does not depend on data is kept too, as an error every mode
-- must raise alike. Returns whether the step ran without error and was kept.
function Program:try(step, check, may_fail)
  local saved = {}
  for _, slot in ipairs(step.writes or {}) do saved[slot] = {self.env[slot]} end
  local ok, err = pcall(step.run, self.env, function() end)
  if ok and check then
    local good, why = check()
    if not good then ok, err = false, why or "rejected" end
  end
  if not ok then
    -- a rejected step must leave no trace (the program would not replay
    -- what generation saw)
    for slot, v in pairs(saved) do self.env[slot] = v[1] end
    if may_fail and type(err) == "string" and not err:find("rejected", 1, true) then
      step.expect_error = true
      self.steps[#self.steps + 1] = step
      self.errors_kept = (self.errors_kept or 0) + 1
    end
    return false
  end
  self.steps[#self.steps + 1] = step
  return true
end

-- Marks `slot` as exact (or not), with the scale of what went into it.
function Program:set(slot, exact, ...)
  local t = self.env[slot]
  if t == nil then return end
  local scale = fc.maxabs(t)
  for _, other in ipairs({...}) do
    if self.info[other] then scale = math.max(scale, self.info[other].scale) end
  end
  self.info[slot] = {exact = exact or not is_float(t:dtype()), scale = scale}
  -- an f32 value anywhere may have rounded what an f64 result holds
  if t:dtype() == "f32" then self.f32 = true end
end

function Program:exact(slot)
  return self.info[slot] == nil or self.info[slot].exact
end

-- The slots compared at the end: every live one (or those given).
function Program:finish(slots)
  self.final = {}
  for _, slot in ipairs(slots or self:live()) do
    local info = self.info[slot] or {exact = true, scale = 0}
    self.final[#self.final + 1] = {slot = slot, exact = info.exact, scale = info.scale}
  end
  self.env = nil
  return self
end

function Program:text()
  local lines = {string.format("-- %s program, seed %d, %d steps (inputs: fuzz_common.lua's input())",
                               self.family, self.seed, #self.steps)}
  for i, step in ipairs(self.steps) do
    lines[#lines + 1] = string.format("%3d  %s%s", i, step.text,
                                      step.expect_error and "   -- raises an error" or "")
  end
  local live = {}
  for _, f in ipairs(self.final or {}) do live[#live + 1] = var(f.slot) .. (f.exact and "" or "~") end
  lines[#lines + 1] = "-- compared at the end (~: within tolerance): " .. table.concat(live, " ")
  return table.concat(lines, "\n")
end

-- ---------------------------------------------------------------------------
-- Replay and comparison

-- Errors raised inside replays name the generator's line, the same in
-- every mode: compared as they are.
local function message(err) return tostring(err) end

-- Replays `program` with tensor.set_eager(eager): observations (values
-- passed to obs, as snapshots), expected errors, and the final slots.
function fc.replay(program, eager)
  tensor.set_eager(eager)
  local env, observed = {}, {}
  local function obs(v, tol)
    observed[#observed + 1] = {value = lh.snapshot(v), tol = tol}
  end
  for i, step in ipairs(program.steps) do
    local ok, err = pcall(step.run, env, obs)
    if step.expect_error then
      observed[#observed + 1] = {value = ok and "no error" or ("error: " .. message(err)),
                                 step = i}
    elseif not ok then
      tensor.set_eager(true)
      return {error = string.format("step %d (%s) raised: %s", i, step.text, message(err))}
    end
  end
  local final = {}
  for _, f in ipairs(program.final) do
    local ok, snap = pcall(lh.snapshot, env[f.slot])
    if not ok then return {error = string.format("reading %s raised: %s", var(f.slot), snap)} end
    final[#final + 1] = snap
  end
  env = nil
  tensor.mark_step()
  return {observed = observed, final = final}
end

-- The tolerance for a float value of dtype dt whose inputs reached `scale`.
function fc.tolerance(exact, scale, dt)
  if exact then return lh.EXACT end
  scale = math.max(scale or 1, 1)
  if dt == "f64" then return {rel = 1e-9, abs = 1e-9 * scale, name = "f64, scale " .. scale} end
  return {rel = 1e-4, abs = 1e-4 * scale, name = "f32, scale " .. scale}
end

local function snap_dtype(program, s)
  if program.f32 then return "f32" end
  if type(s) == "table" and s.tensor == true then return s.dtype end
  return "f32"  -- plain numbers (tolist, item): the looser tolerance
end

-- Compares two replays; returns ok, message.
function fc.compare(program, eager, lazy)
  if eager.error or lazy.error then
    if eager.error == lazy.error then return true end
    return false, string.format("eager: %s\nlazy:  %s", eager.error or "ok", lazy.error or "ok")
  end
  if #eager.observed ~= #lazy.observed then
    return false, string.format("%d observations eagerly, %d lazily", #eager.observed,
                                #lazy.observed)
  end
  for i, e in ipairs(eager.observed) do
    local l = lazy.observed[i]
    local tol = e.tol and fc.tolerance(e.tol.exact, e.tol.scale, snap_dtype(program, e.value)) or lh.EXACT
    local ok, msg = lh.compare(e.value, l.value, tol,
                               e.step and ("the error of step " .. e.step) or ("observation " .. i))
    if not ok then return false, msg end
  end
  for i, f in ipairs(program.final) do
    local e, l = eager.final[i], lazy.final[i]
    local tol = fc.tolerance(f.exact, f.scale, snap_dtype(program, e))
    local ok, msg = lh.compare(e, l, tol, var(f.slot) .. " at the end")
    if not ok then return false, msg end
  end
  return true
end

-- ---------------------------------------------------------------------------
-- Random views (for aliasing and for captured tensors)

-- A random view step {fn, args} valid for t, or nil. `writable`: no
-- expand (a write through an expanded view is an error when it overlaps).
function fc.random_view(t, writable)
  local rank, size = t:dim(), t:size()
  local choices = {}
  if rank >= 1 then
    choices[#choices + 1] = function() return rp.random_narrow(size, 0) end
    if fc.numel(size) > 0 then
      choices[#choices + 1] = function() return rp.random_select(size) end
      choices[#choices + 1] = function()
        if size[1] == 0 then return nil end
        return {fn = "index", args = {R(size[1])}}
      end
    end
    choices[#choices + 1] = function() return {fn = "flatten", args = {}} end
  end
  choices[#choices + 1] = function() return {fn = "unsqueeze", args = {R(rank + 1)}} end
  rp.add_reorder_views(choices, rank)
  local ones = {}
  for d = 1, rank do if size[d] == 1 then ones[#ones + 1] = d end end
  if #ones > 0 then
    choices[#choices + 1] = function() return {fn = "squeeze", args = {pick(ones)}} end
    if not writable then
      choices[#choices + 1] = function()
        local target = {}
        for d = 1, rank do target[d] = size[d] == 1 and R(1, 3) or -1 end
        return {fn = "expand", args = target}
      end
    end
  end
  if t:is_contiguous() and rank >= 1 then
    choices[#choices + 1] = function()
      local n = fc.numel(size)
      if n == 0 then return {fn = "view", args = {0, -1}} end
      local divisors = {}
      for f = 1, math.min(n, 64) do if n % f == 0 then divisors[#divisors + 1] = f end end
      local f = pick(divisors)
      return {fn = "view", args = {f, n // f}}
    end
  end
  return pick(choices)()
end

-- A chain of up to max_len views valid from t (checked eagerly).
function fc.random_chain(t, max_len, writable)
  return rp.random_chain(t, max_len, function(cur) return fc.random_view(cur, writable) end)
end

-- Adds steps drawn from `menu` (fc.new_menu) until `steps` of them were
-- kept (or 10 times as many were tried). A generator that raises is a bug
-- of the family's, named with it.
function fc.grow(p, menu, steps)
  local counted, attempts = 0, 0
  while counted < steps and attempts < steps * 10 do
    attempts = attempts + 1
    local m = menu.pick()
    local ok, result = pcall(m.f, p)
    if not ok then error(string.format("%s generator %q failed: %s", p.family, m.name, result), 0) end
    if result then counted = counted + 1 end
  end
end

return fc
end
