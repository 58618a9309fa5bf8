-- onnx_rewrite.lua - a pass over an imported graph's node list, run once at
-- load time (onnx.from_table), that turns the exact-GELU pattern exporters
-- write into one Gelu node (tensor.gelu: one vectorized function instead of
-- a division, an erf and three more ops per element).
--
-- PyTorch (nn.GELU(), F.gelu) exports 0.5 x (1 + erf(x / sqrt 2)) as
--   d = Div(x, sqrt2); e = Erf(d); a = Add(e, 1); m = Mul(x, a); y = Mul(m, 0.5)
-- and lazylua's own export and hand-written models as Mul(x, 1/sqrt2) and
-- y = Mul(Mul(x, 0.5), a) or Mul(x, Mul(a, 0.5)). Every commutative operand
-- order is matched. A match is rewritten only when
--   - each constant is a one-element float tensor (a Constant node or an
--     initializer) equal to its value within float32 rounding, and
--   - every intermediate value (d, e, a and the partial product) has the one
--     consumer of the pattern, is not a graph output and is not read by a
--     subgraph, so nothing else sees it disappear.
-- The Gelu node takes the place of the pattern's last node and the name of its
-- Erf node (so errors and profiles still name a node of the file).
local tensor = require "tensor"

local rewrite = {}

-- float32 rounding of the constants (the exporter writes float(sqrt 2)):
-- 2^-23 of the value, an ulp at most.
local function close_to(value, target)
  return math.abs(value - target) <= math.abs(target) * 2 ^ -23
end

-- Every name read by a node of `graph` or of a subgraph nested in one (a
-- subgraph may read the outer graph's values by name): name -> count.
local function count_reads(graph, counts)
  for _, node in ipairs(graph.nodes) do
    for _, name in ipairs(type(node) == "table" and type(node.inputs) == "table" and node.inputs or {}) do
      if name ~= "" then counts[name] = (counts[name] or 0) + 1 end
    end
    local attributes = type(node) == "table" and type(node.attributes) == "table" and node.attributes or {}
    for _, value in pairs(attributes) do
      if type(value) == "table" then
        local subgraphs = type(value.nodes) == "table" and {value} or value  -- GRAPH or GRAPHS
        for _, subgraph in ipairs(subgraphs) do
          if type(subgraph) == "table" and type(subgraph.nodes) == "table" then count_reads(subgraph, counts) end
        end
      end
    end
  end
  return counts
end

-- The scalar value of a one-element float constant called `name`, or nil.
local function scalar_constants(graph)
  local tensors = {}
  for _, entry in ipairs(graph.initializers or {}) do tensors[entry.name] = entry.tensor end
  for _, node in ipairs(graph.nodes) do
    if node.op_type == "Constant" and (node.domain == "" or node.domain == "ai.onnx") and node.outputs[1] then
      local attrs = node.attributes or {}
      if attrs.value ~= nil then
        tensors[node.outputs[1]] = attrs.value
      elseif math.type(attrs.value_float) == "float" then
        tensors[node.outputs[1]] = attrs.value_float
      end
    end
  end
  return function(name)
    local t = tensors[name]
    if math.type(t) == "float" then return t, 0 end
    if not tensor.is_tensor(t) or (t:dtype() ~= "f32" and t:dtype() ~= "f64") or t:numel() ~= 1 then return nil end
    return t:reshape(-1):tolist()[1], t:dim()
  end
end

-- The node writing each name, and its position.
local function producers(graph)
  local by_name = {}
  for index, node in ipairs(graph.nodes) do
    for _, name in ipairs(node.outputs) do
      if name ~= "" then by_name[name] = {node = node, index = index} end
    end
  end
  return by_name
end

local function is_op(node, op_type)
  return node.op_type == op_type and (node.domain == "" or node.domain == "ai.onnx") and #node.outputs == 1
end

-- Finds the GELU patterns of `graph`. Returns a list of matches: {x, y,
-- last (index of the node the Gelu replaces), remove (indices), name,
-- constant_rank (the largest rank of the constants: they broadcast x up to
-- it)}.
local function find_gelus(graph, is_graph_output)
  local reads, constant, by_name = count_reads(graph, {}), scalar_constants(graph), producers(graph)
  local consumers = {}
  for index, node in ipairs(graph.nodes) do
    for _, name in ipairs(node.inputs) do
      if name ~= "" then
        consumers[name] = consumers[name] or {}
        table.insert(consumers[name], {node = node, index = index})
      end
    end
  end
  -- The one node reading `name`, when nothing else (no graph output, no
  -- second reader, no subgraph) sees it.
  local function sole_reader(name)
    local list = consumers[name]
    if is_graph_output[name] or reads[name] ~= 1 or list == nil or #list ~= 1 then return nil end
    return list[1]
  end
  -- For a binary node with a constant equal to `target` as one operand: the
  -- other operand's name and the constant's rank (only the second for Div).
  local function with_constant(node, target, commutative)
    if #node.inputs ~= 2 then return nil end
    local a, b = node.inputs[1], node.inputs[2]
    local value, rank = constant(b)
    if value and close_to(value, target) then return a, rank end
    if commutative then
      value, rank = constant(a)
      if value and close_to(value, target) then return b, rank end
    end
    return nil
  end
  local matches = {}
  for erf_index, erf in ipairs(graph.nodes) do
    if is_op(erf, "Erf") and #erf.inputs == 1 then
      local scaled = by_name[erf.inputs[1]]
      local x, rank1
      if scaled and is_op(scaled.node, "Div") then
        x, rank1 = with_constant(scaled.node, math.sqrt(2), false)
      elseif scaled and is_op(scaled.node, "Mul") then
        x, rank1 = with_constant(scaled.node, 1 / math.sqrt(2), true)
      end
      local add = x and sole_reader(erf.inputs[1]) and sole_reader(erf.outputs[1])
      local erf_plus_one, rank2
      if add and is_op(add.node, "Add") then erf_plus_one, rank2 = with_constant(add.node, 1, true) end
      local mul1 = erf_plus_one == erf.outputs[1] and sole_reader(add.node.outputs[1])
      if mul1 and is_op(mul1.node, "Mul") and #mul1.node.inputs == 2 then
        local a_name = add.node.outputs[1]
        local other = mul1.node.inputs[1] == a_name and mul1.node.inputs[2] or mul1.node.inputs[1]
        local remove, y, last, rank3 = {scaled.index, erf_index, add.index}, nil, nil, nil
        if other == x then
          -- m = x a; y = m 0.5
          local mul2 = sole_reader(mul1.node.outputs[1])
          if mul2 and is_op(mul2.node, "Mul") and with_constant(mul2.node, 0.5, true) == mul1.node.outputs[1] then
            _, rank3 = with_constant(mul2.node, 0.5, true)
            remove[#remove + 1] = mul1.index
            y, last = mul2.node.outputs[1], mul2.index
          end
        elseif constant(other) and close_to(constant(other), 0.5) then
          -- h = a 0.5; y = x h
          local mul2 = sole_reader(mul1.node.outputs[1])
          if mul2 and is_op(mul2.node, "Mul") and #mul2.node.inputs == 2 then
            local i1, i2 = mul2.node.inputs[1], mul2.node.inputs[2]
            if (i1 == x and i2 == mul1.node.outputs[1]) or (i2 == x and i1 == mul1.node.outputs[1]) then
              _, rank3 = constant(other)
              remove[#remove + 1] = mul1.index
              y, last = mul2.node.outputs[1], mul2.index
            end
          end
        else
          -- h = x 0.5 (read by this Mul only); y = h a
          local half = by_name[other]
          if half and is_op(half.node, "Mul") and sole_reader(other) and with_constant(half.node, 0.5, true) == x then
            _, rank3 = with_constant(half.node, 0.5, true)
            remove[#remove + 1] = half.index
            y, last = mul1.node.outputs[1], mul1.index
          end
        end
        if y then
          matches[#matches + 1] = {x = x, y = y, last = last, remove = remove, name = erf.name,
            constant_rank = math.max(rank1, rank2, rank3)}
        end
      end
    end
  end
  return matches
end

-- Whether the graph has the shape the pass reads (a hand-built table may
-- not: then it runs as given and its errors come from onnx.run_graph).
local function well_formed(graph)
  if type(graph) ~= "table" or type(graph.nodes) ~= "table" then return false end
  if graph.outputs ~= nil and type(graph.outputs) ~= "table" then return false end
  if graph.initializers ~= nil and type(graph.initializers) ~= "table" then return false end
  for _, output in ipairs(graph.outputs or {}) do
    if type(output) ~= "table" then return false end
  end
  for _, entry in ipairs(graph.initializers or {}) do
    if type(entry) ~= "table" then return false end
  end
  for _, node in ipairs(graph.nodes) do
    if type(node) ~= "table" or type(node.inputs) ~= "table" or type(node.outputs) ~= "table" then return false end
    if node.attributes ~= nil and type(node.attributes) ~= "table" then return false end
    for _, list in ipairs({node.inputs, node.outputs}) do
      for _, name in ipairs(list) do
        if type(name) ~= "string" then return false end
      end
    end
  end
  return true
end

-- `graph` with each GELU pattern replaced by one Gelu node (the same table
-- when there is none; else a shallow copy with a new node list: the caller's
-- decoded table is left as it was). The Gelu node carries
-- `gelu_constant_rank`, the rank its constants broadcast x up to.
function rewrite.fuse_gelu(graph)
  if not well_formed(graph) then return graph, 0 end  -- left to the errors of the call
  local is_graph_output = {}
  for _, output in ipairs(graph.outputs or {}) do is_graph_output[output.name] = true end
  local matches = find_gelus(graph, is_graph_output)
  if #matches == 0 then return graph, 0 end
  local removed, replaced = {}, {}
  for _, match in ipairs(matches) do
    for _, index in ipairs(match.remove) do removed[index] = true end
    replaced[match.last] = {op_type = "Gelu", domain = "", name = match.name, inputs = {match.x},
      outputs = {match.y}, attributes = {}, gelu_constant_rank = match.constant_rank}
  end
  local nodes = {}
  for index, node in ipairs(graph.nodes) do
    if replaced[index] then
      nodes[#nodes + 1] = replaced[index]
    elseif not removed[index] then
      nodes[#nodes + 1] = node
    end
  end
  local copy = {}
  for key, value in pairs(graph) do copy[key] = value end
  copy.nodes = nodes
  return copy, #matches
end

return rewrite
