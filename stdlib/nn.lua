-- nn.lua - neural network modules: a Module base, layers, losses and
-- initializations, in the shape of torch.nn. Layers are ordinary tensor
-- code, so a forward pass records into the lazy graph like any other ops
-- and autograd gives their gradients.
--
--   local nn = require "nn"
--   local model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
--   local loss = nn.CrossEntropyLoss()(model(x), y)   -- y: i64 classes, 1-based
local tensor = require "tensor"
local options_check = require("lazylua.options").check

local nn = {}

-- ---------------------------------------------------------------------------
-- Classes: nn.Linear(...) constructs, instance(...) runs forward.

local Module = {}
Module.__index = Module
Module.__name = "Module"
nn.Module = Module

local function call_forward(self, ...) return self:forward(...) end

-- A new class deriving from `parent` (Module by default). Calling the class
-- makes an instance and runs its init(...).
function nn.class(name, parent)
  parent = parent or Module
  local class = {}
  class.__index = class
  class.__name = name
  class.__call = call_forward
  class.__tostring = parent.__tostring or Module.__tostring
  class.super = parent
  return setmetatable(class, {
    __index = parent,
    __call = function(cls, ...)
      local self = setmetatable({}, cls)
      Module.init(self)
      if cls.init ~= Module.init then cls.init(self, ...) end
      return self
    end,
  })
end

function Module:init()
  rawset(self, "_parameter_names", {})
  rawset(self, "_parameters", {})
  rawset(self, "_module_names", {})
  rawset(self, "_modules", {})
  rawset(self, "_buffer_names", {})
  rawset(self, "_buffers", {})
  rawset(self, "training", true)
end

function Module:forward()
  error(getmetatable(self).__name .. ": forward is not defined", 2)
end

-- Registers (or replaces) a parameter: a tensor that requires grad.
function Module:register_parameter(name, t)
  if not tensor.is_tensor(t) then error("register_parameter: '" .. name .. "' is not a tensor", 2) end
  if t:is_leaf() and not t:requires_grad() then t:requires_grad(true) end
  if self._parameters[name] == nil then table.insert(self._parameter_names, name) end
  self._parameters[name] = t
  rawset(self, name, t)
  return t
end

-- Registers (or replaces) a buffer: a tensor that is part of the state
-- (state_dict, load_state_dict) but not a parameter (no gradient, not in
-- parameters()), such as BatchNorm's running statistics.
function Module:register_buffer(name, t)
  if not tensor.is_tensor(t) then error("register_buffer: '" .. tostring(name) .. "' is not a tensor", 2) end
  if self._buffers[name] == nil then table.insert(self._buffer_names, name) end
  self._buffers[name] = t
  rawset(self, name, t)
  return t
end

function Module:add_module(name, module)
  if type(module) ~= "table" or getmetatable(module) == nil or module.parameters == nil then
    error("add_module: '" .. tostring(name) .. "' is not a module", 2)
  end
  if self._modules[name] == nil then table.insert(self._module_names, name) end
  self._modules[name] = module
  rawset(self, name, module)
  return module
end

-- Calls f(prefix .. name, tensor, owner, name) for every tensor a module and
-- its children list under names_key (parameters or buffers), depth first,
-- each tensor once (a layer shared by two parents counts once).
local function visit_tensors(module, names_key, values_key, prefix, seen, f)
  for _, name in ipairs(module[names_key] or {}) do
    local t = module[values_key][name]
    if not seen[t] then
      seen[t] = true
      f(prefix .. name, t, module, name)
    end
  end
  for _, name in ipairs(module._module_names) do
    visit_tensors(module._modules[name], names_key, values_key, prefix .. name .. ".", seen, f)
  end
end

local function visit_parameters(module, prefix, seen, f)
  visit_tensors(module, "_parameter_names", "_parameters", prefix, seen, f)
end

local function visit_buffers(module, prefix, seen, f)
  visit_tensors(module, "_buffer_names", "_buffers", prefix, seen, f)
end

-- Parameters, then buffers: everything a state_dict holds.
local function visit_state(module, prefix, seen, f)
  visit_parameters(module, prefix, seen, f)
  visit_buffers(module, prefix, seen, f)
end

-- An array of {name, tensor} pairs of the buffers ("1.running_mean" ...).
function Module:named_buffers()
  local list = {}
  visit_buffers(self, "", {}, function(name, t) list[#list + 1] = {name, t} end)
  return list
end

function Module:buffers()
  local list = {}
  for i, pair in ipairs(self:named_buffers()) do list[i] = pair[2] end
  return list
end

function Module:parameters()
  local list = {}
  visit_parameters(self, "", {}, function(_, t) list[#list + 1] = t end)
  return list
end

-- An array of {name, tensor} pairs in registration order ("0.weight" ...).
function Module:named_parameters()
  local list = {}
  visit_parameters(self, "", {}, function(name, t) list[#list + 1] = {name, t} end)
  return list
end

function Module:children()
  local list = {}
  for _, name in ipairs(self._module_names) do list[#list + 1] = self._modules[name] end
  return list
end

function Module:train(mode)
  if mode == nil then mode = true end
  self.training = mode
  for _, child in ipairs(self:children()) do child:train(mode) end
  return self
end

function Module:eval() return self:train(false) end

function Module:zero_grad()
  for _, p in ipairs(self:parameters()) do p:set_grad(nil) end
end

-- name -> tensor (detached: saving it does not keep gradients alive).
function Module:state_dict()
  local state = {}
  visit_state(self, "", {}, function(name, t) state[name] = t:detach() end)
  return state
end

-- Copies values into the parameters and buffers. strict (default true): every
-- parameter present, no unknown names. Shapes must match.
function Module:load_state_dict(state, strict)
  if type(state) ~= "table" then error("load_state_dict: expected a table of tensors", 2) end
  if strict == nil then strict = true end
  local known = {}
  local problems = {}
  visit_state(self, "", {}, function(name, t)
    known[name] = true
    local value = state[name]
    if value == nil then
      if strict then problems[#problems + 1] = "missing " .. name end
    elseif not tensor.is_tensor(value) then
      problems[#problems + 1] = name .. " is a " .. type(value) .. ", not a tensor"
    elseif table.concat(value:size(), "x") ~= table.concat(t:size(), "x") then
      problems[#problems + 1] = string.format("%s has shape [%s], the model [%s]", name,
        table.concat(value:size(), ", "), table.concat(t:size(), ", "))
    end
  end)
  if strict then
    local unknown = {}
    for name in pairs(state) do
      if not known[name] then unknown[#unknown + 1] = tostring(name) end
    end
    table.sort(unknown)
    for _, name in ipairs(unknown) do problems[#problems + 1] = "unexpected " .. name end
  end
  if #problems > 0 then error("load_state_dict: " .. table.concat(problems, "; "), 2) end
  tensor.no_grad(function()
    visit_state(self, "", {}, function(name, t)
      if state[name] ~= nil then t:copy_(state[name]) end
    end)
  end)
  return self
end

function Module:extra_repr() return "" end

function Module.__tostring(self)
  local lines = {getmetatable(self).__name .. "(" .. self:extra_repr()}
  if #self._module_names == 0 then return lines[1] .. ")" end
  for _, name in ipairs(self._module_names) do
    local text = tostring(self._modules[name]):gsub("\n", "\n  ")
    lines[#lines + 1] = "  (" .. name .. "): " .. text
  end
  return table.concat(lines, "\n") .. "\n)"
end

-- ---------------------------------------------------------------------------
-- Initialization (in place, without gradients).

nn.init = {}

-- An optional number argument of an init function (a table there is a
-- PyTorch keyword argument that has no place here: an error, not ignored).
local function optional_number(value, function_name, what)
  if value ~= nil and type(value) ~= "number" then
    error(string.format("nn.init.%s: %s must be a number, got %s", function_name, what, type(value)), 3)
  end
  return value
end

function nn.init.uniform_(t, low, high)
  optional_number(low, "uniform_", "low")
  optional_number(high, "uniform_", "high")
  tensor.no_grad(function() t:copy_(tensor.rand(t:size(), {dtype = t:dtype()}) * (high - low) + low) end)
  return t
end

function nn.init.normal_(t, mean, std)
  mean = optional_number(mean, "normal_", "mean") or 0
  std = optional_number(std, "normal_", "std") or 1
  tensor.no_grad(function() t:copy_(tensor.randn(t:size(), {dtype = t:dtype()}) * std + mean) end)
  return t
end

function nn.init.constant_(t, value)
  optional_number(value, "constant_", "value")
  tensor.no_grad(function() t:fill_(value) end)
  return t
end
function nn.init.zeros_(t) return nn.init.constant_(t, 0) end
function nn.init.ones_(t) return nn.init.constant_(t, 1) end

-- fan_in, fan_out of a weight [out, in, k...] as PyTorch counts them.
local function fans(t)
  local size = t:size()
  if #size < 2 then error("fan in and fan out need a tensor of at least 2 dimensions", 3) end
  local receptive = 1
  for d = 3, #size do receptive = receptive * size[d] end
  return size[2] * receptive, size[1] * receptive
end

function nn.init.xavier_uniform_(t, gain)
  optional_number(gain, "xavier_uniform_", "gain")
  local fan_in, fan_out = fans(t)
  local bound = (gain or 1) * math.sqrt(6 / (fan_in + fan_out))
  return nn.init.uniform_(t, -bound, bound)
end

function nn.init.xavier_normal_(t, gain)
  optional_number(gain, "xavier_normal_", "gain")
  local fan_in, fan_out = fans(t)
  return nn.init.normal_(t, 0, (gain or 1) * math.sqrt(2 / (fan_in + fan_out)))
end

-- For ReLU layers (gain sqrt(2)); `a` is the negative slope of a leaky ReLU.
function nn.init.kaiming_uniform_(t, a)
  optional_number(a, "kaiming_uniform_", "a")
  local fan_in = fans(t)
  local gain = math.sqrt(2 / (1 + (a or 0) ^ 2))
  local bound = gain * math.sqrt(3 / fan_in)
  return nn.init.uniform_(t, -bound, bound)
end

function nn.init.kaiming_normal_(t, a)
  optional_number(a, "kaiming_normal_", "a")
  local fan_in = fans(t)
  return nn.init.normal_(t, 0, math.sqrt(2 / (1 + (a or 0) ^ 2)) / math.sqrt(fan_in))
end

-- ---------------------------------------------------------------------------
-- Layers.

local function check_integer(value, what, level)
  if math.type(value) ~= "integer" or value < 1 then
    error(string.format("%s must be a positive integer, got %s", what, tostring(value)), level + 1)
  end
end

local Linear = nn.class("Linear")
nn.Linear = Linear

-- As torch.nn.Linear: weight [out, in] and bias [out], both uniform in
-- +-1/sqrt(in) (kaiming_uniform with a = sqrt(5)).
function Linear:init(in_features, out_features, options)
  check_integer(in_features, "Linear: in_features", 3)
  check_integer(out_features, "Linear: out_features", 3)
  options = options_check("nn.Linear", options, {"bias", "dtype"}, 3)
  if options.bias ~= nil and type(options.bias) ~= "boolean" then
    error("nn.Linear: bias must be a boolean, got " .. type(options.bias), 3)
  end
  self.in_features, self.out_features = in_features, out_features
  local bound = 1 / math.sqrt(in_features)
  local dtype = options.dtype or "f32"
  self:register_parameter("weight",
    nn.init.uniform_(tensor.empty(out_features, in_features, {dtype = dtype}), -bound, bound))
  if options.bias ~= false then
    self:register_parameter("bias", nn.init.uniform_(tensor.empty(out_features, {dtype = dtype}), -bound, bound))
  end
end

function Linear:forward(x)
  local y = x:matmul(self.weight:t())
  if self.bias then y = y + self.bias end
  return y
end

function Linear:extra_repr()
  return string.format("%d -> %d%s", self.in_features, self.out_features, self.bias and "" or ", no bias")
end

-- A constructor that takes no arguments (as PyTorch's Tanh()): anything
-- given is an error, not ignored.
local function no_arguments(name, count, level)
  if count > 0 then error("nn." .. name .. ": takes no arguments (no options either)", level + 1) end
end

-- Whether `inplace` can write into x: not when x records a gradient (the
-- autograd refuses in-place writes there, docs/training.md), where the
-- layer computes out of place, the same values (PyTorch's inplace is a
-- memory saving; only the input is not overwritten).
local function writable(x)
  return not (x:requires_grad() and tensor.is_grad_enabled())
end

-- Stateless elementwise layers. ReLU({inplace = true}) writes the result
-- into its input, as PyTorch's (the input tensor is modified).
local ReLU = nn.class("ReLU")
nn.ReLU = ReLU
function ReLU:init(options)
  options = options_check("nn.ReLU", options, {"inplace"}, 3)
  self.inplace = options.inplace == true
end
function ReLU:forward(x)
  if self.inplace and writable(x) then return x:relu_() end
  return x:relu()
end
function ReLU:extra_repr() return self.inplace and "inplace=true" or "" end

-- GELU({approximate = "none" | "tanh"}): the exact erf form, or PyTorch's
-- tanh approximation 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
local GELU = nn.class("GELU")
nn.GELU = GELU
function GELU:init(options)
  options = options_check("nn.GELU", options, {"approximate"}, 3)
  local approximate = options.approximate or "none"
  if approximate ~= "none" and approximate ~= "tanh" then
    error("nn.GELU: approximate must be 'none' or 'tanh', got " .. tostring(approximate), 3)
  end
  self.approximate = approximate
end
function GELU:forward(x)
  if self.approximate == "none" then return x:gelu() end
  local inner = (x + x * x * x * 0.044715) * math.sqrt(2 / math.pi)
  return x * 0.5 * (inner:tanh() + 1)
end

local function plain_activation(name, method)
  local class = nn.class(name)
  function class:init(...) no_arguments(name, select("#", ...), 3) end
  class.forward = function(_, x) return x[method](x) end
  nn[name] = class
end
plain_activation("Tanh", "tanh")
plain_activation("Sigmoid", "sigmoid")

-- As PyTorch's Identity, any arguments are accepted and unused.
local Identity = nn.class("Identity")
nn.Identity = Identity
function Identity:forward(x) return x end

local function optional_dim(value, what, level)
  if value == nil then return nil end
  local dim = type(value) == "number" and math.tointeger(value)
  if not dim then
    error(string.format("%s must be an integer dim, got %s", what,
      type(value) == "number" and tostring(value) or type(value)), level + 1)
  end
  return dim
end

local Softmax = nn.class("Softmax")
nn.Softmax = Softmax
function Softmax:init(dim) self.dim = optional_dim(dim, "nn.Softmax: dim", 3) or -1 end
function Softmax:forward(x) return x:softmax(self.dim) end

local LogSoftmax = nn.class("LogSoftmax")
nn.LogSoftmax = LogSoftmax
function LogSoftmax:init(dim) self.dim = optional_dim(dim, "nn.LogSoftmax: dim", 3) or -1 end
function LogSoftmax:forward(x) return x:log_softmax(self.dim) end

local Dropout = nn.class("Dropout")
nn.Dropout = Dropout

-- nn.Dropout([p, ]{inplace = false}).
function Dropout:init(p, options)
  if type(p) == "table" and options == nil then p, options = nil, p end
  options = options_check("nn.Dropout", options, {"inplace"}, 3)
  p = p or 0.5
  if type(p) ~= "number" or p < 0 or p >= 1 then
    error("Dropout: p must be in [0, 1), got " .. tostring(p), 3)
  end
  self.p = p
  self.inplace = options.inplace == true
end

-- Inverted dropout: kept elements are scaled by 1/(1-p) in training, so
-- evaluation is the identity. With inplace the input tensor holds the result.
function Dropout:forward(x)
  if not self.training or self.p == 0 then return x end
  local keep = tensor.rand(x:size(), {dtype = x:dtype()}):ge(self.p)
  local scale = keep:to(x:dtype()) * (1 / (1 - self.p))
  if self.inplace and writable(x) then return x:mul_(scale) end
  return x * scale
end

function Dropout:extra_repr() return "p=" .. self.p end

local Flatten = nn.class("Flatten")
nn.Flatten = Flatten
function Flatten:init(start_dim, end_dim)
  self.start_dim = optional_dim(start_dim, "nn.Flatten: start_dim", 3) or 2
  self.end_dim = optional_dim(end_dim, "nn.Flatten: end_dim", 3) or -1
end
function Flatten:forward(x) return x:flatten(self.start_dim, self.end_dim) end

local LayerNorm = nn.class("LayerNorm")
nn.LayerNorm = LayerNorm

-- Normalizes over the last #shape dims: (x - mean) / sqrt(var + eps),
-- biased variance as in PyTorch, then weight * . + bias (elementwise_affine;
-- bias = false keeps the weight only, as PyTorch's).
function LayerNorm:init(shape, options)
  if type(shape) == "number" then shape = {shape} end
  options = options_check("nn.LayerNorm", options, {"eps", "elementwise_affine", "bias"}, 3)
  local eps = options.eps or 1e-5
  if type(eps) ~= "number" or not (eps > 0) then
    error("nn.LayerNorm: eps must be a number > 0, got " .. tostring(eps), 3)
  end
  self.shape, self.eps = shape, eps
  if options.elementwise_affine ~= false then
    self:register_parameter("weight", tensor.ones(shape))
    if options.bias ~= false then self:register_parameter("bias", tensor.zeros(shape)) end
  end
end

function LayerNorm:forward(x)
  local rank, n = x:dim(), #self.shape
  for i = 1, n do
    if x:size(rank - n + i) ~= self.shape[i] then
      error(string.format("LayerNorm: input shape [%s] does not end with [%s]",
        table.concat(x:size(), ", "), table.concat(self.shape, ", ")), 2)
    end
  end
  local mean, centered = x, nil
  for d = rank, rank - n + 1, -1 do mean = mean:mean(d, true) end
  centered = x - mean
  local var = centered * centered
  for d = rank, rank - n + 1, -1 do var = var:mean(d, true) end
  local y = centered * (var + self.eps):rsqrt()
  if self.weight then y = y * self.weight end
  if self.bias then y = y + self.bias end
  return y
end

local Embedding = nn.class("Embedding")
nn.Embedding = Embedding

-- nn.Embedding(count, dim, {padding_idx = i}): as PyTorch's, the row
-- padding_idx (1-based; -1 is the last) starts at zero and gets no
-- gradient, so training never changes it.
function Embedding:init(count, dim, options)
  check_integer(count, "Embedding: num_embeddings", 3)
  check_integer(dim, "Embedding: embedding_dim", 3)
  options = options_check("nn.Embedding", options, {"padding_idx"}, 3)
  local padding = options.padding_idx
  if padding ~= nil then
    if math.type(padding) ~= "integer" or padding == 0 or padding > count or padding < -count then
      error(string.format("nn.Embedding: padding_idx must be an integer in 1..%d or -%d..-1, got %s", count,
        count, tostring(padding)), 3)
    end
    if padding < 0 then padding = count + 1 + padding end
  end
  self.count, self.dim, self.padding_idx = count, dim, padding
  local weight = nn.init.normal_(tensor.empty(count, dim), 0, 1)
  if padding then tensor.no_grad(function() weight:select(1, padding):fill_(0) end) end
  self:register_parameter("weight", weight)
end

-- Rows of the weight for 1-based i64 indices of any shape.
function Embedding:forward(index)
  local shape = index:size()
  local flat = index:reshape(-1)
  local rows = self.weight:index_select(1, flat)
  if self.padding_idx then
    -- the padding row's copies read through detach: no gradient reaches it
    local is_padding = flat:eq(self.padding_idx):reshape(-1, 1)
    rows = tensor.where(is_padding, rows:detach(), rows)
  end
  shape[#shape + 1] = self.dim
  return rows:reshape(shape)
end

function Embedding:extra_repr()
  return self.count .. ", " .. self.dim .. (self.padding_idx and ", padding_idx=" .. self.padding_idx or "")
end

local Sequential = nn.class("Sequential")
nn.Sequential = Sequential

-- What an argument of Sequential is, when it is not a layer: a nil (a
-- misspelt name such as nn.relu), a class not called (nn.ReLU), anything else.
local function not_a_layer(value)
  if value == nil then return "is nil (a misspelt layer name?)" end
  if type(value) == "table" and rawget(value, "_modules") == nil and rawget(value, "__name") then
    return "is the class " .. value.__name .. ", not a layer: call it (nn." .. value.__name .. "(...))"
  end
  if type(value) ~= "table" or getmetatable(value) == nil or rawget(value, "_modules") == nil then
    return "is a " .. (tensor.is_tensor(value) and "tensor" or type(value)) .. ", not a module"
  end
end

-- nn.Sequential(layer, ...) or nn.Sequential({layer, ...}). A nil or
-- anything but a module among the layers is an error naming its position
-- (a trailing nil inside a table constructor is invisible to Lua, though).
function Sequential:init(...)
  local count, layers, what = select("#", ...), {...}, "argument"
  if count == 1 and type(layers[1]) == "table" and getmetatable(layers[1]) == nil then
    layers, what, count = layers[1], "element", 0
    for key in pairs(layers) do
      if math.type(key) ~= "integer" or key < 1 then
        error("nn.Sequential: the list of layers has a key " .. tostring(key) .. " (expected 1, 2, ...)", 3)
      end
      count = math.max(count, key)
    end
  end
  for i = 1, count do
    local problem = not_a_layer(layers[i])
    if problem then error(string.format("nn.Sequential: %s %d %s", what, i, problem), 3) end
    self:add_module(tostring(i), layers[i])
  end
end

-- The loop variable's name is a marker: an error raised inside layer i
-- reads it (interp/error_position.cpp) to name the layer, with no pcall
-- per layer.
function Sequential:forward(x)
  local modules, names = self._modules, self._module_names
  for sequential_layer = 1, #names do x = modules[names[sequential_layer]](x) end
  return x
end

-- "nn.Sequential layer 3 (Linear(784 -> 256))", for error messages.
function Sequential:_describe_layer(i)
  local layer = self._modules[self._module_names[i]]
  local class = getmetatable(layer).__name
  local extra = #layer._module_names == 0 and "(" .. layer:extra_repr() .. ")" or ""
  return string.format("nn.Sequential layer %d (%s%s)", i, class, extra)
end

function Sequential:__len() return #self._module_names end
function Sequential:get(i) return self._modules[tostring(i)] end

-- ---------------------------------------------------------------------------
-- scan_layers: identical layers applied in order through tensor.scan, so the
-- graph (and the compiled code) holds one layer whatever their number.

local function describe_tensor(t)
  return t:dtype() .. "[" .. table.concat(t:size(), ", ") .. "]"
end

-- The module a dotted parameter name lives in, and the field's name.
local function owner_of(module, path)
  local parts = {}
  for part in path:gmatch("[^.]+") do parts[#parts + 1] = part end
  for i = 1, #parts - 1 do module = module._modules[parts[i]] end
  return module, parts[#parts]
end

-- The parameter names of the layers, checked to be the same with the same
-- shapes and dtypes in every layer (an error names the first difference).
local function common_parameters(layers, level)
  if type(layers) ~= "table" or #layers == 0 then
    error("scan_layers: expected a non-empty list of layers", level + 1)
  end
  local template = layers[1]
  local names = {}
  for _, pair in ipairs(template:named_parameters()) do names[#names + 1] = pair[1] end
  for i = 2, #layers do
    local params = {}
    for _, pair in ipairs(layers[i]:named_parameters()) do params[pair[1]] = pair[2] end
    for _, pair in ipairs(template:named_parameters()) do
      local name, first = pair[1], pair[2]
      local other = params[name]
      if other == nil then
        error(string.format("scan_layers: layer %d has no parameter '%s' (layer 1 has %s)", i, name,
          describe_tensor(first)), level + 1)
      end
      if describe_tensor(other) ~= describe_tensor(first) then
        error(string.format("scan_layers: parameter '%s' is %s in layer %d but %s in layer 1", name,
          describe_tensor(other), i, describe_tensor(first)), level + 1)
      end
      params[name] = nil
    end
    local extra = next(params)
    if extra then
      error(string.format("scan_layers: layer %d has a parameter '%s' that layer 1 lacks", i, extra),
        level + 1)
    end
  end
  return names
end

-- template's forward applied once per slice of the stacked parameters.
local function scan_over(template, names, stacked, x)
  return (tensor.scan(function(h, slices)
    -- the template runs on this slice of every parameter, then gets its own back
    local saved = {}
    for _, name in ipairs(names) do
      local owner, field = owner_of(template, name)
      saved[name] = owner[field]
      rawset(owner, field, slices[name])
    end
    local ok, result = pcall(template.forward, template, h)
    for _, name in ipairs(names) do
      local owner, field = owner_of(template, name)
      rawset(owner, field, saved[name])
    end
    if not ok then error(result, 0) end
    return result
  end, x, stacked))
end

-- Applies layers[1], layers[2], ... to x, as nn.Sequential(layers) would.
-- The layers must have the same parameters (names, shapes, dtypes): they
-- are stacked along a new first dim and scanned over, with layers[1]
-- running the body on each slice. Gradients reach every layer's own
-- parameters (through the stack), so an optimizer over the layers'
-- parameters() trains them as with Sequential. (The stack and the updates
-- of the separate parameters still grow with the number of layers; the
-- ScanLayers module below keeps the parameters stacked.)
function nn.scan_layers(layers, x)
  local names = common_parameters(layers, 2)
  local stacked = {}
  for _, name in ipairs(names) do
    local list = {}
    for i, layer in ipairs(layers) do
      local owner, field = owner_of(layer, name)
      list[i] = owner[field]
    end
    stacked[name] = tensor.stack(list, 1)
  end
  return scan_over(layers[1], names, stacked, x)
end

-- A module over identical layers that keeps their parameters stacked: its
-- parameters() are tensors [L, ...] (so an optimizer updates all layers
-- with one kernel per parameter, and the compiled step does not grow with
-- L). The layers' own parameters become read-only views of the stacks,
-- which always show the trained values.
local ScanLayers = nn.class("ScanLayers")
nn.ScanLayers = ScanLayers

function ScanLayers:init(layers)
  self.names = common_parameters(layers, 3)
  self.count = #layers
  rawset(self, "template", layers[1])
  for _, name in ipairs(self.names) do
    local list = {}
    for i, layer in ipairs(layers) do
      local owner, field = owner_of(layer, name)
      list[i] = owner[field]:detach()
    end
    local stacked = tensor.stack(list, 1):contiguous()
    self:register_parameter(name, stacked)
    tensor.no_grad(function()
      for i, layer in ipairs(layers) do
        local owner, field = owner_of(layer, name)
        local view = stacked:select(1, i)
        owner._parameters[field] = view
        rawset(owner, field, view)
      end
    end)
  end
end

function ScanLayers:forward(x)
  local stacked = {}
  for _, name in ipairs(self.names) do stacked[name] = self._parameters[name] end
  return scan_over(self.template, self.names, stacked, x)
end

function ScanLayers:extra_repr()
  return string.format("%d x %s", self.count, getmetatable(self.template).__name)
end

-- Data-parallel training (stdlib/dist.lua): the dist module, and with it
-- MPI under mpirun, is loaded only when a script asks for the wrapper. A
-- tail call, so that its errors name the caller's line.
function nn.DistributedDataParallel(model, opts)
  return require("lazylua.dist").DistributedDataParallel(model, opts)
end

-- Convolutions and pooling (nn_conv.lua); losses (nn_loss.lua); batch
-- normalization (nn_norm.lua); LSTM and GRU (nn_rnn.lua); attention and
-- the transformer encoder layer (nn_attention.lua).
require("lazylua.nn_conv")(nn)
require("lazylua.nn_loss")(nn)
require("lazylua.nn_norm")(nn)
require("lazylua.nn_rnn")(nn)
require("lazylua.nn_attention")(nn)

return nn
