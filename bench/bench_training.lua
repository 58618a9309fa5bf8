-- bench_training.lua - training steps per second of the two Fashion-MNIST
-- models, measured side by side in one run:
--   MLP 784-256-256-10 (ReLU), batch 128, cross-entropy, Adam;
--   CNN of scripts/fashion_cnn.lua, batch 64, cross-entropy, Adam;
-- in lazylua's lazy mode (compiled), lazylua's eager mode, and PyTorch's CPU
-- eager mode (when python3-torch is installed) with the same thread count,
-- the same OpenBLAS core and OMP_WAIT_POLICY=passive.
--
-- It also prints, per steady-state step, the eager fallbacks inside compiled
-- plans and the minor page faults, and for the MLP the machine's ceiling: the
-- time of the step's matrix products alone, each timed here on its own.
--
--   LAZYLUA_COMPILE=sync build/lazylua bench/bench_training.lua [steps]
local nn, optim = require "nn", require "optim"

local steps = math.tointeger(tonumber(arg and arg[1] or "")) or 300
local now = require("progress").now

-- Minor page faults of this process so far (/proc/self/stat, field 10).
local function page_faults()
  local file = io.open("/proc/self/stat")
  if not file then return 0 end
  local stat = file:read("*a")
  file:close()
  -- Fields after the parenthesised command name, which may hold spaces.
  local fields = {}
  for field in stat:match("%) (.*)$"):gmatch("%S+") do fields[#fields + 1] = field end
  return tonumber(fields[8]) or 0  -- field 10 overall: minflt
end

local models = {
  mlp = {
    title = "MLP 784-256-256-10, batch 128, Adam",
    batch = 128,
    input = {784},
    build = function()
      return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
        nn.Linear(256, 10))
    end,
  },
  cnn = {
    title = "CNN of fashion_cnn.lua, batch 64, Adam",
    batch = 64,
    input = {1, 28, 28},
    build = function()
      return nn.Sequential(
        nn.Conv2d(1, 16, 3, {padding = 1}), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, {padding = 1}), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
    end,
  },
}

-- Steps per second of one model in one mode, with the fallbacks and page
-- faults per steady-state step.
local function run(spec, eager, count)
  tensor.set_eager(eager)
  tensor.manual_seed(1)
  local model = spec.build()
  local opt = optim.Adam(model:parameters(), {lr = 1e-3})
  local criterion = nn.CrossEntropyLoss()
  -- A fixed pool of batches, so data loading is not what is measured.
  local xs, ys = {}, {}
  for i = 1, 8 do
    xs[i] = tensor.randn(spec.batch, table.unpack(spec.input))
    ys[i] = tensor.randint(1, 11, spec.batch)
  end
  tensor.mark_step()
  local function step(i)
    local k = i % 8 + 1
    opt:zero_grad()
    local loss = criterion(model(xs[k]), ys[k])
    loss:backward()
    opt:step()
    return loss
  end
  for i = 1, 20 do step(i) end  -- warm up: first-step graphs, compiles
  collectgarbage()
  local before = tensor.metrics()
  local faults = page_faults()
  local last
  local start = now()
  for i = 1, count do last = step(i) end
  last:item()
  local seconds = now() - start
  faults = page_faults() - faults
  local after = tensor.metrics()
  tensor.set_eager(false)
  return {
    rate = count / seconds,
    fallbacks = (after.fallbacks - before.fallbacks) / count,
    faults = faults / count,
    kernels = after.kernels,
  }
end

-- The MLP step's matrix products ([m, k] @ [k, n], with the operand layouts
-- of the step: weights are [out, in]), forward and backward. The first
-- layer's input gradient is not needed.
local mlp_products = {
  {128, 784, 256, "nt"}, {128, 256, 256, "nt"}, {128, 256, 10, "nt"},  -- y = x W^T
  {256, 128, 784, "tn"}, {256, 128, 256, "tn"}, {10, 128, 256, "tn"},  -- dW = dy^T x
  {128, 256, 256, "nn"}, {128, 10, 256, "nn"},                         -- dx = dy W
}

-- Seconds for all the products once, each at its best of several runs.
local function products_seconds(products)
  tensor.set_eager(true)
  local total, flops = 0, 0
  for _, p in ipairs(products) do
    local m, k, n, layout = table.unpack(p)
    local a = layout:sub(1, 1) == "t" and tensor.randn(k, m):t() or tensor.randn(m, k)
    local b = layout:sub(2, 2) == "t" and tensor.randn(n, k):t() or tensor.randn(k, n)
    local best = math.huge
    for _ = 1, 7 do
      local reps = 20
      local start = now()
      for _ = 1, reps do a:matmul(b) end
      best = math.min(best, (now() - start) / reps)
    end
    total = total + best
    flops = flops + 2 * m * k * n
  end
  tensor.set_eager(false)
  return total, flops
end

local torch_script = [[
import os, sys, time
import torch
threads = int(sys.argv[1]); steps = int(sys.argv[2]); which = sys.argv[3]
torch.set_num_threads(threads)
torch.manual_seed(1)
nn = torch.nn
if which == "mlp":
    batch, shape = 128, (784,)
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                          nn.Linear(256, 10))
else:
    batch, shape = 64, (1, 28, 28)
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
crit = nn.CrossEntropyLoss()
xs = [torch.randn(batch, *shape) for _ in range(8)]
ys = [torch.randint(0, 10, (batch,)) for _ in range(8)]
def step(i):
    opt.zero_grad()
    loss = crit(model(xs[i % 8]), ys[i % 8])
    loss.backward()
    opt.step()
    return loss
for i in range(20): step(i)
start = time.perf_counter()
for i in range(steps): loss = step(i)
loss.item()
print(steps / (time.perf_counter() - start))
]]

local function torch_rate(which, count, threads, core)
  local python = io.open("/usr/bin/python3") and "/usr/bin/python3" or "python3"
  local path = os.tmpname()
  local file = assert(io.open(path, "w"))
  file:write(torch_script)
  file:close()
  local core_setting = core and ("OPENBLAS_CORETYPE=" .. core .. " ") or ""
  local pipe = io.popen(string.format("%sOMP_WAIT_POLICY=passive %s %s %d %d %s 2>/dev/null",
    core_setting, python, path, threads, count, which))
  local rate = tonumber(pipe:read("*a"):match("[%d%.]+") or "")
  pipe:close()
  os.remove(path)
  return rate
end

local config = tensor.config and tensor.config() or {}
local threads = config.threads or tonumber(os.getenv("LAZYLUA_THREADS") or "") or
  tonumber(io.popen("nproc"):read("*l")) or 1
print(string.format("lazylua: BLAS %s core %s, %d threads, generated code for %s, " ..
  "convolutions on %s", tostring(config.blas), tostring(config.blas_core), threads,
  tostring(config.vector_isa), tostring(config.conv)))

for _, which in ipairs({"mlp", "cnn"}) do
  local spec = models[which]
  local count = which == "mlp" and steps or math.max(steps // 5, 30)
  local lazy = run(spec, false, count)
  local eager = run(spec, true, math.max(count // 3, 20))
  print(string.format("%s: %d steps", spec.title, count))
  print(string.format("  lazylua lazy   %8.1f steps/s  fallbacks/step %.2f, page faults/step %.1f, " ..
    "%d kernels", lazy.rate, lazy.fallbacks, lazy.faults, lazy.kernels))
  print(string.format("  lazylua eager  %8.1f steps/s  lazy / eager = %.2fx", eager.rate,
    lazy.rate / eager.rate))
  if which == "mlp" then
    local seconds, flops = products_seconds(mlp_products)
    print(string.format("  ceiling        %8.1f steps/s  (%.0f MFLOP of products at %.1f GFLOP/s, " ..
      "timed alone): lazy / ceiling = %.0f%% (target >= 85%%)", 1 / seconds, flops / 1e6,
      flops / seconds / 1e9, 100 * lazy.rate * seconds))
  end
  local torch = torch_rate(which, count, threads, config.blas_core)
  if torch then
    print(string.format("  PyTorch eager  %8.1f steps/s  lazy / PyTorch = %.2fx (target >= 1.5), " ..
      "%d threads, OMP_WAIT_POLICY=passive", torch, lazy.rate / torch, threads))
  else
    print("  PyTorch: python3-torch is not installed; no comparison")
  end
end
