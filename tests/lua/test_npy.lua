-- test_npy.lua - tensor.save_npy/load_npy and save_npz/load_npz from Lua:
-- the bytes written follow the .npy format as NumPy documents it (checked
-- here byte by byte), every dtype, views and pending lazy values round-trip,
-- and bad arguments give clear errors. tests/cli/test_npy.sh checks the
-- files against NumPy itself.
local h = dofile("helpers.lua")

local temp, remove_temporaries = h.temp_paths()

h.test("save_npy writes NumPy's version 1.0 layout", function()
  local path = temp("layout.npy")
  tensor.save_npy(path, tensor.new({{1, 2, 3}, {4, 5, 6.5}}))
  local bytes = h.read_bytes(path)
  local dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
  assert(bytes:sub(1, 8) == "\x93NUMPY\1\0", "magic and version")
  local header_length = string.unpack("<I2", bytes, 9)
  assert((10 + header_length) % 64 == 0, "data aligned on 64 bytes, header " .. header_length)
  local header = bytes:sub(11, 10 + header_length)
  assert(header == dict .. string.rep(" ", header_length - #dict - 1) .. "\n", h.show(header))
  assert(bytes:sub(11 + header_length) == string.pack("<ffffff", 1, 2, 3, 4, 5, 6.5), "data")
  -- 1-d shapes are written as Python's one-element tuple, 0-d as ()
  tensor.save_npy(path, tensor.new({true, false}))
  assert(h.read_bytes(path):find("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", 1, true))
  tensor.save_npy(path, tensor.new(7, {dtype = "i64"}))
  local scalar = h.read_bytes(path)
  assert(scalar:find("{'descr': '<i8', 'fortran_order': False, 'shape': (), }", 1, true))
  assert(scalar:sub(-8) == string.pack("<i8", 7))
end)

h.test("every dtype, views and pending values round-trip", function()
  local base_values = tensor.arange(12):reshape(3, 4)
  local cases = {
    {tensor.new({{1.5, -2}, {0, 3}}, {dtype = "f32"}), "f32", {{1.5, -2}, {0, 3}}},
    {tensor.new({1 / 3, -1e300}, {dtype = "f64"}), "f64", {1 / 3, -1e300}},
    {tensor.new({-2147483648, 2147483647}, {dtype = "i32"}), "i32", {-2147483648, 2147483647}},
    {tensor.new({math.mininteger, math.maxinteger}, {dtype = "i64"}), "i64", {math.mininteger, math.maxinteger}},
    {tensor.new({true, false, true}), "bool", {true, false, true}},
    {base_values:t(), "i64", {{0, 4, 8}, {1, 5, 9}, {2, 6, 10}, {3, 7, 11}}},       -- transposed view
    {base_values:narrow(1, 2, 2):narrow(2, 3, 2), "i64", {{6, 7}, {10, 11}}},        -- offset view
    {(base_values * 2 + 1):sum(2), "i64", {2 * 6 + 4, 2 * 22 + 4, 2 * 38 + 4}},     -- pending
    {tensor.new(2.5, {dtype = "f64"}), "f64", 2.5},                                  -- 0-dim
  }
  for i, case in ipairs(cases) do
    local path = temp("case" .. i .. ".npy")
    tensor.save_npy(path, case[1])
    h.check(tensor.load_npy(path), case[2], case[3])
  end
  local empty = tensor.load_npy((function()
    local path = temp("empty.npy")
    tensor.save_npy(path, tensor.zeros(0, 5):long())
    return path
  end)())
  h.check(empty, "i64", {}, nil, {0, 5})
  -- a loaded tensor takes part in lazy work like any other
  h.check(tensor.load_npy(temp("case1.npy")) * 2, "f32", {{3, -4}, {0, 6}})
end)

h.test("save_npz and load_npz, stored and compressed", function()
  local tensors = {weights = tensor.ones(3, 2) * 0.5, labels = tensor.new({3, 1, 2}, {dtype = "i64"}),
                   mask = tensor.new({false, true})}
  for _, compressed in ipairs({false, true}) do
    local path = temp(compressed and "c.npz" or "s.npz")
    tensor.save_npz(path, tensors, {compressed = compressed})
    local loaded = tensor.load_npz(path)
    h.check(loaded.weights, "f32", {{0.5, 0.5}, {0.5, 0.5}, {0.5, 0.5}})
    h.check(loaded.labels, "i64", {3, 1, 2})
    h.check(loaded.mask, "bool", {false, true})
    local count = 0
    for _ in pairs(loaded) do count = count + 1 end
    assert(count == 3, count .. " entries")
  end
  -- compression shrinks a repetitive tensor; the zip bytes name the entries
  local big = {zeros = tensor.zeros(10000)}
  tensor.save_npz(temp("big_s.npz"), big)
  tensor.save_npz(temp("big_c.npz"), big, {compressed = true})
  local stored, deflated = h.read_bytes(temp("big_s.npz")), h.read_bytes(temp("big_c.npz"))
  assert(#deflated < #stored / 20, #deflated .. " vs " .. #stored)
  assert(stored:sub(1, 4) == "PK\3\4" and stored:find("zeros.npy", 1, true))
  h.check(tensor.load_npz(temp("big_c.npz")).zeros:sum(), "f32", 0)
  -- an empty table makes an empty archive
  tensor.save_npz(temp("none.npz"), {})
  assert(next(tensor.load_npz(temp("none.npz"))) == nil)
end)

h.test("bad arguments", function()
  local t = tensor.ones(2)
  h.err(function() tensor.save_npy(1, t) end, "bad argument #1", "save_npy", "string (a file path) expected")
  h.err(function() tensor.save_npy(temp("x.npy"), {1, 2}) end, "bad argument #2", "save_npy")
  local closed
  do
    local c <close> = tensor.ones(1)
    closed = c
  end
  h.err(function() tensor.save_npy(temp("x.npy"), closed) end, "save_npy", "closed")
  h.err(function() tensor.save_npz(temp("x.npz"), {t}) end, "a number key; entries are named by strings")
  h.err(function() tensor.save_npz(temp("x.npz"), {a = 1}) end, "'a' is a number, not a tensor")
  h.err(function() tensor.save_npz(temp("x.npz"), {a = closed}) end, "'a' is a closed tensor")
  h.err(function() tensor.save_npz(temp("x.npz"), {["a/b"] = t}) end, "'a/b' is not a valid entry name")
  h.err(function() tensor.save_npz(temp("x.npz"), {a = t}, {compress = true}) end, "compress")
  h.err(function() tensor.save_npz(temp("x.npz"), {a = t}, {compressed = 1}) end, "must be a boolean")
  h.err(function() tensor.save_npz(temp("x.npz"), "a") end, "bad argument #2", "table (name -> tensor)")
  h.err(function() tensor.load_npy(temp("missing.npy")) end, "tensor.load_npy", "cannot open")
  h.err(function() tensor.load_npz(temp("missing.npz")) end, "tensor.load_npz", "cannot open")
  -- a .npy file is not an archive, an archive not a .npy file
  tensor.save_npy(temp("a.npy"), t)
  tensor.save_npz(temp("a.npz"), {a = t})
  h.err(function() tensor.load_npz(temp("a.npy")) end, "is not a zip archive")
  h.err(function() tensor.load_npy(temp("a.npz")) end, "is not a .npy file")
  -- the process stays usable
  h.check(tensor.load_npy(temp("a.npy")), "f32", {1, 1})
end)

remove_temporaries()
h.done("test_npy")
