-- test_onnx_models.lua - models of the ONNX backend test suites
-- (libonnx-testdata's pytorch-converted) imported and used as a script
-- would: a loop over batches through an imported model records one graph,
-- compiled once; the model's outputs match the suite's expected outputs;
-- its initializers train.
local h = dofile("helpers.lua")
local onnx = require "onnx"

local data = "/usr/share/libonnx-testdata/data/pytorch-converted/"

h.test("a loop over batches through an imported model compiles once", function()
  local model = onnx.load(data .. "test_Linear/model.onnx")
  local x = onnx.read_tensor(data .. "test_Linear/test_data_set_0/input_0.pb")
  local want = onnx.read_tensor(data .. "test_Linear/test_data_set_0/output_0.pb")
  -- the expected output of the suite (its tolerance: rtol 1e-3)
  h.near(model(x), want:tolist(), {rel = 1e-3, abs = 1e-6})
  tensor.mark_step()
  tensor.manual_seed(3)
  local misses, compiles = nil, nil
  for step = 1, 6 do
    local batch = tensor.randn(x:size(1), x:size(2))
    local y = model(batch)
    tensor.mark_step()
    -- the same batch through the initializers by hand: y = x W^T + b
    local params = model:parameters()
    local by_hand = batch:matmul(params[1]:detach():t()) + params[2]:detach()
    h.near(y, by_hand:tolist(), {rel = 1e-5, abs = 1e-5})
    local m = tensor.metrics()
    if step == 2 then
      misses, compiles = m.cache_misses, m.compiles
    elseif step > 2 and not tensor.is_eager() then
      assert(m.cache_misses == misses, string.format("cache misses grew: %d then %d", misses, m.cache_misses))
      -- (a background compile is counted when it lands: only sync mode
      -- has its count final after step 2)
      if os.getenv("LAZYLUA_COMPILE") == "sync" then assert(m.compiles == compiles, "compiled again") end
    end
  end
end)

h.test("a convolution model: the suite's output, then one graph for every batch", function()
  local model = onnx.load(data .. "test_Conv2d/model.onnx")
  local x = onnx.read_tensor(data .. "test_Conv2d/test_data_set_0/input_0.pb")
  local want = onnx.read_tensor(data .. "test_Conv2d/test_data_set_0/output_0.pb")
  h.near(model(x), want:tolist(), {rel = 1e-3, abs = 1e-5})
  tensor.mark_step()
  local misses
  for step = 1, 5 do
    local y = model(x * (1 + step / 10))
    tensor.mark_step()
    if step == 1 then misses = tensor.metrics().cache_misses end
    if not tensor.is_eager() then
      assert(tensor.metrics().cache_misses == misses, "a new graph at step " .. step)
    end
    assert(y:size(1) == want:size(1) and y:size(2) == want:size(2))
  end
end)

h.test("an imported model's initializers train", function()
  local model = onnx.load(data .. "test_Linear/model.onnx")
  local params = model:parameters()
  assert(#params == 2 and params[1]:requires_grad() and params[2]:requires_grad())
  tensor.manual_seed(5)
  local x = tensor.randn(8, params[1]:size(2))
  local target = tensor.zeros(8, params[1]:size(1))
  local function loss() return ((model(x) - target) ^ 2):mean() end
  local before = loss():item()
  for _ = 1, 20 do
    for _, p in ipairs(params) do p:set_grad(nil) end
    local l = loss()
    l:backward()
    tensor.no_grad(function()
      for _, p in ipairs(params) do p:sub_(p:grad() * 0.1) end
    end)
    tensor.mark_step()
  end
  local after = loss():item()
  assert(after < before * 0.5, string.format("loss %g -> %g", before, after))
end)

h.done("test_onnx_models")
