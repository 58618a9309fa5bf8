-- errors.lua - every bad use of a collective is a Lua error, caught with
-- pcall on every rank with its message checked, and the job goes on: the
-- collective after each one works.
local h = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")
local dist, r, n = h.dist, h.rank, h.size
local s = n * (n + 1) // 2

-- After each error: a collective on every rank still gives the right sum.
local checks = 0
local function still_works(what)
  checks = checks + 1
  h.expect("collective after " .. what, dist.all_reduce(tensor.new({r + 1, checks})), "i64", {2},
    {s, n * checks})
end

-- A collective whose result is read at once (lazy: the error comes at the
-- sync, eager: at the call).
local function reduce_now(t, op)
  return dist.all_reduce(t, op):tolist()
end

-- Shapes that differ between ranks: rank q has [2, q + 2]. Every rank gets
-- the same message, naming rank 0's shape and the first rank that differs.
do
  local message = h.expect_error("shape mismatch",
    "dist: the ranks disagree on a collective: rank 0 does all_reduce_sum of f32 [2, 2], " ..
    "rank 1 does all_reduce_sum of f32 [2, 3]", reduce_now, tensor.ones(2, r + 2))
  if message:find("corrupt", 1, true) then h.fail("unexpected text: " .. message) end
  still_works("a shape mismatch")
end
-- Only the last rank differs: it is the one named.
do
  local shape = r == n - 1 and {4} or {3}
  h.expect_error("last rank's shape", string.format(
    "rank 0 does all_reduce_max of i64 [3], rank %d does all_reduce_max of i64 [4]", n - 1),
    reduce_now, tensor.zeros(shape, {dtype = "i64"}), "max")
  still_works("the last rank's shape")
end
-- Dtypes that differ.
do
  local dtype = r == 0 and "f32" or "f64"
  h.expect_error("dtype mismatch",
    "rank 0 does all_reduce_sum of f32 [3], rank 1 does all_reduce_sum of f64 [3]",
    reduce_now, tensor.ones({3}, {dtype = dtype}))
  still_works("a dtype mismatch")
end
-- Ops that differ (sum here, max there), and broadcast roots that differ.
do
  h.expect_error("op mismatch",
    "rank 0 does all_reduce_sum of f32 [2], rank 1 does all_reduce_max of f32 [2]",
    reduce_now, tensor.ones(2), r == 0 and "sum" or "max")
  still_works("an op mismatch")
  h.expect_error("root mismatch", "rank 0 does broadcast of f32 [2] from root 0, rank 1 does " ..
    "broadcast of f32 [2] from root 1", function()
      return dist.broadcast(tensor.ones(2), math.min(r, 1)):tolist()
    end)
  still_works("a root mismatch")
end
-- A barrier on one rank while the other does an all-reduce.
do
  h.expect_error("barrier against all_reduce",
    "rank 0 does barrier(), rank 1 does all_reduce_sum of f32 [1]", function()
      if r == 0 then dist.barrier() else reduce_now(tensor.ones(1)) end
    end)
  still_works("a barrier against an all_reduce")
end

-- Errors found before any rank calls MPI: the same on every rank, since
-- every rank makes the same mistake.
h.expect_error("unknown op", 'dist.all_reduce: op must be "sum", "mean", "max" or "min", got "prod"',
  dist.all_reduce, tensor.ones(2), "prod")
h.expect_error("op not a string", 'got 3', dist.all_reduce, tensor.ones(2), 3)
still_works("an unknown op")
h.expect_error("mean of i64", 'dist.all_reduce: "mean" needs an f32 or f64 tensor, got i64',
  dist.all_reduce, tensor.ones({2}, {dtype = "i64"}), "mean")
h.expect_error("mean of i32", 'got i32', dist.all_reduce, tensor.ones({2}, {dtype = "i32"}), "mean")
still_works("a mean of integers")
h.expect_error("sum of bool", "dist.all_reduce: cannot sum a bool tensor", dist.all_reduce,
  tensor.new({true, false}))
h.expect_error("default op on bool", "cannot sum a bool tensor", dist.all_reduce, tensor.new({true}), "sum")
still_works("a sum of bools")
h.expect_error("root too large", string.format(
  "dist.broadcast: root %d is not a rank of this job (ranks 0 to %d)", n, n - 1),
  dist.broadcast, tensor.ones(2), n)
h.expect_error("root negative", "dist.broadcast: root -1 is not a rank of this job", dist.broadcast,
  tensor.ones(2), -1)
h.expect_error("root not an integer", "dist.broadcast: root must be an integer rank, got 0.5",
  dist.broadcast, tensor.ones(2), 0.5)
still_works("a bad root")
h.expect_error("number for a tensor", "dist.all_reduce: expected a tensor, got number", dist.all_reduce, 5)
h.expect_error("nil for a tensor", "dist.all_reduce: expected a tensor, got nil", dist.all_reduce)
h.expect_error("table for a tensor", "dist.broadcast: expected a tensor, got table", dist.broadcast, {1, 2})
h.expect_error("string for a module", "dist.average_gradients: expected a module or a list of tensors, got string",
  dist.average_gradients, "model")
h.expect_error("list with a number", "dist.average_gradients: item 2 is not a tensor (number)",
  dist.average_gradients, {tensor.ones(1), 7})
h.expect_error("bad bucket size", "dist.average_gradients: bucket_bytes must be a positive integer",
  dist.average_gradients, {tensor.ones(1)}, {bucket_bytes = 0})
still_works("a non-tensor argument")

-- A collective inside a tensor.scan body (recorded once, it would run once
-- per iteration in eager mode but once in all in lazy mode): refused in
-- every mode, with a hint.
h.expect_error("collective in a scan body",
  "dist: a collective cannot run inside a tensor.scan body (the body is recorded once); " ..
  "reduce the scan's results after it", function()
    local carry = tensor.scan(function(c, x) return c + dist.all_reduce(x), nil end,
      tensor.zeros(2), tensor.ones(3, 2))
    return carry:tolist()
  end)
still_works("a collective in a scan body")

-- pcall around the whole of a lazy step: the failed step's other results
-- are not left half-run (a fresh step computes them again).
do
  local ok = pcall(function()
    local good = dist.all_reduce(tensor.ones(2) * (r + 1))
    local bad = dist.all_reduce(tensor.ones(r + 1))
    return good:tolist(), bad:tolist()
  end)
  if ok then h.fail("the step with a mismatched shape did not fail") end
  still_works("a failed step")
  local again = dist.all_reduce(tensor.ones(2) * (r + 1))
  h.expect("the step again, fixed", again, "f32", {2}, {s * 1.0, s * 1.0})
end

-- A rank that skipped a collective (an error before it) and makes its next
-- one, of the same shape, from another line: refused at once on every rank,
-- naming both lines. (Without the recording line in the check, rank 0's
-- call pairs with rank 1's next one and returns a sum of the two.) The
-- collectives are made right here, not through reduce_now, so that their
-- lines differ.
do
  local skipped_line = debug.getinfo(1, "l").currentline + 3
  local ok, message = pcall(function()
    if r == 1 then error("skipped on rank 1") end
    return dist.all_reduce(tensor.ones(2)):tolist()
  end)
  if r == 1 then
    if ok or not tostring(message):find("skipped on rank 1", 1, true) then
      h.fail("rank 1's first call: " .. tostring(message))
    end
    message = h.expect_error("the call after a skipped one", "recorded at line", function()
      return dist.all_reduce(tensor.ones(2) * 5):tolist()
    end)
  elseif ok then
    h.fail("a collective paired with another rank's later one gave a value: " .. h.show(message))
  end
  local next_line = skipped_line + 7
  for _, part in ipairs({
    string.format("rank 0 does all_reduce_sum of f32 [2] as its collective"),
    string.format("recorded at line %d, rank 1 does all_reduce_sum of f32 [2] as its collective",
      skipped_line),
    string.format("recorded at line %d: every rank must make the same collectives", next_line)}) do
    if not tostring(message):find(part, 1, true) then
      h.fail(string.format("a skipped collective: '%s' lacks '%s'", message, part))
    end
  end
  still_works("a skipped collective")
end

-- A step that failed on rank 1 only, before its collective ran (an index
-- out of range there): lazily, rank 1 recorded the collective and dropped
-- it, so its next one, from the same line and of the same shape, has the
-- next sequence number and is refused rather than paired with rank 0's
-- first. Eagerly the failing op comes before the collective is made: rank
-- 1 never made the call, and its next one is the right partner.
do
  local function attempt(bad)
    local index = tensor.new({bad and 9 or 1})
    return dist.all_reduce(tensor.ones(3):index_select(1, index)):tolist()
  end
  if r == 1 then h.expect_error("the failing step", "index_select", attempt, true) end
  if h.mode() == "eager" then
    local got = attempt(false)
    if got[1] ~= n then h.fail("eager: after a failed op, the collective gave " .. h.show(got)) end
  else
    local message = h.expect_error("a dropped collective",
      "rank 0 does all_reduce_sum of f32 [1] as its collective", attempt, false)
    local first, second = message:match("as its collective (%d+).- as its collective (%d+)")
    if not first or tonumber(second) ~= tonumber(first) + 1 then
      h.fail("a dropped collective: the numbers in " .. message)
    end
  end
  still_works("a dropped collective")
end

h.done("errors")
