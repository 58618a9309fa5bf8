-- test_profile.lua - tensor.profile and tensor.profile_report: the trace
-- file holds one span per sync the profiled function made (counted by
-- hand below), "record" spans between them, BLAS spans whose work is the
-- products' (2mnk flops, added up over the calls a product is split into),
-- and valid JSON structure; errors leave the profiler stopped and usable.
local h = dofile("helpers.lua")
local EAGER = tensor.is_eager()
local path = os.tmpname()

local function read(file)
  local f = assert(io.open(file, "rb"))
  local text = f:read("a")
  f:close()
  return text
end

-- The "X" events of a trace as tables {cat =, name =, dur =, flops =}: the
-- file is one event a line (profiler.cpp writes it so).
local function events_of(text)
  local list = {}
  for line in text:gmatch("[^\n]+") do
    if line:find('"ph":"X"', 1, true) then
      list[#list + 1] = {
        cat = line:match('"cat":"([^"]*)"'),
        name = line:match('"name":"([^"]*)"'),
        dur = tonumber(line:match('"dur":([%d.]+)')),
        flops = tonumber(line:match('"flops":(%d+)')),
      }
    end
  end
  return list
end

h.test("a profiled function: its syncs, records and products", function()
  local x = tensor.randn(64, 32)
  local w = tensor.randn(32, 16)
  tensor.mark_step()
  local a, b = tensor.profile(function()
    for step = 1, 3 do
      local y = x:matmul(w):tanh()
      w = w - x:t():matmul(y) * 0.01
      tensor.mark_step()
    end
    return "done", 7
  end, path)
  h.eq(a, "done")
  h.eq(b, 7)
  local text = read(path)
  assert(text:sub(1, 40):find('{"displayTimeUnit":"ms","traceEvents":[', 1, true), text:sub(1, 80))
  assert(text:find("]}\n$"), "the JSON closes")
  local events = events_of(text)
  local count = {}
  local flops = 0
  for _, e in ipairs(events) do
    count[e.cat] = (count[e.cat] or 0) + 1
    assert(e.dur and e.dur >= 0, "every span has a duration")
    if e.cat == "blas" then flops = flops + (e.flops or 0) end
  end
  if EAGER then
    h.eq(count.sync or 0, 0)
  else
    h.eq(count.sync, 3)   -- one mark_step a step
    h.eq(count.record, 2) -- between the syncs (none before the first)
  end
  -- Two products a step: (64x32)(32x16) and (32x64)(64x16), 2*64*32*16
  -- flops each, three steps.
  h.eq(flops, 3 * 2 * (2 * 64 * 32 * 16))
  local report = tensor.profile_report()
  assert(report:find("calls   total ms", 1, true), report)
  assert(report:find("gemm", 1, true), report)
end)

h.test("errors: bad arguments, nesting, an unwritable file, an error inside", function()
  h.err(function() tensor.profile() end, "function expected")
  h.err(function() tensor.profile(function() end, {}) end, "string expected")
  h.err(function()
    tensor.profile(function() tensor.profile(function() end) end)
  end, "a profile is already running")
  h.err(function() tensor.profile(function() end, "/nonexistent-dir/t.json") end,
        "cannot write '/nonexistent-dir/t.json'")
  h.err(function() tensor.profile(function() error("inside") end) end, "inside")
  -- The profiler stopped each time: a new profile runs.
  h.eq(tensor.profile(function() return 1 end), 1)
  h.err(function() tensor.profile_report(0) end, "rows must be >= 1")
  h.still_works()
end)

os.remove(path)
h.done("test_profile")
