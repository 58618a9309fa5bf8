-- ddp_driver.lua - a few training steps of the Fashion-MNIST MLP
-- (784-256-256-10) with a global batch of 128, in one process or on every
-- rank of `mpirun -np N` (128 / N images per rank: a sharded loader and
-- nn.DistributedDataParallel). Rank 0 writes the parameters to OUT
-- (tensor.save, {["1.weight"] = ..., ...}) for test_ddp_equivalence.sh.
--
--   lazylua ddp_driver.lua DATA_DIR STEPS OPTIMIZER OUT
local nn, optim, data, dist = require "nn", require "optim", require "data", require "dist"

local data_dir, steps, optimizer, out = arg[1], math.tointeger(arg[2]), arg[3], arg[4]
assert(data_dir and steps and (optimizer == "sgd" or optimizer == "adam") and out,
       "usage: ddp_driver.lua DATA_DIR STEPS sgd|adam OUT")
local ranks, rank = dist.size(), dist.rank()
local global_batch = 128

-- The first STEPS global batches' worth of images (and a few more, so the
-- shuffled order differs from the file's), pixels scaled to [0, 1].
local rows = math.tointeger(arg[5]) or steps * global_batch + 512
local images = data.read_idx(data_dir .. "/train-images-idx3-ubyte.gz", {dtype = "f32"})
local labels = data.read_idx(data_dir .. "/train-labels-idx1-ubyte.gz") + 1
images = (images:narrow(1, 1, rows):reshape(rows, 784) / 255):contiguous()
labels = labels:narrow(1, 1, rows):contiguous()
tensor.mark_step()

-- Rank 1's generator is seeded differently on purpose: the wrapper must
-- start it from rank 0's parameters.
tensor.manual_seed(1 + 1000 * rank)
local model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
local net = nn.DistributedDataParallel(model)
local opt = optimizer == "adam" and optim.Adam(model:parameters(), {lr = 1e-3})
  or optim.SGD(model:parameters(), {lr = 0.05, momentum = 0.9})
local criterion = nn.CrossEntropyLoss()
local loader = data.DataLoader({images, labels}, {batch_size = global_batch // ranks, shuffle = true, seed = 5,
  progress = false, shard = {rank, ranks}})

local done = 0
while done < steps do
  for x, y in loader:iter() do
    opt:zero_grad()
    criterion(net(x), y):backward()
    opt:step()
    done = done + 1
    if done == steps then break end
  end
end

if rank == 0 then
  local state = {}
  for _, pair in ipairs(model:named_parameters()) do state[pair[1]] = pair[2] end
  tensor.save(out, state)
end
