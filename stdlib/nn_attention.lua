-- nn_attention.lua - MultiheadAttention and TransformerEncoderLayer for
-- nn.lua, with PyTorch's parameter names, shapes and equations. Heads are
-- a batch dim of one batched matmul: [N, heads, L, head_dim].
local tensor = require "tensor"
local options_check = require("lazylua.options").check

return function(nn)
  local function shape_text(t)
    if not tensor.is_tensor(t) then return type(t) end
    return "[" .. table.concat(t:size(), ", ") .. "]"
  end

  local function check_dropout(name, p)
    if type(p) ~= "number" or p < 0 or p >= 1 then
      error(name .. ": dropout must be a number in [0, 1), got " .. tostring(p), 4)
    end
  end

  local MultiheadAttention = nn.class("MultiheadAttention")
  nn.MultiheadAttention = MultiheadAttention

  function MultiheadAttention:init(embed_dim, num_heads, options)
    local name = "MultiheadAttention"
    for _, pair in ipairs({{"embed_dim", embed_dim}, {"num_heads", num_heads}}) do
      local what, value = pair[1], pair[2]
      if math.type(value) ~= "integer" or value < 1 then
        error(string.format("%s: %s must be a positive integer, got %s", name, what, tostring(value)), 3)
      end
    end
    if embed_dim % num_heads ~= 0 then
      error(string.format("%s: embed_dim (%d) must be divisible by num_heads (%d)", name, embed_dim,
        num_heads), 3)
    end
    options = options_check("nn." .. name, options, {dropout = true, bias = true, batch_first = true}, 3)
    self.dropout = options.dropout or 0
    check_dropout(name, self.dropout)
    self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
    self.batch_first = options.batch_first == true
    local bias = options.bias ~= false
    -- As PyTorch: in_proj_weight xavier-uniform, biases zero, out_proj a Linear.
    self:register_parameter("in_proj_weight", nn.init.xavier_uniform_(tensor.empty(3 * embed_dim, embed_dim)))
    if bias then self:register_parameter("in_proj_bias", tensor.zeros(3 * embed_dim)) end
    self:add_module("out_proj", nn.Linear(embed_dim, embed_dim, {bias = bias}))
    if bias then nn.init.zeros_(self.out_proj.bias) end
  end

  -- A mask as an additive float tensor or a bool "true = masked" one,
  -- applied to scores [N, H, L, S]; `shape` is what it is viewed as.
  local function apply_mask(scores, mask, shape)
    mask = mask:reshape(shape)
    if mask:dtype() == "bool" then return tensor.where(mask, -math.huge, scores) end
    return scores + mask
  end

  -- forward(query, key, value[, options]): query [L, N, E], key and value
  -- [S, N, E] ([N, L, E] ... with batch_first; key and value default to
  -- query). options: attn_mask ([L, S] or [N*heads, L, S]), key_padding_mask
  -- ([N, S]), bool (true: not attended) or float (added to the scores);
  -- need_weights (true), average_attn_weights (true). Returns the output
  -- [L, N, E] and the attention weights [N, L, S] (per head [N, heads, L, S]
  -- without averaging; nil without need_weights).
  function MultiheadAttention:forward(query, key, value, options)
    local name = "MultiheadAttention"
    key, value = key or query, value or key or query
    local embed = self.embed_dim
    for _, pair in ipairs({{"query", query}, {"key", key}, {"value", value}}) do
      local what, t = pair[1], pair[2]
      if not tensor.is_tensor(t) or t:dim() ~= 3 or t:size(3) ~= embed then
        error(string.format("%s: expected %s [%s, %d], got %s", name, what,
          self.batch_first and "N, len" or "len, N", embed, shape_text(t)), 2)
      end
    end
    options = options_check("nn.MultiheadAttention:forward", options,
      {attn_mask = true, key_padding_mask = true, need_weights = true, average_attn_weights = true}, 2)
    -- Batch-first inputs keep the batch in dim 1 throughout (no transposes
    -- of the inputs and the output), so an export with a dynamic batch can
    -- follow it (stdlib/onnx_export.lua).
    local first = self.batch_first
    local length_dim, batch_dim = first and 2 or 1, first and 1 or 2
    local len, batch, source = query:size(length_dim), query:size(batch_dim), key:size(length_dim)
    if key:size(batch_dim) ~= batch or value:size(batch_dim) ~= batch or value:size(length_dim) ~= source then
      error(string.format("%s: query %s, key %s and value %s do not agree in batch or length", name,
        shape_text(query), shape_text(key), shape_text(value)), 2)
    end
    local heads, head_dim = self.num_heads, self.head_dim
    local function project(x, part, length)
      local y = x:matmul(self.in_proj_weight:narrow(1, (part - 1) * embed + 1, embed):t())
      if self.in_proj_bias then y = y + self.in_proj_bias:narrow(1, (part - 1) * embed + 1, embed) end
      if first then return y:reshape(batch, length, heads, head_dim):permute(1, 3, 2, 4) end
      return y:reshape(length, batch, heads, head_dim):permute(2, 3, 1, 4)  -- [N, H, len, hd]
    end
    local q = project(query, 1, len) * (1 / math.sqrt(head_dim))
    local k, v = project(key, 2, source), project(value, 3, source)
    local scores = q:matmul(k:transpose(3, 4))  -- [N, H, L, S]
    local attn_mask, padding = options.attn_mask, options.key_padding_mask
    if attn_mask ~= nil then
      local n = tensor.is_tensor(attn_mask) and attn_mask:numel() or -1
      if n == len * source and attn_mask:dim() == 2 then
        scores = apply_mask(scores, attn_mask, {1, 1, len, source})
      elseif n == batch * heads * len * source and attn_mask:dim() == 3 then
        scores = apply_mask(scores, attn_mask, {batch, heads, len, source})
      else
        error(string.format("%s: attn_mask must be [%d, %d] or [%d, %d, %d], got %s", name, len, source,
          batch * heads, len, source, shape_text(attn_mask)), 2)
      end
    end
    if padding ~= nil then
      if not tensor.is_tensor(padding) or padding:dim() ~= 2 or padding:size(1) ~= batch or
          padding:size(2) ~= source then
        error(string.format("%s: key_padding_mask must be [%d, %d], got %s", name, batch, source,
          shape_text(padding)), 2)
      end
      scores = apply_mask(scores, padding, {batch, 1, 1, source})
    end
    local weights = scores:softmax(4)
    local attended = weights
    if self.training and self.dropout > 0 then
      local keep = tensor.rand(weights:size(), {dtype = weights:dtype()}):ge(self.dropout)
      attended = weights * keep:to(weights:dtype()) * (1 / (1 - self.dropout))
    end
    local out = attended:matmul(v)  -- [N, H, L, hd]
    if first then
      out = out:permute(1, 3, 2, 4):reshape(batch, len, embed)
    else
      out = out:permute(3, 1, 2, 4):reshape(len, batch, embed)
    end
    out = self.out_proj(out)
    if options.need_weights == false then return out, nil end
    if options.average_attn_weights ~= false then weights = weights:mean(2) end
    return out, weights
  end

  function MultiheadAttention:extra_repr()
    return string.format("%d, num_heads=%d%s", self.embed_dim, self.num_heads,
      self.batch_first and ", batch_first=true" or "")
  end

  local TransformerEncoderLayer = nn.class("TransformerEncoderLayer")
  nn.TransformerEncoderLayer = TransformerEncoderLayer

  local activations = {relu = function(x) return x:relu() end, gelu = function(x) return x:gelu() end}

  function TransformerEncoderLayer:init(d_model, nhead, options)
    local name = "TransformerEncoderLayer"
    options = options_check("nn." .. name, options, {dim_feedforward = true, dropout = true, activation = true,
      batch_first = true, norm_first = true, layer_norm_eps = true}, 3)
    local feedforward, p = options.dim_feedforward or 2048, options.dropout or 0.1
    if math.type(feedforward) ~= "integer" or feedforward < 1 then
      error(name .. ": dim_feedforward must be a positive integer, got " .. tostring(feedforward), 3)
    end
    check_dropout(name, p)
    local activation = options.activation or "relu"
    if type(activation) == "string" then
      if not activations[activation] then
        error(name .. ": activation must be 'relu', 'gelu' or a function, got '" .. activation .. "'", 3)
      end
      self.activation_name, activation = activation, activations[activation]
    elseif type(activation) ~= "function" then
      error(name .. ": activation must be 'relu', 'gelu' or a function, got a " .. type(activation), 3)
    end
    self.activation = activation
    self.norm_first = options.norm_first == true
    self.batch_first = options.batch_first == true
    local eps = options.layer_norm_eps or 1e-5
    -- PyTorch's submodule names, so state_dict keys match.
    self:add_module("self_attn", nn.MultiheadAttention(d_model, nhead, {dropout = p, batch_first = self.batch_first}))
    self:add_module("linear1", nn.Linear(d_model, feedforward))
    self:add_module("dropout", nn.Dropout(p))
    self:add_module("linear2", nn.Linear(feedforward, d_model))
    self:add_module("norm1", nn.LayerNorm(d_model, {eps = eps}))
    self:add_module("norm2", nn.LayerNorm(d_model, {eps = eps}))
    self:add_module("dropout1", nn.Dropout(p))
    self:add_module("dropout2", nn.Dropout(p))
  end

  -- forward(src[, options]): src [S, N, E] ([N, S, E] with batch_first);
  -- options: src_mask ([S, S] or [N*nhead, S, S]), src_key_padding_mask
  -- ([N, S]), as MultiheadAttention's attn_mask and key_padding_mask.
  function TransformerEncoderLayer:forward(src, options)
    options = options_check("nn.TransformerEncoderLayer:forward", options,
      {src_mask = true, src_key_padding_mask = true}, 2)
    local function attend(x)
      local out = self.self_attn(x, x, x, {attn_mask = options.src_mask,
        key_padding_mask = options.src_key_padding_mask, need_weights = false})
      return self.dropout1(out)
    end
    local function feed_forward(x)
      return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))
    end
    local x = src
    if self.norm_first then
      x = x + attend(self.norm1(x))
      x = x + feed_forward(self.norm2(x))
    else
      x = self.norm1(x + attend(x))
      x = self.norm2(x + feed_forward(x))
    end
    return x
  end

  function TransformerEncoderLayer:extra_repr()
    return string.format("activation=%s, norm_first=%s", self.activation_name or "function",
      tostring(self.norm_first))
  end
end
