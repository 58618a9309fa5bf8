-- onnx.lua - ONNX models: load one as a callable Lua model that records its
-- graph into lazylua's IR, node by node (so it is compiled and cached like a
-- script, and differentiable where the ops are).
--
--   local onnx = require "onnx"
--   local model = onnx.load("resnet.onnx")
--   local y = model(x)                       -- inputs in the graph's order
--   local opt = optim.SGD(model:parameters(), {lr = 0.01})   -- initializers train
--
-- The file is decoded into plain tables (interp/onnx_codec.cpp; their shape
-- is in docs/onnx.md); each node then runs the op function registered
-- under its op_type in onnx.ops (stdlib/onnx_ops_*.lua).
local native = require "stdlib.native"
local tensor = require "tensor"

local onnx = {}

-- The default domain's opsets this module implements: 7 to 17, and the
-- older ones where the ops read the same (pytorch's old exports use 6).
onnx.min_opset, onnx.max_opset = 1, 17

-- op_type -> function(ctx, inputs, attrs) -> outputs..., from the op
-- modules (each returns {OpType = fn, ...}).
local op_modules = {"onnx_ops_math", "onnx_ops_nn", "onnx_ops_shape"}
onnx.ops = {}
for _, name in ipairs(op_modules) do
  for op_type, fn in pairs(require("lazylua." .. name)) do onnx.ops[op_type] = fn end
end

-- Ops that compute shapes in ONNX graphs (Shape -> Gather -> Concat ->
-- Reshape): when every input is known on the host (an initializer, a
-- Constant, a Shape, or such an op's output), the node runs eagerly, so that
-- its output is data and a later Reshape reads it with no sync.
onnx.host_ops = {
  Shape = true, Size = true, Constant = true, ConstantOfShape = true, Identity = true,
  Gather = true, Concat = true, Unsqueeze = true, Squeeze = true, Slice = true, Cast = true,
  Reshape = true, Flatten = true, Add = true, Sub = true, Mul = true, Div = true, Neg = true,
  Equal = true, Less = true, Greater = true, Not = true, And = true, Or = true, Where = true,
  Range = true, Expand = true, ReduceProd = true, ReduceSum = true, Min = true, Max = true,
  Abs = true, Floor = true, Ceil = true, Sqrt = true, Mod = true, Tile = true, Transpose = true,
}
-- Ops whose output is known on the host whatever their inputs.
local always_host = {Shape = true, Size = true, Constant = true}

local function describe_node(node, opset)
  return string.format("node '%s' (%s%s, opset %d)", node.name ~= "" and node.name or "?",
    node.domain ~= "" and node.domain .. "." or "", node.op_type, opset)
end

-- What an op function gets besides its inputs and attributes.
local Context = {}
Context.__index = Context

function Context:error(fmt, ...)
  error(string.format("onnx: %s: " .. fmt, describe_node(self.node, self.opset), ...), 0)
end

-- For a feature lazylua lacks: the conformance runner counts these apart.
function Context:unsupported(fmt, ...)
  error(string.format("onnx: %s: unsupported: " .. fmt, describe_node(self.node, self.opset), ...), 0)
end

-- The values of a small (shape-like) tensor as a flat Lua list.
function Context:host(t)
  if t == nil then return nil end
  local values = t:reshape(-1):tolist()
  return values
end

local Model = {}
Model.__index = Model
Model.__name = "onnx.Model"

local float_types = {f32 = true, f64 = true}

-- A model from a decoded table (native.onnx_decode_model's shape).
function onnx.from_table(decoded)
  local opset = decoded.opset[""]
  if opset == nil then
    local domains = {}
    for domain in pairs(decoded.opset) do domains[#domains + 1] = domain end
    table.sort(domains)
    error("onnx.load: unsupported: the model uses only the domains " .. table.concat(domains, ", "), 2)
  end
  if opset < onnx.min_opset or opset > onnx.max_opset then
    error(string.format("onnx.load: the model uses opset %d of the default domain; lazylua supports up to %d",
      opset, onnx.max_opset), 2)
  end
  local graph = decoded.graph
  for _, list in ipairs({graph.inputs, graph.outputs}) do
    for _, value in ipairs(list) do
      if value.kind then
        error(string.format("onnx.load: unsupported: graph value '%s' is a %s (lazylua values are tensors)",
          value.name, value.kind), 2)
      end
    end
  end
  local self = setmetatable({
    decoded = decoded, graph = graph, opset = decoded.opset,
    initializers = {}, parameter_list = {}, input_names = {}, output_names = {},
  }, Model)
  for _, entry in ipairs(graph.initializers) do
    local t = entry.tensor
    if float_types[t:dtype()] then
      t:requires_grad(true)
      self.parameter_list[#self.parameter_list + 1] = t
    end
    self.initializers[entry.name] = t
  end
  -- Before IR version 4 the initializers were graph inputs too.
  for _, input in ipairs(graph.inputs) do
    if self.initializers[input.name] == nil then self.input_names[#self.input_names + 1] = input.name end
  end
  for _, output in ipairs(graph.outputs) do self.output_names[#self.output_names + 1] = output.name end
  return self
end

-- Loads an .onnx file.
function onnx.load(path, ...)
  if type(path) ~= "string" then error("onnx.load: expected a file path, got " .. type(path), 2) end
  -- no options (PyTorch's load_external_data is not supported): refused, not dropped
  if select("#", ...) > 0 then error("onnx.load: takes a path only, no options", 2) end
  local file, message = io.open(path, "rb")
  if not file then error("onnx.load: cannot open " .. message, 2) end
  local bytes = file:read("a")
  file:close()
  return onnx.from_table(native.onnx_decode_model(bytes))
end

-- Reads a TensorProto file (a test case's input_0.pb): tensor, name, and
-- the ONNX element type in the file (1 FLOAT, 4 UINT16, ...).
function onnx.read_tensor(path)
  local file, message = io.open(path, "rb")
  if not file then error("onnx.read_tensor: cannot open " .. message, 2) end
  local bytes = file:read("a")
  file:close()
  return native.onnx_decode_tensor(bytes)
end

-- The initializers of float type: the trainable tensors, in file order.
function Model:parameters()
  local list = {}
  for i, t in ipairs(self.parameter_list) do list[i] = t end
  return list
end

-- Runs one graph: `values` maps names to tensors (inputs, initializers);
-- `host` marks the names known on the host. Returns the graph's outputs.
function onnx.run_graph(graph, values, host, opset_of)
  for _, node in ipairs(graph.nodes) do
    local domain = node.domain == "ai.onnx" and "" or node.domain
    local opset = opset_of[domain] or 0
    local op = domain == "" and onnx.ops[node.op_type] or nil
    if op == nil then
      error(string.format("onnx: %s: unsupported: no such op in lazylua", describe_node(node, opset)), 0)
    end
    local inputs, all_host = {n = #node.inputs}, true
    for k, name in ipairs(node.inputs) do
      if name ~= "" then
        local value = values[name]
        if value == nil then
          error(string.format("onnx: %s: input '%s' is not computed before it", describe_node(node, opset), name), 0)
        end
        inputs[k] = value
        all_host = all_host and host[name] == true
      end
    end
    local ctx = setmetatable({node = node, opset = opset, domain = domain, graph_values = values,
      opset_of = opset_of}, Context)
    local on_host = always_host[node.op_type] or (all_host and onnx.host_ops[node.op_type])
    local results
    if on_host and not always_host[node.op_type] then
      results = table.pack(native.onnx_eager_call(op, ctx, inputs, node.attributes))
    else
      results = table.pack(op(ctx, inputs, node.attributes))
    end
    for k, name in ipairs(node.outputs) do
      if name ~= "" then
        values[name] = results[k]
        host[name] = on_host and results[k] ~= nil or nil
      end
    end
  end
  local outputs = {}
  for i, output in ipairs(graph.outputs) do
    local value = values[output.name]
    if value == nil then error(string.format("onnx: graph output '%s' is never computed", output.name), 0) end
    outputs[i] = value
  end
  return outputs
end

-- model(x1, x2, ...) in the order of the graph's inputs, or model{name =
-- tensor, ...}: the graph's outputs, in order.
function Model:__call(...)
  local given = {...}
  local values, host = {}, {}
  for name, t in pairs(self.initializers) do
    values[name] = t
    host[name] = not float_types[t:dtype()] or nil
  end
  if #given == 1 and type(given[1]) == "table" and not tensor.is_tensor(given[1]) then
    local known = {}
    for _, name in ipairs(self.input_names) do
      local t = given[1][name]
      if t == nil then error(string.format("onnx model: input '%s' is missing", name), 2) end
      values[name], known[name] = t, true
    end
    -- a misspelt name is an error, not an input silently dropped
    for name in next, given[1] do
      if not known[name] then
        error(string.format("onnx model: unknown input '%s' (inputs: %s)", tostring(name),
          table.concat(self.input_names, ", ")), 2)
      end
    end
  else
    if #given ~= #self.input_names then
      error(string.format("onnx model: expected %d inputs (%s), got %d", #self.input_names,
        table.concat(self.input_names, ", "), #given), 2)
    end
    for i, name in ipairs(self.input_names) do
      if not tensor.is_tensor(given[i]) then
        error(string.format("onnx model: input %d ('%s') must be a tensor, got %s", i, name, type(given[i])), 2)
      end
      values[name] = given[i]
    end
  end
  return table.unpack(onnx.run_graph(self.graph, values, host, self.opset))
end

function Model:__tostring()
  return string.format("onnx.Model(%d nodes, inputs: %s; outputs: %s)", #self.graph.nodes,
    table.concat(self.input_names, ", "), table.concat(self.output_names, ", "))
end

-- onnx.export(fn_or_module, example_inputs, path, opts): traces one call and
-- writes an ONNX model (stdlib/onnx_export.lua).
function onnx.export(...)
  return require("lazylua.onnx_export").export(...)
end

return onnx
