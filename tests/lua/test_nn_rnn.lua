-- test_nn_rnn.lua - nn.LSTM and nn.GRU against numbers computed with
-- PyTorch 1.13 (torch.nn.LSTM/GRU(3, 4, num_layers=2), float64) from the
-- same weights, inputs and initial states: outputs, final states and
-- gradients of a weighted sum of them; batch_first and unbatched inputs
-- against the same numbers; the graph not growing with the sequence length.
local h = dofile("helpers.lua")
local nn = require "nn"

local TOL = {rel = 5e-5, abs = 5e-5}

local fill = h.pattern_fill

local ref = {
  LSTM = {y = {{{0.06771403953, -0.03123238386, -0.08234761315, -0.1743670849}, {-0.01555843162, 0.2623705665, -0.1159815341, -0.01064270127}}, {{0.05563894199, 0.1650595309, -0.111292448, -0.170758624}, {0.03659163892, 0.3201507443, -0.08106136419, -0.05765959516}}, {{0.05770570032, 0.2662346395, -0.1064579722, -0.1616223221}, {0.06156700644, 0.3424045434, -0.0584446309, -0.08511580031}}, {{0.06438679155, 0.3058398443, -0.09402127161, -0.1497963627}, {0.07231919846, 0.3437745626, -0.0529687264, -0.102140598}}, {{0.07631668224, 0.284696549, -0.1198282129, -0.1235162335}, {0.08213142564, 0.3062988391, -0.0882776226, -0.09687018766}}}, h_n = {{{-0.03320105568, -0.01470758675, 0.007924757613, 0.1056578892}, {-0.02760754553, -0.07794097066, 0.04624868019, 0.1155104315}}, {{0.07631668224, 0.284696549, -0.1198282129, -0.1235162335}, {0.08213142564, 0.3062988391, -0.0882776226, -0.09687018766}}}, grad_x = {{{-0.02537645737, -0.005050788848, 0.02286294046}, {0.001557236184, 0.003195366179, -0.002058735846}}, {{-0.03718841947, 0.009411536708, 0.01481391786}, {-0.01126787226, -0.006247876646, 0.00447938746}}, {{-0.09983974125, 0.07738753547, 0.08554910791}, {-0.01430343872, 0.005765092593, 0.0213211675}}, {{-0.08263296627, 0.03569241971, 0.07813923436}, {-0.08520771852, 0.00300562187, 0.09486196503}}, {{-0.2934436258, 0.08051029062, 0.119715979}, {-0.2918634442, 0.07363430017, 0.1762198798}}}, grad_h0 = {{{0.009741135042, -0.01212660714, 0.01254825141, 0.04908944384}, {0.008008230627, 0.008491950428, -0.01004377836, -0.001179905103}}, {{-0.02867376666, -0.05863134676, -0.03525249027, -0.04770306503}, {-0.04048939024, 0.09791184892, -0.06693172787, 0.07240772674}}}, grad_weight_ih_l0 = {{-0.165874348, 0.04430290564, 0.3526823756}, {0.0569783434, 0.04786755897, -0.1871678449}, {0.02115385356, -0.01899064102, 0.006982377483}, {-0.2632008965, 0.07008545893, 0.4582310868}, {0.06589759239, 0.008479331278, -0.08342461289}, {-0.03988979916, 0.05784180603, 0.01192705723}, {-0.07481874355, -0.09820351385, 0.181821832}, {0.007027137989, -0.008037156702, -0.02280096634}, {0.3435847231, -0.1331991223, -0.7511392817}, {0.3257389532, -0.475254951, -0.4345365703}, {-0.1579408214, -0.2058502495, 0.4049993999}, {-0.7336981723, 0.9396274311, 0.5748856124}, {-0.0222553389, 0.01819552219, 0.01317152729}, {-0.01629563403, -0.01481896187, 0.04505340125}, {0.02707061841, -0.09672954105, 0.1690118886}, {-0.1147813547, 0.0353587106, 0.1954179643}}, grad_weight_hh_l1 = {{-0.0286803976, -0.09927046599, 0.03261402466, 0.0389889658}, {-0.0072483218, -0.02593222428, 0.002744784851, 0.0148591452}, {0.02966549221, -0.08285734095, -0.01971117955, 0.008524388184}, {-0.0476526686, -0.08471664306, 0.0456423802, 0.04503984226}, {-0.03407361443, -0.009308893418, 0.01919289228, 0.0105345296}, {0.06578806933, -0.1043731552, -0.03884566605, 0.0152640482}, {0.004117525347, -0.02616350256, -0.00334240054, -0.0002386944829}, {-0.08682872271, -0.1956106887, 0.08151029302, 0.1072407814}, {-0.1094300541, -0.2160290426, 0.1043110567, 0.09449231324}, {0.01984186779, -0.1484719957, -0.04397299096, 0.01708513146}, {-0.04837457133, 0.2714211279, 0.02657256688, -0.02972269379}, {0.4429836233, 1.21346783, -0.4529804094, -0.5392618179}, {-0.03648991749, 0.01363342438, 0.01990445593, 0.0008826042802}, {0.07943043197, -0.08504109249, -0.05584849127, 0.0008961127863}, {0.04179782686, -0.05132550109, -0.03249555801, -0.002055733714}, {-0.05434597081, -0.07581040525, 0.04634867744, 0.06424540958}}, grad_bias_hh_l0 = {0.3533962027, 0.03455335701, -0.1080488731, 0.37256248, -0.02584994108, 0.124029212, -0.07211518889, -0.009681964683, -0.484128687, -1.010827615, -0.09829695557, 2.246380006, 0.09569547694, -0.03294942295, -0.1522446228, 0.1663621191}, grad_bias_ih_l1 = {-0.366947385, -0.09006753896, -0.01983049497, -0.4641865414, -0.1597019985, 0.08576797585, -0.02774744697, -0.913545382, -1.034337078, -0.09896546746, 0.3111899756, 5.144584743, -0.1264705091, 0.2075592689, 0.09658995398, -0.5312585218}, c_n = {{{-0.1083846953, -0.02248115616, 0.02393155546, 0.2569413347}, {-0.09748497644, -0.1203067606, 0.1580000998, 0.2834736572}}, {{0.1517153031, 0.5911401591, -0.2017688194, -0.3711601699}, {0.1619770759, 0.6418608215, -0.1509373827, -0.2980112273}}}, grad_c0 = {{{0.02110690454, 0.01996386394, -0.0339084497, 0.04489370902}, {0.007659366635, -0.003455238472, -0.0006365314681, 0.01104022151}}, {{-0.3063196007, -0.1863029839, -0.07257583212, 0.2401537217}, {0.01452989867, 0.2561493145, -0.326469601, 0.06320144479}}}},
  LSTM_names = {"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_ih_l1", "weight_hh_l1", "bias_ih_l1", "bias_hh_l1"},
  GRU = {y = {{{0.25353077, -0.03520443085, -0.3029116956, -0.120041455}, {0.09920323436, -0.2422829851, -0.09092077698, -0.1757530475}}, {{-0.02283799392, 0.3459203317, -0.1231262628, -0.254669096}, {-0.1413038992, 0.09608821392, 0.1228838752, -0.3077584679}}, {{-0.07694065136, 0.5664820763, -0.050581977, -0.3223583446}, {-0.1984479416, 0.3817045216, 0.1130520742, -0.3986739517}}, {{-0.1117178125, 0.6831197904, 0.0409180831, -0.371024392}, {-0.2224023559, 0.5718622213, 0.1519285413, -0.4527877736}}, {{0.07783882924, 0.7028553356, -0.09867407058, -0.2845913137}, {-0.02364857755, 0.6411954043, -0.02713890832, -0.3759967069}}}, h_n = {{{-0.661253137, -0.008499233009, -0.1263425887, -0.1256470285}, {-0.5843018314, -0.1122272092, -0.02691079035, -0.04062892377}}, {{0.07783882924, 0.7028553356, -0.09867407058, -0.2845913137}, {-0.02364857755, 0.6411954043, -0.02713890832, -0.3759967069}}}, grad_x = {{{-0.04407763234, 0.01002743192, 0.00682648758}, {-0.06705663475, 0.06962890364, 0.04406071682}}, {{-0.04687414485, -0.005548798539, 0.05319566993}, {0.07288568378, -0.02700490082, -0.09049797519}}, {{-0.1890890944, 0.1512947604, 0.1950942719}, {0.1056387542, -0.1046974548, -0.08189748035}}, {{-0.02916971763, -0.008315366903, 0.02553152927}, {-0.1117850908, 0.03994222663, 0.1352341616}}, {{-0.2887242484, 0.273141546, 0.2261051806}, {-0.1630074071, 0.1293771937, 0.1362147924}}}, grad_h0 = {{{0.01327318774, 0.05489657077, -0.05687165624, 0.04341853074}, {-0.2271196814, -0.02859616258, 0.2177909114, 0.04726710915}}, {{-0.6792261706, -0.7465746735, -0.1630298253, 0.3733441577}, {0.07398689519, 0.7139781242, -0.5481399966, -0.06367806315}}}, grad_weight_ih_l0 = {{-0.02033478731, -0.04826065637, -0.07022182123}, {-0.002038855667, 0.008616549788, -0.01043623402}, {0.05160273913, 0.02564702685, -0.00413771239}, {-0.07396896966, 0.1968367807, -0.01732741925}, {0.1159710795, 0.09455501322, -0.3327222146}, {-0.04549299187, 0.02142854691, 0.1276332448}, {-0.1860201938, -0.01139201874, 0.1026098924}, {0.2309314297, -0.03292142044, -0.454104919}, {0.2796972942, -0.2936521546, -1.200942839}, {0.1017401183, -0.2715528825, 0.1411040022}, {0.05475596055, -0.116056388, 0.5135237116}, {-0.4759372956, 1.503192059, -0.1768565092}}, grad_weight_hh_l1 = {{0.006953417948, -0.08701065865, -0.008143376348, 0.0538931811}, {-0.009278095016, 0.02145405413, 0.01123463157, 0.001498343815}, {0.04123970887, -0.04101670443, -0.0331528665, 0.02410343489}, {-0.02111919088, 0.09198786175, 0.006550037108, -0.07337524322}, {-0.1440303325, 0.2086874566, 0.06020429392, -0.06940251348}, {0.06434443731, 0.04583592617, -0.0167522639, -0.0163551197}, {0.01431293509, -0.01776306456, -0.01311872564, -0.03517110263}, {0.1105235474, -0.09941567107, -0.07287994025, 0.01976331911}, {-0.03267142835, -0.1445647961, -0.0006007667368, 0.1076106681}, {0.05904932816, -0.1930596206, -0.04815873138, 0.03896109938}, {-0.09154966222, 0.04770453782, 0.08373556948, -0.05265391109}, {-0.05250433459, 0.6834095059, -0.001428648095, -0.6355083697}}, grad_bias_hh_l0 = {-0.015378258, 0.06189717501, -0.03151730837, 0.191794379, -0.3052515432, 0.1003404782, 0.07217215502, -0.200431501, -0.07625063048, -0.2502665308, -0.0690199561, 0.9384781349}, grad_bias_ih_l1 = {-0.1527903757, -0.02503009817, -0.002572867251, 0.2047673533, -0.1283435499, 0.2578843007, 0.1387402108, 0.2153459487, -1.50372674, -0.2351995665, 0.02908533516, 2.940017328}},
  GRU_names = {"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_ih_l1", "weight_hh_l1", "bias_ih_l1", "bias_hh_l1"},
}

-- The model with the reference's weights: parameter k (0-based, in
-- named_parameters order) is fill(shape, 5 + 2k, 31) * 0.4.
local function model(kind, options)
  local m = nn[kind](3, 4, options)
  local state = {}
  for k, pair in ipairs(m:named_parameters()) do
    state[pair[1]] = fill(pair[2]:size(), 5 + 2 * (k - 1), 31) * 0.4
  end
  return m:load_state_dict(state)
end

local transpose12 = h.transpose12

for _, kind in ipairs({"LSTM", "GRU"}) do
  local want = ref[kind]
  h.test(kind .. ": parameter names and shapes", function()
    local m = nn[kind](3, 4, {num_layers = 2})
    local names = {}
    for _, pair in ipairs(m:named_parameters()) do names[#names + 1] = pair[1] end
    assert(table.concat(names, " ") == table.concat(ref[kind .. "_names"], " "), table.concat(names, " "))
    local gates = kind == "LSTM" and 16 or 12
    h.shape(m.weight_ih_l0, {gates, 3})
    h.shape(m.weight_hh_l0, {gates, 4})
    h.shape(m.weight_ih_l1, {gates, 4})
    h.shape(m.bias_hh_l1, {gates})
    local bound = 1 / math.sqrt(4)  -- PyTorch's init: uniform in +-1/sqrt(hidden)
    for _, p in ipairs(m:parameters()) do
      for _, v in ipairs(h.flatten(p:tolist())) do assert(math.abs(v) <= bound) end
    end
    h.eq(#nn[kind](3, 4, {bias = false}):parameters(), 2)
  end)

  h.test(kind .. ": outputs, final states and gradients", function()
    local m = model(kind, {num_layers = 2})
    local x = fill({5, 2, 3}, 7, 23):requires_grad(true)
    local h0 = (fill({2, 2, 4}, 3, 13) * 0.5):requires_grad(true)
    local c0 = (fill({2, 2, 4}, 5, 11) * 0.5):requires_grad(true)
    local coef, coef2 = fill({5, 2, 4}, 3, 17), fill({2, 2, 4}, 5, 19)
    local y, h_n, c_n
    if kind == "LSTM" then y, h_n, c_n = m(x, h0, c0) else y, h_n = m(x, h0) end
    local loss = (y * coef):sum() + (h_n * coef2):sum()
    if c_n then loss = loss + (c_n * coef2):sum() end
    loss:backward()
    tensor.mark_step()  -- one graph computes everything checked below
    h.near(y, want.y, TOL)
    h.near(h_n, want.h_n, TOL)
    if c_n then
      h.near(c_n, want.c_n, TOL)
      h.near(c0:grad(), want.grad_c0, TOL)
    end
    h.near(x:grad(), want.grad_x, TOL)
    h.near(h0:grad(), want.grad_h0, TOL)
    h.near(m.weight_ih_l0:grad(), want.grad_weight_ih_l0, TOL)
    h.near(m.weight_hh_l1:grad(), want.grad_weight_hh_l1, TOL)
    h.near(m.bias_hh_l0:grad(), want.grad_bias_hh_l0, TOL)
    h.near(m.bias_ih_l1:grad(), want.grad_bias_ih_l1, TOL)
  end)

  h.test(kind .. ": batch_first and unbatched inputs give the same numbers", function()
    local m = model(kind, {num_layers = 2, batch_first = true})
    local x = fill({5, 2, 3}, 7, 23)
    local h0, c0 = fill({2, 2, 4}, 3, 13) * 0.5, fill({2, 2, 4}, 5, 11) * 0.5
    local y, h_n = m(x:transpose(1, 2):contiguous(), h0, c0)
    h.shape(y, {2, 5, 4})
    h.near(y, transpose12(want.y), TOL)
    h.near(h_n, want.h_n, TOL)
    -- unbatched [T, in]: sample 2 alone
    local plain = model(kind, {num_layers = 2})
    local y2, h2 = plain(x:select(2, 2), h0:select(2, 2), c0:select(2, 2))
    h.shape(y2, {5, 4})
    h.shape(h2, {2, 4})
    local col = {}
    for t = 1, 5 do col[t] = want.y[t][2] end
    h.near(y2, col, TOL)
    h.near(h2, {want.h_n[1][2], want.h_n[2][2]}, TOL)
  end)

  h.test(kind .. ": the graph does not grow with the sequence length", function()
    local m = model(kind, {num_layers = 2})
    local function ops_for(steps)
      m:zero_grad()  -- (accumulating into earlier gradients would add ops)
      tensor.mark_step()
      local before = tensor.metrics().ops_recorded
      local y = m(fill({steps, 2, 3}, 7, 23))
      local loss = y:sum()
      loss:backward()
      local ops = tensor.metrics().ops_recorded - before
      loss:item()
      return ops
    end
    local short, long = ops_for(5), ops_for(50)
    if not tensor.is_eager() then
      assert(short == long, string.format("ops recorded: %d for 5 steps, %d for 50", short, long))
    end
    -- and the zero-state default: running with zeros given explicitly is the same
    local x = fill({4, 2, 3}, 7, 23)
    local zeros = tensor.zeros(2, 2, 4)
    local a = m(x)
    local b = m(x, zeros, zeros)
    h.near(a, b:tolist(), {rel = 0, abs = 0})
  end)
end

h.test("dropout between layers: training only, reproducible from the seed", function()
  local m = model("GRU", {num_layers = 2, dropout = 0.5})
  local x, h0 = fill({5, 2, 3}, 7, 23), fill({2, 2, 4}, 3, 13) * 0.5
  m:eval()
  h.near(m(x, h0), ref.GRU.y, TOL)
  m:train()
  tensor.manual_seed(4)
  local a = m(x, h0):tolist()
  tensor.manual_seed(4)
  h.near(m(x, h0), a, {rel = 0, abs = 0})
  local differs = false
  for i, v in ipairs(h.flatten(a)) do
    if math.abs(v - h.flatten(ref.GRU.y)[i]) > 1e-3 then differs = true end
  end
  assert(differs, "dropout changed nothing in training mode")
  -- one layer: nothing to drop between layers
  local single = nn.GRU(3, 4, {dropout = 0.5})
  tensor.manual_seed(5)
  local y1 = single(x):tolist()
  single:eval()
  h.near(single(x), y1, {rel = 0, abs = 0})
end)

h.test("errors", function()
  h.err(function() nn.LSTM(3, 4, {dropout = 1}) end, "LSTM: dropout must be a number in [0, 1), got 1")
  h.err(function() nn.LSTM(0, 4) end, "LSTM: input_size must be a positive integer, got 0")
  h.err(function() nn.GRU(3, 4, {num_layers = 0}) end, "GRU: num_layers must be a positive integer, got 0")
  h.err(function() nn.GRU(3, 4, {layers = 2}) end, "GRU: unknown option 'layers'")
  local lstm = nn.LSTM(3, 4)
  local msg = h.err(function() lstm(tensor.zeros(5, 2, 2)) end, "LSTM: expected input [T, N, 3]", "got [5, 2, 2]")
  assert(msg:find("test_nn_rnn.lua", 1, true), "the error names the caller's line: " .. msg)
  h.err(function() lstm(tensor.zeros(5, 2, 3), tensor.zeros(1, 3, 4)) end, "LSTM: expected h0 [1, 2, 4], got [1, 3, 4]")
  h.err(function() lstm(tensor.zeros(5, 2, 3), nil, tensor.zeros(2, 4)) end, "LSTM: expected c0 [1, 2, 4], got [2, 4]")
  h.shape(lstm(tensor.zeros(5, 2, 3)), {5, 2, 4})  -- still usable
end)

h.done("test_nn_rnn")
