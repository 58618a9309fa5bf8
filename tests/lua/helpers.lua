-- helpers.lua - small assertion helpers for the Lua-level tensor tests.
--
-- Loaded with `local h = dofile("helpers.lua")` (the tests run with cwd
-- tests/lua). Expected values are always computed independently of the tensor
-- module: literal tables, or plain Lua loops over numbers and tolist() output.
-- The checking helpers only ever call t:dtype(), t:size() and t:tolist() on
-- tensors (still_works alone computes, to show an error left the
-- interpreter usable).

local h = {}

-- Tolerances for comparing a tensor result with a reference computed in Lua
-- doubles. A check passes when |got - want| <= abs + rel * |want|.
h.EXACT = {rel = 0, abs = 0}
-- f32 elementwise arithmetic (+ - * /, casts): one rounding to f32 (6e-8).
h.F32 = {rel = 1e-6, abs = 1e-6}
-- f32 transcendentals (exp, log, tanh, sin ...): the kernels may use
-- vectorized approximations of a few ulp.
h.TRANS = {rel = 2e-6, abs = 1e-6}
-- gelu: erf-based, as torch's default (the tanh approximation is ~1e-3 off).
h.GELU = {rel = 2e-6, abs = 2e-6}
-- f64 elementwise and f64 transcendentals.
h.F64 = {rel = 1e-12, abs = 1e-12}
-- Reductions (and dot products) of n f32 elements: blocked or pairwise
-- summation, error grows at most linearly with n.
function h.REDUCE(n) return {rel = n * 1e-7, abs = n * 1e-7} end

local function is_nan(x) return x ~= x end
h.is_nan = is_nan

-- Human-readable nested table, for failure messages.
local function show(v)
  if type(v) == "table" then
    local parts = {}
    for i = 1, #v do parts[i] = show(v[i]) end
    return "{" .. table.concat(parts, ", ") .. "}"
  elseif math.type(v) == "float" then
    return string.format("%.9g", v)
  end
  return tostring(v)
end
h.show = show

-- Shape of a nested table: {} for a plain value.
function h.shape_of(v)
  local shape = {}
  while type(v) == "table" do
    shape[#shape + 1] = #v
    v = v[1]
  end
  return shape
end

function h.same_list(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do
    if a[i] ~= b[i] then return false end
  end
  return true
end

-- Flattens a nested table (row-major) into a plain list.
function h.flatten(v, out)
  out = out or {}
  if type(v) ~= "table" then
    out[#out + 1] = v
    return out
  end
  for i = 1, #v do h.flatten(v[i], out) end
  return out
end

-- Applies f to every leaf of a nested table.
function h.map(v, f)
  if type(v) ~= "table" then return f(v) end
  local out = {}
  for i = 1, #v do out[i] = h.map(v[i], f) end
  return out
end

-- NumPy broadcasting of f over nested tables (or plain values), the
-- independent reference for elementwise tensor ops: f gets one leaf of each
-- of args[1..args.n]. `name` says whose assertion failed.
local function broadcast_map(name, args, f)
  local shapes, rank = {}, 0
  for i = 1, args.n do
    shapes[i] = h.shape_of(args[i])
    rank = math.max(rank, #shapes[i])
  end
  local shape = {}
  for d = 1, rank do
    local e = 1
    for _, s in ipairs(shapes) do
      local x = s[d - rank + #s] or 1
      if x ~= 1 then
        assert(e == 1 or e == x, name .. ": shapes do not broadcast")
        e = x
      end
    end
    shape[d] = e
  end
  local index, leaves = {}, {}
  local function build(d)
    if d > rank then
      for i = 1, args.n do
        local v, s = args[i], shapes[i]
        for k = 1, #s do v = v[s[k] == 1 and 1 or index[rank - #s + k]] end
        leaves[i] = v
      end
      return f(table.unpack(leaves, 1, args.n))
    end
    local out = {}
    for i = 1, shape[d] do
      index[d] = i
      out[i] = build(d + 1)
    end
    return out
  end
  return build(1)
end

-- f(a, b) broadcast: the reference for binary tensor ops.
function h.bmap(a, b, f) return broadcast_map("bmap", table.pack(a, b), f) end

-- Three-way broadcast (for where): f(c, a, b).
function h.bmap3(c, a, b, f) return broadcast_map("bmap3", table.pack(c, a, b), f) end

-- Element (x - want) check with a tolerance; NaN matches NaN, infinities
-- must match exactly.
local function near(x, want, tol)
  if is_nan(want) then return is_nan(x) end
  if type(x) ~= "number" then return false end
  if want == math.huge or want == -math.huge then return x == want end
  return math.abs(x - want) <= tol.abs + tol.rel * math.abs(want)
end
h.near_value = near

-- Compares nested tables leaf by leaf. `kind` is "int" (leaves must be Lua
-- integers, equal), "bool" (booleans, equal), or a tolerance table (leaves
-- must be numbers, floats compared with the tolerance).
local function compare(got, want, kind, path)
  if type(want) == "table" then
    if type(got) ~= "table" then
      return false, string.format("%s: expected a table, got %s", path, show(got))
    end
    if #got ~= #want then
      return false, string.format("%s: length %d, expected %d", path, #got, #want)
    end
    for i = 1, #want do
      local ok, msg = compare(got[i], want[i], kind, path .. "[" .. i .. "]")
      if not ok then return false, msg end
    end
    return true
  end
  local ok
  if kind == "int" then
    ok = math.type(got) == "integer" and got == want
  elseif kind == "bool" then
    ok = type(got) == "boolean" and got == want
  else
    -- float dtypes give Lua floats (even for integral values); plain
    -- tables compared with h.eq are "loose": any number type
    ok = (kind.loose and type(got) == "number" or math.type(got) == "float")
         and near(got, want, kind)
  end
  if not ok then
    return false, string.format("%s: got %s (%s), expected %s", path, show(got),
                                math.type(got) or type(got), show(want))
  end
  return true
end

local INT_DTYPES = {i32 = true, i64 = true}

local function kind_for(dtype, tol)
  if INT_DTYPES[dtype] then return "int" end
  if dtype == "bool" then return "bool" end
  return tol or h.EXACT
end

local function fail(msg, level)
  error(msg, (level or 1) + 2)
end

-- Checks a tensor's dtype, shape and values. `want` is a nested table (its
-- shape is the expected shape unless `shape` is given) or a plain value for a
-- 0-dim tensor. Integer dtypes must give Lua integers, bool gives booleans;
-- float dtypes compare with `tol` (default: exact).
local function check(level, t, dtype, want, tol, shape)
  if not tensor.is_tensor(t) then fail("expected a tensor, got " .. type(t), level) end
  if dtype and t:dtype() ~= dtype then
    fail(string.format("dtype %s, expected %s", t:dtype(), dtype), level)
  end
  shape = shape or h.shape_of(want)
  local size = t:size()
  if not h.same_list(size, shape) then
    fail(string.format("shape %s, expected %s", show(size), show(shape)), level)
  end
  local ok, msg = compare(t:tolist(), want, kind_for(t:dtype(), tol), "value")
  if not ok then fail(msg, level) end
end

function h.check(t, dtype, want, tol, shape) check(2, t, dtype, want, tol, shape) end

-- A float result compared with a tolerance (default h.F32); dtype optional.
function h.near(t, want, tol, dtype) check(2, t, dtype, want, tol or h.F32) end

-- Compares two plain nested tables (no tensors).
function h.eq(got, want, tol)
  -- numbers compared by value (1 == 1.0), exactly unless tol is given;
  -- booleans equal
  tol = tol or h.EXACT
  local kind = {rel = tol.rel, abs = tol.abs, loose = true}
  local ok, msg
  if type(want) == "table" or type(want) == "number" then
    local leaf_bool = type(h.flatten(want)[1]) == "boolean"
    ok, msg = compare(got, want, leaf_bool and "bool" or kind, "value")
  else
    ok = got == want
    msg = string.format("got %s, expected %s", show(got), show(want))
  end
  if not ok then fail(msg) end
end

function h.shape(t, want)
  local size = t:size()
  if not h.same_list(size, want) then
    fail(string.format("shape %s, expected %s", show(size), show(want)))
  end
end

-- Runs f in protected mode, asserts it fails and that the message contains
-- each of the given plain substrings. Returns the message.
function h.err(f, ...)
  local ok, msg = pcall(f)
  if ok then fail("expected an error, but the call succeeded") end
  if type(msg) ~= "string" then fail("error object is a " .. type(msg) .. ", not a string") end
  for _, needle in ipairs({...}) do
    if not msg:find(needle, 1, true) then
      fail(string.format("error message %q does not contain %q", msg, needle))
    end
  end
  return msg
end

-- Like err but accepts a message containing any one of the alternatives.
function h.err_any(f, alternatives)
  local ok, msg = pcall(f)
  if ok then fail("expected an error, but the call succeeded") end
  if type(msg) ~= "string" then fail("error object is a " .. type(msg) .. ", not a string") end
  for _, needle in ipairs(alternatives) do
    if msg:find(needle, 1, true) then return msg end
  end
  fail(string.format("error message %q contains none of %s", msg, show(alternatives)))
end

-- Rounds a Lua number to the nearest f32 (what storing into an f32 tensor does).
function h.f32(x)
  return (string.unpack("f", string.pack("f", x)))
end

-- Wraps a Lua integer to 32 bits two's complement (i32 arithmetic).
function h.wrap32(x)
  return ((x + 0x80000000) & 0xFFFFFFFF) - 0x80000000
end

-- Reference functions Lua's math library lacks.
function h.tanh(x)
  if x > 20 then return 1.0 end
  if x < -20 then return -1.0 end
  if math.abs(x) < 1e-4 then return x - x * x * x / 3 end
  local e = math.exp(2 * x)
  return (e - 1) / (e + 1)
end

function h.expm1(x)
  if math.abs(x) < 1e-5 then return x + x * x / 2 + x * x * x / 6 end
  return math.exp(x) - 1
end

function h.log1p(x)
  if math.abs(x) < 1e-5 then return x - x * x / 2 + x * x * x / 3 end
  return math.log(1 + x)
end

-- erf by its Taylor series (|x| <= 3: the terms stay below ~2e3, so the
-- double result is good to ~1e-12) and 1 - erfc's asymptotic tail beyond
-- (good to ~2e-10 at 3.5, better further out).
function h.erf(x)
  if x < 0 then return -h.erf(-x) end
  if x > 5.5 then return 1.0 end
  if x > 3 then
    -- erfc(x) ~ exp(-x^2)/(x sqrt(pi)) * (1 - 1/(2x^2) + 3/(4x^4) - 15/(8x^6))
    local x2 = x * x
    local series = 1 - 1 / (2 * x2) + 3 / (4 * x2 * x2) - 15 / (8 * x2 * x2 * x2)
    return 1 - math.exp(-x2) / (x * math.sqrt(math.pi)) * series
  end
  local sum, term, n = 0.0, x, 0
  while true do
    local add = term / (2 * n + 1)
    sum = sum + add
    if math.abs(add) < 1e-17 then break end
    n = n + 1
    term = -term * x * x / n
  end
  return 2 / math.sqrt(math.pi) * sum
end

function h.gelu(x) return 0.5 * x * (1 + h.erf(x / math.sqrt(2))) end

function h.sigmoid(x) return 1 / (1 + math.exp(-x)) end

-- Round half to even.
function h.round(x)
  local f = math.floor(x)
  local d = x - f
  if d > 0.5 then return f + 1.0 end
  if d < 0.5 then return f + 0.0 end
  return (f % 2 == 0) and f + 0.0 or f + 1.0
end

function h.trunc(x)
  if x >= 0 then return math.floor(x) + 0.0 end
  return math.ceil(x) + 0.0
end

function h.sign(x)
  if x > 0 then return 1 end
  if x < 0 then return -1 end
  return 0
end

-- Integer power with Lua's wrapping integer multiplication.
function h.ipow(a, b)
  local r = 1
  for _ = 1, b do r = r * a end
  return r
end

-- Random inputs: a nested table of uniform values in [lo, hi) drawn from a
-- seeded tensor, returned as plain Lua numbers (f32 values).
function h.rand_list(seed, shape, lo, hi)
  tensor.manual_seed(seed)
  local t = tensor.rand(shape)
  return h.map(t:tolist(), function(x) return lo + (hi - lo) * x end)
end

-- A matrix product of nested Lua tables (the matmul reference).
-- {{start, start + 1, ...}, ...}: a rows x cols nested list counting up.
function h.counting(rows, cols, start)
  local out, k = {}, start or 0
  for i = 1, rows do
    out[i] = {}
    for j = 1, cols do
      out[i][j] = k
      k = k + 1
    end
  end
  return out
end

-- A nested list [A][B]... as [B][A]... (its first two levels swapped).
function h.transpose12(list)
  local out = {}
  for i = 1, #list[1] do
    out[i] = {}
    for j = 1, #list do out[i][j] = list[j][i] end
  end
  return out
end

-- The inputs and weights that the PyTorch references of test_nn_*.lua were
-- computed from: ((i * a) % b - (b - 1) / 2) / (b / 3) for i = 0, 1 ...
function h.pattern_fill(shape, a, b)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  local values = {}
  for i = 0, n - 1 do values[i + 1] = ((i * a) % b - (b - 1) / 2) / (b / 3) end
  return tensor.new(values):reshape(shape)
end

function h.matmul2(a, b)
  local n, k, m = #a, #b, #b[1]
  assert(#a[1] == k)
  local out = {}
  for i = 1, n do
    local row = {}
    for j = 1, m do
      local s = 0.0
      for p = 1, k do s = s + a[i][p] * b[p][j] end
      row[j] = s
    end
    out[i] = row
  end
  return out
end

-- Direct 2-d convolution of nested tables (the conv2d reference, with no
-- padding op and no matrix product): X [N][C][H][W], Wt [O][C][KH][KW], an
-- optional bias B [O], strides sh, sw and zero paddings ph, pw.
function h.conv2d_loop(X, Wt, B, sh, sw, ph, pw)
  local N, C, H, W = #X, #X[1], #X[1][1], #X[1][1][1]
  local O, KH, KW = #Wt, #Wt[1][1], #Wt[1][1][1]
  local OH, OW = (H + 2 * ph - KH) // sh + 1, (W + 2 * pw - KW) // sw + 1
  local out = {}
  for n = 1, N do
    out[n] = {}
    for o = 1, O do
      out[n][o] = {}
      for oh = 1, OH do
        out[n][o][oh] = {}
        for ow = 1, OW do
          local s = B and B[o] or 0
          for c = 1, C do
            for i = 1, KH do
              for j = 1, KW do
                local y, x = (oh - 1) * sh - ph + i, (ow - 1) * sw - pw + j
                if y >= 1 and y <= H and x >= 1 and x <= W then
                  s = s + X[n][c][y][x] * Wt[o][c][i][j]
                end
              end
            end
          end
          out[n][o][oh][ow] = s
        end
      end
    end
  end
  return out
end

-- Whole files as bytes (tests that write, cut or corrupt files).
function h.read_bytes(path)
  local f = assert(io.open(path, "rb"))
  local bytes = f:read("a")
  f:close()
  return bytes
end

-- Protocol buffer wire format by hand: the tests of the checkpoint and
-- ONNX decoders build their bytes without the code under test.
function h.varint(n)
  local bytes = {}
  repeat
    local low = n & 0x7f
    n = n >> 7
    bytes[#bytes + 1] = string.char(n ~= 0 and (low | 0x80) or low)
  until n == 0
  return table.concat(bytes)
end
function h.pb_field(number, wire_type) return h.varint(number << 3 | wire_type) end
function h.pb_bytes(number, value) return h.pb_field(number, 2) .. h.varint(#value) .. value end

-- Paths of temporary files: temp("a.npy") names one, remove_all() deletes
-- every one named.
function h.temp_paths()
  local base = os.tmpname()
  local created = {base}
  local function temp(name)
    created[#created + 1] = base .. "." .. name
    return created[#created]
  end
  local function remove_all()
    for _, path in ipairs(created) do os.remove(path) end
  end
  return temp, remove_all
end

function h.write_bytes(path, bytes)
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
end

-- After an error the interpreter must still compute: a small computation
-- with a known result. h.recovered counts the checks.
h.recovered = 0
function h.still_works()
  local t = tensor.ones(2, 3) * 2 + tensor.new({1, 2, 3})
  assert(t:sum():item() == 24)
  h.recovered = h.recovered + 1
end

-- One bad call as its own group (test_errors.lua, test_hostile_inputs.lua):
-- f must raise an error whose message contains each needle (bad) or one of
-- the alternatives (bad_any), and the interpreter still works after it. A
-- call that wrongly succeeds is reported with the caller's line and the
-- file goes on.
function h.bad(f, ...)
  local needles = table.pack(...)
  h.test("bad call", function()
    h.err(f, table.unpack(needles, 1, needles.n))
    h.still_works()
  end, 3)
end

function h.bad_any(f, alternatives)
  h.test("bad call", function()
    h.err_any(f, alternatives)
    h.still_works()
  end, 3)
end

-- Runs one independent group of checks. A failure is reported (with the
-- failing line) and counted, and the file goes on with the next group, so
-- one bug does not hide the others; h.done then fails the file.
h.failures = 0
-- `level` (default 2: the caller) picks whose line names the group.
function h.test(name, f, level)
  name = string.format("%s (line %d)", name, debug.getinfo(level or 2, "l").currentline)
  local ok, msg = xpcall(f, function(m)
    return debug.traceback(tostring(m), 2)
  end)
  if not ok then
    h.failures = h.failures + 1
    io.stderr:write("FAIL [", name, "] ", msg, "\n\n")
  end
end

-- Ends a test file: prints a summary and fails if any group failed.
function h.done(name)
  if h.failures > 0 then
    error(string.format("%s: %d group(s) failed", name, h.failures), 0)
  end
  io.write(name, ": OK\n")
end

return h
