-- options.lua - the one check of an options table, shared by every stdlib
-- function that takes one (nn, optim, data, plot, dist, onnx, progress,
-- tensor.scan). A key the function does not know is an error naming it and
-- listing the known ones, never silently dropped:
--   nn.CrossEntropyLoss: unknown option 'reduciton' (options: ignore_index,
--   label_smoothing, reduction, weight)
-- interp/lua_tensor_args.cpp (check_option_keys) words the C++ bindings'
-- errors the same way.
local options = {}

-- "a, b, c": the known names sorted, whether given as a list or a set.
local function known_names(known)
  local names = {}
  for key, value in pairs(known) do
    names[#names + 1] = math.type(key) == "integer" and value or key
  end
  table.sort(names)
  return table.concat(names, ", ")
end

local function is_known(known, key)
  if type(key) ~= "string" then return false end
  if known[key] ~= nil then return true end
  for _, name in ipairs(known) do
    if name == key then return true end
  end
  return false
end

-- The message for opts (nil or a table whose every key is one of `known`,
-- a list of names or a set name -> true), or nil when it is fine. Keys are
-- read with next, not pairs: a __pairs metamethod cannot hide a key.
function options.problem(function_name, opts, known)
  if opts == nil then return nil end
  if type(opts) ~= "table" then
    return string.format("%s: options must be a table, got %s", function_name, type(opts))
  end
  local key = next(opts)
  while key ~= nil do
    if not is_known(known, key) then
      local shown = type(key) == "string" and ("'" .. key .. "'") or ("[" .. tostring(key) .. "]")
      return string.format("%s: unknown option %s (options: %s)", function_name, shown, known_names(known))
    end
    key = next(opts, key)
  end
  return nil
end

-- Returns opts ({} for nil) once options.problem finds nothing; raises its
-- message otherwise. `level` is where the error points, as for error() in
-- the function calling check: 2 (the default) is that function's caller.
function options.check(function_name, opts, known, level)
  local problem = options.problem(function_name, opts, known)
  if problem then error(problem, (level or 2) + 1) end
  return opts or {}
end

-- An option's value as an error message shows it: a list as {1, 2}.
function options.show(value)
  if type(value) ~= "table" then return tostring(value) end
  local parts = {}
  for i, part in ipairs(value) do parts[i] = tostring(part) end
  return "{" .. table.concat(parts, ", ") .. "}"
end

-- An option that waits for other work: refused by name unless it holds
-- its default ("nn.Conv2d: option 'groups' = 4 is not supported yet"). A
-- number's default also matches the pair {default, default} (dilation =
-- {1, 1}). `level` as for check.
function options.refuse_unsupported(function_name, opts, key, default, level)
  local value = opts[key]
  if value == nil or value == default then return end
  if type(value) == "table" and type(default) == "number" and #value == 2 and value[1] == default and
      value[2] == default then
    return
  end
  error(string.format("%s: option '%s' = %s is not supported yet", function_name, key, options.show(value)),
    (level or 2) + 1)
end

return options
