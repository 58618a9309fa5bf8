-- test_nn_options.lua - the nn options users need, with PyTorch 1.13's
-- semantics, against references in plain Lua arithmetic (numbers, not
-- tensors) or values worked out by hand: CrossEntropyLoss and NLLLoss
-- weight, ignore_index and label_smoothing, BCEWithLogitsLoss weight and
-- pos_weight, Embedding padding_idx, MaxPool2d ceil_mode, LayerNorm and
-- Linear bias, inplace activations, GELU's tanh form, and the options that
-- wait for other work refused by name.
local h = dofile("helpers.lua")
local tensor = require "tensor"
local nn = require "nn"

local TOL = {rel = 1e-12, abs = 1e-12}

local function f64(values) return tensor.new(values, {dtype = "f64"}) end

local LOGITS = {{0.5, -1.25, 2.0, 0.0}, {1.5, 0.25, -0.75, 3.0}, {-2.0, 0.5, 1.0, 0.125}, {0.0, 0.0, 4.0, -1.0},
  {2.5, -0.5, 0.75, 1.25}}
local TARGETS = {3, 1, 4, 3, 2}
local WEIGHT = {0.5, 2.0, 1.5, 0.25}

local function log_softmax_rows(rows)
  local out = {}
  for i, row in ipairs(rows) do
    local top = -math.huge
    for _, v in ipairs(row) do top = math.max(top, v) end
    local sum = 0
    for _, v in ipairs(row) do sum = sum + math.exp(v - top) end
    out[i] = {}
    for c, v in ipairs(row) do out[i][c] = v - top - math.log(sum) end
  end
  return out
end

-- PyTorch 1.13's nll_loss / cross_entropy on class indices, per sample and
-- reduced: (1 - ε)·w[t]·(-logp[t]) + ε/C·Σ_c w[c]·(-logp[c]), 0 for an
-- ignored target; "mean" divides by Σ w[t] over the targets kept.
local function class_loss_reference(logp, targets, options)
  local classes = #logp[1]
  local smoothing = options.label_smoothing or 0
  local per_sample, total, divisor = {}, 0, 0
  for i, row in ipairs(logp) do
    local t = targets[i]
    local loss = 0
    if t ~= options.ignore_index then
      local function w(c) return options.weight and options.weight[c] or 1 end
      local smooth = 0
      for c = 1, classes do smooth = smooth - w(c) * row[c] end
      loss = (1 - smoothing) * w(t) * -row[t] + smoothing / classes * smooth
      divisor = divisor + w(t)
    end
    per_sample[i] = loss
    total = total + loss
  end
  return {none = per_sample, sum = total, mean = total / divisor}
end

local function options_with(base, reduction)
  local copy = {reduction = reduction}
  for key, value in pairs(base) do copy[key] = key == "weight" and f64(value) or value end
  return copy
end

h.test("CrossEntropyLoss: weight, ignore_index and label_smoothing, alone and together", function()
  local logp = log_softmax_rows(LOGITS)
  local cases = {
    {}, {weight = WEIGHT}, {ignore_index = 3}, {label_smoothing = 0.2},
    {weight = WEIGHT, ignore_index = 3}, {weight = WEIGHT, label_smoothing = 0.1},
    {ignore_index = 1, label_smoothing = 0.3}, {weight = WEIGHT, ignore_index = 3, label_smoothing = 0.25},
    {ignore_index = -100},  -- ignores nothing (and -100 is never read as a class)
  }
  -- every loss recorded first, then one barrier: one graph (one compile)
  local checks = {}
  for _, case in ipairs(cases) do
    local want = class_loss_reference(logp, TARGETS, case)
    for _, reduction in ipairs({"mean", "sum", "none"}) do
      local loss = nn.CrossEntropyLoss(options_with(case, reduction))(f64(LOGITS), tensor.new(TARGETS))
      checks[#checks + 1] = {loss, want[reduction]}
    end
  end
  tensor.mark_step()
  for _, check in ipairs(checks) do h.near(check[1], check[2], TOL) end
end)

h.test("CrossEntropyLoss: hand-worked values", function()
  -- equal logits: -logp = log 3 for every class
  local zeros, targets = f64({{0, 0, 0}, {0, 0, 0}}), tensor.new({1, 3})
  local log3 = math.log(3)
  -- mean with weights: (1·log3 + 3·log3) / (1 + 3)
  h.near(nn.CrossEntropyLoss({weight = f64({1, 2, 3})})(zeros, targets), log3, TOL)
  h.near(nn.CrossEntropyLoss({weight = f64({1, 2, 3}), reduction = "sum"})(zeros, targets), 4 * log3, TOL)
  -- the ignored sample counts neither in the sum nor in the divisor
  h.near(nn.CrossEntropyLoss({weight = f64({1, 2, 3}), ignore_index = 3, reduction = "none"})(zeros, targets),
    {log3, 0}, TOL)
  -- an ignored row may hold -inf: it stays out of the loss
  local edge = f64({{-math.huge, 0, 0}, {1, 2, 3}})
  local row2 = math.log(1 + math.exp(-1) + math.exp(-2))  -- -log p[3] of {1, 2, 3}
  h.near(nn.CrossEntropyLoss({ignore_index = 1})(edge, tensor.new({1, 3})), row2, TOL)
  -- every target ignored: 0 / 0, NaN as in PyTorch
  local all = nn.CrossEntropyLoss({ignore_index = 2})(zeros, tensor.new({2, 2})):item()
  assert(all ~= all, "expected NaN, got " .. tostring(all))
end)

h.test("CrossEntropyLoss: an ignored sample gets no gradient", function()
  local x = f64(LOGITS):requires_grad(true)
  nn.CrossEntropyLoss({ignore_index = 4, label_smoothing = 0.1})(x, tensor.new(TARGETS)):backward()
  local grad = x:grad():tolist()
  h.eq(grad[3], {0, 0, 0, 0})
  -- the others: (softmax - smoothed one-hot) / 4 kept samples
  local logp = log_softmax_rows(LOGITS)
  for c = 1, 4 do
    local target = (c == TARGETS[1] and 0.9 or 0) + 0.1 / 4
    h.near(f64({grad[1][c]}), {(math.exp(logp[1][c]) - target) / 4}, TOL)
  end
end)

h.test("CrossEntropyLoss: probability targets with weight and label_smoothing", function()
  local probs = {{0.1, 0.2, 0.3, 0.4}, {1, 0, 0, 0}, {0.25, 0.25, 0.25, 0.25}, {0, 0.5, 0.5, 0}, {0.7, 0.1, 0.1, 0.1}}
  local logp = log_softmax_rows(LOGITS)
  local epsilon, total, per_sample = 0.2, 0, {}
  for i, row in ipairs(logp) do
    local loss = 0
    for c = 1, 4 do loss = loss - WEIGHT[c] * row[c] * (probs[i][c] * (1 - epsilon) + epsilon / 4) end
    per_sample[i], total = loss, total + loss
  end
  local criterion = nn.CrossEntropyLoss({weight = f64(WEIGHT), label_smoothing = epsilon})
  h.near(criterion(f64(LOGITS), f64(probs)), total / 5, TOL)  -- mean over samples, as PyTorch
  h.near(nn.CrossEntropyLoss({weight = f64(WEIGHT), label_smoothing = epsilon, reduction = "none"})(f64(LOGITS),
    f64(probs)), per_sample, TOL)
  h.bad(function() nn.CrossEntropyLoss({ignore_index = 1})(f64(LOGITS), f64(probs)) end,
    "ignore_index applies to class-index targets")
end)

h.test("NLLLoss: weight and ignore_index", function()
  local logp = log_softmax_rows(LOGITS)
  local checks = {}
  for _, case in ipairs({{weight = WEIGHT}, {ignore_index = 1}, {weight = WEIGHT, ignore_index = 4}}) do
    local want = class_loss_reference(logp, TARGETS, case)
    for _, reduction in ipairs({"mean", "sum", "none"}) do
      checks[#checks + 1] = {nn.NLLLoss(options_with(case, reduction))(f64(logp), tensor.new(TARGETS)), want[reduction]}
    end
  end
  tensor.mark_step()
  for _, check in ipairs(checks) do h.near(check[1], check[2], TOL) end
end)

h.test("bad loss options are errors", function()
  h.bad(function() nn.CrossEntropyLoss({reduciton = "sum"}) end,
    "nn.CrossEntropyLoss: unknown option 'reduciton' (options: ignore_index, label_smoothing, reduction, weight)")
  h.bad(function() nn.CrossEntropyLoss({weight = {1, 2}}) end, "weight must be a 1-D tensor")
  h.bad(function() nn.CrossEntropyLoss({weight = f64({1, 2})})(f64(LOGITS), tensor.new(TARGETS)) end,
    "weight has 2 elements, the input 4 classes")
  h.bad(function() nn.NLLLoss({ignore_index = 1.5}) end, "ignore_index must be an integer")
  h.bad(function() nn.CrossEntropyLoss({label_smoothing = 1.5}) end, "label_smoothing must be a number in [0, 1]")
  h.bad(function() nn.NLLLoss({label_smoothing = 0.1}) end, "nn.NLLLoss: unknown option 'label_smoothing'")
  h.bad(function() nn.BCEWithLogitsLoss({pos_weight = 2}) end, "pos_weight must be a tensor")
end)

h.test("BCEWithLogitsLoss: pos_weight and weight", function()
  local x = {{0.5, -1.5, 2.0}, {-0.25, 3.0, -2.5}}
  local t = {{1, 0, 1}, {0.5, 1, 0}}
  local pos_weight, weight = {2.0, 0.5, 3.0}, {{1.0, 0.25, 2.0}, {0.5, 1.5, 1.0}}
  -- the textbook form: -w·(p·t·log σ(x) + (1 - t)·log(1 - σ(x)))
  local total, per = 0, {}
  for i = 1, 2 do
    per[i] = {}
    for j = 1, 3 do
      local log_sigmoid, log_one_minus = -math.log(1 + math.exp(-x[i][j])), -math.log(1 + math.exp(x[i][j]))
      local loss = -weight[i][j] * (pos_weight[j] * t[i][j] * log_sigmoid + (1 - t[i][j]) * log_one_minus)
      per[i][j], total = loss, total + loss
    end
  end
  local options = {pos_weight = f64(pos_weight), weight = f64(weight)}
  h.near(nn.BCEWithLogitsLoss(options)(f64(x), f64(t)), total / 6, TOL)
  options.reduction = "none"
  h.near(nn.BCEWithLogitsLoss(options)(f64(x), f64(t)), per, TOL)
  -- pos_weight alone, sum: the weight-free terms
  local plain = 0
  for i = 1, 2 do
    for j = 1, 3 do plain = plain + per[i][j] / weight[i][j] end
  end
  h.near(nn.BCEWithLogitsLoss({pos_weight = f64(pos_weight), reduction = "sum"})(f64(x), f64(t)), plain, TOL)
end)

h.test("Embedding: padding_idx starts at zero and gets no gradient", function()
  for _, case in ipairs({{padding = 2, row = 2}, {padding = -1, row = 4}}) do
    local embedding = nn.Embedding(4, 3, {padding_idx = case.padding})
    local weight = embedding.weight:tolist()
    h.eq(weight[case.row], {0, 0, 0})
    local index = tensor.new({{1, case.row, 3}, {case.row, 1, 1}})
    local out = embedding(index)
    h.eq(out:tolist()[1][2], {0, 0, 0})
    h.eq(out:tolist()[1][1], weight[1])
    out:sum():backward()
    local grad = embedding.weight:grad():tolist()
    h.eq(grad[case.row], {0, 0, 0})     -- used twice, no gradient
    h.eq(grad[1], {3, 3, 3})            -- used three times
    h.eq(grad[3], {1, 1, 1})
  end
  h.bad(function() nn.Embedding(4, 3, {padding_idx = 5}) end, "padding_idx must be an integer in 1..4 or -4..-1")
  h.bad(function() nn.Embedding(4, 3, {padding = 1}) end, "nn.Embedding: unknown option 'padding' (options: padding_idx)")
end)

-- v[i][j] = 10·i + j (1-based): a window's max is its bottom-right element.
local function grid(n)
  local rows = {}
  for i = 1, n do
    rows[i] = {}
    for j = 1, n do rows[i][j] = 10 * i + j end
  end
  return tensor.new({{rows}}, {dtype = "f32"})
end

h.test("MaxPool2d: ceil_mode, PyTorch's output size", function()
  -- 5x5, kernel 2, stride 2: 2x2 windows, and with ceil_mode a third one
  -- holding row (column) 5 alone
  h.eq(nn.MaxPool2d(2)(grid(5)):tolist()[1][1], {{22, 24}, {42, 44}})
  h.eq(nn.MaxPool2d(2, {ceil_mode = true})(grid(5)):tolist()[1][1], {{22, 24, 25}, {42, 44, 45}, {52, 54, 55}})
  -- 6x6, kernel 3, stride 2, padding 1: floor (6 + 2 - 3) / 2 + 1 = 3, ceil 4;
  -- the windows start at padded rows 0, 2, 4, 6: their last input rows 2, 4, 6, 6
  local pooled = nn.MaxPool2d(3, {stride = 2, padding = 1, ceil_mode = true})(grid(6))
  h.eq(pooled:tolist()[1][1], {{22, 24, 26, 26}, {42, 44, 46, 46}, {62, 64, 66, 66}, {62, 64, 66, 66}})
  -- 3x3, kernel 2, stride 2, padding 1: ceil would give 3, but the third
  -- window would start in the right padding (at 4 >= 3 + 1): 2, as PyTorch
  h.eq(nn.MaxPool2d(2, {stride = 2, padding = 1, ceil_mode = true})(grid(3)):tolist()[1][1], {{11, 13}, {31, 33}})
  -- the gradient reaches each input once per window it is the max of
  local x = grid(6):requires_grad(true)
  nn.MaxPool2d(3, {stride = 2, padding = 1, ceil_mode = true})(x):sum():backward()
  local grad = x:grad():tolist()[1][1]
  h.eq({grad[6][6], grad[2][6], grad[2][2], grad[1][1]}, {4, 2, 1, 0})
  h.bad(function() nn.MaxPool2d(2, {padding = 2, ceil_mode = true}) end,
    "nn.MaxPool2d: padding 2x2 must be at most half the kernel 2x2")
  h.bad(function() nn.MaxPool2d(2, {ceil_mode = 1}) end, "ceil_mode must be a boolean")
end)

h.test("LayerNorm: bias = false and elementwise_affine = false", function()
  local values = {{1, 2, 4}, {-3, 0, 6}}
  local function normalized(row)
    local mean = (row[1] + row[2] + row[3]) / 3
    local var = 0
    for _, v in ipairs(row) do var = var + (v - mean) ^ 2 / 3 end
    local out = {}
    for j, v in ipairs(row) do out[j] = (v - mean) / math.sqrt(var + 1e-5) end
    return out
  end
  local layer = nn.LayerNorm(3, {bias = false})
  h.eq(#layer:parameters(), 1)
  h.eq(layer:named_parameters()[1][1], "weight")
  tensor.no_grad(function() layer.weight:copy_(f64({2, -1, 0.5})) end)
  local want = {}
  for i, row in ipairs(values) do
    local n = normalized(row)
    want[i] = {n[1] * 2, n[2] * -1, n[3] * 0.5}
  end
  h.near(layer(f64(values)), want, {rel = 1e-6, abs = 1e-6})
  local plain = nn.LayerNorm(3, {elementwise_affine = false})
  h.eq(#plain:parameters(), 0)
  h.near(plain(f64(values)), {normalized(values[1]), normalized(values[2])}, {rel = 1e-12, abs = 1e-12})
end)

h.test("Linear: bias = false; a misspelt option is an error", function()
  local layer = nn.Linear(2, 3, {bias = false})
  h.eq(#layer:parameters(), 1)
  tensor.no_grad(function() layer.weight:copy_(tensor.new({{1, 2}, {3, 4}, {5, 6}})) end)
  h.eq(layer(tensor.new({{1, -1}}, {dtype = "f32"})):tolist(), {{-1, -1, -1}})
  h.bad(function() nn.Linear(2, 3, {bais = false}) end, "nn.Linear: unknown option 'bais' (options: bias, dtype)")
  h.bad(function() nn.Linear(2, 3, {bias = 0}) end, "nn.Linear: bias must be a boolean")
end)

h.test("inplace activations modify their input, as PyTorch's", function()
  local x = tensor.new({-1.5, 2, -3, 0.5})
  local y = nn.ReLU({inplace = true})(x)
  h.eq(x:tolist(), {0, 2, 0, 0.5})
  h.eq(y:tolist(), {0, 2, 0, 0.5})
  local kept = tensor.new({-1.5, 2})
  nn.ReLU()(kept)
  h.eq(kept:tolist(), {-1.5, 2})
  local ones = tensor.ones(200)
  local dropped = nn.Dropout(0.5, {inplace = true})(ones)
  h.eq(ones:tolist(), dropped:tolist())
  local zeros, twos = 0, 0
  for _, v in ipairs(ones:tolist()) do
    if v == 0 then zeros = zeros + 1 elseif v == 2 then twos = twos + 1 end
  end
  h.eq(zeros + twos, 200)
  assert(zeros > 50 and twos > 50, "dropout kept " .. twos .. " of 200")
  h.eq(nn.Dropout({inplace = true}).p, 0.5)
end)

h.test("inplace layers inside a training graph: the same values and gradients", function()
  -- the input records a gradient, so the layer computes out of place
  local function run(inplace)
    local w = f64({{1, -2}, {0.5, 3}}):requires_grad(true)
    local hidden = f64({{1, 1}, {-1, 2}}):matmul(w)
    local y = nn.ReLU({inplace = inplace})(hidden)
    y:sum():backward()
    return y:tolist(), w:grad():tolist()
  end
  local y_plain, grad_plain = run(false)
  local y_inplace, grad_inplace = run(true)
  h.eq(y_inplace, y_plain)
  h.eq(grad_inplace, grad_plain)
  -- by hand: hidden = {{1.5, 1}, {0, 8}}, relu keeps the positives
  h.eq(y_plain, {{1.5, 1}, {0, 8}})
  h.eq(grad_plain, {{1, 0}, {1, 3}})
end)

h.test("GELU: approximate = 'tanh'", function()
  local values = {-3, -0.5, 0, 0.75, 2}
  local want = {}
  for i, x in ipairs(values) do
    want[i] = 0.5 * x * (1 + h.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ^ 3)))
  end
  h.near(nn.GELU({approximate = "tanh"})(f64(values)), want, {rel = 1e-12, abs = 1e-12})
  h.near(nn.GELU()(f64(values)), h.map(values, h.gelu), {rel = 1e-12, abs = 1e-12})
  h.bad(function() nn.GELU({approximate = "fast"}) end, "approximate must be 'none' or 'tanh'")
end)

h.test("options that wait for other work are refused by name", function()
  h.bad(function() nn.MaxPool2d(2, {dilation = {2, 2}}) end, "nn.MaxPool2d: option 'dilation' = {2, 2}")
  h.bad(function() nn.AvgPool2d(2, {count_include_pad = false}) end, "option 'count_include_pad' = false")
  -- their defaults, spelt out, are fine (Conv2d's groups, dilation and
  -- padding_mode work: test_nn_conv_family.lua)
  local conv = nn.Conv2d(2, 3, 3, {groups = 1, dilation = {1, 1}, padding_mode = "zeros", padding = 1})
  h.shape(conv(tensor.rand(1, 2, 5, 5)), {1, 3, 5, 5})
  h.shape(nn.MaxPool2d(2, {dilation = 1, return_indices = false})(tensor.rand(1, 1, 4, 4)), {1, 1, 2, 2})
end)

h.done("test_nn_options.lua")
