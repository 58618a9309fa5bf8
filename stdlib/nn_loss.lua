-- nn_loss.lua - loss modules for nn.lua. Each takes (input, target) and an
-- options table {reduction = "mean" | "sum" | "none"}.
local tensor = require "tensor"

return function(nn)
  local function reduced(loss, reduction)
    if reduction == "mean" then return loss:mean() end
    if reduction == "sum" then return loss:sum() end
    return loss
  end

  local function loss_class(name, compute)
    local class = nn.class(name)
    nn[name] = class
    function class:init(options)
      options = options or {}
      local reduction = options.reduction or "mean"
      if reduction ~= "mean" and reduction ~= "sum" and reduction ~= "none" then
        error(name .. ": reduction must be 'mean', 'sum' or 'none', got " .. tostring(reduction), 3)
      end
      self.reduction = reduction
      self.options = options
    end
    function class:forward(input, target)
      if not tensor.is_tensor(input) or not tensor.is_tensor(target) then
        error(name .. ": expected (input, target) tensors", 2)
      end
      return compute(self, input, target)
    end
    function class:extra_repr() return "reduction=" .. self.reduction end
    return class
  end

  local function same_shape(name, a, b)
    local sa, sb = table.concat(a:size(), "x"), table.concat(b:size(), "x")
    if sa ~= sb then
      error(string.format("%s: input [%s] and target [%s] differ in shape", name,
        table.concat(a:size(), ", "), table.concat(b:size(), ", ")), 4)
    end
  end

  loss_class("MSELoss", function(self, input, target)
    same_shape("MSELoss", input, target)
    local d = input - target
    return reduced(d * d, self.reduction)
  end)

  loss_class("L1Loss", function(self, input, target)
    same_shape("L1Loss", input, target)
    return reduced((input - target):abs(), self.reduction)
  end)

  -- -log p[target] per sample: log-probabilities [N, C], 1-based classes [N].
  local function nll(name, logp, target)
    if logp:dim() ~= 2 then
      error(string.format("%s: expected input [N, C], got [%s]", name, table.concat(logp:size(), ", ")), 4)
    end
    if target:dim() ~= 1 or target:size(1) ~= logp:size(1) then
      error(string.format("%s: expected a target of %d class indices, got shape [%s]", name,
        logp:size(1), table.concat(target:size(), ", ")), 4)
    end
    local dtype = target:dtype()
    if dtype ~= "i64" and dtype ~= "i32" then
      error(name .. ": the target must hold class indices (i64), got " .. dtype, 4)
    end
    -- gather checks every index is in 1..C (an error names the line).
    return -logp:gather(2, target:unsqueeze(2)):squeeze(2)
  end

  loss_class("NLLLoss", function(self, input, target)
    return reduced(nll("NLLLoss", input, target), self.reduction)
  end)

  -- log_softmax and NLL in one: stable for any logits (log_softmax
  -- subtracts the row max). A float target [N, C] is class probabilities.
  -- options.label_smoothing mixes the target with the uniform distribution.
  loss_class("CrossEntropyLoss", function(self, input, target)
    local logp = input:log_softmax(2)
    local smoothing = self.options.label_smoothing or 0
    local loss
    if target:dtype() == "f32" or target:dtype() == "f64" then
      same_shape("CrossEntropyLoss", input, target)
      loss = -(logp * target):sum(2)
    else
      loss = nll("CrossEntropyLoss", logp, target)
    end
    if smoothing > 0 then
      loss = loss * (1 - smoothing) - logp:mean(2) * smoothing
    end
    return reduced(loss, self.reduction)
  end)

  -- Binary cross-entropy on logits: max(x, 0) - x*t + log(1 + exp(-|x|)).
  loss_class("BCEWithLogitsLoss", function(self, input, target)
    same_shape("BCEWithLogitsLoss", input, target)
    local loss = input:relu() - input * target + (-input:abs()):exp():log1p()
    return reduced(loss, self.reduction)
  end)
end
