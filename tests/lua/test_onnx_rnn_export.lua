-- test_onnx_rnn_export.lua - onnx.export of nn.GRU and nn.LSTM calls as ONNX
-- GRU and LSTM nodes (stdlib/onnx_export.lua): each file passes libonnx's
-- checker and strict shape inference (build/onnx_check), holds one node per
-- layer, and re-imported with onnx.load (stdlib/onnx_ops_rnn.lua, written
-- apart from nn_rnn.lua and with ONNX's gate order) computes what the Lua
-- module computes.
local h = dofile("helpers.lua")
local nn = require "nn"
local onnx = require "onnx"
local native = require "stdlib.native"

local build_dir = arg[-1]:match("^(.*)/[^/]*$") or "."
local checker = build_dir .. "/onnx_check"
local tmp = os.tmpname()
os.remove(tmp)
local function temp_path(name) return tmp .. "_" .. name .. ".onnx" end
local TOL = {rel = 1e-5, abs = 1e-6}

local function check_with_libonnx(path)
  local pipe = io.popen(string.format("%q %q 2>&1", checker, path))
  local text = pipe:read("a")
  local ok = pipe:close()
  if not ok then error("onnx_check failed: " .. text, 2) end
  assert(text:match("^ok: "), text)
end

-- The op types of a file's nodes, and its nodes of type `op`.
local function nodes_of(path, op)
  local model = native.onnx_decode_model(h.read_bytes(path))
  local list = {}
  for _, node in ipairs(model.graph.nodes) do
    if node.op_type == op then list[#list + 1] = node end
    assert(node.op_type ~= "Scan" and node.op_type ~= "Loop", "the file holds a " .. node.op_type)
  end
  return list
end

local function same_values(got, want)
  h.shape(got, want:size())
  h.near(got, want:tolist(), TOL)
end

h.test("a 2-layer batch_first GRU + Linear module: two GRU nodes, the module's outputs", function()
  tensor.manual_seed(1)
  local Net = nn.class("GruNet")
  function Net:init()
    self.rnn = nn.GRU(3, 4, {num_layers = 2, batch_first = true})
    self.fc = nn.Linear(4, 2)
  end
  function Net:forward(x)
    local y, h_n = self.rnn(x)
    return self.fc(y:select(2, -1)), h_n
  end
  local net = Net()
  local x = tensor.randn(2, 5, 3)
  local path = temp_path("gru")
  onnx.export(net, {x}, path)
  check_with_libonnx(path)
  local grus = nodes_of(path, "GRU")
  h.eq(#grus, 2)
  h.eq(grus[1].attributes.linear_before_reset, 1)
  h.eq(grus[1].attributes.hidden_size, 4)
  local model = onnx.load(path)
  local out, h_n = model(x)
  local want_out, want_h = net(x)
  same_values(out, want_out)
  same_values(h_n, want_h)
  -- and the same gradient reaches the input through both
  local x1, x2 = x:clone(), x:clone()
  x1:requires_grad(true)
  x2:requires_grad(true)
  local a, b = model(x1), net(x2)
  local loss = (a * a):sum() + (b * b):sum()  -- one backward for both: a and b are independent
  loss:backward()
  same_values(x1:grad(), x2:grad())
  os.remove(path)
end)

h.test("an LSTM with h0 and c0 inputs, Y, Y_h and Y_c; without bias", function()
  tensor.manual_seed(2)
  for _, bias in ipairs({true, false}) do
    local lstm = nn.LSTM(3, 5, {num_layers = 2, bias = bias})
    local xs, h0, c0 = tensor.randn(6, 2, 3), tensor.randn(2, 2, 5), tensor.randn(2, 2, 5)
    local path = temp_path("lstm")
    onnx.export(function(x, h, c) return lstm(x, h, c) end, {xs, h0, c0}, path)
    check_with_libonnx(path)
    h.eq(#nodes_of(path, "LSTM"), 2)
    local y, y_h, y_c = onnx.load(path)(xs, h0, c0)
    local want_y, want_h, want_c = lstm(xs, h0, c0)
    same_values(y, want_y)
    same_values(y_h, want_h)
    same_values(y_c, want_c)
    os.remove(path)
  end
end)

h.test("an unbatched GRU call", function()
  tensor.manual_seed(3)
  local gru = nn.GRU(3, 4)
  local xs, h0 = tensor.randn(5, 3), tensor.randn(1, 4)
  local path = temp_path("unbatched")
  onnx.export(function(x, h) return gru(x, h) end, {xs, h0}, path)
  check_with_libonnx(path)
  local y, y_h = onnx.load(path)(xs, h0)
  local want_y, want_h = gru(xs, h0)
  same_values(y, want_y)
  same_values(y_h, want_h)
  os.remove(path)
end)

h.test("dynamic_batch: a sequence-first LSTM's dim 1 (time) is symbolic; batch_first is refused", function()
  tensor.manual_seed(4)
  local lstm = nn.LSTM(3, 4)
  local path = temp_path("dynamic")
  onnx.export(function(x) return (lstm(x)) end, {tensor.randn(4, 2, 3)}, path, {dynamic_batch = true})
  check_with_libonnx(path)
  local longer = tensor.randn(9, 2, 3)
  same_values(onnx.load(path)(longer), (lstm(longer)))
  local gru = nn.GRU(3, 4, {batch_first = true})
  h.err(function() onnx.export(gru, {tensor.randn(2, 4, 3)}, path, {dynamic_batch = true}) end,
    "onnx.export: dynamic_batch: a batch_first nn.GRU holds the batch in dim 2")
  h.still_works()
  -- nn.GRU works as before after the trace
  h.shape((gru(tensor.randn(2, 4, 3))), {2, 4, 4})
  os.remove(path)
end)

h.test("a scan of the user's own still has no ONNX form", function()
  local path = temp_path("scan")
  h.err(function()
    onnx.export(function(x) return (tensor.scan(function(c, v) return c + v, c end, x[1], x)) end,
      {tensor.randn(3, 2)}, path)
  end, "'scan' has no ONNX form")
  h.still_works()
end)

h.done("test_onnx_rnn_export")
