-- test_nn_norm.lua - register_buffer, and BatchNorm1d/2d against numbers
-- computed with PyTorch 1.13 (torch.nn.BatchNorm1d/2d, momentum 0.2, the
-- same weights and inputs, in float64): outputs of two training steps,
-- the running statistics after them, the eval output, and the gradients of
-- sum(y * coef) of the first step.
local h = dofile("helpers.lua")
local nn = require "nn"

local TOL = {rel = 2e-5, abs = 2e-5}

-- The inputs the reference used: ((i * a) % b - (b - 1) / 2) / (b / 3), i = 0, 1 ...
local fill = h.pattern_fill

local ref = {
  bn1 = {y1 = {{-0.7535040668, -1.476952418, 2.38312387}, {0.5042914001, -0.3589841395, 0.5943746232}, {0.3845013556, 0.7589841395, -1.194374623}, {0.2647113111, 1.876952418, -2.98312387}}, y2 = {{-0.7399226807, 0.4692059874, 2.383243279}, {0.5522660589, 0.8999355673, 0.5944144264}, {0.3799742269, 1.330665147, -1.194414426}, {0.207682395, -1.899806702, -2.983243279}}, eval = {{-0.5667142503, 0.566832944, 0.6095116738}, {0.5432756642, 0.8542025558, 0.007694023941}, {0.437562339, 1.141572167, -0.594123626}, {0.3318490138, 1.428941779, -1.195941276}}, running_mean = {0.2104731458, -0.1887340153, -0.002941176471}, running_var = {1.522385074, 1.287602465, 0.7515730536}, grad_x = {{0.03234188875, -1.285168949, 0.0006594289072}, {0.1428717956, 3.85715542, 0.0002198096357}, {-0.01078062958, -3.85715542, -0.0002198096357}, {-0.1644330548, 1.285168949, -0.0006594289072}}, grad_weight = {3.520193807, -2.927044221, 2.439203518}, grad_bias = {0.2727272727, 0.5454545455, -2.181818182}},
  bn1l = {y1 = {{{-0.7667425928, -0.2714611112, 0.2238203704, 0.719101852}, {1.442660016, 0.104410768, -1.23383848, 1.825016944}, {0.3953215868, 2.685792696, -2.54956984, -0.2590987302}}, {{0.2945748678, 0.7898563494, -0.3422156086, 0.153065873}, {-1.425016944, 1.63383848, 0.295589232, -1.042660016}, {-2.222359681, 0.06811142832, 2.358582538, -2.876779998}}}, y2 = {{{-0.6759683498, -0.175343608, 0.3252811338, 0.8259058756}, {1.13809539, -0.2020408815, -1.542177153, 1.674149899}, {-1.800952624, 0.3432654105, 2.487483445, -2.658639838}}, {{0.2251561854, 0.7257809272, -0.4757184531, 0.02490628873}, {-1.274149899, 1.942177153, 0.6020408815, -0.7380953903}, {2.058639838, -3.087483445, -0.9432654105, 1.200952624}}}, eval = {{{-0.5850708887, -0.1674125063, 0.2502458761, 0.6679042584}, {1.101412521, 0.02363011768, -1.054152285, 1.40935035}, {-0.6703732033, 1.067120011, -2.90429305, -1.166799836}}, {{0.3099113593, 0.7275697416, -0.2270779895, 0.1905803929}, {-1.2081212, 1.255381436, 0.1775990324, -0.9001833707}, {-2.656079734, -0.9185865196, 0.8189066944, -3.152506366}}}, running_mean = {0.0628516624, -0.0189769821, 0.0641943734}, running_var = {1.194749581, 1.121338913, 1.104568726}, grad_x = {{{-0.2997752861, -0.07563897199, 0.1484973421, 0.3726336563}, {2.209651174, 0.6218131634, -0.9660248467, -1.276943451}, {-1.043851565, 1.795814127, 2.049078539, -2.637089415}}, {{-0.3267102305, -0.1025739164, 0.843392266, -0.5598248594}, {0.1776672831, -0.1332513211, -1.721089331, 1.08817733}, {0.1090306831, 2.948696375, -1.737471578, -1.484207166}}}, grad_weight = {3.270787447, -1.981304081, -2.191936232}, grad_bias = {-0.8181818182, 1.363636364, -2.454545455}},
  bn2 = {y1 = {{{{-0.6150123978, -0.09274247245, 0.4295274529}, {0.9517973782, -0.2419624511, 0.2803074742}}, {{-1.286616595, 1.815887603, 0.4585420165}, {-0.8988035703, 2.203700628, 0.8463550414}}, {{0.8627804593, 2.986118689, -1.867225836}, {0.2561123936, 2.379450624, -2.473893902}}}, {{{0.2056974849, 0.7279674102, -0.4657924191}, {0.05647750622, 0.5787474316, -0.6150123978}}, {{1.040261554, -0.3170840331, -1.67442962}, {1.428074579, 0.07072899173, -1.286616595}}, {{-2.777227935, -0.653889705, 1.469448525}, {-3.383896001, -1.260557771, 0.8627804593}}}}, y2 = {{{{-0.7456536221, -0.2115565976, 0.3225404269}, {0.8566374514, -0.4251954074, 0.1089016171}}, {{-0.9893206321, 1.96347542, 0.7331437316}, {-0.4971879567, -1.727519645, 1.225276407}}, {{0.4947171757, 2.481510115, -2.286792939}, {-0.3, 1.686792939, -3.081510115}}}, {{{-0.2115565976, 0.3225404269, 0.8566374514}, {-0.4251954074, 0.1089016171, 0.6429986416}}, {{1.96347542, 0.7331437316, -0.4971879567}, {-1.727519645, 1.225276407, -0.005055281392}}, {{2.481510115, -2.286792939, -0.3}, {1.686792939, -3.081510115, -1.094717176}}}}, eval = {{{{-0.5890419154, -0.15540338, 0.2782351554}, {0.7118736909, -0.2793001044, 0.154338431}}, {{-0.9357294807, 1.488554438, 0.4279302233}, {-0.6326939909, 1.791589927, 0.7309657131}}, {{0.6693549383, 2.367474144, -1.513941184}, {0.1841780223, 1.882297228, -1.999118099}}}, {{{0.09239006884, 0.5260286042, -0.465145191}, {-0.03150665556, 0.4021318798, -0.5890419154}}, {{0.882483458, -0.1781407563, -1.238764971}, {1.185518948, 0.1248947335, -0.9357294807}}, {{-2.241706557, -0.5435873516, 1.154531854}, {-2.726883473, -1.028764268, 0.6693549383}}}}, running_mean = {0.0160230179, 0.06578005115, 0.000537084399}, running_var = {1.10831515, 1.157913499, 1.156385947}, grad_x = {{{{-0.4237457503, -0.1305056584, 0.1627344334}, {0.4559745253, -0.3925773475, -0.09933725563}}, {{-0.6501668854, -1.567291418, 1.545336514}, {0.1981146608, -0.7190098722, 2.39361806}}, {{-1.207694159, 0.2269596838, 3.199583499}, {-2.342445413, -0.9077915706, 2.064832245}}}, {{{0.8616458346, -0.5611438282, 0.3063340537}, {0.5995741456, -0.8232155173, 0.04426236465}}, {{-0.02032739397, -1.367549247, 1.745078685}, {0.8279541522, -0.519267701, -1.866489554}}, {{-1.03951893, 0.3951349131, 1.829788756}, {-2.174270184, -0.7396163413, 0.6950375015}}}}, grad_weight = {3.510060862, -0.973058135, 2.275005246}, grad_bias = {-2.454545455, 2.454545455, -1.636363636}},
}

local cases = {
  {"bn1", nn.BatchNorm1d, {4, 3}},
  {"bn1l", nn.BatchNorm1d, {2, 3, 4}},
  {"bn2", nn.BatchNorm2d, {2, 3, 2, 3}},
}

for _, case in ipairs(cases) do
  local name, class, shape = case[1], case[2], case[3]
  h.test(name .. ": two training steps, running statistics, eval and gradients", function()
    local want = ref[name]
    local m = class(3, {momentum = 0.2})
    m:load_state_dict({weight = tensor.new({0.5, -1.25, 2.0}), bias = tensor.new({0.1, 0.2, -0.3}),
      running_mean = tensor.zeros(3), running_var = tensor.ones(3), num_batches_tracked = tensor.new(0)})
    local x1 = fill(shape, 7, 23):requires_grad(true)
    local x2 = fill(shape, 5, 17) * 1.5 + 0.25
    local coef = fill(shape, 3, 11)
    local y1 = m(x1)
    ;(y1 * coef):sum():backward()
    local y2 = m(x2)
    tensor.mark_step()  -- one graph computes everything checked below
    h.near(y1, want.y1, TOL)
    h.near(y2, want.y2, TOL)
    h.near(x1:grad(), want.grad_x, TOL)
    h.near(m.weight:grad(), want.grad_weight, TOL)
    h.near(m.bias:grad(), want.grad_bias, TOL)
    h.near(m.running_mean, want.running_mean, TOL)
    h.near(m.running_var, want.running_var, TOL)
    h.eq(m.num_batches_tracked:item(), 2)
    m:eval()
    h.near(m(x1), want.eval, TOL)
  end)
end

h.test("the running statistics update records lazily, without a sync", function()
  local m = nn.BatchNorm2d(3)
  local x = fill({2, 3, 2, 2}, 7, 23)
  tensor.mark_step()
  local before = tensor.metrics().syncs
  for _ = 1, 3 do m(x) end
  h.eq(tensor.metrics().syncs - before, 0)
  h.eq(m.num_batches_tracked:item(), 3)
  -- three updates of momentum 0.1 toward the batch mean: mean * (1 - 0.9^3)
  local mean = {}
  local xs = x:tolist()
  for c = 1, 3 do
    local s = 0
    for n = 1, 2 do for i = 1, 2 do for j = 1, 2 do s = s + xs[n][c][i][j] end end end
    mean[c] = s / 8 * (1 - 0.9 ^ 3)
  end
  h.near(m.running_mean, mean, TOL)
end)

h.test("buffers: in state_dict and load_state_dict, not in parameters()", function()
  local model = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
  local names = {}
  for _, pair in ipairs(model:named_parameters()) do names[#names + 1] = pair[1] end
  assert(table.concat(names, " ") == "1.weight 1.bias 2.weight 2.bias", table.concat(names, " "))
  local buffers = {}
  for _, pair in ipairs(model:named_buffers()) do buffers[#buffers + 1] = pair[1] end
  assert(table.concat(buffers, " ") == "2.running_mean 2.running_var 2.num_batches_tracked",
    table.concat(buffers, " "))
  h.eq(#model:buffers(), 3)
  local state = model:state_dict()
  for _, key in ipairs({"2.running_mean", "2.running_var", "2.num_batches_tracked", "1.weight"}) do
    assert(tensor.is_tensor(state[key]), "state_dict lacks " .. key)
  end
  assert(not model:get(2).running_mean:requires_grad(), "a buffer does not require grad")
  -- load: the buffers take the values; a missing buffer is reported (strict)
  local other = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
  state["2.running_mean"] = tensor.new({1.5, 2.5, 3.5})
  state["2.num_batches_tracked"] = tensor.new(7)
  other:load_state_dict(state)
  h.eq(other:get(2).running_mean:tolist(), {1.5, 2.5, 3.5})
  h.eq(other:get(2).num_batches_tracked:item(), 7)
  state["2.running_var"] = nil
  h.err(function() other:load_state_dict(state) end, "missing 2.running_var")
  state["2.running_var"] = tensor.ones(4)
  h.err(function() other:load_state_dict(state) end, "2.running_var has shape [4], the model [3]")
  h.err(function() nn.Linear(1, 1):register_buffer("b", 3) end, "register_buffer: 'b' is not a tensor")
  -- a checkpoint round trip keeps them
  local path = os.tmpname()
  tensor.save(path, model:state_dict())
  local loaded = tensor.load(path)
  os.remove(path)
  h.eq(loaded["2.running_var"]:tolist(), {1, 1, 1})
end)

h.test("affine = false, track_running_stats = false", function()
  local plain = nn.BatchNorm1d(2, {affine = false, track_running_stats = false})
  h.eq(#plain:parameters(), 0)
  h.eq(#plain:buffers(), 0)
  local x = tensor.new({{1.0, 10.0}, {3.0, 30.0}})
  h.near(plain(x), {{-1, -1}, {1, 1}}, TOL)  -- (x - mean) / sqrt(var + eps), var 1 and 100
  plain:eval()  -- no running statistics: eval uses the batch's
  h.near(plain(x), {{-1, -1}, {1, 1}}, TOL)
  local fresh = nn.BatchNorm1d(2):eval()  -- running mean 0, var 1
  h.near(fresh(x), {{1 / math.sqrt(1 + 1e-5), 10 / math.sqrt(1 + 1e-5)},
    {3 / math.sqrt(1 + 1e-5), 30 / math.sqrt(1 + 1e-5)}}, TOL)
end)

h.test("errors", function()
  h.err(function() nn.BatchNorm1d(0) end, "BatchNorm1d: num_features must be a positive integer, got 0")
  h.err(function() nn.BatchNorm2d(3, {momentun = 0.1}) end, "BatchNorm2d: unknown option 'momentun'")
  h.err(function() nn.BatchNorm2d(3, {momentum = 2}) end, "momentum must be a number in [0, 1]")
  h.err(function() nn.BatchNorm2d(3, {eps = 0}) end, "eps must be a number > 0")
  local bn = nn.BatchNorm2d(3)
  local msg = h.err(function() bn(tensor.zeros(2, 3, 4)) end,
    "BatchNorm2d: expected input [N, C, H, W] with C = 3, got [2, 3, 4]")
  assert(msg:find("test_nn_norm.lua", 1, true), "the error names the caller's line: " .. msg)
  h.err(function() nn.BatchNorm1d(3)(tensor.zeros(2, 4)) end, "with C = 3, got [2, 4]")
  h.err(function() nn.BatchNorm1d(3)(tensor.zeros(1, 3)) end, "expected more than 1 value per channel")
  h.near(nn.BatchNorm1d(3):eval()(tensor.zeros(1, 3)), {{0, 0, 0}})  -- fine in eval mode
end)

h.done("test_nn_norm")
