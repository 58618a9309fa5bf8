-- test_errors.lua - bad input gives a clear Lua error (never a crash or an
-- out-of-memory kill), the message names what went wrong, it carries the Lua
-- position, and the interpreter keeps working afterwards.
--
-- Every failing call is written as a statement inside a closure (not a
-- `return f()` tail call), so the error position is this file's line.
local h = dofile("helpers.lua")

-- Each bad call is its own group, followed by a computation that must
-- still work (h.recovered counts them).
local bad, bad_any, still_works = h.bad, h.bad_any, h.still_works

local x23 = tensor.zeros(2, 3)
local x4 = tensor.zeros(4)

-- The Lua position of the failing line is in the message.
h.test("error positions", function()
  local line = debug.getinfo(1, "l").currentline + 1
  local ok, msg = pcall(function() local _ = x23 + x4 end)
  assert(not ok)
  assert(msg:find("test_errors.lua:" .. line .. ":", 1, true), msg)
  line = debug.getinfo(1, "l").currentline + 1
  ok, msg = pcall(function() tensor.zeros(-1) end)
  assert(not ok)
  assert(msg:find("test_errors.lua:" .. line .. ":", 1, true), msg)
  line = debug.getinfo(1, "l").currentline + 1
  ok, msg = pcall(function() x23:sum(5) end)
  assert(not ok)
  assert(msg:find("test_errors.lua:" .. line .. ":", 1, true), msg)
  line = debug.getinfo(1, "l").currentline + 1
  ok, msg = pcall(function() x23:matmul(x4) end)
  assert(not ok)
  assert(msg:find("test_errors.lua:" .. line .. ":", 1, true), msg)
  -- and error() with a level-2 position from a user function works as usual
  still_works()
end)

-- Shapes that do not broadcast: the op and both shapes are named.
bad(function() local _ = x23 + x4 end, "[2, 3]", "[4]", "broadcast")
bad(function() local _ = x23:add(x4) end, "add", "[2, 3]", "[4]")
bad(function() local _ = x23:sub(x4) end, "sub", "[2, 3]", "[4]")
bad(function() local _ = x23 * x4 end, "[2, 3]", "[4]")
bad(function() local _ = x23:mul(x4) end, "mul", "[2, 3]", "[4]")
bad(function() local _ = x23:div(x4) end, "div", "[2, 3]", "[4]")
bad(function() local _ = x4 - x23 end, "[4]", "[2, 3]")
bad(function() local _ = x23 ^ x4 end, "[2, 3]", "[4]")
bad(function() local _ = x23:maximum(x4) end, "maximum", "[2, 3]", "[4]")
bad(function() local _ = x23:lt(x4) end, "lt", "[2, 3]", "[4]")
bad(function() local _ = x23:eq(x4) end, "eq", "[2, 3]", "[4]")
bad(function() local _ = x23:logical_and(x4) end, "logical_and", "[2, 3]", "[4]")
bad(function() local _ = tensor.where(x23:gt(0), x23, x4) end, "where", "[2, 3]", "[4]")
bad(function() local _ = tensor.zeros(2, 3, 4) + tensor.zeros(3, 3) end, "[2, 3, 4]", "[3, 3]")
bad(function() x23:add_(x4) end, "[2, 3]", "[4]")
-- in place: the operand must broadcast to the target (the target cannot grow)
bad(function() x4:add_(tensor.zeros(2, 4)) end, "[4]", "[2, 4]")

-- matmul shape mismatches name matmul and the shapes.
bad(function() local _ = x23:matmul(tensor.zeros(4, 5)) end, "matmul", "[2, 3]", "[4, 5]")
bad(function() local _ = tensor.matmul(x4, tensor.zeros(3)) end, "matmul", "[4]", "[3]")
bad(function() local _ = tensor.zeros(2, 2, 3):matmul(tensor.zeros(3, 2, 2)) end, "matmul")
bad(function() local _ = tensor.zeros(3, 2, 3):matmul(tensor.zeros(2, 3, 2)) end, "matmul")
bad(function() local _ = tensor.new(2.0):matmul(x4) end, "matmul")

-- Dimensions and indices out of range.
bad(function() x23:sum(3) end, "dimension", "3")
bad(function() x23:sum(0) end, "dimension", "0")
bad(function() x23:sum(-3) end, "dimension", "-3")
bad(function() x23:mean(5) end, "dimension")
bad(function() x23:max(3) end, "dimension")
bad(function() x23:argmax(3) end, "dimension")
bad(function() x23:softmax(3) end, "dimension")
bad(function() x23:cumsum(0) end, "dimension")
bad(function() x23:transpose(1, 3) end, "dimension", "3")
bad(function() x23:size(3) end, "3")
bad(function() x23:select(3, 1) end, "dimension")
bad(function() x23:select(1, 3) end, "index", "3")
bad(function() x23:select(1, 0) end, "index", "0")
bad(function() x23:select(2, -4) end, "index", "-4")
bad(function() local _ = x23[3] end, "index", "3")
bad(function() local _ = x23[0] end, "index", "0")
bad(function() local _ = x23[-3] end, "index")
bad(function() local _ = x23[{1, 4}] end, "index", "4")
bad(function() local _ = x23[{1, 2, 1}] end)             -- too many indices
bad(function() x23[3] = 1 end, "index", "3")
bad(function() x23:narrow(2, 3, 2) end, "narrow")
bad(function() x23:narrow(2, 0, 1) end, "narrow")
bad(function() x23:narrow(3, 1, 1) end, "dimension")
bad(function() x23:narrow(1, 1, -1) end, "narrow")
bad(function() x23:unsqueeze(4) end, "dimension")
bad(function() x23:squeeze(3) end, "dimension")
bad(function() x23:permute(1, 1) end, "permute")
bad(function() x23:permute(1) end, "permute")
bad(function() x23:permute(1, 3) end, "permute")
bad(function() x23:flatten(2, 1) end, "flatten")
bad(function() x23:flatten(1, 3) end, "dimension")
bad(function() tensor.cat({x23, x23}, 3) end, "dimension")
bad(function() tensor.stack({x4, x4}, 3) end, "dimension")
bad(function() x23:gather(3, tensor.new({{1}})) end, "dimension")
bad(function() x23:index_select(3, tensor.new({1})) end, "dimension")
-- positions held in index tensors (checked when the data is known)
bad(function() x23:index_select(1, tensor.new({1, 3})):tolist() end, "index")
bad(function() x23:index_select(2, tensor.new({0})):tolist() end, "index")
bad(function() x23:gather(2, tensor.new({{1, 4}, {1, 1}})):tolist() end, "index")
bad(function() tensor.new({1, 2}):gather(1, tensor.new({0})):tolist() end, "index")
-- the index must be an integer tensor
bad(function() x23:index_select(1, tensor.new({1.0})) end, "index_select")
bad(function() x23:gather(1, tensor.new({{1.0, 1.0, 1.0}})) end, "gather")
bad(function() x23:index_select(1, tensor.new({{1}})) end, "index_select")

-- #t and t() on the wrong rank.
bad(function() local _ = #tensor.new(3) end)
bad(function() tensor.zeros(2, 3, 4):t() end)
bad(function() tensor.new(1.5):transpose(1, 2) end, "dimension")

-- Unknown dtypes.
bad(function() tensor.zeros(2, {dtype = "f16"}) end, "f16")
bad(function() tensor.ones(2):to("complex") end, "complex")
bad(function() tensor.new({1, 2}, {dtype = "uint8"}) end, "uint8")
bad(function() tensor.full({2}, 1, {dtype = "F32"}) end, "F32")
bad(function() tensor.zeros(2, {dtype = 32}) end)

-- Negative sizes, absurd sizes (an error, not an out-of-memory kill).
bad(function() tensor.zeros(-1) end, "negative", "-1")
bad(function() tensor.zeros(2, -3) end, "negative", "-3")
bad(function() tensor.ones({-2}) end, "negative")
bad(function() tensor.empty(-5) end, "negative")
bad(function() tensor.rand(3, -1) end, "negative")
bad(function() tensor.full({-1}, 0) end, "negative")
bad(function() tensor.zeros(1e15) end)
bad(function() tensor.zeros(1000000, 1000000, 1000) end)
bad(function() tensor.ones(1 << 62) end)
bad(function() tensor.empty(1 << 40, 1 << 40) end)                 -- overflows int64
bad(function() tensor.rand(1e15) end)
bad(function() tensor.randn(1000000, 1000000, 1000) end)
bad(function() tensor.full({1e15}, 1) end)
bad(function() tensor.arange(0, 1e15) end)
bad(function() tensor.arange(0, 10, 0) end)
bad(function() tensor.linspace(0, 1, -1) end)
bad(function() tensor.eye(-1) end)
bad(function() tensor.randperm(-1) end)
bad(function() tensor.zeros(1, 1, 1, 1, 1, 1, 1, 1, 1) end, "8")     -- 9 dims
bad(function() tensor.zeros(2.5) end)                                -- non-integer size
bad(function() tensor.randint(5, 5, 3) end)                          -- empty range
bad(function() tensor.randint(5, 2, 3) end)

-- Wrong types.
bad(function() tensor.zeros("x") end)
bad(function() tensor.zeros({2, "x"}) end)
bad(function() tensor.zeros(true) end)
bad(function() tensor.zeros(2, {dtype = "f32"}, 3) end)
bad(function() x23:add({}) end)
bad(function() x23:add("a") end)
bad(function() local _ = x23 + {} end)
bad(function() local _ = x23 * "abc" end)
bad(function() local _ = {} - x23 end)
bad(function() x23:sum("x") end)
bad(function() x23:reshape("a") end)
bad(function() x23:reshape({2, "a"}) end)
bad(function() x23:to(5) end)
bad(function() x23:fill_("x") end)
bad(function() x23:fill_({}) end)
bad(function() x23:clamp("a", 1) end)
bad(function() x23:narrow("a", 1, 1) end)
bad(function() x23:select(1, 1.5) end)
bad(function() local _ = x23[1.5] end)
bad(function() x23[1] = "x" end)
bad(function() x23[1] = {} end)
bad(function() x23:matmul(5) end)
bad(function() tensor.cat(x23) end)
bad(function() tensor.cat({x23, 5}) end)
bad(function() tensor.cat({}) end)
bad(function() tensor.stack({}) end)
bad(function() tensor.manual_seed("x") end)
bad(function() tensor.new("abc") end)
bad(function() tensor.new({1, "a"}) end)
bad(function() tensor.new({1, {}}) end)
bad(function() tensor.new({print}) end)
bad(function() tensor.new(nil) end)
bad(function() tensor.exp("x") end)
bad(function() tensor.sum(5) end)
bad(function() tensor.matmul(x23, nil) end)
-- calling a method on something that is not a tensor
bad(function() x23.sum({}) end)
bad(function() x23.tolist("x") end)
-- an unknown method is Lua's usual error
bad(function() x23:no_such_method() end, "no_such_method")

-- Wrong arity.
bad(function() x23:narrow(1) end)
bad(function() x23:narrow(1, 1) end)
bad(function() x23:select(1) end)
bad(function() x23:transpose(1) end)
bad(function() x23:add() end)
bad(function() x23:gather(1) end)
bad(function() x23:index_select(1) end)
bad(function() x23:expand() end)
bad(function() tensor.full({2}) end)
bad(function() tensor.cat() end)
bad(function() tensor.where(x23:gt(0), x23) end)
bad(function() tensor.arange() end)
bad(function() tensor.linspace(0, 1) end)
bad(function() tensor.randint(0) end)
bad(function() tensor.matmul(x23) end)
bad(function() x23:to() end)

-- copy_ from a shape that does not broadcast to the target.
bad(function() x23:copy_(tensor.zeros(4)) end, "[2, 3]", "[4]")
bad(function() x23:copy_(tensor.zeros(3, 3)) end, "[2, 3]", "[3, 3]")
bad(function() x4:copy_(tensor.zeros(2, 4)) end, "[4]", "[2, 4]")
bad(function() x23[1] = tensor.zeros(2) end)

-- view of a non-viewable layout, bad reshape sizes.
bad(function() x23:t():view(6) end, "view")
bad(function() x23:t():view(-1) end, "view")
bad(function() x23:reshape(4, 4) end, "[4, 4]")
bad(function() x23:reshape(4, -1) end)
bad(function() x23:view(5) end, "view")
bad(function() x23:reshape(-1, -1) end)
bad(function() x23:reshape(-2, -3) end)
bad(function() x23:expand(4, 3) end, "expand")
bad(function() x23:expand(3) end, "expand")
bad(function() x23:expand_as(x4) end)

-- item of a multi-element tensor; Lua comparisons on more than one element.
bad(function() x23:item() end, "item")
bad(function() tensor.zeros(0):item() end, "item")
bad(function() local _ = x23 < x23 end)
bad(function() local _ = x4 <= 1 end)
bad(function() local _ = 1 < x4 end)

-- Ragged and malformed nested tables.
bad(function() tensor.new({{1, 2}, {3}}) end)
bad(function() tensor.new({{1, 2}, 3}) end)
bad(function() tensor.new({1, {2}}) end)
bad(function() tensor.new({{{1}, {2}}, {{3}, {4, 5}}}) end)

-- cat / stack with mismatched inputs.
bad(function() tensor.cat({x23, tensor.zeros(2, 4)}, 1) end, "cat")
bad(function() tensor.cat({x23, x4}) end, "cat")
bad(function() tensor.stack({x4, tensor.zeros(3)}) end, "stack")
bad(function() tensor.stack({x23, x23:t()}) end, "stack")

-- Integer division and remainder by zero (checked when the data is known).
-- (Lua's own messages: "attempt to perform 'n//0'" and "... 'n%0'")
local DIV0 = {"n//0", "zero", "by 0"}
local MOD0 = {"n%0", "zero", "by 0"}
bad_any(function() (tensor.new({1, 2}) // 0):tolist() end, DIV0)
bad_any(function() (tensor.new({1, 2}) % 0):tolist() end, MOD0)
bad_any(function() (tensor.new({1, 2}) // tensor.new({1, 0})):tolist() end, DIV0)
bad_any(function() (tensor.new({1, 2}) % tensor.new({0, 1})):tolist() end, MOD0)
bad_any(function() tensor.new({5}, {dtype = "i32"}):floor_divide(0):tolist() end, DIV0)
bad_any(function() tensor.new({5}):remainder(tensor.new({0})):tolist() end, MOD0)
-- integer to a negative integer power (PyTorch refuses it too)
bad(function() (tensor.new({2, 3}) ^ -1):tolist() end)

-- In place: a result type that does not fit the target.
bad(function() tensor.new({1, 2}):add_(0.5) end)
bad(function() tensor.new({1, 2}):div_(2) end)
bad(function() tensor.new({1, 2}):exp_() end)
bad(function() tensor.new({true}):add_(1) end)
-- several elements of an expanded view share one memory location: an
-- in-place op on it would update that location more than once (PyTorch
-- refuses it too)
bad(function() tensor.zeros(3):expand(2, 3):add_(1) end)
bad(function() tensor.zeros(1):expand(4):mul_(tensor.new({1, 2, 3, 4})) end)

-- Errors inside deeper Lua code still unwind cleanly and leave tensors usable.
h.test("errors in deeper code", function()
  local function deep(n)
    if n == 0 then
      local _ = tensor.zeros(2) + tensor.zeros(3)
    end
    deep(n - 1)
  end
  for _ = 1, 50 do
    local ok, msg = pcall(deep, 20)
    assert(not ok and msg:find("[2]", 1, true) and msg:find("[3]", 1, true), msg)
  end
  still_works()
  -- many errors in a loop do not leak or crash
  for i = 1, 200 do
    local ok = pcall(function() tensor.zeros(i):reshape(i + 1) end)
    assert(not ok)
  end
  still_works()
  -- error objects from a coroutine
  local co = coroutine.create(function() local _ = tensor.zeros(2):item() end)
  local ok, msg = coroutine.resume(co)
  assert(not ok and msg:find("item", 1, true), msg)
  still_works()
  -- an error while a tensor is held by a <close> variable
  local ok2 = pcall(function()
    local t <close> = tensor.ones(3)
    local _ = t + tensor.ones(4)
  end)
  assert(not ok2)
  still_works()
end)

assert(h.recovered >= 190 or h.failures > 0, "only " .. h.recovered .. " error checks ran")
h.done("test_errors")
