-- nn_conv.lua - Conv2d and pooling for nn.lua. Conv2d and MaxPool2d (on
-- float tensors) are the ops tensor.conv2d and tensor.max_pool2d, whose
-- kernels build a few samples' columns at a time and multiply them with
-- BLAS; AvgPool2d is a mean over the windows (views of the input).
local tensor = require "tensor"
local options_check = require("lazylua.options").check
local options_refuse_unsupported = require("lazylua.options").refuse_unsupported

return function(nn)
  local function pair(value, what)
    if type(value) == "table" then return value[1], value[2] end
    if math.type(value) ~= "integer" or value < 0 then
      error(string.format("%s must be a non-negative integer, got %s", what, tostring(value)), 4)
    end
    return value, value
  end

  -- x [N, C, H, W] padded with `fill` by (ph, pw) before and (ph + eh, pw + ew)
  -- after along H and W.
  local function pad2d(x, ph, pw, eh, ew, fill)
    if ph == 0 and pw == 0 and eh == 0 and ew == 0 then return x end
    local n, c, hgt, wid = table.unpack(x:size())
    local function block(h, w)
      return tensor.full({1}, fill, {dtype = x:dtype()}):reshape(1, 1, 1, 1):expand(n, c, h, w)
    end
    if ph + eh > 0 then
      local parts = {}
      if ph > 0 then parts[#parts + 1] = block(ph, wid) end
      parts[#parts + 1] = x
      if ph + eh > 0 then parts[#parts + 1] = block(ph + eh, wid) end
      x = tensor.cat(parts, 3)
      hgt = hgt + 2 * ph + eh
    end
    if pw + ew > 0 then
      local parts = {}
      if pw > 0 then parts[#parts + 1] = block(hgt, pw) end
      parts[#parts + 1] = x
      parts[#parts + 1] = block(hgt, pw + ew)
      x = tensor.cat(parts, 4)
    end
    return x
  end

  -- The windows of x [N, C, H, W]: a list of K*K tensors [C, N, OH, OW]
  -- (window (i, j) holds x[:, :, i + s*oh, j + s*ow]), and OH, OW.
  local function windows(x, kh, kw, sh, sw, ph, pw, fill)
    local _, _, hgt, wid = table.unpack(x:size())
    local oh = (hgt + 2 * ph - kh) // sh + 1
    local ow = (wid + 2 * pw - kw) // sw + 1
    if oh < 1 or ow < 1 then
      error(string.format("input %dx%d is smaller than the kernel %dx%d (padding %d, %d)",
        hgt, wid, kh, kw, ph, pw), 4)
    end
    -- Room for strided windows read as [OH, stride] blocks.
    local need_h = (kh - 1) + sh * oh - (hgt + 2 * ph)
    local need_w = (kw - 1) + sw * ow - (wid + 2 * pw)
    local xp = pad2d(x, ph, pw, math.max(need_h, 0), math.max(need_w, 0), fill):transpose(1, 2)
    local c, n = xp:size(1), xp:size(2)
    local list = {}
    for i = 1, kh do
      for j = 1, kw do
        local win = xp:narrow(3, i, sh * oh):narrow(4, j, sw * ow)
        if sh > 1 or sw > 1 then
          win = win:reshape(c, n, oh, sh, ow, sw):select(6, 1):select(4, 1)
        end
        list[#list + 1] = win
      end
    end
    return list, oh, ow
  end

  -- Options PyTorch has that wait for other work: refused by name unless
  -- they hold their default (dilation 1 or {1, 1}, say). Called by init:
  -- the user's call is 4 levels up.
  local function refuse_unsupported(name, given, key, default)
    options_refuse_unsupported("nn." .. name, given, key, default, 4)
  end

  local Conv2d = nn.class("Conv2d")
  nn.Conv2d = Conv2d

  function Conv2d:init(in_channels, out_channels, kernel_size, options)
    options = options_check("nn.Conv2d", options,
      {"stride", "padding", "bias", "groups", "dilation", "padding_mode"}, 3)
    refuse_unsupported("Conv2d", options, "groups", 1)
    refuse_unsupported("Conv2d", options, "dilation", 1)
    refuse_unsupported("Conv2d", options, "padding_mode", "zeros")
    for what, value in pairs({in_channels = in_channels, out_channels = out_channels}) do
      if math.type(value) ~= "integer" or value < 1 then
        error("Conv2d: " .. what .. " must be a positive integer", 3)
      end
    end
    self.in_channels, self.out_channels = in_channels, out_channels
    self.kh, self.kw = pair(kernel_size, "Conv2d: kernel_size")
    self.sh, self.sw = pair(options.stride or 1, "Conv2d: stride")
    self.ph, self.pw = pair(options.padding or 0, "Conv2d: padding")
    if self.kh < 1 or self.kw < 1 or self.sh < 1 or self.sw < 1 then
      error("Conv2d: kernel_size and stride must be positive", 3)
    end
    local fan_in = in_channels * self.kh * self.kw
    local bound = 1 / math.sqrt(fan_in)
    self:register_parameter("weight", nn.init.uniform_(
      tensor.empty(out_channels, in_channels, self.kh, self.kw), -bound, bound))
    if options.bias ~= false then
      self:register_parameter("bias", nn.init.uniform_(tensor.empty(out_channels), -bound, bound))
    end
  end

  function Conv2d:forward(x)
    if x:dim() ~= 4 or x:size(2) ~= self.in_channels then
      error(string.format("Conv2d: expected input [N, %d, H, W], got [%s]", self.in_channels,
        table.concat(x:size(), ", ")), 2)
    end
    local y = tensor.conv2d(x, self.weight,
      {stride = {self.sh, self.sw}, padding = {self.ph, self.pw}})
    if self.bias then y = y + self.bias:reshape(self.out_channels, 1, 1) end
    return y
  end

  function Conv2d:extra_repr()
    return string.format("%d, %d, kernel=%dx%d, stride=%dx%d, padding=%dx%d", self.in_channels,
      self.out_channels, self.kh, self.kw, self.sh, self.sw, self.ph, self.pw)
  end

  -- The extra rows (or columns) ceil_mode adds after the input and its
  -- padding, PyTorch's rule: the output size rounds up, but the last
  -- window must start inside the input or the left padding.
  local function ceil_extra(size, kernel, stride, padding)
    local span = size + 2 * padding - kernel
    if span < 0 then return 0 end
    local out = (span + stride - 1) // stride + 1
    if (out - 1) * stride >= size + padding then out = out - 1 end
    return math.max((out - 1) * stride + kernel - (size + 2 * padding), 0)
  end

  -- Max or average over windows. `known`: the options of each, those
  -- PyTorch has that wait for other work listed in `unsupported` (name ->
  -- the default, the one value accepted).
  local function pool(name, reduce, fill, known, unsupported)
    local class = nn.class(name)
    nn[name] = class
    function class:init(kernel_size, options)
      options = options_check("nn." .. name, options, known, 3)
      for key, default in pairs(unsupported) do refuse_unsupported(name, options, key, default) end
      self.kh, self.kw = pair(kernel_size, name .. ": kernel_size")
      self.sh, self.sw = pair(options.stride or kernel_size, name .. ": stride")
      self.ph, self.pw = pair(options.padding or 0, name .. ": padding")
      if self.kh < 1 or self.kw < 1 or self.sh < 1 or self.sw < 1 then
        error(name .. ": kernel_size and stride must be positive", 3)
      end
      if options.ceil_mode ~= nil and type(options.ceil_mode) ~= "boolean" then
        error(string.format("nn.%s: ceil_mode must be a boolean, got %s", name, type(options.ceil_mode)), 3)
      end
      self.ceil_mode = options.ceil_mode == true
      if self.ceil_mode and (2 * self.ph > self.kh or 2 * self.pw > self.kw) then
        -- as tensor.max_pool2d checks (ceil_mode pads before calling it)
        error(string.format("nn.%s: padding %dx%d must be at most half the kernel %dx%d", name, self.ph, self.pw,
          self.kh, self.kw), 3)
      end
    end
    -- The pooling of x padded by (ph, pw) on both sides.
    local function pool_padded(self, x, ph, pw)
      local dtype = x:dtype()
      if name == "MaxPool2d" and (dtype == "f32" or dtype == "f64") then
        return tensor.max_pool2d(x, {self.kh, self.kw}, {stride = {self.sh, self.sw}, padding = {ph, pw}})
      end
      local n, c, hgt, wid = table.unpack(x:size())
      if self.kh == self.sh and self.kw == self.sw and ph == 0 and pw == 0 and
          hgt % self.kh == 0 and wid % self.kw == 0 then
        -- Windows that tile the input: a reshape, no copy.
        local blocks = x:reshape(n, c, hgt // self.kh, self.kh, wid // self.kw, self.kw)
        return reduce(reduce(blocks, 6), 4)
      end
      local list = windows(x, self.kh, self.kw, self.sh, self.sw, ph, pw, fill)
      return reduce(tensor.stack(list, 1), 1):transpose(1, 2)
    end
    function class:forward(x)
      if x:dim() ~= 4 then
        error(string.format("%s: expected input [N, C, H, W], got [%s]", name,
          table.concat(x:size(), ", ")), 2)
      end
      if self.ceil_mode then
        -- the windows past the end see -inf (MaxPool2d's implicit padding):
        -- the input padded explicitly, then pooled without padding
        local eh = ceil_extra(x:size(3), self.kh, self.sh, self.ph)
        local ew = ceil_extra(x:size(4), self.kw, self.sw, self.pw)
        if eh > 0 or ew > 0 then return pool_padded(self, pad2d(x, self.ph, self.pw, eh, ew, fill), 0, 0) end
      end
      return pool_padded(self, x, self.ph, self.pw)
    end
    function class:extra_repr()
      return string.format("kernel=%dx%d, stride=%dx%d%s", self.kh, self.kw, self.sh, self.sw,
        self.ceil_mode and ", ceil_mode=true" or "")
    end
  end
  pool("MaxPool2d", function(t, dim) return (t:max(dim)) end, -math.huge,
    {"stride", "padding", "ceil_mode", "dilation", "return_indices"}, {dilation = 1, return_indices = false})
  -- AvgPool2d's ceil_mode divides its last windows by a clipped count in
  -- PyTorch: refused until then, as count_include_pad = false.
  pool("AvgPool2d", function(t, dim) return t:mean(dim) end, 0,
    {"stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"},
    {ceil_mode = false, count_include_pad = true, divisor_override = false})
end
