-- run_lazylua.lua - one model of the suite through lazylua, in a process of its own.
--
--   lazylua run_lazylua.lua infer WORK NAME OPSET BATCH [BUDGET_SECONDS]
--   lazylua run_lazylua.lua train WORK resnet18 OPSET 8 [BUDGET_SECONDS]
--
-- infer: onnx.load(WORK/NAME_opOPSET.onnx), then calls under tensor.no_grad (as PyTorch
-- runs) on WORK/NAME_xBATCH.npy: the
-- first, then more until BUDGET seconds (default 15) or 200 calls have passed, at least 3
-- calls in all. Prints one line "RESULT {json}": the match against PyTorch's output
-- (max |y - y_torch| / max |y_torch|, first call), the steady time per call (median of
-- the last 5 calls, never the first, which records and may compile), the peak RSS
-- (VmHWM), the load time, the first call's time, and from tensor.metrics() the call at
-- which every graph of a call first ran native code (run.sh starts this process on an
-- empty LAZYLUA_CACHE_DIR) with the seconds from onnx.load to the end of that call.
-- train: steps of SGD (lr 0.01) on a cross-entropy loss through the imported model's
-- parameters (docs/onnx.md), on NAME_x8.npy and the targets NAME_t8.npy: the first
-- step's loss (run.sh compares it with PyTorch's) and the steady time per step.
-- An error anywhere is reported in the line ("error") and the exit status is 0, so that
-- run.sh's table shows it in the model's row.
local onnx = require "onnx"
local now = require("progress").now

local mode, work, name, opset, batch, budget = arg[1], arg[2], arg[3], arg[4], arg[5], arg[6]
if not (mode == "infer" or mode == "train") or not batch then
  io.stderr:write("usage: lazylua run_lazylua.lua infer|train WORK NAME OPSET BATCH [BUDGET]\n")
  os.exit(2)
end
budget = tonumber(budget or 15)
local MAX_CALLS, MIN_CALLS, STEADY_CALLS = 200, 3, 5

local function json(fields)
  local keys = {}
  for key in pairs(fields) do keys[#keys + 1] = key end
  table.sort(keys)
  local parts = {}
  for _, key in ipairs(keys) do
    local value = fields[key]
    local text
    if type(value) == "number" then
      text = (value ~= value or value == math.huge or value == -math.huge) and "null"
        or string.format("%.9g", value)
    else
      text = '"' .. tostring(value):gsub('[%c"\\]', function(c)
        return string.format("\\u%04x", c:byte())
      end) .. '"'
    end
    parts[#parts + 1] = string.format('"%s": %s', key, text)
  end
  return "{" .. table.concat(parts, ", ") .. "}"
end

local function peak_rss_mb()
  local f = io.open("/proc/self/status")
  if not f then return nil end
  local status = f:read("a")
  f:close()
  local kb = status:match("VmHWM:%s*(%d+)")
  return kb and tonumber(kb) / 1024
end

local function median_of_last(times, n)
  local last = {}
  for i = math.max(math.min(2, #times), #times - n + 1), #times do last[#last + 1] = times[i] end
  table.sort(last)
  local middle = (#last + 1) / 2
  return (last[math.floor(middle)] + last[math.ceil(middle)]) / 2
end

local function file(suffix) return string.format("%s/%s%s", work, name, suffix) end

local result = {mode = mode, model = name, opset = tonumber(opset), batch = tonumber(batch)}

-- Calls `step` (returning the tensors to sync) within the budget; fills in the times
-- and when the calls first ran native code only.
local function timed_calls(step, started)
  local times = {}
  local budget_start
  while #times < MAX_CALLS and (#times < MIN_CALLS or now() - budget_start < budget) do
    local before = tensor.metrics()
    local t0 = now()
    tensor.sync(step(#times + 1))
    local t1 = now()
    times[#times + 1] = t1 - t0
    budget_start = budget_start or t1
    local after = tensor.metrics()
    if not result.native_call and after.native_runs > before.native_runs
        and after.interpreted_runs == before.interpreted_runs then
      result.native_call = #times
      result.native_seconds = t1 - started
    end
  end
  result.calls = #times
  result.first_seconds = times[1]
  result.steady_seconds = median_of_last(times, STEADY_CALLS)
end

local function infer()
  local started = now()
  local model = onnx.load(file("_op" .. opset .. ".onnx"))
  result.load_seconds = now() - started
  local x = tensor.load_npy(file("_x" .. batch .. ".npy"))
  local expected = tensor.load_npy(file("_y" .. batch .. ".npy"))
  local first
  timed_calls(function(call)
    -- no gradient to record, as PyTorch's run (torch.no_grad) and ONNX Runtime
    local y = tensor.no_grad(function() return model(x) end)
    if call == 1 then first = y end
    return y
  end, started)
  if first:size() ~= expected:size() then
    error("output shape " .. table.concat(first:size(), "x") .. ", PyTorch's "
      .. table.concat(expected:size(), "x"))
  end
  result.max_abs_diff = (first - expected):abs():max():item()
  result.output_scale = expected:abs():max():item()
  result.match = result.max_abs_diff / result.output_scale
  -- Against PyTorch's float64 run of the same model (export.py --f64), when there is one.
  local exact_path = file("_f64_y" .. batch .. ".npy")
  local exact_file = io.open(exact_path, "rb")
  if exact_file then
    exact_file:close()
    local exact = tensor.load_npy(exact_path)
    result.match_f64 = (first:double() - exact):abs():max():item() / exact:abs():max():item()
  end
end

local function train()
  local nn, optim = require "nn", require "optim"
  local started = now()
  local model = onnx.load(file("_op" .. opset .. ".onnx"))
  result.load_seconds = now() - started
  local x = tensor.load_npy(file("_x" .. batch .. ".npy"))
  -- PyTorch's class indices are 0-based, lazylua's 1-based (docs/training.md).
  local targets = tensor.load_npy(file("_t" .. batch .. ".npy")) + 1
  local criterion = nn.CrossEntropyLoss()
  local opt = optim.SGD(model:parameters(), {lr = 0.01})
  local first_loss
  timed_calls(function(call)
    opt:zero_grad()
    local loss = criterion(model(x), targets)
    loss:backward()
    opt:step()
    if call == 1 then first_loss = loss end
    return loss
  end, started)
  result.first_loss = first_loss:item()
end

local ok, message = pcall(mode == "infer" and infer or train)
if not ok then result.error = tostring(message) end
result.peak_rss_mb = peak_rss_mb()
io.write("RESULT ", json(result), "\n")
