-- helpers.lua - shared by the Lua scripts of tests/dist, which mpirun starts
-- as 2 or 3 ranks (lib.sh). Loaded with
--   local h = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")
--
-- A failed check raises an error: the lazylua program prints it and ends
-- the whole job (MPI_Abort), so the driver sees a non-zero status with the
-- failing rank's message. Expected values are computed here from plain Lua
-- numbers (formulas of the rank), never by the tensor code under test.
local dist = require "dist"

local h = {dist = dist, rank = dist.rank(), size = dist.size()}

function h.fail(message)
  error(string.format("rank %d of %d: %s", h.rank, h.size, message), 2)
end

-- show (nested tables as text) and is_nan come from the Lua tests' helpers.
local lua_helpers = dofile((arg[0]:match("^(.*)/") or ".") .. "/../lua/helpers.lua")
local show, is_nan = lua_helpers.show, lua_helpers.is_nan
h.show = show

-- Exact equality of two (nested) lists, NaN equal to NaN, and a number's
-- integer-ness (an i64 result must come back as Lua integers).
local function same(a, b)
  if type(a) == "table" or type(b) == "table" then
    if type(a) ~= "table" or type(b) ~= "table" or #a ~= #b then return false end
    for i = 1, #a do
      if not same(a[i], b[i]) then return false end
    end
    return true
  end
  if type(a) == "number" and type(b) == "number" then
    if is_nan(a) or is_nan(b) then return is_nan(a) and is_nan(b) end
    return a == b and math.type(a) == math.type(b)
  end
  return a == b
end

-- t's dtype, shape and values are exactly `dtype`, `shape`, `values`
-- (a flat list in row-major order, or a number for a 0-d tensor).
function h.expect(what, t, dtype, shape, values)
  if t:dtype() ~= dtype then h.fail(string.format("%s: dtype %s, expected %s", what, t:dtype(), dtype)) end
  local got_shape = t:size()
  local plain_shape = {}
  for i = 1, #got_shape do plain_shape[i] = got_shape[i] end
  if not same(plain_shape, shape) then
    h.fail(string.format("%s: shape %s, expected %s", what, show(plain_shape), show(shape)))
  end
  local got = t:tolist()
  if type(got) == "table" then
    local flat = {}
    local function walk(v)
      if type(v) == "table" then for i = 1, #v do walk(v[i]) end else flat[#flat + 1] = v end
    end
    walk(got)
    got = flat
  end
  if not same(got, values) then
    h.fail(string.format("%s: got %s, expected %s", what, show(got), show(values)))
  end
end

-- pcall(fn) must fail with a message containing `pattern` (plain text).
function h.expect_error(what, pattern, fn, ...)
  local ok, message = pcall(fn, ...)
  if ok then h.fail(what .. ": no error, expected one with '" .. pattern .. "'") end
  message = tostring(message)
  if not message:find(pattern, 1, true) then
    h.fail(string.format("%s: error '%s' lacks '%s'", what, message, pattern))
  end
  return message
end

-- Every rank holds the same values in t: its elementwise max and min over
-- the ranks both equal this rank's (for floats: the same number, or NaN
-- everywhere; only +0 and -0 would pass unequal bits).
function h.expect_same_everywhere(what, t)
  local hi = dist.all_reduce(t:clone(), "max")
  local lo = dist.all_reduce(t:clone(), "min")
  local mine = t:reshape(-1):tolist()
  local a, b = hi:reshape(-1):tolist(), lo:reshape(-1):tolist()
  for i = 1, #mine do
    if not (same(a[i], mine[i]) and same(b[i], mine[i])) then
      h.fail(string.format("%s: element %d differs between ranks: here %s, max %s, min %s", what,
        i, show(mine[i]), show(a[i]), show(b[i])))
    end
  end
end

function h.mode()
  if os.getenv("LAZYLUA_EAGER") == "1" then return "eager" end
  return os.getenv("LAZYLUA_COMPILE") or "lazy"
end

function h.done(name)
  tensor.mark_step()
  dist.barrier()
  if h.rank == 0 then print(string.format("%s: ok on %d ranks (%s)", name, h.size, h.mode())) end
end

return h
