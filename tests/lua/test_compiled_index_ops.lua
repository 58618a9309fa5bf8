-- test_compiled_index_ops.lua - gather, index_select, scatter_add,
-- argmax/argmin, cumsum and integer powers run as generated kernels, and
-- give the eager kernels' results bit for bit: every case runs once eagerly
-- (tensor.set_eager(true)) and once lazily, and the two must agree exactly
-- (NaNs equal NaNs, -0 differs from +0); errors (indices out of range,
-- negative integer powers) must carry eager mode's message. Under
-- LAZYLUA_COMPILE=sync every lazy case also must run natively with no eager
-- fallback step; so must a whole MLP and CNN training step.
local h = dofile("helpers.lua")
local lh = dofile("lazy_helpers.lua")

local NATIVE = lh.LAZY and os.getenv("LAZYLUA_COMPILE") == "sync"

local function bits(v)
  if math.type(v) == "float" then return v ~= v and "nan" or string.format("%a", v) end
  return tostring(v) .. ":" .. tostring(math.type(v))
end

-- Compares two snapshots exactly; returns nil or the first difference.
local function differ(e, l, path)
  if type(e) ~= type(l) then return path .. ": " .. type(e) .. " vs " .. type(l) end
  if type(e) == "table" then
    for k, v in pairs(e) do
      local d = differ(v, l[k], path .. "." .. tostring(k))
      if d then return d end
    end
    for k in pairs(l) do
      if e[k] == nil then return path .. "." .. tostring(k) .. ": only in lazy" end
    end
    return nil
  end
  if bits(e) ~= bits(l) then return string.format("%s: eager %s, lazy %s", path, bits(e), bits(l)) end
  return nil
end

-- The message without its "chunk:line: " prefix (and lazy mode's "error in
-- the op recorded at chunk:line: ").
local function core(message)
  return (tostring(message):gsub("^.-:%d+: ", ""):gsub("^error in the op recorded at .-:%d+: ", ""))
end

-- Runs f eagerly and lazily and checks that they agree bit for bit (and,
-- natively, that the lazy run used generated code only). options.fails:
-- both must raise the same error, whose message contains it; options.tol:
-- float results may differ that much (for cases that also hold
-- transcendentals or sums, whose tiers round differently); options.eager_ok:
-- an eager step is allowed (an error only eager code reports).
local function same(name, f, options)
  options = options or {}
  h.test(name, function()
    tensor.set_eager(true)
    local eok, eres = pcall(function() return lh.snapshot({f()}) end)
    tensor.set_eager(not lh.LAZY)
    tensor.mark_step()
    local before = tensor.metrics()
    local lok, lres = pcall(function() return lh.snapshot({f()}) end)
    tensor.mark_step()
    local after = tensor.metrics()
    if options.fails then
      assert(not eok and not lok, string.format("expected errors, eager %s, lazy %s",
        eok and "succeeded" or core(eres), lok and "succeeded" or core(lres)))
      assert(core(eres):find(options.fails, 1, true), "eager message: " .. tostring(eres))
      assert(core(eres) == core(lres),
             string.format("eager %q\nlazy  %q", tostring(eres), tostring(lres)))
    else
      assert(eok, "eager raised: " .. tostring(eres))
      assert(lok, "lazy raised: " .. tostring(lres))
      if options.tol then
        local ok, message = lh.compare({results = eres}, {results = lres}, options.tol)
        assert(ok, message)
      else
        local d = differ(eres, lres, "result")
        assert(not d, d)
      end
    end
    if NATIVE and not options.eager_ok then
      assert(after.fallbacks == before.fallbacks, string.format(
        "%d eager fallback steps", after.fallbacks - before.fallbacks))
      assert(after.native_runs > before.native_runs, "no native run")
    end
  end, 3)
end

-- Deterministic data: nested tables of `shape` filled by gen:value(kind).
local function fill(gen, shape, kind, dim)
  dim = dim or 1
  if #shape == 0 then return gen:value(kind) end
  local out = {}
  for i = 1, shape[dim] do
    if dim == #shape then out[i] = gen:value(kind) else out[i] = fill(gen, shape, kind, dim + 1) end
  end
  return out
end

local function make(seed, shape, kind, dtype)
  local gen = lh.gen(seed)
  if #shape == 0 then return tensor.new(gen:value(kind), {dtype = dtype}) end
  for _, n in ipairs(shape) do
    if n == 0 then return tensor.zeros(shape, {dtype = dtype}) end
  end
  return tensor.new(fill(gen, shape, kind), {dtype = dtype})
end

-- Positions in [lo, hi] (1-based indices, or out of range on purpose).
local function positions(seed, shape, lo, hi, dtype)
  local gen = lh.gen(seed)
  local function build(dim)
    local out = {}
    for i = 1, shape[dim] do out[i] = dim == #shape and gen:int(lo, hi) or build(dim + 1) end
    return out
  end
  for _, n in ipairs(shape) do
    if n == 0 then return tensor.zeros(shape, {dtype = dtype or "i64"}) end
  end
  return tensor.new(build(1), {dtype = dtype or "i64"})
end

local VALUE_KINDS = {f32 = "mixed", f64 = "mixed", i32 = "i", i64 = "i", bool = "b"}

-- ---- gather ----
local DTYPES = {"f32", "f64", "i32", "i64", "bool"}
-- The index dtype: i32 with i32 data, else i64.
local function index_dtype(dtype) return dtype == "i32" and "i32" or "i64" end

for _, case in ipairs({
  {input = {5, 7}, index = {5, 3}, dim = 2},
  {input = {5, 7}, index = {3, 7}, dim = 1},
  {input = {5, 7}, index = {3, 4}, dim = 1},  -- smaller than the input in the other dim
  {input = {2, 3, 4}, index = {2, 3, 6}, dim = 3},
  {input = {2, 3, 4}, index = {2, 5, 4}, dim = 2},
  {input = {2, 3, 4}, index = {1, 2, 2}, dim = 1},
  {input = {4, 6}, index = {0, 6}, dim = 1},  -- empty
}) do
  local name = string.format("gather %s dim %d index %s", table.concat(case.input, "x"), case.dim,
                             table.concat(case.index, "x"))
  same(name, function()
    local results = {}
    for _, dtype in ipairs(DTYPES) do
      local x = make(7, case.input, VALUE_KINDS[dtype], dtype)
      local i = positions(11, case.index, 1, case.input[case.dim], index_dtype(dtype))
      results[dtype] = x:gather(case.dim, i)
    end
    return results
  end)
end
same("gather of a fused value and of a transposed view, summed", function()
  local x = make(3, {6, 5}, "f", "f32")
  local i = positions(5, {6, 2}, 1, 5)
  local j = positions(6, {4, 6}, 1, 5)
  return (x * 2 + 1):gather(2, i), x:t():gather(1, j), x:gather(2, i + 0), (x * 4):gather(2, i):sum(2)
end)
same("gather of exp, summed", function()
  local x = make(3, {6, 5}, "f", "f32")
  return (x:exp()):gather(2, positions(5, {6, 2}, 1, 5)):sum(2)
end, {tol = lh.TRANS})
same("gather: index too large", function()
  return make(1, {3, 4}, "f", "f32"):gather(2, tensor.new({{1}, {5}, {2}}, {dtype = "i64"}))
end, {fails = "gather: index 5 is out of range for dimension 2 of size 4 (valid: 1 to 4)"})
same("gather: index 0 of an i32 index", function()
  return make(1, {3, 4}, "f", "f32"):gather(1, tensor.new({{1, 2, 0, 3}}, {dtype = "i32"})) * 2
end, {fails = "gather: index 0 is out of range"})
same("gather: a bad index read only in part still raises", function()
  local g = make(1, {3, 4}, "f", "f32"):gather(2, tensor.new({{1, 1}, {2, 9}, {3, 3}}, {dtype = "i64"}))
  return g:narrow(1, 1, 1)
end, {fails = "gather: index 9 is out of range"})

-- ---- index_select ----
for _, case in ipairs({
  {input = {5, 7}, count = 9, dim = 1},
  {input = {5, 7}, count = 3, dim = 2},
  {input = {2, 3, 4}, count = 5, dim = 2},
  {input = {2, 3, 4}, count = 0, dim = 3},
}) do
  local name = string.format("index_select %s dim %d count %d", table.concat(case.input, "x"),
                             case.dim, case.count)
  same(name, function()
    local results = {}
    for _, dtype in ipairs(DTYPES) do
      local x = make(9, case.input, VALUE_KINDS[dtype], dtype)
      local i = positions(13, {case.count}, 1, case.input[case.dim], index_dtype(dtype))
      results[dtype] = x:index_select(case.dim, i)
    end
    return results
  end)
end
same("index_select with a 0-d index and of a fused value", function()
  local x = make(9, {4, 5}, "f", "f32")
  return x:index_select(2, tensor.new(3, {dtype = "i64"})), (x + 1):index_select(1, positions(2, {6}, 1, 4))
end)
same("index_select: index out of range", function()
  return make(9, {4, 5}, "f", "f32"):index_select(1, tensor.new({1, 5}, {dtype = "i64"}))
end, {fails = "index_select: index 5 is out of range for dimension 1 of size 4 (valid: 1 to 4)"})

-- ---- scatter_add ----
for _, case in ipairs({
  {base = {5, 7}, index = {5, 1}, dim = 2},
  {base = {5, 7}, index = {5, 3}, dim = 2},  -- repeated positions: the order of the sums counts
  {base = {4, 3}, index = {6, 3}, dim = 1},
  {base = {2, 3, 4}, index = {2, 2, 4}, dim = 2},
  {base = {3, 4}, index = {3, 0}, dim = 2},  -- no terms
  {base = {3, 4}, index = {3, 12}, dim = 2},  -- many terms: a kernel per line
  {base = {4, 3}, index = {20, 3}, dim = 1},
}) do
  local name = string.format("scatter_add %s dim %d index %s", table.concat(case.base, "x"),
                             case.dim, table.concat(case.index, "x"))
  same(name, function()
    local results = {}
    for _, dtype in ipairs(DTYPES) do
      local kind = dtype == "f32" and "f" or VALUE_KINDS[dtype]
      local base = make(17, case.base, kind, dtype)
      local src = make(19, case.index, kind, dtype)
      local i = positions(23, case.index, 1, case.base[case.dim], index_dtype(dtype))
      results[dtype] = base:scatter_add(case.dim, i, src)
    end
    return results
  end)
end
same("scatter_add: sums whose order changes the f32 rounding", function()
  local base = tensor.new({{0, 1}, {-0.0, 0}})
  local src = tensor.new({{1e8, 1, -1e8}, {-0.0, 3, 0.5}})
  local i = tensor.new({{1, 1, 1}, {1, 2, 1}}, {dtype = "i64"})
  return base:scatter_add(2, i, src)
end)
same("scatter_add: integers wrap", function()
  local base = tensor.new({{math.maxinteger, 0}}, {dtype = "i64"})
  local src = tensor.new({{1, 5}}, {dtype = "i64"})
  return base:scatter_add(2, tensor.new({{1, 1}}, {dtype = "i64"}), src)
end)
same("scatter_add of many terms: index out of range", function()
  local i = tensor.cat({positions(3, {2, 15}, 1, 4), tensor.new({{1}, {5}}, {dtype = "i64"})}, 2)
  return tensor.zeros(2, 4):scatter_add(2, i, tensor.ones(2, 16))
end, {fails = "scatter_add: index 5 is out of range for dimension 2 of size 4 (valid: 1 to 4)"})
same("index_select's gradient (an embedding's backward)", function()
  local e = make(43, {10, 4}, "f", "f32")
  e:requires_grad(true)
  local ids = positions(47, {40}, 1, 10)
  local loss = (e:index_select(1, ids) * tensor.arange(160):float():reshape(40, 4)):sum()
  loss:backward()
  return e:grad()
end)
same("scatter_add: index out of range", function()
  local base = tensor.zeros(3, 4)
  return base:scatter_add(2, tensor.new({{1}, {2}, {5}}, {dtype = "i64"}), tensor.ones(3, 1))
end, {fails = "scatter_add: index 5 is out of range for dimension 2 of size 4 (valid: 1 to 4)"})
same("cross-entropy's forward and backward", function()
  local logits = make(29, {8, 5}, "f", "f32")
  logits:requires_grad(true)
  local target = positions(31, {8}, 1, 5)
  local loss = (require "nn").CrossEntropyLoss()(logits, target)
  loss:backward()
  return loss, logits:grad()
end, {tol = lh.SOFTMAX(5)})

-- ---- argmax / argmin ----
for _, shape in ipairs({{7}, {4, 6}, {3, 1, 70}, {2, 5, 3}}) do
  for dim = 0, #shape do
    local name = string.format("argmax/argmin %s dim %d", table.concat(shape, "x"), dim)
    same(name, function()
      local results = {}
      for _, dtype in ipairs({"f32", "f64", "i32", "i64"}) do
        -- small integers: many ties; floats: NaN, infinities and signed zeros
        local x = make(37 + dim, shape, dtype:sub(1, 1) == "f" and "mixed" or "small", dtype)
        if dim == 0 then
          results[dtype] = {x:argmax(), x:argmin(), (x * 1):argmax()}
        else
          local values, at = x:max(dim, true)
          results[dtype] = {x:argmax(dim), x:argmin(dim, true), values, at, x:min(dim)}
        end
      end
      return results
    end)
  end
end
same("argmax: ties take the first position, a NaN wins, -0 and 0 tie", function()
  local x = tensor.new({{1, 3, 3, 2}, {0 / 0, 5, 0 / 0, 1}, {-0.0, 0.0, -1, -0.0}, {2, 0 / 0, 7, 7}})
  return x:argmax(2), x:argmin(2), x:argmax(1), x:argmax(), x:max(2)
end)
same("argmax: an empty dim is an error", function()
  return tensor.zeros(3, 0):argmax(2)
end, {fails = "cannot reduce", eager_ok = true})

-- ---- cumsum ----
for _, shape in ipairs({{}, {9}, {4, 6}, {3, 200}, {300, 3}, {2, 3, 4}, {0, 3}}) do
  for dim = 1, math.max(#shape, 1) do
    local name = string.format("cumsum %s dim %d", table.concat(shape, "x"), dim)
    same(name, function()
      local results = {}
      for _, dtype in ipairs(DTYPES) do
        local x = make(41 + dim, shape, dtype == "f32" and "f" or VALUE_KINDS[dtype], dtype)
        results[dtype] = {x:cumsum(dim), (x:to(dtype == "bool" and "i32" or dtype) * 3):cumsum(dim)}
      end
      return results
    end)
  end
end
same("cumsum of large and small floats rounds as eager", function()
  local x = tensor.new({1e8, 1, 1, -1e8, 0.1, 0.2, 0.3})
  return x:cumsum(1), x:reshape(7, 1):cumsum(1)
end)

-- ---- integer pow ----
for _, dtype in ipairs({"i32", "i64"}) do
  same("integer pow " .. dtype, function()
    local a = tensor.new({{2, -3, 0, 1, -1, 7}, {1, -1, 5, -2, 3, 31}}, {dtype = dtype})
    local b = tensor.new({{10, 3, 0, -5, -3, 2}, {-4, -2, 2, 63, 40, 1}}, {dtype = dtype})
    return a ^ b, a ^ 2, (a * 1) ^ tensor.new({3}, {dtype = dtype})
  end)
  same("integer pow: negative exponent of a base other than 1 and -1 " .. dtype, function()
    local a = tensor.new({1, -1, 2}, {dtype = dtype})
    local b = tensor.new({-1, -2, -1}, {dtype = dtype})
    return a ^ b
  end, {fails = "Integers to negative integer powers are not allowed."})
end
same("integer pow of bools", function()
  local a = tensor.new({true, false, true})
  return a ^ a
end)

-- ---- training steps ----
local function steps_without_fallbacks(name, build, x, classes)
  h.test(name .. ": no eager steps in a training step", function()
    local nn, optim = require "nn", require "optim"
    tensor.manual_seed(1)
    local model = build(nn)
    local data = x()
    local y = tensor.randint(1, classes + 1, data:size(1))
    local opt = optim.Adam(model:parameters(), {lr = 1e-3})
    local crit = nn.CrossEntropyLoss()
    local function step()
      opt:zero_grad()
      local loss = crit(model(data), y)
      loss:backward()
      opt:step()
      return loss
    end
    step()
    step()
    local before = tensor.metrics()
    local first = step():item()
    for _ = 1, 2 do step() end
    local last = step():item()
    local after = tensor.metrics()
    assert(last < first, string.format("loss did not fall: %g -> %g", first, last))
    if NATIVE then
      assert(after.fallbacks == before.fallbacks,
             string.format("%d eager steps in 4 training steps", after.fallbacks - before.fallbacks))
      assert(after.native_runs > before.native_runs, "no native run")
    end
  end)
end
steps_without_fallbacks("MLP", function(nn)
  return nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 10))
end, function() return tensor.randn(16, 64) end, 10)
steps_without_fallbacks("CNN", function(nn)
  return nn.Sequential(nn.Conv2d(1, 4, 3, {padding = 1}), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(4, 8, 3, {padding = 1}), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(8 * 3 * 3, 16), nn.ReLU(), nn.Linear(16, 10))
end, function() return tensor.randn(8, 1, 12, 12) end, 10)

h.done("test_compiled_index_ops")
