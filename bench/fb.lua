local nn, optim = require "nn", require "optim"
local which = arg[1] or "mlp"
tensor.manual_seed(1)
local model, x, y
if which == "mlp" then
  model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
  x = tensor.randn(128, 784)
  y = tensor.randint(1, 11, 128)
else
  model = nn.Sequential(
      nn.Conv2d(1, 16, 3, {padding = 1}), nn.ReLU(), nn.MaxPool2d(2),
      nn.Conv2d(16, 32, 3, {padding = 1}), nn.ReLU(), nn.MaxPool2d(2),
      nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
  x = tensor.randn(64, 1, 28, 28)
  y = tensor.randint(1, 11, 64)
end
local opt = optim.Adam(model:parameters(), {lr = 1e-3})
local crit = nn.CrossEntropyLoss()
for i = 1, 5 do opt:zero_grad(); local l = crit(model(x), y); l:backward(); opt:step() end
local m0 = tensor.metrics()
local f0 = m0.fallbacks
for i = 1, 10 do opt:zero_grad(); local l = crit(model(x), y); l:backward(); opt:step() end
local m = tensor.metrics()
print(which, "fallbacks/step", (m.fallbacks - f0) / 10, "kernels", m.kernels)
for k, v in pairs(m.fallbacks_by_op) do print("", k, v) end
