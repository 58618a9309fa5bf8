-- fuzz_scan.lua - the differential fuzzer's scan programs: tensor.scan with
-- a random body (elementwise ops, matmuls with captured weights reached
-- directly or through views, reductions that broadcast back, softmax,
-- cumsum, a roll made of narrow and cat, in-place writes into the body's
-- own clones), a carry that is one tensor or a table, xs that are none, a
-- tensor or a table, ys that are none, one tensor or a table, reverse and
-- recompute; often with gradients to init, xs and captured tensors; now and
-- then a second scan fed by the first. Shapes include runs of 1, 0 extents
-- and long scans.
-- Loaded with `local family = dofile("fuzz_scan.lua")(fc)`.
return function(fc)
local R, pick, lit, var = math.random, fc.pick, fc.lit, fc.var

local LIMIT = 1e4

local function finite_small(t)
  return fc.maxabs(t) <= LIMIT
end

-- Body ops: each {out, text, run(L)} over the body's locals L (name ->
-- tensor). Candidates are tried on sample values (the first iteration's);
-- the ones that work are kept.
local function body_candidate(L, names, out, captured, grad)
  local a, b = pick(names), pick(names)
  local r = R(12)
  -- lazy mode has no gradient for writes inside a body (an error that
  -- eager mode does not raise): with gradients, no in-place op
  if r == 10 and grad then r = 4 end
  if r <= 2 then
    local fn = pick({"tanh", "sigmoid", "relu", "neg", "sin", "abs", "gelu"})
    return {text = string.format("%s:%s()", a, fn), run = function(T) return T[a][fn](T[a]) end}
  elseif r <= 4 then
    local fn = pick({"add", "sub", "mul", "maximum"})
    return {text = string.format("%s:%s(%s)", a, fn, b),
            run = function(T) return T[a][fn](T[a], T[b]) end}
  elseif r == 5 then
    local n = pick({0.5, -1.5, 2})
    return {text = string.format("%s * %s + %s", a, lit(n), lit(n / 4)),
            run = function(T) return T[a] * n + n / 4 end}
  elseif r == 6 and #captured > 0 then
    local w = pick(captured)
    local form = R(3)
    if form == 1 then
      return {text = string.format("%s:matmul(%s)", a, w),
              run = function(T) return T[a]:matmul(T[w]) end}
    elseif form == 2 then
      -- through views of the carry (issue: captured gradients behind views)
      return {text = string.format("%s:unsqueeze(1):matmul(%s):squeeze(1)", a, w),
              run = function(T) return T[a]:unsqueeze(1):matmul(T[w]):squeeze(1) end}
    end
    return {text = string.format("%s:matmul(%s:t())", a, w),
            run = function(T) return T[a]:matmul(T[w]:t()) end}
  elseif r == 7 then
    local fn = pick({"sum", "mean", "max"})
    return {text = string.format("(%s:%s(-1, true))", a, fn),
            run = function(T) return (T[a][fn](T[a], -1, true)) end}
  elseif r == 8 then
    local fn = pick({"softmax", "cumsum", "log_softmax"})
    return {text = string.format("%s:%s(-1)", a, fn), run = function(T) return T[a][fn](T[a], -1) end}
  elseif r == 9 then
    -- a roll by one along the last dim
    return {text = string.format("tensor.cat({%s:narrow(-1, 2, %s:size(-1) - 1), %s:narrow(-1, 1, 1)}, -1)",
                                 a, a, a),
            run = function(T)
              local t = T[a]
              return tensor.cat({t:narrow(-1, 2, t:size(-1) - 1), t:narrow(-1, 1, 1)}, -1)
            end}
  elseif r == 10 then
    return {text = string.format("%s:clone(); %s:narrow(-1, 1, 1):mul_(0.5); %s:add_(%s)", a, out,
                                 out, b),
            run = function(T)
              local u = T[a]:clone()
              u:narrow(-1, 1, 1):mul_(0.5)
              u:add_(T[b])
              return u
            end}
  elseif r == 11 then
    return {text = string.format("%s:clamp(-3, 3):exp()", a),
            run = function(T) return T[a]:clamp(-3, 3):exp() end}
  end
  return {text = string.format("%s:transpose(-1, -2):contiguous():transpose(-1, -2)", a),
          run = function(T) return T[a]:transpose(-1, -2):contiguous():transpose(-1, -2) end}
end

-- A body: ops, then each carry leaf's new value and the ys. `spec`: the
-- names of the carry leaves (carry or carry.h, carry.c), of the x leaves
-- and of the captured tensors; `samples`: their values at the first step.
local function make_body(spec, samples)
  local names, ops = {}, {}
  for _, n in ipairs(spec.carry) do names[#names + 1] = n.name end
  for _, n in ipairs(spec.xs) do names[#names + 1] = n.name end
  for _, n in ipairs(spec.captured) do names[#names + 1] = n end
  local T = {}
  for k, v in pairs(samples) do T[k] = v end
  for k = 1, R(1, 7) do
    local out = "t" .. k
    local op = body_candidate(T, names, out, spec.captured, spec.grad)
    local ok, v = pcall(op.run, T)
    if ok and finite_small(v) then
      op.out = out
      ops[#ops + 1] = op
      T[out] = v
      names[#names + 1] = out
    end
  end
  -- new carry leaves: (old * a + some local broadcast into it), bounded
  local finals = {}
  for i, leaf in ipairs(spec.carry) do
    local candidates = {}
    for _, n in ipairs(names) do
      local ok = pcall(function()
        local x = T[leaf.name] * 0.5 + T[n]
        assert(x:dtype() == T[leaf.name]:dtype() and lit(x:size()) == lit(T[leaf.name]:size()))
      end)
      if ok then candidates[#candidates + 1] = n end
    end
    local n = #candidates > 0 and pick(candidates) or leaf.name
    local squash = pick({"tanh", "clamp", "none"})
    finals[i] = {from = n, squash = squash}
  end
  local ys = {}
  local r = R(3)
  if r >= 2 then ys[1] = pick(names) end
  if r == 3 then ys[2] = pick(names) end
  return {ops = ops, finals = finals, ys = ys, ys_table = r == 3 or (r == 2 and R(2) == 1)}
end

local function squash_text(expr, squash)
  if squash == "tanh" then return "(" .. expr .. "):tanh()" end
  if squash == "clamp" then return "(" .. expr .. "):clamp(-4, 4)" end
  return expr
end

local function body_text(spec, body)
  local lines = {}
  local carry_names = {}
  for _, leaf in ipairs(spec.carry) do carry_names[#carry_names + 1] = leaf.name end
  for _, leaf in ipairs(spec.carry) do
    lines[#lines + 1] = string.format("local %s = %s", leaf.name, leaf.path)
  end
  for _, x in ipairs(spec.xs) do lines[#lines + 1] = string.format("local %s = %s", x.name, x.path) end
  for _, op in ipairs(body.ops) do lines[#lines + 1] = string.format("local %s = %s", op.out, op.text) end
  local new = {}
  for i, leaf in ipairs(spec.carry) do
    new[i] = squash_text(string.format("%s * 0.5 + %s", leaf.name, body.finals[i].from),
                         body.finals[i].squash)
  end
  local carry_text = spec.table_carry
                     and string.format("{h = %s%s}", new[1], new[2] and (", c = " .. new[2]) or "")
                     or new[1]
  local ys_text = "nil"
  if #body.ys > 0 then
    ys_text = body.ys_table and string.format("{a = %s%s}", body.ys[1],
                                              body.ys[2] and (", b = " .. body.ys[2]) or "")
              or body.ys[1]
  end
  lines[#lines + 1] = string.format("return %s, %s", carry_text, ys_text)
  return "function(carry, x)\n        " .. table.concat(lines, "\n        ") .. "\n      end"
end

-- The body as a Lua function over the scan's carry and x.
local function body_function(spec, body, captured_values)
  return function(carry, x)
    local T = {}
    for name, v in pairs(captured_values) do T[name] = v end
    if spec.table_carry then
      T.h, T.c = carry.h, carry.c
    else
      T.h = carry
    end
    if spec.table_xs then
      T.xa, T.xb = x.a, x.b
    elseif #spec.xs == 1 then
      T.xa = x
    end
    for _, op in ipairs(body.ops) do T[op.out] = op.run(T) end
    local new = {}
    for i, leaf in ipairs(spec.carry) do
      local f = body.finals[i]
      local v = T[leaf.name] * 0.5 + T[f.from]
      if f.squash == "tanh" then v = v:tanh() elseif f.squash == "clamp" then v = v:clamp(-4, 4) end
      new[i] = v
    end
    local new_carry = spec.table_carry and {h = new[1], c = new[2]} or new[1]
    local ys = nil
    if #body.ys > 0 then
      ys = body.ys_table and {a = T[body.ys[1]], b = body.ys[2] and T[body.ys[2]] or nil}
           or T[body.ys[1]]
    end
    return new_carry, ys
  end
end

-- Puts a scan's carry or ys into its slots: one tensor, or (keys given) the
-- fields keys[1] and keys[2] of a table into one or two slots.
local function store(env, slots, value, keys)
  if not keys then
    env[slots[1]] = value
    return
  end
  env[slots[1]] = value[keys[1]]
  if slots[2] then env[slots[2]] = value[keys[2]] end
end

-- One scan step: chooses shapes, makes its inputs (as program steps), a
-- body, and the scan itself. Returns the slots of the carry leaves and ys,
-- and the slots that may get gradients.
local function scan_step(p, hostile, grad, init_slot)
  local dt = R(3) == 1 and "f32" or "f64"
  local n = hostile and pick({1, 1, 0, 3, 4096}) or R(1, 5)
  local carry_shape = R(2) == 1 and {n} or {hostile and pick({1, 2}) or R(1, 3), n}
  if init_slot then
    carry_shape = p.env[init_slot]:size()
    dt = p.env[init_slot]:dtype()
    n = carry_shape[#carry_shape]
  end
  local length = hostile and pick({1, 1, 2, 37}) or R(1, 5)
  if fc.numel(carry_shape) * length > 100000 then length = 2 end
  local function input(shape, kind, requires)
    local slot, seed = p:slot(), p:data_seed()
    local text = fc.input_text(shape, dt, seed, kind) .. (requires and ":requires_grad(true)" or "")
    p:try({text = var(slot) .. " = " .. text, writes = {slot},
           run = function(env)
             local t = fc.input(shape, dt, seed, kind)
             env[slot] = requires and t:requires_grad(true) or t
           end})
    p:set(slot, true)
    return slot
  end
  local leaves = {}
  local spec = {carry = {}, xs = {}, captured = {}, table_carry = R(3) == 1,
                table_xs = false, grad = grad}
  local carry_slots = {init_slot or input(carry_shape, nil, grad and R(2) == 1)}
  if spec.table_carry and R(2) == 1 then carry_slots[2] = input(carry_shape, nil, grad and R(2) == 1) end
  spec.carry[1] = {name = "h", path = spec.table_carry and "carry.h" or "carry"}
  if carry_slots[2] then spec.carry[2] = {name = "c", path = "carry.c"} end
  local x_count = R(0, 2)
  spec.table_xs = x_count == 2 or (x_count == 1 and R(3) == 1)
  local x_slots = {}
  for i = 1, x_count do
    local shape = fc.partner(carry_shape, true)
    table.insert(shape, 1, length)
    x_slots[i] = input(shape, nil, grad and R(2) == 1)
    spec.xs[i] = {name = i == 1 and "xa" or "xb",
                  path = spec.table_xs and (i == 1 and "x.a" or "x.b") or "x"}
  end
  -- captured: W (n x n) reached directly or through a view, and a bias
  local captured, captured_text = {}, {}
  if n <= 64 and R(3) > 1 then
    local w = input({n, n}, nil, grad and R(2) == 1)
    local through = pick({"", ":t()", ":contiguous()", ":narrow(1, 1, " .. n .. ")"})
    captured.W = {slot = w, view = through}
    spec.captured[#spec.captured + 1] = "W"
  end
  if R(2) == 1 then
    local b = input({n}, nil, grad and R(2) == 1)
    captured.bias = {slot = b, view = R(2) == 1 and ":unsqueeze(1)" or ""}
    spec.captured[#spec.captured + 1] = "bias"
  end
  for name, c in pairs(captured) do captured_text[#captured_text + 1] = name .. " = " .. var(c.slot) .. c.view end
  table.sort(captured_text)
  -- samples for the body: the first iteration's values
  local function resolve(env)
    local values = {}
    for name, c in pairs(captured) do
      values[name] = load("local t = ... return t" .. c.view)(env[c.slot])
    end
    return values
  end
  local samples = resolve(p.env)
  samples.h = p.env[carry_slots[1]]
  samples.c = carry_slots[2] and p.env[carry_slots[2]] or nil
  for i, s in ipairs(x_slots) do samples[spec.xs[i].name] = p.env[s][1] end
  local body = make_body(spec, samples)
  local options = {}
  local option_text = {}
  if x_count == 0 then options.length = length end
  if R(3) == 1 then options.reverse = true end
  if grad and R(3) == 1 then options.recompute = true end
  for _, k in ipairs({"length", "reverse", "recompute"}) do
    if options[k] ~= nil then option_text[#option_text + 1] = k .. " = " .. tostring(options[k]) end
  end
  -- result slots: the carry leaves, then the ys leaves
  local outs = {}
  for i = 1, #carry_slots do outs[i] = p:slot() end
  local y_slots = {}
  for i = 1, #body.ys do y_slots[i] = p:slot() end
  local function init_value(env)
    if spec.table_carry then return {h = env[carry_slots[1]], c = carry_slots[2] and env[carry_slots[2]]} end
    return env[carry_slots[1]]
  end
  local function xs_value(env)
    if x_count == 0 then return nil end
    if spec.table_xs then return {a = env[x_slots[1]], b = x_slots[2] and env[x_slots[2]] or nil} end
    return env[x_slots[1]]
  end
  local function name_list(slots)
    local t = {}
    for i, s in ipairs(slots) do t[i] = var(s) end
    return table.concat(t, ", ")
  end
  local init_text = spec.table_carry and string.format("{h = %s%s}", var(carry_slots[1]),
                      carry_slots[2] and (", c = " .. var(carry_slots[2])) or "")
                    or var(carry_slots[1])
  local xs_text = x_count == 0 and "nil" or
                  (spec.table_xs and string.format("{a = %s%s}", var(x_slots[1]),
                                                   x_slots[2] and (", b = " .. var(x_slots[2])) or "")
                   or var(x_slots[1]))
  local text = string.format("-- captured: %s\n     carry, ys = tensor.scan(%s, %s, %s, {%s})\n" ..
                             "     %s = <carry leaves>; %s = <ys leaves>",
                             #captured_text > 0 and table.concat(captured_text, ", ") or "none",
                             body_text(spec, body), init_text, xs_text,
                             table.concat(option_text, ", "), name_list(outs),
                             #y_slots > 0 and name_list(y_slots) or "-")
  local writes = {}
  for _, s in ipairs(outs) do writes[#writes + 1] = s end
  for _, s in ipairs(y_slots) do writes[#writes + 1] = s end
  local ok = p:try({text = text, writes = writes, run = function(env)
    local carry, ys = tensor.scan(body_function(spec, body, resolve(env)), init_value(env),
                                  xs_value(env), options)
    store(env, outs, carry, spec.table_carry and {"h", "c"})
    if #y_slots > 0 then store(env, y_slots, ys, body.ys_table and {"a", "b"}) end
  end}, function()
    for _, s in ipairs(writes) do
      if not finite_small(p.env[s]) then return false, "rejected: unbounded" end
    end
    return true
  end)
  if not ok then return nil end
  local inputs = {}
  for _, s in ipairs(carry_slots) do inputs[#inputs + 1] = s end
  for _, s in ipairs(x_slots) do inputs[#inputs + 1] = s end
  for _, c in pairs(captured) do inputs[#inputs + 1] = c.slot end
  for _, s in ipairs(writes) do p:set(s, false, table.unpack(inputs)) end
  return {carry = outs, ys = y_slots, inputs = inputs}
end

local function generate(seed)
  local p = fc.Program.new("scan", seed)
  local hostile = R(3) == 1
  local grad = R(2) == 1
  local first = scan_step(p, hostile, grad)
  local results = {}
  if first then
    for _, s in ipairs(first.carry) do results[#results + 1] = s end
    for _, s in ipairs(first.ys) do results[#results + 1] = s end
    if R(3) == 1 then
      local second = scan_step(p, hostile, grad, first.carry[1])
      if second then
        for _, s in ipairs(second.carry) do results[#results + 1] = s end
        for _, s in ipairs(second.ys) do results[#results + 1] = s end
      end
    end
  end
  if grad and #results > 0 then
    local leaves = p:live(function(t) return t:requires_grad() and t:is_leaf() end)
    local loss, weights = p:slot(), {}
    local parts = {}
    for i, s in ipairs(results) do
      weights[i] = p:data_seed()
      parts[i] = string.format("(%s * %s):sum()", var(s), fc.input_text(p.env[s]:size(),
                               p.env[s]:dtype(), weights[i], "positive"))
    end
    local ok = p:try({text = string.format("%s = %s; %s:backward()", var(loss),
                                           table.concat(parts, " + "), var(loss)),
                      writes = {loss},
                      run = function(env)
                        local total
                        for i, s in ipairs(results) do
                          local w = fc.input(env[s]:size(), env[s]:dtype(), weights[i], "positive")
                          local term = (env[s] * w):sum()
                          total = total and total + term or term
                        end
                        env[loss] = total
                        if total:requires_grad() then total:backward() end
                      end}, function()
      for _, leaf in ipairs(leaves) do
        local g = p.env[leaf]:grad()
        if g and fc.maxabs(g) > 1e8 then return false, "rejected: gradient too large" end
      end
      return true
    end)
    if ok then
      p:set(loss, false, table.unpack(results))
      local scale = p.info[loss].scale
      for _, leaf in ipairs(leaves) do
        local g = p.env[leaf]:grad()
        if g then scale = math.max(scale, fc.maxabs(g)) end
      end
      for _, leaf in ipairs(leaves) do
        p:try({text = string.format("observe(%s:grad())", var(leaf)),
               run = function(env, obs)
                 obs(env[leaf]:grad() or "no gradient", {exact = false, scale = scale})
               end})
      end
    end
  end
  return p:finish()
end

return {name = "scan", generate = generate}
end
