-- onnx_ops_rnn.lua - ONNX's recurrent ops RNN, GRU and LSTM (opsets 1 to
-- 22 read the same here; `layout` appears at 14). As nn.GRU and nn.LSTM
-- (stdlib/nn_rnn.lua), the input projection of the whole sequence is one
-- matmul and the recurrence is one tensor.scan per direction, so the graph
-- holds one step whatever the sequence length (docs/architecture.md, scan).
--
-- ONNX's gate orders differ from PyTorch's: GRU is z, r, h (PyTorch r, z,
-- n) and LSTM i, o, f, c (PyTorch i, f, g, o); W is [D, G*H, in], R
-- [D, G*H, H], B [D, 2*G*H] (W's biases, then R's), for D directions.
local tensor = require "tensor"
local util = require "lazylua.onnx_util"

local ops = {}

local gate_counts = {RNN = 1, GRU = 3, LSTM = 4}
-- The activations each direction takes, and their defaults.
local default_activations = {RNN = {"Tanh"}, GRU = {"Sigmoid", "Tanh"}, LSTM = {"Sigmoid", "Tanh", "Tanh"}}

-- The activation functions ONNX's recurrent ops name (case-insensitively),
-- with how many of activation_alpha / activation_beta each takes and their
-- defaults. The alpha and beta lists are consumed in order by the
-- activations that take them (as ONNX Runtime reads them).
local activation_kinds = {
  tanh = {make = function() return function(x) return x:tanh() end end},
  sigmoid = {make = function() return function(x) return x:sigmoid() end end},
  relu = {make = function() return function(x) return x:relu() end end},
  softsign = {make = function() return function(x) return x / (x:abs() + 1) end end},
  softplus = {make = function() return function(x) return x:relu() + (-x:abs()):exp():log1p() end end},
  leakyrelu = {alpha = 0.01, make = function(a) return function(x) return tensor.where(x:lt(0), x * a, x) end end},
  thresholdedrelu = {alpha = 1.0, make = function(a) return function(x) return tensor.where(x:gt(a), x, 0) end end},
  elu = {alpha = 1.0, make = function(a) return function(x) return tensor.where(x:lt(0), x:expm1() * a, x) end end},
  hardsigmoid = {alpha = 0.2, beta = 0.5,
    make = function(a, b) return function(x) return (x * a + b):clamp(0, 1) end end},
  affine = {alpha = 1.0, beta = 0.0, make = function(a, b) return function(x) return x * a + b end end},
  scaledtanh = {alpha = 1.0, beta = 1.0, make = function(a, b) return function(x) return (x * b):tanh() * a end end},
}

-- The activation functions of every direction: a list per direction.
local function activation_functions(ctx, kind, attrs, directions)
  local per_direction = #default_activations[kind]
  local names = attrs.activations
  if names == nil then
    names = {}
    for _ = 1, directions do
      for _, name in ipairs(default_activations[kind]) do names[#names + 1] = name end
    end
  end
  if #names ~= per_direction * directions then
    ctx:error("activations has %d names; %s with %d direction%s takes %d", #names, kind, directions,
      directions == 1 and "" or "s", per_direction * directions)
  end
  local alphas, betas = attrs.activation_alpha or {}, attrs.activation_beta or {}
  local next_alpha, next_beta = 1, 1
  local functions = {}
  for i, name in ipairs(names) do
    local spec = type(name) == "string" and activation_kinds[name:lower()]
    if not spec then
      ctx:unsupported("activation '%s' (lazylua has Tanh, Sigmoid, Relu, LeakyRelu, ThresholdedRelu, Elu, " ..
        "HardSigmoid, Softsign, Softplus, Affine, ScaledTanh)", tostring(name))
    end
    local alpha, beta = spec.alpha, spec.beta
    if alpha ~= nil and alphas[next_alpha] ~= nil then alpha, next_alpha = alphas[next_alpha], next_alpha + 1 end
    if beta ~= nil and betas[next_beta] ~= nil then beta, next_beta = betas[next_beta], next_beta + 1 end
    local direction = (i - 1) // per_direction + 1
    functions[direction] = functions[direction] or {}
    functions[direction][#functions[direction] + 1] = spec.make(alpha, beta)
  end
  return functions
end

local function shape_text(t) return "[" .. table.concat(t:size(), ", ") .. "]" end

-- Checks that input `slot` (named `what`) has the shape `want`.
local function check_shape(ctx, t, what, want)
  local ok = t:dim() == #want
  for i = 1, #want do ok = ok and t:size(i) == want[i] end
  if not ok then
    ctx:error("%s has shape %s, expected [%s]", what, shape_text(t), table.concat(want, ", "))
  end
end

-- The recurrence of one direction: xs [T, N, G*H] (the projected input with
-- every bias that simply adds), the state {h = [N, H] (, c = [N, H])} and
-- `mask` [T, N, 1] (bool; nil when every sequence is full). Returns the
-- final state and ys [T, N, H] (nil unless `want_ys`).
local function run_direction(setup, xs, state, mask, reverse, want_ys)
  local kind, hidden, f = setup.kind, setup.hidden, setup.activations
  local r_t, r_bias, peep, clip = setup.r_t, setup.r_bias, setup.peepholes, setup.clip
  local function gate(t, i) return t:narrow(2, (i - 1) * hidden + 1, hidden) end
  local function clipped(x)
    if clip then return x:clamp(-clip, clip) end
    return x
  end
  local step
  if kind == "RNN" then
    step = function(carry, x)
      return {h = f[1](clipped(x + carry.h:matmul(r_t)))}
    end
  elseif kind == "GRU" then
    step = function(carry, x)
      local h = carry.h
      local z, r, candidate
      if setup.linear_before_reset then
        local hh = h:matmul(r_t)
        if r_bias then hh = hh + r_bias end  -- Rbh stays inside r * (...)
        z = f[1](clipped(gate(x, 1) + gate(hh, 1)))
        r = f[1](clipped(gate(x, 2) + gate(hh, 2)))
        candidate = f[2](clipped(gate(x, 3) + r * gate(hh, 3)))
      else
        local hh = h:matmul(setup.r_zr_t)
        z = f[1](clipped(gate(x, 1) + gate(hh, 1)))
        r = f[1](clipped(gate(x, 2) + gate(hh, 2)))
        candidate = f[2](clipped(gate(x, 3) + (r * h):matmul(setup.r_h_t)))
      end
      return {h = candidate + z * (h - candidate)}  -- (1 - z) * candidate + z * h
    end
  else
    step = function(carry, x)
      local gates = x + carry.h:matmul(r_t)
      local gi, go, gf, gc = gate(gates, 1), gate(gates, 2), gate(gates, 3), gate(gates, 4)
      if peep then gi, gf = gi + peep.i * carry.c, gf + peep.f * carry.c end
      local i = f[1](clipped(gi))
      local forget = setup.input_forget and (1 - i) or f[1](clipped(gf))
      local c = forget * carry.c + i * f[2](clipped(gc))
      if peep then go = go + peep.o * c end
      local h = f[1](clipped(go)) * f[3](clipped(c))
      return {h = h, c = c}
    end
  end
  local body = step
  if mask then
    -- Past its length a sequence keeps its state and emits zeros; a
    -- reverse direction starts at each sequence's own last step.
    body = function(carry, x)
      local new = step(carry, x.x)
      local kept = {}
      for name, value in pairs(new) do kept[name] = tensor.where(x.mask, value, carry[name]) end
      return kept, want_ys and tensor.where(x.mask, new.h, 0) or nil
    end
    xs = {x = xs, mask = mask}
  elseif want_ys then
    body = function(carry, x)
      local new = step(carry, x)
      return new, new.h
    end
  end
  return tensor.scan(body, state, xs, {reverse = reverse})
end

local function recurrent(kind)
  local gate_count = gate_counts[kind]
  return function(ctx, inputs, attrs)
    local x, w, r, b = inputs[1], inputs[2], inputs[3], inputs[4]
    local lengths, initial_h, initial_c, peepholes = inputs[5], inputs[6], inputs[7], inputs[8]
    for slot, name in ipairs({"X", "W", "R"}) do
      if inputs[slot] == nil then ctx:error("input %s is missing", name) end
    end
    if not util.is_float(x) then ctx:error("X is %s; %s takes float tensors", x:dtype(), kind) end
    for _, pair in ipairs({{"W", w}, {"R", r}, {"B", b}, {"initial_h", initial_h}, {"initial_c", initial_c},
        {"P", peepholes}}) do
      if pair[2] ~= nil and pair[2]:dtype() ~= x:dtype() then
        ctx:error("%s is %s but X is %s", pair[1], pair[2]:dtype(), x:dtype())
      end
    end
    if kind ~= "LSTM" and (initial_c ~= nil or peepholes ~= nil) then
      ctx:error("%s takes at most 6 inputs", kind)
    end

    local direction = util.attr(attrs, "direction", "forward")
    local directions = ({forward = 1, reverse = 1, bidirectional = 2})[direction]
    if directions == nil then
      ctx:error("direction '%s' is not forward, reverse or bidirectional", tostring(direction))
    end
    local layout = util.attr(attrs, "layout", 0)
    if layout ~= 0 and ctx.opset < 14 then
      ctx:error("layout is an attribute from opset 14 on")
    end
    if layout ~= 0 and layout ~= 1 then ctx:error("layout is %s, expected 0 or 1", tostring(layout)) end
    if x:dim() ~= 3 then ctx:error("X has shape %s, expected rank 3", shape_text(x)) end
    if layout == 1 then x = x:transpose(1, 2) end
    local steps, batch, input_size = x:size(1), x:size(2), x:size(3)

    if r:dim() ~= 3 then ctx:error("R has shape %s, expected [D, %d*hidden_size, hidden_size]", shape_text(r), gate_count) end
    local hidden = attrs.hidden_size
    if hidden == nil then
      hidden = r:size(3)
    elseif math.type(hidden) ~= "integer" or hidden < 1 then
      ctx:error("hidden_size is %s, expected an integer >= 1", tostring(hidden))
    elseif hidden ~= r:size(3) then
      ctx:error("hidden_size %d disagrees with R %s (expected [%d, %d, %d])", hidden, shape_text(r), directions,
        gate_count * hidden, hidden)
    end
    local rows = gate_count * hidden
    check_shape(ctx, w, "W", {directions, rows, input_size})
    check_shape(ctx, r, "R", {directions, rows, hidden})
    if b then check_shape(ctx, b, "B", {directions, 2 * rows}) end
    local state_shape = layout == 1 and {batch, directions, hidden} or {directions, batch, hidden}
    if initial_h then check_shape(ctx, initial_h, "initial_h", state_shape) end
    if initial_c then check_shape(ctx, initial_c, "initial_c", state_shape) end
    if peepholes then check_shape(ctx, peepholes, "P", {directions, 3 * hidden}) end
    if layout == 1 then
      initial_h = initial_h and initial_h:transpose(1, 2)
      initial_c = initial_c and initial_c:transpose(1, 2)
    end

    local clip = attrs.clip
    if clip ~= nil and (type(clip) ~= "number" or not (clip > 0)) then
      ctx:error("clip is %s, expected a number > 0", tostring(clip))
    end
    local functions = activation_functions(ctx, kind, attrs, directions)
    local linear_before_reset = kind == "GRU" and util.flag(attrs, "linear_before_reset", false)
    local input_forget = kind == "LSTM" and util.flag(attrs, "input_forget", false)

    -- sequence_lens: a step t (0-based) of sequence n runs when t < lens[n].
    local mask
    if lengths ~= nil then
      local dtype = lengths:dtype()
      if dtype ~= "i32" and dtype ~= "i64" then ctx:error("sequence_lens is %s, expected int32", dtype) end
      check_shape(ctx, lengths, "sequence_lens", {batch})
      local full = false
      if ctx:on_host(5) then
        full = true
        for n, length in ipairs(ctx:host(lengths)) do
          if length < 0 or length > steps then
            ctx:error("sequence_lens[%d] is %d, outside [0, %d]", n - 1, length, steps)
          end
          full = full and length == steps
        end
      end
      if not full then
        mask = tensor.arange(steps):reshape(steps, 1, 1):lt(lengths:long():reshape(1, batch, 1))
      end
    end

    local outputs = ctx.node.outputs
    local want_ys = outputs[1] ~= nil and outputs[1] ~= ""
    local ys, final_h, final_c = {}, {}, {}
    for d = 1, directions do
      local w_d, r_d = w:select(1, d), r:select(1, d)
      local xs = x:matmul(w_d:t())                       -- [T, N, G*H]
      local setup = {kind = kind, hidden = hidden, activations = functions[d], clip = clip,
        linear_before_reset = linear_before_reset, input_forget = input_forget, r_t = r_d:t()}
      if b then
        local w_bias, r_bias = b[d]:narrow(1, 1, rows), b[d]:narrow(1, rows + 1, rows)
        if linear_before_reset then
          xs = xs + w_bias
          setup.r_bias = r_bias
        else
          xs = xs + (w_bias + r_bias)
        end
      end
      if kind == "GRU" and not linear_before_reset then
        setup.r_zr_t = r_d:narrow(1, 1, 2 * hidden):t()
        setup.r_h_t = r_d:narrow(1, 2 * hidden + 1, hidden):t()
      end
      if peepholes then
        local p = peepholes[d]
        setup.peepholes = {i = p:narrow(1, 1, hidden), o = p:narrow(1, hidden + 1, hidden),
          f = p:narrow(1, 2 * hidden + 1, hidden)}
      end
      local zeros = tensor.zeros({batch, hidden}, {dtype = x:dtype()})
      local state = {h = initial_h and initial_h[d] or zeros}
      if kind == "LSTM" then state.c = initial_c and initial_c[d] or zeros end
      local reverse = direction == "reverse" or d == 2
      local final, y = run_direction(setup, xs, state, mask, reverse, want_ys)
      ys[d], final_h[d], final_c[d] = y, final.h, final.c
    end

    -- one direction: views, no copies
    local function stack(list, dim) return #list == 1 and list[1]:unsqueeze(dim) or tensor.stack(list, dim) end
    local y, y_h, y_c = nil, stack(final_h, 1), nil                      -- [D, N, H]
    if want_ys then y = stack(ys, 2) end                                 -- [T, D, N, H]
    if kind == "LSTM" then y_c = stack(final_c, 1) end
    if layout == 1 then
      if y then y = y:permute(3, 1, 2, 4) end                            -- [N, T, D, H]
      y_h = y_h:transpose(1, 2)
      if y_c then y_c = y_c:transpose(1, 2) end
    end
    return y, y_h, y_c
  end
end

ops.RNN = recurrent("RNN")
ops.GRU = recurrent("GRU")
ops.LSTM = recurrent("LSTM")

return ops
