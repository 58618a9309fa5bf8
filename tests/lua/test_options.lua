-- test_options.lua - no option is silently dropped. Every public function
-- and constructor taking an options table (nn, optim, data, plot, progress,
-- dist, onnx, the tensor factories and functions) refuses an unknown key,
-- naming it and listing the known ones, sorted. The walk enumerates the
-- modules' tables, so a constructor added later without the check (or
-- without a row here) fails this file. Then the options users need, each
-- against numbers computed by hand (plain Lua arithmetic), PyTorch 1.13's
-- semantics.
local h = dofile("helpers.lua")
local tensor = require "tensor"
local nn = require "nn"
local optim = require "optim"
local data = require "data"
local plot = require "plot"
local progress = require "progress"
local onnx = require "onnx"
local dist = require "dist"

local BOGUS = "bogus_option"

-- f(options) must fail with "<name>: unknown option 'bogus_option'
-- (options: <known, sorted>)" at the caller's line (onnx.export's errors
-- name no line), and the interpreter must go on working.
local function refuses(name, known, f)
  local sorted = {}
  for i, key in ipairs(known) do sorted[i] = key end
  table.sort(sorted)
  local needle = name .. ": unknown option '" .. BOGUS .. "' (options: " .. table.concat(sorted, ", ") .. ")"
  local msg = h.err(function() f({[BOGUS] = 1}) end, needle)
  local location = msg:sub(1, msg:find(needle, 1, true) - 1)
  if name ~= "onnx.export" and not location:match("test_options%.lua:%d+: $") then
    error("the message does not name a line of this file: " .. msg)
  end
  h.still_works()
  return msg
end

-- The names a module table holds that the walk must account for: every
-- function and every callable class, except private ones (a leading _).
local function public_callables(module)
  local names = {}
  for name, value in pairs(module) do
    local callable = type(value) == "function" or
      (type(value) == "table" and getmetatable(value) and getmetatable(value).__call ~= nil)
    if callable and type(name) == "string" and name:sub(1, 1) ~= "_" then names[#names + 1] = name end
  end
  table.sort(names)
  return names
end

-- Every callable of `module` is either in `with_options` (name -> {known
-- keys, f(options)}) or in `without_options` (name -> f() that shows a table
-- where an option might go is refused, or true where PyTorch itself accepts
-- and ignores anything, as nn.Identity).
local function walk(prefix, module, with_options, without_options)
  for _, name in ipairs(public_callables(module)) do
    local row = with_options[name]
    if row then
      h.test(prefix .. name .. " refuses an unknown option", function()
        refuses(row.label or (prefix .. name), row[1], row[2])
      end)
    elseif without_options[name] ~= nil then
      local check = without_options[name]
      if type(check) == "function" then
        h.test(prefix .. name .. " refuses an options table it has no use for", function()
          h.err(check)
          h.still_works()
        end)
      end
    else
      h.test("walk", function()
        error(prefix .. name .. " is public and in neither list of this test: does it refuse an unknown option?")
      end)
    end
  end
  for name in pairs(with_options) do
    if module[name] == nil then h.test("walk", function() error(prefix .. name .. " no longer exists") end) end
  end
end

local BAD = {[BOGUS] = 1}

-- ---------------------------------------------------------------------------
-- nn

local function model() return nn.Sequential(nn.Linear(3, 2)) end

walk("nn.", nn, {
  Linear = {{"bias", "dtype"}, function(o) return nn.Linear(3, 2, o) end},
  Conv1d = {{"stride", "padding", "bias", "groups", "dilation", "padding_mode", "dtype"},
    function(o) return nn.Conv1d(1, 1, 3, o) end},
  Conv2d = {{"stride", "padding", "bias", "groups", "dilation", "padding_mode", "dtype"},
    function(o) return nn.Conv2d(1, 1, 3, o) end},
  Conv3d = {{"stride", "padding", "bias", "groups", "dilation", "padding_mode", "dtype"},
    function(o) return nn.Conv3d(1, 1, 3, o) end},
  ConvTranspose1d = {{"stride", "padding", "output_padding", "bias", "groups", "dilation", "padding_mode", "dtype"},
    function(o) return nn.ConvTranspose1d(1, 1, 3, o) end},
  ConvTranspose2d = {{"stride", "padding", "output_padding", "bias", "groups", "dilation", "padding_mode", "dtype"},
    function(o) return nn.ConvTranspose2d(1, 1, 3, o) end},
  ConvTranspose3d = {{"stride", "padding", "output_padding", "bias", "groups", "dilation", "padding_mode", "dtype"},
    function(o) return nn.ConvTranspose3d(1, 1, 3, o) end},
  MaxPool2d = {{"stride", "padding", "ceil_mode", "dilation", "return_indices"},
    function(o) return nn.MaxPool2d(2, o) end},
  AvgPool2d = {{"stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"},
    function(o) return nn.AvgPool2d(2, o) end},
  LayerNorm = {{"eps", "elementwise_affine", "bias"}, function(o) return nn.LayerNorm(4, o) end},
  BatchNorm1d = {{"eps", "momentum", "affine", "track_running_stats"}, function(o) return nn.BatchNorm1d(3, o) end},
  BatchNorm2d = {{"eps", "momentum", "affine", "track_running_stats"}, function(o) return nn.BatchNorm2d(3, o) end},
  Embedding = {{"padding_idx"}, function(o) return nn.Embedding(5, 2, o) end},
  ReLU = {{"inplace"}, function(o) return nn.ReLU(o) end},
  GELU = {{"approximate"}, function(o) return nn.GELU(o) end},
  Dropout = {{"inplace"}, function(o) return nn.Dropout(0.5, o) end},
  LSTM = {{"num_layers", "batch_first", "bias", "dropout"}, function(o) return nn.LSTM(3, 4, o) end},
  GRU = {{"num_layers", "batch_first", "bias", "dropout"}, function(o) return nn.GRU(3, 4, o) end},
  MultiheadAttention = {{"dropout", "bias", "batch_first"}, function(o) return nn.MultiheadAttention(4, 2, o) end},
  TransformerEncoderLayer = {{"dim_feedforward", "dropout", "activation", "batch_first", "norm_first",
    "layer_norm_eps"}, function(o) return nn.TransformerEncoderLayer(4, 2, o) end},
  MSELoss = {{"reduction"}, function(o) return nn.MSELoss(o) end},
  L1Loss = {{"reduction"}, function(o) return nn.L1Loss(o) end},
  NLLLoss = {{"reduction", "weight", "ignore_index"}, function(o) return nn.NLLLoss(o) end},
  CrossEntropyLoss = {{"reduction", "weight", "ignore_index", "label_smoothing"},
    function(o) return nn.CrossEntropyLoss(o) end},
  BCEWithLogitsLoss = {{"reduction", "weight", "pos_weight"}, function(o) return nn.BCEWithLogitsLoss(o) end},
  DistributedDataParallel = {{"bucket_bytes"}, function(o) return nn.DistributedDataParallel(model(), o) end},
}, {
  Tanh = function() return nn.Tanh(BAD) end,
  Sigmoid = function() return nn.Sigmoid(BAD) end,
  Softmax = function() return nn.Softmax(BAD) end,
  LogSoftmax = function() return nn.LogSoftmax(BAD) end,
  Flatten = function() return nn.Flatten(BAD) end,
  Sequential = function() return nn.Sequential(BAD) end,
  ScanLayers = function() return nn.ScanLayers(BAD) end,
  scan_layers = function() return nn.scan_layers(BAD, tensor.ones(2)) end,
  class = true,       -- nn.class(name, parent): defines a class
  Identity = true,    -- as PyTorch's: any arguments, unused
})

walk("nn.init.", nn.init, {}, {
  uniform_ = function() return nn.init.uniform_(tensor.empty(2, 2), BAD) end,
  normal_ = function() return nn.init.normal_(tensor.empty(2, 2), BAD) end,
  constant_ = function() return nn.init.constant_(tensor.empty(2, 2), BAD) end,
  zeros_ = true, ones_ = true,  -- (t) only
  xavier_uniform_ = function() return nn.init.xavier_uniform_(tensor.empty(2, 2), BAD) end,
  xavier_normal_ = function() return nn.init.xavier_normal_(tensor.empty(2, 2), BAD) end,
  kaiming_uniform_ = function() return nn.init.kaiming_uniform_(tensor.empty(2, 2), BAD) end,
  kaiming_normal_ = function() return nn.init.kaiming_normal_(tensor.empty(2, 2), BAD) end,
})

h.test("the options of forward calls", function()
  local q = tensor.rand(3, 2, 4)
  refuses("nn.MultiheadAttention:forward", {"attn_mask", "key_padding_mask", "need_weights",
    "average_attn_weights"}, function(o) return nn.MultiheadAttention(4, 2)(q, q, q, o) end)
  refuses("nn.TransformerEncoderLayer:forward", {"src_mask", "src_key_padding_mask"},
    function(o) return nn.TransformerEncoderLayer(4, 2)(q, o) end)
end)

-- ---------------------------------------------------------------------------
-- optim

local function optimizer() return optim.SGD(model():parameters(), {lr = 0.1}) end

walk("optim.", optim, {
  SGD = {{"lr", "momentum", "dampening", "weight_decay", "nesterov"},
    function(o) return optim.SGD(model():parameters(), o) end},
  Adam = {{"lr", "beta1", "beta2", "eps", "weight_decay"}, function(o) return optim.Adam(model():parameters(), o) end},
  AdamW = {{"lr", "beta1", "beta2", "eps", "weight_decay"}, function(o) return optim.AdamW(model():parameters(), o) end},
  RMSprop = {{"lr", "alpha", "eps", "weight_decay", "momentum", "centered"},
    function(o) return optim.RMSprop(model():parameters(), o) end},
  Adagrad = {{"lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps"},
    function(o) return optim.Adagrad(model():parameters(), o) end},
  LinearLR = {{"start_factor", "end_factor", "total_iters"}, function(o) return optim.LinearLR(optimizer(), o) end},
  ReduceLROnPlateau = {{"mode", "factor", "patience", "threshold", "threshold_mode", "cooldown", "min_lr", "eps"},
    function(o) return optim.ReduceLROnPlateau(optimizer(), o) end},
}, {
  StepLR = function() return optim.StepLR(optimizer(), BAD) end,
  ExponentialLR = function() return optim.ExponentialLR(optimizer(), BAD) end,
  CosineAnnealingLR = function() return optim.CosineAnnealingLR(optimizer(), BAD) end,
  LambdaLR = function() return optim.LambdaLR(optimizer(), BAD) end,
  clip_grad_norm_ = function() return optim.clip_grad_norm_(model():parameters(), BAD) end,
  clip_grad_value_ = function() return optim.clip_grad_value_(model():parameters(), BAD) end,
})

-- ---------------------------------------------------------------------------
-- data, progress, plot, dist, onnx

walk("data.", data, {
  read_idx = {{"dtype"}, function(o) return data.read_idx("no-such-file.idx", o) end},
  read_csv = {{"delimiter", "header", "dtype", "text"}, function(o) return data.read_csv("no-such-file.csv", o) end},
  DataLoader = {{"batch_size", "shuffle", "seed", "drop_last", "progress", "description", "progress_options",
    "shard"}, function(o) return data.DataLoader({tensor.ones(4, 2)}, o) end},
}, {})

h.test("DataLoader's progress_options are checked when the loader is made", function()
  refuses("data.DataLoader: progress_options", progress.option_names,
    function(o) return data.DataLoader({tensor.ones(4, 2)}, {progress_options = o}) end)
end)

walk("progress.", progress, {
  new = {{"description", "enabled", "terminal", "stream", "width", "refresh", "every", "clock"},
    function(o) return progress.new(3, o) end},
}, {format_duration = true, enabled_by_environment = true, now = true})

local series = {{name = "loss", values = {3, 2, 1}}}
walk("plot.", plot, {
  svg = {{"title", "x_label", "y_label", "width", "height"}, function(o) return plot.svg(series, o) end},
  line_chart = {{"title", "x_label", "y_label", "width", "height"},
    function(o) return plot.line_chart(os.tmpname() .. ".svg", series, o) end},
}, {sparkline = true})  -- (values) only

h.test("a plot series refuses an unknown key", function()
  refuses("plot.svg: series[1]", {"name", "values", "x"},
    function(o) o.values = {1, 2}; return plot.svg({o}) end)
end)

walk("dist.", dist, {
  average_gradients = {{"bucket_bytes"}, function(o) return dist.average_gradients(model():parameters(), o) end},
  DistributedDataParallel = {{"bucket_bytes"}, label = "nn.DistributedDataParallel",
    function(o) return dist.DistributedDataParallel(model(), o) end},
}, {rank = true, size = true, is_initialized = true, all_reduce = function() return dist.all_reduce(BAD) end,
  broadcast = function() return dist.broadcast(BAD) end, barrier = true, stats = true,
  abort = false,  -- ends the process: not called here
  broadcast_parameters = true})  -- (params or module, root)

local onnx_path = os.tmpname() .. "_options.onnx"
walk("onnx.", onnx, {
  export = {{"dynamic_batch", "doc_string", "graph_name", "opset"},
    function(o) return onnx.export(nn.Linear(3, 2), {tensor.rand(1, 3)}, onnx_path, o) end},
}, {
  load = function() return onnx.load(onnx_path, {load_external_data = false}) end,
  from_table = function() return onnx.from_table(BAD) end,
  read_tensor = function() return onnx.read_tensor(BAD) end,
  run_graph = true,  -- (graph, values, host, opset): the importer's own entry
})

h.test("an ONNX model called with named inputs refuses an unknown name", function()
  onnx.export(nn.Linear(3, 2), {tensor.rand(1, 3)}, onnx_path)
  local m = onnx.load(onnx_path)
  local x = tensor.rand(1, 3)
  h.err(function() return m({input = x, [BOGUS] = x}) end, "onnx model: unknown input '" .. BOGUS .. "' (inputs: input)")
  h.eq(m({input = x}):size(), {1, 2})
  os.remove(onnx_path)
end)

-- ---------------------------------------------------------------------------
-- tensor factories and functions with options (C++ and tensor_scan.lua)

h.test("the tensor factories and functions refuse an unknown option", function()
  local x = tensor.ones(1, 1, 3, 3)
  local rows = {
    {"zeros", {"dtype"}, function(o) return tensor.zeros(2, o) end},
    {"ones", {"dtype"}, function(o) return tensor.ones(2, o) end},
    {"empty", {"dtype"}, function(o) return tensor.empty(2, o) end},
    {"full", {"dtype"}, function(o) return tensor.full({2}, 1, o) end},
    {"rand", {"dtype"}, function(o) return tensor.rand(2, o) end},
    {"randn", {"dtype"}, function(o) return tensor.randn(2, o) end},
    {"randint", {"dtype"}, function(o) return tensor.randint(1, 5, 2, o) end},
    {"randperm", {"dtype"}, function(o) return tensor.randperm(4, o) end},
    {"arange", {"dtype"}, function(o) return tensor.arange(3, o) end},
    {"linspace", {"dtype"}, function(o) return tensor.linspace(0, 1, 3, o) end},
    {"eye", {"dtype"}, function(o) return tensor.eye(2, o) end},
    {"new", {"dtype"}, function(o) return tensor.new({1, 2}, o) end},
    {"pad", {"mode", "value"}, function(o) return tensor.ones(2):pad({1, 1}, o) end},
    {"conv2d", {"stride", "padding", "dilation", "groups"}, function(o) return tensor.conv2d(x, x, o) end},
    {"max_pool2d", {"stride", "padding"}, function(o) return tensor.max_pool2d(x, {2, 2}, o) end},
    {"scan", {"reverse", "length", "recompute"},
      function(o) return tensor.scan(function(c) return c end, tensor.zeros(1), tensor.ones(2, 1), o) end},
  }
  for _, row in ipairs(rows) do refuses(row[1], row[2], row[3]) end
end)

h.test("a bare dtype where the options table goes is refused, not ignored", function()
  h.err(function() return tensor.linspace(0, 1, 3, "f64") end, "options table expected, got string")
  h.err(function() return tensor.new({1, 2}, "f64") end, "options table expected, got string")
  h.err(function() return tensor.eye(2, 3, "f64") end, "options table expected, got string")
  h.err(function() return tensor.randperm(3, "i32") end, "options table expected, got string")
  h.still_works()
  h.eq(tensor.eye(2, 3):size(), {2, 3})
  h.eq(tensor.linspace(0, 1, 3, {dtype = "f64"}):dtype(), "f64")
end)

h.test("randperm reads its dtype option", function()
  local p = tensor.randperm(5, {dtype = "i32"})
  h.eq(p:dtype(), "i32")
  local sorted = p:tolist()
  table.sort(sorted)
  h.eq(sorted, {1, 2, 3, 4, 5})
end)

h.done("test_options.lua")
