-- bench_conv.lua - forward (and forward + backward) time of single
-- convolution layers, lazylua against PyTorch's CPU eager mode, side by side
-- in one run with the same thread count and OMP_WAIT_POLICY=passive:
--   MobileNetV2 depthwise 3x3 [1, 144, 56, 56], groups 144, padding 1;
--   1x1 [1, 144, 56, 56] -> 24 channels;
--   dilated 3x3, rate 12 (DeepLabV3's ASPP) [1, 256, 32, 32] -> 256;
--   ResNet 3x3 [1, 64, 56, 56] -> 64, padding 1.
-- lazylua runs in eager mode, which calls the same kernels as compiled plans.
--
--   LAZYLUA_THREADS=2 OMP_WAIT_POLICY=passive build/lazylua bench/bench_conv.lua [reps]
--
-- With `models` first, it times instead every distinct conv layer of ResNet-18
-- and MobileNetV2 (224x224 input) at batch 1 and 8, forward and forward +
-- backward, against the rate BLAS reaches alone: one matrix product of the
-- layer's shape ([O, C*k*k] x [C*k*k, N*OH*OW], and for the backward the two
-- products of the gradients), and for depthwise layers against the time to
-- copy the layer's input and output once (memory bandwidth):
--
--   LAZYLUA_THREADS=2 build/lazylua bench/bench_conv.lua models [reps] [resnet18|mobilenet_v2]
local models_mode = arg and arg[1] == "models"
local reps = math.tointeger(tonumber(arg and arg[models_mode and 2 or 1] or "")) or 50
local now = require("progress").now

local layers = {
  {name = "depthwise 3x3 [1,144,56,56]", x = {1, 144, 56, 56}, w = {144, 1, 3, 3},
    opts = {groups = 144, padding = 1}, torch = "groups=144, padding=1"},
  {name = "1x1 [1,144,56,56] -> 24", x = {1, 144, 56, 56}, w = {24, 144, 1, 1}, opts = {},
    torch = ""},
  {name = "dilated 3x3 rate 12 [1,256,32,32]", x = {1, 256, 32, 32}, w = {256, 256, 3, 3},
    opts = {padding = 12, dilation = 12}, torch = "padding=12, dilation=12"},
  {name = "resnet 3x3 [1,64,56,56]", x = {1, 64, 56, 56}, w = {64, 64, 3, 3},
    opts = {padding = 1}, torch = "padding=1"},
}

-- The best mean time per call over a few rounds of `count` calls, seconds.
local function best_time(count, f)
  for _ = 1, 3 do f() end
  local best = math.huge
  for _ = 1, 3 do
    local start = now()
    for _ = 1, count do f() end
    best = math.min(best, (now() - start) / count)
  end
  return best
end

local function lazylua_times(layer)
  tensor.set_eager(true)
  tensor.manual_seed(1)
  local x = tensor.randn(table.unpack(layer.x))
  local w = tensor.randn(table.unpack(layer.w))
  local forward = best_time(reps, function() return tensor.conv2d(x, w, layer.opts) end)
  local xg, wg = x:clone():requires_grad(true), w:clone():requires_grad(true)
  local g = tensor.conv2d(x, w, layer.opts):clone():fill_(1)
  local both = best_time(math.max(1, reps // 3), function()
    local y = tensor.conv2d(xg, wg, layer.opts)
    y:backward(g)
  end)
  return forward, both
end

local torch_script = [[
import sys, time, torch, torch.nn.functional as F
threads, reps = int(sys.argv[1]), int(sys.argv[2])
torch.set_num_threads(threads)
torch.manual_seed(1)
x = torch.randn(%s); w = torch.randn(%s)
def best(count, f):
    for _ in range(3): f()
    b = 1e9
    for _ in range(3):
        s = time.perf_counter()
        for _ in range(count): f()
        b = min(b, (time.perf_counter() - s) / count)
    return b
with torch.no_grad():
    forward = best(reps, lambda: F.conv2d(x, w, None, %s))
xg = x.clone().requires_grad_(); wg = w.clone().requires_grad_()
g = torch.ones_like(F.conv2d(x, w, None, %s))
def step():
    xg.grad = None; wg.grad = None
    F.conv2d(xg, wg, None, %s).backward(g)
both = best(max(1, reps // 3), step)
print(forward, both)
]]

local function torch_times(layer, threads)
  local python = io.open("/usr/bin/python3") and "/usr/bin/python3" or "python3"
  local path = os.tmpname()
  local file = assert(io.open(path, "w"))
  local shape = function(s) return table.concat(s, ", ") end
  local opts = layer.torch == "" and "" or layer.torch
  file:write(string.format(torch_script, shape(layer.x), shape(layer.w), opts, opts, opts))
  file:close()
  local pipe = io.popen(string.format("OMP_WAIT_POLICY=passive %s %s %d %d 2>/dev/null", python,
    path, threads, reps))
  local forward, both = pipe:read("*a"):match("([%d%.e%-]+)%s+([%d%.e%-]+)")
  pipe:close()
  os.remove(path)
  return tonumber(forward), tonumber(both)
end

-- ---- models mode ----

-- The conv layers of ResNet-18 at 224x224: {C, H, O, k, stride, padding}.
local function resnet18_layers()
  local layers = {{3, 224, 64, 7, 2, 3}}
  local c, h = 64, 56
  for stage, width in ipairs({64, 128, 256, 512}) do
    for block = 1, 2 do
      local stride = (stage > 1 and block == 1) and 2 or 1
      layers[#layers + 1] = {c, h, width, 3, stride, 1}
      if stride == 2 or c ~= width then layers[#layers + 1] = {c, h, width, 1, stride, 0} end
      h = h // stride
      layers[#layers + 1] = {width, h, width, 3, 1, 1}
      c = width
    end
  end
  return layers
end

-- MobileNetV2's: inverted residual blocks (expansion t, channels, repeats,
-- stride), a depthwise layer has groups = its channels ({..., groups}).
local function mobilenet_v2_layers()
  local layers = {{3, 224, 32, 3, 2, 1}}
  local c, h = 32, 112
  for _, b in ipairs({{1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 4, 2}, {6, 96, 3, 1},
    {6, 160, 3, 2}, {6, 320, 1, 1}}) do
    local t, out, repeats, first_stride = table.unpack(b)
    for r = 1, repeats do
      local stride = r == 1 and first_stride or 1
      local hidden = c * t
      if t ~= 1 then layers[#layers + 1] = {c, h, hidden, 1, 1, 0} end
      layers[#layers + 1] = {hidden, h, hidden, 3, stride, 1, hidden}
      h = (h + 2 - 3) // stride + 1
      layers[#layers + 1] = {hidden, h, out, 1, 1, 0}
      c = out
    end
  end
  layers[#layers + 1] = {c, h, 1280, 1, 1, 0}
  return layers
end

-- Distinct layers in order, with how many times each occurs.
local function distinct(layers)
  local out, seen = {}, {}
  for _, l in ipairs(layers) do
    local key = table.concat(l, ",")
    if seen[key] then seen[key].count = seen[key].count + 1
    else
      seen[key] = {shape = l, count = 1}
      out[#out + 1] = seen[key]
    end
  end
  return out
end

local function time_layer(shape, batch, backward_too)
  local c, h, o, k, stride, padding, groups = table.unpack(shape)
  groups = groups or 1
  tensor.set_eager(true)
  tensor.manual_seed(1)
  local x = tensor.randn(batch, c, h, h)
  local w = tensor.randn(o, c // groups, k, k)
  local opts = {stride = stride, padding = padding, groups = groups}
  local y0 = tensor.conv2d(x, w, opts)
  local oh = y0:size(3)
  local rows, columns = (c // groups) * k * k, batch * oh * oh
  local count = math.max(1, math.floor(reps * 2e7 / math.max(1, o * rows * columns)))
  local r = {forward = best_time(count, function() return tensor.conv2d(x, w, opts) end),
    flops = 2 * o * rows * columns}
  if groups == 1 then
    local a, b = tensor.randn(o, rows), tensor.randn(rows, columns)
    r.gemm = best_time(count, function() return tensor.matmul(a, b) end)
  else  -- a copy of x and of y: the bytes a direct kernel must move at least
    local y = y0:clone()
    r.gemm = best_time(count, function() return x:clone(), y:clone() end)
  end
  if backward_too then
    local xg, wg = x:clone():requires_grad(true), w:clone():requires_grad(true)
    local g = y0:clone():fill_(1)
    r.both = best_time(math.max(1, count // 3), function()
      tensor.conv2d(xg, wg, opts):backward(g)
      xg:set_grad(nil)
      wg:set_grad(nil)
    end)
    if groups == 1 then
      local wt, gy, cols = tensor.randn(rows, o), tensor.randn(o, columns), tensor.randn(columns, rows)
      r.gemm_both = r.gemm + best_time(count, function()
        return tensor.matmul(wt, gy), tensor.matmul(gy, cols)
      end)
    end
  end
  return r
end

local function run_models()
  local config = tensor.config and tensor.config() or {}
  print(string.format("%d threads, BLAS core %s; best of 3 rounds; GF/s = 2*O*K*N / time",
    config.threads or 1, tostring(config.blas_core)))
  local which = arg[3]
  local totals = {}
  for _, model in ipairs({{"resnet18", resnet18_layers}, {"mobilenet_v2", mobilenet_v2_layers}}) do
    if which == nil or which == model[1] then
      for _, batch in ipairs({1, 8}) do
        print(string.format("\n%s batch %d: layer [C,H]->O kxk/s (groups) x count | conv ms, "
          .. "GF/s | gemm ms, GF/s (depthwise: copy x,y ms) | conv/gemm | fwd+bwd ms, "
          .. "3 gemms ms, ratio", model[1], batch))
        local conv_sum, gemm_sum, both_sum, gemm_both_sum = 0, 0, 0, 0
        for _, layer in ipairs(distinct(model[2]())) do
          local s = layer.shape
          local r = time_layer(s, batch, true)
          local n = layer.count
          conv_sum, gemm_sum = conv_sum + n * r.forward, gemm_sum + n * r.gemm
          both_sum = both_sum + n * r.both
          gemm_both_sum = gemm_both_sum + n * (r.gemm_both or r.both)
          print(string.format("  [%4d,%3d]->%4d %dx%d/%d%s x%d | %8.3f %6.1f | %8.3f %6.1f | %5.2f"
            .. " | %8.3f %8s %5s", s[1], s[2], s[3], s[4], s[4], s[5], s[7] and " dw" or "   ", n,
            r.forward * 1e3, r.flops / r.forward * 1e-9, r.gemm * 1e3,
            s[7] and 0 or r.flops / r.gemm * 1e-9, r.forward / r.gemm, r.both * 1e3,
            r.gemm_both and string.format("%8.3f", r.gemm_both * 1e3) or "-",
            r.gemm_both and string.format("%5.2f", r.both / r.gemm_both) or "-"))
        end
        print(string.format("  total: conv %.2f ms, gemm/copy %.2f ms (%.2fx); fwd+bwd %.2f ms, "
          .. "gemms %.2f ms (%.2fx)", conv_sum * 1e3, gemm_sum * 1e3, conv_sum / gemm_sum,
          both_sum * 1e3, gemm_both_sum * 1e3, both_sum / gemm_both_sum))
        totals[#totals + 1] = string.format("%s b%d fwd %.2fx", model[1], batch, conv_sum / gemm_sum)
      end
    end
  end
  print("\n" .. table.concat(totals, "; "))
end

if models_mode then
  run_models()
  return
end

local config = tensor.config and tensor.config() or {}
local threads = config.threads or tonumber(os.getenv("LAZYLUA_THREADS") or "") or 1
print(string.format("%d threads, BLAS core %s, %d calls per round, best of 3 rounds (ms per call)",
  threads, tostring(config.blas_core), reps))
print(string.format("%-36s %10s %10s %7s   %10s %10s %7s", "layer", "lazylua", "PyTorch",
  "ratio", "fwd+bwd", "PyTorch", "ratio"))
for _, layer in ipairs(layers) do
  local forward, both = lazylua_times(layer)
  local torch_forward, torch_both = torch_times(layer, threads)
  local function ms(s) return s and string.format("%10.3f", s * 1e3) or "         -" end
  local function ratio(a, b) return b and string.format("%6.2fx", b / a) or "      -" end
  print(string.format("%-36s %s %s %s   %s %s %s", layer.name, ms(forward), ms(torch_forward),
    ratio(forward, torch_forward), ms(both), ms(torch_both), ratio(both, torch_both)))
end
print("ratio: PyTorch's time / lazylua's (above 1: lazylua is faster)")
