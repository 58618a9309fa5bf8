-- nn_loss.lua - loss modules for nn.lua. Each takes (input, target) and an
-- options table: reduction = "mean" | "sum" | "none" for all, and the
-- options of each loss as PyTorch 1.13's (weight, ignore_index,
-- label_smoothing, pos_weight). An option a loss does not know is an error.
local tensor = require "tensor"
local options_check = require("lazylua.options").check

return function(nn)
  local function reduced(loss, reduction)
    if reduction == "mean" then return loss:mean() end
    if reduction == "sum" then return loss:sum() end
    return loss
  end

  -- A 1-D float tensor (per-class weights) or nil.
  local function check_weight_vector(name, key, value)
    if value == nil then return nil end
    if not tensor.is_tensor(value) or value:dim() ~= 1 then
      error(string.format("nn.%s: %s must be a 1-D tensor of per-class weights, got %s", name, key,
        tensor.is_tensor(value) and ("a tensor of shape [" .. table.concat(value:size(), ", ") .. "]")
          or type(value)), 5)
    end
    return value
  end

  local function check_tensor_option(name, key, value)
    if value ~= nil and not tensor.is_tensor(value) then
      error(string.format("nn.%s: %s must be a tensor, got %s", name, key, type(value)), 5)
    end
    return value
  end

  -- known: the option names beside reduction; init(self, options) reads them.
  local function loss_class(name, known, init, compute)
    local class = nn.class(name)
    nn[name] = class
    local names = {"reduction"}
    for _, key in ipairs(known) do names[#names + 1] = key end
    function class:init(options)
      options = options_check("nn." .. name, options, names, 3)
      local reduction = options.reduction or "mean"
      if reduction ~= "mean" and reduction ~= "sum" and reduction ~= "none" then
        error("nn." .. name .. ": reduction must be 'mean', 'sum' or 'none', got " .. tostring(reduction), 3)
      end
      self.reduction = reduction
      if init then init(self, options) end
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

  loss_class("MSELoss", {}, nil, function(self, input, target)
    same_shape("MSELoss", input, target)
    local d = input - target
    return reduced(d * d, self.reduction)
  end)

  loss_class("L1Loss", {}, nil, function(self, input, target)
    same_shape("L1Loss", input, target)
    return reduced((input - target):abs(), self.reduction)
  end)

  -- The per-class weight vector in the input's dtype, checked against C.
  local function class_weights(name, weight, logp, level)
    if weight == nil then return nil end
    if weight:size(1) ~= logp:size(2) then
      error(string.format("%s: weight has %d elements, the input %d classes", name, weight:size(1),
        logp:size(2)), level + 1)
    end
    return weight:to(logp:dtype())
  end

  -- NLL of class-index targets, as PyTorch's nll_loss: per sample
  -- -weight[t] * logp[t] (0 where t == ignore_index), and for "mean" the sum
  -- divided by the sum of weight[t] over the targets not ignored. Returns
  -- the loss per sample, the mask of the samples kept (nil when none is
  -- ignored), the divisor of "mean" and the class weights (for label
  -- smoothing).
  local function nll(name, self, logp, target)
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
    local kept
    if self.ignore_index ~= nil then
      kept = target:ne(self.ignore_index)
      -- an ignored target may be any integer (-100, 0): read class 1 instead
      target = tensor.where(kept, target, 1)
    end
    -- gather checks every index is in 1..C (an error names the line).
    local loss = -logp:gather(2, target:unsqueeze(2)):squeeze(2)
    local weight = class_weights(name, self.weight, logp, 4)
    local per_sample_weight
    if weight then
      per_sample_weight = weight:index_select(1, target)
      loss = loss * per_sample_weight
    end
    if kept then
      -- where, not a product: an ignored row's -inf (or NaN) stays out
      loss = tensor.where(kept, loss, 0)
      per_sample_weight = per_sample_weight and tensor.where(kept, per_sample_weight, 0) or kept:to(logp:dtype())
    end
    local divisor
    if self.reduction == "mean" then
      divisor = per_sample_weight and per_sample_weight:sum() or logp:size(1)
    end
    return loss, kept, divisor, weight
  end

  local function reduced_nll(loss, reduction, divisor)
    if reduction == "mean" then return loss:sum() / divisor end
    return reduced(loss, reduction)
  end

  local function init_class_options(name, with_smoothing)
    return function(self, options)
      self.weight = check_weight_vector(name, "weight", options.weight)
      local ignore = options.ignore_index
      if ignore ~= nil and math.type(ignore) ~= "integer" then
        error(string.format("nn.%s: ignore_index must be an integer (a class index, 1-based), got %s", name,
          tostring(ignore)), 4)
      end
      self.ignore_index = ignore
      if with_smoothing then
        local smoothing = options.label_smoothing or 0
        if type(smoothing) ~= "number" or not (smoothing >= 0 and smoothing <= 1) then
          error(string.format("nn.%s: label_smoothing must be a number in [0, 1], got %s", name,
            tostring(smoothing)), 4)
        end
        self.label_smoothing = smoothing
      end
    end
  end

  loss_class("NLLLoss", {"weight", "ignore_index"}, init_class_options("NLLLoss", false),
    function(self, input, target)
      local loss, _, divisor = nll("NLLLoss", self, input, target)
      return reduced_nll(loss, self.reduction, divisor)
    end)

  -- log_softmax and NLL in one: stable for any logits (log_softmax
  -- subtracts the row max). A float target [N, C] is class probabilities.
  -- label_smoothing ε mixes the target with the uniform distribution:
  -- PyTorch's (1 - ε)·nll + ε/C · Σ_c -weight[c]·logp[c], the second term
  -- over the samples not ignored and, for "mean", divided as the first.
  loss_class("CrossEntropyLoss", {"weight", "ignore_index", "label_smoothing"},
    init_class_options("CrossEntropyLoss", true), function(self, input, target)
      local logp = input:log_softmax(2)
      local smoothing = self.label_smoothing
      local classes = input:size(2)
      if target:dtype() == "f32" or target:dtype() == "f64" then
        same_shape("CrossEntropyLoss", input, target)
        if self.ignore_index ~= nil then
          error("CrossEntropyLoss: ignore_index applies to class-index targets, not probabilities", 3)
        end
        if smoothing > 0 then target = target * (1 - smoothing) + smoothing / classes end
        local weighted = logp * target
        local weight = class_weights("CrossEntropyLoss", self.weight, logp, 3)
        if weight then weighted = weighted * weight end
        return reduced(-weighted:sum(2), self.reduction)
      end
      local loss, kept, divisor, weight = nll("CrossEntropyLoss", self, logp, target)
      if smoothing > 0 then
        local smooth = weight and -(logp * weight):sum(2) or -logp:sum(2)
        if kept then smooth = tensor.where(kept, smooth, 0) end
        loss = loss * (1 - smoothing) + smooth * (smoothing / classes)
      end
      return reduced_nll(loss, self.reduction, divisor)
    end)

  -- Binary cross-entropy on logits, PyTorch's stable form:
  -- (1 - t)·x + (1 + (pos_weight - 1)·t)·(log(1 + e^(-|x|)) + max(-x, 0)),
  -- times weight (broadcast to the input); pos_weight broadcasts along the
  -- last dim (one per class).
  loss_class("BCEWithLogitsLoss", {"weight", "pos_weight"}, function(self, options)
    self.weight = check_tensor_option("BCEWithLogitsLoss", "weight", options.weight)
    self.pos_weight = check_tensor_option("BCEWithLogitsLoss", "pos_weight", options.pos_weight)
  end, function(self, input, target)
    same_shape("BCEWithLogitsLoss", input, target)
    local softplus_negative = (-input:abs()):exp():log1p() + (-input):relu()
    local loss
    if self.pos_weight then
      local log_weight = (self.pos_weight:to(input:dtype()) - 1) * target + 1
      loss = (1 - target) * input + log_weight * softplus_negative
    else
      loss = (1 - target) * input + softplus_negative
    end
    if self.weight then loss = loss * self.weight:to(input:dtype()) end
    return reduced(loss, self.reduction)
  end)
end
