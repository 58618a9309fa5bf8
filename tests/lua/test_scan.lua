-- test_scan.lua - tensor.scan and nn.scan_layers against the same
-- computation written as a Lua for loop (lazy, eager and compiled runs of
-- this file must all agree with the loop), gradients against the unrolled
-- loop and finite differences, the graph staying one loop node whatever the
-- trip count, and each error case's message.
local h = dofile("helpers.lua")
local gh = dofile("grad_helpers.lua")(h)
local values, f64, gradcheck = gh.values, gh.f64, gh.gradcheck
local nn, optim = require "nn", require "optim"

local EXACT = {rel = 0, abs = 0}
local CLOSE = {rel = 1e-12, abs = 1e-12}

local function max_difference(a, b)
  if type(a) == "number" then return math.abs(a - b) end
  local m = 0
  for i = 1, #a do m = math.max(m, max_difference(a[i], b[i])) end
  return m
end

local function same(a, b, tol, what)
  local d = max_difference(a:tolist(), b:tolist())
  assert(d <= (tol or 0), string.format("%s: scan and loop differ by %g", what or "value", d))
end

-- ---------------------------------------------------------------------------
-- Forward: scan equals the loop.

h.test("an RNN cell: final carry and stacked ys", function()
  tensor.manual_seed(1)
  local W, U = tensor.randn(4, 4, {dtype = "f64"}), tensor.randn(3, 4, {dtype = "f64"})
  local xs, h0 = tensor.randn(6, 2, 3, {dtype = "f64"}), tensor.zeros(2, 4, {dtype = "f64"})
  local function cell(hh, x) return (hh:matmul(W) + x:matmul(U)):tanh() end
  local final, ys = tensor.scan(function(hh, x)
    local n = cell(hh, x)
    return n, n:sum(2)
  end, h0, xs)
  local hh, outs = h0, {}
  for t = 1, 6 do
    hh = cell(hh, xs[t])
    outs[t] = hh:sum(2)
  end
  same(final, hh, 1e-14, "final carry")
  same(ys, tensor.stack(outs, 1), 1e-14, "ys")
  h.shape(ys, {6, 2})
end)

h.test("nested tables for carry, xs and ys; integer carries; reverse", function()
  local xs = {a = tensor.arange(1, 6), b = {tensor.arange(5) * 2, tensor.ones(5, 2)}}
  local init = {count = tensor.new(0), total = tensor.zeros(2)}
  local carry, ys = tensor.scan(function(c, x)
    local count = c.count + x.a
    local total = c.total + x.b[2] * x.b[1]
    return {count = count, total = total}, {running = count, pair = {x.a * 10, total}}
  end, init, xs)
  h.eq(carry.count:item(), 15)
  h.eq(carry.total:tolist(), {20, 20})
  h.eq(ys.running:tolist(), {1, 3, 6, 10, 15})
  h.eq(ys.pair[1]:tolist(), {10, 20, 30, 40, 50})
  h.eq(ys.pair[2]:tolist(), {{0, 0}, {2, 2}, {6, 6}, {12, 12}, {20, 20}})
  local _, rev = tensor.scan(function(c, x) local n = c + x return n, n end, tensor.new(0), tensor.arange(1, 5),
    {reverse = true})
  h.eq(rev:tolist(), {10, 9, 7, 4})  -- position t holds the carry after slice t, walking back
end)

h.test("captured tensors, Lua numbers, no xs (options.length), no ys", function()
  local scale = tensor.new({2.0})
  local offset = tensor.full({1}, 0.5) * 2  -- a pending value from outside
  local k = 3
  local final, ys = tensor.scan(function(c) return c * scale + offset + k end, tensor.zeros(1), nil,
    {length = 4})
  assert(ys == nil)
  local want = 0
  for _ = 1, 4 do want = want * 2 + 1 + 3 end
  h.eq(final:tolist(), {want})
end)

h.test("the graph holds one loop whatever the trip count", function()
  if tensor.is_eager() then return end
  local function ops_for(n)
    local before = tensor.metrics().ops_recorded
    local c = tensor.scan(function(c, x) return (c + x):tanh() * 0.5 end, tensor.zeros(3), tensor.ones(n, 3))
    local ops = tensor.metrics().ops_recorded - before
    c:sum():item()
    return ops
  end
  local short, long = ops_for(2), ops_for(200)
  assert(short == long, string.format("ops recorded: %d for 2 steps, %d for 200", short, long))
  assert(tensor.ir((tensor.scan(function(c, x) return c + x end, tensor.zeros(2), tensor.ones(50, 2)))):find("scan"))
end)

-- ---------------------------------------------------------------------------
-- Gradients.

local function rnn_loss(W, b, h0, xs, options)
  local final, ys = tensor.scan(function(hh, x)
    local n = (hh:matmul(W) + x + b):tanh()
    return n, n:sum(2)
  end, h0, xs, options)
  return final:sum() + (ys * ys):sum()
end

local function unrolled_loss(W, b, h0, xs)
  local hh, outs = h0, {}
  for t = 1, xs:size(1) do
    hh = (hh:matmul(W) + xs[t] + b):tanh()
    outs[t] = hh:sum(2)
  end
  return hh:sum() + (tensor.stack(outs, 1) ^ 2):sum()
end

for _, recompute in ipairs({false, true}) do
  h.test("gradients equal the unrolled loop's" .. (recompute and " (carries recomputed)" or ""), function()
    tensor.manual_seed(3)
    local inputs = {tensor.randn(4, 4, {dtype = "f64"}), tensor.randn(4, {dtype = "f64"}),
      tensor.randn(2, 4, {dtype = "f64"}), tensor.randn(5, 2, 4, {dtype = "f64"})}
    local function grads(loss_fn)
      local ts = {}
      for i, t in ipairs(inputs) do ts[i] = t:clone():requires_grad(true) end
      loss_fn(table.unpack(ts)):backward()
      local out = {}
      for i, t in ipairs(ts) do out[i] = t:grad() end
      return out
    end
    local a = grads(function(W, b, h0, xs) return rnn_loss(W, b, h0, xs, {recompute = recompute}) end)
    local b = grads(unrolled_loss)
    for i, name in ipairs({"W", "b", "h0", "xs"}) do same(a[i], b[i], 1e-12, "gradient of " .. name) end
  end)
end

-- Captured tensors reached through view ops, and the carry seen through
-- views: the gradients of W (captured) and h0 equal the unrolled loop's.
-- (Views made inside the body once lost the captured W's gradient.)
local VIEW_CELLS = {
  {"unsqueeze/squeeze of the carry", function(hh, W) return hh:unsqueeze(1):matmul(W):squeeze(1) end},
  {"W on the left of a column", function(hh, W) return W:matmul(hh:unsqueeze(2)):squeeze(2) end},
  {"W transposed twice", function(hh, W) return hh:matmul(W:t():t()) end},
  {"W transposed", function(hh, W) return hh:matmul(W:transpose(1, 2)) end},
  {"W permuted", function(hh, W) return hh:matmul(W:permute(2, 1)) end},
  {"W narrowed and its rows selected", function(hh, W)
    return hh:narrow(1, 1, 3):matmul(W:narrow(1, 2, 3)) + W:select(1, 1) + W[4]
  end},
  {"W reshaped, viewed, flattened", function(hh, W)
    return hh:matmul(W:reshape(2, 8):view(4, 4)) + W:flatten():narrow(1, 1, 4)
  end},
  {"W expanded", function(hh, W) return hh * W:narrow(1, 1, 1):expand(1, 4):squeeze(1) end},
  {"the carry reshaped and expanded", function(hh, W)
    return hh:reshape(2, 2):reshape(4):unsqueeze(1):expand(2, 4):sum(1):matmul(W) * 0.5
  end},
}
for _, case in ipairs(VIEW_CELLS) do
  h.test("captured tensors through views: " .. case[1], function()
    tensor.manual_seed(11)
    local W0 = tensor.randn(4, 4, {dtype = "f64"}) * 0.5
    local h00 = tensor.randn(4, {dtype = "f64"})
    local xs = tensor.randn(5, 4, {dtype = "f64"})
    local cell = case[2]
    local function grads(run)
      local W, h0 = W0:clone():requires_grad(true), h00:clone():requires_grad(true)
      local final = run(W, h0)
      assert(final:requires_grad(), "the result lost its gradient")
      ;(final * final):sum():backward()
      return W:grad(), h0:grad()
    end
    local scan_w, scan_h = grads(function(W, h0)
      return tensor.scan(function(hh, x) return (cell(hh, W) + x):tanh() end, h0, xs)
    end)
    local loop_w, loop_h = grads(function(W, h0)
      local hh = h0
      for t = 1, 5 do hh = (cell(hh, W) + xs[t]):tanh() end
      return hh
    end)
    same(scan_w, loop_w, 1e-12, "gradient of W")
    same(scan_h, loop_h, 1e-12, "gradient of h0")
  end)
end

-- Which inputs get a gradient is eager mode's answer in every mode: a y
-- computed from captured tensors alone keeps the captured tensors'
-- gradient (lazy mode lost it: the whole y is a value from outside the
-- loop), and an x or an initial carry the body never reads gets none, not
-- zeros (an optimizer skips a parameter without a gradient).
h.test("gradients of captured-only ys, and none for inputs the body ignores", function()
  local function grads(body)
    local b = tensor.new({1.0, 2.0, 3.0}):requires_grad(true)
    local init = tensor.new({0.5, 0.25, 1.0}):requires_grad(true)
    local xs = tensor.new({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}):requires_grad(true)
    local carry, ys = tensor.scan(function(hh, x) return body(hh, x, b) end, init, xs)
    ;(carry:sum() + ys:sum()):backward()
    local function list(t) return t:grad() and t:grad():tolist() or "none" end
    return {b = list(b), init = list(init), xs = list(xs)}
  end
  local cases = {
    {"y = b * 2", function(hh, x, b) return hh + x, b * 2 end,
     {b = {4, 4, 4}, init = {1, 1, 1}, xs = {{1, 1, 1}, {1, 1, 1}}}},
    {"y = b through views", function(hh, x, b) return hh + x, b:unsqueeze(1):t():t():squeeze(1) end,
     {b = {2, 2, 2}, init = {1, 1, 1}, xs = {{1, 1, 1}, {1, 1, 1}}}},
    {"y = b itself", function(hh, x, b) return hh + x, b end,
     {b = {2, 2, 2}, init = {1, 1, 1}, xs = {{1, 1, 1}, {1, 1, 1}}}},
    {"x ignored", function(hh, x, b) return hh * b, hh end,
     {b = {1.5, 1.25, 7}, init = {3, 7, 13}, xs = "none"}},
    {"the carry ignored", function(hh, x, b) return x * b, x end,
     {b = {4, 5, 6}, init = "none", xs = {{1, 1, 1}, {2, 3, 4}}}},
  }
  for _, case in ipairs(cases) do
    local got = grads(case[2])
    for _, name in ipairs({"b", "init", "xs"}) do
      assert(h.show(got[name]) == h.show(case[3][name]),
             string.format("%s: gradient of %s is %s, expected %s", case[1], name,
                           h.show(got[name]), h.show(case[3][name])))
    end
  end
end)

gradcheck("scan gradient against finite differences", function(W, b, h0, xs)
  return rnn_loss(W, b, h0, xs)
end, {values({3, 3}, -1, 1), values({3}, -1, 1), values({2, 3}, -1, 1), values({4, 2, 3}, -1, 1)})

gradcheck("reverse scan with a captured scalar and softmax", function(w, xs)
  local final = tensor.scan(function(c, x) return (c * w + x):softmax(1) * 1.5 end,
    w * 0, xs, {reverse = true})
  return final
end, {values({3}, -1, 1), values({4, 3}, -1, 1)})

-- ---------------------------------------------------------------------------
-- scan_layers.

local function blocks(n, width)
  local list = {}
  for i = 1, n do list[i] = nn.Sequential(nn.Linear(width, width), nn.Tanh()) end
  return list
end

h.test("scan_layers equals Sequential, forward and backward", function()
  tensor.manual_seed(4)
  local layers = blocks(5, 6)
  local x = tensor.randn(3, 6)
  local seq = nn.Sequential(table.unpack(layers))
  local a = nn.scan_layers(layers, x)
  same(a, seq(x), 1e-6, "forward")
  a:pow(2):sum():backward()
  local grads = {}
  for i, p in ipairs(seq:parameters()) do grads[i] = p:grad():clone() end
  seq:zero_grad()
  seq(x):pow(2):sum():backward()
  for i, p in ipairs(seq:parameters()) do same(grads[i], p:grad(), 1e-6, "gradient " .. i) end
end)

h.test("training with scan_layers and with Sequential gives the same parameters", function()
  local function train(use_scan)
    tensor.manual_seed(5)
    local layers = blocks(4, 5)
    local head = nn.Linear(5, 1)
    local params = {}
    for _, l in ipairs(layers) do for _, p in ipairs(l:parameters()) do params[#params + 1] = p end end
    for _, p in ipairs(head:parameters()) do params[#params + 1] = p end
    local opt = optim.SGD(params, {lr = 0.05, momentum = 0.9})
    local x, y = tensor.randn(8, 5), tensor.randn(8, 1)
    local seq = nn.Sequential(table.unpack(layers))
    for _ = 1, 4 do
      opt:zero_grad()
      local hidden = use_scan and nn.scan_layers(layers, x) or seq(x)
      nn.MSELoss()(head(hidden), y):backward()
      opt:step()
    end
    return params
  end
  local a, b = train(true), train(false)
  for i = 1, #a do same(a[i], b[i], 1e-5, "parameter " .. i) end
end)

h.test("ScanLayers keeps the parameters stacked and trains like Sequential", function()
  local function train(use_scan)
    tensor.manual_seed(6)
    local layers = blocks(4, 5)
    local head = nn.Linear(5, 1)
    local body = use_scan and nn.ScanLayers(layers) or nn.Sequential(table.unpack(layers))
    local model = nn.Sequential(body, head)
    if use_scan then
      assert(#body:parameters() == 2, "one stacked weight and one stacked bias")
      h.shape(body:parameters()[1], {4, 5, 5})
    end
    local opt = optim.Adam(model:parameters(), {lr = 0.01})
    local x, y = tensor.randn(8, 5), tensor.randn(8, 1)
    for _ = 1, 4 do
      opt:zero_grad()
      nn.MSELoss()(model(x), y):backward()
      opt:step()
    end
    -- the layers' own parameters show the trained values either way
    local values = {}
    for _, l in ipairs(layers) do for _, p in ipairs(l:parameters()) do values[#values + 1] = p end end
    return values
  end
  local a, b = train(true), train(false)
  for i = 1, #a do same(a[i], b[i], 1e-5, "parameter " .. i) end
end)

h.test("scan_layers names the first difference between layers", function()
  local layers = blocks(3, 4)
  layers[3] = nn.Sequential(nn.Linear(4, 5), nn.Tanh())
  h.err(function() nn.scan_layers(layers, tensor.zeros(1, 4)) end,
        "parameter '1.weight' is f32[5, 4] in layer 3 but f32[4, 4] in layer 1")
  layers[3] = nn.Sequential(nn.Linear(4, 4, {bias = false}), nn.Tanh())
  h.err(function() nn.scan_layers(layers, tensor.zeros(1, 4)) end, "layer 3 has no parameter '1.bias'")
end)

-- ---------------------------------------------------------------------------
-- Errors, each leaving the process usable.

h.test("an observation inside the body", function()
  for _, observe in ipairs({
    function(t) return t:item() end,
    function(t) return t:tolist() end,
    function(t) return tostring(t) end,
    function(t) return t < 1 end,
    function() tensor.mark_step() end,
  }) do
    local ok, message = pcall(tensor.scan, function(c, x)
      observe(c:sum())
      return c + x
    end, tensor.zeros(2), tensor.ones(3, 2))
    assert(not ok, "observing inside the body must fail")
    assert(message:find("cannot sync inside a scan body"), message)
    assert(message:find("test_scan.lua:%d+"), "the message names the Lua line: " .. message)
  end
end)

h.test("a carry that changes shape or dtype", function()
  h.err(function()
    tensor.scan(function(c, x) return tensor.cat({c, x}), c end, tensor.zeros(2), tensor.ones(3, 2))
  end, "carry is f32[2] going into the body but f32[4] coming out")
  h.err(function()
    tensor.scan(function(c, x) return {h = (c.h + x):double()} end, {h = tensor.zeros(2)}, tensor.ones(3, 2))
  end, "carry.h is f32[2] going into the body but f64[2] coming out")
end)

h.test("xs whose first dims disagree", function()
  h.err(function()
    tensor.scan(function(c) return c end, tensor.zeros(1), {a = tensor.ones(4, 1), b = {tensor.ones(3)}})
  end, "xs.b[1] has 3 slices along dim 1, but xs.a has 4")
  h.err(function() tensor.scan(function(c) return c end, tensor.zeros(1)) end, "give options.length")
  h.err(function() tensor.scan(function(c) return c end, {tensor.zeros(1), 5}, nil, {length = 2}) end,
        "init[2] is a number")
end)

h.test("tensors of the body do not leak out (lazy mode)", function()
  if tensor.is_eager() then return end
  local leaked
  tensor.scan(function(c, x)
    leaked = c * 2
    return c + x
  end, tensor.zeros(2), tensor.ones(3, 2))
  h.err(function() return leaked:tolist() end, "inside a scan body")
end)

h.test("outer tensors are not written, in every mode", function()
  local outer = tensor.zeros(2)
  local view = outer:narrow(1, 2, 1)
  for _, write in ipairs({
    function(x) outer:add_(x) end,
    function() view:fill_(5) end,   -- through a view
    function(x) outer:copy_(x) end,
    function() outer[1] = 3 end,
  }) do
    local message = h.err(function()
      tensor.scan(function(c, x) write(x) return c end, tensor.zeros(2), tensor.ones(3, 2))
    end, "cannot write in place into a tensor from outside the scan body")
    assert(message:find("test_scan.lua:%d+"), "the message names the Lua line: " .. message)
  end
  -- A tensor made inside the body may be written.
  local ok = tensor.scan(function(c, x)
    local t = tensor.zeros(2)
    t:add_(x)
    return c + t
  end, tensor.zeros(2), tensor.ones(3, 2))
  h.eq(ok:tolist(), {3, 3})
  h.eq(outer:tolist(), {0, 0})
end)

h.test("a scan of no slices returns init and empty ys", function()
  local init = tensor.new({1, 2, 3}, {dtype = "f32"}):requires_grad(true)
  local calls = 0
  local carry, ys = tensor.scan(function(h, x)
    calls = calls + 1
    return h + x, {a = (h * x):long(), b = x:sum()}
  end, init, tensor.zeros(0, 3))
  h.eq(carry:tolist(), {1, 2, 3})
  h.eq(ys.a:size(), {0, 3})
  h.eq(ys.a:dtype(), "i64")
  h.eq(ys.b:size(), {0})
  assert(calls <= 1, "the body is recorded at most once")
  -- The carry is a new tensor with gradients to init.
  carry:sum():backward()
  h.eq(init:grad():tolist(), {1, 1, 1})
  carry = tensor.scan(function(h) return h * 2 end, tensor.ones(2), nil, {length = 0, reverse = true})
  h.eq(carry:tolist(), {1, 1})
  -- The carry is still checked.
  h.err(function()
    tensor.scan(function(h, x) return x:sum() end, tensor.zeros(3), tensor.zeros(0, 3))
  end, "carry is f32[3] going into the body but f32[] coming out")
end)

h.test("errors found by scan itself name the user's line", function()
  for _, call in ipairs({
    function() tensor.scan(function(c, x) return tensor.cat({c, x}), c end, tensor.zeros(2), tensor.ones(3, 2)) end,
    function() tensor.scan(function(c) return c end, tensor.zeros(1)) end,
    function() tensor.scan(function(c) return c end, tensor.zeros(1), nil, {length = -1}) end,
    function() tensor.scan(function(c) return c end, tensor.zeros(1), nil, {lenght = 2}) end,
    function() tensor.scan(42, tensor.zeros(1), tensor.ones(2, 1)) end,
    function() tensor.scan(function(c) return c end, {tensor.zeros(1), 5}, nil, {length = 2}) end,
    function() tensor.scan(function(c) return {c} end, tensor.zeros(1), nil, {length = 2}) end,
  }) do
    local message = h.err(call, "scan: ")
    assert(message:find("^[^:]*test_scan.lua:%d+: scan: "), "the message names the Lua line: " .. message)
  end
end)

h.test("an error raised by the body comes out unchanged", function()
  local ok, message = pcall(tensor.scan, function() error({code = 7}) end, tensor.zeros(1), tensor.ones(2, 1))
  assert(not ok and type(message) == "table" and message.code == 7)
  h.eq(tensor.scan(function(c, x) return c + x end, tensor.zeros(1), tensor.ones(2, 1)):tolist(), {2})
end)

h.done("test_scan")
