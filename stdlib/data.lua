-- data.lua - datasets for training: IDX and CSV readers, and a DataLoader
-- that cuts tensors into (shuffled) batches with a progress display.
--
--   local data = require "data"
--   local images = data.read_idx("train-images-idx3-ubyte.gz", {dtype = "f32"}) / 255
--   local labels = data.read_idx("train-labels-idx1-ubyte.gz") + 1   -- i64, 1-based classes
--   local loader = data.DataLoader({images, labels}, {batch_size = 128, shuffle = true, seed = 1})
--   for epoch = 1, 3 do
--     for x, y in loader:iter() do
--       local loss = step(x, y)
--       loader:set_postfix{loss = loss}
--     end
--   end
local native = require "stdlib.native"
local options_check = require("lazylua.options").check
local progress = require "lazylua.progress"
local tensor = require "tensor"

local data = {}

-- The callers' callers are the user's calls (level 3 from here).
local function check_options(opts, function_name, allowed)
  local checked = options_check(function_name, opts, allowed, 3)
  return checked
end

-- Calls a native reader. Its errors already name the user's line: native
-- functions locate errors at the nearest frame outside the embedded stdlib.
local function call_native(reader, ...)
  return reader(...)
end

-- The file readers exist only where the native module has them: an
-- embedding sandbox reads no files, so there data.read_idx and
-- data.read_csv are nil (a host hands its data over as tensors instead).
if native.read_idx then
  -- The tensor in an IDX file (MNIST's format), gzip-compressed or not.
  -- Integer element types give i64 and float types f32/f64, unless
  -- opts.dtype asks for another dtype (converted while reading: {dtype =
  -- "f32"} loads 8-bit images straight into floats).
  function data.read_idx(path, opts)
    opts = check_options(opts, "data.read_idx", {dtype = true})
    local result = call_native(native.read_idx, path, opts.dtype)  -- not a tail call: level 3
    return result
  end
end

if native.read_csv then
  -- A CSV file (RFC 4180: quoted fields may hold the delimiter, line breaks
  -- and doubled quotes "") as a 2-D tensor (rows x columns). Returns the
  -- tensor, the column names (opts.header) or nil, and the categories of
  -- the text columns: categories[column] = {"first string", "second", ...},
  -- the code of a string being its position there (1-based, in order of
  -- first appearance). opts:
  --   header (false): the first record names the columns;
  --   delimiter (","): one character, e.g. ";" or "\t";
  --   dtype: the tensor's dtype. Without it, as pandas keeps integer
  --     columns int64: i64 when every cell is an integer (text codes
  --     included), else f32, and then an integer cell f32 cannot hold
  --     exactly (beyond 2^24, e.g. 16777217) is an error naming it (read
  --     with dtype "f64"). A float dtype refuses such a cell too;
  --   text (none): the text columns, read as category codes: a list of
  --     1-based indices or header names, or true for every column holding a
  --     cell that is neither a number nor missing.
  -- Missing cells (empty, NA, NaN) are NaN, in text columns too; an
  -- integer or bool dtype refuses them. Blank lines are skipped. A cell
  -- that is not a number (outside text columns), a row of another width or
  -- an unterminated quote is an error naming the line.
  function data.read_csv(path, opts)
    opts = check_options(opts, "data.read_csv",
                         {header = true, delimiter = true, dtype = true, text = true})
    if opts.text ~= nil and opts.text ~= true and type(opts.text) ~= "table" then
      error("data.read_csv: opts.text must be true or a list of columns, got " ..
            type(opts.text), 2)
    end
    local values, names, categories = call_native(native.read_csv, path, opts.delimiter or ",",
                                                  opts.header or false, opts.dtype, opts.text)
    return values, names, categories
  end
end

-- splitmix64: a small generator with its own state, so that a loader's
-- shuffle never disturbs (nor depends on) tensor.manual_seed's stream.
local function splitmix64(state)
  return function()
    state = state + 0x9E3779B97F4A7C15
    local z = state
    z = (z ~ (z >> 30)) * 0xBF58476D1CE4E5B9
    z = (z ~ (z >> 27)) * 0x94D049BB133111EB
    return z ~ (z >> 31)
  end
end

-- A permutation of 1..n (Fisher-Yates) as a Lua list.
local function seeded_permutation_list(n, seed)
  local next_random = splitmix64(seed)
  local order = {}
  for i = 1, n do order[i] = i end
  for i = n, 2, -1 do
    local j = (next_random() >> 11) % i + 1
    order[i], order[j] = order[j], order[i]
  end
  return order
end

-- The same permutation as an i64 tensor.
local function seeded_permutation(n, seed)
  return tensor.new(seeded_permutation_list(n, seed), {dtype = "i64"})
end

-- Checks opts.shard = {rank, size} (rank 0-based, as dist.rank()).
local function check_shard(shard)
  if shard == nil then return nil end
  if type(shard) ~= "table" then
    error("data.DataLoader: shard must be a table {rank, size}, got " .. type(shard), 3)
  end
  local rank, size = shard[1], shard[2]
  if math.type(size) ~= "integer" then
    error("data.DataLoader: shard size must be an integer, got " ..
          (type(size) == "number" and tostring(size) or type(size)), 3)
  end
  if size < 1 then
    error(string.format("data.DataLoader: shard size must be at least 1, got %d", size), 3)
  end
  if math.type(rank) ~= "integer" then
    error("data.DataLoader: shard rank must be an integer, got " ..
          (type(rank) == "number" and tostring(rank) or type(rank)), 3)
  end
  if rank < 0 or rank >= size then
    error(string.format("data.DataLoader: shard rank %d is out of range 0..%d (ranks are 0-based)",
                        rank, size - 1), 3)
  end
  return {rank = rank, size = size}
end

local DataLoader = {}
DataLoader.__index = DataLoader

-- dataset: a list of tensors sharing their first extent (or one tensor).
-- opts: batch_size (1), shuffle (false), seed (shuffle reproducibly: epoch e
-- uses seed and e; without it the order comes from tensor.randperm, which
-- tensor.manual_seed controls), drop_last (false), progress (true: shown
-- unless LAZYLUA_PROGRESS=0), description (progress label; default
-- "epoch N"), progress_options (passed to progress.new), shard ({rank,
-- size}: this process's share of each epoch, as torch's DistributedSampler
-- deals it: the epoch's order, padded by repeating its start to a multiple
-- of size, or with drop_last cut to one, position p going to rank p % size;
-- rank is 0-based, as dist.rank()).
function data.DataLoader(dataset, opts)
  opts = check_options(opts, "data.DataLoader", {
    batch_size = true, shuffle = true, seed = true, drop_last = true,
    progress = true, description = true, progress_options = true, shard = true,
  })
  local shard = check_shard(opts.shard)
  if opts.progress_options ~= nil then
    -- checked now, not at the first epoch's progress.new
    options_check("data.DataLoader: progress_options", opts.progress_options, progress.option_names, 2)
  end
  if tensor.is_tensor(dataset) then dataset = {dataset} end
  if type(dataset) ~= "table" or #dataset == 0 then
    error("data.DataLoader: expected a list of tensors (e.g. {images, labels})", 2)
  end
  local rows
  for i, t in ipairs(dataset) do
    if not tensor.is_tensor(t) then
      error(string.format("data.DataLoader: dataset[%d] is a %s, not a tensor", i, type(t)), 2)
    end
    if t:dim() == 0 then
      error(string.format("data.DataLoader: dataset[%d] is a 0-d tensor (it has no rows)", i), 2)
    end
    if rows and t:size(1) ~= rows then
      error(string.format("data.DataLoader: dataset[%d] has %d rows, dataset[1] has %d", i,
                          t:size(1), rows), 2)
    end
    rows = t:size(1)
  end
  local batch_size = opts.batch_size or 1
  if math.type(batch_size) ~= "integer" or batch_size < 1 then
    error("data.DataLoader: batch_size must be a positive integer", 2)
  end
  if opts.seed ~= nil and math.type(opts.seed) ~= "integer" then
    error("data.DataLoader: seed must be an integer", 2)
  end
  return setmetatable({
    tensors = dataset,
    rows = rows,
    batch_size = batch_size,
    shuffle = opts.shuffle or false,
    seed = opts.seed,
    drop_last = opts.drop_last or false,
    show_progress = opts.progress ~= false,
    description = opts.description,
    progress_options = opts.progress_options or {},
    shard = shard,
    epoch = 0,
  }, DataLoader)
end

-- Rows this loader yields per epoch: all of them, or with a shard, one
-- share of the order padded (or with drop_last cut) to a multiple of size.
local function rows_per_epoch(self)
  local shard = self.shard
  if not shard then return self.rows end
  if self.drop_last then return self.rows // shard.size end
  return self.rows // shard.size + (self.rows % shard.size > 0 and 1 or 0)
end

-- Number of batches per epoch (of this rank's shard, with one).
function DataLoader:__len()
  local rows = rows_per_epoch(self)
  if self.drop_last then return rows // self.batch_size end
  -- (rows + batch_size - 1) // batch_size would overflow for a huge batch_size
  return rows // self.batch_size + (rows % self.batch_size > 0 and 1 or 0)
end

-- This rank's rows of the epoch's order (a list of 1-based rows, or nil
-- for 1..rows) as an i64 tensor: positions rank+1, rank+1+size, ... of the
-- order padded by repeating from its start, so every rank gets as many.
local function shard_order(self, order)
  local shard, rows = self.shard, self.rows
  local count = rows_per_epoch(self)
  local picks = {}
  for i = 1, count do
    local position = (shard.rank + (i - 1) * shard.size) % rows + 1  -- the padding wraps around
    picks[i] = order and order[position] or position
  end
  return tensor.new(picks, {dtype = "i64"})
end

-- One epoch: `for x, y in loader:iter() do ... end` yields one batch per
-- step, a tensor per dataset tensor, in dataset order. Each call starts a
-- new epoch (with a new order when shuffling). Batches are plain data
-- (gathered eagerly), so they enter a step's graph as inputs.
function DataLoader:iter()
  self.epoch = self.epoch + 1
  local order
  if self.shuffle then
    if self.seed then
      -- distinct, reproducible streams per (seed, epoch)
      local seed = self.seed * 1000003 + self.epoch
      order = self.shard and seeded_permutation_list(self.rows, seed) or seeded_permutation(self.rows, seed)
    else
      order = tensor.randperm(self.rows)
      if self.shard then order = order:tolist() end
    end
  end
  local rows = self.rows
  if self.shard then
    order = shard_order(self, order)
    rows = order:numel()
  end
  local batches = #self
  local bar
  if self.show_progress then
    local bar_options = {}
    for key, value in pairs(self.progress_options) do bar_options[key] = value end
    bar_options.description = bar_options.description or self.description or ("epoch " .. self.epoch)
    bar = progress.new(batches, bar_options)
  end
  self.bar = bar
  local batch = 0
  local function next_batch()
    if batch > 0 and bar then bar:update(1) end  -- the previous batch's step is done
    if batch >= batches then
      if bar then bar:close() end
      return nil
    end
    batch = batch + 1
    local first = (batch - 1) * self.batch_size + 1
    local count = math.min(self.batch_size, rows - first + 1)
    local out = {}
    for i, t in ipairs(self.tensors) do out[i] = native.take_rows(t, order, first, count) end
    return table.unpack(out, 1, #self.tensors)
  end
  -- The 4th value is closed when the loop ends, also by break or error: the
  -- progress line is finished either way.
  local closer = setmetatable({}, {__close = function() if bar then bar:close() end end})
  return next_batch, nil, nil, closer
end

-- Caller-supplied fields for the progress line, e.g. {loss = loss}. Values
-- may be lazy tensors: they are read only when the line is drawn.
function DataLoader:set_postfix(fields)
  if self.bar then self.bar:set_postfix(fields) end
end

return data
