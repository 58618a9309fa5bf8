-- test_factories.lua - factories, options, dtypes, properties, conversions.
local h = dofile("helpers.lua")

-- The module is a global and also what require returns.
h.test("The module is a global and also what require returns", function()
  assert(type(tensor) == "table")
  assert(require("tensor") == tensor)
end)

-- zeros / ones / empty: sizes as varargs or one table, options last.
h.test("zeros / ones / empty: sizes as varargs or one table, opti...", function()
  h.check(tensor.zeros(2, 3), "f32", {{0, 0, 0}, {0, 0, 0}})
  h.check(tensor.zeros({2, 3}), "f32", {{0, 0, 0}, {0, 0, 0}})
  h.check(tensor.zeros({2, 3}, {dtype = "i64"}), "i64", {{0, 0, 0}, {0, 0, 0}})
  h.check(tensor.zeros(2, 3, {dtype = "f64"}), "f64", {{0, 0, 0}, {0, 0, 0}})
  h.check(tensor.zeros(4), "f32", {0, 0, 0, 0})
  h.check(tensor.zeros(3, {dtype = "bool"}), "bool", {false, false, false})
  h.check(tensor.ones(2, 2), "f32", {{1, 1}, {1, 1}})
  h.check(tensor.ones({3}, {dtype = "i32"}), "i32", {1, 1, 1})
  h.check(tensor.ones(2, {dtype = "bool"}), "bool", {true, true})
  h.check(tensor.ones(1, 2, 1), "f32", {{{1}, {1}}})
end)
h.test("empty", function()
  local e = tensor.empty(3, 4)
  assert(e:dtype() == "f32")
  h.shape(e, {3, 4})
  local e2 = tensor.empty({2}, {dtype = "i64"})
  assert(e2:dtype() == "i64" and e2:numel() == 2)
end)
-- Zero-sized and 0-dim shapes.
h.test("Zero-sized and 0-dim shapes", function()
  local z = tensor.zeros(0)
  h.shape(z, {0})
  assert(z:numel() == 0)
  h.eq(z:tolist(), {})
  local z2 = tensor.zeros(2, 0)
  h.shape(z2, {2, 0})
  assert(z2:numel() == 0)
  local s = tensor.zeros({})
  assert(s:dim() == 0 and s:numel() == 1)
  h.eq(s:size(), {})
  assert(s:tolist() == 0)
end)

-- rand / randn: shape, dtype, options (values are checked in test_random).
h.test("rand / randn: shape, dtype, options (values are checked i...", function()
  h.shape(tensor.rand(2, 3), {2, 3})
  assert(tensor.rand(2, 3):dtype() == "f32")
  assert(tensor.rand({4}, {dtype = "f64"}):dtype() == "f64")
  h.shape(tensor.randn({3, 1}), {3, 1})
  assert(tensor.randn(5, {dtype = "f64"}):dtype() == "f64")
end)

-- full: dtype follows the value unless given.
h.test("full: dtype follows the value unless given", function()
  h.check(tensor.full({2, 3}, 7), "i64", {{7, 7, 7}, {7, 7, 7}})
  h.check(tensor.full(2, 3, 7), "i64", {{7, 7, 7}, {7, 7, 7}})
  h.check(tensor.full({2}, 1.5), "f32", {1.5, 1.5})
  h.check(tensor.full({2}, true), "bool", {true, true})
  h.check(tensor.full({2}, false), "bool", {false, false})
  h.check(tensor.full({2}, 7, {dtype = "f32"}), "f32", {7, 7})
  h.check(tensor.full({2}, 2.5, {dtype = "f64"}), "f64", {2.5, 2.5})
  h.check(tensor.full({3}, -4, {dtype = "i32"}), "i32", {-4, -4, -4})
  h.check(tensor.full({1}, math.maxinteger), "i64", {math.maxinteger})
  h.check(tensor.full({2}, -0.25), "f32", {-0.25, -0.25})
end)

-- new: nested tables, dtype from the values.
h.test("new: nested tables, dtype from the values", function()
  h.check(tensor.new({{1, 2}, {3, 4}}), "i64", {{1, 2}, {3, 4}})
  h.check(tensor.new({1, 2.5, 3}), "f32", {1, 2.5, 3})
  h.check(tensor.new({1.0, 2.0}), "f32", {1, 2})
  h.check(tensor.new({true, false}), "bool", {true, false})
  h.check(tensor.new({{1, 2}, {3, 4}}, {dtype = "f64"}), "f64", {{1, 2}, {3, 4}})
  h.check(tensor.new({1, 2}, {dtype = "i32"}), "i32", {1, 2})
  h.check(tensor.new({{{1}, {2}}, {{3}, {4}}}), "i64", {{{1}, {2}}, {{3}, {4}}})
  h.check(tensor.new({math.maxinteger, math.mininteger}), "i64",
          {math.maxinteger, math.mininteger})
  h.check(tensor.new({0.1, -2.75}), "f32", {h.f32(0.1), -2.75})
  h.check(tensor.new({0.1}, {dtype = "f64"}), "f64", {0.1})
end)
h.test("new of a plain value", function()
  local s = tensor.new(5)
  assert(s:dim() == 0 and s:dtype() == "i64")
  assert(s:tolist() == 5 and math.type(s:tolist()) == "integer")
  local f = tensor.new(2.5)
  assert(f:dim() == 0 and f:dtype() == "f32" and f:item() == 2.5)
  local b = tensor.new(true)
  assert(b:dtype() == "bool" and b:item() == true)
end)
-- tensor.new(t) copies a tensor: later writes to either do not reach the other.
h.test("tensor.new(t) copies a tensor: later writes to either do ...", function()
  local a = tensor.new({1, 2, 3})
  local b = tensor.new(a)
  assert(b:dtype() == "i64")
  b:fill_(9)
  h.check(a, "i64", {1, 2, 3})
  h.check(b, "i64", {9, 9, 9})
  a:add_(1)
  h.check(b, "i64", {9, 9, 9})
  local c = tensor.new(tensor.new({1.5, 2}), {dtype = "f64"})
  h.check(c, "f64", {1.5, 2})
end)

-- arange: stop excluded; i64 for integer arguments, else f32.
h.test("arange: stop excluded; i64 for integer arguments, else f32", function()
  h.check(tensor.arange(5), "i64", {0, 1, 2, 3, 4})
  h.check(tensor.arange(1, 4), "i64", {1, 2, 3})
  h.check(tensor.arange(0, 10, 3), "i64", {0, 3, 6, 9})
  h.check(tensor.arange(5, 0, -1), "i64", {5, 4, 3, 2, 1})
  h.check(tensor.arange(-3, 3, 2), "i64", {-3, -1, 1})
  h.check(tensor.arange(0, 1, 0.25), "f32", {0, 0.25, 0.5, 0.75})
  h.check(tensor.arange(0.5, 3), "f32", {0.5, 1.5, 2.5})
  h.check(tensor.arange(1, 2, 0.5), "f32", {1, 1.5})
  h.check(tensor.arange(3, {dtype = "f64"}), "f64", {0, 1, 2})
end)
h.test("arange edge cases", function()
  local empty = tensor.arange(0)
  h.shape(empty, {0})
  -- a length that needs ceil((stop - start) / step)
  h.check(tensor.arange(0, 1, 0.3), "f32", {0, 0.3, 0.6, 0.9}, h.F32)
end)

-- linspace: n f32 values, both ends included.
h.test("linspace: n f32 values, both ends included", function()
  h.check(tensor.linspace(0, 1, 5), "f32", {0, 0.25, 0.5, 0.75, 1})
  h.check(tensor.linspace(-1, 1, 3), "f32", {-1, 0, 1})
  h.check(tensor.linspace(2, 2, 1), "f32", {2})
  h.check(tensor.linspace(1, 0, 3), "f32", {1, 0.5, 0})
end)
h.test("linspace with 10 points", function()
  local want = {}
  for i = 0, 9 do want[#want + 1] = 3 + i * (7 - 3) / 9 end
  h.check(tensor.linspace(3, 7, 10), "f32", want, h.F32)
end)

-- eye: identity (f32), square or rectangular.
h.test("eye: identity (f32), square or rectangular", function()
  h.check(tensor.eye(3), "f32", {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}})
  h.check(tensor.eye(2, 3), "f32", {{1, 0, 0}, {0, 1, 0}})
  h.check(tensor.eye(3, 2), "f32", {{1, 0}, {0, 1}, {0, 0}})
  h.check(tensor.eye(1), "f32", {{1}})
end)

-- randint / randperm shapes and dtypes (values in test_random).
h.test("randint / randperm shapes and dtypes (values in test_random)", function()
  local r = tensor.randint(0, 10, 2, 3)
  assert(r:dtype() == "i64")
  h.shape(r, {2, 3})
  h.shape(tensor.randint(-5, 5, {4}), {4})
  local p = tensor.randperm(6)
  assert(p:dtype() == "i64")
  h.shape(p, {6})
end)

-- dtype names and aliases, in options and in :to().
h.test("dtype names and aliases, in options and in :to()", function()
  local aliases = {
    f32 = "f32", f64 = "f64", i32 = "i32", i64 = "i64", bool = "bool",
    float = "f32", double = "f64", int = "i32", long = "i64",
    float32 = "f32", float64 = "f64", int32 = "i32", int64 = "i64", boolean = "bool",
  }
  for name, canonical in pairs(aliases) do
    assert(tensor.zeros(2, {dtype = name}):dtype() == canonical, name)
    assert(tensor.ones(2):to(name):dtype() == canonical, name)
    assert(tensor.full({2}, 1, {dtype = name}):dtype() == canonical, name)
  end
end)

-- Properties.
h.test("Properties", function()
  local t = tensor.zeros(2, 3, 4)
  h.eq(t:size(), {2, 3, 4})
  assert(t:size(1) == 2 and t:size(2) == 3 and t:size(3) == 4)
  assert(t:size(-1) == 4 and t:size(-3) == 2)
  assert(math.type(t:size(1)) == "integer")
  assert(t:dim() == 3)
  assert(t:numel() == 24 and math.type(t:numel()) == "integer")
  assert(t:dtype() == "f32")
  assert(#t == 2)
  assert(#tensor.zeros(7) == 7)
  h.eq(t:stride(), {12, 4, 1})
  assert(t:is_contiguous())
  local tt = t:transpose(1, 3)
  h.eq(tt:stride(), {1, 4, 12})
  assert(not tt:is_contiguous())
  assert(tensor.zeros(5):stride()[1] == 1)
  h.eq(tensor.zeros(3):expand(2, 3):stride(), {0, 1})
end)

-- tensor.is_tensor
h.test("tensor.is_tensor", function()
  assert(tensor.is_tensor(tensor.zeros(1)) == true)
  assert(tensor.is_tensor(tensor.new(3)) == true)
  assert(tensor.is_tensor(1) == false)
  assert(tensor.is_tensor({}) == false)
  assert(tensor.is_tensor("x") == false)
  assert(tensor.is_tensor(nil) == false)
  assert(tensor.is_tensor(io.stdout) == false)
end)

-- Conversions: float -> int truncates toward zero; anything -> bool is ~= 0.
h.test("Conversions: float -> int truncates toward zero; anything...", function()
  local f = tensor.new({1.7, -1.7, 2.5, -0.5, 0, 3})
  h.check(f:long(), "i64", {1, -1, 2, 0, 0, 3})
  h.check(f:int(), "i32", {1, -1, 2, 0, 0, 3})
  h.check(f:to("i64"), "i64", {1, -1, 2, 0, 0, 3})
  h.check(f:bool(), "bool", {true, true, true, true, false, true})
  h.check(f:double(), "f64", {h.f32(1.7), h.f32(-1.7), 2.5, -0.5, 0, 3})
  h.check(f:float(), "f32", {h.f32(1.7), h.f32(-1.7), 2.5, -0.5, 0, 3})
  local i = tensor.new({0, 1, -2, 100000})
  h.check(i:float(), "f32", {0, 1, -2, 100000})
  h.check(i:double(), "f64", {0, 1, -2, 100000})
  h.check(i:int(), "i32", {0, 1, -2, 100000})
  h.check(i:bool(), "bool", {false, true, true, true})
  h.check(i:to("f64"), "f64", {0, 1, -2, 100000})
  local b = tensor.new({true, false})
  h.check(b:float(), "f32", {1, 0})
  h.check(b:long(), "i64", {1, 0})
  h.check(b:int(), "i32", {1, 0})
  h.check(b:double(), "f64", {1, 0})
  h.check(tensor.new({2 ^ 40 + 1}, {dtype = "f64"}):long(), "i64", {(1 << 40) + 1})
  -- A large i64 goes through f64 exactly when it fits in 53 bits.
  h.check(tensor.new({(1 << 52) + 3}):double(), "f64", {2.0 ^ 52 + 3})
  -- Converting to the same dtype keeps the values.
  h.check(tensor.new({1, 2}):long(), "i64", {1, 2})
  -- clone is an independent copy.
  local a = tensor.new({{1, 2}, {3, 4}})
  local c = a:clone()
  h.check(c, "i64", {{1, 2}, {3, 4}})
  c:fill_(0)
  h.check(a, "i64", {{1, 2}, {3, 4}})
  -- contiguous of a transposed tensor: contiguous layout, same values.
  local t = a:t():contiguous()
  assert(t:is_contiguous())
  h.eq(t:stride(), {2, 1})
  h.check(t, "i64", {{1, 3}, {2, 4}})
  local f64 = tensor.new({{1, 2}, {3, 4}}, {dtype = "f64"}):t():clone()
  h.check(f64, "f64", {{1, 3}, {2, 4}})
end)

-- item and tolist.
h.test("item and tolist", function()
  local i = tensor.new({42})
  assert(i:item() == 42 and math.type(i:item()) == "integer")
  local f = tensor.new({{2.5}})
  assert(f:item() == 2.5 and math.type(f:item()) == "float")
  assert(tensor.new({1}, {dtype = "f32"}):item() == 1.0)
  assert(math.type(tensor.new({1}, {dtype = "f32"}):item()) == "float")
  assert(math.type(tensor.new({1}, {dtype = "i32"}):item()) == "integer")
  assert(tensor.new({true}):item() == true)
  assert(tensor.new({false}):item() == false)
  assert(tensor.new(7):item() == 7)
  assert(tensor.new({math.mininteger}):item() == math.mininteger)
  local l = tensor.new({{1, 2, 3}, {4, 5, 6}}):tolist()
  h.eq(l, {{1, 2, 3}, {4, 5, 6}})
  assert(math.type(l[2][3]) == "integer")
  assert(type(tensor.new({true}):tolist()[1]) == "boolean")
  assert(tensor.new(3.5):tolist() == 3.5)
  -- tolist gives fresh tables each time.
  local t = tensor.new({1, 2})
  local l1 = t:tolist()
  l1[1] = 100
  h.eq(t:tolist(), {1, 2})
end)

-- Every method is also a module function.
h.test("Every method is also a module function", function()
  h.check(tensor.clone(tensor.new({1, 2})), "i64", {1, 2})
  h.check(tensor.to(tensor.new({1, 2}), "f64"), "f64", {1, 2})
  assert(tensor.numel(tensor.zeros(2, 5)) == 10)
  assert(tensor.dim(tensor.zeros(2, 5)) == 2)
  assert(tensor.dtype(tensor.zeros(2, {dtype = "i32"})) == "i32")
end)

-- <close> variables: closing releases a tensor; results computed from it
-- before it was closed stay valid.
h.test("<close> variables: closing releases a tensor; results com...", function()
  local s
  do
    local t <close> = tensor.ones(3)
    s = t:sum()
    local u <close> = t * 2
    assert(u:sum():item() == 6)
  end
  assert(s:item() == 3)
  for _ = 1, 20 do
    local a <close> = tensor.rand(10)
    local b <close> = a + 1
    assert(b:numel() == 10)
  end
  collectgarbage()
  assert(tensor.ones(2):sum():item() == 2)
end)

h.done("test_factories")
