-- test_silent_results.lua - inputs that once gave a silently wrong result
-- and now give the right one or a clear error (and leave the process
-- usable): integer numbers beyond i32 against i32 tensors, booleans in
-- arithmetic, index_add with a narrower src, CSV integers beyond i32 or
-- 2^53, a DataLoader batch larger than the data, NaN clamp bounds, NaN or
-- infinite floats converted to integers.
local h = dofile("helpers.lua")
local data = require "data"

h.test("an integer beyond i32 against an i32 tensor is an error, not a wrapped value", function()
  local t = tensor.new({3, -7}, {dtype = "i32"})
  h.err(function() return t:lt(math.maxinteger):tolist() end,
    "lt: 9223372036854775807 does not fit in i32")
  h.err(function() return (t + 2147483648):tolist() end, "add: 2147483648 does not fit in i32")
  h.err(function() return (-2147483649 - t):tolist() end, "sub: -2147483649 does not fit in i32")
  h.err(function() t:mul_(1 << 40) end, "mul: 1099511627776 does not fit in i32")
  -- In range, and beyond it through i64 or a float, all as before.
  h.eq((t + 2147483647 - 2147483647):tolist(), {3, -7})
  h.eq(t:long():lt(math.maxinteger):tolist(), {true, true})
  h.eq(t:lt(1e300):tolist(), {true, true})
  h.eq(t:tolist(), {3, -7})
end)

h.test("a boolean in arithmetic is an error, as in Lua; comparisons take it", function()
  local t = tensor.new({1, 2})
  h.err(function() return t + true end, "bad argument #2 to 'add' (number or tensor expected, got boolean)")
  h.err(function() return false * t end, "bad argument #1 to 'mul'")
  h.err(function() t:add_(true) end, "add")
  h.eq(tensor.new({true, false}):eq(true):tolist(), {true, false})
  h.eq((t + 1):tolist(), {2, 3})
end)

h.test("index_add's src must match the tensor outside the indexed dim", function()
  local t = tensor.zeros(3, 4)
  h.err(function() t:index_add(1, tensor.new({1, 3}), tensor.ones(2, 2)) end,
    "index_add: src must be [2, 4]", "got [2, 2]")
  h.eq(t:index_add(1, tensor.new({1, 3}), tensor.ones(2, 4)):sum(2):tolist(), {4, 0, 4})
end)

h.test("CSV integers: beyond i32 an error, beyond 2^53 exact in i64", function()
  local path = os.tmpname()
  local file = assert(io.open(path, "w"))
  file:write("a,b\n1,3000000000\n9007199254740993,-2\n")
  file:close()
  h.err(function() data.read_csv(path, {header = true, dtype = "i32"}) end,
    "line 2, column 2: '3000000000' is not an integer in the range of i32")
  local t = data.read_csv(path, {header = true, dtype = "i64"})
  h.eq(t:tolist(), {{1, 3000000000}, {9007199254740993, -2}})
  os.remove(path)
end)

h.test("a DataLoader batch larger than the data gives one short batch", function()
  local x = tensor.arange(5)
  for _, size in ipairs({5, 7, math.maxinteger}) do
    local loader = data.DataLoader({x}, {batch_size = size, progress = false})
    local batches = {}
    for b in loader:iter() do batches[#batches + 1] = b:tolist() end
    h.eq(batches, {{0, 1, 2, 3, 4}}, nil)
  end
  local dropped = data.DataLoader({x}, {batch_size = math.maxinteger, drop_last = true, progress = false})
  local count = 0
  for _ in dropped:iter() do count = count + 1 end
  assert(count == 0, "drop_last kept a short batch")
end)

h.test("a NaN clamp bound makes float results NaN; integer tensors refuse it", function()
  local nan = 0 / 0
  local x = tensor.new({1.5, -3, 7})
  for _, got in ipairs({x:clamp(nan, 2), x:clamp(0, nan), x:clamp(nan)}) do
    for _, v in ipairs(got:tolist()) do assert(v ~= v, "expected NaN, got " .. v) end
  end
  h.eq(x:clamp(0, 2):tolist(), {1.5, 0, 2})
  h.err(function() tensor.new({1, 2}):clamp(nan, 2) end, "clamp: a NaN bound for a i64 tensor")
  h.err(function() tensor.new({1, 2}):clamp_(0, nan) end, "clamp_: a NaN bound for a i64 tensor")
  h.eq(tensor.new({1, 5}):clamp(0, 2):tolist(), {1, 2})
end)

h.test("unknown option keys are errors, not ignored", function()
  h.err(function() tensor.zeros(2, {dtypo = "f64"}) end, "unknown option 'dtypo' (options: dtype)")
  h.err(function() tensor.arange(3, {dtype = "i32", device = "cpu"}) end, "unknown option 'device'")
  h.err(function() tensor.conv2d(tensor.ones(1, 1, 3, 3), tensor.ones(1, 1, 3, 3), {strde = 1}) end,
    "unknown option 'strde' (options: dilation, groups, padding, stride)")
  h.err(function()
    tensor.scan(function(c) return c end, tensor.zeros(1), tensor.ones(2, 1), {revers = true})
  end, "scan: unknown option 'revers'")
  h.eq(tensor.zeros(2, {dtype = "f64"}):dtype(), "f64")
end)

h.test("LAZYLUA_EAGER takes booleans in words; anything else is said and is off", function()
  local program = arg and arg[-1]
  if not program then return end
  local function mode(value)
    local pipe = io.popen(string.format("LAZYLUA_EAGER='%s' '%s' -e 'io.write(tostring(tensor.is_eager()))' 2>&1",
      value, program))
    local out = pipe:read("a")
    pipe:close()
    return out
  end
  for _, on in ipairs({"1", "true", "YES", "on"}) do h.eq(mode(on), "true") end
  for _, off in ipairs({"0", "false", "No", "off", ""}) do h.eq(mode(off), "false") end
  local said = mode("maybe")
  assert(said:find("LAZYLUA_EAGER=maybe is not", 1, true) and said:find("false$"), said)
end)

h.test("a float with no integer value is an error when converted to an integer dtype", function()
  local nan, inf = 0 / 0, math.huge
  for _, case in ipairs({
    {nan, "i32", "cast: nan has no i32 value"}, {inf, "i32", "cast: inf has no i32 value"},
    {-inf, "i64", "cast: -inf has no i64 value"}, {3e10, "i32", "cast: 30000001024 has no i32 value"},
    {2147483648, "i32", "has no i32 value"}, {-1e19, "i64", "has no i64 value"},
  }) do
    local value, dtype, message = case[1], case[2], case[3]
    -- Behind a fused op too, so that compiled code is checked, not only a copy.
    local f = tensor.new({1.5, value, -2.5})
    h.err(function() return (f * 1):to(dtype):tolist() end, message)
    h.err(function() return f:to(dtype):tolist() end, message)
    -- copy_ into an integer tensor converts, and checks, likewise.
    h.err(function()
      local t = tensor.zeros(3, {dtype = dtype})
      t:copy_(f + 0)
      return t:tolist()
    end, "has no " .. dtype .. " value")
  end
  h.err(function() tensor.zeros(2, {dtype = "i32"}):fill_(nan) end, "fill_: nan has no i32 value")
  h.err(function() tensor.zeros(2, {dtype = "i64"}):fill_(1e19) end, "fill_: 1e+19 has no i64 value")
  -- In range: truncation toward zero, as before, up to the edges of the type.
  h.eq(tensor.new({2.9, -2.9, -2147483648.5}, {dtype = "f64"}):to("i32"):tolist(),
    {2, -2, -2147483648})
  h.eq((tensor.new({2147483520, 0.5}) * 1):to("i32"):tolist(), {2147483520, 0})
  h.eq(tensor.new({-2 ^ 63}, {dtype = "f64"}):long():tolist(), {math.mininteger})
  local t = tensor.zeros(2, {dtype = "i32"})
  t:fill_(7.9)
  h.eq(t:tolist(), {7, 7})
  h.eq(tensor.new({nan, 0}):to("bool"):tolist(), {true, false})
end)

h.test("a value too large for the machine fails where it is recorded, in every mode", function()
  -- Eager mode cannot hold the 160 GB broadcast; compiled code would fuse it
  -- into the sum, the first (interpreted) run would not: all refuse alike.
  local a, b = tensor.ones(200000, 1), tensor.ones(1, 200000)
  h.err(function() return (a + b):sum():item() end, "out of memory: cannot allocate 152587.9 MiB")
  h.eq((tensor.ones(2000, 1) + tensor.ones(1, 2000)):sum():item(), 4000000 * 2)
end)

h.test("a barrier over thousands of pending results binds each to its own value", function()
  -- (Binding searched a list per result, and one kernel wrote every result
  -- of a shape: 8000 results took minutes to compile.)
  local x = tensor.ones(2)
  local results = {}
  for i = 1, 3000 do results[i] = x * i + 1 end
  tensor.mark_step()
  for _, i in ipairs({1, 17, 1500, 2999, 3000}) do h.eq(results[i]:tolist(), {i + 1, i + 1}) end
end)

h.done("test_silent_results")
