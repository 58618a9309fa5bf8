-- test_inplace_view_chains.lua - in-place ops through view chains whose
-- write-back lands in the kernel that computes the new value (audit M0 of
-- 2026-11-27): a permute that moves only extent-1 dims, then flatten(),
-- view(-1) or reshape(-1) (a view: the element order does not change), then
-- add_, mul_, clamp_ ... The compiled kernel once loaded the write-back's
-- value from the op's output slot before storing the op's value there, so
-- the result was stale memory or the write was lost. Every case is checked
-- against values computed in plain Lua from the Lua list the input was made
-- from, in all three modes; in the default (background) mode the cases run again until
-- their graph has run as native code.
local h = dofile("helpers.lua")

local EAGER = tensor.is_eager()

-- Waits for the background compile: runs `round(k)` (k = 1, 2, ...), each
-- time recording the same graph and checking its values, until a round's
-- graph ran natively (`round` returns how many native runs its sync made).
-- Between rounds it sleeps as long as a round took, leaving the compiler
-- most of the machine. Sync mode compiles before the first run; eager mode
-- has no native code.
local now = require("progress").now

local function until_native(what, round)
  local deadline = now() + 120
  for k = 1, math.huge do
    local start = now()
    local native = round(k)
    if EAGER or native > 0 then return k end
    if now() > deadline then
      error(what .. ": the graph never ran as native code (the background compile did not land)")
    end
    os.execute(string.format("sleep %.2f", math.max(0.05, now() - start)))
  end
end

-- Runs a sync of `tensors` and returns how many runs of native code it made.
local function sync_counting(tensors)
  local before = tensor.metrics().native_runs
  tensor.sync(tensors)
  return tensor.metrics().native_runs - before
end

-- ---------------------------------------------------------------------------
-- The family. Shapes of rank 2 to 4 with extent-1 dims; for each, every
-- permutation that moves only extent-1 dims (the other dims keep their
-- order, so the permuted tensor is still contiguous and flattening it is a
-- view), then a flattening and an in-place op.

-- All have 6 elements, so that the loops of one op and dtype have one text
-- (the C compiler sees it once); {6, 1} and {6, 1, 1} flatten to a
-- squeeze, which never reads memory.
local SHAPES = {
  {2, 3, 1}, {3, 1, 2}, {1, 2, 3}, {2, 1, 3}, {3, 2, 1}, {6, 1}, {6, 1, 1},
  {2, 3, 1, 1}, {1, 2, 1, 3}, {3, 1, 1, 2},
}

local function permutations(n)
  local out = {}
  local function go(prefix, used)
    if #prefix == n then out[#out + 1] = table.move(prefix, 1, n, 1, {}) return end
    for d = 1, n do
      if not used[d] then
        used[d] = true
        prefix[#prefix + 1] = d
        go(prefix, used)
        prefix[#prefix] = nil
        used[d] = false
      end
    end
  end
  go({}, {})
  return out
end

-- The permutations of `shape` other than the identity that keep the order
-- of its extents other than 1.
local function size1_permutations(shape)
  local out = {}
  for _, perm in ipairs(permutations(#shape)) do
    local identity, last, keeps = true, 0, true
    for d = 1, #shape do
      identity = identity and perm[d] == d
      if shape[perm[d]] ~= 1 then
        keeps = keeps and perm[d] > last
        last = perm[d]
      end
    end
    if keeps and not identity then out[#out + 1] = perm end
  end
  return out
end

local FLATTEN = {
  {name = "flatten()", f = function(t) return t:flatten() end},
  {name = "view(-1)", f = function(t) return t:view(-1) end},
  {name = "reshape(-1)", f = function(t) return t:reshape(-1) end},
}

-- The in-place ops: apply(v, k) writes through v (k: the case's number, for
-- operands), want(x, i, k) is the new value of v's i-th element x.
-- Values are multiples of 1/8 of magnitude below 8: every result is exact.
local function src_value(i, k) return ((i * 5 + k) % 13 - 6) / 4 end

local OPS = {
  {name = "add_(1)", apply = function(v) v:add_(1) end, want = function(x) return x + 1 end},
  {name = "add_(0.375)", apply = function(v) v:add_(0.375) end,
   want = function(x) return x + 0.375 end},
  {name = "mul_(2)", apply = function(v) v:mul_(2) end, want = function(x) return x * 2 end},
  {name = "mul_(-0.5)", apply = function(v) v:mul_(-0.5) end,
   want = function(x) return x * -0.5 end},
  {name = "sub_(0.25)", apply = function(v) v:sub_(0.25) end,
   want = function(x) return x - 0.25 end},
  {name = "neg_()", apply = function(v) v:neg_() end, want = function(x) return -x end},
  {name = "clamp_(nil, 0.5)", apply = function(v) v:clamp_(nil, 0.5) end,
   want = function(x) return math.min(x, 0.5) end},
  {name = "clamp_(-1, 1)", apply = function(v) v:clamp_(-1, 1) end,
   want = function(x) return math.max(-1, math.min(x, 1)) end},
  {name = "relu_()", apply = function(v) v:relu_() end, want = function(x) return math.max(x, 0) end},
  {name = "mul_(self)", apply = function(v) v:mul_(v) end, want = function(x) return x * x end},
  {name = "masked_fill_(v:gt(0.25), -1)", apply = function(v) v:masked_fill_(v:gt(0.25), -1) end,
   want = function(x) return x > 0.25 and -1 or x end},
  {name = "fill_(0.75)", apply = function(v) v:fill_(0.75) end, want = function() return 0.75 end},
  {name = "copy_(src)",
   apply = function(v, k)
     local src = {}
     for i = 1, v:numel() do src[i] = src_value(i, k) end
     v:copy_(tensor.new(src, {dtype = v:dtype()}):reshape(v:size()))
   end,
   want = function(_, i, k) return src_value(i, k) end},
}

-- The base's data: multiples of 1/8 in [-3, 3), different in every round
-- (the graph stays the same: data enter it as parameters).
local function base_values(n, seed)
  local out = {}
  for i = 1, n do out[i] = ((i * 7 + seed * 3) % 48 - 24) / 8 end
  return out
end

local function numel(shape)
  local n = 1
  for _, e in ipairs(shape) do n = n * e end
  return n
end

local function check_flat(got, want, what)
  got = h.flatten(got)
  if #got ~= #want then error(string.format("%s: %d elements, expected %d", what, #got, #want)) end
  for i = 1, #want do
    if got[i] ~= want[i] then
      error(string.format("%s: element %d is %s, expected %s\n  got  %s\n  want %s", what, i,
                          tostring(got[i]), tostring(want[i]), h.show(got), h.show(want)), 2)
    end
  end
end

-- Every case of the family, f32 and f64: records them all and syncs them
-- in one graph (one C compile), then checks each view, its base, the
-- base's own base and a value computed from both the view and the base.
-- Each case ends with a sum, a reduction: fusion joins elementwise
-- kernels of one shape into one loop, and the sum keeps each case's loop
-- apart, so that all the loops of one op and dtype have one text.
local function family_round(seed)
  local cases = {}
  local outputs = {}
  local k = 0
  for _, dtype in ipairs({"f32", "f64"}) do
    for _, op in ipairs(OPS) do
      for _, shape in ipairs(SHAPES) do
        for _, perm in ipairs(size1_permutations(shape)) do
          for _, flatten in ipairs(FLATTEN) do
            k = k + 1
            local n = numel(shape)
            local before = base_values(n, seed + k)
            local data = tensor.new(before, {dtype = dtype})
            local a = data:reshape(table.unpack(shape))
            local v = flatten.f(a:permute(table.unpack(perm)))
            op.apply(v, k)
            -- reads of both the view and the base after the write
            local mix = v * 2 + a:reshape(-1)
            local difference = a:flatten() - v
            local sum = v:sum()
            local want = {}
            for i = 1, n do want[i] = op.want(before[i], i, k) end
            cases[#cases + 1] = {
              what = string.format("%s %s:permute(%s):%s:%s", dtype, h.show(shape),
                                   table.concat(perm, ","), flatten.name, op.name),
              data = data, a = a, v = v, mix = mix, difference = difference, sum = sum,
              want = want}
            for _, t in ipairs({data, v, mix, difference, sum}) do outputs[#outputs + 1] = t end
          end
        end
      end
    end
  end
  local native = sync_counting(outputs)
  for _, case in ipairs(cases) do
    check_flat(case.v:tolist(), case.want, case.what .. ": the view")
    check_flat(case.a:tolist(), case.want, case.what .. ": the base")
    check_flat(case.data:tolist(), case.want, case.what .. ": the base's base")
    local mix = {}
    for i, x in ipairs(case.want) do mix[i] = 3 * x end
    check_flat(case.mix:tolist(), mix, case.what .. ": v * 2 + a:reshape(-1)")
    local zeros = {}
    for i = 1, #case.want do zeros[i] = 0 end
    check_flat(case.difference:tolist(), zeros, case.what .. ": a:flatten() - v")
    local sum = 0
    for _, x in ipairs(case.want) do sum = sum + x end
    check_flat({case.sum:item()}, {sum}, case.what .. ": v:sum()")
  end
  return native, #cases
end

h.test("in-place ops through a permute of extent-1 dims and a flattening", function()
  local count
  until_native("the family", function(round)
    local native
    native, count = family_round(round)
    return native
  end)
  assert(count > 1000, "only " .. count .. " cases")
end)

-- ---------------------------------------------------------------------------
-- Longer chains over the flattened view, and a second write: the element
-- each write reaches (positions in the base, in the view's order) is
-- computed in Lua.

local CHAINS = {
  {name = "[2,3,1]:permute(1,3,2):flatten():narrow(1,2,3)", shape = {2, 3, 1},
   view = function(a) return a:permute(1, 3, 2):flatten():narrow(1, 2, 3) end,
   positions = {2, 3, 4}},
  {name = "[2,1,3]:permute(2,1,3):flatten():view(3,2):t()", shape = {2, 1, 3},
   view = function(a) return a:permute(2, 1, 3):flatten():view(3, 2):t() end,
   -- v is [2, 3]: v[i][j] is flat element (j - 1) * 2 + i
   positions = {1, 3, 5, 2, 4, 6}},
  {name = "[3,2]:unsqueeze(2):permute(2,1,3):reshape(-1)", shape = {3, 2},
   view = function(a) return a:unsqueeze(2):permute(2, 1, 3):reshape(-1) end,
   positions = {1, 2, 3, 4, 5, 6}},
  {name = "[2,3,1,1]:permute(1,3,4,2):flatten():view(2,3)[2]", shape = {2, 3, 1, 1},
   view = function(a) return a:permute(1, 3, 4, 2):flatten():view(2, 3)[2] end,
   positions = {4, 5, 6}},
  {name = "[1,6]:permute(2,1):view(-1):view(6,1):permute(2,1):flatten()", shape = {1, 6},
   view = function(a) return a:permute(2, 1):view(-1):view(6, 1):permute(2, 1):flatten() end,
   positions = {1, 2, 3, 4, 5, 6}},
}

-- The ops of OPS that these chains take (a read-modify-write of each kind,
-- and the pure writes), to keep the graph's C small.
local CHAIN_OPS = {}
for _, name in ipairs({"add_(1)", "mul_(self)", "clamp_(-1, 1)", "masked_fill_(v:gt(0.25), -1)",
                       "fill_(0.75)", "copy_(src)"}) do
  for _, op in ipairs(OPS) do
    if op.name == name then CHAIN_OPS[#CHAIN_OPS + 1] = op end
  end
end
assert(#CHAIN_OPS == 6)

local function chains_round(seed)
  local cases, outputs = {}, {}
  for c, chain in ipairs(CHAINS) do
    for o, op in ipairs(CHAIN_OPS) do
      local k = c * 100 + o
      local n = numel(chain.shape)
      local before = base_values(n, seed + k)
      local data = tensor.new(before)
      local a = data:view(table.unpack(chain.shape))
      local v = chain.view(a)
      op.apply(v, k)
      -- reads of the view and the base between the writes
      local seen_view, seen_base = v * 2, a:reshape(-1) * 2
      -- a second write through the view: the base's value is then the
      -- write-back of that write
      v:add_(0.5)
      local first = table.move(before, 1, n, 1, {})
      for i, p in ipairs(chain.positions) do first[p] = op.want(before[p], i, k) end
      local case = {what = chain.name .. ":" .. op.name, data = data, v = v, seen_view = seen_view,
                    seen_base = seen_base, want = {}, want_view = {}, want_seen_view = {},
                    want_seen_base = {}}
      for i = 1, n do
        case.want[i] = first[i]
        case.want_seen_base[i] = first[i] * 2
      end
      for i, p in ipairs(chain.positions) do
        case.want[p] = first[p] + 0.5
        case.want_view[i] = first[p] + 0.5
        case.want_seen_view[i] = first[p] * 2
      end
      cases[#cases + 1] = case
      for _, t in ipairs({data, v, seen_view, seen_base}) do outputs[#outputs + 1] = t end
    end
  end
  local native = sync_counting(outputs)
  for _, case in ipairs(cases) do
    check_flat(case.data:tolist(), case.want, case.what .. ": the base")
    check_flat(case.v:tolist(), case.want_view, case.what .. ": the view")
    check_flat(case.seen_view:tolist(), case.want_seen_view, case.what .. ": the view between")
    check_flat(case.seen_base:tolist(), case.want_seen_base, case.what .. ": the base between")
  end
  return native
end

h.test("in-place ops through longer view chains over a flattened permute", function()
  until_native("chains", chains_round)
end)

-- ---------------------------------------------------------------------------
-- The audit's two repros as written (but for the wait: the background
-- compile is awaited by the metrics instead of a second's sleep).

h.test("the audit's flat_inplace.lua", function()
  local steps = 0
  until_native("flat_inplace", function()
    steps = steps + 1
    local a = tensor.new({0.5, -0.25, 1.0, 2.0, -3.0, 0.75}):reshape(2, 3, 1)
    local v = a:permute(1, 3, 2):flatten()     -- a view of a (only a size-1 dim moves)
    v:add_(1)
    local native = sync_counting({v, a})
    h.eq(v:tolist(), {1.5, 0.75, 2.0, 3.0, -2.0, 1.75})
    h.eq(a:tolist(), {{{1.5}, {0.75}, {2.0}}, {{3.0}, {-2.0}, {1.75}}})
    return native
  end)
  assert(steps >= 1)
end)

h.test("the audit's clamp_bug.lua", function()
  until_native("clamp_bug", function()
    local v2 = tensor.new({0.5, -0.421875, -0.15625, -0.8125, 1.0, 2.0, -2.90625, 0.75, 0.453125, -2.5625}, {dtype = "f64"}):reshape(2, 5, 1)
    local v3 = v2:permute(1, 3, 2):flatten()
    v3:clamp_(nil, 0.5)
    local native = sync_counting({v3, v2})
    h.eq(v3:tolist(), {0.5, -0.421875, -0.15625, -0.8125, 0.5, 0.5, -2.90625, 0.5, 0.453125, -2.5625})
    return native
  end)
end)

h.done("test_inplace_view_chains")
