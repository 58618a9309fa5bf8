-- test_memory_plan.lua - a graph's peak memory tracks what is live, not every
-- value it computes (compiler/memory_plan.h; the reference walker frees a
-- value after its last use too). tensor.metrics().peak_bytes is the
-- allocator's high-water mark of bytes in use since tensor.reset_metrics().
-- The values are checked against closed forms worked out by hand (every
-- product and sum is exact in f32), so a buffer shared too early shows up
-- as a wrong number. Eager mode has no graph: its peak depends on when Lua
-- collects the dead tensors, so there only the values are checked.
local h = dofile("helpers.lua")

local EAGER = tensor.is_eager()
local MiB = 1024 * 1024

-- A [rows, 512] f32 value is rows * 2 KiB: with rows = 1024, 2 MiB, which the
-- allocator hands out as exactly 2 MiB (a multiple of its 2 MiB huge page).
local ROWS, COLS = 1024, 512
local VALUE_BYTES = ROWS * COLS * 4

-- x0[i][j] = i - 1 and w = 1/512 everywhere: x @ w replaces each row by its
-- mean, exactly (partial sums of integers / 512 are exact in f32).
local function inputs()
  local x0 = tensor.arange(ROWS):float():reshape(ROWS, 1):expand(ROWS, COLS):contiguous()
  local w = tensor.full({COLS, COLS}, 1 / COLS)
  tensor.sync(x0, w)
  return x0, w
end

-- Runs f (which records a graph and syncs it) and returns the peak bytes in
-- use above what was in use before it.
local function peak_during(f)
  collectgarbage()
  collectgarbage()
  tensor.reset_metrics()
  local before = tensor.metrics().bytes_in_use
  local result = f()
  return tensor.metrics().peak_bytes - before, result
end

h.test("peak_bytes starts at bytes_in_use after reset_metrics and only grows", function()
  tensor.reset_metrics()
  local m = tensor.metrics()
  assert(m.peak_bytes == m.bytes_in_use, m.peak_bytes .. " vs " .. m.bytes_in_use)
  local t = tensor.ones(ROWS, COLS) * 2
  tensor.sync(t)
  local after = tensor.metrics()
  assert(after.peak_bytes >= after.bytes_in_use)
  assert(after.peak_bytes - m.peak_bytes >= VALUE_BYTES, "a 2 MiB result raised the peak")
  h.eq(t[ROWS][COLS]:item(), 2)
end)

-- 20 products in a row, each followed by +1: 41 values of 2 MiB, of which
-- only the one being computed, the one it reads, and `a` (read at the end)
-- are live at once.
h.test("a chain of 20 large intermediates peaks at a few of them", function()
  local x0, w = inputs()
  local peak, out = peak_during(function()
    local a = x0:matmul(w) * 3  -- row i: 3 (i - 1), live to the end
    local x = x0
    for _ = 1, 20 do x = x:matmul(w) + 1 end
    local result = (x + a):sum(2)  -- row i: 512 (4 (i - 1) + 20)
    tensor.sync(result)
    return result
  end)
  local got = out:tolist()
  for i = 1, ROWS do
    if got[i] ~= 512 * (4 * (i - 1) + 20) then
      error(string.format("row %d: %s, expected %d", i, got[i], 512 * (4 * (i - 1) + 20)))
    end
  end
  if not EAGER then
    -- Live at the peak: a, the product being computed and the value it
    -- reads, and maybe one more while a buffer changes hands; 41 without
    -- the memory plan.
    assert(peak <= 5 * VALUE_BYTES, string.format("peak %.1f MiB for 2 MiB values", peak / MiB))
  end
end)

-- Values of different sizes share buffers: a wide [1024, 1536] product is
-- computed, reduced and dropped, then narrow ones reuse its memory; a value
-- read again at the end must survive all of it.
h.test("values of several sizes share buffers without overwriting a live one", function()
  local x0, w = inputs()
  local wide = tensor.full({COLS, 3 * COLS}, 1 / COLS)
  tensor.sync(wide)
  local peak, out = peak_during(function()
    local keep = x0 + 5  -- row i: i + 4, read at the end
    local x = x0
    for _ = 1, 6 do
      local y = x:matmul(wide)                    -- [1024, 1536], row i: mean of x's row
      x = y:narrow(2, 1, COLS) + y:narrow(2, COLS + 1, COLS) - y:narrow(2, 2 * COLS + 1, COLS)
      x = x:matmul(w) + 1                         -- row i: (mean) + 1
    end
    local result = (x * 2 - keep):sum(2)          -- row i: 512 (2 (i - 1 + 6) - (i + 4))
    tensor.sync(result)
    return result
  end)
  local got = out:tolist()
  for i = 1, ROWS do
    local want = 512 * (2 * (i - 1 + 6) - (i + 4))
    if got[i] ~= want then error(string.format("row %d: %s, expected %d", i, got[i], want)) end
  end
  if not EAGER then
    -- keep, one wide value (3 of the narrow ones) and two narrow ones; 31
    -- narrow-sized values without the plan.
    assert(peak <= 8 * VALUE_BYTES, string.format("peak %.1f MiB for 2 MiB values", peak / MiB))
  end
end)

-- The same graph run again reuses its plan: the second run of a graph
-- keeps the same peak (nothing leaks from one run into the next).
h.test("a graph run twice peaks the same both times", function()
  local x0, w = inputs()
  local function step()
    local x = x0
    for _ = 1, 10 do x = x:matmul(w) + 1 end
    local result = x:sum(2)
    tensor.sync(result)
    return result
  end
  local first = peak_during(step)
  local second, out = peak_during(step)
  h.eq(out[ROWS]:item(), 512 * (ROWS - 1 + 10))
  if not EAGER then
    assert(first <= 4 * VALUE_BYTES and second <= 4 * VALUE_BYTES,
           string.format("peaks %.1f and %.1f MiB", first / MiB, second / MiB))
  end
end)

h.done("test_memory_plan")
