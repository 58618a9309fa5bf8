-- test_onnx_call_reuse.lua - what an imported model's call keeps from one
-- call to the next (stdlib/onnx.lua: each node's prepared step, and the
-- results of the nodes run on the host): a steady call runs no host node,
-- a new input shape runs them again, changed weights are seen, a graph
-- output is never shared between calls, and errors still name the node on
-- every call. The expected values are worked out by hand.
local h = dofile("helpers.lua")
local onnx = require "onnx"

-- Counts the calls of the op functions named in `names` (the model's steps
-- take onnx.ops' functions when a call first reaches their node).
local counts = {}
for _, name in ipairs({"Shape", "Gather", "Unsqueeze", "Concat", "Reshape", "MatMul", "Add", "Constant"}) do
  local fn = onnx.ops[name]
  onnx.ops[name] = function(...)
    counts[name] = (counts[name] or 0) + 1
    return fn(...)
  end
end
local function reset() counts = {} end

-- The op functions that ran since reset(), as {op = calls}, exactly.
local function ran(want)
  local function text(t)
    local parts = {}
    for name, count in pairs(t) do parts[#parts + 1] = name .. "=" .. count end
    table.sort(parts)
    return table.concat(parts, " ")
  end
  if text(counts) ~= text(want) then
    error(string.format("ran %s, expected %s", text(counts), text(want)), 2)
  end
end

local function node(name, op, inputs, outputs, attributes)
  return {name = name, op_type = op, domain = "", inputs = inputs, outputs = outputs, attributes = attributes or {}}
end

-- The nodes of reshape(x, [batch, -1]) into `flat`, the batch read by
-- Shape -> Gather -> Unsqueeze -> Concat as an exporter writes it; then `more`.
local function flatten_nodes(flat, more)
  local nodes = {
    node("shape", "Shape", {"x"}, {"s"}),
    node("zero", "Constant", {}, {"i0"}, {value = tensor.new(0):long()}),
    node("batch", "Gather", {"s", "i0"}, {"n"}, {axis = 0}),
    node("axes", "Constant", {}, {"a0"}, {value = tensor.new({0}):long()}),
    node("unsq", "Unsqueeze", {"n", "a0"}, {"n1"}),
    node("minus", "Constant", {}, {"m1"}, {value = tensor.new({-1}):long()}),
    node("cat", "Concat", {"n1", "m1"}, {"shape2"}, {axis = 0}),
    node("flat", "Reshape", {"x", "shape2"}, {flat}),
  }
  for _, extra in ipairs(more) do nodes[#nodes + 1] = extra end
  return nodes
end

-- y = reshape(x, [batch, -1]) @ w + b; also outputs the shape (`s`, a host
-- value that is a graph output).
local function flatten_linear(w, b)
  return onnx.from_table({ir_version = 8, opset = {[""] = 13}, graph = {name = "g",
    nodes = flatten_nodes("f", {node("mm", "MatMul", {"f", "w"}, {"p"}),
      node("bias", "Add", {"p", "b"}, {"y"})}),
    initializers = {{name = "w", tensor = w}, {name = "b", tensor = b}},
    inputs = {{name = "x", elem_type = "f32"}},
    outputs = {{name = "y", elem_type = "f32"}, {name = "s", elem_type = "i64"}}}})
end

-- x [n, 2, 2] filled with 1..4n; w [4, 1] = 1, 2, 3, 4; b = 0.5:
-- y[i] = sum_k (4 (i - 1) + k) k + 0.5 = 40 (i - 1) + 30.5.
local function input(n) return tensor.arange(1, 4 * n + 1):float():reshape(n, 2, 2) end
local function expected(n, scale, bias)
  local want = {}
  for i = 1, n do want[i] = {(40 * (i - 1) + 30) * (scale or 1) + (bias or 0.5)} end
  return want
end

h.test("a steady call runs no host node; a new shape runs them again", function()
  local model = flatten_linear(tensor.new({{1}, {2}, {3}, {4}}):float(), tensor.new({0.5}):float())
  reset()
  local y, s = model(input(2))
  h.near(y, expected(2))
  h.check(s, "i64", {2, 2, 2})
  ran({Shape = 1, Constant = 3, Gather = 1, Unsqueeze = 1, Concat = 1, Reshape = 1, MatMul = 1, Add = 1})
  reset()
  y, s = model(input(2))
  h.near(y, expected(2))
  h.check(s, "i64", {2, 2, 2})
  -- Shape writes a graph output, so it runs; Gather reads its new tensor
  ran({Shape = 1, Gather = 1, Unsqueeze = 1, Concat = 1, Reshape = 1, MatMul = 1, Add = 1})
  reset()
  y, s = model(input(3))
  h.near(y, expected(3))
  h.check(s, "i64", {3, 2, 2})
  reset()
  y = model(input(2))
  h.near(y, expected(2))
end)

-- The same without the shape as a graph output: a steady call runs only the
-- nodes that record ops.
local function flatten_only()
  return onnx.from_table({ir_version = 8, opset = {[""] = 13}, graph = {name = "g",
    nodes = flatten_nodes("y", {}),
    initializers = {},
    inputs = {{name = "x", elem_type = "f32"}},
    outputs = {{name = "y", elem_type = "f32"}}}})
end

h.test("host nodes run once per input shape", function()
  local model = flatten_only()
  for _, n in ipairs({2, 2, 5, 5, 2}) do
    reset()
    local y = model(input(n))
    h.shape(y, {n, 4})
    h.eq(y:tolist()[n], {4 * n - 3, 4 * n - 2, 4 * n - 1, 4 * n})
  end
  -- a model with no weights needing a gradient replays a call with the
  -- shapes of an earlier one (test_onnx_call_replay.lua): no op function
  -- runs; eager mode runs what records ops
  reset()
  model(input(2))
  ran(os.getenv("LAZYLUA_EAGER") == "1" and {Reshape = 1} or {})
  reset()
  model(input(7))
  ran({Shape = 1, Gather = 1, Unsqueeze = 1, Concat = 1, Reshape = 1})
end)

h.test("a host value given out as a graph output is new on each call", function()
  local model = flatten_linear(tensor.new({{1}, {2}, {3}, {4}}):float(), tensor.new({0.5}):float())
  local _, s1 = model(input(2))
  local _, s2 = model(input(2))
  assert(not rawequal(s1, s2), "the same tensor was given out twice")
  s1:fill_(9)
  h.check(s2, "i64", {2, 2, 2})
  local _, s3 = model(input(2))
  h.check(s3, "i64", {2, 2, 2})
end)

h.test("changed weights are seen by the next call", function()
  local w, b = tensor.new({{1}, {2}, {3}, {4}}):float(), tensor.new({0.5}):float()
  local model = flatten_linear(w, b)
  h.near(model(input(2)), expected(2))
  -- in place, through model:parameters() (what an optimizer does)
  local params = model:parameters()
  tensor.no_grad(function() params[1]:mul_(2) end)
  h.near(model(input(2)), expected(2, 2))
  -- a training step
  local optim = require "optim"
  local opt = optim.SGD(model:parameters(), {lr = 0.5})
  opt:zero_grad()
  model(input(1)):sum():backward()
  opt:step()
  -- dy/db = 1: b = 0.5 - 0.5; dy/dw = x[1] = 1..4: w = 2k - 0.5 k = 1.5 k
  h.near(model(input(2)), expected(2, 1.5, 0))
end)

h.test("errors name the node on every call", function()
  -- Reshape to 3 elements per row of an input of 4: found by the host
  -- shape on every call (no result of a failed node is kept)
  local model = onnx.from_table({ir_version = 8, opset = {[""] = 13}, graph = {name = "g",
    nodes = {
      node("target", "Constant", {}, {"shape"}, {value = tensor.new({-1, 3}):long()}),
      node("bad_reshape", "Reshape", {"x", "shape"}, {"y"}),
    },
    initializers = {}, inputs = {{name = "x", elem_type = "f32"}},
    outputs = {{name = "y", elem_type = "f32"}}}})
  for _ = 1, 2 do h.err(function() return model(tensor.ones(2, 4)) end, "node 'bad_reshape' (Reshape") end
  h.shape(model(tensor.ones(2, 3)), {2, 3})
  h.err(function() return model(tensor.ones(1, 4)) end, "node 'bad_reshape' (Reshape")
  -- a second writer of a name, on each call
  local twice = onnx.from_table({ir_version = 8, opset = {[""] = 13}, graph = {name = "g",
    nodes = {node("first", "Relu", {"x"}, {"y"}), node("second", "Relu", {"x"}, {"y"})},
    initializers = {}, inputs = {{name = "x", elem_type = "f32"}},
    outputs = {{name = "y", elem_type = "f32"}}}})
  for _ = 1, 2 do
    h.err(function() return twice(tensor.ones(2)) end, "node 'second' (Relu", "output 'y' is already the output of",
      "node 'first'")
  end
  -- a node writing an initializer's name
  local over = onnx.from_table({ir_version = 8, opset = {[""] = 13}, graph = {name = "g",
    nodes = {node("writer", "Relu", {"x"}, {"w"})},
    initializers = {{name = "w", tensor = tensor.ones(2)}}, inputs = {{name = "x", elem_type = "f32"}},
    outputs = {{name = "w", elem_type = "f32"}}}})
  for _ = 1, 2 do
    h.err(function() return over(tensor.ones(2)) end, "node 'writer' (Relu", "already a graph input or initializer")
  end
  h.still_works()
end)

h.done("test_onnx_call_reuse")
