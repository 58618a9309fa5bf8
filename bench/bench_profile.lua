-- bench_profile.lua - what profiling costs: steps per second of the MLP
-- training step (784-256-256-10, batch 128, Adam) with the profiler off and
-- on (tensor.profile around a round of steps), rounds interleaved in one run
-- so that the machine's noise hits both alike. Prints the median of each
-- and the ratio; the target is a profiled step at most 10% slower.
--
--   LAZYLUA_COMPILE=sync build/lazylua bench/bench_profile.lua [steps] [rounds]
local nn, optim = require "nn", require "optim"
local now = require("progress").now

local steps = math.tointeger(tonumber(arg and arg[1] or "")) or 200
local rounds = math.tointeger(tonumber(arg and arg[2] or "")) or 7

tensor.manual_seed(1)
local model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
  nn.Linear(256, 10))
local opt = optim.Adam(model:parameters(), {lr = 1e-3})
local criterion = nn.CrossEntropyLoss()
local x = tensor.randn(128, 784)
local y = (tensor.rand(128) * 10):floor():long() + 1
tensor.mark_step()

local function train(n)
  for _ = 1, n do
    local loss = criterion(model(x), y)
    opt:zero_grad()
    loss:backward()
    opt:step()
  end
end

local function timed(profiled)
  local start = now()
  if profiled then
    tensor.profile(function() train(steps) end)
  else
    train(steps)
  end
  return steps / (now() - start)
end

local function median(list)
  table.sort(list)
  return list[(#list + 1) // 2]
end

train(20) -- compile and warm up
local off, on = {}, {}
for round = 1, rounds do
  -- Alternate which goes first, so that neither always follows the other.
  if round % 2 == 1 then
    off[#off + 1] = timed(false)
    on[#on + 1] = timed(true)
  else
    on[#on + 1] = timed(true)
    off[#off + 1] = timed(false)
  end
end
local off_rate, on_rate = median(off), median(on)
print(string.format("MLP step, %d steps x %d rounds: profiler off %.0f steps/s, on %.0f steps/s",
  steps, rounds, off_rate, on_rate))
print(string.format("profiled steps are %.1f%% slower (target <= 10%%)",
  (off_rate / on_rate - 1) * 100))
