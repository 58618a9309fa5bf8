-- optim_schedules.lua - learning-rate schedules for optim.lua, as
-- torch.optim.lr_scheduler: sched:step() once per epoch (or per step, as the
-- schedule is meant) sets the optimizer's lr; the graphs do not change (the
-- lr is a scalar input). Each schedule's state_dict() is a plain table of
-- numbers and strings that tensor.save keeps; load_state_dict() restores
-- it and the optimizer's current lr.
local tensor = require "tensor"
local options_check = require("lazylua.options").check

return function(optim)
  local describe = optim._describe

  local Schedule = {}
  Schedule.__index = Schedule

  -- The fields of the schedules that count (integers in a state_dict).
  local counters = {step_size = true, total_iters = true, patience = true, cooldown = true,
    num_bad_epochs = true, cooldown_counter = true}

  function Schedule:get_lr() return self.optimizer.lr end

  -- The schedule's counters and settings (`fields`), and the lr it set.
  function Schedule:state_dict()
    local state = {schedule = self.name, epoch = self.epoch, lr = self.optimizer.lr}
    for _, key in ipairs(getmetatable(self).fields) do state[key] = self[key] end
    return state
  end

  function Schedule:load_state_dict(saved)
    local name, fields = self.name, getmetatable(self).fields
    local function fail(message, ...)
      error(string.format("%s:load_state_dict: " .. message, name, ...), 3)
    end
    if type(saved) ~= "table" then fail("expected a table from sched:state_dict(), got %s", describe(saved)) end
    if saved.schedule ~= name then
      if type(saved.schedule) ~= "string" then fail("the table is not a schedule's state_dict()") end
      fail("the state is of a %s schedule, not of %s", saved.schedule, name)
    end
    if math.type(saved.epoch) ~= "integer" or saved.epoch < 0 then
      fail("epoch must be an integer >= 0, got %s", describe(saved.epoch))
    end
    if type(saved.lr) ~= "number" then fail("lr must be a number, got %s", describe(saved.lr)) end
    for _, key in ipairs(fields) do
      local value = saved[key]
      if counters[key] then
        if math.type(value) ~= "integer" or value < 0 then
          fail("%s must be an integer >= 0, got %s", key, describe(value))
        end
      elseif type(value) ~= type(self[key]) then
        fail("%s must be a %s, got %s", key, type(self[key]), describe(value))
      end
    end
    local choices = {mode = {min = true, max = true}, threshold_mode = {rel = true, abs = true}}
    for key, allowed in pairs(choices) do
      if saved[key] ~= nil and not allowed[saved[key]] then
        fail("%s must be one of this schedule's choices, got %s", key, describe(saved[key]))
      end
    end
    self.epoch = saved.epoch
    for _, key in ipairs(fields) do self[key] = saved[key] end
    self.optimizer.lr = saved.lr
    return self
  end

  local function check_optimizer(optimizer, name)
    if type(optimizer) ~= "table" or getmetatable(optimizer) == nil or type(optimizer.lr) ~= "number" then
      error(name .. ": expected an optimizer, got " .. describe(optimizer), 3)
    end
  end

  -- A schedule whose lr after e steps is lr_at(self, e). init(self, ...)
  -- reads the arguments; fields are saved by state_dict (base_lr always).
  -- With sets_initial_lr the optimizer's lr becomes lr_at(self, 0) at once,
  -- as PyTorch's LinearLR and LambdaLR do.
  local function schedule(name, fields, init, lr_at, sets_initial_lr)
    local class = setmetatable({}, {__index = Schedule})
    class.__index = class
    class.__name = name
    class.fields = {"base_lr", table.unpack(fields)}
    function class:step()
      self.epoch = self.epoch + 1
      self.optimizer.lr = lr_at(self, self.epoch)
      return self.optimizer.lr
    end
    optim[name] = function(optimizer, ...)
      check_optimizer(optimizer, name)
      local self = setmetatable({optimizer = optimizer, base_lr = optimizer.lr, epoch = 0, name = name}, class)
      init(self, ...)
      if sets_initial_lr then optimizer.lr = lr_at(self, 0) end
      return self
    end
  end

  local function positive_integer(value, name, what)
    if math.type(value) ~= "integer" or value < 1 then
      error(string.format("%s: %s must be a positive integer, got %s", name, what, describe(value)), 4)
    end
    return value
  end

  local function number(value, default, name, what)
    if value == nil then return default end
    if type(value) ~= "number" or value ~= value then
      error(string.format("%s: %s must be a number, got %s", name, what, describe(value)), 4)
    end
    return value
  end

  -- Called by init(self, ...) inside the constructor: the user's call is 4 levels up.
  local function options_table(options, name, allowed)
    local checked = options_check("optim." .. name, options, allowed, 4)
    return checked
  end

  -- lr * gamma^floor(epoch / step_size)
  schedule("StepLR", {"step_size", "gamma"}, function(self, step_size, gamma)
    self.step_size = positive_integer(step_size, "StepLR", "step_size")
    self.gamma = number(gamma, 0.1, "StepLR", "gamma")
  end, function(self, epoch)
    return self.base_lr * self.gamma ^ (epoch // self.step_size)
  end)

  -- lr * gamma^epoch
  schedule("ExponentialLR", {"gamma"}, function(self, gamma)
    if type(gamma) ~= "number" then
      error("ExponentialLR: gamma must be a number, got " .. describe(gamma), 3)
    end
    self.gamma = gamma
  end, function(self, epoch)
    return self.base_lr * self.gamma ^ epoch
  end)

  -- eta_min + (lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2, PyTorch's
  -- closed form: past T_max the cosine goes on (back up to lr at 2 T_max).
  schedule("CosineAnnealingLR", {"t_max", "eta_min"}, function(self, t_max, eta_min)
    if type(t_max) ~= "number" or not (t_max > 0) then
      error("CosineAnnealingLR: T_max must be a positive number, got " .. describe(t_max), 3)
    end
    self.t_max = t_max + 0.0
    self.eta_min = number(eta_min, 0, "CosineAnnealingLR", "eta_min") + 0.0
  end, function(self, epoch)
    return self.eta_min + (self.base_lr - self.eta_min) * (1 + math.cos(math.pi * epoch / self.t_max)) / 2
  end)

  -- Linear warm-up: lr * factor, the factor going from start_factor to
  -- end_factor in total_iters steps, then staying there.
  schedule("LinearLR", {"start_factor", "end_factor", "total_iters"}, function(self, options)
    options = options_table(options, "LinearLR", {start_factor = true, end_factor = true, total_iters = true})
    self.start_factor = number(options.start_factor, 1 / 3, "LinearLR", "start_factor") + 0.0
    self.end_factor = number(options.end_factor, 1, "LinearLR", "end_factor") + 0.0
    if not (self.start_factor > 0 and self.start_factor <= 1 and self.end_factor >= 0 and self.end_factor <= 1) then
      error("LinearLR: start_factor must be in (0, 1] and end_factor in [0, 1]", 3)
    end
    self.total_iters = positive_integer(options.total_iters or 5, "LinearLR", "total_iters")
  end, function(self, epoch)
    local progress = math.min(epoch, self.total_iters) / self.total_iters
    return self.base_lr * (self.start_factor + (self.end_factor - self.start_factor) * progress)
  end, true)

  -- lr * fn(epoch), any factor: fn(0) applies at once. A warm-up then a
  -- cosine: function(e) return e < w and (e + 1) / w or 0.5 * (1 + math.cos(math.pi * (e - w) / (n - w))) end.
  -- state_dict() keeps the epoch, not the function.
  schedule("LambdaLR", {}, function(self, fn)
    if type(fn) ~= "function" then
      error("LambdaLR: expected a function of the epoch, got " .. describe(fn), 3)
    end
    self.fn = fn
  end, function(self, epoch)
    local factor = self.fn(epoch)
    if type(factor) ~= "number" then
      error("LambdaLR: the function returned " .. describe(factor) .. " for epoch " .. epoch .. ", not a number", 3)
    end
    return self.base_lr * factor
  end, true)

  -- ---------------------------------------------------------------------------
  -- ReduceLROnPlateau: sched:step(metric) after each evaluation; when the
  -- metric has not improved for more than `patience` calls, lr *= factor
  -- (not below min_lr), then `cooldown` calls pass before counting again.
  -- PyTorch's algorithm, to the bit (the same arithmetic on Lua numbers).
  local Plateau = setmetatable({}, {__index = Schedule})
  Plateau.__index = Plateau
  Plateau.__name = "ReduceLROnPlateau"
  Plateau.fields = {"mode", "factor", "patience", "threshold", "threshold_mode", "cooldown", "min_lr",
    "eps", "best", "num_bad_epochs", "cooldown_counter"}

  function optim.ReduceLROnPlateau(optimizer, options)
    local name = "ReduceLROnPlateau"
    check_optimizer(optimizer, name)
    local defaults = {mode = "min", factor = 0.1, patience = 10, threshold = 1e-4, threshold_mode = "rel",
      cooldown = 0, min_lr = 0, eps = 1e-8}
    options = options_check("optim." .. name, options, defaults, 2)
    local self = setmetatable({optimizer = optimizer, epoch = 0, name = name}, Plateau)
    for key, default in pairs(defaults) do
      local value = options[key]
      if value == nil then value = default end
      self[key] = value
    end
    if self.mode ~= "min" and self.mode ~= "max" then
      error(string.format("%s: mode must be 'min' or 'max', got %s", name, describe(self.mode)), 2)
    end
    if self.threshold_mode ~= "rel" and self.threshold_mode ~= "abs" then
      error(string.format("%s: threshold_mode must be 'rel' or 'abs', got %s", name,
        describe(self.threshold_mode)), 2)
    end
    if type(self.factor) ~= "number" or not (self.factor >= 0 and self.factor < 1) then
      error(string.format("%s: factor must be a number in [0, 1), got %s", name, describe(self.factor)), 2)
    end
    for _, key in ipairs({"patience", "cooldown"}) do
      if math.type(self[key]) ~= "integer" or self[key] < 0 then
        error(string.format("%s: %s must be an integer >= 0, got %s", name, key, describe(self[key])), 2)
      end
    end
    for _, key in ipairs({"threshold", "min_lr", "eps"}) do
      if type(self[key]) ~= "number" or not (self[key] >= 0) then
        error(string.format("%s: %s must be a number >= 0, got %s", name, key, describe(self[key])), 2)
      end
      self[key] = self[key] + 0.0
    end
    self.factor = self.factor + 0.0
    self.best = self.mode == "min" and math.huge or -math.huge
    self.num_bad_epochs, self.cooldown_counter = 0, 0
    return self
  end

  function Plateau:is_better(value)
    local best, threshold = self.best, self.threshold
    if self.mode == "min" then
      if self.threshold_mode == "rel" then return value < best * (1 - threshold) end
      return value < best - threshold
    end
    if self.threshold_mode == "rel" then return value > best * (threshold + 1) end
    return value > best + threshold
  end

  -- metric: a number, or a one-element tensor (read here: a sync).
  function Plateau:step(metric)
    if tensor.is_tensor(metric) then
      if metric:numel() ~= 1 then
        error("ReduceLROnPlateau:step: the metric must be a number or a one-element tensor, got a tensor of "
          .. metric:numel() .. " elements", 2)
      end
      metric = metric:reshape(1)[1]:item()
    end
    if type(metric) ~= "number" then
      error("ReduceLROnPlateau:step: expected the metric (a number), got " .. describe(metric), 2)
    end
    self.epoch = self.epoch + 1
    if self:is_better(metric) then
      self.best = metric + 0.0
      self.num_bad_epochs = 0
    else
      self.num_bad_epochs = self.num_bad_epochs + 1
    end
    if self.cooldown_counter > 0 then
      self.cooldown_counter = self.cooldown_counter - 1
      self.num_bad_epochs = 0
    end
    if self.num_bad_epochs > self.patience then
      local old = self.optimizer.lr
      local new = math.max(old * self.factor, self.min_lr)
      if old - new > self.eps then self.optimizer.lr = new end
      self.cooldown_counter = self.cooldown
      self.num_bad_epochs = 0
    end
    return self.optimizer.lr
  end
end
