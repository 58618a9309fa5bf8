-- grad_helpers.lua - gradient checks against central finite differences,
-- shared by test_autograd.lua and test_nn.lua. Loaded with
-- `local gh = dofile("grad_helpers.lua")(h)`.
return function(h)
-- Deterministic inputs in (lo, hi) as nested tables.
local seed = 12345
local function uniform(lo, hi)
  seed = (seed * 1103515245 + 12345) % 2147483648
  return lo + (hi - lo) * (seed / 2147483648)
end
local function values(shape, lo, hi)
  local function build(d)
    local out = {}
    for i = 1, shape[d] do out[i] = d == #shape and uniform(lo, hi) or build(d + 1) end
    return out
  end
  if #shape == 0 then return uniform(lo, hi) end
  return build(1)
end

local function f64(v) return tensor.new(v, {dtype = "f64"}) end

-- Flat list of the leaves of nested tables, and the way back.
local function flat(v, out)
  out = out or {}
  if type(v) ~= "table" then out[#out + 1] = v return out end
  for _, x in ipairs(v) do flat(x, out) end
  return out
end
local function refill(v, list, pos)
  pos = pos or {0}
  if type(v) ~= "table" then pos[1] = pos[1] + 1 return list[pos[1]] end
  local out = {}
  for i, x in ipairs(v) do out[i] = refill(x, list, pos) end
  return out
end

-- Checks d/d(inputs) of sum(f(inputs) * r) for a fixed random r against
-- central differences. `inputs`: nested tables (f64 values); `skip`: input
-- positions that get no gradient (index tensors are passed separately).
local function gradcheck(name, f, inputs, opts)
  opts = opts or {}
  h.test(name, function()
    local tensors = {}
    for i, v in ipairs(inputs) do tensors[i] = f64(v):requires_grad(true) end
    local out = f(table.unpack(tensors))
    local r = f64(values(out:size(), 0.5, 1.5))
    local loss = (out * r):sum()
    loss:backward()
    local function value_of(list_inputs)
      local ts = {}
      for i, v in ipairs(list_inputs) do ts[i] = f64(v) end
      return ((f(table.unpack(ts)) * r):sum()):item()
    end
    for k, v in ipairs(inputs) do
      local grad = tensors[k]:grad()
      assert(grad, name .. ": input " .. k .. " got no gradient")
      local analytic = flat(grad:tolist())
      local list = flat(v)
      local eps = opts.eps or 1e-6
      for i = 1, #list do
        local saved = list[i]
        list[i] = saved + eps
        local args = {}
        for j, w in ipairs(inputs) do args[j] = j == k and refill(v, list) or w end
        local up = value_of(args)
        list[i] = saved - eps
        args[k] = refill(v, list)
        local down = value_of(args)
        list[i] = saved
        local numeric = (up - down) / (2 * eps)
        local tol = (opts.tol or 1e-6) * math.max(1, math.abs(numeric))
        if math.abs(analytic[i] - numeric) > tol then
          error(string.format("%s: d/d input %d element %d: backward %.10g, finite differences %.10g",
                              name, k, i, analytic[i], numeric), 0)
        end
      end
    end
  end, 3)
end


return {values = values, f64 = f64, gradcheck = gradcheck, flat = flat}
end
