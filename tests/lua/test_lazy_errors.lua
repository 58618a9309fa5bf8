-- test_lazy_errors.lua - errors and diagnostics in lazy mode name Lua lines:
-- shape errors at the op's line at record time; errors raised while a graph
-- runs surface at the observation point naming the op's line, and the
-- interpreter keeps working; tensor.ir / tensor.dot show ops, dtypes, shapes
-- and this file's lines; LAZYLUA_DEBUG=1 prints one line per sync. Under
-- LAZYLUA_EAGER=1 the eager behaviour is asserted instead (errors at the
-- op's line, at once).
local h = dofile("helpers.lua")

local LAZY = not tensor.is_eager()
-- this file's name as it appears in locations (test_lazy_errors.lua)
local FILE = debug.getinfo(1, "S").short_src:match("[^/]+$")

local function here() return debug.getinfo(2, "l").currentline end

local function contains(msg, needle)
  if not tostring(msg):find(needle, 1, true) then
    error(string.format("message %q does not contain %q", tostring(msg), needle), 2)
  end
end

-- The message says "error in the op recorded at <path>test_lazy_errors.lua:<line>"
-- (the path is the script's as given to the interpreter).
local function names_op(msg, line)
  local pattern = "error in the op recorded at [^%s]-" .. (FILE .. ":" .. line):gsub("%p", "%%%0")
                  .. "%f[^%d]"
  if not tostring(msg):find(pattern) then
    error(string.format("message %q does not say \"error in the op recorded at %s:%d\"",
                        tostring(msg), FILE, line), 2)
  end
end

local function lacks(msg, needle)
  if tostring(msg):find(needle, 1, true) then
    error(string.format("message %q should not contain %q", tostring(msg), needle), 2)
  end
end

-- ---------------------------------------------------------------------------
-- (a) Record-time shape errors, at the op's line, in both modes

h.test("a shape error inside a loop is a Lua error at the line of the op", function()
  local a = tensor.ones(2, 3)
  local b = tensor.ones(4)
  local w = tensor.ones(3, 2)
  local syncs_before = tensor.metrics().syncs
  for i = 1, 5 do
    local c = a * i
    local ok, msg = pcall(function() return c + b end) local line = here()
    assert(not ok, "c + b should fail")
    contains(msg, FILE .. ":" .. line .. ":")
    contains(msg, "[2, 3]")
    contains(msg, "[4]")
    ok, msg = pcall(function() return c:matmul(c) end) line = here()
    assert(not ok, "matmul should fail")
    contains(msg, FILE .. ":" .. line .. ":")
    contains(msg, "matmul")
    ok, msg = pcall(function() w:add_(c) end) line = here()
    assert(not ok, "w:add_(c) should fail")
    contains(msg, FILE .. ":" .. line .. ":")
    contains(msg, "[3, 2]")
    contains(msg, "[2, 3]")
    -- the loop goes on recording
    w:add_(1)
  end
  -- no error needed a sync: shapes are known at record time
  if LAZY then
    assert(tensor.metrics().syncs == syncs_before,
           "a record-time error synced: syncs " .. syncs_before .. " -> " .. tensor.metrics().syncs)
  end
  h.check(w, "f32", {{6, 6}, {6, 6}, {6, 6}})
end)

h.test("record-time errors from a function called in a loop name the op's line", function()
  local function layer(x, weight)
    return x:matmul(weight)
  end
  -- the line of `x:matmul(weight)` above
  local op_line = debug.getinfo(layer, "S").linedefined + 1
  local x = tensor.ones(4, 3)
  for i = 1, 3 do
    local ok, msg = pcall(layer, x, tensor.ones(3 + (i == 3 and 1 or 0), 2))
    if i < 3 then
      assert(ok, msg)
    else
      assert(not ok)
      contains(msg, FILE .. ":" .. op_line .. ":")
      contains(msg, "[4, 3]")
      contains(msg, "[4, 2]")
    end
  end
end)

-- Max and min have no identity: reducing an empty tensor (or a 0-size dim
-- that leaves results) is an error known from shapes alone, raised at the
-- op's line when it is recorded, as in eager mode (lazy mode once raised it
-- only when a value was read).
h.test("max/min/argmax of nothing: record-time errors", function()
  local e = tensor.zeros(4, 0)
  local cases = {
    {function() return e:max() end, "max: cannot reduce an empty tensor (shape [4, 0])"},
    {function() return e:min() end, "min: cannot reduce an empty tensor (shape [4, 0])"},
    {function() return e:argmax() end, "max: cannot reduce an empty tensor (shape [4, 0])"},
    {function() return e:argmin(2) end, "min: cannot reduce dimension 2 of size 0"},
    {function() return e:max(2) end, "max: cannot reduce dimension 2 of size 0"},
    {function() return (e + 1):min(-1) end, "min: cannot reduce dimension 2 of size 0"},
  }
  local syncs_before = tensor.metrics().syncs
  for i, case in ipairs(cases) do
    local ok, msg = pcall(case[1])
    assert(not ok, "case " .. i .. " did not raise")
    contains(msg, case[2])
    lacks(msg, "recorded at")
  end
  if LAZY then assert(tensor.metrics().syncs == syncs_before, "a record-time error synced") end
  -- what has an identity, or leaves no result, is fine
  h.check(e:sum(), "f32", 0)
  h.check(e:max(1), "f32", {})
  h.check(e:argmax(1), "i64", {})
end)

-- ---------------------------------------------------------------------------
-- (b) Errors raised while running a graph

h.test("integer division by zero surfaces at the observation, naming the op's line", function()
  local a = tensor.new({7, 8, 9})
  local b = tensor.new({2, 0, 3})
  local independent = a * 2
  if not LAZY then
    local ok, msg = pcall(function() return a // b end) local op_line = here()
    assert(not ok, "eager a // b with a zero divisor should fail at once")
    contains(msg, FILE .. ":" .. op_line .. ":")
    contains(msg, "zero")
    h.check(independent, "i64", {14, 16, 18})
    return
  end
  local q = a // b local op_line = here()
  -- recording did not fail; observing does
  local ok, msg = pcall(function() return q:tolist() end) local obs_line = here()
  assert(not ok, "q:tolist() should fail")
  contains(msg, FILE .. ":" .. obs_line .. ":")
  names_op(msg, op_line)
  contains(msg, "zero")
  -- the interpreter keeps working
  local fresh = tensor.new({1, 2, 3}) + 1
  h.check(fresh, "i64", {2, 3, 4})
  h.check(independent, "i64", {14, 16, 18})
  tensor.mark_step()
  local after = a * 3
  tensor.mark_step()
  h.check(after, "i64", {21, 24, 27})
  -- the failed tensor raises a clear error when used again, each time
  for _, use in ipairs({
    function() return q:tolist() end,
    function() return tostring(q) end,
    function() return q:sum():item() end,
    function() return q + 1 end,
    function() return q[1] end,
  }) do
    local ok2, msg2 = pcall(use)
    if ok2 and tensor.is_tensor(msg2) then ok2, msg2 = pcall(function() return msg2:tolist() end) end
    assert(not ok2, "using the failed tensor should fail")
    contains(msg2, "could not be computed")
    contains(msg2, FILE .. ":" .. op_line)
  end
  -- the divisor and dividend are untouched
  h.check(a, "i64", {7, 8, 9})
  h.check(b, "i64", {2, 0, 3})
  -- and a % 0 fails the same way
  local r = a % b local mod_line = here()
  ok, msg = pcall(function() return r:tolist() end)
  assert(not ok)
  names_op(msg, mod_line)
end)

h.test("an out-of-range gather index surfaces at the observation, naming the op's line", function()
  local x = tensor.new({{1, 2, 3}, {4, 5, 6}})
  local idx = tensor.new({{1, 5}, {2, 1}})
  if not LAZY then
    local ok, msg = pcall(function() return x:gather(2, idx) end) local op_line = here()
    assert(not ok)
    contains(msg, FILE .. ":" .. op_line .. ":")
    contains(msg, "out of range")
    return
  end
  local g = x:gather(2, idx) local op_line = here()
  -- print calls __tostring from C, so the message has no position of its
  -- own (as for any error raised under print); it names the op's line
  local ok, msg = pcall(function() print(g) end)
  assert(not ok, "print(g) should fail")
  names_op(msg, op_line)
  contains(msg, "gather")
  contains(msg, "out of range")
  -- keeps working: the same op with good indices, a barrier, the old input
  local good = x:gather(2, tensor.new({{3, 1}, {2, 2}}))
  tensor.mark_step()
  h.check(good, "i64", {{3, 1}, {5, 5}})
  h.check(x, "i64", {{1, 2, 3}, {4, 5, 6}})
  ok, msg = pcall(function() return g:tolist() end)
  assert(not ok)
  contains(msg, "could not be computed")
  contains(msg, FILE .. ":" .. op_line)
  -- index_select too
  local s = x:index_select(2, tensor.new({1, 4})) local select_line = here()
  ok, msg = pcall(function() return s:tolist() end)
  assert(not ok)
  names_op(msg, select_line)
  contains(msg, "index_select")
end)

h.test("a failure at a barrier: the failing op's line; other pending tensors survive", function()
  if not LAZY then return end
  local a = tensor.new({4, 6, 8})
  local b = tensor.new({2, 0, 2})
  local fine = a + 100                     -- pending, does not need the failing op
  local bad = a // b local op_line = here()
  local dependent = bad * 2                -- recorded before the failure
  local ok, msg = pcall(tensor.mark_step)
  assert(not ok, "the barrier should fail")
  names_op(msg, op_line)
  -- the independent tensor is still computable, with the right value
  h.check(fine, "i64", {104, 106, 108})
  -- the dependent tensor names the op that failed
  ok, msg = pcall(function() return dependent:tolist() end)
  assert(not ok)
  contains(msg, FILE .. ":" .. op_line)
  -- later barriers work (the failed tensors keep their error)
  local x = a * 2
  ok, msg = pcall(tensor.mark_step)
  assert(ok, "a barrier after the failure failed again: " .. tostring(msg))
  ok, msg = pcall(tensor.mark_step)
  assert(ok, msg)
  h.check(x, "i64", {8, 12, 16})
end)

h.test("a dependent of a failed tensor, recorded before the failure, fails clearly once", function()
  if not LAZY then return end
  local a = tensor.new({1, 2})
  local b = tensor.new({0, 1})
  local q = a // b local op_line = here()
  local q2 = q + 1
  local ok, msg = pcall(function() return q:tolist() end)
  assert(not ok)
  ok, msg = pcall(function() return q2:tolist() end)
  assert(not ok, "q2 depends on the failed op")
  names_op(msg, op_line)
  -- after that, barriers are clean
  ok, msg = pcall(tensor.mark_step)
  assert(ok, "barrier after the dependent failed: " .. tostring(msg))
  local fresh = a + b
  h.check(fresh, "i64", {1, 3})
end)

h.test("errors inside pcall in a loop do not poison later steps", function()
  local w = tensor.new({1.0, 2.0})
  local zero_every = 3
  local failures = 0
  for i = 1, 9 do
    local ok = pcall(function()
      local d = tensor.new({1, (i % zero_every == 0) and 0 or 1})
      local q = tensor.new({5, 5}) // d
      return q:sum():item()
    end)
    if not ok then failures = failures + 1 end
    w:add_(1)
    tensor.mark_step()
  end
  assert(failures == 3, "failures " .. failures)
  h.check(w, "f32", {10, 11})
end)

-- ---------------------------------------------------------------------------
-- (c) The IR text and Graphviz forms

h.test("tensor.ir shows op names, dtypes, shapes and this file's lines", function()
  local x = tensor.new({{1, 2}, {3, 4}}, {dtype = "f32"})
  local y = x * 2.5 local y_line = here()
  local z = y:sum(1) local z_line = here()
  local k = tensor.new({1, 2, 3}):long() + 1 local k_line = here()
  local t = x:t():exp() local t_line = here()
  local text = tensor.ir(z)
  local both = tensor.ir(y, z)
  local ktext = tensor.ir(k)
  local ttext = tensor.ir(t)
  local dot = tensor.dot(z)
  assert(dot:sub(1, 7) == "digraph", "tensor.dot output starts with " .. dot:sub(1, 20))
  assert(tensor.dot(y, z):sub(1, 7) == "digraph")
  if not LAZY then
    -- eager: z is data, one parameter
    contains(text, "f32[2] parameter(0)")
    contains(text, "outputs: %0")
    lacks(text, "sum(")
    return
  end
  local function line_with(s, needle)
    for l in s:gmatch("[^\n]+") do
      if l:find(needle, 1, true) then return l end
    end
    error(string.format("no line with %q in:\n%s", needle, s), 2)
  end
  contains(line_with(text, "parameter(0)"), "f32[2,2]")
  contains(line_with(text, "scalar("), "f32[]")
  contains(line_with(text, "scalar("), "2.5")
  local mul = line_with(text, " mul(")
  contains(mul, "f32[2,2]")
  contains(mul, FILE .. ":" .. y_line)
  local sum = line_with(text, " sum(")
  contains(sum, "f32[2]")
  contains(sum, "dim=0")
  contains(sum, FILE .. ":" .. z_line)
  assert(text:match("\noutputs: %%%d+\n$"), "outputs line:\n" .. text)
  -- two roots: two outputs, shared nodes once
  assert(both:match("outputs: %%%d+ %%%d+"), both)
  local _, muls = both:gsub(" mul%(", "")
  assert(muls == 1, "mul appears " .. muls .. " times:\n" .. both)
  -- integers and casts
  local add = line_with(ktext, " add(")
  contains(add, "i64[3]")
  contains(add, FILE .. ":" .. k_line)
  contains(line_with(ktext, "constant(1)"), "i64[]")
  -- a view feeding an op
  contains(line_with(ttext, " permute("), "f32[2,2]")
  contains(line_with(ttext, " exp("), FILE .. ":" .. t_line)
  -- dot: nodes, edges, this file's lines
  contains(dot, "->")
  contains(dot, "sum")
  contains(dot, FILE .. ":" .. z_line)
  -- tensor.ir does not sync or change anything
  local m = tensor.metrics()
  local again = tensor.ir(z)
  assert(again == text, "tensor.ir changed:\n" .. text .. "\n" .. again)
  assert(tensor.metrics().syncs == m.syncs, "tensor.ir synced")
  h.check(z, "f32", {10, 15})
end)

h.test("ops called through a C function (pcall) record the calling Lua line", function()
  if not LAZY then return end
  local a = tensor.new({1.0, 2.0})
  local ok, b = pcall(tensor.exp, a) local line = here()
  assert(ok, b)
  local text = tensor.ir(b)
  for l in text:gmatch("[^\n]+") do
    if l:find(" exp(", 1, true) then
      contains(l, FILE .. ":" .. line)
      return
    end
  end
  error("no exp line in:\n" .. text)
end)

-- ---------------------------------------------------------------------------
-- (d) LAZYLUA_DEBUG=1 prints one line per sync, with the cause and hit/miss

local function run_child(env, program)
  local interpreter = arg and arg[-1]
  assert(interpreter, "arg[-1] (the interpreter) is not set")
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(program)
  f:close()
  local command = string.format("%s '%s' '%s' 2>&1", env, interpreter:gsub("'", "'\\''"), path)
  local pipe = assert(io.popen(command, "r"))
  local output = pipe:read("a")
  local ok, how, code = pipe:close()
  os.remove(path)
  return output, ok, code, path
end

local CHILD = [[
local w = tensor.new({1.0, 2.0})
local s = (w * 2):sum()
print("item", s:item())
for i = 1, 3 do
  w:mul_(0.5)
  tensor.mark_step()
end
local t = w + 1
print(t)
local u = w:sum()
print("lt", u < 5)
local v = u * 3
tensor.sync(v)
local l = (w - 4):tolist()
print("SYNCS", tensor.metrics().syncs)
]]

h.test("LAZYLUA_DEBUG=1 prints one line per sync with cause, location and hit/miss", function()
  local output, ok, code, path = run_child("LAZYLUA_EAGER=0 LAZYLUA_DEBUG=1", CHILD)
  assert(ok, "child failed (" .. tostring(code) .. "):\n" .. output)
  local lines = {}
  for l in output:gmatch("[^\n]+") do
    if l:find("[lazylua] sync", 1, true) then lines[#lines + 1] = l end
  end
  local syncs = tonumber(output:match("SYNCS%s+(%d+)"))
  assert(syncs, "no SYNCS line in:\n" .. output)
  assert(#lines == syncs, string.format("%d debug lines for %d syncs:\n%s", #lines, syncs, output))
  local want = {
    {"item", 3, "miss"}, {"barrier", 6, "miss"}, {"barrier", 6, "hit"}, {"barrier", 6, "hit"},
    {"print", 9, "miss"}, {"comparison", 11, "miss"}, {"explicit_sync", 13, "miss"},
    {"tolist", 14, "miss"},
  }
  assert(#lines == #want, string.format("%d debug lines, expected %d:\n%s", #lines, #want, output))
  local short = path:match("[^/]+$")
  local bad = {}
  for i, w in ipairs(want) do
    local l = lines[i]
    local pattern = "^%[lazylua%] sync %(" .. w[1]:gsub("_", "%%_") .. "%) at .-" ..
                    short:gsub("%p", "%%%0") .. ":" .. w[2] ..
                    ": %d+ nodes, %d+ outputs, key %x+, " .. w[3] .. "$"
    if not l:match(pattern) then
      bad[#bad + 1] = string.format("debug line %d: %q, expected cause %s at line %d, %s", i, l,
                                    w[1], w[2], w[3])
    end
  end
  assert(#bad == 0, table.concat(bad, "\n"))
  -- the barrier lines of the loop show the same key
  local keys = {}
  for i = 2, 4 do keys[i] = lines[i]:match("key (%x+)") end
  assert(keys[2] == keys[3] and keys[3] == keys[4], "barrier keys differ:\n" .. output)
  -- and the program's own output is intact
  contains(output, "item\t6.0")
  contains(output, "lt\ttrue")
end)

h.test("LAZYLUA_DEBUG=1 in eager mode: no syncs, no sync lines", function()
  local output, ok, code = run_child("LAZYLUA_EAGER=1 LAZYLUA_DEBUG=1", CHILD)
  assert(ok, "child failed (" .. tostring(code) .. "):\n" .. output)
  lacks(output, "[lazylua] sync")
  contains(output, "item\t6.0")
end)

h.test("without LAZYLUA_DEBUG the child prints no sync lines", function()
  local output, ok, code = run_child("LAZYLUA_EAGER=0 LAZYLUA_DEBUG=", CHILD)
  assert(ok, "child failed (" .. tostring(code) .. "):\n" .. output)
  lacks(output, "[lazylua]")
end)

-- Errors never crash the process (DESIGN §3). Run in a child so that a crash
-- is reported here instead of ending this file.
h.test("tensor.sync with a tensor twice, or a tensor and its view, does not crash", function()
  local program = [[
local a = tensor.new({1, 2}) + 1
tensor.sync(a, a)
local b = tensor.new({1, 2}) * 3
local v = b[2]
tensor.sync(b, v)
local c = tensor.new({4, 5}) - 1
tensor.sync({c, c:t(), c})
print("RESULT", a[1]:item(), a[2]:item(), b[2]:item(), v:item(), c[2]:item())
]]
  local output, ok, code = run_child("LAZYLUA_EAGER=0", program)
  assert(ok, "the child died (exit " .. tostring(code) .. "):\n" .. output)
  contains(output, "RESULT\t2\t3\t6\t6\t4")
end)

h.done("test_lazy_errors")
