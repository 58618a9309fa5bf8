-- test_nn_conv_family.lua - nn.Conv1d/2d/3d and nn.ConvTranspose1d/2d/3d
-- (stdlib/nn_conv.lua), and the ONNX Conv and ConvTranspose import
-- (stdlib/onnx_ops_nn.lua): one tensor op each. Expected values come from
-- two independent sources: PyTorch 1.13 (torch.nn layers in float64 on the
-- closed-form weights and inputs `seq` builds, generated once with
-- /usr/bin/python3 and pasted below as TORCH.*), and a direct nested-loop
-- reference written here (no conv op, no padding op: out-of-range taps are
-- skipped or mapped by the padding mode's rule).
local h = dofile("helpers.lua")
local gh = dofile("grad_helpers.lua")(h)
local nn = require "nn"
local onnx = require "onnx"
local EAGER = tensor.is_eager()

-- ((i * 7) % m - m // 2) / d for i = 0 .. n-1, as the PyTorch script.
local function seq(shape, m, d, dtype)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  local list = {}
  for i = 0, n - 1 do list[i + 1] = ((i * 7) % m - m // 2) / d end
  return tensor.new(list, {dtype = dtype or "f64"}):reshape(table.unpack(shape))
end

-- ---------------------------------------------------------------------------
-- The reference. Flat lists, shapes padded in front to 3 spatial dims.
local R = {}

-- Where padding position p (0-based, maybe outside 0 .. n-1) reads from:
-- nil for zeros, else the padding mode's source index.
local function source_index(p, n, mode)
  if p >= 0 and p < n then return p end
  if mode == nil or mode == "zeros" then return nil end
  if mode == "reflect" then return p < 0 and -p or 2 * (n - 1) - p end
  if mode == "replicate" then return p < 0 and 0 or n - 1 end
  return p % n   -- circular
end

local function flat_of(t)
  local size = t:size()
  return t:double():reshape(-1):tolist(), size
end

-- The spatial shape of `size` (from dim 3) padded in front to 3 dims of 1.
local function spatial3(size)
  local out = {1, 1, 1}
  local n = #size - 2
  for i = 1, n do out[3 - n + i] = size[i + 2] end
  return out
end

local function per3(value, n, fill)
  local out = {fill, fill, fill}
  for i = 1, n do
    local v = type(value) == "table" and value[i] or value
    out[3 - n + i] = v
  end
  return out
end

-- opts: stride, dilation (lists or integers), pads (list of {before, after}),
-- groups, mode (the padding mode, zeros by default); returns a tensor of
-- x's dtype. Each output sums x * w over the taps of its window.
function R.conv(x, w, b, opts)
  local n = x:dim() - 2
  local X, xs = flat_of(x)
  local W, ws = flat_of(w)
  local B = b and flat_of(b)
  local N, C, O = xs[1], xs[2], ws[1]
  local groups = opts.groups or 1
  local Cg, Og = C // groups, O // groups
  local I, K = spatial3(xs), spatial3(ws)
  local S, D = per3(opts.stride or 1, n, 1), per3(opts.dilation or 1, n, 1)
  local P = {{0, 0}, {0, 0}, {0, 0}}
  for i = 1, n do P[3 - n + i] = opts.pads and opts.pads[i] or {0, 0} end
  local OUT = {}
  for i = 1, 3 do OUT[i] = (I[i] + P[i][1] + P[i][2] - D[i] * (K[i] - 1) - 1) // S[i] + 1 end
  local Y = {}
  for nn_ = 0, N - 1 do
    for o = 0, O - 1 do
      local g = o // Og
      for a = 0, OUT[1] - 1 do for bb = 0, OUT[2] - 1 do for cc = 0, OUT[3] - 1 do
        local s = B and B[o + 1] or 0
        for c = 0, Cg - 1 do
          local ci = g * Cg + c
          for ka = 0, K[1] - 1 do
            local pa = source_index(a * S[1] - P[1][1] + ka * D[1], I[1], opts.mode)
            if pa then
              for kb = 0, K[2] - 1 do
                local pb = source_index(bb * S[2] - P[2][1] + kb * D[2], I[2], opts.mode)
                if pb then
                  for kc = 0, K[3] - 1 do
                    local pc = source_index(cc * S[3] - P[3][1] + kc * D[3], I[3], opts.mode)
                    if pc then
                      local xv = X[(((nn_ * C + ci) * I[1] + pa) * I[2] + pb) * I[3] + pc + 1]
                      local wv = W[(((o * Cg + c) * K[1] + ka) * K[2] + kb) * K[3] + kc + 1]
                      s = s + xv * wv
                    end
                  end
                end
              end
            end
          end
        end
        Y[#Y + 1] = s
      end end end
    end
  end
  local shape = {N, O}
  for i = 1, n do shape[i + 2] = OUT[3 - n + i] end
  return tensor.new(Y, {dtype = x:dtype()}):reshape(table.unpack(shape))
end

-- The transpose, as a scatter: x [N, C, ...], w [C, O/groups, k...]; opts
-- as conv plus output_padding. Each input element adds x * w into the
-- output at i*stride - pad_before + k*dilation (a negative pad, as ONNX's
-- output_shape can ask for, leaves zeros: the bias only).
function R.conv_transpose(x, w, b, opts)
  local n = x:dim() - 2
  local X, xs = flat_of(x)
  local W, ws = flat_of(w)
  local B = b and flat_of(b)
  local N, C = xs[1], xs[2]
  local groups = opts.groups or 1
  local Og = ws[2]
  local O, Cg = Og * groups, C // groups
  local I, K = spatial3(xs), spatial3(ws)
  local S, D = per3(opts.stride or 1, n, 1), per3(opts.dilation or 1, n, 1)
  local OP = per3(opts.output_padding or 0, n, 0)
  local P = {{0, 0}, {0, 0}, {0, 0}}
  for i = 1, n do P[3 - n + i] = opts.pads and opts.pads[i] or {0, 0} end
  local OUT = {}
  for i = 1, 3 do OUT[i] = (I[i] - 1) * S[i] - P[i][1] - P[i][2] + D[i] * (K[i] - 1) + OP[i] + 1 end
  local total = N * O * OUT[1] * OUT[2] * OUT[3]
  local Y = {}
  for i = 1, total do Y[i] = 0 end
  for nn_ = 0, N - 1 do
    for c = 0, C - 1 do
      local g = c // Cg
      for a = 0, I[1] - 1 do for bb = 0, I[2] - 1 do for cc = 0, I[3] - 1 do
        local xv = X[(((nn_ * C + c) * I[1] + a) * I[2] + bb) * I[3] + cc + 1]
        for ol = 0, Og - 1 do
          local o = g * Og + ol
          for ka = 0, K[1] - 1 do
            local pa = a * S[1] - P[1][1] + ka * D[1]
            if pa >= 0 and pa < OUT[1] then
              for kb = 0, K[2] - 1 do
                local pb = bb * S[2] - P[2][1] + kb * D[2]
                if pb >= 0 and pb < OUT[2] then
                  for kc = 0, K[3] - 1 do
                    local pc = cc * S[3] - P[3][1] + kc * D[3]
                    if pc >= 0 and pc < OUT[3] then
                      local at = (((nn_ * O + o) * OUT[1] + pa) * OUT[2] + pb) * OUT[3] + pc + 1
                      Y[at] = Y[at] + xv * W[(((c * Og + ol) * K[1] + ka) * K[2] + kb) * K[3] + kc + 1]
                    end
                  end
                end
              end
            end
          end
        end
      end end end
    end
  end
  if B then
    local per = OUT[1] * OUT[2] * OUT[3]
    for i = 0, total - 1 do
      local o = (i // per) % O
      Y[i + 1] = Y[i + 1] + B[o + 1]
    end
  end
  local shape = {N, O}
  for i = 1, n do shape[i + 2] = OUT[3 - n + i] end
  return tensor.new(Y, {dtype = x:dtype()}):reshape(table.unpack(shape))
end


-- ---------------------------------------------------------------------------
-- PyTorch 1.13's outputs (float64) for the layers of `torch_cases`, weight =
-- seq(shape, 13, 3), bias = seq(shape, 5, 2), input = seq(shape, 11, 4).
local TORCH = {}
TORCH.A = {{{{0.333333333333, -3.58333333333, -5.41666666667, -6.08333333333}, {5.41666666667, -0.333333333333,
  -8.58333333333, 0.833333333333}, {-4.16666666667, -3.5, 1.08333333333, 1.33333333333}, {5.41666666667,
  6.08333333333, -8.58333333333, -5.58333333333}, {2.16666666667, -1.75, -0.833333333333, -6.08333333333}}, {{0.25,
  -1.33333333333, 2.66666666667, 5.5}, {-7.16666666667, 2.25, 5.33333333333, 1.75}, {1.91666666667, -1.5, -3, 0.75},
  {-6.5, -3.5, 6, 7}, {-3.91666666667, -5.5, 1.25, 5}}, {{0.166666666667, -3.41666666667, -2.25, -0.25}, {6.25,
  2.66666666667, -3.5, -0.583333333333}, {0.416666666667, 0.5, 8.08333333333, -0.916666666667}, {7.58333333333,
  8.58333333333, -2.16666666667, -7.5}, {1.91666666667, -1.66666666667, 2.25, -1.25}}, {{1.08333333333,
  2.16666666667, -1.83333333333, -5.08333333333}, {1.08333333333, -0.583333333333, -1.83333333333, 1.33333333333},
  {-5.33333333333, -0.583333333333, 3.66666666667, 3.16666666667}, {-5.16666666667, -4.08333333333, 2.91666666667,
  6.08333333333}, {-3.16666666667, -2.08333333333, 4.91666666667, 1.66666666667}}, {{2.16666666667, -1.08333333333,
  -2.41666666667, 4.08333333333}, {1.25, -0.166666666667, 7.66666666667, -4.16666666667}, {4, 3.5, -0.583333333333,
  -4.16666666667}, {2.33333333333, -1.83333333333, 2.33333333333, -4}, {1.58333333333, -1.66666666667,
  -3.91666666667, 2.58333333333}}, {{-4.66666666667, 1.83333333333, -0.0833333333333, -1.16666666667},
  {-4.33333333333, -3.33333333333, -1.58333333333, 1.91666666667}, {-2.16666666667, -5.75, 2.41666666667, 2.25},
  {-3.5, 1.16666666667, -0.75, 1.83333333333}, {-4.83333333333, 1.66666666667, -1.16666666667, -2.25}}}}
TORCH.B = {{{0.916666666667, -4.91666666667, 0.916666666667, -0.333333333333, -1.58333333333, -1.66666666667, -2},
  {0.666666666667, 1.25, 0.0833333333333, -2.08333333333, 0.333333333333, 0.583333333333, -0.666666666667}, {0,
  0.333333333333, 2.83333333333, 1.33333333333, -1.08333333333, 1.91666666667, 2.25}, {1.83333333333, -1.5, -3.25,
  -1.08333333333, 0.166666666667, -1.08333333333, -4.41666666667}, {-2.25, 0.333333333333, 2, -1.83333333333, 0.75,
  2.91666666667, -0.916666666667}, {2.5, -3.41666666667, -3.58333333333, 0.583333333333, -0.75, -5,
  -0.833333333333}}, {{-2.41666666667, 0.916666666667, -2.41666666667, 0.916666666667, -0.333333333333, 0.5,
  -1.66666666667}, {1, 0.666666666667, 0.416666666667, 0.0833333333333, -2.08333333333, -0.916666666667,
  0.583333333333}, {4.25, 0, -1.16666666667, 2.83333333333, 1.33333333333, -2.08333333333, 1.91666666667},
  {-4.91666666667, 1.83333333333, 1, -3.25, -1.08333333333, 3.16666666667, -1.08333333333}, {1.58333333333, -2.25,
  0.333333333333, 2, -1.83333333333, 0.333333333333, 2.91666666667}, {-1.66666666667, 2.5, -1.33333333333,
  -3.58333333333, 0.583333333333, 0.916666666667, -5}}}
TORCH.C = {{{{{2.33333333333, 8.16666666667, -5.66666666667, 0.333333333333}, {-4.16666666667, -7.5, -4.83333333333,
  1.16666666667}, {-3, -6.33333333333, -3.66666666667, 2.33333333333}}, {{2.33333333333, 1.75, 0.75,
  0.333333333333}, {-4.16666666667, -7.5, 1.58333333333, 1.16666666667}, {-3, -6.33333333333, 2.75, 2.33333333333}},
  {{-2.33333333333, 0.75, -0.25, -4.33333333333}, {-1.5, 1.58333333333, 0.583333333333, -3.5}, {-0.333333333333,
  2.75, 1.75, -2.33333333333}}, {{0.333333333333, 6.16666666667, -7.66666666667, -1.66666666667}, {1.16666666667, 7,
  -6.83333333333, -0.833333333333}, {2.33333333333, 8.16666666667, -5.66666666667, 0.333333333333}}},
  {{{0.833333333333, 0.833333333333, -0.333333333333, 0.333333333333}, {-0.916666666667, -0.916666666667, -0.25,
  0.416666666667}, {-0.5, -0.5, 0.166666666667, 0.833333333333}}, {{-5, 5.08333333333, -7.08333333333, -5.5},
  {2.41666666667, 2.41666666667, -7, -5.41666666667}, {2.83333333333, 2.83333333333, -6.58333333333, -5}}, {{3,
  -7.08333333333, 4.58333333333, 2.5}, {3.08333333333, -7, 4.66666666667, 2.58333333333}, {3.5, -6.58333333333,
  5.08333333333, 3}}, {{0.333333333333, 0.333333333333, -0.833333333333, -0.166666666667}, {0.416666666667,
  0.416666666667, -0.75, -0.0833333333333}, {0.833333333333, 0.833333333333, -0.333333333333, 0.333333333333}}},
  {{{2.66666666667, 6, 4.66666666667, 0}, {2, 5.33333333333, 4, -0.666666666667}, {1.66666666667, 5, -5.5,
  2.66666666667}}, {{0.666666666667, 4, -0.0833333333333, 3.5}, {1.11022302463e-16, 3.33333333333, -0.75,
  2.83333333333}, {-0.333333333333, 0.25, 0.75, 0.666666666667}}, {{-0.666666666667, -0.0833333333333,
  0.416666666667, 0.333333333333}, {-1.33333333333, -0.75, -0.25, -0.333333333333}, {3.83333333333, 0.75, 4,
  -0.666666666667}}, {{0, -5.83333333333, 5.66666666667, 1}, {-0.666666666667, -6.5, 5, 0.333333333333},
  {2.66666666667, 6, 4.66666666667, 0}}}, {{{-1.75, -3.75, -2.75, 0.25}, {-1, -3, -2, 1}, {-1, -3, 3.5, -1.75}},
  {{-0.416666666667, -2.41666666667, 3.16666666667, -2.08333333333}, {0.333333333333, -1.66666666667, 3.91666666667,
  -1.33333333333}, {0.333333333333, 2.91666666667, -3.41666666667, -0.416666666667}}, {{0.583333333333,
  3.16666666667, -3.16666666667, -0.166666666667}, {1.33333333333, 3.91666666667, -2.41666666667, 0.583333333333},
  {-2.33333333333, -3.41666666667, -2.41666666667, 0.583333333333}}, {{0.25, 3.75, -3.5, -0.5}, {1, 4.5, -2.75,
  0.25}, {-1.75, -3.75, -2.75, 0.25}}}}}
TORCH.D = {{{{-8.25, 6.58333333333, 2.58333333333, -4.25, -1.25}, {-3.75, -3, 8.25, -4.41666666667, 0.833333333333},
  {12.0833333333, -9.08333333333, 5.83333333333, 2.08333333333, -1.08333333333}, {4.66666666667, -3.08333333333,
  -2.91666666667, 3.5, -1.58333333333}, {-2, 3.58333333333, -2.41666666667, 2.16666666667, 0.833333333333}},
  {{-4.66666666667, 1.33333333333, -6.16666666667, 6.16666666667, -0.916666666667}, {-8.58333333333, 14.5,
  -4.08333333333, -3.41666666667, 4.08333333333}, {-0.416666666667, -5.08333333333, 1.08333333333, -7.33333333333,
  4.58333333333}, {7.58333333333, -9.58333333333, 14.5833333333, -1.41666666667, -1.41666666667}, {6.33333333333,
  -4.91666666667, -2.91666666667, -1.25, -3.25}}, {{7.58333333333, -1.75, -5.16666666667, 0.333333333333,
  -3.83333333333}, {-0.416666666667, 2.75, -8.83333333333, 5.16666666667, 0.833333333333}, {-8.58333333333,
  10.8333333333, -2.58333333333, -1.58333333333, 1.58333333333}, {-4.66666666667, 1.25, 1.75, -4.16666666667,
  -1.25}, {2.75, -2.58333333333, 4.16666666667, -2.5, 1.33333333333}}}}
TORCH.E = {{{{1.41666666667, -2.33333333333, -1.91666666667, 1.08333333333, -1.58333333333, -0.25}, {-3.58333333333,
  -2.16666666667, 0.75, -1.75, -3.16666666667, -0.666666666667}, {-2.16666666667, 0.583333333333, -1.83333333333,
  -2.41666666667, 1.25, -3}, {0.25, -3.66666666667, 0.916666666667, 2.25, -4.83333333333, 3.91666666667},
  {-2.08333333333, 0.75, -1.75, -2.25, 1.33333333333, -3}, {0.166666666667, -2.25, -0.5, 0.0833333333333, -3,
  1.33333333333}}, {{2.75, -1.16666666667, -1.08333333333, 3.08333333333, 0.583333333333, 1.91666666667}, {-1.25,
  4.5, -0.416666666667, -2.08333333333, 4.08333333333, -2.08333333333}, {-2.33333333333, 0.583333333333,
  -0.666666666667, -1.58333333333, 1.91666666667, -2.33333333333}, {0.333333333333, 0.333333333333, -0.666666666667,
  -0.75, 0.166666666667, 0.25}, {-1.91666666667, 1.41666666667, -0.25, -0.75, 2.33333333333, -2}, {0.333333333333,
  -1.58333333333, 1, 1.58333333333, -2, 2.33333333333}}, {{-1.33333333333, 2.16666666667, 1.91666666667,
  -1.41666666667, 0.583333333333, -1.33333333333}, {-1.08333333333, 6.83333333333, 0.583333333333, -2.41666666667,
  5.91666666667, -0.25}, {2.91666666667, 0.583333333333, 1.58333333333, 2.5, -0.666666666667, 3.75},
  {-0.666666666667, 1.08333333333, 1, -2.66666666667, 0.833333333333, 0.916666666667}, {2.58333333333,
  -0.0833333333333, 1.25, 1.83333333333, -1, 3.33333333333}, {0.5, -0.916666666667, 2.5, -1.25, -1, 3.33333333333}},
  {{-1.5, -2, 1.83333333333, -1.75, -1.25, 0.5}, {0.916666666667, 2.25, -4.33333333333, 2.75, 1.41666666667,
  -1.66666666667}, {-1.58333333333, -2.16666666667, 1.75, -1.91666666667, -1.33333333333, 0.333333333333}, {0.75,
  -2.66666666667, -2.66666666667, -1.25, 1.25, -2}, {-1.66666666667, 0.416666666667, -1.08333333333, 1.58333333333,
  -1.41666666667, 0.166666666667}, {-0.916666666667, -2.83333333333, 1.41666666667, -0.916666666667,
  0.0833333333333, -1.58333333333}}, {{0, -0.5, 2.83333333333, -1.25, -0.75, 1}, {3.25, -0.5, -3, 5.58333333333,
  1.75, -1.33333333333}, {0.25, -2.22044604925e-16, 3.08333333333, -0.75, -0.5, 1.16666666667}, {3.75,
  4.91666666667, -2.5, 0, 2.25, -1}, {0.5, 1.41666666667, -1.25, 1.58333333333, -0.25, 1.33333333333}, {1.25,
  -1.83333333333, 1.25, -0.916666666667, 1.25, -0.416666666667}}, {{-1, 2.83333333333, -3, -3.25, 0.5, -1}, {-1.25,
  -1.41666666667, -0.916666666667, -1.66666666667, -1.5, -1.33333333333}, {-1.5, 2.91666666667, -3.5,
  -3.16666666667, 0, -0.5}, {-1.16666666667, 2.41666666667, -2.66666666667, 3.08333333333, -1.41666666667,
  -1.41666666667}, {-2, 2.08333333333, 1.5, -3.08333333333, -0.5, 0}, {0.916666666667, -3.33333333333,
  -1.41666666667, -3.41666666667, -0.0833333333333, -1.75}}}}
TORCH.F = {{{-1.5, -3.25, 1.58333333333, -0.583333333333, 1.66666666667, -3.33333333333, -1.5, -3.5, 1.83333333333,
  -0.583333333333, -1}, {1.16666666667, 0.333333333333, -1.16666666667, 0.833333333333, -0.333333333333, 0.25,
  -1.33333333333, 0.833333333333, -0.166666666667, -1.66666666667, 0}, {-0.5, 1.75, 1.5, 1.16666666667,
  -0.166666666667, 1.66666666667, 1, -0.25, 0, 2.66666666667, 1}}, {{-1.5, -3.33333333333, 1.66666666667,
  -0.583333333333, 1.58333333333, -3.25, -1.5, 1.91666666667, 1.91666666667, -1.5, -1}, {0.333333333333, 0.5,
  -0.833333333333, 0, -0.166666666667, 0.583333333333, -2.16666666667, -0.833333333333, 0.166666666667,
  1.16666666667, 0}, {0, 1.08333333333, 1, 1.66666666667, -0.833333333333, 1.16666666667, 1.5, 1.83333333333, -0.5,
  -0.5, 1}}}
TORCH.G = {{{{{2.5, -0.416666666667, -1, 0.166666666667}, {3.08333333333, -1, -3.33333333333, 0.75}, {2, -1.5,
  -1.25, 1.08333333333}, {0.25, -0.333333333333, -0.416666666667, 0.75}, {-0.333333333333, 0.25, 1, -0.75}}, {{1.25,
  -1.66666666667, -0.5, 0.666666666667}, {1.33333333333, -2.75, -1.58333333333, 2.5}, {0.5, -3, -0.25,
  2.08333333333}, {0, -0.583333333333, 0.0833333333333, 1.25}, {-0.0833333333333, 0.5, 0.25, -1.5}}, {{-2,
  0.333333333333, 0, 0}, {0.333333333333, 0.333333333333, -1.5, 0.25}, {0.833333333333, 0.25, 1.25,
  0.0833333333333}, {1.75, -1.16666666667, 1.08333333333, -0.0833333333333}, {0.333333333333, -0.25, 1.66666666667,
  -1.25}}, {{-1, 1.33333333333, 0, 0}, {0.333333333333, 0.333333333333, -0.75, 1}, {0.583333333333, 0, 0.75,
  -0.416666666667}, {0.5, -2.41666666667, 0.583333333333, -0.583333333333}, {0.0833333333333, -0.5, 0.416666666667,
  -2.5}}}, {{{0, -1, 0, 1}, {0.166666666667, -3.33333333333, -0.166666666667, 0.333333333333}, {0.75, -1.25, -0.25,
  -1.75}, {0.583333333333, -0.416666666667, 0.5, -2}, {-0.5, 1, 0.666666666667, -1.33333333333}}, {{0.5, -0.5, -0.5,
  0.5}, {1.91666666667, -1.58333333333, -0.416666666667, 0.0833333333333}, {1.75, -0.25, 0.5, -1}, {1.08333333333,
  0.0833333333333, 1.75, -0.75}, {-1.25, 0.25, 1.66666666667, -0.333333333333}}, {{0, 0, 0, 2}, {0, -1.5,
  -0.333333333333, 2.16666666667}, {0.25, 1.25, -0.75, 0.75}, {0.0833333333333, 1.08333333333, 0, -0.5},
  {-0.833333333333, 1.66666666667, 0.333333333333, -0.666666666667}}, {{0, 0, -1, 1}, {0.75, -0.75, -1.58333333333,
  0.916666666667}, {-0.25, 0.75, -1.5, -5.55111512313e-17}, {-0.416666666667, 0.583333333333, 0.25, -0.25},
  {-2.08333333333, 0.416666666667, 0.833333333333, -0.166666666667}}}}}
TORCH.H = {{{{1.91666666667, -2, -2.08333333333, 0.0833333333333, -2.41666666667, -1.08333333333}, {-2.75,
  -5.08333333333, 0.25, -1.16666666667, -3.16666666667, 4.75}, {-1.83333333333, 0.583333333333, -2.16666666667,
  -1.91666666667, 2.08333333333, -2.16666666667}, {0.75, -6.16666666667, 0.0833333333333, 5.08333333333,
  -3.33333333333, 0}, {-1.91666666667, 0.416666666667, -2.25, -2.08333333333, 2, -2.33333333333}, {0.333333333333,
  -3.66666666667, -1, 3.5, -2.33333333333, -2.33333333333}}, {{3.25, -0.833333333333, -1.25, 2.08333333333, -0.25,
  1.08333333333}, {-2.58333333333, 4.83333333333, 1.25, -2.58333333333, -1.33333333333, -2.08333333333}, {-2,
  0.583333333333, -1, -1.08333333333, 2.75, -1.5}, {-0.25, 1.11022302463e-16, 1.75, -0.0833333333333,
  -2.66666666667, 1.75}, {-1.75, 1.08333333333, -0.75, -0.583333333333, 3, -1.33333333333}, {0.5, -1.91666666667,
  0.5, 1.75, -1.33333333333, 3}}}}

-- Each case: the layer (f64), the input shape, its TORCH output, and the
-- reference's options (pads as pairs; the padding mode) for the same layer.
local torch_cases = {
  {"A", function() return nn.Conv2d(4, 6, {3, 2}, {stride = {1, 2}, padding = {2, 1}, dilation = {2, 1},
    groups = 2, padding_mode = "reflect", dtype = "f64"}) end, {1, 4, 5, 6},
    {stride = {1, 2}, dilation = {2, 1}, groups = 2, pads = {{2, 2}, {1, 1}}, mode = "reflect"}},
  {"B", function() return nn.Conv1d(3, 6, 3, {padding = "same", dilation = 2, groups = 3,
    padding_mode = "circular", dtype = "f64"}) end, {2, 3, 7},
    {dilation = 2, groups = 3, pads = {{2, 2}}, mode = "circular"}},
  {"C", function() return nn.Conv3d(2, 4, 2, {stride = {1, 2, 1}, padding = 1, groups = 2,
    padding_mode = "replicate", dtype = "f64"}) end, {1, 2, 3, 4, 3},
    {stride = {1, 2, 1}, groups = 2, pads = {{1, 1}, {1, 1}, {1, 1}}, mode = "replicate"}},
  -- "same" with an even kernel: the odd extra goes after
  {"D", function() return nn.Conv2d(2, 3, 4, {padding = "same", bias = false, dtype = "f64"}) end, {1, 2, 5, 5},
    {pads = {{1, 2}, {1, 2}}}},
  {"E", function() return nn.ConvTranspose2d(4, 6, 3, {stride = 2, padding = 1, output_padding = 1, groups = 2,
    dtype = "f64"}) end, {1, 4, 3, 3}, {stride = 2, groups = 2, pads = {{1, 1}, {1, 1}}, output_padding = 1},
    transposed = true},
  {"F", function() return nn.ConvTranspose1d(2, 3, 3, {stride = 3, padding = 2, dilation = 2, output_padding = 1,
    dtype = "f64"}) end, {2, 2, 4}, {stride = 3, dilation = 2, pads = {{2, 2}}, output_padding = 1},
    transposed = true},
  {"G", function() return nn.ConvTranspose3d(2, 2, {2, 3, 2}, {stride = {2, 1, 2}, groups = 2, bias = false,
    dtype = "f64"}) end, {1, 2, 2, 3, 2}, {stride = {2, 1, 2}, groups = 2}, transposed = true},
}

-- The layer's weight and bias set to the script's values.
local function set_parameters(layer)
  tensor.no_grad(function()
    layer.weight:copy_(seq(layer.weight:size(), 13, 3.0))
    if layer.bias then layer.bias:copy_(seq(layer.bias:size(), 5, 2.0)) end
  end)
  return layer
end

local TIGHT = {rel = 1e-9, abs = 1e-9}

for _, case in ipairs(torch_cases) do
  local name, make, shape, ref_options = case[1], case[2], case[3], case[4]
  h.test("nn layer " .. name .. " matches PyTorch and the reference", function()
    local layer = set_parameters(make())
    local x = seq(shape, 11, 4.0)
    local y = layer(x)
    h.near(y, TORCH[name], TIGHT)
    local reference = case.transposed and R.conv_transpose or R.conv
    h.near(y, reference(x, layer.weight, layer.bias, ref_options):tolist(), TIGHT)
  end)
end

h.test("ConvTranspose2d: output_size picks the output_padding (PyTorch's forward(x, output_size))", function()
  local layer = set_parameters(nn.ConvTranspose2d(2, 2, 3, {stride = 2, padding = 1, dtype = "f64"}))
  local x = seq({1, 2, 3, 3}, 11, 4.0)
  h.near(layer(x, {6, 6}), TORCH.H, TIGHT)
  h.near(layer(x, {1, 2, 6, 6}), TORCH.H, TIGHT)
  h.shape(layer(x, {5, 6}), {1, 2, 5, 6})
  h.err(function() return layer(x, {7, 6}) end, "ConvTranspose2d: output_size 7 of spatial dim 1 is outside the "
    .. "reachable 5 to 6")
  h.still_works()
end)

-- Every padding mode, f32, with stride, dilation, groups and asymmetric
-- "same" padding, against the reference (which maps the taps itself).
for _, mode in ipairs({"zeros", "reflect", "replicate", "circular"}) do
  h.test("Conv2d padding_mode " .. mode .. " against the reference", function()
    tensor.manual_seed(3)
    local layer = nn.Conv2d(4, 4, {2, 3}, {padding = "same", dilation = {1, 2}, groups = 2, padding_mode = mode})
    local x = tensor.randn(2, 4, 5, 6)
    local want = R.conv(x, layer.weight, layer.bias, {dilation = {1, 2}, groups = 2, pads = {{0, 1}, {2, 2}},
      mode = mode})
    h.near(layer(x), want:tolist(), {rel = 1e-5, abs = 1e-5})
    local strided = nn.Conv1d(2, 3, 3, {stride = 2, padding = 2, padding_mode = mode})
    local x1 = tensor.randn(1, 2, 7)
    h.near(strided(x1), R.conv(x1, strided.weight, strided.bias, {stride = 2, pads = {{2, 2}}, mode = mode}):tolist(),
      {rel = 1e-5, abs = 1e-5})
  end)
end

h.test("unbatched input [C, spatial...] as PyTorch", function()
  tensor.manual_seed(4)
  local conv = nn.Conv1d(2, 3, 2, {dtype = "f64"})
  local x = tensor.randn(2, 5, {dtype = "f64"})
  h.shape(conv(x), {3, 4})
  h.near(conv(x), conv(x:unsqueeze(1)):squeeze(1):tolist(), TIGHT)
  local up = nn.ConvTranspose2d(2, 1, 2, {stride = 2})
  h.shape(up(tensor.randn(2, 3, 3)), {1, 6, 6})
end)

h.test("state_dict names and shapes are PyTorch's; a PyTorch-shaped state loads", function()
  local conv = nn.Conv2d(4, 6, {3, 2}, {groups = 2})
  local state = conv:state_dict()
  h.eq(state.weight:size(), {6, 2, 3, 2})
  h.eq(state.bias:size(), {6})
  local up = nn.ConvTranspose2d(4, 6, 3, {groups = 2, bias = false})
  state = up:state_dict()
  h.eq(state.weight:size(), {4, 3, 3, 3})
  assert(state.bias == nil and #up:parameters() == 1)
  h.eq(nn.Conv3d(2, 4, {1, 2, 3}):state_dict().weight:size(), {4, 2, 1, 2, 3})
  h.eq(nn.ConvTranspose1d(2, 6, 5, {groups = 2}):state_dict().weight:size(), {2, 3, 5})
  -- loading the script's parameters gives PyTorch's output
  local layer = nn.Conv2d(4, 6, {3, 2}, {stride = {1, 2}, padding = {2, 1}, dilation = {2, 1}, groups = 2,
    padding_mode = "reflect", dtype = "f64"})
  layer:load_state_dict({weight = seq({6, 2, 3, 2}, 13, 3.0), bias = seq({6}, 5, 2.0)})
  h.near(layer(seq({1, 4, 5, 6}, 11, 4.0)), TORCH.A, TIGHT)
  h.err(function() layer:load_state_dict({weight = seq({6, 4, 3, 2}, 13, 3.0), bias = seq({6}, 5, 2.0)}) end,
    "weight")
  h.still_works()
end)

-- kaiming_uniform(a = sqrt(5)): uniform in +-1/sqrt(fan_in), fan_in =
-- weight:size(2) * kernel volume, so the groups count (and for a
-- transpose, its out_channels / groups). With thousands of draws the
-- largest is within 5% of the bound: a bound computed without the groups
-- (smaller by sqrt(groups)) fails.
h.test("init: uniform bounds with fan_in counting the groups", function()
  tensor.manual_seed(5)
  local function check(layer, fan_in)
    local bound = 1 / math.sqrt(fan_in)
    local tops = {weight = layer.weight:abs():max():item(), bias = layer.bias:abs():max():item()}
    for name, top in pairs(tops) do
      assert(top <= bound, string.format("%s %s: %g > %g", tostring(layer), name, top, bound))
      assert(top > (name == "weight" and 0.95 or 0.7) * bound,
        string.format("%s %s: %g far below %g", tostring(layer), name, top, bound))
    end
  end
  check(nn.Conv2d(64, 64, 3, {groups = 16}), 4 * 9)
  check(nn.Conv1d(8, 64, 5, {groups = 2}), 4 * 5)
  check(nn.ConvTranspose2d(16, 64, 3, {groups = 4}), 16 * 9)
  check(nn.ConvTranspose3d(32, 8, 2, {groups = 8}), 1 * 8)
  h.eq(nn.Conv2d(2, 2, 1, {dtype = "f64"}).weight:dtype(), "f64")
end)

gh.gradcheck("Conv2d gradient (groups, dilation, reflect, stride)", function(x, w, b)
  local conv = nn.Conv2d(4, 2, 2, {stride = 2, dilation = 2, groups = 2, padding = 1, padding_mode = "reflect",
    dtype = "f64"})
  conv.weight, conv.bias = w, b
  return conv(x)
end, {gh.values({1, 4, 5, 4}, -1, 1), gh.values({2, 2, 2, 2}, -1, 1), gh.values({2}, -1, 1)})
gh.gradcheck("ConvTranspose1d gradient (groups, stride, output_padding)", function(x, w, b)
  local conv = nn.ConvTranspose1d(2, 4, 3, {stride = 2, output_padding = 1, groups = 2, padding = 1,
    dtype = "f64"})
  conv.weight, conv.bias = w, b
  return conv(x)
end, {gh.values({2, 2, 4}, -1, 1), gh.values({2, 2, 3}, -1, 1), gh.values({4}, -1, 1)})

h.test("repr shows the options that differ from the defaults, as PyTorch", function()
  h.eq(tostring(nn.Conv2d(4, 6, 3, {padding = 1, groups = 2, bias = false, padding_mode = "reflect"})),
    "Conv2d(4, 6, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), groups=2, bias=False, padding_mode=reflect)")
  h.eq(tostring(nn.ConvTranspose1d(2, 2, 3, {stride = 2, output_padding = 1})),
    "ConvTranspose1d(2, 2, kernel_size=(3), stride=(2), output_padding=(1))")
  h.eq(tostring(nn.Conv1d(2, 2, 3, {padding = "same"})), "Conv1d(2, 2, kernel_size=(3), stride=(1), padding='same')")
end)

-- Bad options: each a clear error naming the class and the option, at
-- the caller's line; the interpreter stays usable (h.bad checks that).
h.bad(function() nn.Conv2d(2, 2, 3, {strides = 2}) end, "nn.Conv2d: unknown option 'strides'")
h.bad(function() nn.Conv1d(2, 2, 3, {output_padding = 1}) end, "nn.Conv1d: unknown option 'output_padding'")
h.bad(function() nn.Conv2d(4, 6, 3, {groups = 4}) end, "nn.Conv2d: groups 4 must divide in_channels 4 and out_channels 6")
h.bad(function() nn.Conv2d(4, 4, 3, {groups = 0}) end, "nn.Conv2d: groups must be a positive integer, got 0")
h.bad(function() nn.Conv2d(2, 2, 3, {stride = 0}) end, "nn.Conv2d: stride must be an integer >= 1 or a list of 2")
h.bad(function() nn.Conv3d(2, 2, 3, {stride = {1, 2}}) end, "nn.Conv3d: stride must be an integer >= 1 or a list of 3",
  "got {1, 2}")
h.bad(function() nn.Conv2d(2, 2, 3, {dilation = {1, 0}}) end, "nn.Conv2d: dilation must be an integer >= 1")
h.bad(function() nn.Conv2d(2, 2, 3, {padding = -1}) end, "nn.Conv2d: padding must be an integer >= 0")
h.bad(function() nn.Conv2d(2, 2, 3, {padding = "full"}) end, "nn.Conv2d: padding must be an integer, a list, 'same'")
h.bad(function() nn.Conv2d(2, 2, 3, {padding = "same", stride = 2}) end, "nn.Conv2d: padding = 'same' needs stride 1")
h.bad(function() nn.Conv2d(2, 2, 3, {padding_mode = "mirror"}) end, "nn.Conv2d: padding_mode must be 'zeros'")
h.bad(function() nn.Conv2d(2, 2, 3, {bias = 0}) end, "nn.Conv2d: bias must be a boolean")
h.bad(function() nn.Conv2d(2, 2, 3, {dtype = "i32"}) end, "nn.Conv2d: dtype must be 'f32' or 'f64'")
h.bad(function() nn.Conv2d(0, 2, 3) end, "nn.Conv2d: in_channels must be a positive integer, got 0")
h.bad(function() nn.Conv2d(2, 2, 0) end, "nn.Conv2d: kernel_size must be an integer >= 1")
h.bad(function() nn.ConvTranspose2d(2, 2, 3, {padding_mode = "reflect"}) end,
  "nn.ConvTranspose2d: only padding_mode 'zeros' is supported")
h.bad(function() nn.ConvTranspose2d(2, 2, 3, {padding = "same"}) end, "nn.ConvTranspose2d: padding must be an integer")
h.bad(function() nn.ConvTranspose2d(2, 2, 3, {stride = 2, output_padding = 2}) end,
  "nn.ConvTranspose2d: output_padding 2 must be smaller than the stride 2 or the dilation 1")
h.bad(function() nn.Conv2d(3, 2, 3)(tensor.ones(1, 2, 5, 5)) end, "Conv2d: expected input [N, 3, H, W], got [1, 2, 5, 5]")
h.bad(function() nn.Conv3d(1, 2, 3)(tensor.ones(5, 5)) end, "Conv3d: expected input [N, 1, D, H, W], got [5, 5]")
h.bad(function() nn.Conv1d(1, 2, 3, {padding = 3, padding_mode = "reflect"})(tensor.ones(1, 1, 3)) end,
  "Conv1d: padding 3 with padding_mode 'reflect' is too large for an input extent of 3")
h.bad(function() nn.Conv2d(1, 1, 5)(tensor.ones(1, 1, 3, 3)) end, "conv2d")

-- ---------------------------------------------------------------------------
-- ONNX Conv and ConvTranspose: one-node models built from tables, f32
-- weights from seq, checked against the reference with the pads worked out
-- by hand from the attributes.

-- A model of one node 'n1' of `op` on input x, weight w and an optional bias b.
local function one_node(op, attributes, w, b)
  local inputs = {"x", "w"}
  local initializers = {{name = "w", tensor = w}}
  if b then
    inputs[3] = "b"
    initializers[2] = {name = "b", tensor = b}
  end
  return onnx.from_table({ir_version = 8, opset = {[""] = 13}, graph = {name = "g",
    nodes = {{name = "n1", op_type = op, domain = "", inputs = inputs, outputs = {"y"}, attributes = attributes}},
    initializers = initializers, inputs = {{name = "x", elem_type = "f32"}}, outputs = {{name = "y", elem_type = "f32"}}}})
end

local F32_SUMS = {rel = 1e-5, abs = 1e-5}

-- {name, op, x shape, w shape, with bias, attributes, the reference's options}
local onnx_cases = {
  {"grouped, strided, asymmetric pads", "Conv", {1, 4, 5, 5}, {6, 2, 3, 3}, true,
    {group = 2, strides = {2, 1}, pads = {1, 0, 2, 1}}, {groups = 2, stride = {2, 1}, pads = {{1, 2}, {0, 1}}}},
  {"depthwise, multiplier 2", "Conv", {1, 3, 6, 6}, {6, 1, 3, 3}, true, {group = 3, pads = {1, 1, 1, 1}},
    {groups = 3, pads = {{1, 1}, {1, 1}}}},
  {"dilated", "Conv", {1, 2, 7, 7}, {2, 2, 3, 3}, false, {dilations = {2, 3}, pads = {2, 1, 0, 3}},
    {dilation = {2, 3}, pads = {{2, 0}, {1, 3}}}},
  -- out = ceil(5 / 2) = 3; total pad (3-1)*2 + 4 - 5 = 3, the larger half first
  {"auto_pad SAME_LOWER, stride 2", "Conv", {1, 1, 5, 5}, {2, 1, 4, 4}, true,
    {auto_pad = "SAME_LOWER", strides = {2, 2}}, {stride = 2, pads = {{2, 1}, {2, 1}}}},
  {"auto_pad VALID and kernel_shape", "Conv", {1, 2, 5, 4}, {1, 2, 2, 3}, false,
    {auto_pad = "VALID", kernel_shape = {2, 3}}, {}},
  {"1-d grouped, dilated, strided", "Conv", {2, 2, 9}, {4, 1, 3}, true,
    {group = 2, strides = {2}, dilations = {2}, pads = {1, 2}}, {groups = 2, stride = 2, dilation = 2, pads = {{1, 2}}}},
  {"3-d", "Conv", {1, 2, 4, 4, 3}, {2, 2, 2, 3, 2}, true, {strides = {1, 2, 1}, pads = {1, 0, 1, 0, 1, 0}},
    {stride = {1, 2, 1}, pads = {{1, 0}, {0, 1}, {1, 0}}}},
  {"transpose grouped, asymmetric pads, output_padding", "ConvTranspose", {1, 4, 3, 3}, {4, 2, 3, 3}, true,
    {group = 2, strides = {2, 2}, pads = {1, 0, 0, 1}, output_padding = {1, 0}},
    {groups = 2, stride = 2, pads = {{1, 0}, {0, 1}}, output_padding = {1, 0}}},
  -- full = 2*(4-1) + 3 = 9; output_shape 7: total 2, one each side
  {"transpose 1-d output_shape below the full output", "ConvTranspose", {1, 2, 4}, {2, 3, 3}, true,
    {strides = {2}, output_shape = {7}}, {stride = 2, pads = {{1, 1}}}},
  -- output_shape 10: one past the full output, a zero (plus bias) at the end
  {"transpose 1-d output_shape past the full output", "ConvTranspose", {1, 2, 4}, {2, 3, 3}, true,
    {strides = {2}, output_shape = {10}}, {stride = 2, pads = {{0, -1}}}},
  -- full = 2*(3-1) + 3 = 7, SAME wants 3*2 = 6: the extra pad at the end
  {"transpose auto_pad SAME_UPPER", "ConvTranspose", {1, 1, 3, 3}, {1, 2, 3, 3}, false,
    {auto_pad = "SAME_UPPER", strides = {2, 2}}, {stride = 2, pads = {{0, 1}, {0, 1}}}},
  {"transpose 3-d grouped, dilated", "ConvTranspose", {1, 2, 2, 2, 2}, {2, 1, 2, 2, 2}, true,
    {group = 2, strides = {2, 1, 2}, dilations = {1, 2, 1}}, {groups = 2, stride = {2, 1, 2}, dilation = {1, 2, 1}}},
}

for _, case in ipairs(onnx_cases) do
  local name, op, x_shape, w_shape, with_bias, attributes, ref_options = table.unpack(case)
  h.test("ONNX " .. op .. ": " .. name, function()
    local w = seq(w_shape, 13, 3.0, "f32")
    local b = with_bias and seq({op == "Conv" and w_shape[1] or w_shape[2] * (attributes.group or 1)}, 5, 2.0, "f32")
    local x = seq(x_shape, 11, 4.0, "f32")
    local y = one_node(op, attributes, w, b)(x)
    local reference = op == "Conv" and R.conv or R.conv_transpose
    h.near(y, reference(x, w, b, ref_options):tolist(), F32_SUMS)
  end)
end

h.test("ONNX Conv: a depthwise node records one op", function()
  local channels = 32
  local model = one_node("Conv", {group = channels, pads = {1, 1, 1, 1}}, seq({channels, 1, 3, 3}, 13, 3.0, "f32"),
    seq({channels}, 5, 2.0, "f32"))
  local x = seq({1, channels, 8, 8}, 11, 4.0, "f32")
  tensor.mark_step()
  local y = model(x)
  if not EAGER then
    local ops = tensor.pending()
    local names = {}
    for i, pending in ipairs(ops) do names[i] = pending.op end
    -- one op, the convolution with its bias (the per-group import made 32
    -- convolutions and a cat)
    assert(#ops == 1 and names[1]:match("conv"), "recorded: " .. table.concat(names, ", "))
  end
  h.shape(y, {1, channels, 8, 8})
end)

-- Bad attributes: an error naming the node, the process still usable.
local function refused(op, call, ...)
  local needles = table.pack("node 'n1' (" .. op, ...)
  h.test("ONNX " .. op .. " refused: " .. needles[2], function()
    h.err(call, table.unpack(needles, 1, needles.n))
    h.still_works()
  end, 3)
end
local image = tensor.ones(1, 2, 4, 4)
local function conv(attributes, w, b) return one_node("Conv", attributes, w or tensor.ones(2, 2, 3, 3), b)(image) end
local function conv_t(attributes, w, b)
  return one_node("ConvTranspose", attributes, w or tensor.ones(2, 2, 3, 3), b)(image)
end
refused("Conv", function() return conv({strides = {0, 1}}) end, "strides[0] is 0")
refused("Conv", function() return conv({strides = {1, -2}}) end, "strides[1] is -2")
refused("Conv", function() return conv({group = 2}) end, "input has 2 channels, the weight expects 4 (group 2)")
refused("Conv", function() return conv({group = 3}, tensor.ones(3, 1, 3, 3)) end,
  "group 3 does not divide the 2 input and 3 output channels")
refused("Conv", function() return conv({}, tensor.ones(2, 2, 5, 5)) end,
  "the output of spatial dim 0 would have 0 elements (input 4)")
refused("Conv", function() return conv({}, nil, tensor.ones(3)) end, "the bias has shape [3], expected [2]")
refused("ConvTranspose", function() return conv_t({strides = {0, 2}}) end, "strides[0] is 0")
refused("ConvTranspose", function() return conv_t({group = 3}) end, "group 3 does not divide")
refused("ConvTranspose", function() return conv_t({pads = {3, 3, 3, 3}}) end,
  "the output of spatial dim 0 would have 0 elements (input 4)")
refused("ConvTranspose", function() return conv_t({output_shape = {0, 6}}) end, "output_shape[0] is 0")
refused("ConvTranspose", function() return conv_t({strides = {2, 2}, output_padding = {2, 0}}) end,
  "output_padding[0] is 2")
refused("ConvTranspose", function() return conv_t({}, nil, tensor.ones(4)) end, "the bias has shape [4], expected [2]")

h.done("test_nn_conv_family.lua")
