-- single.lua - a script using dist without a launcher: one rank, every
-- collective the identity, and MPI never started (its init, when the module
-- loads, would start helper threads: the thread count stays what it was). Also run by
-- `mpirun -np 1` (argument "launched"): MPI is initialized, size 1.
local launched = arg[1] == "launched"
local function threads()
  for line in io.lines("/proc/self/status") do
    local count = line:match("^Threads:%s+(%d+)")
    if count then return tonumber(count) end
  end
end
local threads_before = threads()

local dist = require "dist"  -- where MPI_Init would run
local threads_after = threads()
local function fail(message) error(message, 2) end
local function same(a, b)
  if type(a) == "table" then
    if type(b) ~= "table" or #a ~= #b then return false end
    for i = 1, #a do if not same(a[i], b[i]) then return false end end
    return true
  end
  return a == b and math.type(a) == math.type(b)
end

if dist.size() ~= 1 then fail("size " .. dist.size()) end
if dist.rank() ~= 0 then fail("rank " .. dist.rank()) end
if dist.is_initialized() ~= launched then fail("is_initialized() is " .. tostring(dist.is_initialized())) end

-- Every collective is the identity, in place, returning its argument.
local cases = {
  {tensor.new({1.5, -2, 3}), {1.5, -2.0, 3.0}},
  {tensor.new({{1, 2}, {3, 4}}, {dtype = "i32"}), {{1, 2}, {3, 4}}},
  {tensor.new({5, 7}), {5, 7}},
  {tensor.new({1.25}, {dtype = "f64"}), {1.25}},
}
for _, case in ipairs(cases) do
  local t, want = case[1], case[2]
  for _, op in ipairs({"sum", "max", "min"}) do
    if dist.all_reduce(t, op) ~= t then fail("all_reduce did not return its argument") end
    if not same(t:tolist(), want) then fail(op .. " changed the values: " .. tostring(t)) end
  end
  if t:dtype() == "f32" or t:dtype() == "f64" then
    dist.all_reduce(t, "mean")
    if not same(t:tolist(), want) then fail("mean changed the values") end
  end
  dist.broadcast(t, 0)
  if not same(t:tolist(), want) then fail("broadcast changed the values") end
end
local flags = dist.all_reduce(tensor.new({true, false}), "max")
if not same(flags:tolist(), {true, false}) then fail("bool max changed the values") end
local lazy_value = dist.all_reduce(tensor.arange(4):float() * 2)
if not same(lazy_value:tolist(), {0.0, 2.0, 4.0, 6.0}) then fail("a computed input changed") end
dist.barrier()

-- The same argument checks as with several ranks.
local ok, message = pcall(dist.broadcast, tensor.ones(1), 1)
if ok or not message:find("root 1 is not a rank of this job (ranks 0 to 0)", 1, true) then
  fail("root 1 of a 1-rank job: " .. tostring(message))
end
ok, message = pcall(dist.all_reduce, tensor.ones({1}, {dtype = "i64"}), "mean")
if ok or not message:find('"mean" needs an f32 or f64 tensor', 1, true) then fail("mean of i64: " .. tostring(message)) end
ok, message = pcall(dist.all_reduce, 3)
if ok or not message:find("expected a tensor, got number", 1, true) then fail("number: " .. tostring(message)) end

-- Gradient averaging leaves the gradients as they are.
local w = tensor.ones(3):requires_grad(true)
local loss = (w * tensor.new({1.0, 2.0, 3.0})):sum()
loss:backward()
dist.average_gradients({w}, {bucket_bytes = 4})
dist.broadcast_parameters({w})
if not same(w:grad():tolist(), {1.0, 2.0, 3.0}) then fail("average_gradients changed a gradient") end

-- Nothing went through MPI (a 1-rank job skips it too).
local stats = dist.stats()
if stats.calls ~= 0 or stats.bytes ~= 0 then fail("collectives counted: " .. stats.calls) end
if not launched and threads_after ~= threads_before then
  fail(string.format("threads %d -> %d: was MPI started?", threads_before, threads_after))
end
print("single: ok (" .. (launched and "mpirun -np 1" or "no launcher") .. ")")
