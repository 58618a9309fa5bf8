-- test_data_shard.lua - DataLoader{shard = {rank, size}}: each rank's share
-- of an epoch, in one process (the loaders of every rank side by side), as
-- torch's DistributedSampler deals it: the order padded by repeating its
-- start (or with drop_last cut) to a multiple of size, position p going to
-- rank p % size. Expected rows are written out by hand or dealt by plain Lua
-- loops over the unsharded order.
local h = dofile("helpers.lua")
local data = require "data"

-- A dataset whose rows say who they are: ids 1..n (i64) and, as a second
-- tensor, 10 * id (f32) in a column, to see the two tensors stay paired.
local function dataset(n)
  local ids, tens = {}, {}
  for i = 1, n do ids[i], tens[i] = i, {10 * i} end
  return {tensor.new(ids, {dtype = "i64"}), tensor.new(tens)}
end

-- Every batch of one epoch as lists of ids; checks the second tensor too.
local function epoch_batches(loader)
  local batches = {}
  for ids, tens in loader:iter() do
    local list = ids:tolist()
    local scaled = tens:tolist()
    for i, id in ipairs(list) do
      if scaled[i][1] ~= 10 * id then
        error(string.format("row %d: second tensor holds %s, not %d", id, tostring(scaled[i][1]), 10 * id))
      end
    end
    batches[#batches + 1] = list
  end
  return batches
end

local function loaders(n, size, opts)
  local list = {}
  for rank = 0, size - 1 do
    local o = {progress = false, shard = {rank, size}}
    for k, v in pairs(opts or {}) do o[k] = v end
    list[rank + 1] = data.DataLoader(dataset(n), o)
  end
  return list
end

local function concat(lists)
  local out = {}
  for _, l in ipairs(lists) do for _, v in ipairs(l) do out[#out + 1] = v end end
  return out
end

h.test("no shuffle: 10 rows over 3 ranks, padded with rows 1 and 2", function()
  local ls = loaders(10, 3, {batch_size = 2})
  -- padded order 1..10, 1, 2; rank r takes positions r, r+3, r+6, r+9
  local want = {
    {{1, 4}, {7, 10}},
    {{2, 5}, {8, 1}},
    {{3, 6}, {9, 2}},
  }
  for r = 1, 3 do
    h.eq(#ls[r], 2)
    h.eq(epoch_batches(ls[r]), want[r])
  end
end)

h.test("drop_last: the tail that does not divide is dropped, then the short batch", function()
  local ls = loaders(10, 3, {batch_size = 2, drop_last = true})
  -- 9 positions: rank r gets r, r+3, r+6 (3 rows): one batch of 2
  local want = {{{1, 4}}, {{2, 5}}, {{3, 6}}}
  for r = 1, 3 do
    h.eq(#ls[r], 1)
    h.eq(epoch_batches(ls[r]), want[r])
  end
  -- batch 4: 3 rows each (9 of 10), one short batch... dropped; 3 of 1 batch
  local three = loaders(10, 3, {batch_size = 3, drop_last = true})
  h.eq(epoch_batches(three[2]), {{2, 5, 8}})
end)

h.test("fewer rows than ranks: padding repeats the order as often as needed", function()
  local ls = loaders(2, 5, {batch_size = 4})
  -- padded 1, 2, 1, 2, 1
  local want = {{{1}}, {{2}}, {{1}}, {{2}}, {{1}}}
  for r = 1, 5 do
    h.eq(#ls[r], 1)
    h.eq(epoch_batches(ls[r]), want[r])
  end
  local dropped = loaders(2, 5, {batch_size = 4, drop_last = true})
  h.eq(#dropped[1], 0)
  h.eq(epoch_batches(dropped[1]), {})
end)

h.test("size 1 is the unsharded loader", function()
  local plain = data.DataLoader(dataset(11), {batch_size = 4, shuffle = true, seed = 3, progress = false})
  local one = data.DataLoader(dataset(11), {batch_size = 4, shuffle = true, seed = 3, progress = false,
    shard = {0, 1}})
  h.eq(#one, #plain)
  for _ = 1, 2 do h.eq(epoch_batches(one), epoch_batches(plain)) end
end)

-- The seeded shuffle: disjoint shares, union the whole set, equal counts,
-- and batch k of all ranks together is batch k of one loader with
-- batch_size * size over the same order (the 2 x 64 = 1 x 128 property).
for _, case in ipairs({{n = 96, size = 2, batch = 8}, {n = 100, size = 4, batch = 5},
                       {n = 37, size = 3, batch = 4}}) do
  h.test(string.format("seeded shuffle: %d rows, %d ranks, batch %d", case.n, case.size, case.batch), function()
    local ls = loaders(case.n, case.size, {batch_size = case.batch, shuffle = true, seed = 7})
    local whole = data.DataLoader(dataset(case.n), {batch_size = case.batch * case.size, shuffle = true,
      seed = 7, progress = false})
    local previous
    for epoch = 1, 3 do
      local per_rank = {}
      for r = 1, case.size do per_rank[r] = epoch_batches(ls[r]) end
      local global = epoch_batches(whole)
      local per_share = (case.n + case.size - 1) // case.size
      local expected_batches = (per_share + case.batch - 1) // case.batch
      local seen = {}
      for r = 1, case.size do
        h.eq(#per_rank[r], expected_batches)
        h.eq(#ls[r], expected_batches)
        h.eq(#concat(per_rank[r]), per_share)
        for _, id in ipairs(concat(per_rank[r])) do seen[id] = (seen[id] or 0) + 1 end
      end
      -- every row at least once; the padding (per_share * size - n rows)
      -- repeats rows from the start of the order, each once more
      local extra = 0
      for id = 1, case.n do
        assert(seen[id], "row " .. id .. " missing from every rank")
        extra = extra + seen[id] - 1
      end
      h.eq(extra, per_share * case.size - case.n)
      -- The whole order interleaved: position p of the padded order goes
      -- to rank p % size, so dealing the single loader's rows back out must
      -- give each rank's rows, and the padding is the order's first rows.
      local order = concat(global)
      for p = 0, per_share * case.size - 1 do
        local r, i = p % case.size, p // case.size
        h.eq(concat(per_rank[r + 1])[i + 1], order[p % case.n + 1])
      end
      -- batch k of every rank together = global batch k (full global batches)
      for k = 1, #global do
        local union = {}
        for r = 1, case.size do
          for _, id in ipairs(per_rank[r][k] or {}) do union[#union + 1] = id end
        end
        if #global[k] == case.batch * case.size then
          table.sort(union)
          local want = {table.unpack(global[k])}
          table.sort(want)
          h.eq(union, want)
        end
      end
      -- a new order each epoch, the same on every rank (else the union
      -- above would miss rows)
      if previous then assert(not h.same_list(order, previous), "epoch " .. epoch .. " repeats the order") end
      previous = order
    end
  end)
end

h.test("unseeded shuffle: tensor.manual_seed makes the ranks agree", function()
  local ls = loaders(50, 2, {batch_size = 10, shuffle = true})
  local shares = {}
  for r = 1, 2 do
    tensor.manual_seed(11)  -- every rank seeds alike
    shares[r] = concat(epoch_batches(ls[r]))
  end
  local seen = {}
  for r = 1, 2 do
    h.eq(#shares[r], 25)
    for _, id in ipairs(shares[r]) do
      assert(not seen[id], "row " .. id .. " on both ranks")
      seen[id] = true
    end
  end
  for id = 1, 50 do assert(seen[id], "row " .. id .. " on no rank") end
end)

h.test("the progress bar counts the shard's batches", function()
  local loader = data.DataLoader(dataset(100), {batch_size = 10, shard = {1, 4},
    progress_options = {stream = {write = function() end, flush = function() end}}})
  local batches = 0
  for _ in loader:iter() do
    batches = batches + 1
    h.eq(loader.bar.total, 3)  -- 25 rows a rank: 3 batches
  end
  h.eq(batches, 3)
end)

h.test("bad shard options", function()
  local function make(shard) return data.DataLoader(dataset(4), {shard = shard}) end
  h.err(function() make(3) end, "shard must be a table {rank, size}, got number")
  h.err(function() make({0, 0}) end, "shard size must be at least 1, got 0")
  h.err(function() make({0, -2}) end, "shard size must be at least 1, got -2")
  h.err(function() make({2, 2}) end, "shard rank 2 is out of range 0..1 (ranks are 0-based)")
  h.err(function() make({-1, 2}) end, "shard rank -1 is out of range 0..1")
  h.err(function() make({0.5, 2}) end, "shard rank must be an integer, got 0.5")
  h.err(function() make({0, 2.5}) end, "shard size must be an integer, got 2.5")
  h.err(function() make({0}) end, "shard size must be an integer, got nil")
  h.err(function() make({"0", 2}) end, "shard rank must be an integer, got string")
  -- the error names the caller's line
  local msg = h.err(function() make({5, 2}) end)
  assert(msg:find("test_data_shard.lua", 1, true), msg)
  h.still_works()
end)

h.done("test_data_shard")
