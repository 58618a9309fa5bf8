-- test_nn.lua - the nn and optim modules: layers against hand-written
-- loops, layer gradients against finite differences, optimizers against
-- their formulas in plain Lua numbers, state dicts, and small training runs
-- (lazy and eager trajectories agree; a training loop compiles a bounded
-- number of graphs).
local h = dofile("helpers.lua")
local gh = dofile("grad_helpers.lua")(h)
local values, f64, gradcheck = gh.values, gh.f64, gh.gradcheck
local nn, optim = require "nn", require "optim"

local function close(a, b, tol) return math.abs(a - b) <= tol * math.max(1, math.abs(b)) end

-- ---------------------------------------------------------------------------
-- Forward passes against loops over plain Lua numbers.

h.test("Linear is x W^T + b", function()
  tensor.manual_seed(1)
  local layer = nn.Linear(3, 2)
  local x = tensor.randn(4, 3)
  local W, b, X = layer.weight:tolist(), layer.bias:tolist(), x:tolist()
  local want = {}
  for i = 1, 4 do
    want[i] = {}
    for o = 1, 2 do
      local s = b[o]
      for k = 1, 3 do s = s + X[i][k] * W[o][k] end
      want[i][o] = s
    end
  end
  h.near(layer(x), want, {rel = 1e-6, abs = 1e-6})
  local bound = 1 / math.sqrt(3)
  for _, row in ipairs(W) do for _, w in ipairs(row) do assert(math.abs(w) <= bound) end end
  assert(#layer:parameters() == 2 and nn.Linear(3, 2, {bias = false}).bias == nil)
end)

for _, case in ipairs({{stride = 1, padding = 0}, {stride = 1, padding = 1}, {stride = 2, padding = 1},
                       {stride = 2, padding = 0}}) do
  h.test(string.format("Conv2d stride %d padding %d against a direct loop", case.stride, case.padding), function()
    tensor.manual_seed(2)
    local conv = nn.Conv2d(2, 3, 3, case)
    local x = tensor.randn(2, 2, 7, 6)
    local want = h.conv2d_loop(x:tolist(), conv.weight:tolist(), conv.bias:tolist(), case.stride,
                               case.stride, case.padding, case.padding)
    h.near(conv(x), want, {rel = 1e-5, abs = 1e-5})
  end)
end

local function pool_loop(X, K, S, reduce)
  local out = {}
  for n = 1, #X do
    out[n] = {}
    for c = 1, #X[n] do
      out[n][c] = {}
      local H, W = #X[n][c], #X[n][c][1]
      for i = 1, (H - K) // S + 1 do
        out[n][c][i] = {}
        for j = 1, (W - K) // S + 1 do
          local list = {}
          for p = 1, K do for q = 1, K do list[#list + 1] = X[n][c][(i - 1) * S + p][(j - 1) * S + q] end end
          out[n][c][i][j] = reduce(list)
        end
      end
    end
  end
  return out
end
local function maxof(l) return math.max(table.unpack(l)) end
local function meanof(l) local s = 0 for _, v in ipairs(l) do s = s + v end return s / #l end

h.test("MaxPool2d and AvgPool2d against loops (tiling and overlapping windows)", function()
  tensor.manual_seed(3)
  local x = tensor.randn(2, 3, 6, 8)
  h.near(nn.MaxPool2d(2)(x), pool_loop(x:tolist(), 2, 2, maxof), {rel = 0, abs = 0})
  h.near(nn.MaxPool2d(3, {stride = 2})(x), pool_loop(x:tolist(), 3, 2, maxof), {rel = 0, abs = 0})
  h.near(nn.AvgPool2d(2)(x), pool_loop(x:tolist(), 2, 2, meanof), {rel = 1e-6, abs = 1e-6})
  h.near(nn.AvgPool2d(3, {stride = 1})(x), pool_loop(x:tolist(), 3, 1, meanof), {rel = 1e-6, abs = 1e-6})
end)

h.test("LayerNorm, Embedding, Flatten, Dropout", function()
  local x = tensor.new({{1, 2, 3, 6}, {-1, 0, 0, 1}})
  local ln = nn.LayerNorm(4)
  local want = {}
  for i, row in ipairs(x:tolist()) do
    local m = (row[1] + row[2] + row[3] + row[4]) / 4
    local v = 0
    for _, a in ipairs(row) do v = v + (a - m) ^ 2 end
    v = v / 4
    want[i] = {}
    for k, a in ipairs(row) do want[i][k] = (a - m) / math.sqrt(v + 1e-5) end
  end
  h.near(ln(x), want, {rel = 1e-5, abs = 1e-5})
  local emb = nn.Embedding(5, 3)
  local rows = emb(tensor.new({{2, 5}, {2, 1}}))
  h.shape(rows, {2, 2, 3})
  h.eq(rows[1][1]:tolist(), emb.weight[2]:tolist())
  h.eq(rows[2][2]:tolist(), emb.weight[1]:tolist())
  h.shape(nn.Flatten()(tensor.zeros(2, 3, 4)), {2, 12})
  local drop = nn.Dropout(0.25)
  tensor.manual_seed(4)
  local y = drop(tensor.ones(2000)):tolist()
  local kept = 0
  for _, v in ipairs(y) do
    assert(v == 0 or close(v, 1 / 0.75, 1e-6), "dropout value " .. v)
    if v ~= 0 then kept = kept + 1 end
  end
  assert(kept > 1400 and kept < 1600, "kept " .. kept .. " of 2000 at p = 0.25")
  drop:eval()
  h.eq(drop(tensor.ones(3)):tolist(), {1, 1, 1})
end)

h.test("losses against their formulas", function()
  local logits = tensor.new({{1, 2, 0.5}, {0, -1, 3}})
  local target = tensor.new({2, 3})
  local L = logits:tolist()
  local want = 0
  for i, t in ipairs({2, 3}) do
    local z = 0
    for _, v in ipairs(L[i]) do z = z + math.exp(v) end
    want = want - (L[i][t] - math.log(z))
  end
  assert(close(nn.CrossEntropyLoss()(logits, target):item(), want / 2, 1e-6))
  assert(close(nn.CrossEntropyLoss({reduction = "sum"})(logits, target):item(), want, 1e-6))
  assert(close(nn.NLLLoss()(logits:log_softmax(2), target):item(), want / 2, 1e-6))
  -- huge logits stay finite
  local big = nn.CrossEntropyLoss()(tensor.new({{1000, 0}, {0, -1000}}), tensor.new({1, 2})):item()
  assert(close(big, 500, 1e-6), "stable cross-entropy " .. big)
  assert(close(nn.MSELoss()(tensor.new({1, 2}), tensor.new({2, 4})):item(), 2.5, 1e-7))
  -- a class out of range: the error names the script's line, not nn's
  local ok, message = pcall(function() return nn.CrossEntropyLoss()(logits, tensor.new({1, 4})):item() end)
  assert(not ok and message:find("test_nn%.lua:%d+: gather"), message)
  h.err(function() nn.CrossEntropyLoss()(logits, tensor.new({1.5, 2})) end, "")
  h.err(function() nn.MSELoss()(tensor.zeros(2), tensor.zeros(3)) end, "differ in shape")
  h.err(function() nn.CrossEntropyLoss({reduction = "avg"}) end, "reduction")
end)

-- ---------------------------------------------------------------------------
-- Layer gradients (f64 parameters swapped in) against finite differences.

local function with_params(layer, names)
  return function(x, ...)
    local params = {...}
    for i, name in ipairs(names) do layer[name] = params[i] end
    return layer(x)
  end
end

local linear = nn.Linear(3, 2)
gradcheck("Linear gradient", with_params(linear, {"weight", "bias"}),
          {values({4, 3}, -1, 1), values({2, 3}, -1, 1), values({2}, -1, 1)})
for _, case in ipairs({{stride = 1, padding = 1}, {stride = 2, padding = 0}}) do
  local conv = nn.Conv2d(2, 2, 3, case)
  gradcheck("Conv2d gradient stride " .. case.stride, with_params(conv, {"weight", "bias"}),
            {values({1, 2, 5, 5}, -1, 1), values({2, 2, 3, 3}, -1, 1), values({2}, -1, 1)})
end
gradcheck("MaxPool2d gradient (tiling)", function(x) return nn.MaxPool2d(2)(x) end,
          {values({1, 2, 4, 4}, -1, 1)})
gradcheck("MaxPool2d gradient (overlapping)", function(x) return nn.MaxPool2d(3, {stride = 2})(x) end,
          {values({1, 1, 5, 5}, -1, 1)})
gradcheck("AvgPool2d gradient", function(x) return nn.AvgPool2d(2, {stride = 1})(x) end,
          {values({1, 1, 3, 4}, -1, 1)})
local ln = nn.LayerNorm(4)
gradcheck("LayerNorm gradient", with_params(ln, {"weight", "bias"}),
          {values({3, 4}, -1, 1), values({4}, 0.5, 1.5), values({4}, -1, 1)}, {tol = 1e-5})
local emb = nn.Embedding(4, 3)
local emb_index = tensor.new({{2, 4}, {2, 1}})
gradcheck("Embedding gradient", function(w) emb.weight = w return emb(emb_index) end,
          {values({4, 3}, -1, 1)})
gradcheck("CrossEntropyLoss gradient", function(x)
  return nn.CrossEntropyLoss()(x, tensor.new({3, 1, 2}))
end, {values({3, 4}, -2, 2)})
gradcheck("CrossEntropyLoss with label smoothing", function(x)
  return nn.CrossEntropyLoss({label_smoothing = 0.1})(x, tensor.new({3, 1, 2}))
end, {values({3, 4}, -2, 2)})
gradcheck("MSELoss and BCEWithLogitsLoss gradients", function(a, b)
  return nn.MSELoss()(a, b) + nn.BCEWithLogitsLoss()(a, b:sigmoid())
end, {values({2, 3}, -2, 2), values({2, 3}, -2, 2)})
gradcheck("activations", function(x)
  return nn.GELU()(x) + nn.Tanh()(x) * nn.Sigmoid()(x) + nn.ReLU()(x + 0.05)
end, {values({2, 5}, -2, 2)})

-- ---------------------------------------------------------------------------
-- Modules: parameters, state dicts, train/eval.

h.test("parameters, named_parameters, state_dict round trip", function()
  local model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Sequential(nn.Linear(3, 1)))
  local names = {}
  for _, pair in ipairs(model:named_parameters()) do names[#names + 1] = pair[1] end
  assert(table.concat(names, " ") == "1.weight 1.bias 3.1.weight 3.1.bias", table.concat(names, " "))
  assert(#model:parameters() == 4)
  local other = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Sequential(nn.Linear(3, 1)))
  other:load_state_dict(model:state_dict())
  local x = tensor.randn(5, 2)
  h.eq(other(x):tolist(), model(x):tolist())
  h.err(function() other:load_state_dict({["1.weight"] = tensor.zeros(3, 2)}) end, "missing 1.bias")
  local sd = model:state_dict()
  sd["1.weight"] = tensor.zeros(2, 2)
  h.err(function() other:load_state_dict(sd) end, "1.weight has shape [2, 2]")
  sd = model:state_dict()
  sd.extra = tensor.zeros(1)
  h.err(function() other:load_state_dict(sd) end, "unexpected extra")
  model:eval()
  assert(model:get(3):get(1).training == false)
  model:train()
  assert(model:get(3):get(1).training == true)
  h.err(function() nn.Linear(0, 3) end, "positive integer")
end)

-- ---------------------------------------------------------------------------
-- Optimizers against their formulas on a scalar parameter.

local function run_optimizer(make, grads)
  local p = f64({1.5}):requires_grad(true)
  local opt = make({p})
  local trace = {}
  for _, g in ipairs(grads) do
    opt:zero_grad()
    ;(p * g):sum():backward()  -- gradient g
    opt:step()
    trace[#trace + 1] = p:item()
  end
  return trace
end

h.test("SGD, momentum, nesterov, weight decay", function()
  local grads = {0.5, -1, 2, 0.25}
  local got = run_optimizer(function(ps)
    return optim.SGD(ps, {lr = 0.1, momentum = 0.9, weight_decay = 0.01, nesterov = true})
  end, grads)
  local p, buf = 1.5, nil
  for i, g in ipairs(grads) do
    g = g + 0.01 * p
    buf = buf and (0.9 * buf + g) or g
    p = p - 0.1 * (g + 0.9 * buf)
    assert(close(got[i], p, 1e-12), string.format("step %d: %.15g vs %.15g", i, got[i], p))
  end
  local plain = run_optimizer(function(ps) return optim.SGD(ps, {lr = 0.5}) end, {1, 1})
  assert(close(plain[2], 0.5, 1e-12))
end)

h.test("Adam and AdamW", function()
  local grads = {0.5, -1, 2, 0.25, 0.25}
  for _, decoupled in ipairs({false, true}) do
    local got = run_optimizer(function(ps)
      local make = decoupled and optim.AdamW or optim.Adam
      return make(ps, {lr = 0.1, weight_decay = 0.1})
    end, grads)
    local p, m, v = 1.5, 0, 0
    for t, g in ipairs(grads) do
      if decoupled then p = p * (1 - 0.1 * 0.1) else g = g + 0.1 * p end
      m = 0.9 * m + 0.1 * g
      v = 0.999 * v + 0.001 * g * g
      local mhat, vhat = m / (1 - 0.9 ^ t), v / (1 - 0.999 ^ t)
      p = p - 0.1 * mhat / (math.sqrt(vhat) + 1e-8)
      assert(close(got[t], p, 1e-10), string.format("%s step %d: %.15g vs %.15g",
        decoupled and "AdamW" or "Adam", t, got[t], p))
    end
  end
end)

h.test("tensor._adam_step records the op-by-op Adam formula: the same bits", function()
  local function data(seed) return tensor.new(h.rand_list(seed, {5, 7}, -1, 1)) end
  local p1, m1, v1 = data(1), data(2):abs() * 0.1, data(3):abs() * 0.01
  local p2, m2, v2 = p1:clone(), m1:clone(), v1:clone()
  local lr, beta1, beta2, eps = 0.003, 0.9, 0.999, 1e-8
  for step = 1, 3 do
    local g = data(10 + step)
    local c1, c2 = 1 - beta1 ^ step, 1 - beta2 ^ step
    tensor._adam_step(p1, g, m1, v1, lr, beta1, beta2, eps, c1, c2)
    m2:mul_(beta1):add_(g * (1 - beta1))
    v2:mul_(beta2):add_(g * g * (1 - beta2))
    p2:sub_(m2 / (v2:sqrt() * (1 / math.sqrt(c2)) + eps) * (lr / c1))
  end
  for i, pair in ipairs({{p1, p2}, {m1, m2}, {v1, v2}}) do
    local a, b = h.flatten(pair[1]:tolist()), h.flatten(pair[2]:tolist())
    for k = 1, #a do
      assert(string.format("%a", a[k]) == string.format("%a", b[k]),
        string.format("tensor %d element %d: %a vs %a", i, k, a[k], b[k]))
    end
  end
  h.err(function() tensor._adam_step(p1, "g", m1, v1, lr, beta1, beta2, eps, 1, 1) end, "_adam_step")
end)

h.test("schedules and option errors", function()
  local p = tensor.zeros(1):requires_grad(true)
  local opt = optim.SGD({p}, {lr = 1})
  local sched = optim.StepLR(opt, 2, 0.5)
  local lrs = {}
  for _ = 1, 5 do lrs[#lrs + 1] = sched:step() end
  h.eq(lrs, {1, 0.5, 0.5, 0.25, 0.25})
  local cos = optim.CosineAnnealingLR(optim.SGD({p}, {lr = 2}), 4)
  local c = {}
  for _ = 1, 4 do c[#c + 1] = cos:step() end
  for i, want in ipairs({1 + math.cos(math.pi / 4), 1, 1 + math.cos(3 * math.pi / 4), 0}) do
    assert(close(c[i], want, 1e-12))
  end
  h.err(function() optim.SGD({p}, {lr = -1}) end, "lr must be a number >= 0")
  h.err(function() optim.SGD({p}, {learning_rate = 1}) end, "unknown option")
  h.err(function() optim.Adam({tensor.zeros(1)}) end, "does not require grad")
  h.err(function() optim.SGD({}) end, "no parameters")
end)

-- ---------------------------------------------------------------------------
-- Training.

-- Two Gaussian blobs per class, linearly separable.
local function blobs(n)
  tensor.manual_seed(7)
  local x = tensor.randn(n, 2) * 0.3
  local y = tensor.randint(1, 4, n)
  local centers = tensor.new({{2, 0}, {-2, 1}, {0, -2}})
  return x + centers:index_select(1, y), y
end

local function train(steps, make_opt)
  tensor.manual_seed(11)
  local model = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 3))
  local x, y = blobs(96)
  local opt = make_opt(model:parameters())
  local crit = nn.CrossEntropyLoss()
  local losses = {}
  for _ = 1, steps do
    opt:zero_grad()
    local loss = crit(model(x), y)
    loss:backward()
    opt:step()
    losses[#losses + 1] = loss:item()
  end
  return losses, model
end

h.test("a separable problem trains to near-zero loss", function()
  local losses = train(300, function(ps) return optim.SGD(ps, {lr = 0.3, momentum = 0.9}) end)
  assert(losses[#losses] < 0.02, "final loss " .. losses[#losses])
  assert(losses[#losses] < losses[1] / 20)
end)

h.test("lazy and eager training give the same loss trajectory", function()
  local before = tensor.is_eager()
  tensor.set_eager(true)
  local eager = train(40, function(ps) return optim.Adam(ps, {lr = 0.05}) end)
  tensor.set_eager(before)
  local lazy = train(40, function(ps) return optim.Adam(ps, {lr = 0.05}) end)
  for i = 1, 40 do
    assert(close(lazy[i], eager[i], 1e-4), string.format("step %d: lazy %.9g eager %.9g", i, lazy[i], eager[i]))
  end
end)

h.test("a training loop compiles a bounded number of graphs", function()
  if tensor.is_eager() then return end
  tensor.manual_seed(5)
  local model = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 3))
  local x, y = blobs(100)
  local opt = optim.SGD(model:parameters(), {lr = 0.1, momentum = 0.9})
  local sched = optim.CosineAnnealingLR(opt, 30)
  local crit = nn.CrossEntropyLoss()
  local before = tensor.metrics()
  local steps = 0
  for _ = 1, 3 do  -- epochs of batches 32, 32, 32 and a last partial batch of 4
    model:train()
    for start = 1, 100, 32 do
      local n = math.min(32, 100 - start + 1)
      opt:zero_grad()
      crit(model(x:narrow(1, start, n)), y:narrow(1, start, n)):backward()
      opt:step()
      sched:step()
      steps = steps + 1
    end
    model:eval()
    tensor.no_grad(function() return model(x):argmax(2):eq(y):sum():item() end)
  end
  local after = tensor.metrics()
  local graphs = after.distinct_graphs - before.distinct_graphs
  -- first step (momentum buffers appear), steady step, partial batch's first
  -- and steady forms, and the evaluation: a handful, not one per step.
  assert(graphs <= 7, "distinct graphs " .. graphs)
  local runs = after.graphs_executed - before.graphs_executed
  assert(after.key_hits - before.key_hits >= runs - graphs, "every other run must be a cache hit")
end)

h.done("test_nn")
