-- test_ddp.lua - nn.DistributedDataParallel in one process (size 1): a
-- transparent wrapper (same outputs and gradients as the bare model, state
-- keys "module.*" as PyTorch's), gradients averaged once per forward, and
-- clear errors. The averaging across ranks is tests/dist/test_ddp_equivalence.sh.
local h = dofile("helpers.lua")
local nn = require "nn"

h.test("require 'nn' does not load dist (nor start MPI)", function()
  assert(package.loaded["lazylua.dist"] == nil and package.loaded["dist"] == nil,
         "dist was loaded by require 'nn'")
end)

local function make_model()
  tensor.manual_seed(4)
  return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
end

h.test("size 1: outputs, gradients and state as the bare model", function()
  local bare, inner = make_model(), make_model()
  local ddp = nn.DistributedDataParallel(inner)
  assert(ddp.module == inner)
  local x = tensor.new({{1, -2, 3}, {0.5, 4, -1}})
  local out_bare, out_ddp = bare(x), ddp(x)
  h.eq(out_ddp:tolist(), out_bare:tolist())
  out_bare:sum():backward()
  out_ddp:sum():backward()
  local pb, pd = bare:parameters(), ddp:parameters()
  h.eq(#pd, 4)
  for i = 1, 4 do
    assert(pd[i] == inner:parameters()[i])
    h.eq(pd[i]:grad():tolist(), pb[i]:grad():tolist())
  end
  local names = {}
  for _, pair in ipairs(ddp:named_parameters()) do names[#names + 1] = pair[1] end
  local want = "module.1.weight module.1.bias module.3.weight module.3.bias"
  assert(table.concat(names, " ") == want, table.concat(names, " "))
  local state = ddp:state_dict()
  assert(state["module.1.weight"] and state["module.3.bias"], "state_dict keys are not module.*")
  -- a state saved from a wrapper loads into a wrapper
  local other = nn.DistributedDataParallel(nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)))
  other:load_state_dict(state)
  h.eq(other(x):tolist(), out_bare:tolist())
end)

h.test("gradients are averaged once per forward, after its backward", function()
  local dist = require "dist"
  local original = dist.average_gradients
  local calls, seen = 0, nil
  dist.average_gradients = function(module, opts)
    calls = calls + 1
    seen = {module = module, opts = opts}
  end
  -- The wrappers of the test above armed by their last forward (`other`)
  -- would average on the next backward too: once collected, their hooks
  -- (which hold them weakly) do nothing.
  collectgarbage("collect")
  local ok, message = pcall(function()
    local inner = make_model()
    local ddp = nn.DistributedDataParallel(inner, {bucket_bytes = 4096})
    local x = tensor.new({{1, 2, 3}})
    local loss = ddp(x):sum()
    h.eq(calls, 0)
    loss:backward()
    h.eq(calls, 1)
    assert(seen.module == inner)
    h.eq(seen.opts.bucket_bytes, 4096)
    -- a backward of a graph that did not go through the wrapper
    local w = tensor.new({1.0})
    w:requires_grad(true)
    local twice = (w * 2):sum()
    twice:backward()
    h.eq(calls, 1)
    -- evaluation without gradients arms nothing
    tensor.no_grad(function() ddp(x) end)
    local thrice = (w * 3):sum()
    thrice:backward()
    h.eq(calls, 1)
    -- the next step
    ddp(x):sum():backward()
    h.eq(calls, 2)
  end)
  dist.average_gradients = original
  assert(ok, message)
end)

h.test("bad arguments", function()
  h.err(function() nn.DistributedDataParallel(3) end, "nn.DistributedDataParallel: expected an nn module, got number")
  h.err(function() nn.DistributedDataParallel(make_model(), 5) end, "options must be a table, got number")
  h.err(function() nn.DistributedDataParallel(make_model(), {bucket = 1}) end, "unknown option 'bucket'")
  h.err(function() nn.DistributedDataParallel(make_model(), {bucket_bytes = 0}) end,
        "bucket_bytes must be a positive integer")
  local msg = h.err(function() nn.DistributedDataParallel({}) end, "expected an nn module")
  assert(msg:find("test_ddp.lua", 1, true), "the error does not name the caller's line: " .. msg)
  h.still_works()
end)

h.done("test_ddp")
