-- test_hostile_inputs.lua - inputs chosen to break the interpreter: sizes,
-- starts and lengths near math.maxinteger (whose sums and products overflow
-- int64), files that claim absurd shapes, and loops that make tensors
-- faster than Lua's collector notices them. Each must give a clear Lua
-- error naming the op (or just work), never a crash, a view outside its
-- buffer or a silent wrong result, and the interpreter stays usable.
--
-- Every failing call is a statement inside a closure, so the error position
-- is this file's line.
local h = dofile("helpers.lua")

local MAX, MIN = math.maxinteger, math.mininteger

-- Each bad call is its own group, followed by a computation that must
-- still work.
local bad, still_works = h.bad, h.still_works

-- ---- Tensor memory and Lua's collector (first: VmHWM is the peak so far) ----

-- The process's resident memory now and at its peak, in kB.
local function memory_kb()
  local file = io.open("/proc/self/status")
  if not file then return nil end
  local status = file:read("a")
  file:close()
  return tonumber(status:match("VmRSS:%s*(%d+) kB")), tonumber(status:match("VmHWM:%s*(%d+) kB"))
end

-- A loop making a 4 MB tensor per iteration keeps one alive at a time, but
-- Lua's collector saw only the userdata: it peaked at 6.4 GB.
h.test("a loop of short-lived big tensors stays small", function()
  local start = memory_kb()
  for _ = 1, 3000 do
    local t = tensor.ones(1000000)
  end
  -- Tensors that live through a few collections (old in the generational
  -- collector) before they die.
  local ring = {}
  for i = 1, 1000 do ring[i % 5 + 1] = tensor.ones(1000000) end
  ring = nil
  local _, peak = memory_kb()
  if peak then
    local mb = 1024
    assert(peak - start < 80 * mb, string.format("grew by %.0f MB", (peak - start) / mb))
    -- A sanitizer build starts at ~40 MB (its shadow memory): only the
    -- growth means something there.
    if start < 24 * mb then
      assert(peak < 100 * mb, string.format("peak resident memory %.0f MB", peak / mb))
    end
  end
  still_works()
end)

-- ---- Sizes, starts and lengths whose arithmetic overflows ----

local a = tensor.arange(10)

-- start + length wrapped around and passed the bounds check: the view read
-- (and, in eager mode, wrote) far outside the buffer.
bad(function() a:narrow(1, 2, MAX) end, "narrow", "exceed the size 10")
bad(function() print(a:narrow(1, 2, MAX):narrow(1, 20, 3)) end, "narrow")
bad(function() a:narrow(1, 2, MAX):narrow(1, 2, 200):fill_(1) end, "narrow")
bad(function() a:narrow(1, 11, MAX) end, "narrow")
bad(function() a:narrow(1, 10, MAX - 8) end, "narrow")
bad(function() a:narrow(1, MIN, 1) end, "narrow")
bad(function() a:narrow(1, 1, MIN) end, "narrow")
bad(function() a:reshape(2, 5):narrow(2, 3, MAX):fill_(0) end, "narrow")

h.test("narrow near the bounds still works", function()
  h.check(a:narrow(1, 11, 0), "i64", {}, nil, {0})
  h.check(a:narrow(1, 8, 3), "i64", {7, 8, 9})
  h.check(a:narrow(1, -3, 3), "i64", {7, 8, 9})
  local b = tensor.zeros(4, {dtype = "i64"})
  b:narrow(1, 2, 3):fill_(5)
  h.check(b, "i64", {0, 5, 5, 5})
end)

-- Inferred dims: the product of the known extents overflowed to 0 or to a
-- divisor of the element count.
bad(function() a:reshape(2 ^ 40, 2 ^ 40, -1) end, "reshape", "too many elements")
bad(function() a:view(-1, 2 ^ 40, 2 ^ 40, 2 ^ 40) end, "view", "too many elements")
bad(function() tensor.zeros(0):reshape(2 ^ 40, 2 ^ 40, 0) end, "reshape", "too many elements")
bad(function() tensor.zeros(0, 2 ^ 40, 2 ^ 40) end, "too many elements")
bad(function() tensor.zeros(2 ^ 40, 2 ^ 40) end, "too many elements")
bad(function() tensor.zeros(1, 1):expand(2 ^ 40, 2 ^ 40) end, "expand", "too many elements")

h.test("an empty tensor with big (but bounded) extents works", function()
  local e = tensor.zeros(0, 2 ^ 20, 2 ^ 20)
  h.shape(e, {0, 2 ^ 20, 2 ^ 20})
  h.shape(e:reshape(2 ^ 20, 0, 2 ^ 20), {2 ^ 20, 0, 2 ^ 20})
  assert(e:sum():item() == 0)
end)

-- Broadcast batch dims make a product far bigger than its operands.
bad(function()
  local left = tensor.zeros(1, 1, 1):expand(2 ^ 30, 1, 1)
  local right = tensor.zeros(1, 1, 1):expand(1, 1, 2 ^ 30)
  left:matmul(right)
end, "matmul", "too many elements")
bad(function()
  local left = tensor.zeros(2 ^ 10, 1, 1, 4):expand(2 ^ 10, 2 ^ 20, 1, 4)
  local right = tensor.zeros(1, 1, 4, 1):expand(1, 2 ^ 20, 4, 2 ^ 11)
  left:matmul(right)
end, "matmul", "too many elements")

-- stop - start wrapped around: arange(mininteger, maxinteger) was empty.
bad(function() tensor.arange(MIN, MAX) end, "arange", "too many")
bad(function() tensor.arange(MIN, MAX, 2) end, "arange", "too many")
bad(function() tensor.arange(0, 1e300) end, "arange", "too many")
bad(function() tensor.arange(1e300, -1e300, -1) end, "arange", "too many")
h.test("arange with huge steps counts exactly", function()
  h.check(tensor.arange(0, MAX, MAX), "i64", {0})
  h.check(tensor.arange(0, MIN, MIN), "i64", {0})
  h.check(tensor.arange(MAX, 0), "i64", {}, nil, {0})
  h.check(tensor.arange(0, -1e300), "f32", {}, nil, {0})
  h.check(tensor.arange(1, 10, MAX), "i64", {1})
end)

-- Indices at the ends of the integer range.
bad(function() a:select(1, MIN) end, "select", "out of range")
bad(function() a:select(1, MAX) end, "select", "out of range")
bad(function() local _ = a[MIN] end, "out of range")
bad(function() a[MAX] = 1 end, "out of range")

-- The DataLoader's row gather: first - 1 and first + count overflowed into
-- a row far outside the tensor.
local native = require "stdlib.native"
local rows = tensor.arange(12):reshape(4, 3)
bad(function() native.take_rows(rows, nil, MIN, 1) end, "rows out of range")
bad(function() native.take_rows(rows, nil, 2, MAX) end, "rows out of range")
bad(function() native.take_rows(rows, nil, MAX, 2) end, "rows out of range")
bad(function() native.take_rows(rows, tensor.new({1, 2}), MIN, 1) end, "out of range")
bad(function() native.take_rows(rows, tensor.new({1, 2}), 2, MAX) end, "out of range")
h.test("take_rows in range", function()
  h.check(native.take_rows(rows, nil, 4, 1), "i64", {{9, 10, 11}})
  h.check(native.take_rows(rows, tensor.new({4, 1}), 1, 2), "i64", {{9, 10, 11}, {0, 1, 2}})
end)

-- A scan whose stacked ys would be absurdly long fails before iterating
-- (in eager mode too, which would otherwise loop math.maxinteger times).
bad(function()
  tensor.scan(function(c) return c, c end, tensor.zeros(4), {}, {length = MAX})
end, "scan", "too many elements")

-- ---- A checkpoint that claims an absurd shape ----

-- Protocol buffer wire format (interp/checkpoint.proto), by hand.
local varint, field, bytes_field = h.varint, h.pb_field, h.pb_bytes

local crc_table = {}
for i = 0, 255 do
  local c = i
  for _ = 1, 8 do c = (c & 1 ~= 0) and (0xEDB88320 ~ (c >> 1)) or (c >> 1) end
  crc_table[i] = c
end
local function crc32(text)
  local c = 0xFFFFFFFF
  for i = 1, #text do c = crc_table[(c ~ text:byte(i)) & 0xff] ~ (c >> 8) end
  return c ~ 0xFFFFFFFF
end

local function checkpoint_with_shape(extents)
  local packed = {}
  for i, extent in ipairs(extents) do packed[i] = varint(extent) end
  local tensor_data = field(1, 0) .. varint(4) .. bytes_field(2, table.concat(packed))  -- f32
  local value = bytes_field(6, tensor_data)
  local entry = field(1, 0) .. varint(2) .. bytes_field(3, value)  -- key 1 (zigzag 2)
  local payload = bytes_field(1, entry)
  local magic = "lazylua-checkpoint"
  return bytes_field(1, magic) .. field(2, 0) .. varint(1) .. bytes_field(3, payload) ..
         field(4, 5) .. string.pack("<I4", crc32(magic .. payload))
end

h.test("a checkpoint with a huge shape is refused", function()
  local file_path = os.tmpname()
  local function load_shape(extents)
    h.write_bytes(file_path, checkpoint_with_shape(extents))
    return tensor.load(file_path)
  end
  -- the encoder is right: a well-formed empty tensor loads
  h.shape(load_shape({2, 0})[1], {2, 0})
  h.err(function() load_shape({2 ^ 40, 2 ^ 40, 0}) end, "tensor.load", "too large")
  h.err(function() load_shape({2 ^ 40, 2 ^ 40}) end, "tensor.load", "too large")
  h.err(function() load_shape({2 ^ 40, 2 ^ 40, 2 ^ 40, 2 ^ 40, 16}) end, "tensor.load", "too large")
  os.remove(file_path)
  still_works()
end)

h.done("test_hostile_inputs")
