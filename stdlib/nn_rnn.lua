-- nn_rnn.lua - LSTM and GRU for nn.lua, with PyTorch's gate equations,
-- parameter names and shapes. The input projection of a whole sequence is
-- one matmul; the recurrence is a tensor.scan over time, so the graph (and
-- the compiled code) holds one step whatever the sequence length.
local tensor = require "tensor"
local options_check = require("lazylua.options").check

return function(nn)
  local function shape_text(t) return "[" .. table.concat(t:size(), ", ") .. "]" end

  -- kind: "LSTM" (gates i, f, g, o; state h and c) or "GRU" (r, z, n; h).
  local function recurrent(kind, gate_count)
    local class = nn.class(kind)
    nn[kind] = class
    local allowed = {num_layers = true, batch_first = true, bias = true, dropout = true}

    function class:init(input_size, hidden_size, options)
      for _, pair in ipairs({{"input_size", input_size}, {"hidden_size", hidden_size}}) do
        local what, value = pair[1], pair[2]
        if math.type(value) ~= "integer" or value < 1 then
          error(string.format("%s: %s must be a positive integer, got %s", kind, what, tostring(value)), 3)
        end
      end
      options = options_check("nn." .. kind, options, allowed, 3)
      local layers = options.num_layers or 1
      if math.type(layers) ~= "integer" or layers < 1 then
        error(string.format("%s: num_layers must be a positive integer, got %s", kind, tostring(layers)), 3)
      end
      self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, layers
      self.dropout = options.dropout or 0
      if type(self.dropout) ~= "number" or self.dropout < 0 or self.dropout >= 1 then
        error(string.format("%s: dropout must be a number in [0, 1), got %s", kind, tostring(self.dropout)), 3)
      end
      self.batch_first = options.batch_first == true
      self.bias = options.bias ~= false
      -- As PyTorch: every weight and bias uniform in +-1/sqrt(hidden_size).
      local bound = 1 / math.sqrt(hidden_size)
      local rows = gate_count * hidden_size
      local function uniform(...) return nn.init.uniform_(tensor.empty(...), -bound, bound) end
      for k = 0, layers - 1 do
        local inputs = k == 0 and input_size or hidden_size
        self:register_parameter("weight_ih_l" .. k, uniform(rows, inputs))
        self:register_parameter("weight_hh_l" .. k, uniform(rows, hidden_size))
        if self.bias then
          self:register_parameter("bias_ih_l" .. k, uniform(rows))
          self:register_parameter("bias_hh_l" .. k, uniform(rows))
        end
      end
    end

    -- One layer over xs [T, N, in] from state {h = [N, H] (, c = [N, H])}:
    -- ys [T, N, H] and the final state.
    local function run_layer(self, k, xs, state)
      local hidden = self.hidden_size
      local w_hh = self["weight_hh_l" .. k]:t()
      local b_ih, b_hh = self["bias_ih_l" .. k], self["bias_hh_l" .. k]
      local projected = xs:matmul(self["weight_ih_l" .. k]:t())  -- [T, N, G*H]
      if b_ih then projected = projected + b_ih end
      local function gate(t, i) return t:narrow(2, (i - 1) * hidden + 1, hidden) end
      local step
      if kind == "LSTM" then
        if b_hh then projected = projected + b_hh end  -- both biases simply add
        step = function(carry, x)
          local gates = x + carry.h:matmul(w_hh)
          local i, f = gate(gates, 1):sigmoid(), gate(gates, 2):sigmoid()
          local g, o = gate(gates, 3):tanh(), gate(gates, 4):sigmoid()
          local c = f * carry.c + i * g
          local h = o * c:tanh()
          return {h = h, c = c}, h
        end
      else
        step = function(carry, x)
          local hh = carry.h:matmul(w_hh)
          if b_hh then hh = hh + b_hh end  -- b_hn stays inside r * (...)
          local r = (gate(x, 1) + gate(hh, 1)):sigmoid()
          local z = (gate(x, 2) + gate(hh, 2)):sigmoid()
          local n = (gate(x, 3) + r * gate(hh, 3)):tanh()
          local h = n + z * (carry.h - n)  -- (1 - z) * n + z * h
          return {h = h}, h
        end
      end
      return tensor.scan(step, state, projected)
    end

    -- x [T, N, in] ([N, T, in] with batch_first, or [T, in] unbatched);
    -- h0 (and c0 for LSTM) [num_layers, N, H] ([num_layers, H] unbatched),
    -- zeros when absent. Returns output [T, N, H], h_n (and c_n).
    function class:forward(x, h0, c0)
      local rank = tensor.is_tensor(x) and x:dim() or 0
      if (rank ~= 2 and rank ~= 3) or x:size(rank) ~= self.input_size then
        error(string.format("%s: expected input [T, N, %d]%s or [T, %d], got %s", kind, self.input_size,
          self.batch_first and " (batch_first: [N, T, " .. self.input_size .. "])" or "",
          self.input_size, tensor.is_tensor(x) and shape_text(x) or type(x)), 2)
      end
      local unbatched = rank == 2
      if unbatched then
        x = x:unsqueeze(2)
      elseif self.batch_first then
        x = x:transpose(1, 2)
      end
      local batch, layers, hidden = x:size(2), self.num_layers, self.hidden_size
      local function initial(t, what)
        if t == nil then return tensor.zeros({layers, batch, hidden}, {dtype = x:dtype()}) end
        local want = unbatched and {layers, hidden} or {layers, batch, hidden}
        if not tensor.is_tensor(t) or table.concat(t:size(), ",") ~= table.concat(want, ",") then
          error(string.format("%s: expected %s [%s], got %s", kind, what, table.concat(want, ", "),
            tensor.is_tensor(t) and shape_text(t) or type(t)), 3)
        end
        return unbatched and t:unsqueeze(2) or t
      end
      h0 = initial(h0, "h0")
      if kind == "LSTM" then c0 = initial(c0, "c0") end
      local hs, cs = {}, {}
      for k = 1, layers do
        local state = {h = h0[k]}
        if kind == "LSTM" then state.c = c0[k] end
        local final, ys = run_layer(self, k - 1, x, state)
        hs[k], cs[k] = final.h, final.c
        x = ys
        if k < layers and self.training and self.dropout > 0 then
          -- As PyTorch: dropout on the outputs of every layer but the last.
          local keep = tensor.rand(x:size(), {dtype = x:dtype()}):ge(self.dropout)
          x = x * keep:to(x:dtype()) * (1 / (1 - self.dropout))
        end
      end
      local h_n, c_n = tensor.stack(hs, 1), kind == "LSTM" and tensor.stack(cs, 1) or nil
      if unbatched then
        x, h_n = x:squeeze(2), h_n:squeeze(2)
        if c_n then c_n = c_n:squeeze(2) end
      elseif self.batch_first then
        x = x:transpose(1, 2)
      end
      if kind == "LSTM" then return x, h_n, c_n end
      return x, h_n
    end

    function class:extra_repr()
      local text = string.format("%d, %d", self.input_size, self.hidden_size)
      if self.num_layers > 1 then text = text .. ", num_layers=" .. self.num_layers end
      if self.batch_first then text = text .. ", batch_first=true" end
      if self.dropout > 0 then text = text .. ", dropout=" .. self.dropout end
      if not self.bias then text = text .. ", bias=false" end
      return text
    end
  end

  recurrent("LSTM", 4)
  recurrent("GRU", 3)
end
