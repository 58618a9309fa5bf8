-- test_promotion.lua - result dtypes of ops between tensors of every dtype
-- pair and between tensors and Lua numbers (PyTorch's rules, weak scalars).
local h = dofile("helpers.lua")

local ORDER = {"bool", "i32", "i64", "f32", "f64"}
local RANK = {bool = 1, i32 = 2, i64 = 3, f32 = 4, f64 = 5}
local FLOAT = {f32 = true, f64 = true}

local function wider(a, b) return RANK[a] >= RANK[b] and a or b end

-- Two small tensors of a dtype with values that are valid in every dtype.
local function make(dtype, values)
  return tensor.new(values or {1, 0, 1}, {dtype = dtype})
end

-- Tensor with tensor: the wider type, for every pair and every arithmetic
-- op (bool with bool is left out: arithmetic on two bool tensors is not
-- meaningful). Values stay checked: 1/0/1 patterns give exact results.
for _, da in ipairs(ORDER) do h.test("tensor pairs with " .. da, function()
  for _, db in ipairs(ORDER) do
    if not (da == "bool" and db == "bool") then
      local a, b = make(da, {1, 0, 1}), make(db, {1, 1, 0})
      local want = wider(da, db)
      h.check(a + b, want, {2, 1, 1})
      h.check(a * b, want, {1, 0, 0})
      h.check(a:add(b), want, {2, 1, 1})
      h.check(a:maximum(b), want, {1, 1, 1})
      h.check(a:minimum(b), want, {1, 0, 0})
      if da ~= "bool" and db ~= "bool" then
        h.check(a - b, want, {0, -1, 1})
      end
      -- true division: integers (and bools) give f32
      local dwant = FLOAT[want] and want or "f32"
      assert((a / make(db, {1, 1, 1})):dtype() == dwant, da .. "/" .. db)
      h.check(a / make(db, {1, 1, 1}), dwant, {1, 0, 1})
      -- comparisons and logical ops are bool whatever the inputs
      h.check(a:eq(b), "bool", {true, false, false})
      h.check(a:lt(b), "bool", {false, true, false})
      h.check(a:logical_and(b), "bool", {true, false, false})
      -- where promotes its two value operands
      h.check(tensor.where(tensor.new({true, false, true}), a, b), want, {1, 1, 1})
      -- the commuted operation gives the same type
      assert((b + a):dtype() == want)
    end
  end
end) end

-- bool with bool stays bool (the wider of the two types), as in PyTorch and
-- NumPy: + is a logical or, * a logical and.
h.test("bool with bool", function()
  local p, q = tensor.new({true, true, false, false}), tensor.new({true, false, true, false})
  h.check(p + q, "bool", {true, true, true, false})
  h.check(p * q, "bool", {true, false, false, false})
  h.check(p:maximum(q), "bool", {true, true, true, false})
  h.check(p:minimum(q), "bool", {true, false, false, false})
  h.check(tensor.where(tensor.new({true, false, true, false}), p, q), "bool",
          {true, false, false, false})
end)

-- Integer // and % keep the wider integer type; ^ on integers stays integer.
h.test("Integer // and % keep the wider integer type; ^ on intege...", function()
  h.check(make("i32", {7}) // make("i64", {2}), "i64", {3})
  h.check(make("i64", {7}) % make("i32", {-2}), "i64", {-1})
  h.check(make("i32", {3}) ^ make("i32", {3}), "i32", {27})
  h.check(make("i32", {3}) ^ make("i64", {2}), "i64", {9})
  h.check(make("i64", {2}) ^ make("f32", {0.5}), "f32", {math.sqrt(2)}, h.TRANS)
  h.check(make("i32", {7}) // make("f64", {2}), "f64", {3})
end)

-- Tensor with a Lua number: the number is weak.
local scalar_cases = {
  -- tensor dtype, integer number result, float number result
  {"bool", "i64", "f32"},
  {"i32", "i32", "f32"},
  {"i64", "i64", "f32"},
  {"f32", "f32", "f32"},
  {"f64", "f64", "f64"},
}
for _, case in ipairs(scalar_cases) do h.test("scalars with " .. case[1], function()
  local dtype, with_int, with_float = case[1], case[2], case[3]
  local t = make(dtype, {1, 0})
  h.check(t + 2, with_int, {3, 2})
  h.check(2 + t, with_int, {3, 2})
  h.check(t * 3, with_int, {3, 0})
  h.check(3 * t, with_int, {3, 0})
  h.check(t:add(2), with_int, {3, 2})
  h.check(t:mul(3), with_int, {3, 0})
  h.check(t:maximum(2), with_int, {2, 2})
  h.check(t + 0.5, with_float, {1.5, 0.5})
  h.check(0.5 + t, with_float, {1.5, 0.5})
  h.check(t * 2.5, with_float, {2.5, 0})
  if dtype ~= "bool" then  -- (PyTorch refuses subtraction on bool tensors)
    h.check(t:sub(0.5), with_float, {0.5, -0.5})
    h.check(t - 1.0, with_float, {0, -1})     -- a float number, even if integral
    h.check(t - 1, with_int, {0, -1})
  end
  h.check(t / 2, FLOAT[dtype] and dtype or "f32", {0.5, 0})
  h.check(t:div(2), FLOAT[dtype] and dtype or "f32", {0.5, 0})
  h.check(t:lt(0.5), "bool", {false, true})
  h.check(t:eq(1), "bool", {true, false})
end) end
-- A large integer number stays exact with an i64 tensor; an i32 tensor keeps
-- i32 (PyTorch: the weak scalar does not widen) - only small values here.
h.test("A large integer number stays exact with an i64 tensor; an...", function()
  h.check(make("i64", {1}) + (1 << 40), "i64", {(1 << 40) + 1})
  h.check(make("i32", {1, 2}) - 5, "i32", {-4, -3})
  -- Integer // and % with numbers keep the tensor's integer type.
  h.check(make("i32", {7, -7}) // 2, "i32", {3, -4})
  h.check(make("i32", {7, -7}) % 2, "i32", {1, 1})
  h.check(make("bool", {true, false}) // 1, "i64", {1, 0})
  h.check(make("i32", {7}) // 2.0, "f32", {3})
  -- ^: integer stays integer, float exponent gives f32.
  h.check(make("i32", {3}) ^ 2, "i32", {9})
  h.check(make("i64", {3}) ^ 2.0, "f32", {9}, h.TRANS)
  h.check(make("f64", {3}) ^ 2, "f64", {9}, h.F64)
end)

-- The numbers 0 and 1 are special in the lazy graph (constants an optimizer
-- may fold): x * 1, x + 0 ... must still promote like any other number and
-- keep IEEE semantics (x * 0 is NaN for NaN and inf; 2.5 // 1 is 2).
h.test("0 and 1 as numbers", function()
  local i = tensor.new({1, 2})
  h.check(i * 1.0, "f32", {1, 2})
  h.check(1.0 * i, "f32", {1, 2})
  h.check(i + 0.0, "f32", {1, 2})
  h.check(i - 0.0, "f32", {1, 2})
  h.check(i / 1, "f32", {1, 2})
  h.check(i ^ 1.0, "f32", {1, 2})
  h.check(i * 1, "i64", {1, 2})
  h.check(i + 0, "i64", {1, 2})
  h.check(i ^ 1, "i64", {1, 2})
  h.check(i ^ 0, "i64", {1, 1})
  local b = tensor.new({true, false})
  h.check(b + 0, "i64", {1, 0})
  h.check(b * 1, "i64", {1, 0})
  h.check(b * 1.0, "f32", {1, 0})
  local i32 = tensor.new({3}, {dtype = "i32"})
  h.check(i32 * 1, "i32", {3})
  h.check(i32 + 0.0, "f32", {3})
  local nan, inf = 0 / 0, math.huge
  local f = tensor.new({nan, inf, -inf, 2.5, -2.5})
  h.check(f * 0, "f32", {nan, nan, nan, 0, 0})
  h.check(0 * f, "f32", {nan, nan, nan, 0, 0})
  h.check(f * 1, "f32", {nan, inf, -inf, 2.5, -2.5})
  h.check(f + 0, "f32", {nan, inf, -inf, 2.5, -2.5})
  h.check(f // 1, "f32", {nan, inf, -inf, 2, -3})
  h.check(f % 1, "f32", {nan, nan, nan, 0.5, 0.5})
  h.check(f ^ 0, "f32", {1, 1, 1, 1, 1})
  h.check(f ^ 1, "f32", {nan, inf, -inf, 2.5, -2.5})
  h.check(f - f, "f32", {nan, nan, nan, 0, 0})
  h.check(f / f, "f32", {nan, nan, nan, 1, 1})
  h.check(f:maximum(0), "f32", {nan, inf, 0, 2.5, 0})
  h.check(tensor.new({2.0, -3.0}) * 0, "f32", {0, 0})
  h.check(1 / tensor.new({2.0, 0.0}), "f32", {0.5, inf})
end)

-- Unary float ops promote ints and bools to f32, keep f64.
for _, dtype in ipairs(ORDER) do h.test("unary of " .. dtype, function()
  local want = dtype == "f64" and "f64" or "f32"
  local t = make(dtype, {1, 0})
  for _, op in ipairs({"exp", "expm1", "log1p", "sqrt", "sin", "cos", "tanh", "sigmoid",
                       "gelu"}) do
    assert(t[op](t):dtype() == want, op .. " of " .. dtype)
  end
  h.check(t:exp(), want, {math.exp(1), 1}, want == "f64" and h.F64 or h.TRANS)
  if dtype ~= "bool" then h.check(t:softmax(1), want, {math.exp(1) / (math.exp(1) + 1), 1 / (math.exp(1) + 1)},
          want == "f64" and h.F64 or h.TRANS) end
end) end

-- Reductions: sums of bool and ints are i64, mean of ints is f32.
h.test("Reductions: sums of bool and ints are i64, mean of ints i...", function()
  h.check(make("bool", {true, false, true}):sum(), "i64", 2)
  h.check(make("i32", {1, 2, 3}):sum(), "i64", 6)
  h.check(make("i64", {1, 2, 3}):sum(), "i64", 6)
  h.check(make("f32", {1, 2, 3}):sum(), "f32", 6)
  h.check(make("f64", {1, 2, 3}):sum(), "f64", 6)
  h.check(make("i32", {1, 2, 3}):prod(), "i64", 6)
  h.check(make("i32", {1, 2}):mean(), "f32", 1.5)
  h.check(make("i64", {1, 2}):mean(), "f32", 1.5)
  h.check(make("f64", {1, 2}):mean(), "f64", 1.5)
  h.check(make("i32", {1, 5, 2}):max(), "i32", 5)
  h.check(make("i32", {1, 5, 2}):min(), "i32", 1)
  h.check(make("f64", {1, 5, 2}):max(), "f64", 5)
  h.check(make("i32", {1, 2}):cumsum(1), "i64", {1, 3})
  h.check(make("bool", {true, true}):cumsum(1), "i64", {1, 2})
  h.check(make("f64", {1, 2}):cumsum(1), "f64", {1, 3})
  h.check(make("i64", {0, 3}):any(), "bool", true)
  h.check(make("f32", {0, 3}):all(), "bool", false)
end)

-- Conversions of the result keep the rules stable through chains.
h.test("Conversions of the result keep the rules stable through c...", function()
  h.check((make("i32", {1, 2}) + make("bool", {true, false})):float(), "f32", {2, 2})
  h.check(((make("i64", {4}) / 2) + 1), "f32", {3})
end)

h.done("test_promotion")
