-- test_optim_extra.lua - RMSprop, Adagrad, gradient clipping and the
-- learning-rate schedules against values PyTorch 1.13 computed (f64; the
-- script is in the comments below), optimizer and schedule state_dicts
-- (a run resumed from a checkpoint gives the same bits as one that never
-- stopped), the RNG state, and the errors.
local h = dofile("helpers.lua")
local nn, optim = require "nn", require "optim"

local function bits(x) return string.format("%a", x) end

local function near(got, want, rel, what)
  if math.abs(got - want) > rel * math.abs(want) + 1e-15 then
    error(string.format("%s: got %.17g, expected %.17g", what, got, want), 2)
  end
end

-- The numbers below came from PyTorch 1.13, torch.set_default_dtype(float64):
-- p = [1.5, -0.5, 0.25], p.grad set to each row of `grads` before each
-- opt.step(); schedules on SGD(lr=0.5), the lr before and after each
-- sched.step() (ReduceLROnPlateau: sched.step(metrics[i])); clipping with
-- clip_grad_norm_([a, b], 1.5, norm_type) with a.grad = a, b.grad = b.
local grads = {{0.5, -1.0, 2.0}, {0.25, 0.5, -0.75}, {-1.5, 0.125, 1.0}, {2.0, -0.25, 0.5}, {0.1, 0.2, -0.3}}
local metrics = {1.0, 0.9, 0.95, 0.9, 0.91, 0.92, 0.93, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5}
local torch_params = {
  rmsprop_default = {
    {1.400000019999996, -0.40000000999999907, 0.1500000049999998},
    {1.3550987025578169, -0.44490133147443506, 0.18526728413455498},
    {1.4489055109907851, -0.45611209280082415, 0.14253877810526111},
    {1.37064744123926, -0.43412886051066779, 0.12154538453618552},
    {1.3667178627323466, -0.45153425246064832, 0.13410463816331136},
  },
  rmsprop_all = {
    {1.3333341880298049, -0.33333386243218271, 0.083333607681304211},
    {1.1079382794297772, -0.26772191837381498, 0.0077473908241947626},
    {1.0700738461036556, -0.23012466798885803, -0.12791339564464527},
    {0.90741123979879224, -0.1575259671396862, -0.27466697977661336},
    {0.76465050409096247, -0.12887437305405863, -0.36595608590028206},
  },
  rmsprop_centered = {
    {1.2989924773521899, -0.29899245715017586, 0.048992447049167276},
    {1.2083749693684216, -0.38888216854824359, 0.11964528084253458},
    {1.3962022272582051, -0.41131539350768048, 0.033801994694045781},
    {1.239499981092181, -0.36728627006897868, -0.008456305584574518},
    {1.2316300243702396, -0.40211821072918391, 0.016786606646070509},
  },
  rmsprop_momentum = {
    {1.300000039999992, -0.30000001999999804, 0.050000009999999581},
    {1.1101974251156301, -0.28980267294886908, 0.020534573269109735},
    {1.2029097345393858, -0.30712552207608285, -0.079655157154922954},
    {1.0927497497482133, -0.27182048205937698, -0.17173680950509049},
    {1.0298106003388003, -0.28897874595098511, -0.19265912842592256},
  },
  adagrad_default = {
    {1.4900000000019999, -0.49000000000100002, 0.24000000000050001},
    {1.4855278640478005, -0.49447213595559958, 0.24351123441621955},
    {1.4948982897605314, -0.49558324706661194, 0.23927124289637389},
    {1.487091089177248, -0.49341394248861359, 0.23719733950699906},
    {1.4867010262257745, -0.49512382829061113, 0.23843215837487772},
  },
  adagrad_all = {
    {1.421064205432351, -0.40834412484756155, 0.15238120584303164},
    {1.3843999882716929, -0.44417425749476036, 0.18318153450557353},
    {1.4572210232899947, -0.45118894713371283, 0.14832144153371191},
    {1.3968575411433475, -0.43443202654344354, 0.13248817320780518},
    {1.3922743193702862, -0.44450789598725743, 0.14092913280254424},
  },
}
local torch_lrs = {
  step = {
    {0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.125, 0.125, 0.125, 0.0625, 0.0625},
  },
  exponential = {
    {0.5, 0.45000000000000001, 0.40500000000000003, 0.36450000000000005, 0.32805000000000006, 0.29524500000000009, 0.26572050000000008, 0.23914845000000007, 0.21523360500000008, 0.19371024450000007, 0.17433922005000008},
  },
  cosine = {
    {0.5, 0.44142135623730949, 0.30000000000000004, 0.15857864376269054, 0.10000000000000001, 0.15857864376269049, 0.30000000000000004, 0.4414213562373096, 0.50000000000000011, 0.4414213562373096, 0.30000000000000016, 0.15857864376269071, 0.10000000000000001},
  },
  linear = {
    {0.125, 0.21875, 0.3125, 0.40625, 0.5, 0.5, 0.5, 0.5, 0.5},
  },
  linear_default = {
    {0.16666666666666666, 0.23333333333333334, 0.30000000000000004, 0.36666666666666675, 0.43333333333333346, 0.50000000000000011, 0.50000000000000011, 0.50000000000000011, 0.50000000000000011},
  },
  plateau_min = {
    {0.5, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.125, 0.125, 0.125, 0.125, 0.0625, 0.0625, 0.0625, 0.0625},
  },
  plateau_max_abs = {
    {0.5, 0.5, 0.5, 0.050000000000000003, 0.050000000000000003, 0.005000000000000001, 0.005000000000000001, 0.00050000000000000012, 0.00050000000000000012, 5.0000000000000016e-05, 5.0000000000000016e-05, 5.0000000000000021e-06, 5.0000000000000021e-06, 5.0000000000000019e-07, 5.0000000000000019e-07, 5.0000000000000019e-07, 5.0000000000000019e-07, 5.0000000000000019e-07, 5.0000000000000019e-07},
  },
}
local torch_clip = {
  ["2"] = {total = 4.1003048667141817, a = {0.18291318364525314, -0.36582636729050627, 0.73165273458101254, 0.091456591822626568}, b = {1.0974791018715189, -0.18291318364525314, 0.54873955093575943}},
  ["1"] = {total = 8.75, a = {0.085714275918368471, -0.17142855183673694, 0.34285710367347388, 0.042857137959184236}, b = {0.51428565551021088, -0.085714275918368471, 0.25714282775510544}},
  ["inf"] = {total = 3, a = {0.24999991666669444, -0.49999983333338888, 0.99999966666677775, 0.12499995833334722}, b = {1.4999995000001667, -0.24999991666669444, 0.74999975000008334}},
  ["3"] = {total = 3.4096790231157121, a = {0.2199619890768113, -0.43992397815362261, 0.87984795630724522, 0.10998099453840565}, b = {1.3197719344608678, -0.2199619890768113, 0.65988596723043391}},
}

-- Sets p's gradient to g (a list) through backward: d/dp sum(p * g) = g.
local function set_gradient(p, g)
  (p * tensor.new(g, {dtype = p:dtype()})):sum():backward()
end

local function run_optimizer(make)
  local p = tensor.new({1.5, -0.5, 0.25}, {dtype = "f64"}):requires_grad(true)
  local opt = make({p})
  local trace = {}
  for _, g in ipairs(grads) do
    opt:zero_grad()
    set_gradient(p, g)
    opt:step()
    trace[#trace + 1] = p:tolist()
  end
  return trace
end

local function check_trace(name, got, want)
  for step, row in ipairs(want) do
    for k, value in ipairs(row) do near(got[step][k], value, 1e-12, string.format("%s step %d [%d]", name, step, k)) end
  end
end

h.test("RMSprop and Adagrad match PyTorch", function()
  local cases = {
    rmsprop_default = function(ps) return optim.RMSprop(ps) end,
    rmsprop_all = function(ps)
      return optim.RMSprop(ps, {lr = 0.05, alpha = 0.9, eps = 1e-6, weight_decay = 0.1, momentum = 0.8, centered = true})
    end,
    rmsprop_centered = function(ps) return optim.RMSprop(ps, {lr = 0.02, centered = true}) end,
    rmsprop_momentum = function(ps) return optim.RMSprop(ps, {lr = 0.02, momentum = 0.5}) end,
    adagrad_default = function(ps) return optim.Adagrad(ps) end,
    adagrad_all = function(ps)
      return optim.Adagrad(ps, {lr = 0.1, lr_decay = 0.1, weight_decay = 0.05, initial_accumulator_value = 0.2, eps = 1e-8})
    end,
  }
  for name, make in pairs(cases) do check_trace(name, run_optimizer(make), torch_params[name]) end
end)

h.test("RMSprop and Adagrad against hand-written loops in Lua numbers", function()
  -- centered RMSprop with momentum and weight decay
  local got = run_optimizer(function(ps)
    return optim.RMSprop(ps, {lr = 0.03, alpha = 0.8, eps = 1e-4, weight_decay = 0.2, momentum = 0.7, centered = true})
  end)
  local p, v, m, buf = {1.5, -0.5, 0.25}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}
  for step, row in ipairs(grads) do
    for k = 1, 3 do
      local g = row[k] + 0.2 * p[k]
      v[k] = 0.8 * v[k] + 0.2 * g * g
      m[k] = 0.8 * m[k] + 0.2 * g
      buf[k] = 0.7 * buf[k] + g / (math.sqrt(v[k] - m[k] * m[k]) + 1e-4)
      p[k] = p[k] - 0.03 * buf[k]
      near(got[step][k], p[k], 1e-12, "RMSprop step " .. step)
    end
  end
  got = run_optimizer(function(ps)
    return optim.Adagrad(ps, {lr = 0.2, lr_decay = 0.5, initial_accumulator_value = 1})
  end)
  p = {1.5, -0.5, 0.25}
  local sum = {1, 1, 1}
  for step, row in ipairs(grads) do
    for k = 1, 3 do
      sum[k] = sum[k] + row[k] * row[k]
      p[k] = p[k] - 0.2 / (1 + (step - 1) * 0.5) * row[k] / (math.sqrt(sum[k]) + 1e-10)
      near(got[step][k], p[k], 1e-12, "Adagrad step " .. step)
    end
  end
end)

local function lr_sequence(make, n, stepper)
  local p = tensor.zeros(1):requires_grad(true)
  local opt = optim.SGD({p}, {lr = 0.5})
  local sched = make(opt)
  local lrs = {opt.lr}
  for i = 1, n do
    local returned = stepper and stepper(sched, i) or sched:step()
    assert(returned == opt.lr and sched:get_lr() == opt.lr)
    lrs[#lrs + 1] = opt.lr
  end
  return lrs
end

h.test("schedules match PyTorch's lr sequences", function()
  local function check(name, got, rel)
    local want = torch_lrs[name][1]
    assert(#got == #want, name .. ": length " .. #got)
    for i = 1, #want do near(got[i], want[i], rel, name .. " entry " .. i) end
  end
  check("step", lr_sequence(function(o) return optim.StepLR(o, 3, 0.5) end, 10), 0)
  check("exponential", lr_sequence(function(o) return optim.ExponentialLR(o, 0.9) end, 10), 1e-14)
  check("cosine", lr_sequence(function(o) return optim.CosineAnnealingLR(o, 4, 0.1) end, 12), 1e-13)
  check("linear", lr_sequence(function(o)
    return optim.LinearLR(o, {start_factor = 0.25, end_factor = 1, total_iters = 4})
  end, 8), 1e-14)
  check("linear_default", lr_sequence(function(o) return optim.LinearLR(o) end, 8), 1e-14)
  local plateau = function(options)
    return function(o) return optim.ReduceLROnPlateau(o, options) end
  end
  local feed = function(sched, i) return sched:step(metrics[i]) end
  -- the same arithmetic as PyTorch: the same bits
  check("plateau_min", lr_sequence(plateau{patience = 2, cooldown = 1, factor = 0.5, min_lr = 0.05}, #metrics, feed), 0)
  check("plateau_max_abs", lr_sequence(plateau{mode = "max", threshold_mode = "abs", threshold = 0.05, patience = 1},
    #metrics, feed), 0)
  -- a one-element tensor as the metric
  local tensor_feed = function(sched, i) return sched:step(tensor.new({metrics[i]}, {dtype = "f64"})) end
  check("plateau_min", lr_sequence(plateau{patience = 2, cooldown = 1, factor = 0.5, min_lr = 0.05}, #metrics,
    tensor_feed), 0)
  -- LambdaLR: a warm-up of 3 epochs by hand
  local warm = lr_sequence(function(o)
    return optim.LambdaLR(o, function(e) return math.min(1, (e + 1) / 3) end)
  end, 4)
  h.eq(warm, {0.5 / 3, 0.5 * 2 / 3, 0.5, 0.5, 0.5}, h.F64)
end)

h.test("clip_grad_norm_ and clip_grad_value_ match PyTorch and read nothing", function()
  for name, want in pairs(torch_clip) do
    local a = tensor.new({{0.5, -1.0}, {2.0, 0.25}}, {dtype = "f64"}):requires_grad(true)
    local b = tensor.new({3.0, -0.5, 1.5}, {dtype = "f64"}):requires_grad(true)
    set_gradient(a, {{0.5, -1.0}, {2.0, 0.25}})
    set_gradient(b, {3.0, -0.5, 1.5})
    tensor.mark_step()
    local before = tensor.metrics().syncs
    local total = optim.clip_grad_norm_({a, b}, 1.5, name == "inf" and math.huge or tonumber(name))
    if not tensor.is_eager() then
      assert(tensor.metrics().syncs == before, "clip_grad_norm_ synced")
    end
    assert(tensor.is_tensor(total) and total:dim() == 0)
    near(total:item(), want.total, 1e-14, name .. " total")
    local ga, gb = h.flatten(a:grad():tolist()), b:grad():tolist()
    for k = 1, 4 do near(ga[k], want.a[k], 1e-14, name .. " a") end
    for k = 1, 3 do near(gb[k], want.b[k], 1e-14, name .. " b") end
  end
  -- below max_norm: the scale clamps at 1 and the gradients keep their bits
  local p = tensor.new({0.3, -0.4}, {dtype = "f64"}):requires_grad(true)
  set_gradient(p, {0.3, -0.4})
  local total = optim.clip_grad_norm_(p, 10)
  near(total:item(), 0.5, 1e-15, "norm of a single tensor")
  h.eq(p:grad():tolist(), {0.3, -0.4}, h.EXACT)
  optim.clip_grad_value_({p}, 0.35)
  h.eq(p:grad():tolist(), {0.3, -0.35}, h.EXACT)
  -- no gradient anywhere: a zero norm
  local q = tensor.zeros(2):requires_grad(true)
  h.eq(optim.clip_grad_norm_({q}, 1):item(), 0, h.EXACT)
  assert(q:grad() == nil)
  h.err(function() optim.clip_grad_norm_({p}, -1) end, "max_norm must be a number >= 0")
  h.err(function() optim.clip_grad_norm_({p}, 1, 0) end, "norm_type must be a positive number")
  h.err(function() optim.clip_grad_norm_({p, 3}, 1) end, "parameter 2 is 3, not a tensor")
  h.err(function() optim.clip_grad_value_({p}, "1") end, 'clip_value must be a number >= 0, got the string "1"')
end)

-- ---------------------------------------------------------------------------
-- state_dict: N steps, tensor.save, a fresh model and optimizer, tensor.load,
-- M steps give the bits of N + M steps without stopping.

local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p " .. dir))
local checkpoint_path = dir .. "/state.ckpt"

local function make_run(make_opt, make_schedule)
  tensor.manual_seed(3)
  local model = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Dropout(0.3), nn.Linear(5, 2))
  local opt = make_opt(model:parameters())
  return model, opt, make_schedule and make_schedule(opt)
end

local function train(model, opt, sched, first, last)
  -- the batches and the dropout masks come from the generator's stream:
  -- a resumed run needs its state too
  for _ = first, last do
    local x, target = tensor.randn(8, 3), tensor.randn(8, 2)
    opt:zero_grad()
    local loss = ((model(x) - target) ^ 2):mean()
    loss:backward()
    opt:step()
    if sched then
      if getmetatable(sched).__name == "ReduceLROnPlateau" then sched:step(loss) else sched:step() end
    end
  end
end

local function parameter_bits(model)
  local out = {}
  for _, p in ipairs(model:parameters()) do
    for _, v in ipairs(h.flatten(p:tolist())) do out[#out + 1] = bits(v) end
  end
  return table.concat(out, " ")
end

local optimizers = {
  {"SGD", function(ps) return optim.SGD(ps, {lr = 0.1, momentum = 0.9, nesterov = true, weight_decay = 0.01}) end},
  {"Adam", function(ps) return optim.Adam(ps, {lr = 0.01}) end},
  {"AdamW", function(ps) return optim.AdamW(ps, {lr = 0.01}) end},
  {"RMSprop", function(ps) return optim.RMSprop(ps, {lr = 0.01, momentum = 0.5, centered = true}) end},
  {"Adagrad", function(ps) return optim.Adagrad(ps, {lr = 0.05, lr_decay = 0.01}) end},
}
local schedules = {
  function(o) return optim.StepLR(o, 2, 0.7) end,
  function(o) return optim.CosineAnnealingLR(o, 5, 0.001) end,
  function(o) return optim.LinearLR(o, {start_factor = 0.1, total_iters = 3}) end,
  function(o) return optim.ExponentialLR(o, 0.95) end,
  function(o) return optim.LambdaLR(o, function(e) return 1 / (1 + e) end) end,
  function(o) return optim.ReduceLROnPlateau(o, {patience = 0, factor = 0.5, threshold = 0.5}) end,
}

h.test("a run resumed from opt:state_dict() and sched:state_dict() equals one that never stopped", function()
  for k, entry in ipairs(optimizers) do
    local name, make_opt = entry[1], entry[2]
    local make_schedule = schedules[k]
    local model, opt, sched = make_run(make_opt, make_schedule)
    train(model, opt, sched, 1, 7)
    local straight, straight_lr = parameter_bits(model), opt.lr

    model, opt, sched = make_run(make_opt, make_schedule)
    train(model, opt, sched, 1, 4)
    tensor.save(checkpoint_path, {model = model:state_dict(), optimizer = opt:state_dict(),
      schedule = sched:state_dict(), rng = tensor.get_rng_state()})
    local saved = tensor.load(checkpoint_path)
    -- a fresh run with other initial values, then the checkpoint
    tensor.manual_seed(999)
    model = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Dropout(0.3), nn.Linear(5, 2))
    opt = make_opt(model:parameters())
    sched = make_schedule(opt)
    model:load_state_dict(saved.model)
    opt:load_state_dict(saved.optimizer)
    sched:load_state_dict(saved.schedule)
    tensor.set_rng_state(saved.rng)
    assert(opt.step_count == 4, name .. " step_count " .. opt.step_count)
    train(model, opt, sched, 5, 7)
    assert(parameter_bits(model) == straight, name .. ": the resumed run's parameters differ")
    assert(bits(opt.lr) == bits(straight_lr), name .. ": lr " .. opt.lr .. " vs " .. straight_lr)
  end
  -- the third schedule and the others set lr at once; the Plateau one keeps
  -- its best value and counters
  local p = tensor.zeros(1):requires_grad(true)
  local plateau = optim.ReduceLROnPlateau(optim.SGD({p}, {lr = 1}), {patience = 3})
  plateau:step(2.5)
  plateau:step(3)
  local state = plateau:state_dict()
  assert(state.best == 2.5 and state.num_bad_epochs == 1 and state.epoch == 2)
end)

h.test("load_state_dict copies: the saved table does not change with later steps", function()
  local model, opt = make_run(optimizers[2][2])
  train(model, opt, nil, 1, 2)
  local state = opt:state_dict()
  local other_model, other = make_run(optimizers[2][2])
  other:load_state_dict(state)
  local before = h.flatten(state.state[1].exp_avg:tolist())
  train(other_model, other, nil, 3, 4)
  h.eq(h.flatten(state.state[1].exp_avg:tolist()), before, h.EXACT)
  assert(state.state[1].step == 2 and other.state[1].step == 4)
end)

h.test("state_dict mismatches are clear errors", function()
  local p = tensor.zeros(2, 3):requires_grad(true)
  local q = tensor.zeros(4):requires_grad(true)
  local adam = optim.Adam({p, q})
  set_gradient(p, {{1, 2, 3}, {4, 5, 6}})
  adam:step()
  local state = adam:state_dict()
  h.err(function() optim.SGD({p, q}):load_state_dict(state) end,
    "SGD:load_state_dict: the state is of a Adam optimizer, not of SGD")
  h.err(function() optim.Adam({p}):load_state_dict(state) end, "the state is of 2 parameters, this optimizer has 1")
  local r = tensor.zeros(3, 2):requires_grad(true)
  h.err(function() optim.Adam({r, q}):load_state_dict(state) end,
    "parameter 1 has shape [2, 3] in the state, [3, 2] here")
  h.err(function() adam:load_state_dict("state") end, 'expected a table from opt:state_dict(), got the string "state"')
  h.err(function() adam:load_state_dict({}) end, "the table is not an optimizer's state_dict()")
  local function altered(change)
    local copy = tensor.load(checkpoint_path)  -- any table: replaced below
    copy = {optimizer = state.optimizer, step_count = state.step_count, param_shapes = state.param_shapes,
      options = {}, state = {[1] = {}}}
    for key, value in pairs(state.options) do copy.options[key] = value end
    for key, value in pairs(state.state[1]) do copy.state[1][key] = value end
    change(copy)
    return copy
  end
  h.err(function() adam:load_state_dict(altered(function(s) s.state[1].exp_avg = tensor.zeros(3) end)) end,
    "state 'exp_avg' of parameter 1 has shape [3], the parameter [2, 3]")
  h.err(function() adam:load_state_dict(altered(function(s) s.state[1].exp_avg = nil end)) end,
    "state 'exp_avg' of parameter 1 is missing")
  h.err(function() adam:load_state_dict(altered(function(s) s.state[1].velocity = 1 end)) end,
    "unknown state 'velocity' of parameter 1")
  h.err(function() adam:load_state_dict(altered(function(s) s.options.lr = "fast" end)) end,
    'option lr must be a number >= 0, got the string "fast"')
  h.err(function() adam:load_state_dict(altered(function(s) s.options.momentum = 0.9 end)) end,
    "unknown option 'momentum' in the state")
  h.err(function() adam:load_state_dict(altered(function(s) s.state[3] = {} end)) end,
    "state[3] is not the state of a parameter")
  -- nothing changed by the failed loads
  assert(adam.step_count == 1 and adam.state[1].step == 1)

  local opt = optim.SGD({p}, {lr = 1})
  local step = optim.StepLR(opt, 2)
  h.err(function() optim.CosineAnnealingLR(opt, 3):load_state_dict(step:state_dict()) end,
    "CosineAnnealingLR:load_state_dict: the state is of a StepLR schedule, not of CosineAnnealingLR")
  local bad = step:state_dict()
  bad.step_size = 1.5
  h.err(function() step:load_state_dict(bad) end, "step_size must be an integer >= 0, got 1.5")
  h.err(function() step:load_state_dict(nil) end, "expected a table from sched:state_dict(), got a nil")
  local plateau = optim.ReduceLROnPlateau(opt)
  local plateau_state = plateau:state_dict()
  plateau_state.mode = "up"
  h.err(function() plateau:load_state_dict(plateau_state) end, 'mode must be one of this schedule\'s choices, got the string "up"')
  plateau_state.mode, plateau_state.best = "min", "low"
  h.err(function() plateau:load_state_dict(plateau_state) end, 'best must be a number, got the string "low"')
  plateau_state.best, plateau_state.cooldown_counter = 1.5, -1
  h.err(function() plateau:load_state_dict(plateau_state) end, "cooldown_counter must be an integer >= 0, got -1")
  assert(plateau.mode == "min" and plateau.best == math.huge)
end)

h.test("option errors", function()
  local p = tensor.zeros(1):requires_grad(true)
  h.err(function() optim.RMSprop({p}, {lr = "0.1"}) end, 'RMSprop: lr must be a number >= 0, got the string "0.1"')
  h.err(function() optim.Adagrad({p}, {rho = 1}) end, "Adagrad: unknown option 'rho'")
  h.err(function() optim.StepLR(optim.SGD({p}), 0) end, "StepLR: step_size must be a positive integer, got 0")
  h.err(function() optim.CosineAnnealingLR({}, 3) end, "CosineAnnealingLR: expected an optimizer")
  h.err(function() optim.LinearLR(optim.SGD({p}), {start_factor = 0}) end, "start_factor must be in (0, 1]")
  h.err(function() optim.LinearLR(optim.SGD({p}), {warmup = 3}) end, "LinearLR: unknown option 'warmup'")
  h.err(function() optim.LambdaLR(optim.SGD({p}), 3) end, "LambdaLR: expected a function of the epoch")
  h.err(function() optim.ReduceLROnPlateau(optim.SGD({p}), {mode = "up"}) end, "mode must be 'min' or 'max'")
  h.err(function() optim.ReduceLROnPlateau(optim.SGD({p}), {factor = 1}) end, "factor must be a number in [0, 1)")
  h.err(function() optim.ReduceLROnPlateau(optim.SGD({p}), {patience = 1.5}) end, "patience must be an integer >= 0")
  h.err(function() optim.ReduceLROnPlateau(optim.SGD({p}), {verbose = true}) end, "unknown option 'verbose'")
  h.err(function() optim.ReduceLROnPlateau(optim.SGD({p})):step() end, "expected the metric (a number), got a nil")
  h.err(function() optim.ReduceLROnPlateau(optim.SGD({p})):step(tensor.zeros(2)) end, "a tensor of 2 elements")
  -- each names the line that made the mistake
  local line = debug.getinfo(1, "l").currentline
  h.err(function() optim.SGD({p}, {lr = "0.1"}) end, "test_optim_extra.lua:" .. (line + 1) .. ":")
  h.err(function() optim.StepLR(optim.SGD({p}), 1.5) end, "test_optim_extra.lua:" .. (line + 2) .. ":")
  h.err(function() optim.SGD({p}):load_state_dict({}) end, "test_optim_extra.lua:" .. (line + 3) .. ":")
  h.err(function() optim.LinearLR(optim.SGD({p}), {total_iters = 0}) end, "test_optim_extra.lua:" .. (line + 4) .. ":")
  h.err(function() optim.clip_grad_norm_({p}, 1, -2) end, "test_optim_extra.lua:" .. (line + 5) .. ":")
end)

h.test("tensor.save refuses a module or an optimizer and says to save its state_dict", function()
  local model = nn.Sequential(nn.Linear(2, 2))
  h.err(function() tensor.save(checkpoint_path, model) end,
    "the top-level table is an object of class Sequential", "model:state_dict()")
  h.err(function() tensor.save(checkpoint_path, {net = {model}}) end, "'net[1]' is an object of class Sequential")
  local opt = optim.SGD(model:parameters())
  h.err(function() tensor.save(checkpoint_path, {opt = opt}) end, "'opt' is an object of class SGD", "opt:state_dict()")
  h.err(function() tensor.save(checkpoint_path, {sched = optim.StepLR(opt, 1)}) end,
    "'sched' is an object of class StepLR")
  -- a plain table with a metatable (no state_dict) is still data
  tensor.save(checkpoint_path, {shape = setmetatable({1, 2}, {__tostring = function() return "1x2" end})})
  h.eq(tensor.load(checkpoint_path).shape, {1, 2})
end)

h.test("tensor.get_rng_state and set_rng_state repeat the draws", function()
  tensor.manual_seed(42)
  tensor.rand(5)
  local state = tensor.get_rng_state()
  assert(math.type(state.seed) == "integer" and math.type(state.position) == "integer")
  local first = {tensor.rand(7):tolist(), tensor.randn(3, {dtype = "f64"}):tolist(), tensor.randperm(6):tolist()}
  tensor.save(checkpoint_path, {rng = state})
  tensor.manual_seed(1)
  tensor.rand(100)
  tensor.set_rng_state(tensor.load(checkpoint_path).rng)
  local again = {tensor.rand(7):tolist(), tensor.randn(3, {dtype = "f64"}):tolist(), tensor.randperm(6):tolist()}
  for i = 1, 3 do h.eq(again[i], first[i], h.EXACT) end
  h.err(function() tensor.set_rng_state(5) end, "set_rng_state: expected a table from tensor.get_rng_state()")
  h.err(function() tensor.set_rng_state({seed = 1, position = 0.5}) end, "its position is a number")
end)

os.remove(checkpoint_path)
os.remove(dir)
h.done("test_optim_extra")
