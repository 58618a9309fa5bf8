-- test_user_errors.lua - mistakes do not fail silently, and errors name the
-- user's line: unknown tensor fields, ipairs over a tensor, printable sizes,
-- nn.Sequential arguments, and errors raised inside the stdlib (nn, optim,
-- data, plot, progress) that carry this file's position and the failing
-- Sequential layer.
local h = dofile("helpers.lua")
local nn, optim, data, plot, progress =
  require "nn", require "optim", require "data", require "plot", require "progress"

-- The line after the one calling it.
local function next_line() return debug.getinfo(2, "l").currentline + 1 end

-- f must fail with a message that starts with this file's `line` and
-- contains each needle.
local function fails_at(line, f, ...)
  local msg = h.err(f, ...)
  -- ctest runs the file by its full path
  local prefix = "test_user_errors.lua:" .. line .. ": "
  local position_end = select(2, msg:find("^[^:]*test_user_errors%.lua:%d+: "))
  if not position_end or msg:sub(position_end - #prefix + 1, position_end) ~= prefix then
    error(string.format("message %q does not start with the position %q", msg, prefix), 2)
  end
  return msg
end

h.test("unknown tensor fields are errors with hints", function()
  local t = tensor.zeros(2, 3)
  h.err(function() local _ = t.shape end, "no field 'shape'", "t:size()")
  h.err(function() local _ = t.T end, "no field 'T'", "t:t()")
  h.err(function() local _ = t.ndim end, "no field 'ndim'", "t:dim()")
  h.err(function() local _ = t.sizee end, "'sizee'", "did you mean 'size'?")
  h.err(function() local _ = t:resahpe(3, 2) end, "'resahpe'", "did you mean 'reshape'?")
  h.err(function() local _ = t.foo end, "no field or method 'foo'")
  local msg = h.err(function() local _ = t.xyzzy end, "'xyzzy'")
  assert(not msg:find("did you mean", 1, true), msg)
  msg = h.err(function() local _ = t.x end, "'x'")
  assert(not msg:find("did you mean", 1, true), msg)
  local line = next_line()
  fails_at(line, function() local _ = t.shape end)
  h.err(function() local _ = t[true] end, "cannot be indexed with a boolean")
  -- methods, module functions and integer indexing still work
  h.eq(t:size(2), 3)
  h.eq(t.size(t, 1), 2)
  h.check(t[2], "f32", {0, 0, 0})
  h.check(t[-1], "f32", {0, 0, 0})
  h.check(t[{2, 3}], "f32", 0)
  -- an index out of range is an error, as PyTorch's IndexError
  h.err(function() local _ = t[3] end, "out of range")
  h.err(function() local _ = t[0] end, "out of range")
  h.still_works()
end)

h.test("ipairs and pairs over a tensor stop at the end", function()
  local t = tensor.new({{1, 2}, {3, 4}, {5, 6}})
  local rows = {}
  for i, row in ipairs(t) do rows[i] = row:tolist() end
  h.eq(rows, {{1, 2}, {3, 4}, {5, 6}})
  local count = 0
  for i, row in pairs(t) do
    count = count + 1
    h.eq(row:tolist(), rows[i])
  end
  h.eq(count, 3)
  -- a 1-D tensor yields 0-d tensors; an empty one yields nothing
  local values = {}
  for i, v in ipairs(tensor.new({7, 8})) do values[i] = v:item() end
  h.eq(values, {7, 8})
  for _ in ipairs(tensor.zeros(0, 2)) do error("an empty tensor has no rows") end
  -- ipairs over a lazy result
  local sum = 0
  for _, v in ipairs(tensor.arange(1, 5) * 2) do sum = sum + v:item() end
  h.eq(sum, 20)
  -- explicit indexing past the end is still an error
  h.err(function() local _ = t[4] end, "index 4 out of range for size 3")
end)

h.test("t:size() prints readably and compares by value", function()
  local size = tensor.zeros(2, 3):size()
  h.eq(tostring(size), "{2, 3}")
  h.eq(tostring(tensor.new(5):size()), "{}")
  h.eq(tostring(tensor.zeros(4):size()), "{4}")
  assert(size == {2, 3} and {2, 3} == size)
  assert(size ~= {3, 2} and size ~= {2, 3, 1})
  assert(tensor.zeros(2, 3):size() == tensor.ones(2, 3):size())
  -- still a plain table
  h.eq(#size, 2)
  h.eq(select("#", table.unpack(size)), 2)
  h.eq(table.concat(size, "x"), "2x3")
  local sum = 0
  for _, n in ipairs(size) do sum = sum + n end
  h.eq(sum, 5)
  h.shape(tensor.zeros(size), {2, 3})
  size[3] = 4
  h.eq(tostring(size), "{2, 3, 4}")
end)

h.test("nn.Sequential rejects nil and non-module arguments by position", function()
  local line = next_line()
  fails_at(line, function() nn.Sequential(nn.Linear(2, 3), nn.relu, nn.Linear(3, 1)) end,
    "nn.Sequential: argument 2 is nil (a misspelt layer name?)")
  -- a trailing nil counts too
  h.err(function() nn.Sequential(nn.Linear(2, 3), nil) end, "argument 2 is nil")
  h.err(function() nn.Sequential(nn.Linear(2, 3), nn.ReLU) end,
    "argument 2 is the class ReLU", "nn.ReLU(...)")
  h.err(function() nn.Sequential(nn.ReLU(), 3) end, "argument 2 is a number, not a module")
  h.err(function() nn.Sequential(nn.ReLU(), tensor.zeros(2)) end, "argument 2 is a tensor")
  h.err(function() nn.Sequential(nn.ReLU(), tensor.relu) end, "argument 2 is a function")
  h.err(function() nn.Sequential({nn.ReLU(), nil, nn.ReLU()}) end, "element 2 is nil")
  h.err(function() nn.Sequential({nn.ReLU(), x = nn.ReLU()}) end, "has a key x")
  -- good ones still build, in both forms
  h.eq(#nn.Sequential(nn.Linear(2, 3), nn.ReLU()), 2)
  h.eq(#nn.Sequential({nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)}), 3)
  h.eq(#nn.Sequential(), 0)
  h.err(function() nn.Sequential():add_module("x", tensor.zeros(2)) end, "add_module: 'x' is not a module")
end)

h.test("errors inside nn and optim name this file's line", function()
  local line = next_line()
  fails_at(line, function() nn.MSELoss()(tensor.zeros(3), tensor.zeros(4)) end,
    "MSELoss: input [3] and target [4] differ in shape")
  line = next_line()
  fails_at(line, function() nn.CrossEntropyLoss()(tensor.zeros(3, 4), tensor.zeros(3)) end,
    "CrossEntropyLoss")
  line = next_line()
  fails_at(line, function() nn.Conv2d(1, 2, 3)(tensor.zeros(3)) end, "Conv2d: expected input")
  line = next_line()
  fails_at(line, function() nn.Linear(0, 3) end, "must be a positive integer")
  local params = nn.Linear(2, 2):parameters()
  line = next_line()
  fails_at(line, function() optim.SGD(params, {lr = "0.1"}) end,
    'SGD: lr must be a number >= 0, got the string "0.1"')
  line = next_line()
  fails_at(line, function() optim.SGD(params, {lr = -1}) end, "got -1")
  line = next_line()
  fails_at(line, function() optim.Adam(params, {betas = true}) end, "unknown option 'betas'")
  line = next_line()
  fails_at(line, function() optim.SGD({tensor.zeros(2)}) end, "does not require grad")
  -- from a helper function of the script: its own line, not its caller's
  -- (not a tail call, which would leave no frame)
  local function build_bad_model() local m = nn.Linear(2, 0); return m end
  line = debug.getinfo(1, "l").currentline - 1
  fails_at(line, function() build_bad_model() end, "positive integer")
end)

h.test("errors inside data, plot and progress name this file's line", function()
  local line = next_line()
  fails_at(line, function() data.DataLoader({tensor.zeros(3), "x"}) end, "dataset[2]")
  line = next_line()
  fails_at(line, function() data.DataLoader({tensor.zeros(3)}, {batch_size = 0}) end, "batch_size")
  line = next_line()
  fails_at(line, function() plot.sparkline({1, "x"}) end, "not a number")
  line = next_line()
  fails_at(line, function() progress.new(-1) end, "total")
end)

h.test("a failing layer inside nn.Sequential is named by index and type", function()
  local model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(100, 10))
  -- a C++ tensor error (matmul) inside layer 3
  local line = next_line()
  fails_at(line, function() model(tensor.zeros(64, 784)) end,
    "nn.Sequential layer 3 (Linear(100 -> 10)): matmul: shapes [64, 256] and [100, 10]")
  -- a Lua error() inside layer 1
  local convs = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU())
  line = next_line()
  fails_at(line, function() convs(tensor.zeros(2, 3, 8, 8)) end,
    "nn.Sequential layer 1 (Conv2d(", "): Conv2d: expected input [N, 1, H, W], got [2, 3, 8, 8]")
  -- nested: the outer layer, then the inner one
  local nested = nn.Sequential(nn.ReLU(), nn.Sequential(nn.Linear(4, 4), nn.Linear(5, 2)))
  line = next_line()
  fails_at(line, function() nested(tensor.zeros(1, 4)) end,
    "nn.Sequential layer 2 (Sequential): nn.Sequential layer 2 (Linear(5 -> 2)): matmul")
  -- a loss error after a good model: no layer named
  local msg = h.err(function() nn.MSELoss()(model:get(1)(tensor.zeros(2, 784)), tensor.zeros(3)) end,
    "MSELoss")
  assert(not msg:find("nn.Sequential", 1, true), msg)
  -- a user's own module inside a Sequential: its error is its own, untouched
  local Custom = nn.class("Custom")
  function Custom:forward(x) error("custom failure") end
  local with_custom = nn.Sequential(nn.ReLU(), Custom())
  line = debug.getinfo(1, "l").currentline - 2
  msg = fails_at(line, function() with_custom(tensor.zeros(2)) end, "custom failure")
  assert(not msg:find("nn.Sequential", 1, true), msg)
  -- the model still works after the errors
  h.shape(model:get(1)(tensor.zeros(2, 784)), {2, 256})
  h.still_works()
end)

h.test("errors from tensor ops that the stdlib calls inside a scan name this line", function()
  local layers = {nn.Linear(3, 3), nn.Linear(3, 3)}
  local line = next_line()
  fails_at(line, function() nn.scan_layers(layers, tensor.zeros(2, 4)) end, "matmul")
end)

h.done("test_user_errors")
