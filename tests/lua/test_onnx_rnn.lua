-- test_onnx_rnn.lua - ONNX's RNN, GRU and LSTM (stdlib/onnx_ops_rnn.lua) in
-- one-node models built with onnx.from_table, checked against a plain
-- step-by-step reference in Lua numbers below (one sequence at a time, the
-- spec's equations written out): reverse and bidirectional, sequence_lens
-- (on the host and computed in the graph), layout 1, initial states, clip,
-- linear_before_reset 0 and 1, peepholes, input_forget, activations, a
-- subset of outputs; bad nodes; and onnx.load's list of unsupported ops.
local h = dofile("helpers.lua")
local onnx = require "onnx"

local GATES = {RNN = 1, GRU = 3, LSTM = 4}
local TOL = {rel = 1e-5, abs = 1e-6}
local check_case

-- Values k/64 for k in [-40, 40] (exact in f32), from a small LCG.
local seed = 12345
local function next_value()
  seed = (seed * 1103515245 + 12345) % 2147483648
  return (seed % 81 - 40) / 64
end
local function values(shape, depth)
  depth = depth or 1
  local list = {}
  for i = 1, shape[depth] do
    list[i] = depth == #shape and next_value() or values(shape, depth + 1)
  end
  return list
end
local function zeros(n)
  local list = {}
  for i = 1, n do list[i] = 0 end
  return list
end
local function copy(list)
  local out = {}
  for i, v in ipairs(list) do out[i] = v end
  return out
end

local function sigmoid(x) return 1 / (1 + math.exp(-x)) end
local plain = {Sigmoid = sigmoid, Tanh = h.tanh, Relu = function(x) return math.max(x, 0) end}

-- The spec's equations for one node, on nested lists in layout 0:
-- X [T][N][in], W [D][G*H][in], R [D][G*H][H], B [D][2*G*H], lens [N],
-- h0/c0 [D][N][H], P [D][3*H]; acts[d] = {f, g, h} as Lua functions.
-- Returns Y [T][D][N][H], Y_h and Y_c [D][N][H].
local function reference(kind, c)
  local T, N, H = #c.X, #c.X[1], c.hidden
  local D = c.direction == "bidirectional" and 2 or 1
  local G = GATES[kind]
  local Y, Yh, Yc = {}, {}, {}
  for t = 1, T do
    Y[t] = {}
    for d = 1, D do
      Y[t][d] = {}
      for n = 1, N do Y[t][d][n] = zeros(H) end
    end
  end
  local function clip(v)
    if c.clip then return math.max(-c.clip, math.min(c.clip, v)) end
    return v
  end
  for d = 1, D do
    local W, R, f = c.W[d], c.R[d], c.acts[d]
    local Wb, Rb = zeros(G * H), zeros(G * H)
    if c.B then
      for i = 1, G * H do Wb[i], Rb[i] = c.B[d][i], c.B[d][G * H + i] end
    end
    local reverse = c.direction == "reverse" or d == 2
    Yh[d], Yc[d] = {}, {}
    for n = 1, N do
      local length = c.lens and c.lens[n] or T
      local hidden = c.h0 and copy(c.h0[d][n]) or zeros(H)
      local cell = c.c0 and copy(c.c0[d][n]) or zeros(H)
      for s = 1, length do
        local t = reverse and length - s + 1 or s
        local x = c.X[t][n]
        local function wx(g, j)
          local sum = Wb[(g - 1) * H + j]
          for k = 1, #x do sum = sum + W[(g - 1) * H + j][k] * x[k] end
          return sum
        end
        local function rh(g, j, v)
          local sum = Rb[(g - 1) * H + j]
          for k = 1, H do sum = sum + R[(g - 1) * H + j][k] * v[k] end
          return sum
        end
        local new_h, new_c = {}, {}
        if kind == "RNN" then
          for j = 1, H do new_h[j] = f[1](clip(wx(1, j) + rh(1, j, hidden))) end
        elseif kind == "GRU" then
          local z, r, reset = {}, {}, {}
          for j = 1, H do
            z[j] = f[1](clip(wx(1, j) + rh(1, j, hidden)))
            r[j] = f[1](clip(wx(2, j) + rh(2, j, hidden)))
            reset[j] = r[j] * hidden[j]
          end
          for j = 1, H do
            local candidate
            if c.linear_before_reset then
              candidate = f[2](clip(wx(3, j) + r[j] * rh(3, j, hidden)))
            else
              candidate = f[2](clip(wx(3, j) + rh(3, j, reset)))
            end
            new_h[j] = (1 - z[j]) * candidate + z[j] * hidden[j]
          end
        else
          local P = c.P and c.P[d] or zeros(3 * H)
          for j = 1, H do
            local i = f[1](clip(wx(1, j) + rh(1, j, hidden) + P[j] * cell[j]))
            local forget = c.input_forget and 1 - i or f[1](clip(wx(3, j) + rh(3, j, hidden) + P[2 * H + j] * cell[j]))
            local candidate = f[2](clip(wx(4, j) + rh(4, j, hidden)))
            new_c[j] = forget * cell[j] + i * candidate
            local o = f[1](clip(wx(2, j) + rh(2, j, hidden) + P[H + j] * new_c[j]))
            new_h[j] = o * f[3](clip(new_c[j]))
          end
        end
        hidden, cell = new_h, new_c
        Y[t][d][n] = copy(hidden)
      end
      Yh[d][n], Yc[d][n] = hidden, cell
    end
  end
  return Y, Yh, Yc
end

-- A case's data: sizes T, N, in, H, D and which optional parts it has.
local function make_case(kind, spec)
  local D = spec.direction == "bidirectional" and 2 or 1
  local G, H = GATES[kind], spec.hidden
  local c = {hidden = H, direction = spec.direction or "forward", clip = spec.clip, lens = spec.lens,
    linear_before_reset = spec.linear_before_reset, input_forget = spec.input_forget}
  c.X = values({spec.T, spec.N, spec.input})
  c.W, c.R = values({D, G * H, spec.input}), values({D, G * H, H})
  if spec.bias then c.B = values({D, 2 * G * H}) end
  if spec.initial then
    c.h0 = values({D, spec.N, H})
    if kind == "LSTM" then c.c0 = values({D, spec.N, H}) end
  end
  if spec.peepholes then c.P = values({D, 3 * H}) end
  c.acts = {}
  local names = spec.activations
  local per = #({RNN = {1}, GRU = {1, 2}, LSTM = {1, 2, 3}})[kind]
  for d = 1, D do
    c.acts[d] = {}
    for k = 1, per do
      local name = names and names[(d - 1) * per + k] or ({RNN = {"Tanh"}, GRU = {"Sigmoid", "Tanh"},
        LSTM = {"Sigmoid", "Tanh", "Tanh"}})[kind][k]
      c.acts[d][k] = spec.functions and spec.functions[(d - 1) * per + k] or plain[name]
    end
  end
  return c
end

-- Swaps dims 1 and 2 of a nested list.
local function swap12(list)
  local out = {}
  for j = 1, #list[1] do
    out[j] = {}
    for i = 1, #list do out[j][i] = list[i][j] end
  end
  return out
end

-- The one-node model of a case: X is the graph's input, everything else an
-- initializer (sequence_lens a graph input when `lens_input`).
local function build(kind, c, spec)
  local layout = spec.layout or 0
  local attributes = {hidden_size = spec.hidden_attr or c.hidden, direction = spec.direction}
  if layout ~= 0 then attributes.layout = layout end
  if spec.clip then attributes.clip = spec.clip end
  if spec.linear_before_reset ~= nil then attributes.linear_before_reset = spec.linear_before_reset and 1 or 0 end
  if spec.input_forget then attributes.input_forget = 1 end
  if spec.activations then attributes.activations = spec.activations end
  if spec.activation_alpha then attributes.activation_alpha = spec.activation_alpha end
  if spec.activation_beta then attributes.activation_beta = spec.activation_beta end
  for k, v in pairs(spec.attributes or {}) do attributes[k] = v end
  local f32 = {dtype = "f32"}
  local inits, names = {}, {"X", "W", "R", "", "", "", "", ""}
  local function init(slot, name, t)
    inits[#inits + 1] = {name = name, tensor = t}
    names[slot] = name
  end
  init(2, "W", spec.W_tensor or tensor.new(c.W, f32))
  init(3, "R", tensor.new(c.R, f32))
  if c.B then init(4, "B", tensor.new(c.B, f32)) end
  local graph_inputs = {{name = "X", elem_type = "f32"}}
  if c.lens then
    if spec.lens_input then
      names[5] = "lens"
      graph_inputs[2] = {name = "lens", elem_type = "i32"}
    else
      init(5, "lens", tensor.new(c.lens, {dtype = "i32"}))
    end
  end
  local function state(list) return tensor.new(layout == 1 and swap12(list) or list, f32) end
  if c.h0 then init(6, "h0", state(c.h0)) end
  if c.c0 then init(7, "c0", state(c.c0)) end
  if c.P then init(8, "P", tensor.new(c.P, f32)) end
  local last = 0
  for k = 1, 8 do if names[k] ~= "" then last = k end end
  local node_inputs = {table.unpack(names, 1, last)}
  local outputs = spec.outputs or (kind == "LSTM" and {"Y", "Y_h", "Y_c"} or {"Y", "Y_h"})
  local graph_outputs = {}
  for _, name in ipairs(outputs) do
    if name ~= "" then graph_outputs[#graph_outputs + 1] = {name = name, elem_type = "f32"} end
  end
  local model = onnx.from_table({ir_version = 8, opset = {[""] = spec.opset or (layout == 1 and 14 or 13)},
    graph = {name = "g", nodes = {{name = "rnn1", op_type = kind, domain = "", inputs = node_inputs,
      outputs = outputs, attributes = attributes}}, initializers = inits, inputs = graph_inputs,
      outputs = graph_outputs}})
  local x = tensor.new(layout == 1 and swap12(c.X) or c.X, f32)
  if spec.lens_input then return model, {x, tensor.new(c.lens, {dtype = "i32"})} end
  return model, {x}
end

-- Runs a case (recording it) and returns the check that compares every
-- output it asks for with the reference.
local function case(kind, spec)
  local c = make_case(kind, spec)
  local model, inputs = build(kind, c, spec)
  local results = table.pack(model(table.unpack(inputs)))
  return function() return check_case(kind, spec, c, results) end
end

-- Runs the cases of a test as one graph (one compile in native mode),
-- then checks each.
local function run_cases(list)
  local checks = {}
  for i, entry in ipairs(list) do checks[i] = case(entry[1], entry[2]) end
  tensor.mark_step()
  for _, check in ipairs(checks) do check() end
end
local function run_case(kind, spec) run_cases({{kind, spec}}) end

function check_case(kind, spec, c, results)
  local Y, Yh, Yc = reference(kind, c)
  local layout = spec.layout or 0
  local want = {Y = Y, Y_h = Yh, Y_c = Yc}
  local outputs = spec.outputs or (kind == "LSTM" and {"Y", "Y_h", "Y_c"} or {"Y", "Y_h"})
  local k = 0
  for _, name in ipairs(outputs) do
    if name ~= "" then
      k = k + 1
      local got = results[k]
      if layout == 1 then got = name == "Y" and got:permute(2, 3, 1, 4) or got:transpose(1, 2) end
      h.near(got, want[name], TOL)
    end
  end
end

local base = {T = 5, N = 3, input = 3, hidden = 4}
local function with(extra)
  local spec = {}
  for k, v in pairs(base) do spec[k] = v end
  for k, v in pairs(extra) do spec[k] = v end
  return spec
end

h.test("RNN: forward, reverse and bidirectional, with bias and initial state", function()
  local list = {}
  list[#list + 1] = {"RNN", with({})}
  list[#list + 1] = {"RNN", with({direction = "reverse", bias = true, initial = true})}
  list[#list + 1] = {"RNN", with({direction = "bidirectional", bias = true, initial = true})}
  run_cases(list)
end)

h.test("RNN: activations Relu and LeakyRelu (alpha), clip", function()
  local list = {}
  list[#list + 1] = {"RNN", with({direction = "bidirectional", bias = true, activations = {"Relu", "LeakyRelu"},
    activation_alpha = {0.25}, functions = {plain.Relu, function(x) return x < 0 and 0.25 * x or x end}})}
  list[#list + 1] = {"RNN", with({bias = true, clip = 0.3})}
  run_cases(list)
end)

h.test("GRU: linear_before_reset 0 and 1, reverse, bias, initial state", function()
  local list = {}
  list[#list + 1] = {"GRU", with({bias = true, initial = true})}
  list[#list + 1] = {"GRU", with({bias = true, initial = true, linear_before_reset = true})}
  list[#list + 1] = {"GRU", with({direction = "reverse", bias = true, linear_before_reset = true})}
  list[#list + 1] = {"GRU", with({direction = "bidirectional", initial = true})}
  run_cases(list)
end)

h.test("GRU: sequence_lens on the host and computed in the graph, every direction", function()
  local list = {}
  for _, direction in ipairs({"forward", "reverse", "bidirectional"}) do
    list[#list + 1] = {"GRU", with({direction = direction, bias = true, initial = true, lens = {5, 2, 0},
      linear_before_reset = true})}
    list[#list + 1] = {"GRU", with({direction = direction, bias = true, lens = {3, 5, 1}, lens_input = true})}
  end
  list[#list + 1] = {"GRU", with({lens = {5, 5, 5}})}   -- all full: no mask
  run_cases(list)
end)

h.test("LSTM: peepholes, initial states, bias, bidirectional", function()
  local list = {}
  list[#list + 1] = {"LSTM", with({bias = true, initial = true, peepholes = true})}
  list[#list + 1] = {"LSTM", with({direction = "bidirectional", bias = true, initial = true, peepholes = true})}
  list[#list + 1] = {"LSTM", with({direction = "reverse"})}
  run_cases(list)
end)

h.test("LSTM: input_forget, clip, sequence_lens, HardSigmoid with alpha and beta", function()
  local list = {}
  list[#list + 1] = {"LSTM", with({bias = true, input_forget = true, clip = 0.2})}
  list[#list + 1] = {"LSTM", with({direction = "bidirectional", bias = true, initial = true, lens = {4, 0, 5}})}
  list[#list + 1] = {"LSTM", with({bias = true, activations = {"HardSigmoid", "Tanh", "Relu"},
    activation_alpha = {0.3}, activation_beta = {0.4},
    functions = {function(x) return math.max(0, math.min(1, 0.3 * x + 0.4)) end, h.tanh, plain.Relu}})}
  run_cases(list)
end)

h.test("layout 1 (opset 14): batch-first X, states and outputs", function()
  local list = {}
  list[#list + 1] = {"GRU", with({layout = 1, direction = "bidirectional", bias = true, initial = true, lens = {5, 3, 2}})}
  list[#list + 1] = {"LSTM", with({layout = 1, direction = "bidirectional", bias = true, initial = true, peepholes = true})}
  list[#list + 1] = {"RNN", with({layout = 1, initial = true})}
  run_cases(list)
end)

h.test("a subset of the outputs: Y_h only, Y_c only", function()
  local list = {}
  list[#list + 1] = {"GRU", with({bias = true, outputs = {"", "Y_h"}})}
  list[#list + 1] = {"LSTM", with({direction = "bidirectional", bias = true, outputs = {"", "", "Y_c"}})}
  list[#list + 1] = {"LSTM", with({outputs = {"Y"}})}
  run_cases(list)
end)

h.test("a gradient reaches W through the GRU node", function()
  local c = make_case("GRU", with({bias = true}))
  local model, inputs = build("GRU", c, with({bias = true, outputs = {"", "Y_h"}}))
  local y_h = model(table.unpack(inputs))
  y_h:sum():backward()
  local w = model:parameters()[1]
  h.shape(w:grad(), {1, 12, 3})
  local total = 0
  for _, v in ipairs(h.flatten(w:grad():abs():tolist())) do total = total + v end
  assert(total > 0, "the gradient of W is zero")
end)

-- Bad nodes: each error names the node and the process stays usable.
local function refused(kind, spec, ...)
  local needles = table.pack("node 'rnn1' (" .. kind, ...)
  h.err(function()
    local c = make_case(kind, with(spec))
    local model, inputs = build(kind, c, with(spec))
    return model(table.unpack(inputs))
  end, table.unpack(needles, 1, needles.n))
  h.still_works()
end

h.test("bad nodes are errors naming the node", function()
  refused("GRU", {W_tensor = tensor.zeros({1, 12, 5})}, "W has shape [1, 12, 5], expected [1, 12, 3]")
  refused("LSTM", {hidden_attr = 5}, "hidden_size 5 disagrees with R [1, 16, 4]")
  refused("RNN", {activations = {"Swish"}}, "unsupported: activation 'Swish'")
  refused("GRU", {activations = {"Tanh"}}, "activations has 1 names; GRU with 1 direction takes 2")
  refused("GRU", {direction = "sideways"}, "direction 'sideways'")
  refused("RNN", {layout = 1, opset = 13}, "layout is an attribute from opset 14 on")
  refused("GRU", {lens = {6, 1, 1}}, "sequence_lens[0] is 6, outside [0, 5]")
  refused("LSTM", {clip = -1.0}, "clip is -1.0, expected a number > 0")
  -- after the errors, a good node still runs
  run_case("GRU", with({bias = true}))
end)

h.test("onnx.load refuses a model with unsupported ops, listing each op type once", function()
  -- (lazylua has no If: its branches' nodes are listed too)
  local function node(name, op, domain, extra)
    local n = {name = name, op_type = op, domain = domain or "", inputs = {"x"}, outputs = {name .. "_y"},
      attributes = extra or {}}
    return n
  end
  local body = {name = "body", nodes = {node("inner", "FancyOp")}, initializers = {},
    inputs = {}, outputs = {{name = "inner_y", elem_type = "f32"}}}
  local graph = {name = "g", nodes = {node("a", "Relu"), node("b", "Frobnicate"), node("c", "Frobnicate"),
    node("d", "Gelu", "com.example"), node("e", "If", "", {then_branch = body, else_branch = body})},
    initializers = {}, inputs = {{name = "x", elem_type = "f32"}}, outputs = {{name = "a_y", elem_type = "f32"}}}
  local message = h.err(function() return onnx.from_table({ir_version = 8, opset = {[""] = 13}, graph = graph}) end,
    "unsupported: 4 op types lazylua lacks: node 'b' (Frobnicate, opset 13) and 1 more node; " ..
    "node 'd' (com.example.Gelu, opset 0); node 'e' (If, opset 13); node 'inner' (FancyOp, opset 13) and 1 more node")
  assert(not message:find("Relu", 1, true), message)
  h.still_works()
end)

h.done("test_onnx_rnn")
