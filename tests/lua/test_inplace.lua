-- test_inplace.lua - add_ sub_ mul_ div_ clamp_ fill_ zero_ copy_, the unary
-- in-place ops, t[i] = v: results, broadcasting, dtype conversion and
-- refusal, that each returns self, and in-place ops through views.
local h = dofile("helpers.lua")

local inf = math.huge

-- Binary in-place ops with tensors (broadcast) and numbers; each returns t.
h.test("Binary in-place ops with tensors (broadcast) and numbers;...", function()
  local cases = {
    {"add_", function(a, b) return a + b end},
    {"sub_", function(a, b) return a - b end},
    {"mul_", function(a, b) return a * b end},
    {"div_", function(a, b) return a / b end},
  }
  local X = {{1.5, -2, 3.25}, {0.5, 4, -1.75}}
  local ROW = {2, -0.5, 4}
  for _, case in ipairs(cases) do
    local name, ref = case[1], case[2]
    local t = tensor.new(X)
    local r = t[name](t, tensor.new(ROW))
    assert(rawequal(r, t), name .. " returns self")
    h.check(t, "f32", h.bmap(X, ROW, ref), h.F32)
    t = tensor.new(X)
    assert(rawequal(t[name](t, 2.5), t))
    h.check(t, "f32", h.bmap(X, 2.5, ref), h.F32)
    t = tensor.new(X)
    t[name](t, 3)
    h.check(t, "f32", h.bmap(X, 3, ref), h.F32)
    -- same shape, and a 0-dim tensor operand
    t = tensor.new(X)
    t[name](t, tensor.new(X))
    h.check(t, "f32", h.bmap(X, X, ref), h.F32)
    t = tensor.new(X)
    t[name](t, tensor.new(2.0))
    h.check(t, "f32", h.bmap(X, 2.0, ref), h.F32)
    -- an integer tensor operand is converted (the result type is t's: f32)
    t = tensor.new(X)
    t[name](t, tensor.new({1, 2, 4}))
    h.check(t, "f32", h.bmap(X, {1, 2, 4}, ref), h.F32)
    -- f64 target
    t = tensor.new(X, {dtype = "f64"})
    t[name](t, tensor.new(ROW))
    h.check(t, "f64", h.bmap(X, ROW, ref), h.F64)
    -- chained: each returns self
    t = tensor.new(X)
    t[name](t[name](t, 1), 1)
    h.check(t, "f32", h.bmap(h.bmap(X, 1, ref), 1, ref), h.F32)
  end
end)

-- Integer targets: integer operands keep i64 (wrapping), numbers too.
h.test("Integer targets: integer operands keep i64 (wrapping), nu...", function()
  local t = tensor.new({1, 2, 3})
  assert(rawequal(t:add_(10), t))
  h.check(t, "i64", {11, 12, 13})
  t:sub_(tensor.new({1, 1, 1}))
  h.check(t, "i64", {10, 11, 12})
  t:mul_(-2)
  h.check(t, "i64", {-20, -22, -24})
  t:add_(tensor.new({true, false, true}))
  h.check(t, "i64", {-19, -22, -23})
  local w = tensor.new({math.maxinteger})
  w:add_(1)
  h.check(w, "i64", {math.mininteger})
  local i32 = tensor.new({1, 2}, {dtype = "i32"})
  i32:add_(tensor.new({5, 5}))      -- i64 operand into i32: PyTorch allows (same kind)
  h.check(i32, "i32", {6, 7})
  i32:mul_(3)
  h.check(i32, "i32", {18, 21})
end)

-- clamp_, fill_, zero_.
h.test("clamp_, fill_, zero_", function()
  local t = tensor.new({-3, -0.5, 0.25, 2, 9})
  assert(rawequal(t:clamp_(-1, 1), t))
  h.check(t, "f32", {-1, -0.5, 0.25, 1, 1})
  t = tensor.new({-3, -0.5, 0.25, 2, 9})
  t:clamp_(0)
  h.check(t, "f32", {0, 0, 0.25, 2, 9})
  t = tensor.new({-3, -0.5, 0.25, 2, 9})
  t:clamp_(nil, 0)
  h.check(t, "f32", {-3, -0.5, 0, 0, 0})
  local i = tensor.new({-5, 5, 50})
  i:clamp_(0, 10)
  h.check(i, "i64", {0, 5, 10})

  local f = tensor.zeros(2, 2)
  assert(rawequal(f:fill_(2.5), f))
  h.check(f, "f32", {{2.5, 2.5}, {2.5, 2.5}})
  f:fill_(-inf)
  h.check(f, "f32", {{-inf, -inf}, {-inf, -inf}})
  assert(rawequal(f:zero_(), f))
  h.check(f, "f32", {{0, 0}, {0, 0}})
  local b = tensor.zeros(3, {dtype = "bool"})
  b:fill_(true)
  h.check(b, "bool", {true, true, true})
  b:fill_(false)
  h.check(b, "bool", {false, false, false})
  local l = tensor.zeros(2, {dtype = "i64"})
  l:fill_(math.maxinteger)
  h.check(l, "i64", {math.maxinteger, math.maxinteger})
  l:fill_(-4)
  h.check(l, "i64", {-4, -4})
  l:zero_()
  h.check(l, "i64", {0, 0})
end)

-- copy_: broadcasts, converts any dtype, returns self.
h.test("copy_: broadcasts, converts any dtype, returns self", function()
  local t = tensor.zeros(2, 3)
  assert(rawequal(t:copy_(tensor.new({{1, 2, 3}, {4, 5, 6}})), t))
  h.check(t, "f32", {{1, 2, 3}, {4, 5, 6}})
  t:copy_(tensor.new({7.5, 8, 9}))                        -- [3] broadcasts to [2, 3]
  h.check(t, "f32", {{7.5, 8, 9}, {7.5, 8, 9}})
  t:copy_(tensor.new({{1}, {2}}))
  h.check(t, "f32", {{1, 1, 1}, {2, 2, 2}})
  t:copy_(tensor.new(4))
  h.check(t, "f32", {{4, 4, 4}, {4, 4, 4}})
  local i = tensor.zeros(3, {dtype = "i64"})
  i:copy_(tensor.new({1.9, -1.9, 2.5}))                   -- float -> int truncates
  h.check(i, "i64", {1, -1, 2})
  local b = tensor.zeros(3, {dtype = "bool"})
  b:copy_(tensor.new({0, 3, -1}))                         -- anything -> bool: ~= 0
  h.check(b, "bool", {false, true, true})
  local d = tensor.zeros(2, {dtype = "f64"})
  d:copy_(tensor.new({true, false}))
  h.check(d, "f64", {1, 0})
  -- from a non-contiguous source into a non-contiguous target
  local m = tensor.zeros(3, 2)
  m:t():copy_(tensor.new({{1, 2, 3}, {4, 5, 6}}))
  h.check(m, "f32", {{1, 4}, {2, 5}, {3, 6}})
  local src = tensor.new({{1, 2}, {3, 4}})
  local dst = tensor.zeros(2, 2, {dtype = "i64"})
  dst:copy_(src:t())
  h.check(dst, "i64", {{1, 3}, {2, 4}})
  -- a copy from itself transposed reads the old values (no aliasing surprise)
  local sq = tensor.new({{1, 2}, {3, 4}})
  sq:copy_(sq:t():clone())
  h.check(sq, "i64", {{1, 3}, {2, 4}})
end)

-- Unary in-place ops: values, self returned.
h.test("Unary in-place ops: values, self returned", function()
  local X = {0.25, 0.5, 1, 2.5}
  local N = {-2, -0.5, 0, 1.5}
  local cases = {
    {"exp_", X, math.exp, h.TRANS},
    {"log_", X, math.log, h.TRANS},
    {"sqrt_", X, math.sqrt, h.F32},
    {"tanh_", N, h.tanh, h.TRANS},
    {"sigmoid_", N, h.sigmoid, h.TRANS},
    {"relu_", N, function(x) return math.max(x, 0) end, h.F32},
    {"abs_", N, math.abs, h.F32},
    {"neg_", N, function(x) return -x end, h.F32},
  }
  for _, case in ipairs(cases) do
    local name, input, ref, tol = case[1], case[2], case[3], case[4]
    local t = tensor.new(input, {dtype = "f32"})
    local r = t[name](t)
    assert(rawequal(r, t), name .. " returns self")
    h.check(t, "f32", h.map(input, ref), tol)
    local d = tensor.new(input, {dtype = "f64"})
    d[name](d)
    h.check(d, "f64", h.map(input, ref), {rel = 1e-10, abs = 1e-12})
  end
  -- integer abs_/neg_ stay integer
  local i = tensor.new({-3, 4})
  i:abs_()
  h.check(i, "i64", {3, 4})
  i:neg_()
  h.check(i, "i64", {-3, -4})
end)

-- t[i] = v: a number or a tensor (broadcast to the row); negative i.
h.test("t[i] = v: a number or a tensor (broadcast to the row); ne...", function()
  local t = tensor.zeros(3, 2)
  t[1] = 5
  t[-1] = tensor.new({1, 2})
  t[2] = tensor.new(7.5)
  h.check(t, "f32", {{5, 5}, {7.5, 7.5}, {1, 2}})
  t[2] = tensor.new({3, 4})
  h.check(t, "f32", {{5, 5}, {3, 4}, {1, 2}})
  -- leading unit extents of the value are ignored, as in PyTorch
  t[2] = tensor.new({{6, 7}})
  h.check(t, "f32", {{5, 5}, {6, 7}, {1, 2}})
  local v = tensor.new({1, 2, 3})
  v[2] = 20
  v[-1] = -3
  h.check(v, "i64", {1, 20, -3})
  v[1] = tensor.new(4)
  v[3] = tensor.new({5})
  h.check(v, "i64", {4, 20, 5})
  local b = tensor.new({true, true})
  b[2] = false
  h.check(b, "bool", {true, false})
  -- assignment into a 3-D tensor sets a whole slice
  local x = tensor.zeros(2, 2, 2)
  x[2] = tensor.new({{1, 2}, {3, 4}})
  h.check(x, "f32", {{{0, 0}, {0, 0}}, {{1, 2}, {3, 4}}})
  x[1] = tensor.new({9, 8})
  h.check(x, "f32", {{{9, 8}, {9, 8}}, {{1, 2}, {3, 4}}})
end)

-- In-place through views (a few; test_views has the chains).
h.test("In-place through views (a few; test_views has the chains)", function()
  local t = tensor.new({{1, 2, 3}, {4, 5, 6}}, {dtype = "f32"})
  t:narrow(2, 1, 2):mul_(10)
  h.check(t, "f32", {{10, 20, 3}, {40, 50, 6}})
  t:select(1, 2):sub_(tensor.new({40, 50, 6}))
  h.check(t, "f32", {{10, 20, 3}, {0, 0, 0}})
  t:t():div_(tensor.new({10, 10}))                -- divides every column entry by 10
  h.check(t, "f32", {{1, 2, 0.3}, {0, 0, 0}}, h.F32)
  t[1]:clamp_(1.5, 2.5)
  h.check(t, "f32", {{1.5, 2, 1.5}, {0, 0, 0}})
  t:t()[2]:exp_()
  h.check(t, "f32", {{1.5, math.exp(2), 1.5}, {0, 1, 0}}, h.TRANS)
  t:view(6):narrow(1, 4, 3):copy_(tensor.new({7, 8, 9}))
  h.check(t, "f32", {{1.5, math.exp(2), 1.5}, {7, 8, 9}}, h.TRANS)
  t:transpose(1, 2)[3][2] = -1
  h.check(t, "f32", {{1.5, math.exp(2), 1.5}, {7, 8, -1}}, h.TRANS)
  t:narrow(1, 2, 1):relu_()
  h.check(t, "f32", {{1.5, math.exp(2), 1.5}, {7, 8, 0}}, h.TRANS)
  -- an in-place op on a view is seen by the base and by other views
  local x = tensor.zeros(4)
  local a, b = x:narrow(1, 1, 3), x:narrow(1, 2, 3)
  a:add_(1)
  b:add_(1)
  h.check(x, "f32", {1, 2, 2, 1})
  h.check(a, "f32", {1, 2, 2})
end)

-- An in-place op reads the old value of its own target only once:
-- t:add_(t) doubles, t:mul_(t) squares, t:copy_(t) is a no-op.
h.test("An in-place op reads the old value of its own target only...", function()
  local t = tensor.new({1, 2, 3})
  t:add_(t)
  h.check(t, "i64", {2, 4, 6})
  t:mul_(t)
  h.check(t, "i64", {4, 16, 36})
  t:copy_(t)
  h.check(t, "i64", {4, 16, 36})
  -- a tensor computed from t before an in-place update keeps the old value
  local before = t + 0
  local kept = t * 1
  t:fill_(0)
  h.check(before, "i64", {4, 16, 36})
  h.check(kept, "i64", {4, 16, 36})
  h.check(t, "i64", {0, 0, 0})
end)

-- A result type that does not fit the target is an error; the target is
-- left unchanged.
h.test("A result type that does not fit the target is an error; t...", function()
  local i = tensor.new({1, 2})
  h.err(function() i:add_(1.5) end)
  h.err(function() i:div_(2) end)
  h.err(function() i:mul_(tensor.new({0.5, 0.5})) end)
  h.err(function() i:exp_() end)
  h.err(function() i:sqrt_() end)
  h.check(i, "i64", {1, 2})
  local b = tensor.new({true, false})
  h.err(function() b:add_(1) end)
  h.check(b, "bool", {true, false})
  -- f32 into f32 after an error still works
  local f = tensor.new({1.0})
  f:add_(1)
  h.check(f, "f32", {2})
end)

h.done("test_inplace")
