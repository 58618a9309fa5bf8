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
local op_modules = {"onnx_ops_math", "onnx_ops_nn", "onnx_ops_shape", "onnx_ops_vision", "onnx_ops_rnn"}
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
-- The most inputs each op takes (in any opset lazylua implements); a node
-- with more is malformed. Variadic ops (Concat, Sum, Max, Einsum ...)
-- have no entry.
onnx.max_inputs = {}
for count, names in pairs({
  [0] = "Constant",
  [1] = "Abs Acos Acosh Asin Asinh Atan Atanh Ceil Celu Cos Cosh Elu Erf Exp Floor HardSigmoid HardSwish " ..
    "Gelu Hardmax Identity IsInf IsNaN LeakyRelu Log LogSoftmax Mish Neg Not Reciprocal Relu Round Selu Shrink " ..
    "Sigmoid Sign Sin Sinh Softmax Softplus Softsign Sqrt Tan Tanh ThresholdedRelu Shape Size NonZero " ..
    "Flatten Transpose Det GlobalAveragePool GlobalMaxPool LRN LpNormalization MeanVarianceNormalization " ..
    "DynamicQuantizeLinear Cast EyeLike DepthToSpace SpaceToDepth Unique ConstantOfShape AveragePool MaxPool " ..
    "ArgMax ArgMin ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp ReduceMax ReduceMean ReduceMin ReduceProd " ..
    "ReduceSumSquare",
  [2] = "Add Sub Mul Div Pow Mod BitShift And Or Xor Equal Greater GreaterOrEqual Less LessOrEqual PRelu " ..
    "CastLike MatMul Gather GatherElements GatherND Expand Tile Reshape Compress CumSum ReverseSequence " ..
    "ReduceSum Squeeze Unsqueeze Split Trilu TopK Upsample GridSample",
  [3] = "Clip Where Gemm Conv ConvTranspose DequantizeLinear Range OneHot RoiAlign InstanceNormalization " ..
    "LayerNormalization Dropout MaxUnpool Scatter ScatterElements ScatterND NegativeLogLikelihoodLoss " ..
    "SoftmaxCrossEntropyLoss",
  [4] = "ConvInteger MatMulInteger Pad Resize",
  [5] = "Slice NonMaxSuppression BatchNormalization",
  [6] = "RNN GRU",
  [8] = "LSTM",
}) do
  for name in names:gmatch("%S+") do onnx.max_inputs[name] = count end
end

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

-- Whether input `slot` is known on the host (an initializer, a Constant,
-- a host op's output): reading it with ctx:host costs no sync.
function Context:on_host(slot)
  return self.host_inputs[slot] == true
end

-- The values of a small (shape-like) tensor as a flat Lua list.
function Context:host(t)
  if t == nil then return nil end
  local values = t:reshape(-1):tolist()
  return values
end

-- Every node of `graph` and of its subgraphs (If, Loop, Scan bodies) whose
-- op lazylua lacks, as one error listing each op type once with a node
-- that uses it: a model is refused at load, not at its first call.
local function check_ops(graph, opset_of)
  local missing, order = {}, {}
  local function visit(g, depth)
    if depth > 64 then error("onnx.load: subgraphs nested too deeply (more than 64)", 0) end
    for _, node in ipairs(g.nodes) do
      local domain = node.domain == "ai.onnx" and "" or node.domain
      if domain ~= "" or onnx.ops[node.op_type] == nil then
        local key = domain .. "." .. node.op_type
        local entry = missing[key]
        if entry == nil then
          entry = {text = describe_node(node, opset_of[domain] or 0), count = 0}
          missing[key], order[#order + 1] = entry, key
        end
        entry.count = entry.count + 1
      end
      for _, value in pairs(node.attributes or {}) do
        if type(value) == "table" then
          if value.nodes then visit(value, depth + 1) end
          for _, item in ipairs(value) do
            if type(item) == "table" and item.nodes then visit(item, depth + 1) end
          end
        end
      end
    end
  end
  visit(graph, 0)
  if #order == 0 then return end
  local parts = {}
  for i, key in ipairs(order) do
    local entry = missing[key]
    local more = entry.count - 1
    parts[i] = entry.text .. (more > 0 and string.format(" and %d more node%s", more, more == 1 and "" or "s") or "")
  end
  error(string.format("onnx.load: unsupported: %d op type%s lazylua lacks: %s", #order, #order == 1 and "" or "s",
    table.concat(parts, "; ")), 3)
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
  -- patterns with a faster one-op form (the exact GELU), rewritten once
  local graph = require("lazylua.onnx_rewrite").fuse_gelu(decoded.graph)
  for _, list in ipairs({graph.inputs, graph.outputs}) do
    for _, value in ipairs(list) do
      if value.kind then
        error(string.format("onnx.load: unsupported: graph value '%s' is a %s (lazylua values are tensors)",
          value.name, value.kind), 2)
      end
    end
  end
  check_ops(graph, decoded.opset)
  local self = setmetatable({
    decoded = decoded, graph = graph, opset = decoded.opset,
    initializers = {}, parameter_list = {}, input_names = {}, output_names = {}, recorded_calls = {},
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

-- The file functions exist only where the native module has the safe file
-- helpers (interp/file_bytes.h): an embedding sandbox reads and writes no
-- files, so there onnx.load, onnx.read_tensor and onnx.export are nil (a
-- host hands a model over as bytes: onnx.from_table(native.onnx_decode_model(bytes))).
if native.read_file then
  -- protobuf's limit for one message: no ONNX file can be larger, and a
  -- larger one is refused before it is read.
  local max_file_bytes = (1 << 31) - 1

  -- Loads an .onnx file.
  function onnx.load(path, ...)
    if type(path) ~= "string" then error("onnx.load: expected a file path, got " .. type(path), 2) end
    -- no options (PyTorch's load_external_data is not supported): refused, not dropped
    if select("#", ...) > 0 then error("onnx.load: takes a path only, no options", 2) end
    local model = onnx.from_table(native.onnx_decode_model(native.read_file(path, "onnx.load", max_file_bytes)))
    model.source = path:match("[^/]*$")  -- names its nodes' ops: "model.onnx: node ..."
    return model
  end

  -- Reads a TensorProto file (a test case's input_0.pb): tensor, name, and
  -- the ONNX element type in the file (1 FLOAT, 4 UINT16, ...).
  function onnx.read_tensor(path)
    if type(path) ~= "string" then
      error("onnx.read_tensor: expected a file path, got " .. type(path), 2)
    end
    return native.onnx_decode_tensor(native.read_file(path, "onnx.read_tensor", max_file_bytes))
  end
end

-- The initializers of float type: the trainable tensors, in file order.
function Model:parameters()
  local list = {}
  for i, t in ipairs(self.parameter_list) do list[i] = t end
  return list
end

-- Runs one node's op function (eagerly when `eager`: its output must be
-- data) and returns its results packed. An error raised inside it by a
-- tensor op ("reshape: ...") gets the node's description in front, so a
-- model's user learns which node failed; ctx:error's messages name it
-- already. Errors deferred to a sync are raised there, by the sync, with
-- the Lua line of the model call (docs/onnx.md).
local eager_call = native.onnx_eager_call
local function node_results(step, ok, ...)
  if ok then return table.pack(...) end
  local message = ...
  if type(message) ~= "string" or message:find("^onnx: ") or message:find("interrupted!$") then
    error(message, 0)
  end
  error(string.format("onnx: %s: %s", step.description, message), 0)
end

local function run_node(step, ctx, inputs, eager)
  if eager then return node_results(step, pcall(eager_call, step.op, ctx, inputs, step.attributes)) end
  return node_results(step, pcall(step.op, ctx, inputs, step.attributes))
end

-- Each node's location label, "model.onnx: node 'conv1' (Conv)" (its index
-- when unnamed), made once per graph and source (the file's base name).
local node_labels = setmetatable({}, {__mode = "k"})
local function labels_of(graph, source)
  local labels = node_labels[graph]
  if labels and labels.source == source then return labels end
  labels = {source = source}
  for index, node in ipairs(graph.nodes) do
    labels[index] = string.format("%s: node %s (%s%s)", source,
      node.name ~= "" and "'" .. node.name .. "'" or index, node.domain ~= "" and node.domain .. "." or "", node.op_type)
  end
  node_labels[graph] = labels
  return labels
end

-- What a call needs of each node that stays the same from call to call
-- (its op function, opset, label, the checks of its inputs and outputs
-- against the rest of the graph), made when a call first reaches the node
-- and kept per graph, opset table and source. A step also remembers the
-- last results of a node that ran on the host, with what they were computed
-- from (see host_results).
local prepared_graphs = setmetatable({}, {__mode = "k"})

local function prepared_of(graph, opset_of, source)
  local prepared = prepared_graphs[graph]
  if prepared and prepared.source == source and prepared.opset_of == opset_of and prepared.nodes == graph.nodes then
    return prepared
  end
  local graph_outputs = {}
  for _, output in ipairs(type(graph.outputs) == "table" and graph.outputs or {}) do
    if type(output) == "table" and output.name ~= nil then graph_outputs[output.name] = true end
  end
  prepared = {source = source, opset_of = opset_of, nodes = graph.nodes, steps = {}, writers = {},
    graph_outputs = graph_outputs}
  prepared_graphs[graph] = prepared
  return prepared
end

-- Ops whose output depends on their input's shape only, not its values.
local shape_only = {Shape = true, Size = true}

-- The step of node `index`, made on the call that first reaches it: the
-- errors it finds are raised where run_graph raised them before (a step is
-- kept only once these pass, so a later call raises them again).
local function step_of(prepared, graph, index, node)
  local step = prepared.steps[index]
  if step then return step end
  local domain = node.domain == "ai.onnx" and "" or node.domain
  local opset = prepared.opset_of[domain] or 0
  local op = domain == "" and onnx.ops[node.op_type] or nil
  if op == nil then
    error(string.format("onnx: %s: unsupported: no such op in lazylua", describe_node(node, opset)), 0)
  end
  local most = onnx.max_inputs[node.op_type]
  if most and #node.inputs > most then
    error(string.format("onnx: %s: %d inputs given, the op takes at most %d", describe_node(node, opset),
      #node.inputs, most), 0)
  end
  local description = describe_node(node, opset)
  -- A second node writing a name breaks the graph's single assignment:
  -- found here once, raised after the node runs, as each call did before.
  local duplicates, memoizable = {}, true
  for k, name in ipairs(node.outputs) do
    if name ~= "" then
      if prepared.writers[name] then
        duplicates[k] = string.format("onnx: %s: output '%s' is already %s (a graph assigns each name once)",
          description, name, prepared.writers[name])
      end
      -- the user may change a graph output in place: it is made anew each call
      if prepared.graph_outputs[name] then memoizable = false end
    end
  end
  for k, name in ipairs(node.outputs) do
    if name ~= "" and not duplicates[k] then prepared.writers[name] = "the output of " .. description end
  end
  step = {
    node = node, op = op, opset = opset, attributes = node.attributes, inputs = node.inputs, outputs = node.outputs,
    description = description, label = labels_of(graph, prepared.source)[index],
    always_host = always_host[node.op_type] == true, host_op = onnx.host_ops[node.op_type] == true,
    shape_only = shape_only[node.op_type] == true, memoizable = memoizable, duplicates = duplicates,
    ctx = setmetatable({node = node, opset = opset, domain = domain, opset_of = prepared.opset_of,
      source = prepared.source}, Context),
  }
  prepared.steps[index] = step
  return step
end

-- A node run on the host (shape arithmetic, constants) computes the same
-- values from the same inputs: its results of the last call are used again
-- when its inputs are the same tensors as then (they are host values:
-- initializers, constants and other such results, which no op changes in
-- place), or, for Shape and Size, tensors of the same shape. So a steady
-- call of a model runs none of them; only the nodes that record ops do.
-- Nodes writing a graph output are run every call (the caller owns what it
-- gets). Returns the kept results, or nil.
local function host_results(step, inputs)
  local memo = step.memo
  if memo == nil or memo.count ~= inputs.n then return nil end
  if step.shape_only then
    local x, dims = inputs[1], memo.dims
    if x == nil or x:dim() ~= #dims then return nil end
    for d = 1, #dims do
      if x:size(d) ~= dims[d] then return nil end
    end
  else
    local kept = memo.inputs
    for k = 1, inputs.n do
      if not rawequal(inputs[k], kept[k]) then return nil end
    end
  end
  return memo.results
end

local function remember_host_results(step, inputs, results)
  local memo = {count = inputs.n, results = results}
  if step.shape_only then
    memo.dims = inputs[1] and inputs[1]:size() or {}
  else
    memo.inputs = {}
    for k = 1, inputs.n do memo.inputs[k] = inputs[k] end
  end
  step.memo = memo
end

-- Runs one graph: `values` maps names to tensors (inputs, initializers);
-- `host` marks the names known on the host. Returns the graph's outputs.
-- The ops each node records are located at its label, not at the Lua line
-- of the call (profiles, deferred errors); `source` names the model there
-- (a nested graph gets its op's ctx.source).
function onnx.run_graph(graph, values, host, opset_of, source)
  source = source or "onnx"
  local prepared = prepared_of(graph, opset_of, source)
  local steps, with_location = prepared.steps, tensor.with_location
  for index, node in ipairs(graph.nodes) do
    local step = steps[index] or step_of(prepared, graph, index, node)
    local names = step.inputs
    local count = #names
    local inputs, all_host, host_inputs = {n = count}, true, {}
    for k = 1, count do
      local name = names[k]
      if name ~= "" then
        local value = values[name]
        if value == nil then
          error(string.format("onnx: %s: input '%s' is not computed before it", step.description, name), 0)
        end
        inputs[k] = value
        local known = host[name] == true
        host_inputs[k] = known
        all_host = all_host and known
      end
    end
    local on_host = step.always_host or (all_host and step.host_op)
    local results = on_host and step.memoizable and host_results(step, inputs)
    if not results then
      local ctx = step.ctx
      ctx.host_inputs = host_inputs
      results = with_location(step.label, run_node, step, ctx, inputs, on_host and not step.always_host)
      if on_host and step.memoizable then remember_host_results(step, inputs, results) end
    end
    local outputs = step.outputs
    for k = 1, #outputs do
      local name = outputs[k]
      if name ~= "" then
        if step.duplicates[k] then error(step.duplicates[k], 0) end
        if values[name] ~= nil then
          error(string.format("onnx: %s: output '%s' is already a graph input or initializer (a graph assigns " ..
            "each name once)", step.description, name), 0)
        end
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

-- Calls with inputs of the same shapes record the same graph. The first is
-- recorded for replay (tensor/call_replay.h) and later ones make its nodes
-- again from the new inputs, without running each node's op function: a
-- small model's call cost that much Lua. The last few input shapes are
-- kept. A call that cannot be replayed (one that records gradients, reads
-- a value on the host, draws random numbers) runs every node every time.
local max_recorded_calls = 4

local function all_tensors(list)
  for i = 1, #list do
    if not tensor.is_tensor(list[i]) then return false end
  end
  return true
end

local function run_model(self, inputs, watched, values, host)
  local recorded = self.recorded_calls
  if not all_tensors(inputs) then return onnx.run_graph(self.graph, values, host, self.opset, self.source) end
  for i = 1, #recorded do
    local outputs = native.call_replay(recorded[i], inputs, watched)
    if outputs then
      if i > 1 then table.insert(recorded, 1, table.remove(recorded, i)) end
      return outputs
    end
  end
  -- The graph reads stand-ins holding just the inputs' values (a view's
  -- base is not part of what is recorded).
  local stand_ins = native.call_recording_start(inputs, watched)
  if not stand_ins then return onnx.run_graph(self.graph, values, host, self.opset, self.source) end
  for i, name in ipairs(self.input_names) do values[name] = stand_ins[i] end
  local ok, outputs = pcall(onnx.run_graph, self.graph, values, host, self.opset, self.source)
  if not ok or not all_tensors(outputs) then
    native.call_recording_cancel()
    if not ok then error(outputs, 0) end
    return outputs
  end
  -- A recorded call returns its outputs as the replays will (the same graph).
  local call, replayed_outputs = native.call_recording_finish(stand_ins, outputs, watched)
  if call then
    table.insert(recorded, 1, call)
    recorded[max_recorded_calls + 1] = nil
    return replayed_outputs
  end
  return outputs
end

-- model(x1, x2, ...) in the order of the graph's inputs, or model{name =
-- tensor, ...}: the graph's outputs, in order.
function Model:__call(...)
  local given = {...}
  local values, host, watched = {}, {}, {}
  for name, t in pairs(self.initializers) do
    values[name] = t
    host[name] = not float_types[t:dtype()] or nil
    watched[#watched + 1] = t
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
  local inputs = {}
  for i, name in ipairs(self.input_names) do inputs[i] = values[name] end
  return table.unpack(run_model(self, inputs, watched, values, host))
end

function Model:__tostring()
  return string.format("onnx.Model(%d nodes, inputs: %s; outputs: %s)", #self.graph.nodes,
    table.concat(self.input_names, ", "), table.concat(self.output_names, ", "))
end

-- onnx.export(fn_or_module, example_inputs, path, opts): traces one call and
-- writes an ONNX model (stdlib/onnx_export.lua). Not in a sandbox (above).
if native.write_file then
  function onnx.export(...)
    return require("lazylua.onnx_export").export(...)
  end
end

return onnx
