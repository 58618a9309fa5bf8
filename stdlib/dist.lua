-- dist.lua - data-parallel training across processes and machines, on Open
-- MPI: ranks, collectives and gradient averaging, in the shape of
-- torch.distributed.
--
--   local dist = require "dist"
--   -- mpirun -np 2 lazylua train.lua: two ranks, each with its own data shard
--   dist.broadcast_parameters(model)            -- every rank starts equal
--   loss:backward()
--   dist.average_gradients(model)               -- one all-reduce per bucket
--   opt:step()
--
-- A collective is an op of the lazy graph (tensor/collectives.h): it is
-- recorded like any other, compiled into the step's plan and run at the
-- sync, on the plan's buffers. Without mpirun there is one rank (size 1),
-- every collective is the identity, and MPI is never started.
local native = require "stdlib.native"
local options_check = require("lazylua.options").check
local tensor = require "tensor"

native.dist_initialize()

local dist = {}

-- 0-based, as MPI and torch.distributed number them.
function dist.rank() return native.dist_rank() end
function dist.size() return native.dist_size() end
-- True when this process is a rank of a job started by an MPI launcher.
function dist.is_initialized() return native.dist_initialized() end

local function check_tensor(t, function_name)
  if not tensor.is_tensor(t) then
    error(string.format("%s: expected a tensor, got %s", function_name, type(t)), 3)
  end
end

local reduce_ops = {sum = true, mean = true, max = true, min = true}

-- Writes the collective's result into t (as torch.distributed does), with
-- no gradient recorded: it replaces t's value.
local function assign(t, value)
  tensor.no_grad(function() t:copy_(value) end)
  return t
end

-- Reduces t across every rank, in place: op "sum" (the default), "mean",
-- "max" or "min". Returns t.
function dist.all_reduce(t, op)
  check_tensor(t, "dist.all_reduce")
  op = op or "sum"
  if not reduce_ops[op] then
    error(string.format("dist.all_reduce: op must be \"sum\", \"mean\", \"max\" or \"min\", got %s",
      type(op) == "string" and string.format("%q", op) or tostring(op)), 2)
  end
  local dtype = t:dtype()
  if op == "mean" and dtype ~= "f32" and dtype ~= "f64" then
    error("dist.all_reduce: \"mean\" needs an f32 or f64 tensor, got " .. dtype, 2)
  end
  if (op == "sum" or op == "mean") and dtype == "bool" then
    error("dist.all_reduce: cannot sum a bool tensor (use op \"max\" for any, \"min\" for all)", 2)
  end
  local size = native.dist_size()
  if size == 1 then return t end
  local result = native.dist_collective(t, op == "mean" and "sum" or op, 0)
  if op == "mean" then result = result / size end
  return assign(t, result)
end

-- Copies rank root's t (0 by default) into t on every rank. Returns t.
function dist.broadcast(t, root)
  check_tensor(t, "dist.broadcast")
  root = root or 0
  if math.type(root) ~= "integer" then
    error("dist.broadcast: root must be an integer rank, got " .. tostring(root), 2)
  end
  local size = native.dist_size()
  if root < 0 or root >= size then
    error(string.format("dist.broadcast: root %d is not a rank of this job (ranks 0 to %d)",
      root, size - 1), 2)
  end
  if size == 1 then return t end
  return assign(t, native.dist_collective(t, "broadcast", root))
end

-- Waits until every rank gets here (after the collectives recorded before).
function dist.barrier()
  native.dist_barrier()
end

-- What this process's collectives have cost so far: {calls = n, bytes = n,
-- seconds = s} (MPI time, the shape checks included).
function dist.stats() return native.dist_stats() end

-- Ends every rank of the job at once, with this exit code: for a failure
-- the others cannot know about (they would wait for this rank forever).
function dist.abort(code)
  code = code or 1
  native.dist_abort(code)
  os.exit(code)
end

-- The tensors of a module (its parameters()) or a list of tensors.
local function tensor_list(params, function_name)
  if type(params) == "table" and type(params.parameters) == "function" then
    return params:parameters()
  end
  if type(params) ~= "table" then
    error(string.format("%s: expected a module or a list of tensors, got %s", function_name,
      type(params)), 3)
  end
  for i, p in ipairs(params) do
    if not tensor.is_tensor(p) then
      error(string.format("%s: item %d is not a tensor (%s)", function_name, i, type(p)), 3)
    end
  end
  return params
end

-- Copies rank root's parameters (and a module's buffers) to every rank.
function dist.broadcast_parameters(params, root)
  local list = tensor_list(params, "dist.broadcast_parameters")
  if type(params.buffers) == "function" then
    for _, b in ipairs(params:buffers()) do list[#list + 1] = b end
  end
  for _, p in ipairs(list) do dist.broadcast(p, root) end
end

local default_bucket_bytes = 25 * 1024 * 1024  -- torch's DistributedDataParallel default

-- Replaces each gradient by its mean over the ranks. Gradients are packed
-- into buckets of about opts.bucket_bytes (25 MiB), each one flat buffer
-- and one all-reduce, in parameter order: a step makes a few large calls,
-- not one per parameter. Parameters with no gradient are left out (every
-- rank must have the same ones: a difference is an error naming both).
function dist.average_gradients(params, opts)
  local list = tensor_list(params, "dist.average_gradients")
  opts = options_check("dist.average_gradients", opts, {"bucket_bytes"}, 2)
  local bucket_bytes = opts.bucket_bytes or default_bucket_bytes
  if math.type(bucket_bytes) ~= "integer" or bucket_bytes < 1 then
    error("dist.average_gradients: bucket_bytes must be a positive integer", 2)
  end
  local size = native.dist_size()
  if size == 1 then return end
  local bucket, bytes, dtype = {}, 0, nil
  local function flush()
    if #bucket == 0 then return end
    -- With 2, 4, 8 ... ranks each gradient is divided as it is packed (in
    -- the same fused pass; a second pass over the bucket costs as much as
    -- the packing): halving is exact, so the sum of the shares is the sum
    -- divided, bit for bit. Other sizes divide the sum.
    local prescale = size & (size - 1) == 0
    local flats = {}
    for i, p in ipairs(bucket) do
      local g = p:grad():reshape(-1)
      flats[i] = prescale and g / size or g
    end
    local flat = #flats == 1 and flats[1] or tensor.cat(flats)
    local mean = native.dist_collective(flat, "sum", 0)
    if not prescale then mean = mean / size end
    local offset = 1
    for _, p in ipairs(bucket) do
      local n = p:numel()
      p:set_grad(mean:narrow(1, offset, n):view(p:size()))
      offset = offset + n
    end
    bucket, bytes, dtype = {}, 0, nil
  end
  for _, p in ipairs(list) do
    local g = p:grad()
    if g then
      local element = (g:dtype() == "f64" or g:dtype() == "i64") and 8 or 4
      if dtype and (g:dtype() ~= dtype or bytes + g:numel() * element > bucket_bytes) then flush() end
      bucket[#bucket + 1] = p
      bytes = bytes + g:numel() * element
      dtype = g:dtype()
    end
  end
  flush()
end

-- ---------------------------------------------------------------------------
-- nn.DistributedDataParallel: a module that wraps a model for data-parallel
-- training. The class is made on first use (it derives from nn.Module), so
-- that require "dist" alone does not load nn.

local DistributedDataParallel

local function ddp_class()
  if DistributedDataParallel then return DistributedDataParallel end
  local nn = require "lazylua.nn"
  local class = nn.class("DistributedDataParallel")

  function class:init(model, opts)
    -- the model is a submodule named "module": state_dict keys are
    -- "module.0.weight" ..., as PyTorch's
    self:add_module("module", model)
    self.bucket_bytes = opts.bucket_bytes
    -- Set by a forward that records gradients, cleared by the backward
    -- that averages them: a backward of some other graph (or a second
    -- backward of the same forward) leaves the gradients alone.
    self.gradients_pending = false
    dist.broadcast_parameters(model, 0)  -- every rank starts from rank 0's values
    -- The hook outlives no wrapper: it holds the wrapper weakly.
    local weak = setmetatable({wrapper = self}, {__mode = "v"})
    self.backward_hook = tensor.register_backward_hook(function()
      local wrapper = weak.wrapper
      if wrapper and wrapper.gradients_pending then
        wrapper.gradients_pending = false
        dist.average_gradients(wrapper.module, {bucket_bytes = wrapper.bucket_bytes})
      end
    end)
  end

  function class:forward(...)
    if tensor.is_grad_enabled() then self.gradients_pending = true end
    return self.module(...)
  end

  DistributedDataParallel = class
  return class
end

-- Wraps model (an nn module) for data-parallel training: its parameters
-- and buffers are broadcast from rank 0 now, and after each backward that
-- follows a forward through the wrapper, the gradients are averaged over
-- the ranks (dist.average_gradients, opts.bucket_bytes passed on) before
-- the optimizer steps. With one rank it changes nothing.
function dist.DistributedDataParallel(model, opts)
  if type(model) ~= "table" or type(model.parameters) ~= "function" or type(model.forward) ~= "function" then
    error("nn.DistributedDataParallel: expected an nn module, got " .. type(model), 2)
  end
  opts = options_check("nn.DistributedDataParallel", opts, {"bucket_bytes"}, 2)
  local bucket_bytes = opts.bucket_bytes
  if bucket_bytes ~= nil and (math.type(bucket_bytes) ~= "integer" or bucket_bytes < 1) then
    error("nn.DistributedDataParallel: bucket_bytes must be a positive integer", 2)
  end
  return ddp_class()(model, {bucket_bytes = bucket_bytes or default_bucket_bytes})
end

-- A script that ends with an error or os.exit(failure) on one rank would
-- leave the others waiting in their next collective: with two ranks or
-- more, such an exit ends the whole job (the lazylua program does the same
-- for an uncaught error).
if native.dist_size() > 1 then
  local exit = os.exit
  os.exit = function(code, close)
    if code == false or (math.type(code) == "integer" and code ~= 0) then
      native.dist_abort(code == false and 1 or code)
    end
    return exit(code, close)
  end
end

return dist
