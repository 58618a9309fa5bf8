-- bench_training.lua - training steps per second of an MLP (784-256-256-10,
-- ReLU, cross-entropy, Adam, batch 128), measured side by side in one run:
-- lazylua lazy mode (compiled), lazylua eager mode, and PyTorch's CPU eager
-- mode with the same thread count when python3-torch is installed.
--
--   LAZYLUA_COMPILE=sync build/lazylua bench/bench_training.lua [steps]
local nn, optim = require "nn", require "optim"

local steps = math.tointeger(tonumber(arg and arg[1] or "")) or 300
local batch = 128
local now = require("progress").now

local function run(eager, count)
  tensor.set_eager(eager)
  tensor.manual_seed(1)
  local model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
    nn.Linear(256, 10))
  local opt = optim.Adam(model:parameters(), {lr = 1e-3})
  local criterion = nn.CrossEntropyLoss()
  -- A fixed pool of batches, so data loading is not what is measured.
  local xs, ys = {}, {}
  for i = 1, 8 do
    xs[i] = tensor.randn(batch, 784)
    ys[i] = tensor.randint(1, 11, batch)
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
  local last
  local start = now()
  for i = 1, count do last = step(i) end
  last:item()
  local seconds = now() - start
  tensor.set_eager(false)
  return count / seconds
end

local threads = tonumber(os.getenv("LAZYLUA_THREADS") or "") or nil
local lazy = run(false, steps)
local eager = run(true, math.max(steps // 3, 30))
local m = tensor.metrics()
print(string.format("MLP 784-256-256-10, batch %d, Adam: %d steps", batch, steps))
print(string.format("  lazylua lazy   %8.1f steps/s  (%d compiles, %d native runs, %d interpreted)",
  lazy, m.compiles, m.native_runs, m.interpreted_runs))
print(string.format("  lazylua eager  %8.1f steps/s   lazy / eager = %.2fx (target >= 2)", eager,
  lazy / eager))

local torch_script = [[
import os, sys, time
import torch
threads = int(sys.argv[1]); steps = int(sys.argv[2])
torch.set_num_threads(threads)
torch.manual_seed(1)
model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                            torch.nn.ReLU(), torch.nn.Linear(256, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
crit = torch.nn.CrossEntropyLoss()
xs = [torch.randn(128, 784) for _ in range(8)]
ys = [torch.randint(0, 10, (128,)) for _ in range(8)]
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
local path = os.tmpname()
local file = assert(io.open(path, "w"))
file:write(torch_script)
file:close()
local nthreads = threads or tonumber(io.popen("nproc"):read("*l")) or 1
local python = io.open("/usr/bin/python3") and "/usr/bin/python3" or "python3"
local pipe = io.popen(string.format("OMP_WAIT_POLICY=passive %s %s %d %d 2>/dev/null", python, path,
  nthreads, steps))
local torch_rate = tonumber(pipe:read("*a"):match("[%d%.]+") or "")
pipe:close()
os.remove(path)
if torch_rate then
  print(string.format("  PyTorch eager  %8.1f steps/s   lazy / PyTorch = %.2fx (target >= 1.4), %d threads",
    torch_rate, lazy / torch_rate, nthreads))
else
  print("  PyTorch: python3-torch is not installed; no comparison")
end
