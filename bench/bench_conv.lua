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
local reps = math.tointeger(tonumber(arg and arg[1] or "")) or 50
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
