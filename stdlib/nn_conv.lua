-- nn_conv.lua - Conv2d and pooling for nn.lua. Conv2d and MaxPool2d (on
-- float tensors) are the ops tensor.conv2d and tensor.max_pool2d, whose
-- kernels build a few samples' columns at a time and multiply them with
-- BLAS; AvgPool2d is a mean over the windows (views of the input).
local tensor = require "tensor"
local options_check = require("lazylua.options").check
local options_refuse_unsupported = require("lazylua.options").refuse_unsupported
local options_show = require("lazylua.options").show

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

  -- The convolution layers: nn.Conv1d/2d/3d and nn.ConvTranspose1d/2d/3d,
  -- with torch.nn's arguments, options, parameter names and init. Each is
  -- one op, tensor.conv<d>d or tensor.conv_transpose<d>d, the bias added in
  -- the same pass.
  local spatial_names = {"L", "H, W", "D, H, W"}
  local padding_modes = {zeros = true, reflect = true, replicate = true, circular = true}

  -- An integer >= least, or a list of d of them, as a list of d integers.
  local function per_dim(class_name, what, value, d, least, level)
    local list = {}
    if math.type(value) == "integer" then
      for i = 1, d do list[i] = value end
    elseif type(value) == "table" and #value == d then
      for i = 1, d do list[i] = value[i] end
    else
      list = nil
    end
    for i = 1, list and d or 0 do
      if math.type(list[i]) ~= "integer" or list[i] < least then list = nil; break end
    end
    if not list then
      local shown = options_show(value)
      error(string.format("nn.%s: %s must be an integer >= %d or a list of %d of them, got %s", class_name, what,
        least, d, shown), level)
    end
    return list
  end

  local function positive_integer(class_name, what, value, level)
    if math.type(value) ~= "integer" or value < 1 then
      error(string.format("nn.%s: %s must be a positive integer, got %s", class_name, what, tostring(value)), level)
    end
    return value
  end

  -- The {before, after} zero padding of each spatial dim: PyTorch's
  -- padding = "same" puts the odd extra after; "valid" is none.
  local function padding_pairs(self, padding, level)
    local pairs_list = {}
    if padding == "same" then
      for i = 1, self.d do
        if self.stride[i] ~= 1 then
          error(string.format("nn.%s: padding = 'same' needs stride 1, got stride %d", self.class_name,
            self.stride[i]), level)
        end
        local total = self.dilation[i] * (self.kernel_size[i] - 1)
        pairs_list[i] = {total // 2, total - total // 2}
      end
    elseif padding == "valid" then
      for i = 1, self.d do pairs_list[i] = {0, 0} end
    elseif type(padding) == "string" then
      error(string.format("nn.%s: padding must be an integer, a list, 'same' or 'valid', got '%s'", self.class_name,
        padding), level)
    else
      local list = per_dim(self.class_name, "padding", padding, self.d, 0, level + 1)
      for i = 1, self.d do pairs_list[i] = {list[i], list[i]} end
    end
    return pairs_list
  end

  -- The options shared by both kinds, checked and stored on self. Errors
  -- point at the user's call (level 4: init_conv, init, the constructor);
  -- the helpers above take the level of their own error() call.
  local function init_conv(self, class_name, d, transposed, in_channels, out_channels, kernel_size, options)
    local known = {"stride", "padding", "dilation", "groups", "bias", "padding_mode", "dtype"}
    if transposed then known[#known + 1] = "output_padding" end
    options = options_check("nn." .. class_name, options, known, 4)
    local level = 4
    local helper_level = level + 1
    self.class_name, self.d, self.transposed = class_name, d, transposed
    self.in_channels = positive_integer(class_name, "in_channels", in_channels, helper_level)
    self.out_channels = positive_integer(class_name, "out_channels", out_channels, helper_level)
    self.kernel_size = per_dim(class_name, "kernel_size", kernel_size, d, 1, helper_level)
    self.stride = per_dim(class_name, "stride", options.stride or 1, d, 1, helper_level)
    self.dilation = per_dim(class_name, "dilation", options.dilation or 1, d, 1, helper_level)
    self.groups = positive_integer(class_name, "groups", options.groups or 1, helper_level)
    if in_channels % self.groups ~= 0 or out_channels % self.groups ~= 0 then
      error(string.format("nn.%s: groups %d must divide in_channels %d and out_channels %d", class_name, self.groups,
        in_channels, out_channels), level)
    end
    if options.bias ~= nil and type(options.bias) ~= "boolean" then
      error(string.format("nn.%s: bias must be a boolean, got %s", class_name, type(options.bias)), level)
    end
    self.padding_mode = options.padding_mode or "zeros"
    if not padding_modes[self.padding_mode] then
      error(string.format("nn.%s: padding_mode must be 'zeros', 'reflect', 'replicate' or 'circular', got %s",
        class_name, tostring(self.padding_mode)), level)
    end
    local dtype = options.dtype or "f32"
    if dtype ~= "f32" and dtype ~= "f64" then
      error(string.format("nn.%s: dtype must be 'f32' or 'f64', got %s", class_name, tostring(dtype)), level)
    end
    if transposed then
      if self.padding_mode ~= "zeros" then
        error(string.format("nn.%s: only padding_mode 'zeros' is supported, got '%s'", class_name,
          self.padding_mode), level)
      end
      if type(options.padding) == "string" then
        error(string.format("nn.%s: padding must be an integer or a list of %d, got '%s'", class_name, d,
          options.padding), level)
      end
      self.padding = per_dim(class_name, "padding", options.padding or 0, d, 0, helper_level)
      self.output_padding = per_dim(class_name, "output_padding", options.output_padding or 0, d, 0, helper_level)
      for i = 1, d do
        if self.output_padding[i] >= math.max(self.stride[i], self.dilation[i]) then
          error(string.format("nn.%s: output_padding %d must be smaller than the stride %d or the dilation %d",
            class_name, self.output_padding[i], self.stride[i], self.dilation[i]), level)
        end
      end
    else
      self.padding = options.padding or 0
      self.pads = padding_pairs(self, self.padding, helper_level)
    end
    -- PyTorch's weight layout and init: kaiming_uniform(a = sqrt(5)) is
    -- uniform in +-1/sqrt(fan_in), fan_in = weight:size(2) * kernel volume
    -- (so it counts the groups), and the bias uses the same bound.
    local shape = transposed and {in_channels, out_channels // self.groups} or
      {out_channels, in_channels // self.groups}
    local fan_in = shape[2]
    for i = 1, d do
      shape[#shape + 1] = self.kernel_size[i]
      fan_in = fan_in * self.kernel_size[i]
    end
    self:register_parameter("weight", nn.init.kaiming_uniform_(tensor.empty(shape, {dtype = dtype}), math.sqrt(5)))
    if options.bias ~= false then
      local bound = 1 / math.sqrt(fan_in)
      self:register_parameter("bias", nn.init.uniform_(tensor.empty(out_channels, {dtype = dtype}), -bound, bound))
    end
  end

  -- x [N, C, spatial...] or an unbatched [C, spatial...] (as PyTorch):
  -- returns the batched input and whether to drop the batch dim after.
  local function batched_input(self, x)
    local d = self.d
    local rank = tensor.is_tensor(x) and x:dim() or -1
    local channels = (rank == d + 2 and x:size(2)) or (rank == d + 1 and x:size(1)) or nil
    if channels ~= self.in_channels then
      local got = tensor.is_tensor(x) and ("[" .. table.concat(x:size(), ", ") .. "]") or type(x)
      error(string.format("%s: expected input [N, %d, %s], got %s", self.class_name, self.in_channels,
        spatial_names[d], got), 3)
    end
    if rank == d + 1 then return x:unsqueeze(1), true end
    return x, false
  end

  -- Pads x [N, C, spatial...] as padding_mode does before a conv without
  -- padding (PyTorch's way); the extents each mode allows are checked here
  -- so the error names the layer.
  local function pad_by_mode(self, x)
    local pads, any = {}, false
    for i = self.d, 1, -1 do
      local before, after = self.pads[i][1], self.pads[i][2]
      local size = x:size(i + 2)
      if (self.padding_mode == "reflect" and math.max(before, after) >= size) or
          (self.padding_mode == "circular" and math.max(before, after) > size) then
        error(string.format("%s: padding %d with padding_mode '%s' is too large for an input extent of %d",
          self.class_name, math.max(before, after), self.padding_mode, size), 3)
      end
      pads[#pads + 1], pads[#pads + 2] = before, after
      any = any or before > 0 or after > 0
    end
    if not any then return x end
    return tensor.pad(x, pads, {mode = self.padding_mode})
  end

  local function conv_forward(self, x)
    local input, unbatched = batched_input(self, x)
    local padding = self.pads
    if self.padding_mode ~= "zeros" then
      input = pad_by_mode(self, input)
      padding = 0
    end
    local y = tensor["conv" .. self.d .. "d"](input, self.weight, self.bias,
      {stride = self.stride, padding = padding, dilation = self.dilation, groups = self.groups})
    return unbatched and y:squeeze(1) or y
  end

  -- The output_padding that makes a transposed conv's output `output_size`
  -- (d extents, or d + 2 with N and C), as PyTorch's _output_padding.
  local function output_padding_for(self, input, output_size)
    local d = self.d
    if type(output_size) ~= "table" or (#output_size ~= d and #output_size ~= d + 2) then
      error(string.format("%s: output_size must be a list of %d (or %d) integers", self.class_name, d, d + 2), 3)
    end
    local list = {}
    for i = 1, d do
      local want = output_size[#output_size - d + i]
      local least = (input:size(i + 2) - 1) * self.stride[i] - 2 * self.padding[i] +
        self.dilation[i] * (self.kernel_size[i] - 1) + 1
      local most = least + math.max(self.stride[i], self.dilation[i]) - 1
      if math.type(want) ~= "integer" or want < least or want > most then
        error(string.format("%s: output_size %s of spatial dim %d is outside the reachable %d to %d",
          self.class_name, tostring(want), i, least, most), 3)
      end
      list[i] = want - least
    end
    return list
  end

  local function conv_transpose_forward(self, x, output_size)
    local input, unbatched = batched_input(self, x)
    local output_padding = self.output_padding
    if output_size ~= nil then output_padding = output_padding_for(self, input, output_size) end
    local y = tensor["conv_transpose" .. self.d .. "d"](input, self.weight, self.bias,
      {stride = self.stride, padding = self.padding, output_padding = output_padding, dilation = self.dilation,
        groups = self.groups})
    return unbatched and y:squeeze(1) or y
  end

  local function shown(list)
    if type(list) ~= "table" then return "'" .. tostring(list) .. "'" end
    return "(" .. table.concat(list, ", ") .. ")"
  end

  -- PyTorch's repr: the options that differ from their defaults.
  local function conv_repr(self)
    local parts = {string.format("%d, %d, kernel_size=%s, stride=%s", self.in_channels, self.out_channels,
      shown(self.kernel_size), shown(self.stride))}
    local padding = self.padding
    if type(padding) == "number" then padding = per_dim(self.class_name, "padding", padding, self.d, 0, 1) end
    local function not_default(list, default)
      if type(list) ~= "table" then return list ~= default end
      for _, v in ipairs(list) do if v ~= default then return true end end
      return false
    end
    if not_default(padding, 0) then parts[#parts + 1] = "padding=" .. shown(padding) end
    if not_default(self.dilation, 1) then parts[#parts + 1] = "dilation=" .. shown(self.dilation) end
    if self.transposed and not_default(self.output_padding, 0) then
      parts[#parts + 1] = "output_padding=" .. shown(self.output_padding)
    end
    if self.groups ~= 1 then parts[#parts + 1] = "groups=" .. self.groups end
    if not self.bias then parts[#parts + 1] = "bias=False" end
    if self.padding_mode ~= "zeros" then parts[#parts + 1] = "padding_mode=" .. self.padding_mode end
    return table.concat(parts, ", ")
  end

  for d = 1, 3 do
    for _, transposed in ipairs({false, true}) do
      local class_name = (transposed and "ConvTranspose" or "Conv") .. d .. "d"
      local class = nn.class(class_name)
      nn[class_name] = class
      function class:init(in_channels, out_channels, kernel_size, options)
        init_conv(self, class_name, d, transposed, in_channels, out_channels, kernel_size, options)
      end
      class.forward = transposed and conv_transpose_forward or conv_forward
      class.extra_repr = conv_repr
    end
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
