-- compare_parameters.lua A B [THRESHOLD]: compares the tensors of two files
-- written by ddp_driver.lua. Prints one line of numbers:
--   MAX_ABS_DIFFERENCE MAX_ABS_VALUE ELEMENTS ELEMENTS_DIFFERING_BY_MORE_THAN_THRESHOLD
local a, b = tensor.load(arg[1]), tensor.load(arg[2])
local threshold = tonumber(arg[3] or "0")
local largest_difference, scale, elements, differing = 0, 0, 0, 0
for name, ta in pairs(a) do
  local tb = assert(b[name], arg[2] .. " has no " .. name)
  assert(tensor.is_tensor(tb) and ta:numel() == tb:numel(), name .. ": not the same shape")
  local difference = (ta - tb):abs()
  largest_difference = math.max(largest_difference, difference:max():item())
  differing = differing + difference:gt(threshold):sum():item()
  scale = math.max(scale, ta:abs():max():item())
  elements = elements + ta:numel()
end
for name in pairs(b) do assert(a[name], arg[1] .. " has no " .. name) end
print(string.format("%.6e %.6e %d %d", largest_difference, scale, elements, differing))
