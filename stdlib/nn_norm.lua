-- nn_norm.lua - BatchNorm1d and BatchNorm2d for nn.lua. Batch statistics
-- are means over every dim but the channel dim (2); the running statistics
-- are buffers updated in place inside no_grad, so in lazy mode the update
-- is recorded with the step's graph and costs no sync.
local tensor = require "tensor"
local options_check = require("lazylua.options").check

return function(nn)
  local function batch_norm(name, ranks, layout)
    local class = nn.class(name)
    nn[name] = class
    local allowed = {eps = true, momentum = true, affine = true, track_running_stats = true}

    function class:init(num_features, options)
      if math.type(num_features) ~= "integer" or num_features < 1 then
        error(string.format("%s: num_features must be a positive integer, got %s", name,
          tostring(num_features)), 3)
      end
      options = options_check("nn." .. name, options, allowed, 3)
      local eps, momentum = options.eps or 1e-5, options.momentum or 0.1
      if type(eps) ~= "number" or eps <= 0 then
        error(name .. ": eps must be a number > 0, got " .. tostring(eps), 3)
      end
      if type(momentum) ~= "number" or momentum < 0 or momentum > 1 then
        error(name .. ": momentum must be a number in [0, 1], got " .. tostring(momentum), 3)
      end
      self.num_features, self.eps, self.momentum = num_features, eps, momentum
      self.affine = options.affine ~= false
      self.track_running_stats = options.track_running_stats ~= false
      if self.affine then
        self:register_parameter("weight", tensor.ones(num_features))
        self:register_parameter("bias", tensor.zeros(num_features))
      end
      if self.track_running_stats then
        self:register_buffer("running_mean", tensor.zeros(num_features))
        self:register_buffer("running_var", tensor.ones(num_features))
        self:register_buffer("num_batches_tracked", tensor.zeros({}, {dtype = "i64"}))
      end
    end

    function class:forward(x)
      if not tensor.is_tensor(x) or not ranks[x:dim()] or x:size(2) ~= self.num_features then
        local got = tensor.is_tensor(x) and ("[" .. table.concat(x:size(), ", ") .. "]") or type(x)
        error(string.format("%s: expected input %s with C = %d, got %s", name, layout,
          self.num_features, got), 2)
      end
      local rank, channels = x:dim(), self.num_features
      -- [1, C, 1, ...]: broadcasts a per-channel vector against x.
      local shape = {1, channels}
      for _ = 3, rank do shape[#shape + 1] = 1 end
      local function per_channel(t) return t:reshape(shape) end
      local function channel_mean(t)
        for d = rank, 1, -1 do
          if d ~= 2 then t = t:mean(d, true) end
        end
        return t
      end

      local y
      if self.training or not self.track_running_stats then
        local count = x:numel() // channels
        if self.training and count < 2 then
          error(string.format("%s: expected more than 1 value per channel when training, got input [%s]",
            name, table.concat(x:size(), ", ")), 2)
        end
        local mean = channel_mean(x)
        local centered = x - mean
        local var = channel_mean(centered * centered)  -- biased, for normalizing
        if self.training and self.track_running_stats then
          local m = self.momentum
          tensor.no_grad(function()
            self.running_mean:mul_(1 - m):add_(mean:detach():reshape(channels) * m)
            -- the unbiased variance, as PyTorch keeps
            self.running_var:mul_(1 - m):add_(var:detach():reshape(channels) * (m * count / (count - 1)))
            self.num_batches_tracked:add_(1)
          end)
        end
        y = centered * (var + self.eps):rsqrt()
      else
        y = (x - per_channel(self.running_mean)) * (per_channel(self.running_var) + self.eps):rsqrt()
      end
      if self.affine then y = y * per_channel(self.weight) + per_channel(self.bias) end
      return y
    end

    function class:extra_repr()
      return string.format("%d, eps=%g, momentum=%g, affine=%s, track_running_stats=%s",
        self.num_features, self.eps, self.momentum, tostring(self.affine),
        tostring(self.track_running_stats))
    end
  end

  batch_norm("BatchNorm1d", {[2] = true, [3] = true}, "[N, C] or [N, C, L]")
  batch_norm("BatchNorm2d", {[4] = true}, "[N, C, H, W]")
end
