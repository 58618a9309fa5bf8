-- tensor_scan.lua - tensor.scan(fn, init, xs [, options]): the carry, xs
-- and ys may be tensors or nested tables of tensors. This file flattens
-- them into lists for the primitive tensor._scan (tensor/scan.h), and
-- checks their structure with messages that name the offending leaf.
--
--   local final, ys = tensor.scan(function(h, x) local h2 = (h + x):tanh() return h2, h2 end, h0, xs)
--
-- options: reverse (iterate from the last slice), length (when there are
-- no xs), recompute (backward recomputes the carries instead of saving one
-- per iteration: less memory, one more forward pass).
local options_problem = require("lazylua.options").problem
local tensor = require "tensor"

local M = {}

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b)
    if type(a) == type(b) and (type(a) == "number" or type(a) == "string") then return a < b end
    return type(a) < type(b)
  end)
  return keys
end

local function child_path(path, key)
  if type(key) == "string" and key:match("^[%a_][%w_]*$") then return path .. "." .. key end
  return path .. "[" .. tostring(key) .. "]"
end

-- The leaves (tensors) of value in a fixed order, their paths, and the
-- structure to rebuild it: true for a tensor, else a list of {key, spec}.
local function flatten(value, path, leaves, paths, raise)
  if tensor.is_tensor(value) then
    leaves[#leaves + 1] = value
    paths[#paths + 1] = path
    return true
  end
  if type(value) ~= "table" then
    raise(string.format("scan: %s is a %s; expected a tensor or a table of tensors", path, type(value)))
  end
  local spec = {}
  for _, key in ipairs(sorted_keys(value)) do
    spec[#spec + 1] = {key, flatten(value[key], child_path(path, key), leaves, paths, raise)}
  end
  return spec
end

local function unflatten(spec, leaves, position)
  position = position or {0}
  if spec == true then
    position[1] = position[1] + 1
    return leaves[position[1]]
  end
  local value = {}
  for _, entry in ipairs(spec) do value[entry[1]] = unflatten(entry[2], leaves, position) end
  return value
end

local function same_structure(a, b)
  if type(a) ~= "table" or type(b) ~= "table" then return a == b end
  if #a ~= #b then return false end
  for i = 1, #a do
    if a[i][1] ~= b[i][1] or not same_structure(a[i][2], b[i][2]) then return false end
  end
  return true
end

local function describe(t)
  return t:dtype() .. "[" .. table.concat(t:size(), ", ") .. "]"
end

function M.scan(fn, init, xs, options)
  -- The user's line: tensor.scan is a C function (which loads this file)
  -- calling this one, so errors name level 4 from error's own caller, pcall.
  -- Every error below, including those found in the body's results after it
  -- returned (its own errors carry their own lines), is reported there.
  local where = select(2, pcall(error, "", 4))
  local function raise(message) error(where .. message, 0) end
  if type(fn) ~= "function" then raise("scan: the body must be a function") end
  local problem = options_problem("scan", options, {"reverse", "length", "recompute"})
  if problem then raise(problem) end
  options = options or {}
  local init_leaves, init_paths = {}, {}
  local init_spec = flatten(init, "init", init_leaves, init_paths, raise)
  local x_leaves, x_paths, x_spec = {}, {}, nil
  if xs ~= nil then x_spec = flatten(xs, "xs", x_leaves, x_paths, raise) end
  local length, length_path = options.length, "options.length"
  for i, x in ipairs(x_leaves) do
    if x:dim() == 0 then raise("scan: " .. x_paths[i] .. " is a 0-d tensor; xs are sliced along dim 1") end
    if length == nil then
      length, length_path = x:size(1), x_paths[i]
    elseif x:size(1) ~= length then
      raise(string.format("scan: %s has %d slices along dim 1, but %s has %d", x_paths[i], x:size(1),
        length_path, length))
    end
  end
  if length == nil then raise("scan: no xs to slice; give options.length") end
  if math.type(length) ~= "integer" or length < 0 then
    raise("scan: the length must be an integer >= 0, got " .. tostring(length))
  end

  local y_spec
  local function body(carry_list, x_list)
    local carry = unflatten(init_spec, carry_list)
    local x = x_spec and unflatten(x_spec, x_list) or nil
    local new_carry, y = fn(carry, x)
    local leaves, paths = {}, {}
    local spec = flatten(new_carry, "carry", leaves, paths, raise)
    if not same_structure(spec, init_spec) then
      raise("scan: the body returned a carry whose structure differs from init's")
    end
    for i, leaf in ipairs(leaves) do
      local before = init_leaves[i]
      if describe(leaf) ~= describe(before) then
        raise(string.format("scan: %s is %s going into the body but %s coming out; a carry keeps " ..
          "its shape and dtype", (init_paths[i]:gsub("^init", "carry")), describe(before), describe(leaf)))
      end
    end
    local y_leaves = {}
    local spec_y = false
    if y ~= nil then spec_y = flatten(y, "y", y_leaves, {}, raise) end
    if y_spec == nil then
      y_spec = spec_y
    elseif not same_structure(y_spec, spec_y) then
      raise("scan: the body returned ys of different structures in different iterations")
    end
    return leaves, y_leaves
  end

  local results = tensor._scan(body, init_leaves, x_leaves, length, options.reverse == true,
    options.recompute == true, where)
  local count = #init_leaves
  local carry = unflatten(init_spec, {table.unpack(results, 1, count)})
  local ys = nil
  if y_spec then ys = unflatten(y_spec, {table.unpack(results, count + 1)}) end
  return carry, ys
end

return M.scan
