-- training.lua - gradient averaging: dist.average_gradients against means
-- computed by formula, with buckets of several sizes (dist.stats().calls
-- counts them), then a training loop whose step, average_gradients
-- included, compiles once: after warm-up the graph and compile counters of
-- tensor.metrics() stay put, and every rank ends with the same parameters.
local h = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")
local dist, r, n = h.dist, h.rank, h.size
local nn, optim = require "nn", require "optim"
local lazy = os.getenv("LAZYLUA_EAGER") ~= "1"

-- 1. Four parameters (5, 300, 1 and 1000 elements, one without a gradient)
-- and loss = sum_i sum(p_i * x_i) with x_i[k] = (r + 1)(k + i): the gradient
-- of p_i is x_i, its mean over the ranks (k + i)(n + 1)/2.
local sizes = {5, 300, 1, 1000}
local function gradients(bucket_bytes)
  local params, loss = {}, nil
  for i, size in ipairs(sizes) do
    params[i] = tensor.ones(size):requires_grad(true)
    local x = (tensor.arange(size) + i) * (r + 1)
    local term = (params[i] * x:float()):sum()
    loss = loss and loss + term or term
  end
  local frozen = tensor.ones(3):requires_grad(true)  -- no gradient: left out
  loss:backward()
  local before = dist.stats()
  dist.average_gradients({params[1], frozen, params[2], params[3], params[4]},
    bucket_bytes and {bucket_bytes = bucket_bytes} or nil)
  for i, size in ipairs(sizes) do
    local want = {}
    for k = 0, size - 1 do want[k + 1] = (k + i) * (n + 1) / 2 end
    h.expect(string.format("mean gradient of parameter %d (buckets of %s bytes)", i,
      tostring(bucket_bytes or "default")), params[i]:grad(), "f32", {size}, want)
  end
  if frozen:grad() ~= nil then h.fail("a parameter without gradient got one") end
  tensor.mark_step()
  local after = dist.stats()
  return after.calls - before.calls, after.bytes - before.bytes
end
local calls, bytes = gradients(nil)
if calls ~= 1 then h.fail("the default bucket should make one call, made " .. calls) end
if bytes ~= 4 * (5 + 300 + 1 + 1000) then h.fail("reduced " .. bytes .. " bytes") end
local small_calls, small_bytes = gradients(1200)  -- 300 f32: p2 and p4 cannot share
if small_calls < 3 or small_calls > #sizes then
  h.fail("1200-byte buckets made " .. small_calls .. " calls, expected 3 to 4")
end
if small_bytes ~= bytes then h.fail("small buckets reduced " .. small_bytes .. " bytes") end
local one_calls = gradients(1)  -- every gradient alone
if one_calls ~= #sizes then h.fail("1-byte buckets made " .. one_calls .. " calls") end

-- An f64 gradient next to f32 ones goes in its own bucket.
do
  local a = tensor.ones(4):requires_grad(true)
  local b = tensor.ones({4}, {dtype = "f64"}):requires_grad(true)
  local loss = (a * (r + 1)):sum() + (b * (r + 1)):sum()
  loss:backward()
  local before = dist.stats().calls
  dist.average_gradients({a, b})
  local m = (n + 1) / 2
  h.expect("f32 gradient beside f64", a:grad(), "f32", {4}, {m, m, m, m})
  h.expect("f64 gradient beside f32", b:grad(), "f64", {4}, {m, m, m, m})
  tensor.mark_step()
  if dist.stats().calls - before ~= 2 then h.fail("two dtypes should make two calls") end
end

-- 2. A training loop: each rank its own data, parameters broadcast from
-- rank 0 first (each rank seeds differently, so they start apart).
tensor.manual_seed(7 + r)
local model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 4))
local params = model:parameters()
dist.broadcast_parameters(model)
for i, p in ipairs(params) do h.expect_same_everywhere("parameter " .. i .. " after broadcast", p) end
local opt = optim.Adam(params, {lr = 1e-2})
local criterion = nn.CrossEntropyLoss()
local xs, ys = {}, {}
for i = 1, 4 do
  xs[i] = tensor.randn(16, 20)
  ys[i] = tensor.randint(1, 5, 16)
end
tensor.mark_step()

local bucket = 32 * 4 * 4  -- smaller than the first layer's weight: several calls a step
local function step(i)
  opt:zero_grad()
  local loss = criterion(model(xs[i % 4 + 1]), ys[i % 4 + 1])
  loss:backward()
  dist.average_gradients(model, {bucket_bytes = bucket})
  opt:step()
  tensor.mark_step()
  return loss
end

local warm = 6
for i = 1, warm do step(i) end
local metrics = tensor.metrics()
local stats = dist.stats()
local steps = 24
local first_loss, last_loss
for i = warm + 1, warm + steps do
  local loss = step(i)
  if i == warm + 1 then first_loss = loss:item() end
  last_loss = loss:item()
end
local after = tensor.metrics()
local after_stats = dist.stats()
local per_step = (after_stats.calls - stats.calls) / steps
-- 4 parameters (2 weights, 2 biases) in 512-byte buckets: the 20x32
-- weight and the 32x4 one are each alone, so 3 or 4 calls a step.
if per_step < 3 or per_step > 4 or per_step ~= math.floor(per_step) then
  h.fail("collective calls per step: " .. per_step)
end
if lazy then
  -- compiles counts a background compile when its code first runs, which
  -- may be after warm-up: checked where compiles are synchronous.
  local counters = {"distinct_graphs", "key_misses", "cache_misses"}
  if os.getenv("LAZYLUA_COMPILE") == "sync" then counters[#counters + 1] = "compiles" end
  for _, key in ipairs(counters) do
    if after[key] ~= metrics[key] then
      h.fail(string.format("%s grew after warm-up: %d -> %d (the step should compile once)", key,
        metrics[key], after[key]))
    end
  end
  if after.key_hits - metrics.key_hits < steps then h.fail("the steps did not reuse their graph") end
end
if not (last_loss < first_loss) then h.fail(string.format("loss did not fall: %g -> %g", first_loss, last_loss)) end
for i, p in ipairs(params) do h.expect_same_everywhere("parameter " .. i .. " after training", p) end

h.done("training")
