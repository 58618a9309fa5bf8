-- test_lazy_differential.lua - lazy mode is indistinguishable from eager
-- mode: every op of docs/tensor_api.md, views, in-place writes through
-- views, aliasing, syncs and barriers in the middle of a computation. Each
-- case runs the same Lua function with tensor.set_eager(true) and in lazy
-- mode and compares everything it returns and observes (lazy_helpers.lua).
--
-- Tolerances (float results only; integer and bool results, dtypes and
-- shapes are always compared exactly), stated in lazy_helpers.lua:
--   EXACT            views, copies, joins, gather, casts, comparisons,
--                    max/min/argmax, floor/ceil/round/trunc, neg/abs/relu,
--                    where, clamp, fill, integer arithmetic
--   EW     1e-6 rel  one f32 elementwise op (+ - * / % // pow atan2)
--   CHAIN(k) k*1e-6  a chain of k elementwise ops
--   TRANS  4e-6 rel  f32 transcendentals (exp log sqrt tanh sigmoid gelu ...)
--   REDUCE(n) n*1e-7 sums, means, products, cumsum, dot products and matmul
--                    over n terms (reassociation)
--   SOFTMAX(n)       n*1e-7 + 4e-6
--   F64    1e-14     f64 elementwise
-- When the process runs under LAZYLUA_EAGER=1 both halves are eager.
local h = dofile("helpers.lua")
local lh = dofile("lazy_helpers.lua")

local EXACT, EW, TRANS, F64 = lh.EXACT, lh.EW, lh.TRANS, lh.F64
local CHAIN, REDUCE, SOFTMAX = lh.CHAIN, lh.REDUCE, lh.SOFTMAX

-- One differential case: a named group (its failure names the caller's line).
local function diff(name, tol, f)
  h.test(name, function() lh.same(f, tol, 2) end, 3)
end

local function key(...)
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

-- ---------------------------------------------------------------------------
-- Factories and properties

diff("factories", EXACT, function()
  local r = {}
  r.zeros = tensor.zeros(2, 3)
  r.zeros_i64 = tensor.zeros({2, 3}, {dtype = "i64"})
  r.ones = tensor.ones(3)
  r.ones_bool = tensor.ones({2}, {dtype = "bool"})
  r.full_int = tensor.full({2, 3}, 7)
  r.full_float = tensor.full(2, 3, 2.5)
  r.full_bool = tensor.full({2}, true)
  r.full_f64 = tensor.full({2}, 3, {dtype = "f64"})
  r.new_f = tensor.new({{1, 2.5}, {3, 4}})
  r.new_i = tensor.new({{1, 2}, {3, 4}})
  r.new_b = tensor.new({true, false})
  r.new_scalar = tensor.new(5)
  r.new_f64 = tensor.new({1, 2}, {dtype = "f64"})
  r.new_copy = tensor.new(tensor.new({1, 2}) * 3)
  r.arange = tensor.arange(5)
  r.arange_step = tensor.arange(1, 10, 3)
  r.arange_float = tensor.arange(0, 1, 0.25)
  r.linspace = tensor.linspace(0, 1, 5)
  r.eye = tensor.eye(3)
  r.eye_rect = tensor.eye(2, 3)
  tensor.manual_seed(7)
  r.rand = tensor.rand(2, 3)
  r.randn = tensor.randn(4)
  r.randint = tensor.randint(0, 10, {5})
  r.randperm = tensor.randperm(6)
  local e = tensor.empty(2, 3)
  r.empty = {e:size(), e:dtype()}
  -- factory results feed recorded ops
  r.used = tensor.ones(2, 3) * tensor.arange(3) + tensor.eye(2, 3)
  return r
end)

diff("properties of data, results and views", EXACT, function()
  local a = tensor.arange(24):reshape(2, 3, 4):float()
  local r = {}
  local function props(name, t)
    r[name] = {size = t:size(), dim = t:dim(), numel = t:numel(), dtype = t:dtype(),
               stride = t:stride(), contiguous = t:is_contiguous(),
               len = t:dim() > 0 and #t or -1}
  end
  props("base", a)
  props("result", a + 1)
  props("transpose", a:transpose(1, 3))
  props("permute", a:permute(3, 1, 2))
  props("narrow", a:narrow(2, 2, 2))
  props("select", a:select(3, 2))
  props("index", a[2])
  props("index2", a[{2, 3}])
  props("expand", a:narrow(1, 1, 1):expand(4, 3, 4))
  props("squeeze", a:narrow(1, 1, 1):squeeze())
  props("unsqueeze", a:unsqueeze(2))
  props("flatten", a:flatten())
  props("flatten23", a:flatten(2, 3))
  props("view", a:view(6, 4))
  props("reshape_copy", a:transpose(1, 2):reshape(24))
  props("contiguous", a:transpose(1, 2):contiguous())
  props("sum", a:sum(2))
  props("reduced_view", a:sum(2):t())
  props("t_of_view", a[1]:t())
  props("scalar", a:sum())
  return r
end)

diff("conversions", EXACT, function()
  local r = {}
  local src = {-2.75, -0.5, 0, 0.5, 1, 3.9, -7}
  local f = tensor.new(src)
  local i = tensor.new({-3, 0, 2, 7, 1, -1, 0})
  local b = tensor.new({true, false, true, true, false, false, true})
  for _, dt in ipairs({"f32", "f64", "i32", "i64", "bool"}) do
    r["f->" .. dt] = f:to(dt)
    r["i->" .. dt] = i:to(dt)
    r["b->" .. dt] = b:to(dt)
    r["f64->" .. dt] = f:double():to(dt)
    r["i32->" .. dt] = i:int():to(dt)
  end
  r.float, r.double, r.int, r.long, r.bool = i:float(), i:double(), f:int(), f:long(), f:bool()
  r.clone = f:clone()
  r.contiguous = f:contiguous()
  r.aliases = {"float", "double", "int", "long", "boolean", "int64"}
  for _, name in ipairs({"float", "double", "int", "long", "boolean", "int64", "float64"}) do
    r["alias " .. name] = i:to(name)
  end
  return r
end)

-- ---------------------------------------------------------------------------
-- Elementwise

local UNARY = {
  -- name, tolerance, data kinds
  {"neg", EXACT, {"f", "i", "mixed"}},
  {"abs", EXACT, {"f", "i", "mixed"}},
  {"sign", EXACT, {"f", "i", "mixed"}},
  {"square", EW, {"f", "i", "mixed"}},
  {"exp", TRANS, {"f", "i", "mixed"}},
  {"expm1", TRANS, {"f", "mixed"}},
  {"log", TRANS, {"pos", "small", "mixed"}},
  {"log1p", TRANS, {"pos", "mixed"}},
  {"log2", TRANS, {"pos", "mixed"}},
  {"sqrt", TRANS, {"pos", "small", "mixed"}},
  {"rsqrt", TRANS, {"pos", "mixed"}},
  {"reciprocal", EW, {"f", "nz", "mixed"}},
  {"sin", TRANS, {"f", "mixed"}},
  {"cos", TRANS, {"f", "mixed"}},
  {"tan", TRANS, {"f", "mixed"}},
  {"tanh", TRANS, {"f", "i", "mixed"}},
  {"sigmoid", TRANS, {"f", "i", "mixed"}},
  {"relu", EXACT, {"f", "i", "mixed"}},
  {"gelu", TRANS, {"f", "mixed"}},
  {"floor", EXACT, {"f", "i", "mixed"}},
  {"ceil", EXACT, {"f", "i", "mixed"}},
  {"round", EXACT, {"f", "i", "mixed"}},
  {"trunc", EXACT, {"f", "i", "mixed"}},
  {"logical_not", EXACT, {"b", "f", "i", "mixed"}},
}

for index, entry in ipairs(UNARY) do
  local name, tol, kinds = entry[1], entry[2], entry[3]
  diff("unary " .. name, tol, function()
    local g = lh.gen(100 + index)
    local r = {}
    for _, kind in ipairs(kinds) do
      local data = g:table({3, 4}, kind)
      local t = lh.make(data, lh.KIND_DTYPE[kind])
      r[kind] = t[name](t)
      r[kind .. " module"] = tensor[name](t)
      r[kind .. " of a view"] = t:t()[name](t:t())
      r[kind .. " then +1"] = t[name](t) + 1
      if kind == "f" then
        r["f64"] = t:double()[name](t:double())
      end
    end
    return r
  end)
end

-- Binary ops: every op, dtype pair and broadcast direction, tensors and
-- numbers on either side.
local BINARY = {
  -- name, operator (or nil), tolerance, kinds for (float, int) left and right
  {"add", function(a, b) return a + b end, EW},
  {"sub", function(a, b) return a - b end, EW},
  {"mul", function(a, b) return a * b end, EW},
  {"div", function(a, b) return a / b end, EW},
  {"floor_divide", function(a, b) return a // b end, EW},
  {"remainder", function(a, b) return a % b end, EW},
  {"pow", function(a, b) return a ^ b end, TRANS},
  {"maximum", nil, EXACT},
  {"minimum", nil, EXACT},
  {"atan2", nil, TRANS},
  {"lt", nil, EXACT}, {"le", nil, EXACT}, {"gt", nil, EXACT},
  {"ge", nil, EXACT}, {"eq", nil, EXACT}, {"ne", nil, EXACT},
  {"logical_and", nil, EXACT}, {"logical_or", nil, EXACT}, {"logical_xor", nil, EXACT},
}

local DTYPE_PAIRS = {
  {"f32", "f32"}, {"f64", "f32"}, {"i64", "i64"}, {"i32", "i32"}, {"i32", "i64"},
  {"f32", "i64"}, {"i32", "f64"}, {"bool", "i64"}, {"bool", "bool"}, {"bool", "f32"},
}

local SHAPE_PAIRS = {
  {{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{3}, {2, 3}}, {{2, 1}, {1, 3}}, {{2, 3}, {2, 1}},
  {{1, 3}, {2, 1}}, {{4, 1, 3}, {2, 1}}, {{}, {2, 3}}, {{2, 3}, {}}, {{2, 1, 3}, {1, 4, 1}},
}

local INT_NUMBERS = {3, -2, 0, 1}
local FLOAT_NUMBERS = {2.5, -0.75, 0.0, 1.0}

-- The data kind for an operand of `op` with dtype `dt` (left or right side).
local function kind_for(op, dt, right)
  if dt == "bool" then
    -- integer division by a false (0) is an error: eager raises it at the
    -- op, lazy at the observation, so keep bool divisors true
    return (right and (op == "floor_divide" or op == "remainder")) and "true" or "b"
  end
  local float = dt == "f32" or dt == "f64"
  if op == "pow" then
    if right then return float and "f" or "small" end
    return float and "pos" or "i"
  end
  if right and (op == "floor_divide" or op == "remainder" or op == "div") then
    return float and "f" or "nz"
  end
  return float and "f" or "i"
end

-- Whether `op` on these dtypes is an error in both modes anyway (we still
-- compare, errors must then match; skipping keeps the result tables small).
local function valid_number(op, x, dt)
  if (op == "floor_divide" or op == "remainder") and x == 0 then
    return dt == "f32" or dt == "f64"
  end
  if op == "pow" and math.type(x) == "integer" and x < 0 then return false end
  return true
end

for index, entry in ipairs(BINARY) do
  local name, operator, tol = entry[1], entry[2], entry[3]
  diff("binary " .. name .. ": dtypes x broadcasting", tol, function()
    local g = lh.gen(1000 + index)
    local r = {}
    for _, pair in ipairs(DTYPE_PAIRS) do
      for _, shapes in ipairs(SHAPE_PAIRS) do
        local a = lh.make(g:table(shapes[1], kind_for(name, pair[1], false)), pair[1])
        local b = lh.make(g:table(shapes[2], kind_for(name, pair[2], true)), pair[2])
        local ok, v = pcall(function() return a[name](a, b) end)
        r[key(pair[1], pair[2], shapes[1], shapes[2])] = ok and v or ("error: " .. v)
      end
    end
    return r
  end)

  diff("binary " .. name .. ": numbers on either side, operators, module form", tol, function()
    local g = lh.gen(2000 + index)
    local r = {}
    for _, dt in ipairs({"f32", "f64", "i64", "i32", "bool"}) do
      local t = lh.make(g:table({2, 3}, kind_for(name, dt, false)), dt)
      local divisor = lh.make(g:table({2, 3}, kind_for(name, dt, true)), dt)
      for _, x in ipairs(dt == "bool" and {1, 0, 2.5, 3} or
                         (dt:sub(1, 1) == "f") and FLOAT_NUMBERS or INT_NUMBERS) do
        if valid_number(name, x, dt) then
          local ok, v = pcall(function() return t[name](t, x) end)
          r[key(dt, "t op", x)] = ok and v or ("error: " .. v)
        end
        if operator then
          if valid_number(name, x, dt) then
            r[key(dt, "t operator", x)] = operator(t, x)
          end
          -- number on the left: the right side is a tensor made for that role
          local ok, v = pcall(function() return operator(x, divisor) end)
          r[key(dt, "operator t", x)] = ok and v or ("error: " .. v)
        end
      end
      for _, x in ipairs({2, 0.5}) do
        if valid_number(name, x, dt) then
          r[key(dt, "module", x)] = tensor[name](t, x)
        end
      end
      r[key(dt, "module tt")] = tensor[name](t, divisor)
      if operator then r[key(dt, "operator tt")] = operator(t, divisor) end
    end
    return r
  end)
end

diff("integer arithmetic wraps, division of negatives, remainder signs", EXACT, function()
  local big = tensor.new({math.maxinteger, math.mininteger, 7, -7})
  local r = {}
  r.add = big + 1
  r.mul = big * 3
  r.neg = -big
  local n = tensor.new({7, -7, 7, -7, 0, 5})
  local d = tensor.new({2, 2, -2, -2, 3, -5})
  r.floordiv = n // d
  r.mod = n % d
  r.div = n / d
  r.numfloordiv = 7 // d
  r.nummod = -7 % d
  r.pow = tensor.new({2, -3, 1, -1, 0}) ^ tensor.new({10, 3, 5, 4, 0})
  r.negexp_ones = tensor.new({1, -1}) ^ tensor.new({-3, -3})
  r.i32wrap = tensor.new({2147483647, -2147483648}, {dtype = "i32"}) + 1
  r.bools = tensor.new({true, false}) + tensor.new({true, true})
  return r
end)

diff("float special values: NaN, inf, signed zero, ties", TRANS, function()
  local x = tensor.new({0 / 0, math.huge, -math.huge, 0.0, -0.0, 0.5, 1.5, 2.5, -0.5, -2.5})
  local r = {}
  r.round, r.floor, r.ceil, r.trunc = x:round(), x:floor(), x:ceil(), x:trunc()
  r.div0 = x / 0
  r.mul0 = x * 0
  r.max = x:maximum(tensor.new(1.0))
  r.min = x:minimum(0.0)
  r.clamp = x:clamp(-1, 1)
  r.sign = x:sign()
  r.relu = x:relu()
  r.eq = x:eq(x)
  r.ne = x:ne(x)
  r.lt = x:lt(0)
  r.floordiv = x // 2
  r.mod = x % 2
  r.to_int = x:narrow(1, 4, 7):long()
  r.to_bool = x:bool()
  r.reciprocal_zeros = tensor.new({0.0, -0.0}):reciprocal()
  r.atan2 = tensor.new({0.0, -0.0, 1, -1}):atan2(tensor.new({-1, -1, 0.0, 0.0}))
  return r
end)

diff("comparisons, logical ops and where with broadcasting and numbers", EXACT, function()
  local g = lh.gen(31)
  local r = {}
  local a = lh.make(g:table({2, 3}, "i"))
  local b = lh.make(g:table({3}, "i"))
  local f = lh.make(g:table({2, 1}, "f"))
  for _, op in ipairs({"lt", "le", "gt", "ge", "eq", "ne"}) do
    r[op .. " tt"] = a[op](a, b)
    r[op .. " tf"] = a[op](a, f)
    r[op .. " t number"] = a[op](a, 2)
    r[op .. " t float"] = a[op](a, 0.5)
    r[op .. " module"] = tensor[op](b, a)
  end
  local c = a:gt(0)
  r.where_tt = tensor.where(c, a, b)
  r.where_tf = tensor.where(c, a, f)
  r.where_numbers = tensor.where(c, 1, -1)
  r.where_number_left = tensor.where(c, 2.5, b)
  r.where_number_right = tensor.where(c, a, 7)
  r.where_cond_broadcast = tensor.where(b:lt(0), f, a)
  r.where_all_broadcast = tensor.where(lh.make({true, false, true}), f, lh.make({{10}, {20}}))
  r.where_nonbool_cond = pcall(tensor.where, a, a, b)
  r.logical_and = c:logical_and(b:gt(0))
  r.logical_or = c:logical_or(f:gt(0))
  r.logical_xor = a:logical_xor(b)
  r.logical_not = a:logical_not()
  return r
end)

diff("Lua comparison operators and equal (observations)", EXACT, function(obs)
  local a = tensor.new({{1, 2}, {3, 4}}) * 2
  local b = tensor.new({{2, 4}, {6, 8}})
  local s = a:sum()
  local r = {}
  r.eq = a == b
  r.eq_after = (a + 1) == b
  r.equal = a:equal(b)
  r.equal_shape = a:equal(b:flatten())
  r.lt = s < 21
  r.le = s <= 20
  r.gt = 21 > s
  r.lt_tensors = a:max() < b:sum()
  r.le_item = a[{1, 2}] <= 4
  r.nan = tensor.new({0 / 0}) == tensor.new({0 / 0})
  r.many = pcall(function() return a < b end)
  r.after = obs(a + s)   -- the syncs above do not disturb later recording
  return r
end)

diff("clamp and clamp_", EXACT, function()
  local g = lh.gen(41)
  local r = {}
  local f = lh.make(g:table({3, 4}, "f"))
  local i = lh.make(g:table({3, 4}, "i"))
  r.f_both, r.f_low, r.f_high = f:clamp(-1, 1.5), f:clamp(0), f:clamp(nil, 0.25)
  r.i_both, r.i_low, r.i_high = i:clamp(-2, 3), i:clamp(0), i:clamp(nil, 1)
  r.i_float_bounds = i:clamp(-1.5, 2.5)
  r.module = tensor.clamp(f, -0.5, 0.5)
  local c = f:clone()
  c:clamp_(-1, 1)
  r.inplace = c
  local v = f:clone()
  v:narrow(2, 2, 2):clamp_(0, 0.5)
  r.inplace_view = v
  return r
end)

-- ---------------------------------------------------------------------------
-- Reductions

diff("sum mean prod with and without dim, keepdim, negative dims", REDUCE(24, 3), function()
  local g = lh.gen(51)
  local r = {}
  local inputs = {
    f32 = lh.make(g:table({2, 3, 4}, "f")),
    f64 = lh.make(g:table({2, 3, 4}, "f"), "f64"),
    i64 = lh.make(g:table({2, 3, 4}, "i")),
    i32 = lh.make(g:table({2, 3, 4}, "i"), "i32"),
    bool = lh.make(g:table({2, 3, 4}, "b")),
  }
  for dt, t in pairs(inputs) do
    for _, op in ipairs({"sum", "mean", "prod"}) do
      local small = op == "prod" and t:narrow(3, 1, 2) or t
      r[key(dt, op)] = small[op](small)
      for _, dim in ipairs({1, 2, 3, -1}) do
        r[key(dt, op, dim)] = small[op](small, dim)
        r[key(dt, op, dim, "keepdim")] = small[op](small, dim, true)
      end
    end
  end
  r.module = tensor.sum(inputs.f32, 2)
  r.of_view = inputs.f32:transpose(1, 3):sum(1)
  r.of_result = (inputs.f32 * 2):mean(2, true)
  r.scalar_sum = tensor.new(3.5):sum()
  return r
end)

diff("any all", EXACT, function()
  local g = lh.gen(52)
  local r = {}
  for _, kind in ipairs({"b", "small"}) do
    local t = lh.make(g:table({2, 3, 4}, kind))
    for _, op in ipairs({"any", "all"}) do
      r[key(kind, op)] = t[op](t)
      for _, dim in ipairs({1, 2, 3, -2}) do
        r[key(kind, op, dim)] = t[op](t, dim)
        r[key(kind, op, dim, "keepdim")] = t[op](t, dim, true)
      end
    end
  end
  r.float = tensor.new({0.0, 0.5}):all()
  return r
end)

diff("max min (values and indices, ties take the first), argmax argmin", EXACT, function()
  local g = lh.gen(53)
  local r = {}
  local inputs = {
    f = lh.make(g:table({2, 3, 4}, "f")),
    ties = lh.make(g:table({2, 3, 4}, "small")),
    tiesf = lh.make(g:table({2, 3, 4}, "small"), "f32"),
    bool = lh.make(g:table({2, 3, 4}, "b")),
    nan = lh.make({{1, 0 / 0, 3}, {0 / 0, -1, 2}}),
  }
  for name, t in pairs(inputs) do
    r[key(name, "max")] = t:max()
    r[key(name, "min")] = t:min()
    r[key(name, "argmax")] = t:argmax()
    r[key(name, "argmin")] = t:argmin()
    for dim = 1, t:dim() do
      for _, keep in ipairs({false, true}) do
        local v, i = t:max(dim, keep)
        r[key(name, "max", dim, keep)] = {v, i}
        v, i = t:min(dim, keep)
        r[key(name, "min", dim, keep)] = {v, i}
        r[key(name, "argmax", dim, keep)] = t:argmax(dim, keep)
        r[key(name, "argmin", dim, keep)] = t:argmin(dim, keep)
      end
    end
    r[key(name, "max", -1)] = {t:max(-1)}
  end
  r.elementwise_max = inputs.f:max(inputs.tiesf)
  r.elementwise_min = inputs.f:min(inputs.tiesf:narrow(3, 1, 1))
  -- indices feed later ops
  local _, idx = inputs.ties:max(3)
  r.indices_used = inputs.ties:gather(3, idx:unsqueeze(3)) + idx:unsqueeze(3)
  return r
end)

diff("cumsum", REDUCE(4, 3), function()
  local g = lh.gen(54)
  local r = {}
  local f = lh.make(g:table({2, 3, 4}, "f"))
  local i = lh.make(g:table({2, 3, 4}, "i"))
  local b = lh.make(g:table({2, 3, 4}, "b"))
  for _, dim in ipairs({1, 2, 3, -1}) do
    r[key("f", dim)] = f:cumsum(dim)
    r[key("i", dim)] = i:cumsum(dim)
    r[key("b", dim)] = b:cumsum(dim)
  end
  r.view = f:transpose(1, 2):cumsum(1)
  r.module = tensor.cumsum(f, 2)
  return r
end)

diff("softmax log_softmax", SOFTMAX(4), function()
  local g = lh.gen(55)
  local r = {}
  local f = lh.make(g:table({2, 3, 4}, "f"))
  local i = lh.make(g:table({3, 4}, "i"))
  for _, dim in ipairs({1, 2, 3, -1}) do
    r[key("softmax", dim)] = f:softmax(dim)
    r[key("log_softmax", dim)] = f:log_softmax(dim)
  end
  r.default_dim = f:softmax()
  r.int = i:softmax(2)
  r.int_log = i:log_softmax(1)
  r.view = f:permute(3, 1, 2):softmax(1)
  r.large = (f * 100):softmax(3)
  r.f64 = f:double():log_softmax(2)
  r.module = tensor.softmax(f, 3)
  r.then_sum = f:softmax(3):sum(3)
  return r
end)

-- ---------------------------------------------------------------------------
-- Matmul

diff("matmul: every rank combination, batched, broadcast batch, views", REDUCE(5, 9), function()
  local g = lh.gen(61)
  local function m(shape, dt) return lh.make(g:table(shape, "f"), dt) end
  local r = {}
  local cases = {
    {{3}, {3}}, {{3}, {3, 4}}, {{2, 3}, {3}}, {{2, 3}, {3, 4}}, {{2, 2, 3}, {2, 3, 4}},
    {{2, 2, 3}, {3, 4}}, {{2, 3}, {2, 3, 4}}, {{2, 1, 2, 3}, {3, 3, 4}}, {{3}, {2, 3, 4}},
    {{2, 2, 3}, {3}}, {{1, 5}, {5, 1}}, {{5, 1}, {1, 5}},
  }
  for _, c in ipairs(cases) do
    local a, b = m(c[1]), m(c[2])
    r[key(c[1], c[2])] = a:matmul(b)
  end
  local a, b = m({3, 2}), m({4, 3})
  r.transposed_views = a:t():matmul(b:t())
  r.mm = tensor.mm(m({2, 3}), m({3, 2}))
  r.module = tensor.matmul(m({2, 3}), m({3}))
  r.f64 = m({2, 3}, "f64"):matmul(m({3, 2}, "f64"))
  r.i64 = lh.make(g:table({2, 3}, "i")):matmul(lh.make(g:table({3, 2}, "i")))
  r.narrowed = m({4, 5}):narrow(2, 2, 3):matmul(m({3, 5}):narrow(2, 1, 2))
  r.mismatch = pcall(function() return m({2, 3}):matmul(m({2, 3})) end)
  r.chain = m({2, 3}):matmul(m({3, 3})):relu():matmul(m({3, 1})):squeeze(2)
  return r
end)

-- ---------------------------------------------------------------------------
-- Views: reading

diff("views: reading through every kind of view and chains of views", EXACT, function()
  local a = tensor.arange(1, 25):reshape(2, 3, 4):float()
  local r = {}
  r.narrow = a:narrow(3, 2, 2)
  r.narrow_neg = a:narrow(-1, -2, 2)
  r.select = a:select(2, 3)
  r.select_neg = a:select(-1, -1)
  r.transpose = a:transpose(1, 3)
  r.permute = a:permute(2, 3, 1)
  r.permute_table = a:permute({3, 2, 1})
  r.reshape_view = a:reshape(6, 4)
  r.reshape_infer = a:reshape(-1, 2)
  r.reshape_copy = a:transpose(2, 3):reshape(2, 12)
  r.view = a:view(4, 6)
  r.view_bad = pcall(function() return a:transpose(2, 3):view(24) end)
  r.expand = a:narrow(2, 1, 1):expand(2, 5, 4)
  r.expand_keep = a:narrow(1, 2, 1):expand(3, -1, -1)
  r.expand_new_dim = a[1][1]:expand(2, 4)
  r.expand_as = a:select(1, 1):narrow(1, 1, 1):expand_as(a[2])
  r.squeeze_all = a:narrow(2, 2, 1):narrow(1, 1, 1):squeeze()
  r.squeeze_dim = a:narrow(2, 2, 1):squeeze(2)
  r.squeeze_noop = a:squeeze(1)
  r.unsqueeze = a:unsqueeze(1)
  r.unsqueeze_end = a:unsqueeze(4)
  r.unsqueeze_neg = a:unsqueeze(-1)
  r.flatten = a:flatten()
  r.flatten_range = a:flatten(1, 2)
  r.flatten_noncontig = a:transpose(1, 2):flatten()
  r.index = a[2]
  r.index_neg = a[-1]
  r.index2 = a[{2, 3}]
  r.index3 = a[{1, 2, 3}]
  r.index_of_1d = a[1][2][3]
  r.t = a[1]:t()
  r.t_1d = a[1][1]:t()
  r.contiguous = a:transpose(1, 2):contiguous()
  r.chain = a:transpose(1, 3):narrow(2, 2, 2):select(3, 1):t()
  r.chain2 = a:permute(3, 1, 2)[2]:narrow(2, 2, 2):reshape(4)
  r.chain3 = a:flatten():narrow(1, 5, 12):view(3, 4):t()[2]
  r.ops_on_views = a[1]:t() * a[2]:t() + a:select(3, 1):sum()
  r.mixed = a:narrow(1, 1, 1):expand(2, 3, 4) + a:transpose(2, 3):transpose(2, 3)
  return r
end)

-- ---------------------------------------------------------------------------
-- In-place writes through views reach the base

diff("in-place through views reaches the base", EXACT, function()
  local r = {}
  local function base() return tensor.arange(1, 13):reshape(3, 4):float() end
  local t = base()
  t:narrow(1, 2, 2):fill_(0)
  r.narrow_fill = t
  t = base()
  t[2] = 5
  r.index_assign = t
  t = base()
  t[{2, 3}] = -1
  r.index2_assign = t
  t = base()
  t[3] = tensor.new({9, 8, 7, 6})
  r.row_assign_tensor = t
  t = base()
  t[1] = tensor.new({{1, 1, 2, 2}})   -- leading extent 1 dropped
  r.row_assign_leading1 = t
  t = base()
  t[2] = tensor.new(4.5)
  r.row_assign_scalar_tensor = t
  t = base()
  t:t():add_(1)
  r.t_add = t
  t = base()
  t:select(2, 1):mul_(3)
  r.select_mul = t
  t = base()
  t:narrow(2, 2, 2):select(1, 3):add_(100)
  r.chain_narrow_select = t
  t = base()
  t:t():narrow(1, 2, 2):fill_(-7)
  r.chain_t_narrow = t
  t = base()
  local v = t:narrow(1, 2, 2)
  local w = v:t()
  w[1] = 9
  r.view_of_view_index = t
  r.view_of_view_v = v
  t = base()
  t:view(12):narrow(1, 3, 4):zero_()
  r.view_narrow_zero = t
  t = base()
  t:flatten()[5] = 42
  r.flatten_index = t
  t = base()
  t:unsqueeze(1):mul_(2)
  r.unsqueeze_mul = t
  t = base()
  t:narrow(1, 2, 1):squeeze(1):add_(tensor.new({1, 2, 3, 4}))
  r.squeeze_add = t
  t = base()
  t:reshape(2, 6)[2]:fill_(1)   -- contiguous: reshape is a view
  r.reshape_view_write = t
  t = base()
  t:t():reshape(12):fill_(1)    -- non-contiguous: reshape copied
  r.reshape_copy_write = t
  local u = tensor.arange(24):reshape(2, 3, 4):float()
  u:permute(3, 1, 2)[2]:narrow(2, 2, 2):sub_(50)
  r.permute_index_narrow = u
  u = tensor.arange(24):reshape(2, 3, 4):float()
  u:transpose(1, 3)[{4, 2}]:copy_(tensor.new({-1, -2}))
  r.transpose_index2_copy = u
  return r
end)

diff("every in-place op through a view", TRANS, function()
  local g = lh.gen(71)
  local r = {}
  local data = g:table({3, 4}, "pos")
  local function base() return lh.make(data) end
  local other = lh.make(g:table({2}, "f"))
  for _, op in ipairs({"exp_", "log_", "sqrt_", "tanh_", "sigmoid_", "relu_", "abs_", "neg_",
                       "zero_"}) do
    local t = base()
    local view = t:t():narrow(1, 2, 2):select(2, 3)
    view[op](view)
    r[op] = t
  end
  for _, op in ipairs({"add_", "sub_", "mul_", "div_", "pow_"}) do
    local t = base()
    local view = t:narrow(2, 3, 2):select(1, 2)
    view[op](view, other)
    r[op .. " tensor"] = t
    t = base()
    t:t()[3][op](t:t()[3], 1.5)
    r[op .. " number"] = t
    t = base()
    t[op](t, t:narrow(1, 1, 1))   -- operand overlaps the target
    r[op .. " overlap"] = t
  end
  local t = base()
  t:narrow(1, 1, 2):clamp_(1, 2)
  r.clamp_ = t
  t = base()
  t:narrow(2, 1, 2):fill_(0.5)
  r.fill_ = t
  t = base()
  t:t():narrow(2, 2, 2):copy_(lh.make({{1, 2}, {3, 4}, {5, 6}, {7, 8}}))
  r.copy_ = t
  t = base()
  t:narrow(2, 1, 3):copy_(lh.make({1, 2, 3}))           -- broadcast source
  r.copy_broadcast = t
  t = base()
  t:select(1, 2):copy_(lh.make({true, false, true, false}))   -- converted source
  r.copy_convert = t
  local i = lh.make({{1, 2, 3}, {4, 5, 6}})
  i:t()[2]:add_(10)
  r.int_view = i
  r.int_bad = pcall(function() i:narrow(1, 1, 1):add_(0.5) end)
  r.returns_self = rawequal(t:add_(0), t) and rawequal(t:narrow(1, 1, 1):fill_(0):size(1), 1)
  return r
end)

diff("in-place on overlapping views, self aliasing and expanded targets", EXACT, function()
  local r = {}
  local a = tensor.arange(1, 10):reshape(3, 3):float()
  a:add_(a:t())
  r.add_transpose = a
  local b = tensor.new({1, 2, 3, 4, 5})
  b:narrow(1, 2, 4):copy_(b:narrow(1, 1, 4))
  r.shift_right = b
  local c = tensor.new({1, 2, 3, 4, 5})
  c:narrow(1, 1, 4):copy_(c:narrow(1, 2, 4))
  r.shift_left = c
  local d = tensor.arange(1, 5):float()
  d:mul_(d)
  r.square_self = d
  local e = tensor.arange(1, 7):reshape(2, 3):float()
  e[1]:add_(e[2])
  e[2]:add_(e[1])
  r.rows = e
  local f = tensor.arange(1, 4):float()
  local ok, msg = pcall(function() f:narrow(1, 1, 1):expand(3):add_(1) end)
  r.expand_error = {ok, (msg or ""):match("expand") ~= nil}
  r.f_after = f
  return r
end)

diff("writes through expanded views whose target does not overlap", EXACT, function()
  -- an expand that repeats nothing, or a selection of one copy along the
  -- expanded dim, leaves a target without shared elements: eager mode
  -- writes through it into the base
  local r = {}
  local x = tensor.new({1, 2})
  local ok = pcall(function() x:unsqueeze(1):expand(3, 2)[2]:add_(10) end)
  r.select_of_expanded = {ok, x}
  local y = tensor.new({{1}, {2}})
  ok = pcall(function() y:expand(2, 3):select(2, 3):fill_(7) end)
  r.select_column_of_expanded = {ok, y}
  local z = tensor.new({{1, 2, 3}})
  ok = pcall(function() z:expand(1, 3):mul_(2) end)
  r.identity_expand = {ok, z}
  local w = tensor.new({5.0})
  ok = pcall(function() w:expand(1):sub_(0.25) end)
  r.identity_expand_1d = {ok, w}
  local u = tensor.new({{1, 2}, {3, 4}})
  ok = pcall(function() u:expand(2, 2):flatten()[3] = 0 end)
  r.identity_expand_flatten = {ok, u}
  local v = tensor.new({1, 2, 3})
  ok = pcall(function() v:narrow(1, 2, 1):expand(4):narrow(1, 2, 1):fill_(9) end)
  r.narrow_one_of_expanded = {ok, v}
  -- a real overlap is an error in both modes
  local o = tensor.new({1, 2})
  ok = pcall(function() o:unsqueeze(1):expand(3, 2):add_(1) end)
  r.overlapping = {ok, o}
  return r
end)

diff("fill_ and t[i] = v convert a fractional number to bool as ~= 0", EXACT, function()
  local r = {}
  local b = tensor.new({false, false, true})
  b:fill_(0.25)
  r.fill = b
  local c = tensor.new({{false, false}, {false, false}})
  c[1] = 0.5
  c[{2, 2}] = -0.5
  r.index = c
  local d = tensor.new({false, true})
  d:narrow(1, 1, 1):fill_(1e-3)
  r.view_fill = d
  local i = tensor.new({1, 2, 3})
  i:fill_(2.75)      -- integers truncate
  r.int_fill = i
  local j = tensor.new({1, 2, 3})
  j[2] = -1.5
  r.int_index = j
  return r
end)

-- ---------------------------------------------------------------------------
-- Aliasing: values are snapshots, views are live

diff("aliasing: results are values, views follow their base", EXACT, function(obs)
  local r = {}
  local a = tensor.new({{1, 2}, {3, 4}}):float()
  local b = a + 2
  a:add_(1)
  r.b_old = b
  r.b_print = obs(tostring(b))
  r.a_new = a
  local c = a:clone()
  a:zero_()
  r.clone_kept = c
  local base = tensor.arange(6):reshape(2, 3):float()
  local view = base:narrow(2, 2, 2)
  local tview = base:t()
  base:mul_(10)
  r.view_after_base_write = view
  r.tview_after_base_write = tview
  base[1] = -1
  r.view_after_index_write = view
  local copied = base:t():reshape(6)      -- non-contiguous: a copy
  local viewed = base:reshape(6)          -- contiguous: a view
  base:add_(1000)
  r.reshape_copy_frozen = copied
  r.reshape_view_live = viewed
  local contig_copy = base:t():contiguous()
  local contig_same = base:contiguous()
  base:fill_(3)
  r.contiguous_copy_frozen = contig_copy
  r.contiguous_same_live = contig_same
  local same_type = base:float()          -- same dtype: the same tensor
  local other_type = base:double()        -- a copy
  base:fill_(5)
  r.to_same_live = same_type
  r.to_other_frozen = other_type
  local n = tensor.new(base)
  base:fill_(6)
  r.new_copy_frozen = n
  -- writes through one view seen through another
  local m = tensor.zeros(3, 3)
  local row = m[2]
  local col = m:select(2, 2)
  row:fill_(1)
  col:add_(5)
  r.row = row
  r.col = col
  r.m = m
  -- a view of a view taken before the write
  local vv = m:t():narrow(1, 2, 2)
  m:narrow(1, 3, 1):fill_(9)
  r.vv = vv
  -- a result computed from a view before a write keeps the old values
  local from_view = vv * 1
  m:zero_()
  r.from_view = from_view
  r.vv_zero = vv
  return r
end)

-- The same aliasing facts against literal values (in this process's mode),
-- so that a wrong answer shared by both modes is caught too.
h.test("aliasing: literal expectations", function()
  local a = tensor.new({{1, 2}, {3, 4}}):float()
  local b = a + 2
  a:add_(1)
  assert(tostring(b) == tostring(tensor.new({{3, 4}, {5, 6}}):float()),
         "print(b) after a:add_(1):\n" .. tostring(b))
  h.check(b, "f32", {{3, 4}, {5, 6}})
  local c = a:clone()
  a:zero_()
  h.check(c, "f32", {{2, 3}, {4, 5}})
  h.check(a, "f32", {{0, 0}, {0, 0}})
  local base = tensor.arange(6):reshape(2, 3)
  local view = base:narrow(2, 2, 2)
  local copied = base:t():reshape(6)
  local viewed = base:reshape(6)
  base:mul_(10)
  h.check(view, "i64", {{10, 20}, {40, 50}})
  h.check(copied, "i64", {0, 3, 1, 4, 2, 5})
  h.check(viewed, "i64", {0, 10, 20, 30, 40, 50})
  view[2] = -1
  h.check(base, "i64", {{0, 10, 20}, {30, -1, -1}})
  h.check(viewed, "i64", {0, 10, 20, 30, -1, -1})
  h.check(copied, "i64", {0, 3, 1, 4, 2, 5})
  base:t():narrow(1, 1, 1):fill_(7)
  h.check(base, "i64", {{7, 10, 20}, {7, -1, -1}})
  base:select(2, 3):mul_(3)
  h.check(view, "i64", {{10, 60}, {-1, -3}})
  assert(tensor.is_tensor(view) and not tensor.is_tensor({}) and not tensor.is_tensor(3))
end)

diff("aliasing with results of earlier syncs", EXACT, function(obs)
  local a = tensor.arange(4):float()
  local b = a * 2
  obs(b:tolist())          -- b is now data
  local v = b:narrow(1, 2, 2)
  b:add_(1)
  obs(v)
  v:fill_(0)
  obs(b)
  tensor.mark_step()
  local w = b:t()
  b:mul_(3)
  return a, b, v, w
end)

-- ---------------------------------------------------------------------------
-- Syncs and barriers in the middle

diff("syncs (item, print, tolist, comparison, sync) between ops", CHAIN(6), function(obs)
  local g = lh.gen(81)
  local a = lh.make(g:table({3, 4}, "f"))
  local b = a * 2 + 1
  obs(b:sum():item())
  b:add_(a)
  obs(tostring(b:floor()))
  local c = b:t() - a:t()
  obs(c:tolist())
  c:mul_(2)
  obs(c[2][3]:item())
  tensor.sync(c)
  local d = c:narrow(1, 2, 2)
  d:add_(1)
  obs(a:max() < c:max())
  obs(c == c:clone())
  local e = d:sum(1)
  tensor.sync(e, a)
  obs(#e, e:size(), e:dtype())
  local f = (e * a:narrow(2, 1, 3)):sum()
  obs(f:item())
  a:add_(f)
  return a, b, c, d, e, f
end)

diff("mark_step in the middle, pending views, in-place after barriers", CHAIN(8), function(obs)
  local g = lh.gen(82)
  local w = lh.make(g:table({4, 3}, "f"))
  local x = lh.make(g:table({2, 4}, "f"))
  local view = w:narrow(1, 2, 2)
  local y = x:matmul(w):relu()
  tensor.mark_step()
  view:mul_(0.5)
  local z = y:sum(2)
  tensor.mark_step()
  tensor.mark_step()   -- nothing pending
  w:t():add_(1)
  obs(view)
  local y2 = x:matmul(w)
  tensor.mark_step()
  y:add_(y2)
  obs(y:max(2))
  return w, x, view, y, z, y2
end)

diff("observations of views and 0-dim tensors", EXACT, function(obs)
  local a = tensor.arange(1, 7):reshape(2, 3)
  local s = a:sum()
  obs(s:item(), s:tolist(), tostring(s))
  local v = a:t()
  obs(v:tolist(), tostring(v))
  obs(a[2][3]:item(), a[{1, 2}]:tolist())
  a[{1, 1}] = 100
  obs(v[1][1]:item(), a:max():item(), a:eq(100):any():item())
  local f = a:float() / 4
  obs(f:numel(), f[1]:tolist(), f[2][2]:item())
  obs(pcall(function() return a:item() end))
  return a, v, s
end)

-- ---------------------------------------------------------------------------
-- Joins and indexing

diff("cat stack gather index_select", EXACT, function()
  local g = lh.gen(91)
  local r = {}
  local a = lh.make(g:table({2, 3}, "f"))
  local b = lh.make(g:table({1, 3}, "f"))
  local c = lh.make(g:table({2, 2}, "f"))
  local i = lh.make(g:table({2, 3}, "i"))
  r.cat1 = tensor.cat({a, b})
  r.cat1_explicit = tensor.cat({a, b, a}, 1)
  r.cat2 = tensor.cat({a, c}, 2)
  r.cat_neg = tensor.cat({a, c, a}, -1)
  r.cat_promote = tensor.cat({a, i})
  r.cat_views = tensor.cat({a:t(), c:t(), b:t()}, 2)
  r.cat_one = tensor.cat({a})
  r.cat_3d = tensor.cat({a:unsqueeze(1), a:unsqueeze(1) * 2}, 1)
  r.cat_bad = pcall(function() return tensor.cat({a, c}, 1) end)
  r.stack1 = tensor.stack({a, a * 2, a * 3})
  r.stack2 = tensor.stack({a, i:float()}, 2)
  r.stack3 = tensor.stack({a, a}, 3)
  r.stack_neg = tensor.stack({a, a}, -1)
  r.stack_bad = pcall(function() return tensor.stack({a, b}) end)
  local idx2 = lh.make({{1, 2, 1}, {2, 2, 1}})
  local idx1 = lh.make({{3, 1}, {2, 2}})
  r.gather1 = a:gather(1, idx2)
  r.gather2 = a:gather(2, idx1)
  r.gather_neg = a:gather(-1, idx1)
  r.gather_i32 = a:gather(2, idx1:int())
  r.gather_module = tensor.gather(i, 2, idx1)
  r.gather_of_view = a:t():gather(1, lh.make({{2, 1}, {1, 1}, {2, 2}}))
  r.gather_3d = lh.make(g:table({2, 3, 4}, "i")):gather(3, lh.make(g:table({2, 3, 2}, "small")) + 1)
  local sel = lh.make({3, 1, 3, 2})
  r.index_select1 = a:index_select(2, sel)
  r.index_select0 = a:index_select(1, lh.make({2, 2, 1}))
  r.index_select_i32 = a:index_select(2, sel:int())
  r.index_select_module = tensor.index_select(i, 1, lh.make({2}))
  r.index_select_view = a:t():index_select(1, sel)
  r.index_select_computed = a:index_select(2, (sel % 3) + 1)
  return r
end)

-- ---------------------------------------------------------------------------
-- Record-time errors: the same message in both modes (shapes and dtypes are
-- inferred at record time)

diff("record-time errors are identical", EXACT, function()
  local a = tensor.zeros(2, 3)
  local b = tensor.zeros(4)
  local r = {}
  local function try(f) local ok, msg = pcall(f); return {ok, msg} end
  r.add = try(function() return a + b end)
  r.matmul = try(function() return a:matmul(a) end)
  r.view = try(function() return a:t():view(6) end)
  r.narrow = try(function() return a:narrow(2, 3, 2) end)
  r.select = try(function() return a:select(1, 3) end)
  r.index = try(function() return a[3] end)
  r.reshape = try(function() return a:reshape(4, 2) end)
  r.expand = try(function() return a:expand(3, 3) end)
  r.inplace_broadcast = try(function() return b:add_(a) end)
  r.inplace_dtype = try(function() return tensor.zeros({2}, {dtype = "i64"}):add_(0.5) end)
  r.cat = try(function() return tensor.cat({a, b}) end)
  r.gather = try(function() return a:gather(2, tensor.zeros({2, 3}, {dtype = "f32"})) end)
  r.where = try(function() return tensor.where(a:gt(0), a, b) end)
  r.dim = try(function() return a:sum(3) end)
  r.permute = try(function() return a:permute(1, 1) end)
  r.squeeze = try(function() return a:squeeze(1) end)
  r.after = a + 1   -- recording still works after the errors
  return r
end)

-- ---------------------------------------------------------------------------
-- A longer mixed program (a tiny MLP step written out by hand)

diff("a small training step written out", REDUCE(16, 4), function(obs)
  local g = lh.gen(101)
  local x = lh.make(g:table({4, 3}, "f"))
  local y = lh.make({1, 3, 2, 1})
  local w1 = lh.make(g:table({3, 5}, "f")) * 0.5
  local w2 = lh.make(g:table({5, 3}, "f")) * 0.5
  for step = 1, 3 do
    local hdn = x:matmul(w1):tanh()
    local logits = hdn:matmul(w2)
    local logp = logits:log_softmax(2)
    local loss = -(logp:gather(2, y:unsqueeze(2)):mean())
    obs(loss:item())
    local p = logp:exp()
    local onehot = tensor.zeros(4, 3)
    for i = 1, 4 do onehot[{i, y[i]:item()}] = 1 end
    local dlogits = (p - onehot) / 4
    local dw2 = hdn:t():matmul(dlogits)
    local dh = dlogits:matmul(w2:t()) * (1 - hdn * hdn)
    local dw1 = x:t():matmul(dh)
    w1:sub_(dw1 * (0.1 / step))
    w2:sub_(dw2 * (0.1 / step))
    tensor.mark_step()
  end
  local _, pred = x:matmul(w1):tanh():matmul(w2):max(2)
  return w1, w2, pred
end)

-- ---------------------------------------------------------------------------
-- Switching modes with live tensors: a tensor made in one mode keeps its
-- meaning in the other (literal expectations, not a comparison of halves).

local function with_mode_restored(f)
  return function()
    local before = tensor.is_eager()
    local ok, msg = pcall(f)
    tensor.set_eager(before)
    if not ok then error(msg, 0) end
  end
end

h.test("switching modes: a view made in eager mode, written in lazy mode, reaches its base",
       with_mode_restored(function()
  tensor.set_eager(true)
  local a = tensor.new({{1, 2}, {3, 4}})
  local v = a:narrow(1, 2, 1)
  tensor.set_eager(false)
  v:fill_(0)
  h.check(a, "i64", {{1, 2}, {0, 0}})
end))

h.test("switching modes: a view made in eager mode sees lazy writes to its base",
       with_mode_restored(function()
  tensor.set_eager(true)
  local a = tensor.new({{1, 2}, {3, 4}})
  local v = a:narrow(1, 2, 1)
  tensor.set_eager(false)
  a:add_(1)
  h.check(v, "i64", {{4, 5}})
  a[2] = 0
  h.check(v, "i64", {{0, 0}})
end))

h.test("switching modes: lazy tensors and lazy views used in eager mode",
       with_mode_restored(function()
  tensor.set_eager(false)
  local a = tensor.new({{1, 2}, {3, 4}})
  local b = a * 10
  local c = a + 1
  local w = c:t()
  tensor.set_eager(true)
  h.check(b, "i64", {{10, 20}, {30, 40}})
  w[1] = 7
  h.check(c, "i64", {{7, 3}, {7, 5}})
  c:mul_(2)
  h.check(w, "i64", {{14, 14}, {6, 10}})
  a:add_(1)
  h.check(b, "i64", {{10, 20}, {30, 40}})
end))

h.test("switching modes: a view made in eager mode of a lazily made tensor, written lazily",
       with_mode_restored(function()
  tensor.set_eager(false)
  local c = tensor.new({{1, 2}, {3, 4}}) * 2
  tensor.set_eager(true)
  local u = c:select(2, 2)
  tensor.set_eager(false)
  u:add_(100)
  h.check(c, "i64", {{2, 104}, {6, 108}})
  h.check(u, "i64", {104, 108})
end))

-- The lazy halves really were lazy: ops were recorded and graphs ran.
h.test("the lazy halves recorded and executed graphs", function()
  local m = tensor.metrics()
  if lh.LAZY then
    assert(m.ops_recorded > 2000, "ops_recorded " .. m.ops_recorded)
    assert(m.graphs_executed > 200, "graphs_executed " .. m.graphs_executed)
  end
end)

h.done("test_lazy_differential")
