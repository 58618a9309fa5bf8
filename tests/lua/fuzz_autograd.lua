-- fuzz_autograd.lua - the differential fuzzer's gradient programs: leaves
-- that require gradients (f64 or f32, often of hostile shapes), a random
-- differentiable expression over them (elementwise ops with broadcasting,
-- reductions, softmax, cumsum, matmul, views, joins, gathers, detach,
-- no_grad), a weighted sum of some results as the loss, backward, and the
-- gradients observed; then maybe an SGD step on the leaves under no_grad,
-- dropped gradients and a second round that accumulates.
-- Loaded with `local family = dofile("fuzz_autograd.lua")(fc)`.
return function(fc)
local R, pick, lit, var, is_float = math.random, fc.pick, fc.lit, fc.var, fc.is_float
local apply_chain, chain_text = fc.apply_chain, fc.chain_text

local LIMIT = 1e4  -- forward values stay below this (and finite)

local function bounded(p, slot)
  return function()
    local t = p.env[slot]
    return t ~= nil and fc.maxabs(t) <= LIMIT
  end
end

-- What a unary op needs of its input's range; true: rounds nothing.
local UNARY = {
  {"neg", nil, true}, {"abs", nil, true}, {"relu", nil, true},
  {"square"}, {"tanh"}, {"sigmoid"}, {"sin"}, {"cos"}, {"gelu"},
  {"exp", function(t) return t:numel() == 0 or t:max():item() <= 3 end},
  {"expm1", function(t) return t:numel() == 0 or t:max():item() <= 3 end},
  {"log", function(t) return t:numel() == 0 or t:min():item() >= 0.1 end},
  {"sqrt", function(t) return t:numel() == 0 or t:min():item() >= 0.1 end},
  {"rsqrt", function(t) return t:numel() == 0 or t:min():item() >= 0.1 end},
  {"log1p", function(t) return t:numel() == 0 or t:min():item() >= -0.5 end},
  {"reciprocal", function(t) return fc.minabs(t) >= 0.25 end},
}

local function floats(t) return is_float(t:dtype()) end

local MENU = fc.new_menu()
local menu = MENU.add

-- Adds the step `out = text` computed by run(env) -> tensor; exact: rounds
-- nothing. Returns whether it was kept.
local function compute(p, out, text, run, exact, ...)
  local inputs = {...}
  local ok = p:try({text = var(out) .. " = " .. text, writes = {out},
                    run = function(env) env[out] = run(env) end}, bounded(p, out), true)
  if ok then
    local all_exact = exact
    for _, s in ipairs(inputs) do all_exact = all_exact and p:exact(s) end
    p:set(out, all_exact, table.unpack(inputs))
  end
  return ok
end

menu(10, "unary", function(p)
  local a = p:pick_slot(floats)
  if not a then return false end
  local entry = pick(UNARY)
  local name, pre = entry[1], entry[2]
  if pre and not pre(p.env[a]) then return false end
  local module = R(4) == 1
  return compute(p, p:slot(), module and string.format("tensor.%s(%s)", name, var(a))
                                     or string.format("%s:%s()", var(a), name),
                 function(env) return env[a][name](env[a]) end, entry[3] == true, a)
end)

-- A partner for a binary op: a live float slot whose shape broadcasts with
-- a's, or a fresh input of a broadcastable shape (not requiring grad).
local function partner(p, a, positive)
  local shape = p.env[a]:size()
  local fits = p:live(function(t)
    return floats(t) and fc.broadcast_numel(t:size(), shape) <= fc.MAX_RESULT
  end)
  if #fits > 0 and R(3) > 1 and not positive then return pick(fits) end
  local out = p:slot()
  local s, dt, seed = fc.partner(shape), p.env[a]:dtype(), p:data_seed()
  local kind = positive and "positive" or nil
  compute(p, out, fc.input_text(s, dt, seed, kind), function() return fc.input(s, dt, seed, kind) end,
          true)
  return out
end

menu(12, "binary", function(p)
  local a = p:pick_slot(floats)
  if not a then return false end
  local fn = pick({"add", "sub", "mul", "add", "mul", "div", "maximum", "minimum", "atan2"})
  if (fn == "maximum" or fn == "minimum") and not p:exact(a) then return false end
  local b = partner(p, a, fn == "div")
  if not p.env[b] then return false end
  if (fn == "maximum" or fn == "minimum") and not p:exact(b) then return false end
  if fn == "div" and fc.minabs(p.env[b]) < 0.25 then return false end
  if R(3) == 1 and fn ~= "div" then a, b = b, a end
  local sym = ({add = "+", sub = "-", mul = "*", div = "/"})[fn]
  local text = sym and R(2) == 1 and string.format("%s %s %s", var(a), sym, var(b))
               or string.format("%s:%s(%s)", var(a), fn, var(b))
  return compute(p, p:slot(), text, function(env) return env[a][fn](env[a], env[b]) end,
                 fn == "add" or fn == "sub" or fn == "maximum" or fn == "minimum", a, b)
end)

menu(4, "scalar", function(p)
  local a = p:pick_slot(floats)
  if not a then return false end
  local t = p.env[a]
  local r = R(4)
  if r == 1 then
    local n = pick({-2, 0.5, 1.5, 3})
    return compute(p, p:slot(), string.format("%s * %s", var(a), lit(n)),
                   function(env) return env[a] * n end, false, a)
  elseif r == 2 then
    local n = pick({1, -0.25, 2})
    return compute(p, p:slot(), string.format("%s - %s", lit(n), var(a)),
                   function(env) return n - env[a] end, true, a)
  elseif r == 3 then
    local e = pick({2, 3, 0.5, -1})
    if (e == 0.5 and t:numel() > 0 and t:min():item() < 0.1) or
       (e == -1 and fc.minabs(t) < 0.25) then return false end
    return compute(p, p:slot(), string.format("%s ^ %s", var(a), lit(e)),
                   function(env) return env[a] ^ e end, false, a)
  end
  local lo, hi = pick({-1.0, -0.5, 0}), pick({0.5, 1.0, 2.0})
  return compute(p, p:slot(), string.format("%s:clamp(%s, %s)", var(a), lit(lo), lit(hi)),
                 function(env) return env[a]:clamp(lo, hi) end, true, a)
end)

menu(3, "where", function(p)
  local c = p:pick_slot(function(t, slot) return floats(t) and p:exact(slot) end)
  if not c then return false end
  local a = p:pick_slot(floats)
  local b = partner(p, a)
  if not p.env[b] then return false end
  local sc, sa = p.env[c]:size(), p.env[a]:size()
  if fc.broadcast_numel(sc, sa) > fc.MAX_RESULT or
     fc.broadcast_numel(sc, p.env[b]:size()) > fc.MAX_RESULT then
    return false
  end
  local threshold = pick({0, 0.5, -1})
  return compute(p, p:slot(), string.format("tensor.where(%s:gt(%s), %s, %s)", var(c),
                                            lit(threshold), var(a), var(b)),
                 function(env) return tensor.where(env[c]:gt(threshold), env[a], env[b]) end,
                 true, a, b)
end)

local function random_dim(t)
  if t:dim() == 0 then return nil end
  local d = R(t:dim())
  if R(4) == 1 then d = d - t:dim() - 1 end
  return d
end

menu(8, "reduce", function(p)
  local a = p:pick_slot(floats)
  if not a then return false end
  local t = p.env[a]
  local fn = pick({"sum", "sum", "mean", "prod", "max", "min", "softmax", "log_softmax", "cumsum"})
  local dim = random_dim(t)
  if (fn == "max" or fn == "min") and not p:exact(a) then return false end
  if fn == "prod" and t:numel() > 64 then return false end
  if (fn == "softmax" or fn == "log_softmax" or fn == "cumsum") and dim == nil then return false end
  local keepdim = R(2) == 1
  local text, run
  if dim == nil or (R(4) == 1 and fn ~= "softmax" and fn ~= "log_softmax" and fn ~= "cumsum") then
    text = string.format("%s:%s()", var(a), fn)
    run = function(env) return env[a][fn](env[a]) end
  elseif fn == "softmax" or fn == "log_softmax" or fn == "cumsum" then
    text = string.format("%s:%s(%d)", var(a), fn, dim)
    run = function(env) return env[a][fn](env[a], dim) end
  else
    -- max/min(dim) give values and indices; only the values carry gradient
    text = string.format("(%s:%s(%d, %s))", var(a), fn, dim, tostring(keepdim))
    run = function(env) return (env[a][fn](env[a], dim, keepdim)) end
  end
  return compute(p, p:slot(), text, run, fn == "max" or fn == "min", a)
end)

menu(5, "matmul", function(p)
  local a = p:pick_slot(function(t) return floats(t) and t:dim() >= 1 and t:dim() <= 3 end)
  if not a then return false end
  local t = p.env[a]
  local k = t:size(-1)
  local b = p:pick_slot(function(u)
    return floats(u) and u:dim() >= 1 and u:dim() <= 3 and u:size(u:dim() == 1 and 1 or -2) == k
  end)
  if not b or R(3) == 1 then
    local shape = R(3) == 1 and {k} or {k, R(0, 4)}
    if t:dim() == 3 and R(2) == 1 then table.insert(shape, 1, t:size(1)) end
    b = p:slot()
    local dt, seed = t:dtype(), p:data_seed()
    if not compute(p, b, fc.input_text(shape, dt, seed), function() return fc.input(shape, dt, seed) end,
                   true) then return false end
  end
  return compute(p, p:slot(), string.format("%s:matmul(%s)", var(a), var(b)),
                 function(env) return env[a]:matmul(env[b]) end, false, a, b)
end)

menu(8, "view", function(p)
  local a = p:pick_slot(floats)
  if not a then return false end
  local chain = fc.random_chain(p.env[a], 3, false)
  if #chain == 0 then return false end
  return compute(p, p:slot(), var(a) .. chain_text(chain),
                 function(env) return apply_chain(env[a], chain) end, true, a)
end)

menu(3, "join", function(p)
  local a = p:pick_slot(function(t) return floats(t) and t:dim() >= 1 end)
  if not a then return false end
  local t = p.env[a]
  local fn = R(2) == 1 and "cat" or "stack"
  local dim = R(t:dim() + (fn == "stack" and 1 or 0))
  local b = p:pick_slot(function(u)
    if not floats(u) or u:dim() ~= t:dim() then return false end
    for d = 1, t:dim() do
      if (d ~= dim or fn == "stack") and u:size(d) ~= t:size(d) then return false end
    end
    return true
  end)
  if not b then return false end
  return compute(p, p:slot(), string.format("tensor.%s({%s, %s}, %d)", fn, var(a), var(b), dim),
                 function(env) return tensor[fn]({env[a], env[b]}, dim) end, true, a, b)
end)

menu(3, "gather", function(p)
  local a = p:pick_slot(function(t) return floats(t) and t:dim() >= 1 and t:numel() > 0 end)
  if not a then return false end
  local t = p.env[a]
  local dim = R(t:dim())
  local extent = t:size(dim)
  local fn = R(2) == 1 and "gather" or "index_select"
  local shape = {R(0, 5)}
  if fn == "gather" then
    shape = t:size()
    shape[dim] = R(0, 4)
  end
  -- positions 1..extent from the input LCG's integers
  local seed, idx = p:data_seed(), p:slot()
  local function index()
    return (fc.input(shape, "i64", seed, "positive") - 1) % extent + 1
  end
  if not compute(p, idx, string.format("(%s - 1) %% %d + 1", fc.input_text(shape, "i64", seed,
                 "positive"), extent), index, true) then return false end
  return compute(p, p:slot(), string.format("%s:%s(%d, %s)", var(a), fn, dim, var(idx)),
                 function(env) return env[a][fn](env[a], dim, env[idx]) end, true, a)
end)

menu(2, "detach / clone / cast", function(p)
  local a = p:pick_slot(floats)
  if not a then return false end
  local fn = pick({"detach", "clone", "contiguous", "cast"})
  if fn == "cast" then
    local dt = p.env[a]:dtype() == "f32" and "f64" or "f32"
    return compute(p, p:slot(), string.format("%s:to(%q)", var(a), dt),
                   function(env) return env[a]:to(dt) end, dt == "f64", a)
  end
  return compute(p, p:slot(), string.format("%s:%s()", var(a), fn),
                 function(env) return env[a][fn](env[a]) end, true, a)
end)

menu(1, "no_grad", function(p)
  local a = p:pick_slot(floats)
  if not a then return false end
  return compute(p, p:slot(), string.format("tensor.no_grad(function() return %s * 2 end)", var(a)),
                 function(env) return tensor.no_grad(function() return env[a] * 2 end) end, false, a)
end)

menu(1, "observe", function(p)
  local a = p:pick_slot()
  local info = p.info[a]
  return p:try({text = string.format("observe(%s)", var(a)),
                run = function(env, obs) obs(env[a], info) end})
end)

-- The loss (a weighted sum of some results), backward, and the leaves'
-- gradients observed. False when eager gradients are not finite (the
-- program then ends before this round).
local function backward(p, leaves, round)
  local terms = p:live(function(t, slot) return floats(t) and slot > leaves[#leaves] end)
  if #terms == 0 then return false end
  local chosen, weights = {}, {}
  for _ = 1, R(1, math.min(3, #terms)) do
    local s = pick(terms)
    chosen[#chosen + 1] = s
    weights[#weights + 1] = p:data_seed()
  end
  local parts = {}
  for i, s in ipairs(chosen) do
    parts[i] = string.format("(%s * %s):sum()", var(s),
                             fc.input_text(p.env[s]:size(), p.env[s]:dtype(), weights[i], "positive"))
  end
  local loss = p:slot()
  local text = string.format("%s = %s; %s:backward()", var(loss), table.concat(parts, " + "),
                             var(loss))
  local function run(env)
    local total
    for i, s in ipairs(chosen) do
      local term = (env[s] * fc.input(env[s]:size(), env[s]:dtype(), weights[i], "positive")):sum()
      total = total and total + term or term
    end
    env[loss] = total
    total:backward()
  end
  local scale = 0
  local ok = p:try({text = text, writes = {loss}, run = run}, function()
    for _, leaf in ipairs(leaves) do
      local g = p.env[leaf]:grad()
      if g then
        local m = fc.maxabs(g)
        if m > 1e8 then return false, "rejected: gradient too large" end
        scale = math.max(scale, m)
      end
    end
    return true
  end)
  if not ok then return false end
  for _, s in ipairs(p:live()) do
    if p.info[s] then scale = math.max(scale, p.info[s].scale) end
  end
  p:set(loss, false, table.unpack(chosen))
  p.info[loss].scale = math.max(p.info[loss].scale, scale)
  local info = {exact = false, scale = scale}
  for _, leaf in ipairs(leaves) do
    p:try({text = string.format("observe(%s:grad())   -- round %d", var(leaf), round),
           run = function(env, obs) obs(env[leaf]:grad() or "no gradient", info) end})
  end
  return true
end

local function generate(seed)
  local p = fc.Program.new("autograd", seed)
  local hostile = R(3) == 1
  local leaves = {}
  local dt = R(3) == 1 and "f32" or "f64"
  for _ = 1, R(1, 3) do
    local shape = fc.shape(3, hostile)
    if fc.numel(shape) > 5000 then shape = {R(1, 3), R(1, 4)} end
    local kind = R(3) == 1 and "positive" or nil
    local data, out = p:data_seed(), p:slot()
    p:try({text = string.format("%s = %s:requires_grad(true)", var(out),
                                fc.input_text(shape, dt, data, kind)),
           writes = {out},
           run = function(env) env[out] = fc.input(shape, dt, data, kind):requires_grad(true) end})
    p:set(out, true)
    leaves[#leaves + 1] = out
  end
  fc.grow(p, MENU, R(4, 14))
  if backward(p, leaves, 1) and R(2) == 1 then
    -- an SGD step, some gradients dropped, then a second round accumulates
    for _, leaf in ipairs(leaves) do
      if R(2) == 1 then
        p:try({text = string.format("tensor.no_grad(function() %s:sub_(%s:grad() * 0.125) end)",
                                    var(leaf), var(leaf)),
               run = function(env)
                 local g = env[leaf]:grad()
                 if g then tensor.no_grad(function() env[leaf]:sub_(g * 0.125) end) end
               end})
        -- views of the leaf change too: nothing stays known exact
        for _, info in pairs(p.info) do info.exact = false end
        p:set(leaf, false)
      elseif R(2) == 1 then
        p:try({text = string.format("%s:set_grad(nil)", var(leaf)),
               run = function(env) env[leaf]:set_grad(nil) end})
      end
    end
    fc.grow(p, MENU, R(2, 8))
    backward(p, leaves, 2)
  end
  return p:finish()
end

return {name = "autograd", generate = generate}
end
