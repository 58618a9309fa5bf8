-- test_lazy_differential.lua - lazy mode is indistinguishable from eager
-- mode: every op of docs/tensor_api.md and views (test_lazy_writes.lua has
-- in-place writes through views, aliasing, syncs and mode switches). Each
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

local diff, key = lh.differ(h), lh.key

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
  {"erf", TRANS, {"f", "mixed"}},
  {"erfc", TRANS, {"f", "mixed"}},
  {"exp2", TRANS, {"f", "i", "mixed"}},
  {"frac", EXACT, {"f", "i", "mixed"}},
  {"asin", TRANS, {"f", "mixed"}},
  {"acos", TRANS, {"f", "mixed"}},
  {"atan", TRANS, {"f", "i", "mixed"}},
  {"sinh", TRANS, {"f", "mixed"}},
  {"cosh", TRANS, {"f", "mixed"}},
  {"asinh", TRANS, {"f", "i", "mixed"}},
  {"acosh", TRANS, {"pos", "mixed"}},
  {"atanh", TRANS, {"f", "mixed"}},
  {"log10", TRANS, {"pos", "small", "mixed"}},
  {"isnan", EXACT, {"f", "i", "b", "mixed"}},
  {"isinf", EXACT, {"f", "i", "b", "mixed"}},
  {"isfinite", EXACT, {"f", "i", "b", "mixed"}},
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

diff("flip: of data, of a pending value, of a view, fused into a chain", EXACT, function()
  local a = tensor.arange(24):reshape(2, 3, 4):float()
  local r = {}
  r.data = a:flip(1, 3)
  r.pending = (a * 2):flip(2)
  r.view = a:transpose(1, 3):narrow(1, 2, 2):flip(1, 2)
  r.chain = (a:flip(3) + a):flip(3) - a
  r.ints = tensor.arange(5):flip(1)
  r.bools = tensor.new({true, false, false}):flip(1)
  return r
end)

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

-- The lazy halves really were lazy: ops were recorded and graphs ran.
h.test("the lazy halves recorded and executed graphs", function()
  local m = tensor.metrics()
  if lh.LAZY then
    assert(m.ops_recorded > 2000, "ops_recorded " .. m.ops_recorded)
    -- (about one graph per case: lazy_helpers syncs a case's results at once)
    assert(m.graphs_executed > 80, "graphs_executed " .. m.graphs_executed)
  end
end)

h.done("test_lazy_differential")
