-- fashion_mnist.lua - trains an MLP (784-256-256-10, ReLU) on Fashion-MNIST
-- with cross-entropy and Adam, then reports test accuracy, speed and what
-- the compiler did, and writes a checkpoint and a loss curve.
--
--   lazylua scripts/fashion_mnist.lua [DATA_DIR] [--epochs N] [--batch N]
--           [--lr X] [--optimizer adam|sgd] [--out DIR] [--seed N] [--limit N]
--
-- DATA_DIR holds the four IDX files (gzip or not); the default is where
-- Debian's dataset-fashion-mnist package puts them. --limit N trains on the
-- first N training images only (0, the default: all of them).
local nn, optim, data, plot = require "nn", require "optim", require "data", require "plot"

local settings = {
  data = "/usr/share/datasets/fashion-mnist",
  epochs = 8,
  batch = 128,
  lr = 1e-3,
  optimizer = "adam",
  out = ".",
  seed = 1,
  limit = 0,
}

local function usage(message)
  io.stderr:write("fashion_mnist.lua: ", message, "\n",
    "usage: lazylua scripts/fashion_mnist.lua [DATA_DIR] [--epochs N] [--batch N] [--lr X]",
    " [--optimizer adam|sgd] [--out DIR] [--seed N] [--limit N]\n")
  os.exit(2)
end

do
  local i = 1
  while i <= #arg do
    local a = arg[i]
    local key = a:match("^%-%-(%w+)$")
    if key then
      if settings[key] == nil or key == "data" then usage("unknown option " .. a) end
      local value = arg[i + 1] or usage("missing value for " .. a)
      if type(settings[key]) == "number" then
        value = tonumber(value) or usage("not a number: " .. value)
        if key ~= "lr" then value = math.tointeger(value) or usage(a .. " must be an integer") end
      end
      settings[key] = value
      i = i + 2
    else
      settings.data = a
      i = i + 1
    end
  end
end
if settings.optimizer ~= "adam" and settings.optimizer ~= "sgd" then
  usage("--optimizer must be adam or sgd")
end

local function find(name)
  for _, candidate in ipairs({name .. ".gz", name}) do
    local path = settings.data .. "/" .. candidate
    local file = io.open(path, "rb")
    if file then
      file:close()
      return path
    end
  end
  io.stderr:write(string.format(
    "fashion_mnist.lua: %s not found in %s (install Debian's dataset-fashion-mnist, or pass the folder)\n",
    name, settings.data))
  os.exit(1)
end

-- ---------------------------------------------------------------------------
-- Data: images as f32 in [0, 1], standardized with the training set's mean
-- and standard deviation; labels as 1-based classes.

local wall = require("progress").now  -- seconds, monotonic
local start_load = wall()
local function load_images(name)
  local images = data.read_idx(find(name), {dtype = "f32"})
  return images:reshape(images:size(1), 28 * 28) / 255
end
local train_x, test_x = load_images("train-images-idx3-ubyte"), load_images("t10k-images-idx3-ubyte")
local train_y = data.read_idx(find("train-labels-idx1-ubyte")) + 1
local test_y = data.read_idx(find("t10k-labels-idx1-ubyte")) + 1
if settings.limit > 0 and settings.limit < train_x:size(1) then
  train_x, train_y = train_x:narrow(1, 1, settings.limit), train_y:narrow(1, 1, settings.limit)
end
local mean, std = train_x:mean():item(), nil
std = math.sqrt(((train_x - mean) ^ 2):mean():item())
train_x = (train_x - mean) / std
test_x = (test_x - mean) / std
tensor.mark_step()
print(string.format("Fashion-MNIST: %d training and %d test images from %s (%.2f s)",
  train_x:size(1), test_x:size(1), settings.data, wall() - start_load))

-- ---------------------------------------------------------------------------
-- Model and optimizer.

tensor.manual_seed(settings.seed)
local model = nn.Sequential(
  nn.Linear(784, 256), nn.ReLU(),
  nn.Linear(256, 256), nn.ReLU(),
  nn.Linear(256, 10))
local criterion = nn.CrossEntropyLoss()
local opt
if settings.optimizer == "adam" then
  opt = optim.Adam(model:parameters(), {lr = settings.lr})
else
  opt = optim.SGD(model:parameters(), {lr = settings.lr, momentum = 0.9})
end
local schedule = optim.CosineAnnealingLR(opt, settings.epochs)
print(model)
print(string.format("%s, lr %g, batch %d, %d epochs", settings.optimizer, settings.lr,
  settings.batch, settings.epochs))

local loader = data.DataLoader({train_x, train_y},
  {batch_size = settings.batch, shuffle = true, seed = settings.seed})

-- Test accuracy, in batches of 1000 without gradients (every batch runs
-- the same compiled graph).
local test_loader = data.DataLoader({test_x, test_y}, {batch_size = 1000, progress = false})
local function evaluate()
  model:eval()
  local correct = tensor.no_grad(function()
    local total = 0
    for x, y in test_loader:iter() do
      total = total + model(x):argmax(2):eq(y):sum():item()
    end
    return total
  end)
  model:train()
  return correct / test_x:size(1)
end

-- ---------------------------------------------------------------------------
-- Training.

local losses, epoch_losses, accuracies = {}, {}, {}
local steps, train_seconds = 0, 0
for epoch = 1, settings.epochs do
  local epoch_start = wall()
  local sum, count = 0, 0
  for x, y in loader:iter() do
    opt:zero_grad()
    local loss = criterion(model(x), y)
    loss:backward()
    opt:step()  -- ends with tensor.mark_step(): the step's graph runs here
    steps = steps + 1
    -- Reading the loss every 50 steps keeps the display alive without
    -- a sync per step (loss:item() is an observation).
    if steps % 50 == 0 then
      local value = loss:item()
      losses[#losses + 1] = value
      sum, count = sum + value, count + 1
      loader:set_postfix{loss = string.format("%.4f", value)}
    end
  end
  train_seconds = train_seconds + (wall() - epoch_start)
  schedule:step()
  local accuracy = evaluate()
  accuracies[#accuracies + 1] = accuracy
  epoch_losses[#epoch_losses + 1] = count > 0 and sum / count or 0 / 0
  print(string.format("epoch %d: train loss %.4f, test accuracy %.2f%%, %.0f steps/s", epoch,
    epoch_losses[#epoch_losses], 100 * accuracy, steps / train_seconds))
end

local m = tensor.metrics()
print(string.format("test accuracy %.2f%% after %d epochs", 100 * accuracies[#accuracies],
  settings.epochs))
print(string.format("%d steps in %.1f s: %.0f steps/s", steps, train_seconds, steps / train_seconds))
print(string.format("compiler: %d compiles (%.2f s), %d memory cache hits, %d disk cache hits, " ..
  "%d distinct graphs, %d graphs run natively, %d interpreted while compiling", m.compiles,
  m.compile_seconds, m.cache_hits, m.disk_hits, m.distinct_graphs, m.native_runs,
  m.interpreted_runs))
print("loss " .. plot.sparkline(losses))

local checkpoint = settings.out .. "/fashion_mnist.ckpt"
tensor.save(checkpoint, {model = model:state_dict(), accuracy = accuracies[#accuracies],
  epochs = settings.epochs, optimizer = settings.optimizer})
local chart = settings.out .. "/fashion_mnist_loss.svg"
local steps_axis = {}
for i = 1, #losses do steps_axis[i] = i * 50 end
plot.line_chart(chart, {{name = "training loss", x = steps_axis, values = losses}},
  {title = "Fashion-MNIST MLP", x_label = "step", y_label = "cross-entropy"})
print("saved " .. checkpoint .. " and " .. chart)
