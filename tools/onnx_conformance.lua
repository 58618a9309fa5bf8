-- onnx_conformance.lua - runs the ONNX backend test suites that Debian's
-- libonnx-testdata ships through lazylua's importer (stdlib/onnx.lua) and
-- reports, per suite, the cases that pass, fail (wrong values or shapes, or
-- an error) and are unsupported (an op or feature lazylua lacks), and the
-- ops that block the most cases.
--
--   lazylua tools/onnx_conformance.lua [options]
--     --data DIR            the suites' folder (/usr/share/libonnx-testdata/data)
--     --suite NAME          node, pytorch-converted, pytorch-operator or simple
--                           (repeatable; default: all four)
--     --filter TEXT         only the cases whose name contains TEXT
--     --verbose             one line per case, with the reason
--     --expected FILE       check against a list of cases expected to pass
--                           ("suite/case" lines): exit 1 if one of them does not
--                           pass; cases that pass and are not listed are named
--                           (add them to the list)
--     --write-expected FILE write the list of the cases that pass
--
-- Tolerances are the ONNX backend runner's: |got - want| <= atol + rtol *
-- |want| with rtol 1e-3 and atol 1e-7; integers and booleans exactly; NaN
-- equals NaN.
local onnx = require "onnx"

local options = {data = "/usr/share/libonnx-testdata/data", suites = {}}
do
  local i = 1
  while i <= #arg do
    local a = arg[i]
    local function value()
      i = i + 1
      if arg[i] == nil then error("onnx_conformance: " .. a .. " needs a value", 0) end
      return arg[i]
    end
    if a == "--data" then options.data = value()
    elseif a == "--suite" then options.suites[#options.suites + 1] = value()
    elseif a == "--filter" then options.filter = value()
    elseif a == "--verbose" then options.verbose = true
    elseif a == "--expected" then options.expected = value()
    elseif a == "--write-expected" then options.write_expected = value()
    else error("onnx_conformance: unknown option " .. a, 0) end
    i = i + 1
  end
  if #options.suites == 0 then options.suites = {"node", "pytorch-converted", "pytorch-operator", "simple"} end
end

local RTOL, ATOL = 1e-3, 1e-7

local function list_directory(path, pattern)
  local names = {}
  local pipe = io.popen('ls -1 "' .. path .. '" 2>/dev/null')
  for name in pipe:lines() do
    if not pattern or name:match(pattern) then names[#names + 1] = name end
  end
  pipe:close()
  table.sort(names)
  return names
end

local function file_exists(path)
  local file = io.open(path, "rb")
  if file then file:close() end
  return file ~= nil
end

-- input_0.pb, input_1.pb ... in numeric order.
local function numbered(dir, prefix)
  local files = {}
  for _, name in ipairs(list_directory(dir, "^" .. prefix .. "_%d+%.pb$")) do
    files[#files + 1] = {number = tonumber(name:match("_(%d+)%.pb$")), path = dir .. "/" .. name}
  end
  table.sort(files, function(a, b) return a.number < b.number end)
  return files
end

local function flat_values(t)
  local values = t:reshape(-1):tolist()
  return type(values) == "table" and values or {values}
end

local function shape_text(t)
  return "{" .. table.concat(t:size(), ", ") .. "}"
end

-- nil when got matches want, else why not.
local function compare(got, want, k)
  if not tensor.is_tensor(got) then return string.format("output %d is a %s, not a tensor", k, type(got)) end
  if got:dim() ~= want:dim() or got:numel() ~= want:numel() then
    return string.format("output %d has shape %s, expected %s", k, shape_text(got), shape_text(want))
  end
  for d = 1, got:dim() do
    if got:size(d) ~= want:size(d) then
      return string.format("output %d has shape %s, expected %s", k, shape_text(got), shape_text(want))
    end
  end
  local float = want:dtype() == "f32" or want:dtype() == "f64"
  if (want:dtype() == "bool") ~= (got:dtype() == "bool") then
    return string.format("output %d is %s, expected %s", k, got:dtype(), want:dtype())
  end
  local a, b = flat_values(got), flat_values(want)
  for i = 1, #b do
    local x, y = a[i], b[i]
    if type(x) == "boolean" or type(y) == "boolean" then
      if x ~= y then return string.format("output %d element %d is %s, expected %s", k, i, tostring(x), tostring(y)) end
    elseif y ~= y then
      if x == x then return string.format("output %d element %d is %.9g, expected NaN", k, i, x) end
    elseif float then
      if x ~= y and not (math.abs(x - y) <= ATOL + RTOL * math.abs(y)) then  -- (inf == inf)
        return string.format("output %d element %d is %.9g, expected %.9g", k, i, x, y)
      end
    elseif x ~= y then
      return string.format("output %d element %d is %s, expected %s", k, i, tostring(x), tostring(y))
    end
  end
  return nil
end

-- The op named in an importer error ("node 'n' (Conv, opset 11): ...").
local function blocking_op(message)
  return message:match("%(([%w_.]+), opset %d+%)")
      or (message:match("element type (%u+%d*)") and message:match("element type (%u+%d*)") .. " data")
      or (message:match("is a (%a+) %(lazylua values") and message:match("is a (%a+) %(lazylua values") .. " values")
      or (message:match("uses only the domains (%S+)") and "domain " .. message:match("uses only the domains (%S+)"))
      or "other"
end

local function is_unsupported(message)
  return message:find(": unsupported: ", 1, true) ~= nil or message:find("lazylua cannot hold", 1, true) ~= nil
      or message:find("lazylua supports", 1, true) ~= nil or message:find("does not parse as a TensorProto", 1, true) ~= nil
      or message:find("external file", 1, true) ~= nil
end

-- The suites store FLOAT16 and BFLOAT16 data as UINT16 bit patterns
-- (NumPy has no bfloat16): a value the graph declares as one of those,
-- read from such a file, is turned into the floats the bits stand for.
local UINT16, FLOAT16, BFLOAT16 = 4, 10, 16
local function half_bits_to_float(bits)
  local sign = bits & 0x8000 ~= 0 and -1 or 1
  local exponent, mantissa = (bits >> 10) & 0x1f, bits & 0x3ff
  if exponent == 0x1f then return mantissa == 0 and sign * math.huge or 0 / 0 end
  if exponent == 0 then return sign * mantissa * 2.0 ^ -24 end
  return sign * (1 + mantissa / 1024) * 2.0 ^ (exponent - 15)
end
local function as_declared(t, file_type, declared)
  if file_type ~= UINT16 or (declared ~= FLOAT16 and declared ~= BFLOAT16) then return t end
  local values = flat_values(t)
  for i, bits in ipairs(values) do
    values[i] = declared == BFLOAT16 and string.unpack("<f", string.pack("<I4", bits << 16))
        or half_bits_to_float(bits)
  end
  return tensor.new(values, {dtype = "f32"}):reshape(t:size())
end

-- "pass", "fail" or "unsupported", and the reason.
local function run_case(dir)
  local ok, model = pcall(onnx.load, dir .. "/model.onnx")
  if not ok then return is_unsupported(model) and "unsupported" or "fail", model end
  local sets = list_directory(dir, "^test_data_set_%d+$")
  if #sets == 0 then return "fail", "no test data" end
  for _, set in ipairs(sets) do
    local inputs, wants = {}, {}
    for i, file in ipairs(numbered(dir .. "/" .. set, "input")) do
      local read, value, _, file_type = pcall(onnx.read_tensor, file.path)
      if not read then return is_unsupported(value) and "unsupported" or "fail", value end
      local declared = model.graph.inputs[i] and model.graph.inputs[i].elem_type
      inputs[i] = as_declared(value, file_type, declared)
    end
    for i, file in ipairs(numbered(dir .. "/" .. set, "output")) do
      local read, value, _, file_type = pcall(onnx.read_tensor, file.path)
      if not read then return is_unsupported(value) and "unsupported" or "fail", value end
      wants[i] = as_declared(value, file_type, model.graph.outputs[i] and model.graph.outputs[i].elem_type)
    end
    local results = table.pack(pcall(model, table.unpack(inputs)))
    if not results[1] then
      local message = tostring(results[2])
      return is_unsupported(message) and "unsupported" or "fail", message
    end
    for k, want in ipairs(wants) do
      local compared, why = pcall(compare, results[k + 1], want, k)
      if not compared then return "fail", tostring(why) end
      if why then return "fail", why end
    end
  end
  return "pass"
end

local expected = {}
if options.expected then
  for line in io.lines(options.expected) do
    if line:match("^[^#%s]") then expected[line] = true end
  end
end

local passed_names, regressions, new_passes = {}, {}, {}
local totals = {}
print(string.format("%-18s %7s %7s %7s %12s %7s", "suite", "cases", "passed", "failed", "unsupported", "pass%"))
for _, suite in ipairs(options.suites) do
  local counts = {pass = 0, fail = 0, unsupported = 0}
  local blockers = {}
  local root = options.data .. "/" .. suite
  if #list_directory(root) == 0 then
    error(string.format("onnx_conformance: no test cases in %s (Debian's libonnx-testdata has them)", root), 0)
  end
  for _, case in ipairs(list_directory(root)) do
    if (not options.filter or case:find(options.filter, 1, true)) and file_exists(root .. "/" .. case .. "/model.onnx") then
      local outcome, why = run_case(root .. "/" .. case)
      counts[outcome] = counts[outcome] + 1
      local id = suite .. "/" .. case
      if outcome == "pass" then
        passed_names[#passed_names + 1] = id
        if options.expected and not expected[id] then new_passes[#new_passes + 1] = id end
      else
        local op = blocking_op(why or "")
        blockers[op] = (blockers[op] or 0) + 1
        if expected[id] then regressions[#regressions + 1] = id .. ": " .. tostring(why) end
      end
      if options.verbose then
        print(string.format("  %-11s %s%s", outcome, case, why and ("  " .. tostring(why):gsub("\n.*", "")) or ""))
      end
      collectgarbage()
      tensor.mark_step()
    end
  end
  local total = counts.pass + counts.fail + counts.unsupported
  totals[suite] = counts
  print(string.format("%-18s %7d %7d %7d %12d %6.1f%%", suite, total, counts.pass, counts.fail,
    counts.unsupported, total > 0 and 100 * counts.pass / total or 0))
  local ranked = {}
  for op, n in pairs(blockers) do ranked[#ranked + 1] = {op = op, n = n} end
  table.sort(ranked, function(a, b) return a.n > b.n or (a.n == b.n and a.op < b.op) end)
  local top = {}
  for i = 1, math.min(12, #ranked) do top[i] = string.format("%s %d", ranked[i].op, ranked[i].n) end
  if #top > 0 then print("    blocked most by: " .. table.concat(top, ", ")) end
end

if options.write_expected then
  local file = assert(io.open(options.write_expected, "w"))
  file:write("# ONNX backend test cases that lazylua passes (tools/onnx_conformance.lua --write-expected)\n")
  for _, id in ipairs(passed_names) do file:write(id, "\n") end
  file:close()
end
if #new_passes > 0 then
  print(string.format("%d cases pass that the list lacks (add them to %s):", #new_passes, options.expected))
  for _, id in ipairs(new_passes) do print("  " .. id) end
end
if #regressions > 0 then
  print(string.format("%d cases on the expected list no longer pass:", #regressions))
  for _, line in ipairs(regressions) do print("  " .. line) end
  os.exit(1)
end
