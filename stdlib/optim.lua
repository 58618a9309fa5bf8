-- optim.lua - optimizers (SGD, Adam, AdamW, RMSprop, Adagrad), gradient
-- clipping and learning-rate schedules (optim_schedules.lua), in the shape
-- of torch.optim. step() updates the parameters in place without recording
-- gradients, then ends the training step with tensor.mark_step(): forward,
-- backward and update run as one compiled graph. Hyperparameters are Lua
-- numbers, which the graph takes as inputs: a learning rate that changes
-- every step never recompiles. opt:state_dict() and opt:load_state_dict()
-- save and restore everything a resumed run needs, to the bit.
local tensor = require "tensor"
local options_check = require("lazylua.options").check

local optim = {}

local Optimizer = {}
Optimizer.__index = Optimizer
optim.Optimizer = Optimizer

-- A value as an error message shows it: strings quoted, so that "0.1" (a
-- string) is not mistaken for the number 0.1.
local function describe(value)
  if type(value) == "string" then return string.format("the string %q", value) end
  if type(value) == "number" then return tostring(value) end
  return "a " .. type(value)
end
optim._describe = describe

local function check_params(params, name)
  if type(params) ~= "table" then
    error(name .. ": expected a list of parameters (model:parameters())", 3)
  end
  local list = {}
  for i, p in ipairs(params) do
    if not tensor.is_tensor(p) then error(string.format("%s: parameter %d is not a tensor", name, i), 3) end
    if not p:requires_grad() then
      error(string.format("%s: parameter %d does not require grad", name, i), 3)
    end
    list[i] = p
  end
  if #list == 0 then error(name .. ": no parameters to optimize", 3) end
  return list
end

local function number_option(options, key, default, name, low)
  local value = options[key]
  if value == nil then value = default end
  if type(value) ~= "number" or value ~= value or (low and value < low) then
    error(string.format("%s: %s must be a number%s, got %s", name, key,
      low and (" >= " .. low) or "", describe(value)), 3)
  end
  return value
end

-- A new optimizer class; the instance holds `params`, the options (lr ...)
-- and per-parameter `state`. state_keys names what update() keeps per
-- parameter: "tensor" (of the parameter's shape) or "count" (an integer);
-- a key listed in `required` is in every parameter's state once it exists.
local function optimizer_class(name, defaults, update, state_keys, required)
  local class = setmetatable({}, {__index = Optimizer})
  class.__index = class
  class.__name = name
  class.defaults, class.state_keys, class.required_state = defaults, state_keys, required
  optim[name] = setmetatable(class, {
    __index = Optimizer,
    __call = function(cls, params, options)
      options = options_check("optim." .. name, options, defaults, 2)
      local self = setmetatable({params = check_params(params, name), state = {}, step_count = 0,
        name = name}, cls)
      for key, default in pairs(defaults) do
        if type(default) == "boolean" then
          self[key] = options[key] == nil and default or options[key] == true
        else
          self[key] = number_option(options, key, default, name, 0)
        end
      end
      return self
    end,
  })
  class.update = update
  return class
end

function Optimizer:zero_grad()
  for _, p in ipairs(self.params) do p:set_grad(nil) end
end

-- One update of every parameter that has a gradient, then the barrier.
function Optimizer:step()
  self.step_count = self.step_count + 1
  tensor.no_grad(function()
    for i, p in ipairs(self.params) do
      local g = p:grad()
      if g then
        local state = self.state[i]
        if not state then
          state = {}
          self.state[i] = state
        end
        self:update(p, g, state)
      end
    end
  end)
  tensor.mark_step()
end

function Optimizer:get_lr() return self.lr end
function Optimizer:set_lr(lr) self.lr = lr end

local function shape_of(t)
  local shape = {}
  for d = 1, t:dim() do shape[d] = t:size(d) end
  return shape
end

local function shape_text(shape)
  return "[" .. table.concat(shape, ", ") .. "]"
end

-- Everything a resumed run needs: the options (the current lr included),
-- the step count, and per parameter its state (moment buffers as the
-- optimizer's own tensors: save them before the next step changes them, or
-- clone them), plus the parameters' shapes for load_state_dict's checks.
-- Plain tables of numbers, booleans and tensors: tensor.save keeps them.
function Optimizer:state_dict()
  local class = getmetatable(self)
  local options, shapes, state = {}, {}, {}
  for key in pairs(class.defaults) do options[key] = self[key] end
  for i, p in ipairs(self.params) do shapes[i] = shape_of(p) end
  for i, parameter_state in pairs(self.state) do
    local copy = {}
    for key, value in pairs(parameter_state) do copy[key] = value end
    state[i] = copy
  end
  return {optimizer = self.name, step_count = self.step_count, options = options,
    param_shapes = shapes, state = state}
end

-- Restores a state_dict() of an optimizer of the same class over
-- parameters of the same shapes. Everything is checked before anything
-- changes; the tensors are copied (in the parameters' dtype), so the table
-- stays as it was.
function Optimizer:load_state_dict(saved)
  local class, name = getmetatable(self), self.name
  local function fail(message, ...)
    error(string.format("%s:load_state_dict: " .. message, name, ...), 3)
  end
  if type(saved) ~= "table" then fail("expected a table from opt:state_dict(), got %s", describe(saved)) end
  if saved.optimizer ~= name then
    if type(saved.optimizer) ~= "string" then fail("the table is not an optimizer's state_dict()") end
    fail("the state is of a %s optimizer, not of %s", saved.optimizer, name)
  end
  local shapes = saved.param_shapes
  if type(shapes) ~= "table" or #shapes ~= #self.params then
    fail("the state is of %s parameters, this optimizer has %d",
      type(shapes) == "table" and tostring(#shapes) or "no", #self.params)
  end
  for i, p in ipairs(self.params) do
    local here = shape_text(shape_of(p))
    local there = type(shapes[i]) == "table" and shape_text(shapes[i]) or "?"
    if here ~= there then fail("parameter %d has shape %s in the state, %s here", i, there, here) end
  end
  if math.type(saved.step_count) ~= "integer" or saved.step_count < 0 then
    fail("step_count must be an integer >= 0, got %s", describe(saved.step_count))
  end
  local options = saved.options
  if type(options) ~= "table" then fail("the state has no options") end
  for key, default in pairs(class.defaults) do
    local value = options[key]
    if type(value) ~= type(default) or (type(value) == "number" and (value ~= value or value < 0)) then
      fail("option %s must be a %s, got %s", key, type(default) == "number" and "number >= 0" or "boolean",
        describe(value))
    end
  end
  for key in pairs(options) do
    if class.defaults[key] == nil then fail("unknown option '%s' in the state", tostring(key)) end
  end
  local state = saved.state
  if type(state) ~= "table" then fail("the state has no per-parameter state") end
  for i, parameter_state in pairs(state) do
    if math.type(i) ~= "integer" or i < 1 or i > #self.params or type(parameter_state) ~= "table" then
      fail("state[%s] is not the state of a parameter", tostring(i))
    end
    local expected = shape_text(shape_of(self.params[i]))
    for key, value in pairs(parameter_state) do
      local kind = class.state_keys[key]
      if kind == nil then fail("unknown state '%s' of parameter %d", tostring(key), i) end
      if kind == "tensor" then
        if not tensor.is_tensor(value) then
          fail("state '%s' of parameter %d must be a tensor, got %s", key, i, describe(value))
        end
        local got = shape_text(shape_of(value))
        if got ~= expected then
          fail("state '%s' of parameter %d has shape %s, the parameter %s", key, i, got, expected)
        end
      elseif math.type(value) ~= "integer" or value < 0 then
        fail("state '%s' of parameter %d must be an integer >= 0, got %s", key, i, describe(value))
      end
    end
    for _, key in ipairs(class.required_state) do
      if parameter_state[key] == nil then fail("state '%s' of parameter %d is missing", key, i) end
    end
  end

  for key in pairs(class.defaults) do self[key] = options[key] end
  self.step_count = saved.step_count
  self.state = {}
  tensor.no_grad(function()
    for i, parameter_state in pairs(state) do
      local p, restored = self.params[i], {}
      for key, value in pairs(parameter_state) do
        if tensor.is_tensor(value) then
          restored[key] = tensor.zeros(shape_of(p), {dtype = p:dtype()}):copy_(value)
        else
          restored[key] = value
        end
      end
      self.state[i] = restored
    end
  end)
  return self
end

local function zeros_like(p) return tensor.zeros(shape_of(p), {dtype = p:dtype()}) end

-- SGD with momentum (PyTorch's form: buf = momentum*buf + g, the first
-- buffer being g itself), Nesterov momentum and L2 weight decay.
optimizer_class("SGD", {lr = 0.01, momentum = 0, dampening = 0, weight_decay = 0, nesterov = false},
  function(self, p, g, state)
    if self.weight_decay ~= 0 then g = g + p * self.weight_decay end
    if self.momentum ~= 0 then
      if not state.momentum_buffer then
        state.momentum_buffer = g:clone()
      else
        state.momentum_buffer:mul_(self.momentum):add_(g * (1 - self.dampening))
      end
      if self.nesterov then
        g = g + state.momentum_buffer * self.momentum
      else
        g = state.momentum_buffer
      end
    end
    p:sub_(g * self.lr)
  end, {momentum_buffer = "tensor"}, {})

-- Adam and AdamW (decoupled weight decay). Bias corrections are Lua
-- numbers computed per step: scalars of the graph, not new graphs.
local function adam_update(decoupled)
  return function(self, p, g, state)
    if not state.exp_avg then
      state.step = 0
      state.exp_avg = zeros_like(p)
      state.exp_avg_sq = zeros_like(p)
    end
    state.step = state.step + 1
    local beta1, beta2 = self.beta1, self.beta2
    if self.weight_decay ~= 0 then
      if decoupled then
        p:mul_(1 - self.lr * self.weight_decay)
      else
        g = g + p * self.weight_decay
      end
    end
    -- exp_avg:mul_(beta1):add_(g * (1 - beta1)), and exp_avg_sq likewise with
    -- g * g and beta2, then p:sub_(exp_avg / (exp_avg_sq:sqrt() /
    -- sqrt(correction2) + eps) * (lr / correction1)): recorded in one call.
    tensor._adam_step(p, g, state.exp_avg, state.exp_avg_sq, self.lr, beta1, beta2, self.eps,
      1 - beta1 ^ state.step, 1 - beta2 ^ state.step)
  end
end

local adam_state = {step = "count", exp_avg = "tensor", exp_avg_sq = "tensor"}
local adam_required = {"step", "exp_avg", "exp_avg_sq"}
optimizer_class("Adam", {lr = 0.001, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0},
  adam_update(false), adam_state, adam_required)
optimizer_class("AdamW", {lr = 0.001, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01},
  adam_update(true), adam_state, adam_required)

-- RMSprop as PyTorch: v = alpha*v + (1 - alpha)*g²; centered subtracts the
-- square of the running mean of g (m = alpha*m + (1 - alpha)*g) from v;
-- then with momentum buf = momentum*buf + g/(sqrt(v) + eps), p -= lr*buf,
-- and without it p -= lr*g/(sqrt(v) + eps).
optimizer_class("RMSprop",
  {lr = 0.01, alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum = 0, centered = false},
  function(self, p, g, state)
    if not state.square_avg then
      state.step = 0
      state.square_avg = zeros_like(p)
    end
    if self.momentum > 0 and not state.momentum_buffer then state.momentum_buffer = zeros_like(p) end
    if self.centered and not state.grad_avg then state.grad_avg = zeros_like(p) end
    state.step = state.step + 1
    local alpha = self.alpha
    if self.weight_decay ~= 0 then g = g + p * self.weight_decay end
    state.square_avg:mul_(alpha):add_(g * g * (1 - alpha))
    local avg
    if self.centered then
      state.grad_avg:mul_(alpha):add_(g * (1 - alpha))
      avg = (state.square_avg - state.grad_avg * state.grad_avg):sqrt()
    else
      avg = state.square_avg:sqrt()
    end
    avg = avg + self.eps
    if self.momentum > 0 then
      state.momentum_buffer:mul_(self.momentum):add_(g / avg)
      p:sub_(state.momentum_buffer * self.lr)
    else
      p:sub_(g / avg * self.lr)
    end
  end, {step = "count", square_avg = "tensor", momentum_buffer = "tensor", grad_avg = "tensor"},
  {"step", "square_avg"})

-- Adagrad as PyTorch: sum += g², p -= clr*g/(sqrt(sum) + eps) with
-- clr = lr/(1 + (step - 1)*lr_decay); sum starts at
-- initial_accumulator_value.
optimizer_class("Adagrad",
  {lr = 0.01, lr_decay = 0, weight_decay = 0, initial_accumulator_value = 0, eps = 1e-10},
  function(self, p, g, state)
    if not state.sum then
      state.step = 0
      state.sum = zeros_like(p)
      if self.initial_accumulator_value ~= 0 then state.sum:fill_(self.initial_accumulator_value) end
    end
    state.step = state.step + 1
    if self.weight_decay ~= 0 then g = g + p * self.weight_decay end
    local clr = self.lr / (1 + (state.step - 1) * self.lr_decay)
    state.sum:add_(g * g)
    p:sub_(g / (state.sum:sqrt() + self.eps) * clr)
  end, {step = "count", sum = "tensor"}, {"step", "sum"})

-- ---------------------------------------------------------------------------
-- Gradient clipping. Nothing here reads a value into Lua: the norm and the
-- scale are tensors of the step's graph, as in PyTorch.

local function gradients(params, function_name)
  if tensor.is_tensor(params) then params = {params} end
  if type(params) ~= "table" then
    error(string.format("%s: expected a list of parameters (model:parameters()) or a tensor, got %s",
      function_name, describe(params)), 3)
  end
  local list = {}
  for i, p in ipairs(params) do
    if not tensor.is_tensor(p) then
      error(string.format("%s: parameter %d is %s, not a tensor", function_name, i, describe(p)), 3)
    end
    local g = p:grad()
    if g then list[#list + 1] = {p, g} end
  end
  return list
end

-- Scales the gradients of `params` in place so that their norm (of the
-- gradients taken as one vector) is at most max_norm; returns that total
-- norm before clipping, a 0-dim tensor (math.huge as norm_type: the largest
-- absolute value). The scale is min(1, max_norm/(total + 1e-6)), as
-- PyTorch's clip_grad_norm_.
function optim.clip_grad_norm_(params, max_norm, norm_type)
  local name = "clip_grad_norm_"
  local list = gradients(params, name)
  if type(max_norm) ~= "number" or max_norm ~= max_norm or max_norm < 0 then
    error(string.format("%s: max_norm must be a number >= 0, got %s", name, describe(max_norm)), 2)
  end
  norm_type = norm_type or 2
  if type(norm_type) ~= "number" or not (norm_type > 0) then
    error(string.format("%s: norm_type must be a positive number (math.huge: the max norm), got %s",
      name, describe(norm_type)), 2)
  end
  if #list == 0 then return tensor.zeros({}) end
  return tensor.no_grad(function()
    local norms, dtype = {}, list[1][2]:dtype()
    for k, pair in ipairs(list) do
      local g = pair[2]
      if g:dtype() ~= dtype then dtype = "f64" end
      if norm_type == math.huge then
        norms[k] = g:abs():max()
      elseif norm_type == 2 then
        norms[k] = (g * g):sum():sqrt()
      elseif norm_type == 1 then
        norms[k] = g:abs():sum()
      else
        norms[k] = g:abs():pow(norm_type):sum():pow(1 / norm_type)
      end
    end
    local total
    if #norms == 1 then
      total = norms[1]
    else
      for k = 1, #norms do norms[k] = norms[k]:to(dtype) end
      local stacked = tensor.stack(norms)
      if norm_type == math.huge then
        total = stacked:max()
      elseif norm_type == 2 then
        total = (stacked * stacked):sum():sqrt()
      elseif norm_type == 1 then
        total = stacked:sum()
      else
        total = stacked:pow(norm_type):sum():pow(1 / norm_type)
      end
    end
    local scale = (max_norm / (total + 1e-6)):clamp(nil, 1)
    for _, pair in ipairs(list) do
      local p, g = pair[1], pair[2]
      p:set_grad(g * scale:to(g:dtype()))
    end
    return total
  end)
end

-- Clamps every gradient of `params` into [-clip_value, clip_value].
function optim.clip_grad_value_(params, clip_value)
  local name = "clip_grad_value_"
  local list = gradients(params, name)
  if type(clip_value) ~= "number" or clip_value ~= clip_value or clip_value < 0 then
    error(string.format("%s: clip_value must be a number >= 0, got %s", name, describe(clip_value)), 2)
  end
  tensor.no_grad(function()
    for _, pair in ipairs(list) do pair[1]:set_grad(pair[2]:clamp(-clip_value, clip_value)) end
  end)
end

require("lazylua.optim_schedules")(optim)

return optim
