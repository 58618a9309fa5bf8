-- test_math_bitwise.lua - every float math op gives the same bits in every
-- tier (issue 13): the eager kernels, the reference interpreter (which calls
-- them; LAZYLUA_COMPILE=off, and a graph's first runs) and generated code
-- (LAZYLUA_COMPILE=sync), for f32 and f64, on inputs full of special values:
-- +-0, +-inf, NaNs of both signs, subnormals, huge magnitudes and the edges
-- of each function's ranges. All of them use tensor/kernels/kernel_math.h.
--
-- Each case runs eagerly in this process and then in the process's own tier,
-- and the two must have the same bits (each element as the bits of its
-- double), except that any NaN equals any NaN: IEEE 754 leaves to the
-- machine which operand's NaN a binary op returns (x86: the first one's),
-- and a compiler may swap the operands of a commutative op (the sanitizer
-- build does, in a product of two NaNs), so the sign and payload of a NaN
-- made from two are not the library's to fix. Under LAZYLUA_EAGER=1 (ctest's lua_eager.*)
-- the file also runs itself twice more, with LAZYLUA_COMPILE=off and =sync,
-- printing the bits of every case, and compares those with its eager ones:
-- one ctest run covers all three tiers.
local h = dofile("helpers.lua")

local DIGEST = os.getenv("LAZYLUA_MATH_BITWISE_DIGEST") ~= nil

local function bits(t)
  local out = {}
  for i, v in ipairs(h.flatten(t:tolist())) do
    out[i] = v ~= v and "nan" or string.format("%016x", string.unpack("<i8", string.pack("<d", v)))
  end
  return out
end

local nan = 0 / 0  -- x86's default NaN: sign bit set
local inputs = {}
do
  local specials = {
    0.0, -0.0, math.huge, -math.huge, nan, -nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0,
    1e-45, -1e-45, 1e-40, -2.5e-39, 1.1754942e-38, 5e-324, -5e-324, 1e-310, -2.2e-308,
    1e-20, -1e-20, 6e-8, -6e-8, 1e-4, 0.41421356, -0.29289322, 0.999999, 1.000001,
    13.0, -13.0, 20.0, -20.0, 30.0, -30.0, 40.0, -40.0, 60.0, -60.5, 88.7, 89.0, -87.3,
    -103.9, -104.0, -150.0, 600.0, -600.5, 709.7, 710.0, -745.0, -746.0, 1e7, -1e7, 6e6,
    6.5e6, 16777216.0, 1e10, -1e10, 1e30, -1e30, 3.4e38, -3.4e38, 1e300, -1e300,
    math.pi, -math.pi, math.pi / 2, 3 * math.pi / 2, 1e5 * math.pi,
  }
  for _, v in ipairs(specials) do inputs[#inputs + 1] = v end
  math.randomseed(13)
  for _ = 1, 160 do inputs[#inputs + 1] = (math.random() - 0.5) * 20 end
  for _ = 1, 160 do
    local sign = math.random() < 0.5 and -1 or 1
    inputs[#inputs + 1] = sign * 2.0 ^ (math.random() * 2300 - 1150)
  end
  for k = 1, 16 do inputs[#inputs + 1] = 1 + k * 2 ^ -23 end
end
-- A second operand: the inputs in another order.
local others = {}
for i = 1, #inputs do others[i] = inputs[(i * 37) % #inputs + 1] end

-- Rows for softmax: random, huge, tiny, with infinities and NaNs, and long
-- ones (beyond the 1024-value blocks of the row sums).
local function rows(n)
  local out = {}
  for r = 1, 8 do
    local row = {}
    for k = 1, n do row[k] = (math.random() - 0.5) * 10 * r end
    if r == 2 then row[1] = math.huge end
    if r == 3 then row[n] = -math.huge end
    if r == 4 then row[(n + 1) // 2] = nan end
    if r == 5 then for k = 1, n do row[k] = row[k] * 1e30 end end
    if r == 6 then for k = 1, n do row[k] = row[k] * 1e-40 end end
    if r == 7 then for k = 1, n do row[k] = -math.huge end end
    out[r] = row
  end
  return out
end

local UNARY = {
  "neg", "abs", "sign", "square", "exp", "expm1", "log", "log1p", "log2", "sqrt", "rsqrt",
  "reciprocal", "sin", "cos", "tan", "tanh", "sigmoid", "relu", "gelu", "floor", "ceil", "round",
  "trunc", "erf", "erfc", "exp2", "frac", "asin", "acos", "atan", "sinh", "cosh", "asinh",
  "acosh", "atanh", "log10",
}
local BINARY = {"add", "sub", "mul", "div", "floor_divide", "remainder", "pow", "maximum",
                "minimum", "atan2"}
local SCALAR_EXPONENTS = {2, 0.5, -1, 1, 0, 3, -2.5, 1 / 3, 1e10}

-- The cases: name -> function(data) returning a tensor.
local cases = {}
local function case(name, f) cases[#cases + 1] = {name = name, f = f} end
for _, dtype in ipairs({"f32", "f64"}) do
  local prefix = dtype .. " "
  for _, op in ipairs(UNARY) do
    case(prefix .. op, function(d) return d[dtype].x[op](d[dtype].x) end)
  end
  for _, op in ipairs(BINARY) do
    case(prefix .. op, function(d) return d[dtype].x[op](d[dtype].x, d[dtype].y) end)
  end
  for _, c in ipairs(SCALAR_EXPONENTS) do
    case(prefix .. "pow " .. c, function(d) return d[dtype].x:pow(c) end)
  end
  case(prefix .. "integer powers of negative bases", function(d) return d[dtype].x:pow(d[dtype].k) end)
  case(prefix .. "% 3.5", function(d) return d[dtype].x:remainder(3.5) end)
  case(prefix .. "// -0.75", function(d) return d[dtype].x:floor_divide(-0.75) end)
  -- Fused chains: the functions inside bigger generated kernels.
  case(prefix .. "tanh(x * 0.5 + y) * sigmoid(x)", function(d)
    local x, y = d[dtype].x, d[dtype].y
    return (x * 0.5 + y):tanh() * x:sigmoid()
  end)
  case(prefix .. "erf(x) * erfc(y) + exp2(x * 0.25)", function(d)
    local x, y = d[dtype].x, d[dtype].y
    return x:erf() * y:erfc() + (x * 0.25):exp2()
  end)
  case(prefix .. "gelu(exp(x) - log1p(|y|))", function(d)
    local x, y = d[dtype].x, d[dtype].y
    return (x:exp() - y:abs():log1p()):gelu()
  end)
  for _, n in ipairs({1, 3, 17, 100, 1030, 2500}) do
    for _, log in ipairs({false, true}) do
      local name = (log and "log_softmax" or "softmax")
      case(prefix .. name .. " rows of " .. n, function(d)
        local t = d[dtype].rows[n]
        return log and t:log_softmax(2) or t:softmax(2)
      end)
      -- A fused producer: the row is computed first (another code path).
      case(prefix .. name .. " of 0.5 x + 1, rows of " .. n, function(d)
        local t = d[dtype].rows[n] * 0.5 + 1
        return log and t:log_softmax(2) or t:softmax(2)
      end)
    end
  end
  case(prefix .. "softmax along the first dim", function(d) return d[dtype].rows[17]:softmax(1) end)
  case(prefix .. "log_softmax along a middle dim", function(d)
    return d[dtype].rows[100]:reshape(8, 10, 10):log_softmax(2)
  end)
end

-- The input tensors, made eagerly so that every tier sees them as data.
local function make_data()
  local was = tensor.is_eager()
  tensor.set_eager(true)
  local d = {}
  for _, dtype in ipairs({"f32", "f64"}) do
    local k = {}
    for i = 1, #inputs do k[i] = (i % 9) - 4 end
    d[dtype] = {x = tensor.new(inputs, {dtype = dtype}), y = tensor.new(others, {dtype = dtype}),
                k = tensor.new(k, {dtype = dtype}), rows = {}}
    for _, n in ipairs({1, 3, 17, 100, 1030, 2500}) do
      d[dtype].rows[n] = tensor.new(rows(n), {dtype = dtype})
    end
  end
  tensor.set_eager(was)
  return d
end

-- The process's tier, case by case: name -> bits.
local function run_cases(data)
  local results = {}
  for _, c in ipairs(cases) do
    results[c.name] = bits(c.f(data))
    tensor.mark_step()
  end
  return results
end

local eager  -- case name -> bits, computed eagerly

-- The first element of `got` that differs from `want`, described with the
-- inputs; nil when none does.
local function difference(name, want, got, tier)
  if #want ~= #got then
    return string.format("%s: %d elements eagerly, %d in %s", name, #want, #got, tier)
  end
  for i = 1, #want do
    if want[i] ~= got[i] then
      local elementwise = inputs[i] and not name:find("softmax")
      local x = elementwise and string.format(" (x = %a, y = %a)", inputs[i], others[i]) or ""
      return string.format("%s, element %d%s: eager %s, %s %s", name, i, x, want[i], tier, got[i])
    end
  end
end

-- Every case of `results` against the eager bits; fails listing all that differ.
local function compare_all(results, tier)
  local failures = {}
  for _, c in ipairs(cases) do
    local got = results[c.name]
    failures[#failures + 1] = got and difference(c.name, eager[c.name], got, tier) or
                              (not got and c.name .. ": missing in " .. tier) or nil
  end
  if #failures > 0 then error(#failures .. " case(s) differ:\n" .. table.concat(failures, "\n"), 0) end
end

if DIGEST then  -- a child: print every case's bits
  local results = run_cases(make_data())
  for _, c in ipairs(cases) do io.write(c.name, "\t", table.concat(results[c.name], " "), "\n") end
  os.exit(0)
end

local data = make_data()
local was = tensor.is_eager()
tensor.set_eager(true)
eager = run_cases(data)
tensor.set_eager(was)
local tier = was and "eager" or ("lazy, LAZYLUA_COMPILE=" .. (os.getenv("LAZYLUA_COMPILE") or "background"))

h.test("every case in this process's tier (" .. tier .. ")", function()
  tensor.reset_metrics()
  compare_all(run_cases(data), tier)
  if os.getenv("LAZYLUA_COMPILE") == "sync" and not was then
    local m = tensor.metrics()
    -- softmax along other dims than the last runs the eager kernel there
    assert(m.native_runs == m.graphs_executed and m.interpreted_runs == 0,
           "compiled code did not run every graph")
  end
end)

-- Under LAZYLUA_EAGER=1: the reference interpreter and generated code, in
-- child processes (the tier is chosen once per process).
local function child(compile)
  local interpreter = assert(arg and arg[-1], "arg[-1] (the interpreter) is not set")
  local script = assert(arg[0], "arg[0] is not set")
  local command = string.format("env -u LAZYLUA_EAGER LAZYLUA_COMPILE=%s LAZYLUA_MATH_BITWISE_DIGEST=1 '%s' '%s'",
                                compile, interpreter:gsub("'", "'\\''"), script:gsub("'", "'\\''"))
  local pipe = assert(io.popen(command, "r"))
  local results = {}
  for line in pipe:lines() do
    local name, list = line:match("^([^\t]+)\t(.*)$")
    assert(name, "unexpected output: " .. line)
    local values = {}
    for v in list:gmatch("%S+") do values[#values + 1] = v end
    results[name] = values
  end
  assert(pipe:close(), command .. " failed")
  return results
end

if was then
  for _, compile in ipairs({"off", "sync"}) do
    h.test("every case with LAZYLUA_COMPILE=" .. compile .. " (a child process)", function()
      compare_all(child(compile), "LAZYLUA_COMPILE=" .. compile)
    end)
  end
end

h.done("test_math_bitwise")
