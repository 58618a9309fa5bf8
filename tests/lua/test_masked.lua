-- test_masked.lua - boolean masks: masked_fill(_), masked_select, t[mask],
-- t[mask] = v, nonzero; values and gradients computed by hand. The three
-- ctest modes (lazy, eager, native) run this same file.
local h = dofile("helpers.lua")

local function sample() return tensor.new({{1, -2, 3}, {-4, 5, -6}}, {dtype = "f32"}) end

h.test("masked_select and t[mask] with a full-shape mask", function()
  local t = sample()
  local mask = t:gt(0)
  h.check(t:masked_select(mask), "f32", {1, 3, 5})
  h.check(t[mask], "f32", {1, 3, 5})
  h.check(tensor.masked_select(t, mask), "f32", {1, 3, 5})
  -- none selected: an empty 1-D tensor
  h.check(t[t:gt(100)], "f32", {}, nil, {0})
  -- integer and bool tensors keep their dtype
  local ints = tensor.new({{1, 2}, {3, 4}})
  h.check(ints[ints:ne(2)], "i64", {1, 3, 4})
  local flags = tensor.new({true, false, true})
  h.check(flags[tensor.new({false, true, true})], "bool", {false, true})
end)

h.test("masked_select broadcasts mask and tensor", function()
  local t = sample()
  -- a row mask [3] broadcasts over both rows
  h.check(t:masked_select(tensor.new({true, false, true})), "f32", {1, 3, -4, -6})
  -- a mask larger than the tensor broadcasts the tensor
  local v = tensor.new({1, 2, 3}, {dtype = "f32"})
  local mask = tensor.new({{true, false, false}, {false, true, true}})
  h.check(v:masked_select(mask), "f32", {1, 2, 3})
end)

h.test("t[mask] with a mask over the leading dims selects slices", function()
  local t = sample()
  h.check(t[tensor.new({false, true})], "f32", {{-4, 5, -6}})
  h.check(t[tensor.new({true, true})], "f32", {{1, -2, 3}, {-4, 5, -6}})
  local cube = tensor.arange(1, 13):reshape(2, 3, 2)
  -- mask [2, 3] over the first two dims: rows of 2
  local mask = tensor.new({{true, false, false}, {false, false, true}})
  h.check(cube[mask], "i64", {{1, 2}, {11, 12}})
end)

h.test("masked_fill is lazy and keeps the dtype", function()
  local t = sample()
  local mask = t:lt(0)
  h.check(t:masked_fill(mask, 0), "f32", {{1, 0, 3}, {0, 5, 0}})
  h.check(t, "f32", {{1, -2, 3}, {-4, 5, -6}})  -- unchanged
  h.check(t:masked_fill(tensor.new({true, false, true}), 9), "f32", {{9, -2, 9}, {9, 5, 9}})
  h.check(t:masked_fill(mask, tensor.new(0.5)), "f32", {{1, 0.5, 3}, {0.5, 5, 0.5}})
  local ints = tensor.new({1, 2, 3})
  h.check(ints:masked_fill(ints:eq(2), -7), "i64", {1, -7, 3})
  h.check(tensor.masked_fill(ints, ints:ge(2), 0), "i64", {1, 0, 0})
end)

h.test("masked_fill_ writes in place, also through a view", function()
  local t = sample()
  local same = t:masked_fill_(t:lt(0), 0)
  assert(rawequal(same, t))
  h.check(t, "f32", {{1, 0, 3}, {0, 5, 0}})
  local row = t[2]
  row:masked_fill_(row:eq(0), -1)
  h.check(t, "f32", {{1, 0, 3}, {-1, 5, -1}})
end)

h.test("t[mask] = v", function()
  local t = sample()
  t[t:lt(0)] = 0
  h.check(t, "f32", {{1, 0, 3}, {0, 5, 0}})
  -- a tensor with as many elements as selected, in row-major order
  t = sample()
  t[t:lt(0)] = tensor.new({10, 20, 30})
  h.check(t, "f32", {{1, 10, 3}, {20, 5, 30}})
  -- values of another dtype are converted, a 2-D value with the right count is taken in order
  t = sample()
  t[t:gt(0)] = tensor.new({{7, 8, 9}}, {dtype = "f64"})
  h.check(t, "f32", {{7, -2, 8}, {-4, 9, -6}})
  -- a row mask with a row value (broadcast over the selected rows)
  t = sample()
  t[tensor.new({true, false})] = tensor.new({4, 4, 4})
  h.check(t, "f32", {{4, 4, 4}, {-4, 5, -6}})
  t[tensor.new({true, true})] = 1
  h.check(t, "f32", {{1, 1, 1}, {1, 1, 1}})
  -- through a view: the base sees the write
  t = sample()
  local col = t:select(2, 1)
  col[col:lt(0)] = 100
  h.check(t, "f32", {{1, -2, 3}, {100, 5, -6}})
  -- nothing selected: nothing changes
  t = sample()
  t[t:gt(100)] = tensor.new({})
  h.check(t, "f32", {{1, -2, 3}, {-4, 5, -6}})
end)

h.test("nonzero gives 1-based indices", function()
  h.check(tensor.new({{0, 1}, {2, 0}}):nonzero(), "i64", {{1, 2}, {2, 1}})
  h.check(tensor.new({0, 3, 0, 4}):nonzero(), "i64", {{2}, {4}})
  h.check(tensor.new({{true, false}, {true, true}}):nonzero(), "i64", {{1, 1}, {2, 1}, {2, 2}})
  h.check(tensor.zeros(2, 2):nonzero(), "i64", {}, nil, {0, 2})
  -- a 0-d tensor: one row of no indices when it is non-zero (as PyTorch)
  h.shape(tensor.new(5):nonzero(), {1, 0})
  h.shape(tensor.new(0):nonzero(), {0, 0})
  -- on a lazy result
  local t = tensor.arange(1, 7):reshape(2, 3)
  h.check((t % 2):eq(0):nonzero(), "i64", {{1, 2}, {2, 1}, {2, 3}})
end)

h.test("tensor.where(cond) gives the indices per dim", function()
  local rows, cols = tensor.where(tensor.new({{0, 1}, {2, 3}}))
  h.check(rows, "i64", {1, 2, 2})
  h.check(cols, "i64", {2, 1, 2})
  h.eq(select("#", tensor.where(tensor.zeros(2, 3, 4):gt(1))), 3)
  h.check(tensor.where(tensor.new({false, true, true})), "i64", {2, 3})
  h.check(tensor.where(tensor.zeros(3)), "i64", {}, nil, {0})
  h.err(function() tensor.where(tensor.new(true)) end, "0-d condition")
  -- the three-argument form is unchanged
  h.check(tensor.where(tensor.new({true, false}), 1, 2), "i64", {1, 2})
end)

h.test("lazy mode: the mask is read once, the values stay lazy", function()
  if os.getenv("LAZYLUA_EAGER") == "1" then return end
  tensor.mark_step()
  local x = tensor.new({1, -2, 3}, {dtype = "f32"}) * 2
  local mask = x:gt(0)
  local syncs = tensor.metrics().syncs
  local selected = x[mask]
  assert(tensor.metrics().syncs == syncs + 1, "t[mask] reads the mask: one sync")
  local filled = x:masked_fill(mask, 0)
  assert(tensor.metrics().syncs == syncs + 1, "masked_fill does not sync")
  local ops = {}
  for _, pending in ipairs(tensor.pending()) do ops[pending.op] = true end
  assert(ops.index_select and ops.where, "the selection and the fill are recorded, not run")
  h.check(selected, "f32", {2, 6})
  h.check(filled, "f32", {0, -4, 0})
end)

h.test("gradients flow through masked_select, t[mask] and masked_fill", function()
  local x = sample():requires_grad(true)
  local loss = (x:masked_select(x:gt(0)) * tensor.new({1, 2, 3})):sum()
  loss:backward()
  h.check(x:grad(), "f32", {{1, 0, 2}, {0, 3, 0}})

  x = sample():requires_grad(true)
  loss = (x[x:gt(0)] ^ 2):sum()
  loss:backward()
  h.check(x:grad(), "f32", {{2, 0, 6}, {0, 10, 0}})

  x = sample():requires_grad(true)
  loss = (x[tensor.new({false, true})] * 2):sum()
  loss:backward()
  h.check(x:grad(), "f32", {{0, 0, 0}, {2, 2, 2}})

  -- a broadcast mask: each element of v is selected twice at most
  local v = tensor.new({1, 2, 3}, {dtype = "f32"}):requires_grad(true)
  v:masked_select(tensor.new({{true, false, true}, {true, true, false}})):sum():backward()
  h.check(v:grad(), "f32", {2, 1, 1})

  x = sample():requires_grad(true)
  local fill = tensor.new(0.0):requires_grad(true)
  loss = (x:masked_fill(x:lt(0), fill) * 3):sum()
  loss:backward()
  h.check(x:grad(), "f32", {{3, 0, 3}, {0, 3, 0}})
  h.check(fill:grad(), "f32", 9)
end)

h.test("bad masks and values are errors", function()
  local t = sample()
  h.err(function() local _ = t[tensor.new({1, 0})] end, "must be a bool tensor", "i64",
    "t:index_select(dim, index)")
  h.err(function() t:masked_fill(tensor.new({1, 0, 1}), 0) end, "masked_fill", "bool tensor")
  h.err(function() local _ = t[tensor.new({true, false, true})] end,
    "does not match the leading dims", "[3]", "[2, 3]")
  h.err(function() t:masked_fill(tensor.new({{true}, {false}, {true}}), 0) end,
    "masked_fill", "does not broadcast to the tensor's shape [2, 3]")
  h.err(function() t:masked_fill(tensor.new({{true, false, true}, {true, true, false}}):unsqueeze(1), 0) end,
    "does not broadcast to the tensor's shape")
  h.err(function() t:masked_fill(t:gt(0), tensor.new({1, 2})) end, "0-d tensor")
  h.err(function() t[t:gt(0)] = tensor.new({1, 2}) end, "does not fit the 3 selected elements")
  h.err(function() t[t:gt(0)] = "x" end, "newindex")
  local w = sample():requires_grad(true)
  h.err(function() w[w:gt(0)] = 0 end, "requires grad")
  h.err(function() t[t:gt(0)] = tensor.new({1, 2, 3}, {dtype = "f32"}):requires_grad(true) end, "requires grad")
  h.err(function() w:masked_fill_(w:gt(0), 0) end, "requires grad")
  h.still_works()
end)

h.done("test_masked")
