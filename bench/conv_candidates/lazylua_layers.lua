-- lazylua_layers.lua - lazylua's own convolution kernels on the layers of
-- layers.txt, timed as conv_bench times the libraries: the median of many
-- steady calls, each timed alone. Run in eager mode so a call is the kernel
-- alone (eager mode, the reference walker and compiled plans call the same
-- kernels):
--
--   LAZYLUA_EAGER=1 LAZYLUA_THREADS=2 lazylua lazylua_layers.lua LAYERS BATCH BUDGET_MS
--
-- Prints one TSV row per layer: model, index, milliseconds (the median, or
-- the minimum with CONV_BENCH_STAT=min, as conv_bench).
local path, batch, budget = arg[1], math.tointeger(tonumber(arg[2])), tonumber(arg[3])
assert(path and batch and budget, "usage: lazylua_layers.lua LAYERS BATCH BUDGET_MS")
local now = require("progress").now
-- The median of the calls, or their minimum with CONV_BENCH_STAT=min (as conv_bench).
local minimum = os.getenv("CONV_BENCH_STAT") == "min"

local function median_ms(call)
  call()
  call()
  local times, total = {}, 0
  while (#times < 7 or total < budget) and #times < 400 do
    collectgarbage()  -- outside the timed call: the last output goes back to the allocator
    local start = now()
    call()
    local took = (now() - start) * 1e3
    times[#times + 1] = took
    total = total + took
  end
  table.sort(times)
  return minimum and times[1] or times[#times // 2 + 1]
end

tensor.manual_seed(1)
local done = {}  -- identical layers are measured once
print("model\tindex\tlazylua")
for line in io.lines(path) do
  if not line:match("^#") and line:match("%S") then
    local fields = {}
    for field in line:gmatch("%S+") do fields[#fields + 1] = field end
    local model, index = fields[1], fields[2]
    local c, h, w, o, kh, kw, stride, pad, dilation, groups = table.unpack(fields, 3, 12)
    local key = table.concat(fields, " ", 3)
    if not done[key] then
      local x = tensor.rand(batch, tonumber(c), tonumber(h), tonumber(w)) * 2 - 1
      local weight = tensor.rand(tonumber(o), tonumber(c) // tonumber(groups), tonumber(kh),
        tonumber(kw)) * 2 - 1
      local bias = tensor.rand(tonumber(o)) * 2 - 1
      local opts = {stride = tonumber(stride), padding = tonumber(pad),
        dilation = tonumber(dilation), groups = tonumber(groups)}
      local y
      done[key] = median_ms(function()
        y = nil
        y = tensor.conv2d(x, weight, bias, opts)
      end)
    end
    print(string.format("%s\t%s\t%.5f", model, index, done[key]))
  end
end
