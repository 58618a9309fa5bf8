-- test_printing.lua - tostring/print of tensors: the Torch7-style footer
-- "[f32 tensor of size 2x3]" and a few small exact outputs.
local h = dofile("helpers.lua")

local function last_line(s)
  return s:match("([^\n]*)$")
end

-- Footers name the dtype and the sizes joined by "x".
local footers = {
  {tensor.zeros(2, 3), "[f32 tensor of size 2x3]"},
  {tensor.zeros(4), "[f32 tensor of size 4]"},
  {tensor.zeros(2, 3, 4), "[f32 tensor of size 2x3x4]"},
  {tensor.zeros(1, 2, 1, 2), "[f32 tensor of size 1x2x1x2]"},
  {tensor.zeros(2, 2, {dtype = "f64"}), "[f64 tensor of size 2x2]"},
  {tensor.zeros(3, {dtype = "i32"}), "[i32 tensor of size 3]"},
  {tensor.arange(5), "[i64 tensor of size 5]"},
  {tensor.new({true, false}), "[bool tensor of size 2]"},
  {tensor.rand(5, 7), "[f32 tensor of size 5x7]"},
  {tensor.zeros(2, 3):t(), "[f32 tensor of size 3x2]"},
  {tensor.arange(12):reshape(3, 4):narrow(2, 2, 2), "[i64 tensor of size 3x2]"},
  {tensor.ones(3) + 1, "[f32 tensor of size 3]"},
}
for _, case in ipairs(footers) do h.test("footer " .. case[2], function()
  local s = tostring(case[1])
  assert(type(s) == "string")
  assert(last_line(s) == case[2], string.format("footer of %q, expected %q", s, case[2]))
end) end

-- Exact small outputs (Torch7 style: integer-valued data prints without
-- decimals, columns right-aligned, one space before each column).
local exact = {
  {tensor.new({{1, 2}, {3, 4}}), " 1  2\n 3  4\n[i64 tensor of size 2x2]"},
  {tensor.new({{1, 2}, {3, 4}}):float(), " 1  2\n 3  4\n[f32 tensor of size 2x2]"},
  {tensor.new({{1, 2}, {3, 4}}):t(), " 1  3\n 2  4\n[i64 tensor of size 2x2]"},
  {tensor.new({{10, 2}, {3, 4}}), " 10   2\n  3   4\n[i64 tensor of size 2x2]"},
  {tensor.new({{-1, 2}}), "-1  2\n[i64 tensor of size 1x2]"},
  {tensor.new({{1.5, 2}, {3, 4}}), " 1.5000  2.0000\n 3.0000  4.0000\n[f32 tensor of size 2x2]"},
}
for _, case in ipairs(exact) do h.test("exact " .. case[2], function()
  local s = tostring(case[1])
  assert(s == case[2], string.format("tostring gave %q, expected %q", s, case[2]))
end) end

-- The text shows the values: every element of a small tensor appears.
h.test("The text shows the values: every element of a small tenso...", function()
  local s = tostring(tensor.new({{7, 8, 9}, {10, 11, 12}}))
  for v = 7, 12 do assert(s:find(tostring(v), 1, true), s) end
  local b = tostring(tensor.new({true, false}))
  assert(last_line(b) == "[bool tensor of size 2]", b)
  -- a 0-dim tensor prints its value and its dtype
  local z = tostring(tensor.new(42))
  assert(z:find("42", 1, true) and z:find("i64", 1, true), z)
  local zf = tostring(tensor.new(2.5))
  assert(zf:find("2.5", 1, true) and zf:find("f32", 1, true), zf)
  -- an empty tensor prints without error
  assert(type(tostring(tensor.zeros(0))) == "string")
  assert(type(tostring(tensor.zeros(2, 0, 3))) == "string")
  -- a large tensor prints (elided or not) and ends with its footer
  local big = tostring(tensor.zeros(300, 300))
  assert(last_line(big) == "[f32 tensor of size 300x300]")
  -- NaN and infinities print
  local special = tostring(tensor.new({0 / 0, math.huge, -math.huge}))
  assert(special:lower():find("nan", 1, true) and special:lower():find("inf", 1, true), special)
end)

-- print() goes through __tostring and does not fail.
print(tensor.new({{1, 2}, {3, 4}}))

-- string.format("%s") and .. use __tostring / are errors as in Lua.
h.test("format and concat", function()
  assert(string.format("%s", tensor.new({{1, 2}, {3, 4}})) ==
         " 1  2\n 3  4\n[i64 tensor of size 2x2]")
  assert(not pcall(function() return "x" .. tensor.new({1}) end))
end)

h.done("test_printing")
