-- ordering.lua - several collectives recorded in one step, synced in a
-- different order on each rank (rank 0 reads c before a, rank 1 calls
-- mark_step first, rank 2 reads only b then broadcasts): MPI sees them in
-- recording order everywhere, so no rank deadlocks or mixes up results.
local h = dofile((arg[0]:match("^(.*)/") or ".") .. "/helpers.lua")
local dist, r, n = h.dist, h.rank, h.size
local s = n * (n + 1) // 2

for round = 1, 3 do
  local base = tensor.arange(5):float() + round
  local a = dist.all_reduce(base * (r + 1))               -- (k + round) * s
  local b = dist.all_reduce((base * (r + 1)):long(), "max")  -- (k + round) * n
  local c = dist.all_reduce(tensor.full({2, 2}, r + 1.0):double(), "min")  -- 1
  local d = dist.broadcast(base * 0 + r, n - 1)            -- n - 1
  local want_a, want_b = {}, {}
  for k = 0, 4 do
    want_a[k + 1] = (k + round) * s * 1.0
    want_b[k + 1] = (k + round) * n
  end
  if r == 0 then
    h.expect("c read first", c, "f64", {2, 2}, {1.0, 1.0, 1.0, 1.0})
    h.expect("a read second", a, "f32", {5}, want_a)
    h.expect("d read third", d, "f32", {5}, {n - 1.0, n - 1.0, n - 1.0, n - 1.0, n - 1.0})
    h.expect("b read last", b, "i64", {5}, want_b)
  elseif r == 1 then
    tensor.mark_step()
    h.expect("a after mark_step", a, "f32", {5}, want_a)
    h.expect("b after mark_step", b, "i64", {5}, want_b)
  else
    h.expect("b read alone", b, "i64", {5}, want_b)
  end
  -- A collective recorded after the others, read on every rank at once.
  local e = dist.all_reduce(tensor.new({r + 1}), "sum")
  h.expect("a later collective", e, "i64", {1}, {s})
  -- Values read after the step ended are still right (kept results).
  if r ~= 0 then
    h.expect("c read after the step", c, "f64", {2, 2}, {1.0, 1.0, 1.0, 1.0})
    h.expect("d read after the step", d, "f32", {5}, {n - 1.0, n - 1.0, n - 1.0, n - 1.0, n - 1.0})
  end
  if r == 2 then h.expect("a read last", a, "f32", {5}, want_a) end
end

-- One rank syncs its step twice, the other once: a value computed from two
-- collectives, observed at different points.
do
  local x = dist.all_reduce(tensor.ones(3) * (r + 1))
  local y = dist.all_reduce(tensor.ones(3) * 2 * (r + 1))
  if r == 0 then
    tensor.sync(x)
    tensor.mark_step()
  end
  h.expect("sum of two collectives", x + y, "f32", {3}, {3.0 * s, 3.0 * s, 3.0 * s})
end

h.done("ordering")
