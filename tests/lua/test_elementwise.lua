-- test_elementwise.lua - every unary and binary elementwise op, operators,
-- broadcasting, numbers on either side, integer semantics, comparisons,
-- logical ops, where, clamp and Lua's comparison metamethods.
local h = dofile("helpers.lua")

local inf, nan = math.huge, 0 / 0

---------------------------------------------------------------------------
-- Unary ops: {name, inputs, reference, tolerance}. Each runs as a method and
-- as a module function, on f32 and on f64 input. The f64 reference is the
-- same Lua function; f64 results are held to h.F64 (h.TRANS-like ops with a
-- looser 1e-10 since the kernels may approximate).
---------------------------------------------------------------------------
local general = {-3.5, -1.25, -0.5, 0, 0.3, 0.5, 1, 2.75, 7}
local positive = {1e-4, 0.01, 0.3, 1, 2.5, 10, 123.5}
local small = {-2.5, -1, -0.1, -1e-4, 0, 1e-4, 0.2, 1, 2.5}
local angles = {-3, -1.2, -0.4, 0, 0.1, 0.7, 1.4, 2.9}
local wide = {-30, -8, -2, -0.5, 0, 0.25, 1.5, 4, 9, 30}
local unit_interval = {-1, -0.9, -0.5, -1e-3, 0, 0.3, 0.7, 1}

local F64_TRANS = {rel = 1e-10, abs = 1e-12}

local unary = {
  {"neg", general, function(x) return -x end, h.F32},
  {"abs", general, math.abs, h.F32},
  {"sign", general, h.sign, h.F32},
  {"square", general, function(x) return x * x end, h.F32},
  {"exp", small, math.exp, h.TRANS},
  {"expm1", small, h.expm1, h.TRANS},
  {"log", positive, math.log, h.TRANS},
  {"log1p", {-0.5, -1e-4, 0, 1e-4, 0.3, 1, 10}, h.log1p, h.TRANS},
  {"log2", positive, function(x) return math.log(x, 2) end, h.TRANS},
  {"sqrt", {0, 1e-4, 0.25, 2, 9, 1000}, math.sqrt, h.F32},
  {"rsqrt", positive, function(x) return 1 / math.sqrt(x) end, h.TRANS},
  {"reciprocal", {-4, -0.5, 0.25, 1, 3, 1000}, function(x) return 1 / x end, h.F32},
  {"sin", angles, math.sin, h.TRANS},
  {"cos", angles, math.cos, h.TRANS},
  {"tan", {-1.2, -0.4, 0, 0.1, 0.7, 1.4}, math.tan, h.TRANS},
  {"tanh", wide, h.tanh, h.TRANS},
  {"sigmoid", wide, h.sigmoid, h.TRANS},
  {"relu", general, function(x) return math.max(x, 0) end, h.F32},
  {"gelu", {-3, -1.5, -0.5, -1e-3, 0, 0.25, 1, 2, 3}, h.gelu, h.GELU},
  {"floor", general, function(x) return math.floor(x) + 0.0 end, h.EXACT},
  {"ceil", general, function(x) return math.ceil(x) + 0.0 end, h.EXACT},
  {"round", {-2.5, -1.5, -0.5, -0.4, 0, 0.5, 1.5, 2.5, 2.6, 3.5}, h.round, h.EXACT},
  {"trunc", general, h.trunc, h.EXACT},
  {"erf", {-3, -1.5, -0.5, -1e-3, 0, 0.25, 1, 2, 2.9}, h.erf, h.TRANS},
  {"erfc", {-2, -0.7, -1e-3, 0, 0.25, 0.8, 1.5}, function(x) return 1 - h.erf(x) end, h.TRANS},
  {"exp2", {-20, -2.5, -1, -0.1, 0, 0.3, 1, 7.5, 30}, function(x) return 2.0 ^ x end, h.TRANS},
  {"frac", general, function(x) return x - h.trunc(x) end, h.EXACT},
  -- Independent formulas (atan2, exp, log), not the libm functions the kernels call.
  {"asin", unit_interval, function(x) return math.atan(x, math.sqrt(1 - x * x)) end, h.TRANS},
  {"acos", unit_interval, function(x) return math.atan(math.sqrt(1 - x * x), x) end, h.TRANS},
  {"atan", wide, function(x) return math.asin(x / math.sqrt(1 + x * x)) end, h.TRANS},
  {"sinh", small, function(x) return (math.exp(x) - math.exp(-x)) / 2 end, h.TRANS},
  {"cosh", small, function(x) return (math.exp(x) + math.exp(-x)) / 2 end, h.TRANS},
  {"asinh", general, function(x)
    return h.sign(x) * math.log(math.abs(x) + math.sqrt(x * x + 1))
  end, h.TRANS},
  {"acosh", {1, 1.001, 1.5, 2, 10, 1e4}, function(x)
    return math.log(x + math.sqrt(x * x - 1))
  end, h.TRANS},
  {"atanh", {-0.99, -0.5, -0.01, 0, 0.3, 0.75, 0.999}, function(x)
    return 0.5 * math.log((1 + x) / (1 - x))
  end, h.TRANS},
  {"log10", positive, function(x) return math.log(x) / math.log(10) end, h.TRANS},
}

for _, case in ipairs(unary) do h.test("unary " .. case[1], function()
  local name, inputs, ref, tol = case[1], case[2], case[3], case[4]
  local t = tensor.new(inputs, {dtype = "f32"})
  local f32_inputs = t:tolist()
  local want = {}
  for i, x in ipairs(f32_inputs) do want[i] = ref(x) end
  h.check(t[name](t), "f32", want, tol)
  h.check(tensor[name](t), "f32", want, tol)
  -- 2-D, non-contiguous input gives the same values.
  local m = tensor.new({inputs, inputs}, {dtype = "f32"}):t()
  local mt = m[name](m)
  h.shape(mt, {#inputs, 2})
  local got = mt:tolist()
  for i = 1, #inputs do
    h.eq({got[i][1], got[i][2]}, {want[i], want[i]}, tol)
  end
  -- f64 input stays f64, with double-precision accuracy.
  local d = tensor.new(inputs, {dtype = "f64"})
  local want64 = {}
  for i, x in ipairs(d:tolist()) do want64[i] = ref(x) end
  local tol64 = (tol == h.F32 or tol == h.EXACT) and h.F64 or F64_TRANS
  if name == "gelu" then tol64 = {rel = 1e-9, abs = 1e-9} end
  h.check(d[name](d), "f64", want64, tol64)
end) end

-- Special values.
h.test("Special values", function()
  local t = tensor.new({inf, -inf, nan})
  h.check(t:exp(), "f32", {inf, 0, nan}, h.TRANS)
  h.check(t:abs(), "f32", {inf, inf, nan})
  h.check(t:tanh(), "f32", {1, -1, nan}, h.TRANS)
  h.check(t:sigmoid(), "f32", {1, 0, nan}, h.TRANS)
  h.check(t:relu(), "f32", {inf, 0, nan})
  h.check(tensor.new({0.0, -1.0}):log(), "f32", {-inf, nan})
  h.check(tensor.new({-1.0}):sqrt(), "f32", {nan})
  h.check(tensor.new({0.0}):reciprocal(), "f32", {inf})
  -- exp/sigmoid/tanh of large magnitudes must not overflow to NaN.
  h.check(tensor.new({-100.0, 100.0}):sigmoid(), "f32", {0, 1}, h.TRANS)
  h.check(tensor.new({-100.0, 100.0}):tanh(), "f32", {-1, 1}, h.TRANS)
  h.check(tensor.new({100.0}):exp(), "f32", {inf})
end)

-- Integer input: neg/abs/sign/square keep the integer type; floor, ceil,
-- round and trunc keep ints; the float-only ops turn ints into f32.
h.test("Integer input: neg/abs/sign/square keep the integer type;...", function()
  local i = tensor.new({-3, 0, 2, 5})
  h.check(i:neg(), "i64", {3, 0, -2, -5})
  h.check(-i, "i64", {3, 0, -2, -5})
  h.check(i:abs(), "i64", {3, 0, 2, 5})
  h.check(i:sign(), "i64", {-1, 0, 1, 1})
  h.check(i:square(), "i64", {9, 0, 4, 25})
  h.check(i:floor(), "i64", {-3, 0, 2, 5})
  h.check(i:ceil(), "i64", {-3, 0, 2, 5})
  h.check(i:round(), "i64", {-3, 0, 2, 5})
  h.check(i:trunc(), "i64", {-3, 0, 2, 5})
  local i32 = tensor.new({-3, 4}, {dtype = "i32"})
  h.check(i32:abs(), "i32", {3, 4})
  h.check(i32:neg(), "i32", {3, -4})
  h.check(i32:floor(), "i32", {-3, 4})
  local p = tensor.new({1, 2, 4})
  h.check(p:exp(), "f32", {math.exp(1), math.exp(2), math.exp(4)}, h.TRANS)
  h.check(p:sqrt(), "f32", {1, math.sqrt(2), 2}, h.TRANS)
  h.check(p:log(), "f32", {0, math.log(2), math.log(4)}, h.TRANS)
  h.check(p:log2(), "f32", {0, 1, 2}, h.TRANS)
  h.check(p:reciprocal(), "f32", {1, 0.5, 0.25}, h.F32)
  h.check(p:rsqrt(), "f32", {1, 1 / math.sqrt(2), 0.5}, h.TRANS)
  h.check(p:sigmoid(), "f32", {h.sigmoid(1), h.sigmoid(2), h.sigmoid(4)}, h.TRANS)
  h.check(p:tanh(), "f32", {h.tanh(1), h.tanh(2), h.tanh(4)}, h.TRANS)
  h.check(p:sin(), "f32", {math.sin(1), math.sin(2), math.sin(4)}, h.TRANS)
  h.check(tensor.new({1, 2}, {dtype = "i32"}):exp(), "f32", {math.exp(1), math.exp(2)}, h.TRANS)
  h.check(tensor.new({true, false}):exp(), "f32", {math.exp(1), 1}, h.TRANS)
  -- relu of ints: values (PyTorch keeps the int type; the spec lists relu
  -- among the float ops, so only the values are checked).
  h.eq(tensor.new({-2, 3}):relu():tolist(), {0, 3})
  -- neg of the most negative integer wraps, as in Lua.
  h.check(tensor.new({math.mininteger}):neg(), "i64", {-math.mininteger})
  h.check(tensor.new({math.mininteger}):abs(), "i64", {math.mininteger})
  h.check(tensor.new({-2147483648}, {dtype = "i32"}):neg(), "i32", {-2147483648})
end)

-- logical_not: any dtype in, bool out.
h.test("logical_not", function()
  h.check(tensor.new({0, 1, -2}):logical_not(), "bool", {true, false, false})
  h.check(tensor.new({0.0, 0.5, nan}):logical_not(), "bool", {true, false, false})
  h.check(tensor.new({true, false}):logical_not(), "bool", {false, true})
  h.check(tensor.logical_not(tensor.new({0, 3}, {dtype = "i32"})), "bool", {true, false})
end)

-- clamp(lo, hi), either may be nil.
h.test("clamp(lo, hi), either may be nil", function()
  local t = tensor.new({-2.5, -1, 0, 0.5, 3})
  h.check(t:clamp(-1, 1), "f32", {-1, -1, 0, 0.5, 1})
  h.check(t:clamp(0), "f32", {0, 0, 0, 0.5, 3})
  h.check(t:clamp(nil, 0.25), "f32", {-2.5, -1, 0, 0.25, 0.25})
  h.check(t:clamp(-0.5, nil), "f32", {-0.5, -0.5, 0, 0.5, 3})
  h.check(tensor.clamp(t, 0, 2), "f32", {0, 0, 0, 0.5, 2})
  local i = tensor.new({-5, 0, 5, 10})
  h.check(i:clamp(0, 6), "i64", {0, 0, 5, 6})
  h.check(i:clamp(-1), "i64", {-1, 0, 5, 10})
  h.check(tensor.new({nan, 2.0}):clamp(0, 1), "f32", {nan, 1})
end)

-- clamp of i64 with integer bounds is exact (no detour through doubles).
h.test("clamp of i64 beyond 2^53", function()
  local n = (1 << 53) + 1
  h.check(tensor.new({n}):clamp(0, n), "i64", {n})
  h.check(tensor.new({5, n + 2}):clamp(n), "i64", {n, n + 2})
  h.check(tensor.new({n + 2}):clamp(nil, n), "i64", {n})
  local t = tensor.new({5})
  t:clamp_(n)
  h.check(t, "i64", {n})
end)

---------------------------------------------------------------------------
-- Binary ops with broadcasting and numbers on either side.
---------------------------------------------------------------------------
local function lua_floordiv(a, b) return math.floor(a / b) + 0.0 end
local function lua_mod(a, b) return a - math.floor(a / b) * b end

local binary = {
  -- name, operator, reference, tolerance
  {"add", function(a, b) return a + b end, function(a, b) return a + b end, h.F32},
  {"sub", function(a, b) return a - b end, function(a, b) return a - b end, h.F32},
  {"mul", function(a, b) return a * b end, function(a, b) return a * b end, h.F32},
  {"div", function(a, b) return a / b end, function(a, b) return a / b end, h.F32},
  {"pow", function(a, b) return a ^ b end, function(a, b) return a ^ b end, h.TRANS},
  {"maximum", nil, math.max, h.EXACT},
  {"minimum", nil, math.min, h.EXACT},
  {"atan2", nil, math.atan, h.TRANS},
}

local A = {{1.5, -2, 3.25}, {0.5, 4, -1.75}}          -- [2, 3]
local B = {{2, 0.5, -4}, {1.25, -3, 8}}               -- [2, 3]
local ROW = {0.25, -2, 3}                             -- [3]
local COL = {{2}, {-0.5}}                             -- [2, 1]
local POS = {{1.5, 2, 3.25}, {0.5, 4, 1.75}}          -- positive bases for pow
local EXPS = {{2, 0.5, -1}, {3, 1.5, 0}}

for _, case in ipairs(binary) do h.test("binary " .. case[1], function()
  local name, op, ref, tol = case[1], case[2], case[3], case[4]
  local left, right = A, B
  if name == "pow" then left, right = POS, EXPS end
  local a, b = tensor.new(left), tensor.new(right)
  local want = h.bmap(left, right, ref)
  h.check(a[name](a, b), "f32", want, tol)
  h.check(tensor[name](a, b), "f32", want, tol)
  if op then h.check(op(a, b), "f32", want, tol) end
  -- [2, 3] with [3], [2, 1] with [3] (both sides broadcast), [3] with [2, 3]
  local row, col = tensor.new(ROW), tensor.new(COL)
  if name ~= "pow" then
    h.check(a[name](a, row), "f32", h.bmap(left, ROW, ref), tol)
    h.check(row[name](row, a), "f32", h.bmap(ROW, left, ref), tol)
    h.check(col[name](col, row), "f32", h.bmap(COL, ROW, ref), tol)
    if op then
      h.check(op(col, row), "f32", h.bmap(COL, ROW, ref), tol)
      h.check(op(row, a), "f32", h.bmap(ROW, left, ref), tol)
    end
  else
    h.check(a:pow(tensor.new({2, 0.5, 3})), "f32", h.bmap(left, {2, 0.5, 3}, ref), tol)
    h.check(tensor.new({{2.0}, {3.0}}):pow(tensor.new({1, 2, 3})), "f32",
            h.bmap({{2}, {3}}, {1, 2, 3}, ref), tol)
  end
  -- Numbers on either side (a number is broadcast like a 0-dim tensor).
  local x = name == "pow" and 2 or 1.5
  h.check(a[name](a, x), "f32", h.bmap(left, x, ref), tol)
  h.check(a[name](a, 3), "f32", h.bmap(left, 3, ref), tol)
  if op then
    h.check(op(a, x), "f32", h.bmap(left, x, ref), tol)
    h.check(op(x, a), "f32", h.bmap(x, left, ref), tol)
    h.check(op(3, a), "f32", h.bmap(3, left, ref), tol)
  end
  -- 0-dim tensor operands broadcast too.
  local s = tensor.new(2.0)
  h.check(a[name](a, s), "f32", h.bmap(left, 2.0, ref), tol)
  h.check(s[name](s, a), "f32", h.bmap(2.0, left, ref), tol)
  -- f64 stays f64.
  local a64, b64 = tensor.new(left, {dtype = "f64"}), tensor.new(right, {dtype = "f64"})
  local tol64 = tol == h.EXACT and h.EXACT or F64_TRANS
  h.check(a64[name](a64, b64), "f64", h.bmap(left, right, ref), tol64)
end) end

-- Unary minus.
h.test("unary minus", function()
  h.check(-tensor.new({{1.5, -2}, {0, 3}}), "f32", {{-1.5, 2}, {0, -3}})
end)

-- Broadcasting to higher rank: [2, 1, 3] + [4, 1] -> [2, 4, 3].
h.test("Broadcasting to higher rank: [2, 1, 3] + [4, 1] -> [2, 4, 3]", function()
  local a = {{{1, 2, 3}}, {{4, 5, 6}}}
  local b = {{10}, {20}, {30}, {40}}
  local got = tensor.new(a) + tensor.new(b)
  h.check(got, "i64", h.bmap(a, b, function(x, y) return x + y end))
  h.shape(got, {2, 4, 3})
  -- size-0 dims broadcast with 1
  h.shape(tensor.zeros(0, 3) + tensor.zeros(1, 3), {0, 3})
end)

-- Randomized larger case: f32 [17, 33] op [33] against Lua loops.
h.test("Randomized larger case: f32 [17, 33] op [33] against Lua ...", function()
  local a = h.rand_list(11, {17, 33}, -2, 2)
  local b = h.rand_list(12, {33}, 0.5, 3)
  local ta, tb = tensor.new(a), tensor.new(b)
  h.check(ta * tb + ta / tb - tb, "f32",
          h.bmap(h.bmap(h.bmap(a, b, function(x, y) return x * y end),
                        h.bmap(a, b, function(x, y) return x / y end),
                        function(x, y) return x + y end),
                 b, function(x, y) return x - y end), {rel = 4e-6, abs = 4e-6})
  h.check((ta:exp() + 1):log(), "f32",
          h.map(a, function(x) return math.log(math.exp(x) + 1) end), {rel = 4e-6, abs = 4e-6})
end)

---------------------------------------------------------------------------
-- Floor division and remainder: the sign of the divisor, as in Lua.
---------------------------------------------------------------------------
h.test("floor division and remainder signs", function()
  local xs = {7, -7, 7, -7, 6, -6, 0, 1, -1, 13}
  local ys = {2, 2, -2, -2, 3, 3, 5, -5, 5, 4}
  local fd, md = {}, {}
  for i = 1, #xs do
    fd[i] = xs[i] // ys[i]
    md[i] = xs[i] % ys[i]
  end
  assert(fd[2] == -4 and md[2] == 1 and fd[3] == -4 and md[3] == -1)
  local x, y = tensor.new(xs), tensor.new(ys)
  h.check(x // y, "i64", fd)
  h.check(x % y, "i64", md)
  h.check(x:floor_divide(y), "i64", fd)
  h.check(x:remainder(y), "i64", md)
  h.check(tensor.floor_divide(x, y), "i64", fd)
  h.check(tensor.remainder(x, y), "i64", md)
  local x32, y32 = tensor.new(xs, {dtype = "i32"}), tensor.new(ys, {dtype = "i32"})
  h.check(x32 // y32, "i32", fd)
  h.check(x32 % y32, "i32", md)
  -- numbers on either side
  h.check(x // 3, "i64", h.map(xs, function(v) return v // 3 end))
  h.check(x % -3, "i64", h.map(xs, function(v) return v % -3 end))
  h.check(20 // y, "i64", h.map(ys, function(v) return 20 // v end))
  h.check(-20 % y, "i64", h.map(ys, function(v) return -20 % v end))
  -- floats: floor and the divisor's sign too
  local fx = {7.5, -7.5, 7.5, -7.5, 6, -0.5, 0.25}
  local fy = {2, 2, -2, -2, 1.5, 4, -1}
  local xf, yf = tensor.new(fx), tensor.new(fy)
  local ffd = h.bmap(fx, fy, lua_floordiv)
  local fmd = h.bmap(fx, fy, lua_mod)
  for i = 1, #fx do
    assert(ffd[i] == fx[i] // fy[i] and fmd[i] == fx[i] % fy[i])
  end
  h.check(xf // yf, "f32", ffd)
  h.check(xf % yf, "f32", fmd)
  h.check(xf:floor_divide(yf), "f32", ffd)
  h.check(xf:remainder(yf), "f32", fmd)
  h.check(xf % 2, "f32", h.map(fx, function(v) return v % 2 end))
  h.check(5.5 % yf, "f32", h.map(fy, function(v) return 5.5 % v end))
  -- float division by zero: inf / nan, not an error
  h.check(tensor.new({1.0, -1.0, 0.0}) // 0, "f32", {inf, -inf, nan})
  h.check(tensor.new({1.0, -1.0}) / 0, "f32", {inf, -inf})
  h.check(tensor.new({1.0}) % 0.0, "f32", {nan})
  h.check(tensor.new({1, 2}) / 0, "f32", {inf, inf})
end)

---------------------------------------------------------------------------
-- Integer semantics: wrap like Lua, // and % at the extremes, /, ^.
---------------------------------------------------------------------------
h.test("integer semantics", function()
  local maxi, mini = math.maxinteger, math.mininteger
  local big = tensor.new({maxi, mini, maxi})
  h.check(big + 1, "i64", {maxi + 1, mini + 1, maxi + 1})
  assert(maxi + 1 == mini)
  h.check(big - 1, "i64", {maxi - 1, mini - 1, maxi - 1})
  h.check(big * 2, "i64", {maxi * 2, mini * 2, maxi * 2})
  h.check(big * big, "i64", {maxi * maxi, mini * mini, maxi * maxi})
  -- INT_MIN // -1 wraps to INT_MIN and INT_MIN % -1 is 0, as in Lua.
  assert(mini // -1 == mini and mini % -1 == 0)
  h.check(tensor.new({mini}) // -1, "i64", {mini})
  h.check(tensor.new({mini}) % -1, "i64", {0})
  h.check(tensor.new({mini}) // tensor.new({-1}), "i64", {mini})
  h.check(tensor.new({mini, 5}) % tensor.new({-1, -1}), "i64", {0, 0})
  -- i32 wraps at 32 bits.
  local i32 = tensor.new({2147483647, -2147483648}, {dtype = "i32"})
  h.check(i32 + 1, "i32", {h.wrap32(2147483647 + 1), h.wrap32(-2147483648 + 1)})
  h.check(i32 * 3, "i32", {h.wrap32(2147483647 * 3), h.wrap32(-2147483648 * 3)})
  h.check(i32 - 1, "i32", {h.wrap32(2147483646), h.wrap32(-2147483649)})
  h.check(tensor.new({-2147483648}, {dtype = "i32"}) // -1, "i32", {-2147483648})
  h.check(tensor.new({-2147483648}, {dtype = "i32"}) % -1, "i32", {0})
  -- Exact i64 arithmetic beyond 2^53 (no detour through doubles).
  local n = (1 << 53) + 1
  h.check(tensor.new({n}) + 2, "i64", {n + 2})
  h.check(tensor.new({n}) * 3, "i64", {n * 3})
  h.check(tensor.new({n}) // 2, "i64", {n // 2})
  h.check(tensor.new({n}) % 1000, "i64", {n % 1000})
  -- / is true division: integers give f32.
  h.check(tensor.new({1, 2, -7}) / 2, "f32", {0.5, 1, -3.5})
  h.check(tensor.new({1, 2}) / tensor.new({4, 8}), "f32", {0.25, 0.25})
  h.check(tensor.new({3}, {dtype = "i32"}) / tensor.new({2}, {dtype = "i32"}), "f32", {1.5})
  h.check(7 / tensor.new({2}), "f32", {3.5})
  -- ^ on integers stays integer (exact powers, wrapping like Lua's *).
  local base = {2, 3, -2, 0, 1, -1, 10}
  local ex = {10, 3, 3, 0, 7, 5, 18}
  local want = {}
  for i = 1, #base do want[i] = h.ipow(base[i], ex[i]) end
  h.check(tensor.new(base) ^ tensor.new(ex), "i64", want)
  h.check(tensor.new(base):pow(tensor.new(ex)), "i64", want)
  h.check(tensor.new({2, 3}) ^ 2, "i64", {4, 9})
  h.check(2 ^ tensor.new({1, 2, 3}), "i64", {2, 4, 8})
  h.check(tensor.new({3}) ^ 40, "i64", {h.ipow(3, 40)})
  h.check(tensor.new({3}, {dtype = "i32"}) ^ 2, "i32", {9})
  h.check(tensor.new({2}, {dtype = "i32"}) ^ 31, "i32", {h.wrap32(1 << 31)})
  h.check(tensor.new({7}, {dtype = "i32"}) ^ 13, "i32", {h.wrap32(h.ipow(7, 13))})
  -- a float exponent makes it f32
  h.check(tensor.new({4, 9}) ^ 0.5, "f32", {2, 3}, h.TRANS)
  -- maximum / minimum / atan2 on ints
  h.check(tensor.new({1, 5}):maximum(tensor.new({3, 2})), "i64", {3, 5})
  h.check(tensor.new({1, 5}):minimum(3), "i64", {1, 3})
  h.check(tensor.new({1, 0}):atan2(tensor.new({1, 1})), "f32", {math.atan(1, 1), 0}, h.TRANS)
end)

-- maximum/minimum propagate NaN; max(u) with a tensor is maximum.
h.test("maximum/minimum propagate NaN; max(u) with a tensor is ma...", function()
  local a, b = tensor.new({nan, 1, 2}), tensor.new({1, nan, 3})
  h.check(a:maximum(b), "f32", {nan, nan, 3})
  h.check(a:minimum(b), "f32", {nan, nan, 2})
  h.check(tensor.new({1, 5, 3}):max(tensor.new({4, 2, 3})), "i64", {4, 5, 3})
  h.check(tensor.new({1, 5, 3}):min(tensor.new({4, 2, 3})), "i64", {1, 2, 3})
end)

---------------------------------------------------------------------------
-- Comparisons and logical ops: bool tensors.
---------------------------------------------------------------------------
h.test("comparison ops", function()
  local L = {{1, 2.5, 3}, {-1, 0, nan}}
  local R = {{1, 2, 4}, {-2, 0, nan}}
  local refs = {
    lt = function(x, y) return x < y end,
    le = function(x, y) return x <= y end,
    gt = function(x, y) return x > y end,
    ge = function(x, y) return x >= y end,
    eq = function(x, y) return x == y end,
    ne = function(x, y) return x ~= y end,
  }
  local l, r = tensor.new(L), tensor.new(R)
  for name, ref in pairs(refs) do
    h.check(l[name](l, r), "bool", h.bmap(L, R, ref))
    h.check(tensor[name](l, r), "bool", h.bmap(L, R, ref))
    h.check(l[name](l, 1), "bool", h.bmap(L, 1, ref))
    h.check(l[name](l, tensor.new({1, 0, 3})), "bool", h.bmap(L, {1, 0, 3}, ref))
    -- mixed dtypes compare by value: i64 against f32
    local ints = tensor.new({1, 2, 3})
    h.check(ints[name](ints, tensor.new({1.5, 2, 2.5})), "bool",
            h.bmap({1, 2, 3}, {1.5, 2, 2.5}, ref))
    h.check(ints[name](ints, 2), "bool", h.bmap({1, 2, 3}, 2, ref))
    h.check(ints[name](ints, 2.5), "bool", h.bmap({1, 2, 3}, 2.5, ref))
  end
  -- large i64 values compare exactly
  local n = (1 << 53) + 1
  h.check(tensor.new({n}):eq(tensor.new({n - 1})), "bool", {false})
  h.check(tensor.new({n}):gt(n - 1), "bool", {true})
end)

h.test("logical ops", function()
  local P = {true, true, false, false}
  local Q = {true, false, true, false}
  local p, q = tensor.new(P), tensor.new(Q)
  h.check(p:logical_and(q), "bool", {true, false, false, false})
  h.check(p:logical_or(q), "bool", {true, true, true, false})
  h.check(p:logical_xor(q), "bool", {false, true, true, false})
  h.check(tensor.logical_and(p, q), "bool", {true, false, false, false})
  -- numbers: nonzero is true
  local x, y = tensor.new({0, 2, -1, 0}), tensor.new({0.5, 0, 3, 0})
  h.check(x:logical_and(y), "bool", {false, false, true, false})
  h.check(x:logical_or(y), "bool", {true, true, true, false})
  h.check(x:logical_xor(y), "bool", {true, true, false, false})
  -- broadcasting
  h.check(tensor.new({{true}, {false}}):logical_or(tensor.new({true, false})), "bool",
          {{true, true}, {true, false}})
end)

---------------------------------------------------------------------------
-- where(cond, a, b): tensors or numbers, broadcasting.
---------------------------------------------------------------------------
h.test("where", function()
  local C = {{true, false, true}, {false, false, true}}
  local A2 = {{1, 2, 3}, {4, 5, 6}}
  local B2 = {{-1, -2, -3}, {-4, -5, -6}}
  local pick = function(c, a, b) if c then return a else return b end end
  local c = tensor.new(C)
  h.check(tensor.where(c, tensor.new(A2), tensor.new(B2)), "i64", h.bmap3(C, A2, B2, pick))
  h.check(tensor.where(c, tensor.new(A2), 0), "i64", h.bmap3(C, A2, 0, pick))
  h.check(tensor.where(c, 7, tensor.new(B2)), "i64", h.bmap3(C, 7, B2, pick))
  h.check(tensor.where(c, 1.5, -1.5), "f32", h.bmap3(C, 1.5, -1.5, pick))
  h.check(tensor.where(c, tensor.new(A2, {dtype = "f32"}), 0), "f32", h.bmap3(C, A2, 0, pick))
  -- cond [3] broadcasts against a [2, 1] and b [2, 3]
  local C1 = {true, false, true}
  local A1 = {{10}, {20}}
  h.check(tensor.where(tensor.new(C1), tensor.new(A1), tensor.new(B2)), "i64",
          h.bmap3(C1, A1, B2, pick))
  -- a cond computed by a comparison
  local x = tensor.new({-2, 3, -1, 4})
  h.check(tensor.where(x:gt(0), x, 0), "i64", {0, 3, 0, 4})
  h.check(tensor.where(x:lt(0), -x, x), "i64", {2, 3, 1, 4})
  -- mixed dtypes promote: i64 and f32 give f32
  h.check(tensor.where(tensor.new({true, false}), tensor.new({1, 2}), tensor.new({0.5, 0.25})),
          "f32", {1, 0.25})
end)

---------------------------------------------------------------------------
-- Lua's comparison operators give Lua booleans.
---------------------------------------------------------------------------
h.test("Lua comparison operators", function()
  local a, b = tensor.new({1, 2, 3}), tensor.new({1, 2, 3})
  assert(a == b)
  assert(rawequal(a == b, true))
  assert(a:equal(b) == true)
  assert(tensor.equal(a, b) == true)
  assert(not (a == tensor.new({1, 2, 4})))
  assert(a ~= tensor.new({1, 2, 4}))
  assert(not (a == tensor.new({{1, 2, 3}})))          -- same values, other shape
  assert(not (a == tensor.new({1, 2})))
  assert(not a:equal(tensor.new({{1}, {2}, {3}})))
  local f1, f2 = tensor.new({1, nan}), tensor.new({1, nan})
  assert(not (f1 == f2))                                  -- NaN ~= NaN
  assert(f1:equal(f2) == false)
  assert(f1:equal(f1) == false)
  assert(tensor.new({{1.5, 2}}) == tensor.new({{1.5, 2}}))
  assert(not (a == 1))                                    -- a tensor is never a number
  -- a < b, a <= b: single-element tensors or a tensor and a number, by value
  local two, three = tensor.new(2), tensor.new({3.5})
  assert(two < three)
  assert(two <= three)
  assert(not (three < two))
  assert(three > two and three >= two)
  assert(two <= tensor.new({2.0}))
  assert(not (two < tensor.new({2})))
  assert(two < 3)
  assert(not (two < 2))
  assert(two <= 2)
  assert(1 < two)
  assert(not (2 < two))
  assert(2 <= two)
  assert(two > 1.5 and two >= 2 and 2.5 > two)
  assert(tensor.new({{5}}) < 6)
  local lt_result = two < 3
  assert(rawequal(lt_result, true))
  -- an integer-typed tensor against a huge integer compares exactly
  local n = (1 << 53) + 1
  assert(tensor.new({n}) > n - 1)
  assert(not (tensor.new({n}) <= n - 1))
end)


-- The same computation repeated with other numbers and other data: a cached
-- (compiled) graph must never give a stale result. 0 and 1 may be baked in
-- as constants while other numbers are parameters: mix them.
h.test("repeated graphs with changing numbers and data", function()
  local base = {1.5, -2, 4}
  local t = tensor.new(base)
  for _, k in ipairs({2, 3, 0, 1, 0.5, 1, 0, -1, 2, 7}) do
    local want = h.map(base, function(x) return x * k + k end)
    h.check(t * k + k, "f32", want, h.F32)
    local s = 0
    for _, x in ipairs(want) do s = s + x end
    h.check((t * k + k):sum(), "f32", s, h.F32)
  end
  for n = 1, 6 do
    local data = {}
    for i = 1, 5 do data[i] = (i * n) % 7 - 3 end
    local u = tensor.new(data)
    h.check((u * 2 - 1):maximum(0), "i64", h.map(data, function(x) return math.max(x * 2 - 1, 0) end))
  end
  -- integer numbers with an integer tensor, then a float number: the type
  -- changes with the number even though the graph's shape does not
  local i = tensor.new({1, 2, 3})
  h.check(i * 2, "i64", {2, 4, 6})
  h.check(i * 2.5, "f32", {2.5, 5, 7.5})
  h.check(i * 3, "i64", {3, 6, 9})
end)

-- The issue-13 ops: special values, integers, in-place forms, flip.
h.test("erf, erfc, exp2, frac: special values, integers, in place", function()
  local t = tensor.new({inf, -inf, nan, -0.0, 12, -12})
  h.check(t:erf(), "f32", {1, -1, nan, -0.0, 1, -1})
  h.check(t:erfc(), "f32", {0, 2, nan, 1, 0, 2})
  h.check(tensor.new({inf, -inf, nan, 128, -149, 3}):exp2(), "f32", {inf, 0, nan, inf, 2 ^ -149, 8})
  h.check(tensor.new({inf, -inf, nan, -2.5, 2.0}):frac(), "f32", {nan, nan, nan, -0.5, 0})
  assert(1 / tensor.new({-0.0}):erf():item() < 0, "erf(-0) = -0")
  h.check(tensor.new({-3, 0, 7}):frac(), "i64", {0, 0, 0})
  h.check(tensor.new({0, 1, 3}):exp2(), "f32", {1, 2, 8})
  h.check(tensor.new({0, 1}):erf(), "f32", {0, h.erf(1)}, h.TRANS)
  for _, op in ipairs({"erf", "erfc", "exp2", "expm1", "log2", "sign", "trunc", "frac"}) do
    local x = tensor.new({0.5, 1.75, 3.25})
    local want = x[op](x):tolist()
    local y = x:clone()
    assert(y[op .. "_"](y) == y, op .. "_ returns its target")
    h.check(y, "f32", want)
  end
end)

h.test("asin ... log10: special values, domains, integers, in place", function()
  local pi = math.pi
  h.check(tensor.new({1, -1, 2, -2, nan, -0.0}):asin(), "f32", {pi / 2, -pi / 2, nan, nan, nan, -0.0},
          h.TRANS)
  h.check(tensor.new({1, -1, 1.5, nan}):acos(), "f32", {0, pi, nan, nan}, h.TRANS)
  h.check(tensor.new({inf, -inf, nan, 1}):atan(), "f32", {pi / 2, -pi / 2, nan, pi / 4}, h.TRANS)
  h.check(tensor.new({inf, -inf, 100, nan}):sinh(), "f32", {inf, -inf, inf, nan})
  h.check(tensor.new({inf, -inf, -100, nan}):cosh(), "f32", {inf, inf, inf, nan})
  h.check(tensor.new({inf, -inf, nan}):asinh(), "f32", {inf, -inf, nan})
  h.check(tensor.new({1, 0.5, inf, nan}):acosh(), "f32", {0, nan, inf, nan})
  h.check(tensor.new({1, -1, 1.5, nan}):atanh(), "f32", {inf, -inf, nan, nan})
  h.check(tensor.new({0, -1, 1000, 1e-5, inf}):log10(), "f32", {-inf, nan, 3, -5, inf}, h.TRANS)
  assert(1 / tensor.new({-0.0}):sinh():item() < 0, "sinh(-0) = -0")
  assert(1 / tensor.new({-0.0}):atanh():item() < 0, "atanh(-0) = -0")
  -- Integers become f32; f64 stays f64.
  h.check(tensor.new({0, 1}):asin(), "f32", {0, pi / 2}, h.TRANS)
  h.check(tensor.new({1, 100}):log10(), "f32", {0, 2})
  h.check(tensor.new({100}, {dtype = "f64"}):log10(), "f64", {2})
  for _, op in ipairs({"asin", "acos", "atan", "sinh", "cosh", "asinh", "atanh", "log10"}) do
    local x = tensor.new({0.125, 0.5, 0.75})
    local want = x[op](x):tolist()
    local y = x:clone()
    assert(y[op .. "_"](y) == y, op .. "_ returns its target")
    h.check(y, "f32", want)
  end
  local ones = tensor.new({1.5, 3})
  h.check(ones:acosh_(), "f32", tensor.new({1.5, 3}):acosh():tolist())
  h.err(function() tensor.new({1, 2}):asin_() end, "can't be stored")
end)

h.test("isnan, isinf, isfinite", function()
  local t = tensor.new({0, nan, inf, -inf, -0.0, 3e38, 1e-45})
  h.check(t:isnan(), "bool", {false, true, false, false, false, false, false})
  h.check(t:isinf(), "bool", {false, false, true, true, false, false, false})
  h.check(t:isfinite(), "bool", {true, false, false, false, true, true, true})
  h.check(tensor.isnan(t:double()), "bool", {false, true, false, false, false, false, false})
  h.check((t:double() * 1e300):isinf(), "bool", {false, false, true, true, false, true, false})
  for _, dtype in ipairs({"i32", "i64", "bool"}) do
    local i = tensor.new({0, 1, 5}):to(dtype)
    h.check(i:isnan(), "bool", {false, false, false})
    h.check(i:isinf(), "bool", {false, false, false})
    h.check(i:isfinite(), "bool", {true, true, true})
  end
  -- 2-D views, and the results used in arithmetic.
  local m = tensor.new({{1, nan}, {inf, 2}}):t()
  h.check(m:isnan(), "bool", {{false, false}, {true, false}})
  h.check(m:isfinite():sum(), "i64", 2)
  h.err(function() t:isnan_() end, "isnan_")
  local x = tensor.new({1.0, 2.0}):requires_grad(true)
  h.err(function() x:isnan():sum():backward() end, "")
end)

h.test("flip", function()
  local t = tensor.arange(24):reshape(2, 3, 4)
  local want = {}
  for i = 1, 2 do
    want[i] = {}
    for j = 1, 3 do
      want[i][j] = {}
      for k = 1, 4 do want[i][j][k] = (2 - i) * 12 + (j - 1) * 4 + (4 - k) end
    end
  end
  h.eq(t:flip(1, 3):tolist(), want)
  h.eq(t:flip({3, 1}):tolist(), want)
  h.eq(tensor.flip(t, -1, 1):tolist(), want)
  h.eq(t:flip(2):select(2, 1):tolist(), t:select(2, 3):tolist())
  h.check(tensor.new({1.5, -2, 3}):flip(1), "f32", {3, -2, 1.5})
  -- Non-contiguous input, a dim of extent 1, and a new tensor even then.
  h.eq(t:transpose(1, 3):flip(1):tolist(), t:flip(3):transpose(1, 3):tolist())
  local one = tensor.new({{5, 6}})
  local same = one:flip(1)
  same[1][1] = 9
  h.eq(one:tolist(), {{5, 6}})
  h.err(function() return t:flip(1, 1) end, "appears more than once")
  h.err(function() return t:flip(4) end, "flip")
end)

h.done("test_elementwise")
