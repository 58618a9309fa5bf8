-- test_onnx_call_replay.lua - an imported model's call replayed
-- (tensor/call_replay.h, stdlib/onnx.lua): under tensor.no_grad a call with
-- inputs of the shapes of an earlier call makes that call's nodes again from
-- the new inputs instead of running each node's op function. A replay must
-- give exactly what running the model gives: new input values, new shapes,
-- changed weights, views and pending tensors as inputs; and a call that
-- cannot be replayed (gradients, an input's values read on the host, an
-- input given back as an output, eager mode) runs as before. The expected
-- values are worked out by hand.
local h = dofile("helpers.lua")
local onnx = require "onnx"

local EAGER = os.getenv("LAZYLUA_EAGER") == "1"

local function node(name, op, inputs, outputs, attributes)
  return {name = name, op_type = op, domain = "", inputs = inputs, outputs = outputs, attributes = attributes or {}}
end

local function model_of(nodes, initializers, inputs, outputs)
  local graph_inputs, graph_outputs = {}, {}
  for i, name in ipairs(inputs) do graph_inputs[i] = {name = name[1], elem_type = name[2]} end
  for i, name in ipairs(outputs) do graph_outputs[i] = {name = name[1], elem_type = name[2]} end
  return onnx.from_table({ir_version = 8, opset = {[""] = 13}, graph = {name = "g", nodes = nodes,
    initializers = initializers, inputs = graph_inputs, outputs = graph_outputs}})
end

-- y = relu(reshape(x, [batch, -1]) @ w + b), the batch read by Shape ->
-- Gather -> Unsqueeze -> Concat as an exporter writes it. w [4, 2]: column
-- 1 = 1, 2, 3, 4 and column 2 = -1 each; b = 0.5, 1.
local function linear_model()
  local w = tensor.new({{1, -1}, {2, -1}, {3, -1}, {4, -1}}):float()
  local b = tensor.new({0.5, 1}):float()
  return model_of({
    node("shape", "Shape", {"x"}, {"s"}),
    node("zero", "Constant", {}, {"i0"}, {value = tensor.new(0):long()}),
    node("batch", "Gather", {"s", "i0"}, {"n"}, {axis = 0}),
    node("axes", "Constant", {}, {"a0"}, {value = tensor.new({0}):long()}),
    node("unsq", "Unsqueeze", {"n", "a0"}, {"n1"}),
    node("minus", "Constant", {}, {"m1"}, {value = tensor.new({-1}):long()}),
    node("cat", "Concat", {"n1", "m1"}, {"shape2"}, {axis = 0}),
    node("flat", "Reshape", {"x", "shape2"}, {"f"}),
    node("mm", "MatMul", {"f", "w"}, {"p"}),
    node("bias", "Add", {"p", "b"}, {"q"}),
    node("relu", "Relu", {"q"}, {"y"}),
  }, {{name = "w", tensor = w}, {name = "b", tensor = b}}, {{"x", "f32"}}, {{"y", "f32"}})
end

-- What linear_model gives for rows of 4 values each (w scaled by `scale`).
local function linear_expected(rows, scale)
  scale = scale or 1
  local want = {}
  for i, r in ipairs(rows) do
    local dot, sum = 0, 0
    for k = 1, 4 do
      dot = dot + r[k] * k
      sum = sum + r[k]
    end
    want[i] = {math.max(dot * scale + 0.5, 0), math.max(-sum * scale + 1, 0)}
  end
  return want
end

-- n rows of 4 values from `start` on, as an [n, 2, 2] tensor and as rows.
local function batch(n, start)
  local rows, flat = {}, {}
  for i = 1, n do
    rows[i] = {}
    for k = 1, 4 do
      local v = (start + 4 * (i - 1) + k) % 7 - 3
      rows[i][k] = v
      flat[#flat + 1] = v
    end
  end
  return tensor.new(flat):float():reshape(n, 2, 2), rows
end

local function replays() return tensor.metrics().calls_replayed end
local function no_grad(model, ...)
  local args = table.pack(...)
  return tensor.no_grad(function() return model(table.unpack(args, 1, args.n)) end)
end

h.test("a call with the shapes of an earlier one is replayed, with the new values", function()
  local model = linear_model()
  local before = replays()
  for call = 1, 4 do
    local x, rows = batch(3, call)
    h.near(no_grad(model, x), linear_expected(rows))
  end
  h.eq(replays() - before, EAGER and 0 or 3)
end)

-- The first call returns its outputs as its replays will: an output that
-- is a view (here a Reshape of the last op) is then a node of the first
-- call's graph too, so all calls make one graph (it was two: the replays'
-- compiled a call later, and its third run came at the fourth call).
h.test("a model whose output is a view makes one graph, its first call's", function()
  local flat = model_of({
    node("mm", "MatMul", {"x", "w"}, {"p"}),
    node("relu", "Relu", {"p"}, {"q"}),
    node("minus", "Constant", {}, {"m1"}, {value = tensor.new({-1}):long()}),
    node("flat", "Reshape", {"q", "m1"}, {"y"}),
  }, {{name = "w", tensor = tensor.new({{1, -1}, {2, 1}}):float()}}, {{"x", "f32"}}, {{"y", "f32"}})
  local misses = tensor.metrics().cache_misses
  for call = 1, 3 do
    local y = no_grad(flat, tensor.new({{call, 1}, {-1, call}}):float())
    h.check(y, "f32", {call + 2, math.max(1 - call, 0), 2 * call - 1, call + 1})
  end
  if not EAGER and os.getenv("LAZYLUA_COMPILE") ~= "off" then
    h.eq(tensor.metrics().cache_misses - misses, 1)
  end
end)

h.test("each input shape is recorded once, and the last few are kept", function()
  local model = linear_model()
  local before = replays()
  for _, n in ipairs({1, 2, 5, 1, 2, 5, 2}) do
    local x, rows = batch(n, n)
    local y = no_grad(model, x)
    h.shape(y, {n, 2})
    h.near(y, linear_expected(rows))
  end
  h.eq(replays() - before, EAGER and 0 or 4)
end)

h.test("a weight changed in place is seen by the next call, which records again", function()
  local model = linear_model()
  local x, rows = batch(2, 0)
  h.near(no_grad(model, x), linear_expected(rows))
  h.near(no_grad(model, x), linear_expected(rows))
  local before = replays()
  tensor.no_grad(function() model:parameters()[1]:mul_(2) end)
  -- the parameters' order is the file's: w first
  h.near(no_grad(model, x), linear_expected(rows, 2))
  h.eq(replays() - before, 0)
  h.near(no_grad(model, x), linear_expected(rows, 2))
  h.eq(replays() - before, EAGER and 0 or 1)
  -- a weight replaced by a new tensor in the model's table
  model.initializers.w = tensor.new({{1, -1}, {2, -1}, {3, -1}, {4, -1}}):float() * 3
  h.near(no_grad(model, x), linear_expected(rows, 3))
end)

h.test("inputs given as pending values, views and tensors changed in place", function()
  local model = linear_model()
  local x, rows = batch(3, 5)
  h.near(no_grad(model, x), linear_expected(rows))
  -- pending: x + 0 is recorded, not computed
  h.near(no_grad(model, x + 0), linear_expected(rows))
  -- a view: rows 2..3 of a larger batch
  local big, big_rows = batch(4, 5)
  h.near(no_grad(model, big:narrow(1, 2, 3)), linear_expected({big_rows[2], big_rows[3], big_rows[4]}))
  -- the same tensor, changed in place between two calls
  x:add_(1)
  for _, r in ipairs(rows) do
    for k = 1, 4 do r[k] = r[k] + 1 end
  end
  h.near(no_grad(model, x), linear_expected(rows))
  -- a transposed view (not contiguous) of the same shape
  local t = tensor.new({{1, 2, 3}, {4, 5, 6}, {7, 8, 9}, {10, 11, 12}}):float():t():reshape(3, 2, 2)
  local t_rows = {{1, 4, 7, 10}, {2, 5, 8, 11}, {3, 6, 9, 12}}
  h.near(no_grad(model, t), linear_expected(t_rows))
end)

h.test("a call that records gradients is never replayed; the gradients are right", function()
  local model = linear_model()
  local x, rows = batch(2, 3)
  local before = replays()
  for _ = 1, 3 do
    local y = model(x)
    h.near(y, linear_expected(rows))
    assert(y:requires_grad(), "the output needs a gradient")
  end
  h.eq(replays() - before, 0)
  local w = model:parameters()[1]
  model(x):sum():backward()
  -- d sum / d w[k][1] = sum over rows with a positive first output of x[k]
  local want = {}
  for k = 1, 4 do
    want[k] = {0, 0}
    for _, r in ipairs(rows) do
      local y = linear_expected({r})[1]
      if y[1] > 0 then want[k][1] = want[k][1] + r[k] end
      if y[2] > 0 then want[k][2] = want[k][2] + r[k] end
    end
  end
  h.near(w:grad(), want)
end)

h.test("a model that reads an input's values on the host records every call", function()
  -- y = reshape(x, s): the target shape is an input's values
  local model = model_of({node("r", "Reshape", {"x", "s"}, {"y"})}, {}, {{"x", "f32"}, {"s", "i64"}},
    {{"y", "f32"}})
  local x = tensor.arange(1, 7):float()
  local before = replays()
  for _, shape in ipairs({{2, 3}, {3, 2}, {2, 3}, {6, 1}, {3, 2}}) do
    local y = no_grad(model, x, tensor.new(shape):long())
    h.shape(y, shape)
    h.eq(y:reshape(-1):tolist(), {1, 2, 3, 4, 5, 6})
  end
  h.eq(replays() - before, 0)
end)

h.test("an output that is an input or a weight is a new tensor each call, never replayed", function()
  local w = tensor.new({1, 2}):float()
  local model = model_of({node("same", "Identity", {"x"}, {"y"}), node("weight", "Identity", {"w"}, {"v"}),
    node("neg", "Neg", {"x"}, {"z"})}, {{name = "w", tensor = w}}, {{"x", "f32"}}, {{"y", "f32"}, {"v", "f32"},
    {"z", "f32"}})
  local before = replays()
  for call = 1, 3 do
    local x = tensor.new({call, call + 1}):float()
    local y, v, z = no_grad(model, x)
    h.check(y, "f32", {call, call + 1})
    h.check(v, "f32", {1, 2})
    h.check(z, "f32", {-call, -call - 1})
  end
  h.eq(replays() - before, 0)
end)

h.test("a failing call records nothing; the next calls work and replay", function()
  local model = linear_model()
  h.err(function() return no_grad(model, tensor.ones(2, 3)) end, "node 'mm' (MatMul")
  h.err(function() return no_grad(model, tensor.ones(2, 3)) end, "node 'mm' (MatMul")
  local before = replays()
  local x, rows = batch(2, 1)
  h.near(no_grad(model, x), linear_expected(rows))
  h.near(no_grad(model, x), linear_expected(rows))
  h.eq(replays() - before, EAGER and 0 or 1)
  -- an input of another dtype is not this recording's: recorded anew
  h.near(no_grad(model, x:double()), linear_expected(rows))
  h.eq(replays() - before, EAGER and 0 or 1)
  h.near(no_grad(model, x), linear_expected(rows))
  h.eq(replays() - before, EAGER and 0 or 2)
  h.still_works()
end)

h.test("a replayed call's graph is the recorded one's: the same ops at the same node labels", function()
  if EAGER then return end
  local model = linear_model()
  local x = batch(3, 2)
  local first = no_grad(model, x)
  local before = replays()
  local second = no_grad(model, x)
  h.eq(replays() - before, 1)
  local function ops(t)
    local list = {}
    for _, n in ipairs(tensor.graph(t).nodes) do
      if not n.kind then list[#list + 1] = n.name .. "@" .. tostring(n.location) end
    end
    return table.concat(list, " ")
  end
  h.eq(ops(second), ops(first))
  assert(ops(first):find("matmul@onnx: node 'mm' (MatMul)", 1, true), ops(first))
  h.near(second, first:tolist())
end)

h.done("test_onnx_call_replay")
