-- bench_dist.lua - the measurements of bench_dist.sh, which runs this
-- script with and without mpirun and prints the comparisons:
--
--   lazylua bench/bench_dist.lua step BATCH STEPS average|none
--     the Fashion-MNIST MLP step (784-256-256-10, ReLU, cross-entropy,
--     Adam, as scripts/fashion_mnist.lua) on synthetic batches of BATCH
--     images per rank; with "average", dist.average_gradients between
--     backward and the optimizer step. Prints (rank 0) one line:
--     "step seconds S comm C calls K" per step, S the slowest rank's.
--   lazylua bench/bench_dist.lua sizes
--     for messages of 1 KB to 16 MB: the time of one f32 all-reduce (sum,
--     eager, so the call goes straight to MPI) and of a copy of the same
--     bytes in this process (eager dst:copy_(src): one pass over memory,
--     read and write, as memcpy), each the best of several rounds, every
--     rank copying at the same time. Prints one line per size.
local dist, nn, optim = require "dist", require "nn", require "optim"
local now = require("progress").now
local what = arg[1]
local rank, size = dist.rank(), dist.size()

-- The slowest rank's value (they end at different moments without an
-- all-reduce in the step).
local function slowest(x)
  if size == 1 then return x end
  return dist.all_reduce(tensor.new({x}, {dtype = "f64"}), "max"):item()
end

if what == "step" then
  local batch, steps, mode = math.tointeger(tonumber(arg[2])), math.tointeger(tonumber(arg[3])), arg[4]
  tensor.manual_seed(1)
  local model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
    nn.Linear(256, 10))
  local opt = optim.Adam(model:parameters(), {lr = 1e-3})
  local criterion = nn.CrossEntropyLoss()
  -- A fixed pool of batches, different on each rank, so that data loading
  -- is not what is measured.
  tensor.manual_seed(100 + rank)
  local xs, ys = {}, {}
  for i = 1, 8 do
    xs[i] = tensor.randn(batch, 784)
    ys[i] = tensor.randint(1, 11, batch)
  end
  tensor.mark_step()
  local function step(i)
    opt:zero_grad()
    local loss = criterion(model(xs[i % 8 + 1]), ys[i % 8 + 1])
    loss:backward()
    if mode == "average" then dist.average_gradients(model) end
    opt:step()
    tensor.mark_step()
    return loss
  end
  for i = 1, 30 do step(i) end  -- warm up: first-step graphs, compiles
  step(0):item()
  dist.barrier()
  local before = dist.stats()
  local start = now()
  local last
  for i = 1, steps do last = step(i) end
  last:item()
  local seconds = now() - start
  local after = dist.stats()
  local per_step = slowest(seconds / steps)
  if rank == 0 then
    print(string.format("step seconds %.6e comm %.6e calls %g", per_step,
      (after.seconds - before.seconds) / steps, (after.calls - before.calls) / steps))
  end
elseif what == "sizes" then
  tensor.set_eager(true)
  local bytes = 1024
  while bytes <= 16 * 1024 * 1024 do
    local n = bytes // 4
    local src, dst = tensor.randn(n), tensor.zeros(n)
    local reps = math.max(5, math.min(2000, (64 * 1024 * 1024) // bytes))
    local best_reduce, best_copy = math.huge, math.huge
    for _ = 1, 5 do
      dist.barrier()
      local start = now()
      for _ = 1, reps do dist.all_reduce(dst, "sum") end
      best_reduce = math.min(best_reduce, slowest((now() - start) / reps))
      dist.barrier()
      start = now()
      for _ = 1, reps do dst:copy_(src) end
      best_copy = math.min(best_copy, slowest((now() - start) / reps))
    end
    if rank == 0 then print(string.format("size %d reduce %.6e copy %.6e", bytes, best_reduce, best_copy)) end
    bytes = bytes * 4
  end
else
  error("usage: lazylua bench/bench_dist.lua step BATCH STEPS average|none | sizes")
end
