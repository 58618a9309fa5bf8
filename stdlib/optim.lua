-- optim.lua - optimizers (SGD, Adam, AdamW) and learning-rate schedules, in
-- the shape of torch.optim. step() updates the parameters in place without
-- recording gradients, then ends the training step with tensor.mark_step():
-- forward, backward and update run as one compiled graph. Hyperparameters
-- are Lua numbers, which the graph takes as inputs: a learning rate that
-- changes every step never recompiles.
local tensor = require "tensor"

local optim = {}

local Optimizer = {}
Optimizer.__index = Optimizer
optim.Optimizer = Optimizer

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
    local got = type(value) == "string" and string.format("string %q", value)
      or type(value) == "number" and tostring(value) or type(value)
    error(string.format("%s: %s must be a number%s, got %s", name, key,
      low and (" >= " .. low) or "", got), 4)
  end
  return value
end

-- A new optimizer class; the instance holds `params`, the options (lr ...)
-- and per-parameter `state`.
local function optimizer_class(name, defaults, update)
  local class = setmetatable({}, {__index = Optimizer})
  class.__index = class
  class.__name = name
  optim[name] = setmetatable(class, {
    __index = Optimizer,
    __call = function(cls, params, options)
      options = options or {}
      local self = setmetatable({params = check_params(params, name), state = {}, step_count = 0,
        name = name}, cls)
      for key, default in pairs(defaults) do
        if type(default) == "boolean" then
          self[key] = options[key] == nil and default or options[key] == true
        else
          self[key] = number_option(options, key, default, name, 0)
        end
      end
      for key in pairs(options) do
        if defaults[key] == nil then error(name .. ": unknown option '" .. tostring(key) .. "'", 2) end
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
  end)

-- Adam and AdamW (decoupled weight decay). Bias corrections are Lua
-- numbers computed per step: scalars of the graph, not new graphs.
local function adam_update(decoupled)
  return function(self, p, g, state)
    if not state.exp_avg then
      state.step = 0
      state.exp_avg = tensor.zeros(p:size(), {dtype = p:dtype()})
      state.exp_avg_sq = tensor.zeros(p:size(), {dtype = p:dtype()})
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

optimizer_class("Adam", {lr = 0.001, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0},
  adam_update(false))
optimizer_class("AdamW", {lr = 0.001, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01},
  adam_update(true))

-- ---------------------------------------------------------------------------
-- Learning-rate schedules: sched:step() once per epoch (or per step, as the
-- schedule is meant); the optimizer's lr changes, the graphs do not.

local function schedule(name, init, lr_at)
  local class = {}
  class.__index = class
  function class:step()
    self.epoch = self.epoch + 1
    self.optimizer.lr = lr_at(self, self.epoch)
    return self.optimizer.lr
  end
  function class:get_lr() return self.optimizer.lr end
  optim[name] = function(optimizer, ...)
    if getmetatable(optimizer) == nil or optimizer.lr == nil then
      error(name .. ": expected an optimizer", 2)
    end
    local self = setmetatable({optimizer = optimizer, base_lr = optimizer.lr, epoch = 0}, class)
    init(self, ...)
    return self
  end
end

-- lr * gamma^floor(epoch / step_size)
schedule("StepLR", function(self, step_size, gamma)
  if math.type(step_size) ~= "integer" or step_size < 1 then
    error("StepLR: step_size must be a positive integer", 3)
  end
  self.step_size, self.gamma = step_size, gamma or 0.1
end, function(self, epoch)
  return self.base_lr * self.gamma ^ (epoch // self.step_size)
end)

-- eta_min + (lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2
schedule("CosineAnnealingLR", function(self, t_max, eta_min)
  if type(t_max) ~= "number" or t_max <= 0 then error("CosineAnnealingLR: T_max must be positive", 3) end
  self.t_max, self.eta_min = t_max, eta_min or 0
end, function(self, epoch)
  local t = math.min(epoch, self.t_max)
  return self.eta_min + (self.base_lr - self.eta_min) * (1 + math.cos(math.pi * t / self.t_max)) / 2
end)

return optim
