-- lazy_helpers.lua - helpers for the tests that compare lazy mode with eager
-- mode (test_lazy_*.lua). Loaded with `local lh = dofile("lazy_helpers.lua")`.
--
-- The idea: run the same Lua function once with tensor.set_eager(true) and
-- once in lazy mode, turn everything it returns into plain Lua data
-- (snapshots: dtype, shape and tolist() of every tensor), and compare the
-- two. When the whole process runs under LAZYLUA_EAGER=1 both halves are
-- eager (the "lazy" half runs in the process's starting mode).

local lh = {}

-- The mode the process started in: the "lazy" half of each comparison runs
-- in it, so under LAZYLUA_EAGER=1 both halves are eager.
lh.LAZY = not tensor.is_eager()

-- Tolerances between the eager and the lazy value of a float result, as
-- |lazy - eager| <= abs + rel * |eager|. Integer and bool results are always
-- compared exactly (value, Lua number subtype, dtype and shape).
--
-- Exact: ops that do no float rounding of their own (views, copies, joins,
-- gather, casts, comparisons, max/min, floor/ceil/round/trunc, neg, abs,
-- relu, where, clamp, fill).
lh.EXACT = {rel = 0, abs = 0, name = "exact"}
-- f32 elementwise arithmetic (+ - * / pow, one op): one rounding each side,
-- a fused kernel may contract a*b+c into an FMA: 1e-6 relative.
lh.EW = {rel = 1e-6, abs = 1e-6, name = "elementwise 1e-6"}
-- A chain of k f32 elementwise ops: the error grows at most linearly.
function lh.CHAIN(k) return {rel = k * 1e-6, abs = k * 1e-6, name = "chain of " .. k} end
-- f32 transcendentals (exp log tanh sigmoid gelu sin ...): either side may use
-- a vectorized approximation of a few ulp (2e-6 each): 4e-6 between them.
lh.TRANS = {rel = 4e-6, abs = 2e-6, name = "transcendental 4e-6"}
-- Reductions (sum, mean, prod, cumsum, dot products, matmul) over n f32
-- elements of magnitude <= scale: blocked/pairwise/sequential orders differ
-- by reassociation, at most ~n ulps of the running sum: n * 1e-7, relative to
-- the result and absolute relative to the scale of the terms.
function lh.REDUCE(n, scale)
  scale = scale or 1
  return {rel = n * 1e-7 + 1e-6, abs = n * 1e-7 * scale + 1e-6, name = "reduce n=" .. n}
end
-- softmax / log_softmax over n elements: exp, a reduction and a division.
function lh.SOFTMAX(n) return {rel = n * 1e-7 + 4e-6, abs = n * 1e-7 + 4e-6, name = "softmax n=" .. n} end
-- f64: elementwise 1e-14, reductions n * 1e-15.
lh.F64 = {rel = 1e-14, abs = 1e-14, name = "f64"}

local function is_nan(x) return x ~= x end

-- Plain-data form of a value: tensors become {tensor = true, dtype, shape,
-- values}; tables are copied recursively; other values are kept.
local function snapshot(v, seen)
  if tensor.is_tensor(v) then
    return {tensor = true, dtype = v:dtype(), shape = v:size(), values = v:tolist()}
  end
  if type(v) == "table" then
    seen = seen or {}
    if seen[v] then return seen[v] end
    local out = {}
    seen[v] = out
    -- a fixed order (the order of the syncs in lazy mode)
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = k end
    table.sort(keys, function(a, b)
      if type(a) == type(b) and type(a) ~= "boolean" then return a < b end
      return type(a) < type(b)
    end)
    for _, k in ipairs(keys) do out[k] = snapshot(v[k], seen) end
    return out
  end
  return v
end
lh.snapshot = snapshot

local function show(v)
  if type(v) == "table" then
    if v.tensor == true and v.dtype then
      return string.format("%s%s %s", v.dtype, show(v.shape), show(v.values))
    end
    local parts = {}
    local n = #v
    for i = 1, n do parts[#parts + 1] = show(v[i]) end
    local keys = {}
    for k in pairs(v) do
      if not (math.type(k) == "integer" and k >= 1 and k <= n) then keys[#keys + 1] = k end
    end
    table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    for _, k in ipairs(keys) do parts[#parts + 1] = tostring(k) .. "=" .. show(v[k]) end
    return "{" .. table.concat(parts, ", ") .. "}"
  elseif math.type(v) == "float" then
    return string.format("%.9g", v)
  elseif type(v) == "string" then
    return string.format("%q", v)
  end
  return tostring(v)
end
lh.show = show

local function near(l, e, tol)
  if is_nan(e) then return is_nan(l) end
  if is_nan(l) then return false end
  if e == math.huge or e == -math.huge or l == math.huge or l == -math.huge then return l == e end
  return math.abs(l - e) <= tol.abs + tol.rel * math.abs(e)
end
lh.near = near

-- Compares the leaves of two tensors' value lists. `exact` for integer and
-- bool dtypes.
local function compare_values(e, l, tol, exact, path)
  if type(e) == "table" then
    if type(l) ~= "table" then return false, path .. ": eager has a table, lazy " .. show(l) end
    if #e ~= #l then
      return false, string.format("%s: eager length %d, lazy length %d", path, #e, #l)
    end
    for i = 1, #e do
      local ok, msg = compare_values(e[i], l[i], tol, exact, path .. "[" .. i .. "]")
      if not ok then return false, msg end
    end
    return true
  end
  local ok
  if type(e) ~= type(l) or math.type(e) ~= math.type(l) then
    ok = false
  elseif exact or type(e) ~= "number" or math.type(e) == "integer" then
    ok = e == l or (type(e) == "number" and is_nan(e) and is_nan(l))
  else
    ok = near(l, e, tol)
  end
  if not ok then
    return false, string.format("%s: eager %s (%s), lazy %s (%s)%s", path, show(e),
                                math.type(e) or type(e), show(l), math.type(l) or type(l),
                                exact and "" or " [tolerance " .. (tol.name or "?") .. "]")
  end
  return true
end

-- Compares two snapshots. Float leaves of float tensors (and plain float
-- numbers) use `tol`; everything else must be identical.
local function compare(e, l, tol, path)
  path = path or "result"
  tol = tol or lh.EXACT
  if type(e) == "table" and e.tensor == true and e.dtype then
    if type(l) ~= "table" or l.tensor ~= true then
      return false, path .. ": eager gave a tensor, lazy gave " .. show(l)
    end
    if e.dtype ~= l.dtype then
      return false, string.format("%s: eager dtype %s, lazy dtype %s", path, e.dtype, l.dtype)
    end
    if show(e.shape) ~= show(l.shape) then
      return false, string.format("%s: eager shape %s, lazy shape %s", path, show(e.shape),
                                  show(l.shape))
    end
    local exact = not (e.dtype == "f32" or e.dtype == "f64")
    local ok, msg = compare_values(e.values, l.values, tol, exact, path)
    if not ok then
      return false, msg .. "\n  eager: " .. show(e) .. "\n  lazy:  " .. show(l)
    end
    return true
  end
  if type(e) == "table" then
    if type(l) ~= "table" then return false, path .. ": eager gave a table, lazy " .. show(l) end
    -- keys in a fixed order, so that the first difference reported is
    -- the same from run to run
    local keys = {}
    for k in pairs(e) do keys[#keys + 1] = k end
    table.sort(keys, function(a, b)
      if type(a) == type(b) and type(a) ~= "boolean" then return a < b end
      return type(a) < type(b)
    end)
    for _, k in ipairs(keys) do
      local ok, msg = compare(e[k], l[k], tol, path .. "." .. tostring(k))
      if not ok then return false, msg end
    end
    for k, x in pairs(l) do
      if e[k] == nil then
        return false, string.format("%s.%s: only lazy has %s", path, tostring(k), show(x))
      end
    end
    return true
  end
  return compare_values(e, l, tol, false, path)
end
lh.compare = compare

-- Appends every tensor in v (a value or nested tables) to list, once each.
local function collect_tensors(v, list, seen)
  if tensor.is_tensor(v) then
    if not seen[v] then list[#list + 1] = v end
    seen[v] = true
  elseif type(v) == "table" and not seen[v] then
    seen[v] = true
    for _, x in pairs(v) do collect_tensors(x, list, seen) end
  end
end

-- Runs f() in the given mode and returns the snapshot of what it returned,
-- or {error = message} when it raised. f may call obs(x) to record a value
-- in the middle of the computation (an observation: this syncs in lazy
-- mode); the recorded values are part of the result.
local function run_in(eager, f)
  tensor.set_eager(eager)
  local observed = {}
  local function obs(...)
    observed[#observed + 1] = snapshot({...})
    return ...
  end
  local results = table.pack(pcall(f, obs))
  local out
  if results[1] then
    table.remove(results, 1)
    results.n = nil
    -- One sync for all the tensors f returned, so a case is one graph (one
    -- C compile in compiled mode), not one per tensor it returns.
    local returned = {}
    collect_tensors(results, returned, {})
    if #returned > 0 then tensor.sync(table.unpack(returned)) end
    out = {results = snapshot(results), observed = observed}
  else
    out = {error = tostring(results[2]), observed = observed}
  end
  tensor.mark_step()
  return out
end

-- The eager and the lazy snapshot of f's results.
function lh.both(f)
  local before = tensor.is_eager()
  local eager = run_in(true, f)
  local lazy = run_in(not lh.LAZY, f)
  tensor.set_eager(before)
  return eager, lazy
end

-- Fails (with both snapshots) unless f gives the same results in eager and
-- lazy mode. Errors must happen in both modes, with the same message.
function lh.same(f, tol, level)
  local eager, lazy = lh.both(f)
  if eager.error or lazy.error then
    if eager.error ~= lazy.error then
      error(string.format("eager %s\nlazy  %s",
                          eager.error and ("raised: " .. eager.error) or "succeeded",
                          lazy.error and ("raised: " .. lazy.error) or "succeeded"), (level or 1) + 1)
    end
  end
  local ok, msg = compare(eager, lazy, tol)
  if not ok then error(msg, (level or 1) + 1) end
  return eager, lazy
end

-- A nested table of the given shape whose leaves are leaf() called in
-- row-major order ({} gives a plain value).
function lh.nested(shape, leaf)
  local function build(d)
    if d > #shape then return leaf() end
    local out = {}
    for i = 1, shape[d] do out[i] = build(d + 1) end
    return out
  end
  return build(1)
end

-- Deterministic test data as nested Lua tables, from our own generator (a
-- 32-bit LCG) so that it does not depend on math.random's state.
local Gen = {}
Gen.__index = Gen
function lh.gen(seed) return setmetatable({state = seed & 0x7fffffff}, Gen) end
function Gen:next()
  self.state = (self.state * 1103515245 + 12345) & 0x7fffffff
  return self.state
end
function Gen:uniform() return self:next() / 0x80000000 end
function Gen:int(lo, hi) return lo + self:next() % (hi - lo + 1) end
-- kind: "f" floats in [-3, 3) (exact in f32: 1/64 steps), "pos" floats in
-- [0.25, 4), "i" integers in [-6, 6], "nz" nonzero integers, "small"
-- integers in [0, 3], "b" booleans, "true" (a nonzero bool divisor), "mixed" floats with NaN, inf and ties.
function Gen:value(kind)
  if kind == "f" then return (self:int(0, 383) - 192) / 64
  elseif kind == "pos" then return (self:int(16, 255)) / 64
  elseif kind == "i" then return self:int(-6, 6)
  elseif kind == "nz" then
    local v = self:int(1, 6)
    return self:int(0, 1) == 0 and v or -v
  elseif kind == "small" then return self:int(0, 3)
  elseif kind == "b" then return self:int(0, 1) == 1
  elseif kind == "true" then return true
  elseif kind == "mixed" then
    local specials = {0 / 0, math.huge, -math.huge, 0.5, -0.5, 1.5, 2.5, -2.5, 0.0, -0.0}
    if self:int(0, 2) == 0 then return specials[self:int(1, #specials)] end
    return (self:int(0, 383) - 192) / 64
  end
  error("unknown kind " .. tostring(kind))
end
-- A nested table of the given shape ({} gives a plain value).
function Gen:table(shape, kind)
  return lh.nested(shape, function() return self:value(kind) end)
end

-- dtype for tensor.new from a generator kind.
local KIND_DTYPE = {f = "f32", pos = "f32", i = "i64", nz = "i64", small = "i64", b = "bool",
                    ["true"] = "bool", mixed = "f32"}
lh.KIND_DTYPE = KIND_DTYPE

-- A tensor from a nested table; dtype defaults from the kind.
function lh.make(data, dtype)
  return tensor.new(data, {dtype = dtype})
end

-- Resident set size in bytes (Linux: /proc/self/statm, field 2, 4 KiB pages).
function lh.rss()
  local f = io.open("/proc/self/statm", "r")
  if not f then return nil end
  local line = f:read("l")
  f:close()
  local resident = tonumber(line:match("^%d+%s+(%d+)"))
  return resident * 4096
end

-- True when AddressSanitizer is loaded: its quarantine keeps freed memory
-- resident, so resident-memory checks do not apply.
function lh.under_sanitizer()
  local f = io.open("/proc/self/maps", "r")
  if not f then return false end
  for line in f:lines() do
    if line:find("libasan", 1, true) or line:find("libtsan", 1, true) then
      f:close()
      return true
    end
  end
  f:close()
  return false
end

-- One differential case: diff(name, tol, f) is a named group of `h` (the
-- test's helpers.lua) whose failure names the line that called diff.
function lh.differ(h)
  return function(name, tol, f)
    h.test(name, function() lh.same(f, tol, 2) end, 3)
  end
end

function lh.key(...)
  local parts = {}
  for i, v in ipairs({...}) do
    if type(v) == "table" then
      parts[i] = "[" .. table.concat(v, ",") .. "]"
    else
      parts[i] = tostring(v)
    end
  end
  return table.concat(parts, " ")
end

return lh
