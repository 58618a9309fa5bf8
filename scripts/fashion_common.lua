-- fashion_common.lua - what fashion_mnist.lua and fashion_cnn.lua share:
-- options, the Fashion-MNIST data, the training loop with its progress
-- display and evaluation, the report, the checkpoint and the loss curve.
-- Each script describes its model and defaults and calls run():
--
--   dofile(script_dir .. "/fashion_common.lua").run{
--     name = "fashion_mnist",            -- files: NAME.ckpt, NAME_loss.svg
--     title = "Fashion-MNIST MLP",       -- of the loss curve
--     epochs = 8, batch = 128,           -- defaults
--     optimizers = {"adam", "sgd"},      -- --optimizer choices (first: default)
--     image_shape = {784},               -- of one image in the model's input
--     eval_batch = 1000,
--     model = function(nn) return nn.Sequential(...) end,
--   }
local nn, optim, data, plot = require "nn", require "optim", require "data", require "plot"
local dist = require "dist"
local wall = require("progress").now  -- seconds, monotonic

-- Under mpirun (docs/training.md, "Data-parallel training") every rank
-- trains on its shard of each global batch, and only rank 0 reports and
-- writes files. Without it there is one rank and nothing changes.
local rank, ranks = dist.rank(), dist.size()
local print = rank == 0 and print or function() end

local M = {}

local function parse_options(spec)
  local settings = {
    data = "/usr/share/datasets/fashion-mnist",
    epochs = spec.epochs,
    batch = spec.batch,
    lr = 1e-3,
    optimizer = spec.optimizers[1],
    out = ".",
    seed = 1,
    limit = 0,
    steps = 0,        -- stop after this many training steps in all (0: run every epoch)
    save_state = "",  -- write the training state here after each epoch and at a --steps stop
    resume = "",      -- continue the run whose state is in this file
    export = "",      -- write the trained model here as ONNX (onnx.export)
  }
  local given = {}  -- the options on the command line
  local script = spec.name .. ".lua"
  local function usage(message)
    local choices = #spec.optimizers > 1 and (" [--optimizer " .. table.concat(spec.optimizers, "|") .. "]") or ""
    io.stderr:write(script, ": ", message, "\n", "usage: lazylua scripts/", script,
      " [DATA_DIR] [--epochs N] [--batch N] [--lr X]", choices, " [--out DIR] [--seed N] [--limit N]",
      " [--steps N] [--save-state FILE] [--resume FILE] [--export FILE.onnx]\n")
    os.exit(2)
  end
  local i = 1
  while i <= #arg do
    local a = arg[i]
    local key = a:match("^%-%-(%w[%w%-]*)$")
    key = key and key:gsub("%-", "_")
    if key then
      if settings[key] == nil or key == "data" or (key == "optimizer" and #spec.optimizers < 2) then
        usage("unknown option " .. a)
      end
      local value = arg[i + 1] or usage("missing value for " .. a)
      if type(settings[key]) == "number" then
        value = tonumber(value) or usage("not a number: " .. value)
        if key ~= "lr" then value = math.tointeger(value) or usage(a .. " must be an integer") end
      end
      settings[key] = value
      given[key] = true
      i = i + 2
    elseif a:match("^%-") then
      usage("unknown option " .. a)
    else
      settings.data = a
      i = i + 1
    end
  end
  local known = false
  for _, choice in ipairs(spec.optimizers) do known = known or settings.optimizer == choice end
  if not known then usage("--optimizer must be " .. table.concat(spec.optimizers, " or ")) end
  if settings.epochs < 1 or settings.batch < 1 or settings.limit < 0 or settings.lr <= 0 or settings.steps < 0 then
    usage("--epochs and --batch must be positive, --lr positive, --limit and --steps 0 or more")
  end
  if settings.batch % ranks ~= 0 then
    usage(string.format("--batch %d (the global batch) does not divide among %d ranks", settings.batch, ranks))
  end
  return settings, given
end

-- The settings that make a run what it is: a resumed run takes them from
-- its state file (and refuses a command line that asks for others).
local RUN_SETTINGS = {"epochs", "batch", "lr", "optimizer", "seed", "limit"}

-- Reads a --resume file, checks it, and applies its run settings.
local function read_state(spec, settings, given)
  local script = spec.name .. ".lua"
  local function refuse(message)
    io.stderr:write(script, ": --resume ", settings.resume, ": ", message, "\n")
    os.exit(1)
  end
  local ok, state = pcall(tensor.load, settings.resume)
  if not ok then refuse((tostring(state):gsub("^[^\n]-:%d+: ", ""))) end
  if type(state.script) ~= "string" or type(state.settings) ~= "table" or type(state.position) ~= "table" then
    refuse("not a training state (write one with --save-state)")
  end
  if state.script ~= spec.name then refuse("the state of a " .. state.script .. ".lua run, not of " .. script) end
  -- A position counts the batches of one rank's shard: it means the same
  -- only with as many ranks (every rank reads the same file).
  local saved_ranks = state.ranks or 1
  if saved_ranks ~= ranks then
    refuse(string.format("the state of a run on %d rank%s, this one has %d: resume with as many ranks",
      saved_ranks, saved_ranks == 1 and "" or "s", ranks))
  end
  for _, key in ipairs(RUN_SETTINGS) do
    local saved = state.settings[key]
    if given[key] and settings[key] ~= saved then
      refuse(string.format("--%s %s differs from the resumed run's %s", key, tostring(settings[key]), tostring(saved)))
    end
    settings[key] = saved
  end
  return state
end

-- Images as f32 of spec.image_shape, standardized with the training set's
-- mean and standard deviation (the same values as for the images scaled to
-- [0, 1]); labels as 1-based classes.
local function load_data(spec, settings)
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
      "%s.lua: %s not found in %s (install Debian's dataset-fashion-mnist, or pass the folder)\n",
      spec.name, name, settings.data))
    os.exit(1)
  end
  local start = wall()
  -- Pixels as read (0 to 255): dividing by 255 is folded into the
  -- standardization below.
  local function load_images(name)
    local images = data.read_idx(find(name), {dtype = "f32"})
    return images:reshape(images:size(1), table.unpack(spec.image_shape))
  end
  local train_x, test_x = load_images("train-images-idx3-ubyte"), load_images("t10k-images-idx3-ubyte")
  local train_y = data.read_idx(find("train-labels-idx1-ubyte")) + 1
  local test_y = data.read_idx(find("t10k-labels-idx1-ubyte")) + 1
  if settings.limit > 0 and settings.limit < train_x:size(1) then
    train_x, train_y = train_x:narrow(1, 1, settings.limit), train_y:narrow(1, 1, settings.limit)
  end
  -- Mean and standard deviation of the training pixels from the sums of
  -- the pixels and of their squares, over blocks of 1000 images: every
  -- block is the same small graph, so after the first few it runs compiled
  -- and fused, and no image-sized temporary is made (the squares of the
  -- whole set would be 188 MB of fresh memory). The sums are in f64, where
  -- integer pixels add up exactly in any order: native and interpreted
  -- blocks agree, and every run gets the same mean and deviation. The
  -- variance, about 60% of the mean square, then loses nothing to being a
  -- difference.
  local count, rows = train_x:numel(), train_x:size(1)
  local sum, sum_squares = 0, 0
  for first = 1, rows, 1000 do
    local block = train_x:narrow(1, first, math.min(1000, rows - first + 1)):double()
    local block_sum, block_squares = block:sum(), (block * block):sum()
    tensor.sync(block_sum, block_squares)
    sum, sum_squares = sum + block_sum:item(), sum_squares + block_squares:item()
  end
  local mean = sum / count
  local std = math.sqrt(math.max(sum_squares / count - mean * mean, 0))
  -- (x / 255 - m) / s with m, s of x / 255 is (x - mean) / std in pixels,
  -- computed in place by eager ops: a graph that runs once is interpreted
  -- while its native code is built, and would write the results to new
  -- memory, whose first touch costs more than the arithmetic.
  local was_eager = tensor.set_eager(true)
  train_x:sub_(mean):div_(std)
  test_x:sub_(mean):div_(std)
  tensor.set_eager(was_eager)
  tensor.mark_step()
  print(string.format("Fashion-MNIST: %d training and %d test images from %s (%.2f s)",
    train_x:size(1), test_x:size(1), settings.data, wall() - start))
  return train_x, train_y, test_x, test_y, {mean = mean, std = std}
end

function M.run(spec)
  local settings, given = parse_options(spec)
  local resumed = settings.resume ~= "" and read_state(spec, settings, given) or nil
  local train_x, train_y, test_x, test_y, pixels = load_data(spec, settings)

  tensor.manual_seed(settings.seed)
  local model = spec.model(nn)
  -- With several ranks the forward goes through the wrapper, which starts
  -- every rank from rank 0's parameters and averages the gradients after
  -- each backward; the state (checkpoint, --save-state) is the bare model's.
  local net = ranks > 1 and nn.DistributedDataParallel(model) or model
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
  if ranks > 1 then
    print(string.format("data-parallel on %d ranks: %d images per rank in each batch of %d", ranks,
      settings.batch // ranks, settings.batch))
  end

  -- Every rank shuffles with the same seed and takes its share: batch k of
  -- all ranks together is batch k of a single process.
  local loader = data.DataLoader({train_x, train_y},
    {batch_size = settings.batch // ranks, shuffle = true, seed = settings.seed, progress = rank == 0,
     shard = ranks > 1 and {rank, ranks} or nil})
  -- Test accuracy in batches without gradients (every batch of one shape
  -- runs the same compiled graph). Every rank evaluates the whole test set
  -- with its model, the same on every rank (checked at the end).
  local test_loader = data.DataLoader({test_x, test_y}, {batch_size = spec.eval_batch, progress = false})
  local function evaluate()
    model:eval()
    local correct = tensor.no_grad(function()
      -- The count stays a tensor until the end: each batch is one graph
      -- ended by mark_step, with no value read into Lua on the way.
      local total = nil
      for x, y in test_loader:iter() do
        local hits = model(x):argmax(2):eq(y):sum()
        total = total and total + hits or hits
        tensor.mark_step()
      end
      return total and total:item() or 0
    end)
    model:train()
    return correct / test_x:size(1)
  end

  -- The loss is read every `every` steps (an observation, so not every
  -- step): 50 on the full data set, fewer on a small one so the curve
  -- still has points.
  local every = math.max(1, math.min(50, #loader // 4))
  local losses, epoch_losses, accuracies = {}, {}, {}
  local steps, train_seconds = 0, 0
  local first_epoch, skip, sum, count = 1, 0, 0, 0

  -- The whole training state: parameters, optimizer (moments, step
  -- counts, lr), schedule, the random generator, where the loader is (the
  -- seeded order of epoch e depends on the seed and e only) and the history
  -- the report and the loss curve are made of.
  -- --export: the model alone, as ONNX: its input is a batch of
  -- standardized images (any batch size), its output the logits of the ten
  -- classes. Written at the end of the run, or at a --steps stop.
  local function export_model()
    if settings.export == "" or rank ~= 0 then return end
    require("onnx").export(model, test_x:narrow(1, 1, 2), settings.export, {dynamic_batch = true,
      doc_string = string.format("%s: input [batch, %s] images standardized as (pixel - %.6f) / %.6f " ..
        "(pixels 0 to 255); output [batch, 10] logits", spec.title,
        table.concat(spec.image_shape, ", "), pixels.mean, pixels.std)})
    print("exported " .. settings.export)
  end

  local function save_state(epoch, batch)
    if rank ~= 0 then return end  -- every rank's state is the same
    tensor.save(settings.save_state, {
      script = spec.name,
      ranks = ranks ~= 1 and ranks or nil,
      settings = (function()
        local run = {}
        for _, key in ipairs(RUN_SETTINGS) do run[key] = settings[key] end
        return run
      end)(),
      model = model:state_dict(), optimizer = opt:state_dict(), schedule = schedule:state_dict(),
      rng = tensor.get_rng_state(),
      position = {epoch = epoch, batch = batch},
      history = {steps = steps, train_seconds = train_seconds, losses = losses, epoch_losses = epoch_losses,
        accuracies = accuracies, sum = sum, count = count},
    })
  end

  if resumed then
    model:load_state_dict(resumed.model)
    opt:load_state_dict(resumed.optimizer)
    schedule:load_state_dict(resumed.schedule)
    tensor.set_rng_state(resumed.rng)
    local history = resumed.history
    steps, train_seconds = history.steps, history.train_seconds
    losses, epoch_losses, accuracies = history.losses, history.epoch_losses, history.accuracies
    local epoch, batch = resumed.position.epoch, resumed.position.batch
    if batch >= #loader then  -- a finished epoch (its schedule step and evaluation done)
      first_epoch = epoch + 1
    else  -- within an epoch: its order again, past the batches already trained on
      first_epoch, skip, sum, count = epoch, batch, history.sum, history.count
    end
    loader.epoch = first_epoch - 1
    print(string.format("resumed from %s: epoch %d, batch %d, %d steps done", settings.resume, first_epoch,
      skip, steps))
  end

  -- Each rank has its own copy of the model: after the same averaged steps
  -- they must be equal, bit for bit (the largest difference of max and min
  -- over the ranks, element by element, is 0).
  local function check_ranks_agree()
    if ranks == 1 then return end
    local differences = {}
    for i, p in ipairs(model:parameters()) do
      local high, low = dist.all_reduce(p:detach():clone(), "max"), dist.all_reduce(p:detach():clone(), "min")
      differences[i] = (high - low):abs():max()
    end
    local largest = tensor.stack(differences):max():item()  -- one sync for them all
    if largest ~= 0 then
      io.stderr:write(string.format("%s.lua: the ranks' parameters differ (by up to %g)\n", spec.name, largest))
      os.exit(1)
    end
    print(string.format("parameters identical on %d ranks", ranks))
  end

  local stopped = false
  for epoch = first_epoch, settings.epochs do
    local epoch_start = wall()
    if epoch > first_epoch then sum, count, skip = 0, 0, 0 end
    local batch = 0
    for x, y in loader:iter() do
      batch = batch + 1
      if batch > skip then
        opt:zero_grad()
        local loss = criterion(net(x), y)
        loss:backward()
        opt:step()  -- ends with tensor.mark_step(): the step's graph runs here
        steps = steps + 1
        if steps % every == 0 then
          -- the loss of the global batch: the mean of the ranks' (equal shares)
          local value = (ranks > 1 and dist.all_reduce(loss:detach(), "mean") or loss):item()
          losses[#losses + 1] = value
          sum, count = sum + value, count + 1
          loader:set_postfix{loss = string.format("%.4f", value)}
        end
        -- --steps stops within an epoch; at its end the epoch finishes first
        if settings.steps > 0 and steps >= settings.steps and batch < #loader then
          stopped = true
          break
        end
      end
    end
    train_seconds = train_seconds + (wall() - epoch_start)
    if stopped then
      if settings.save_state ~= "" then save_state(epoch, batch) end
      break
    end
    schedule:step()
    local accuracy = evaluate()
    accuracies[#accuracies + 1] = accuracy
    epoch_losses[#epoch_losses + 1] = count > 0 and sum / count or 0 / 0
    print(string.format("epoch %d: train loss %.4f, test accuracy %.2f%%, %.0f steps/s", epoch,
      epoch_losses[#epoch_losses], 100 * accuracy, steps / train_seconds))
    if settings.save_state ~= "" then save_state(epoch, #loader) end
    if settings.steps > 0 and steps >= settings.steps and epoch < settings.epochs then
      stopped = true
      break
    end
  end
  if stopped then
    check_ranks_agree()
    print(string.format("stopped after %d steps (--steps)%s", steps,
      settings.save_state ~= "" and ("; the training state is in " .. settings.save_state) or ""))
    export_model()
    return
  end

  check_ranks_agree()

  local m = tensor.metrics()
  print(string.format("test accuracy %.2f%% after %d epochs", 100 * accuracies[#accuracies],
    settings.epochs))
  print(string.format("%d steps in %.1f s: %.0f steps/s", steps, train_seconds, steps / train_seconds))
  print(string.format("compiler: %d compiles (%.2f s), %d memory cache hits, %d disk cache hits, " ..
    "%d distinct graphs, %d graphs run natively, %d interpreted while compiling", m.compiles,
    m.compile_seconds, m.cache_hits, m.disk_hits, m.distinct_graphs, m.native_runs,
    m.interpreted_runs))
  print("loss " .. plot.sparkline(losses))

  if rank ~= 0 then return end
  local checkpoint = settings.out .. "/" .. spec.name .. ".ckpt"
  tensor.save(checkpoint, {model = model:state_dict(), accuracy = accuracies[#accuracies],
    epochs = settings.epochs, optimizer = settings.optimizer})
  local chart = settings.out .. "/" .. spec.name .. "_loss.svg"
  local steps_axis = {}
  for i = 1, #losses do steps_axis[i] = i * every end
  plot.line_chart(chart, {{name = "training loss", x = steps_axis, values = losses}},
    {title = spec.title, x_label = "step", y_label = "cross-entropy"})
  print("saved " .. checkpoint .. " and " .. chart)
  export_model()
end

return M
