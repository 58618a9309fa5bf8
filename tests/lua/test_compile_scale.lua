-- test_compile_scale.lua - graphs of 10,000 nodes (issue 12): a cat of
-- 10,000 inputs, a chain of 10,000 elementwise ops, a sum of 10,000 inputs
-- and a mark_step over 10,000 pending values give the values Lua's own
-- arithmetic gives (all exact: small integers in floats), in every tier.
-- Under LAZYLUA_COMPILE=sync each graph is compiled before it runs, and
-- the code stays small: same-shaped regions of a cat share one C function,
-- and a long chain is cut into kernels of bounded size that share theirs.
-- (Compile time is what the fix is about, but bench/bench_compile_scale.lua
-- measures it: a test asserts no timing.)
local h = dofile("helpers.lua")

local N = 10000
local compiled = os.getenv("LAZYLUA_COMPILE") == "sync" and not tensor.is_eager()

-- Syncs `t` and, when compiled, checks that the plan ran natively with at
-- most `most_functions` distinct C functions.
local function synced(t, most_functions)
  local before = tensor.metrics()
  tensor.sync(t)
  local after = tensor.metrics()
  if compiled then
    assert(after.native_runs == before.native_runs + 1, "the graph did not run compiled")
    assert(after.kernel_functions <= most_functions,
      string.format("%d C functions for %d kernels (at most %d expected)", after.kernel_functions,
        after.kernels, most_functions))
  end
  return t
end

h.test("cat of 10,000 vectors", function()
  local parts = {}
  for i = 1, N do parts[i] = tensor.new({i, -i, i + 0.5}, {dtype = "f32"}) end
  tensor.mark_step()
  local values = synced(tensor.cat(parts) * 2, 2):tolist()
  assert(#values == 3 * N)
  for i = 1, N do
    local got = {values[3 * i - 2], values[3 * i - 1], values[3 * i]}
    local want = {2 * i, -2 * i, 2 * i + 1}
    for k = 1, 3 do
      assert(got[k] == want[k], string.format("part %d element %d: %s, want %s", i, k, got[k], want[k]))
    end
  end
end)

h.test("cat of 10,000 columns along dim 2", function()
  local parts = {}
  for i = 1, N do parts[i] = tensor.new({{i}, {N - i}}, {dtype = "f64"}) end
  tensor.mark_step()
  local rows = synced(tensor.cat(parts, 2), 2):tolist()
  assert(#rows == 2 and #rows[1] == N and #rows[2] == N)
  for i = 1, N do
    assert(rows[1][i] == i and rows[2][i] == N - i, string.format("column %d", i))
  end
end)

-- Regions read from different places of one tensor: its pointer moves
-- too, so the copies still share one function.
h.test("cat of 10,000 slices of one tensor", function()
  local list = {}
  for i = 1, N do list[i] = i * 3 end
  local x = tensor.new(list, {dtype = "i64"})
  tensor.mark_step()
  local parts = {}
  for i = 1, N do parts[i] = x:narrow(1, N - i + 1, 1) end
  local values = synced(tensor.cat(parts), 2):tolist()
  for i = 1, N do
    assert(values[i] == list[N - i + 1], string.format("element %d: %s", i, values[i]))
  end
end)

-- The longest C function of the code that computes `t` (in lines).
local function longest_function(t)
  local code, longest = tensor.code(t), 0
  for body in (code .. "LZK_INLINE"):gmatch("LZK_INLINE(.-)%f[L]LZK_INLINE") do
    local _, lines = body:gsub("\n", "")
    longest = math.max(longest, lines)
  end
  return longest
end

-- Scalars other than 0 and 1 are parameters of the graph, so the pieces
-- the chain is cut into have few distinct texts.
h.test("chain of 10,000 elementwise ops", function()
  local start = {0, 1, 2, 3, 4, 5, 6, 7}
  local x = tensor.new(start, {dtype = "f32"})
  tensor.mark_step()
  local want = {}
  for k, v in ipairs(start) do want[k] = v end
  for i = 1, N do
    if i % 3 == 0 then
      x = x - (i % 4 + 2)
      for k = 1, #want do want[k] = want[k] - (i % 4 + 2) end
    elseif i % 3 == 1 then
      x = x + (i % 5 + 2)
      for k = 1, #want do want[k] = want[k] + (i % 5 + 2) end
    else
      x = x:abs()
      for k = 1, #want do want[k] = math.abs(want[k]) end
    end
  end
  -- No one kernel computes the whole chain: 10,000 lines of C in one
  -- function took the C compiler minutes.
  if not tensor.is_eager() then
    local longest = longest_function(x)
    assert(longest < 2000, string.format("a function of %d lines", longest))
  end
  local total = x:sum()
  local values = synced(x, 8):tolist()
  local sum = 0
  for k = 1, #want do
    assert(values[k] == want[k], string.format("element %d: %s, want %s", k, values[k], want[k]))
    sum = sum + want[k]
  end
  assert(total:item() == sum)
end)

-- Different constants (0 and 1 are constants, not parameters) make pieces
-- of different texts: still each of bounded size.
h.test("chain of 10,000 ops with constants", function()
  local x = tensor.new({5, -5}, {dtype = "f64"})
  tensor.mark_step()
  local want = {5, -5}
  for i = 1, N do
    local s = i % 4  -- 0 and 1 are constants of the graph
    x = x * 2 + s
    x = x / 2
    for k = 1, 2 do want[k] = (want[k] * 2 + s) / 2 end
  end
  if not tensor.is_eager() then
    local longest = longest_function(x)
    assert(longest < 2000, string.format("a function of %d lines", longest))
  end
  local values = synced(x, 1000):tolist()
  for k = 1, 2 do assert(values[k] == want[k], string.format("element %d: %s, want %s", k, values[k], want[k])) end
end)

h.test("sum of 10,000 inputs", function()
  local inputs, want = {}, {0, 0, 0, 0}
  for i = 1, N do
    local row = {i % 7, -(i % 3), i % 11, 1}
    inputs[i] = tensor.new(row, {dtype = "f64"})
    for k = 1, 4 do want[k] = want[k] + row[k] end
  end
  tensor.mark_step()
  local acc = inputs[1]
  for i = 2, N do acc = acc + inputs[i] end
  local values = synced(acc, 8):tolist()
  for k = 1, 4 do assert(values[k] == want[k], string.format("element %d", k)) end
end)

h.test("mark_step over 10,000 pending values", function()
  local a = tensor.new({1, 2, 3}, {dtype = "f32"})
  tensor.mark_step()
  local results = {}
  for i = 1, N do results[i] = a * i end
  tensor.mark_step()
  for i = 1, N, 37 do
    local row = results[i]:tolist()
    assert(row[1] == i and row[2] == 2 * i and row[3] == 3 * i, string.format("value %d", i))
  end
end)

h.done("test_compile_scale")
