-- test_onnx_node_locations.lua - the ops an imported ONNX model records are
-- located at its nodes ("m.onnx: node '/layer1/mm' (MatMul)"), not at the
-- Lua line that called the model: in tensor.graph, tensor.profile_report
-- and deferred errors. The script's own ops, and syncs, keep their Lua
-- lines; tensor.with_location, the entry the importer uses, restores the
-- outer location however its function ends. The expected labels are
-- literals built from the model's table below.
local h = dofile("helpers.lua")
local onnx = require "onnx"
local native = require "stdlib.native"

local FILE = debug.getinfo(1, "S").short_src
local EAGER = os.getenv("LAZYLUA_EAGER") == "1"
local temp, remove_temporaries = h.temp_paths()

-- x [2, 3] @ w (ones [3, 3]) -> Relu (an unnamed node) -> GatherND by the
-- index input i (a [k, 2] i64, known only when the graph runs).
local path = temp("nodes.onnx")
local BASE = path:match("[^/]*$")  -- the file's base name
h.write_bytes(path, native.onnx_encode_model({ir_version = 8, opset = {[""] = 13}, graph = {name = "g",
  nodes = {
    {name = "/layer1/mm", op_type = "MatMul", domain = "", inputs = {"x", "w"}, outputs = {"h"}, attributes = {}},
    {name = "", op_type = "Relu", domain = "", inputs = {"h"}, outputs = {"r"}, attributes = {}},
    {name = "gn", op_type = "GatherND", domain = "", inputs = {"r", "i"}, outputs = {"y"}, attributes = {}},
  },
  initializers = {{name = "w", tensor = tensor.ones(3, 3)}},
  inputs = {{name = "x", elem_type = "f32"}, {name = "i", elem_type = "i64"}},
  outputs = {{name = "y", elem_type = "f32"}}}}))
local model = onnx.load(path)
local MATMUL = BASE .. ": node '/layer1/mm' (MatMul)"
local RELU = BASE .. ": node 2 (Relu)"
local GATHER = BASE .. ": node 'gn' (GatherND)"

-- x2 @ ones: every column holds the row's sum, 6 and -6; relu: 6 and 0
local x2 = tensor.new({{1.0, 2, 3}, {-1, -2, -3}})

-- The location of every node of `t`'s graph that is not a leaf, by op name.
local function locations(t)
  local found = {}
  for _, node in ipairs(tensor.graph(t).nodes) do
    if not node.kind then
      found[#found + 1] = {name = node.name, location = node.location, chunk = node.chunk, line = node.line}
    end
  end
  return found
end

h.test("the model computes what its nodes say (checked by hand)", function()
  h.check(model(x2, tensor.new({{0, 0}, {1, 2}})), "f32", {6, 0})
end)

if not EAGER then
  h.test("tensor.graph locates each node's ops at the node, the script's ops at their line", function()
    local y = model(x2, tensor.new({{0, 0}}))
    local line = debug.getinfo(1, "l").currentline + 1
    local z = y * 2
    local seen, by_location = {}, {}
    for _, node in ipairs(locations(z)) do
      seen[node.name] = node
      by_location[node.location] = (by_location[node.location] or "") .. node.name .. " "
    end
    h.eq(seen.matmul.location, MATMUL)
    h.eq(seen.matmul.chunk, MATMUL)
    h.eq(seen.matmul.line, 0)
    h.eq(seen.relu.location, RELU)
    assert(by_location[GATHER] and by_location[GATHER]:find("index_select"), "GatherND's ops name it")
    h.eq(seen.mul.location, FILE .. ":" .. line)
    h.eq(seen.mul.line, line)
    h.check(z, "f32", {12})
  end)

  h.test("tensor.ir and tensor.pending name the nodes", function()
    local y = model(x2, tensor.new({{0, 0}}))
    local text = tensor.ir(y)
    assert(text:find(MATMUL, 1, true) and text:find(GATHER, 1, true), text)
    local lines = {}
    for _, op in ipairs(tensor.pending()) do lines[op.line] = true end
    assert(lines[MATMUL] and lines[RELU], "tensor.pending names the nodes")
    tensor.sync(y)
  end)

  h.test("a deferred run-time error names the node; the next op has its Lua line", function()
    local y = model(x2, tensor.new({{1, 7}}))  -- column 7 of a [2, 3]: found when the graph runs
    local message = h.err(function() return y:tolist() end, "error in the op recorded at " .. GATHER,
      "out of range")
    assert(not message:find("recorded at " .. FILE, 1, true), message)
    local line = debug.getinfo(1, "l").currentline + 1
    local after = tensor.rand(2) + 1
    h.eq(locations(after)[1].location, FILE .. ":" .. line)
    h.still_works()
  end)
else
  h.test("eagerly, the error names the node", function()
    h.err(function() return model(x2, tensor.new({{1, 7}})) end, "node 'gn' (GatherND", "out of range")
    h.still_works()
  end)
end

h.test("an error raised inside a node leaves the next op at its Lua line", function()
  h.err(function() return model(x2, tensor.new({{1, 0, 0, 0}})) end, "node 'gn' (GatherND")
  local line = debug.getinfo(1, "l").currentline + 1
  local after = tensor.rand(2) + 1
  if not EAGER then h.eq(locations(after)[1].location, FILE .. ":" .. line) end
  h.still_works()
end)

-- (eager kernels run outside graphs and name no place, a script's neither)
h.test("the profile report and trace name the nodes", function()
  if EAGER then return end
  local trace = temp("trace.json")
  tensor.profile(function()
    for _ = 1, 2 do model(x2, tensor.new({{0, 0}})):tolist() end
  end, trace)
  local json = h.read_bytes(trace)
  assert(json:find('"name":"', 1, true) and json:find(MATMUL, 1, true), json)
  local report = tensor.profile_report(50)
  assert(report:find(BASE .. ": node '", 1, true), report)
  assert(not report:find(FILE, 1, true), report)
  -- the matmul's kernel, alone or fused with the relu, names its node
  assert(report:find(MATMUL, 1, true), report)
end)

h.test("a sync forced inside a node stays at the script's line (tensor.report)", function()
  tensor.reset_metrics()
  -- Reshape's shape is lazy here: the node reads it to the host (a sync)
  local reshape = onnx.from_table({ir_version = 8, opset = {[""] = 13}, graph = {name = "g",
    nodes = {{name = "rs", op_type = "Reshape", domain = "", inputs = {"x", "s"}, outputs = {"y"}, attributes = {}}},
    initializers = {}, inputs = {{name = "x", elem_type = "f32"}, {name = "s", elem_type = "i64"}},
    outputs = {{name = "y", elem_type = "f32"}}}})
  local line
  for _ = 1, 3 do
    line = debug.getinfo(1, "l").currentline + 1
    local y = reshape(x2, tensor.new({3, 2}) + 0)
    h.check(y, "f32", {{1, 2}, {3, -1}, {-2, -3}})
  end
  if not EAGER then
    local report = tensor.report()
    assert(report:find(FILE .. ":" .. line, 1, true), report)
    assert(not report:find("node 'rs'", 1, true), report)
  end
end)

h.test("tensor.with_location: results, nesting, restored after an error", function()
  local function locate(t) return locations(t)[#locations(t)].location end
  local a, b = tensor.with_location("outer", function(p, q)
    local first = tensor.rand(2) + p
    local inner = tensor.with_location("inner", function() return tensor.rand(2) * q end)
    return first, inner, tensor.rand(2) - 1
  end, 1, 2)
  if not EAGER then
    h.eq(locate(a), "outer")
    h.eq(locate(b), "inner")
  end
  h.err(function()
    tensor.with_location("failing", function() error("boom") end)
  end, "boom")
  local line = debug.getinfo(1, "l").currentline + 1
  local after = tensor.rand(2) + 1
  if not EAGER then h.eq(locate(after), FILE .. ":" .. line) end
  -- a long label is cut, on a UTF-8 boundary
  local long = tensor.with_location(string.rep("é", 150), function() return tensor.rand(2) + 1 end)
  if not EAGER then
    local label = locate(long)
    h.eq(#label, 197 + 3 - 1)  -- 197 bytes end inside an "é": cut to 196, then "..."
    assert(label:sub(-3) == "..." and utf8.len(label), label)
  end
end)

h.bad(function() tensor.with_location(nil, function() end) end, "tensor.with_location", "string expected, got nil")
h.bad(function() tensor.with_location("", function() end) end, "tensor.with_location", "the label is empty")
h.bad(function() tensor.with_location("x", 42) end, "tensor.with_location", "function expected, got number")

remove_temporaries()
h.done("test_onnx_node_locations")
