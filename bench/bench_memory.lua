-- bench_memory.lua - peak resident memory of one workload, for
-- bench_memory.sh (which runs it in each mode and next to PyTorch):
--   lazylua bench_memory.lua vit FILE.onnx BATCH CALLS
--   lazylua bench_memory.lua transformer STEPS
-- Prints "load_mb X" (peak while loading or building the model) and
-- "run_mb Y" (peak while it runs: the kernel's high-water mark is reset
-- in between through /proc/self/clear_refs), then "checksum Z".
local nn = require "nn"
local optim = require "optim"

local function kib_field(key)
  for line in io.lines("/proc/self/status") do
    local value = line:match("^" .. key .. ":%s+(%d+)")
    if value then return tonumber(value) end
  end
  error("no " .. key .. " in /proc/self/status")
end
local function peak_mb() return kib_field("VmHWM") / 1024 end
local function reset_peak()
  local file = assert(io.open("/proc/self/clear_refs", "w"))
  file:write("5")
  file:close()
end

local what = arg[1]
local checksum
if what == "vit" then
  local onnx = require "onnx"
  local path, batch, calls = arg[2], tonumber(arg[3]), tonumber(arg[4])
  local model = onnx.load(path)
  tensor.manual_seed(0)
  local x = tensor.randn(batch, 3, 224, 224)
  tensor.sync(x)
  collectgarbage()
  print(string.format("load_mb %.0f", peak_mb()))
  reset_peak()
  for _ = 1, calls do
    -- The class token's features before the (zero-initialized) head.
    local y = tensor.no_grad(function() return model(x) end)
    checksum = y:abs():sum():item()
  end
elseif what == "transformer" then
  -- A training step of a 4-layer transformer encoder (d 256, 8 heads,
  -- feed-forward 1024) on [16, 128] token sequences; the same model as
  -- bench_memory_torch.py's.
  local steps = tonumber(arg[2])
  tensor.manual_seed(0)
  local layers = {}
  local params = {}
  for i = 1, 4 do
    layers[i] = nn.TransformerEncoderLayer(256, 8, {dim_feedforward = 1024, dropout = 0,
                                                    batch_first = true})
    for _, p in ipairs(layers[i]:parameters()) do params[#params + 1] = p end
  end
  local head = nn.Linear(256, 1000)
  for _, p in ipairs(head:parameters()) do params[#params + 1] = p end
  local opt = optim.Adam(params, {lr = 1e-4})
  local loss_fn = nn.CrossEntropyLoss()
  local x = tensor.randn(16, 128, 256)
  local target = tensor.randint(1, 1001, {16 * 128})
  tensor.sync(x, target)
  collectgarbage()
  print(string.format("load_mb %.0f", peak_mb()))
  reset_peak()
  for _ = 1, steps do
    opt:zero_grad()
    local h = x
    for i = 1, 4 do h = layers[i](h) end
    local loss = loss_fn(head(h):reshape(16 * 128, 1000), target)
    loss:backward()
    opt:step()
    checksum = loss:item()
  end
else
  error("bench_memory.lua: unknown workload " .. tostring(what) .. " (vit or transformer)")
end
print(string.format("run_mb %.0f", peak_mb()))
print(string.format("checksum %.6g", checksum))
