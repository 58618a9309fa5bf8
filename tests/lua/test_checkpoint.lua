-- test_checkpoint.lua - tensor.save / tensor.load: round trips of every
-- dtype and value kind, atomic writes, and a clear error (never a crash or
-- garbage) for truncated, corrupted, foreign and wrong-version files.
local h = dofile("helpers.lua")
local lfs = require "lfs"

local dir = os.tmpname()
os.remove(dir)
assert(lfs.mkdir(dir))
local function path(name) return dir .. "/" .. name end

local read_bytes, write_bytes = h.read_bytes, h.write_bytes

local function directory_entries()
  local names = {}
  for name in lfs.dir(dir) do
    if name ~= "." and name ~= ".." then names[#names + 1] = name end
  end
  table.sort(names)
  return names
end

h.test("every dtype round-trips with shape and exact values", function()
  local cases = {
    {tensor.new({{1.5, -2.25}, {0.1, 3e38}}), "f32", {{1.5, -2.25}, {h.f32(0.1), h.f32(3e38)}}},
    {tensor.new({0.1, -1e-300, 1e300}, {dtype = "f64"}), "f64", {0.1, -1e-300, 1e300}},
    {tensor.new({-2147483648, 2147483647, 7}, {dtype = "i32"}), "i32", {-2147483648, 2147483647, 7}},
    {tensor.new({math.mininteger, math.maxinteger, 0}), "i64", {math.mininteger, math.maxinteger, 0}},
    {tensor.new({{true, false}, {false, true}}), "bool", {{true, false}, {false, true}}},
  }
  local saved = {}
  for i, case in ipairs(cases) do saved[i] = case[1] end
  tensor.save(path("dtypes.ckpt"), saved)
  local loaded = tensor.load(path("dtypes.ckpt"))
  for i, case in ipairs(cases) do h.check(loaded[i], case[2], case[3]) end
end)

h.test("0-dim, empty and special-value tensors", function()
  tensor.save(path("shapes.ckpt"), {
    scalar = tensor.full({}, 2.5),
    int_scalar = tensor.full({}, 7),
    empty = tensor.zeros(0, 3),
    empty_bool = tensor.zeros({0}, {dtype = "bool"}),
    specials = tensor.new({0 / 0, math.huge, -math.huge, -0.0}, {dtype = "f64"}),
  })
  local s = tensor.load(path("shapes.ckpt"))
  h.check(s.scalar, "f32", 2.5, nil, {})
  h.check(s.int_scalar, "i64", 7, nil, {})
  h.check(s.empty, "f32", {}, nil, {0, 3})
  h.check(s.empty_bool, "bool", {}, nil, {0})
  local v = s.specials:tolist()
  assert(v[1] ~= v[1] and v[2] == math.huge and v[3] == -math.huge)
  assert(v[4] == 0 and 1 / v[4] == -math.huge, "-0.0 keeps its sign")
end)

h.test("views and pending lazy results are saved as their values", function()
  local base = tensor.arange(12):reshape(3, 4)
  local transposed = base:t()              -- non-contiguous
  local column = base:select(2, 3)         -- strided
  local narrowed = base:narrow(2, 2, 2)    -- offset and strided
  local expanded = tensor.new({1.0, 2.0}):unsqueeze(1):expand(3, 2)   -- zero strides
  local pending = (base * 2 + 1):float() / 4   -- never observed before save
  tensor.save(path("views.ckpt"), {transposed, column, narrowed, expanded, pending})
  local s = tensor.load(path("views.ckpt"))
  h.check(s[1], "i64", {{0, 4, 8}, {1, 5, 9}, {2, 6, 10}, {3, 7, 11}})
  h.check(s[2], "i64", {2, 6, 10})
  h.check(s[3], "i64", {{1, 2}, {5, 6}, {9, 10}})
  h.check(s[4], "f32", {{1, 2}, {1, 2}, {1, 2}})
  local want = {}
  for r = 0, 2 do
    want[r + 1] = {}
    for c = 0, 3 do want[r + 1][c + 1] = ((r * 4 + c) * 2 + 1) / 4 end
  end
  h.check(s[5], "f32", want)
  assert(s[1]:is_contiguous(), "a loaded tensor is contiguous")
end)

h.test("nested tables, keys and plain values", function()
  local original = {
    model = {layers = {{weight = tensor.ones(2, 2)}, {weight = tensor.zeros(1)}}},
    epoch = 3, lr = 0.001, one_float = 1.0, name = "run \0 with \255 bytes", done = false,
    [-5] = "negative key", [math.maxinteger] = true, ["with space"] = {},
    list = {10, 20.5, "thirty", true},
  }
  tensor.save(path("nested.ckpt"), original)
  local s = tensor.load(path("nested.ckpt"))
  h.check(s.model.layers[1].weight, "f32", {{1, 1}, {1, 1}})
  h.check(s.model.layers[2].weight, "f32", {0})
  assert(math.type(s.epoch) == "integer" and s.epoch == 3)
  assert(math.type(s.lr) == "float" and s.lr == 0.001)
  assert(math.type(s.one_float) == "float" and s.one_float == 1.0, "1.0 stays a float")
  assert(s.name == "run \0 with \255 bytes" and s.done == false)
  assert(s[-5] == "negative key" and s[math.maxinteger] == true)
  assert(type(s["with space"]) == "table" and next(s["with space"]) == nil)
  assert(#s.list == 4 and s.list[1] == 10 and math.type(s.list[1]) == "integer")
  assert(s.list[2] == 20.5 and s.list[3] == "thirty" and s.list[4] == true)
  -- a table shared twice (not a cycle) is saved twice
  local shared = {x = 1}
  tensor.save(path("shared.ckpt"), {a = shared, b = shared})
  local t = tensor.load(path("shared.ckpt"))
  assert(t.a.x == 1 and t.b.x == 1 and t.a ~= t.b)
end)

h.test("the same table gives the same bytes; a save replaces atomically", function()
  local function make()
    return {b = tensor.arange(4), a = {3, 2, 1}, c = "x", [2] = 1.5, [1] = false}
  end
  tensor.save(path("det1.ckpt"), make())
  tensor.save(path("det2.ckpt"), make())
  assert(read_bytes(path("det1.ckpt")) == read_bytes(path("det2.ckpt")), "bytes differ")
  -- overwrite with new content; no temporary file is left behind
  tensor.save(path("det1.ckpt"), {v = 42})
  assert(tensor.load(path("det1.ckpt")).v == 42)
  -- a failed save leaves the old file untouched and no temporary file
  local before = read_bytes(path("det1.ckpt"))
  h.err(function() tensor.save(path("det1.ckpt"), {ok = 1, bad = print}) end, "cannot save a function")
  assert(read_bytes(path("det1.ckpt")) == before)
  for _, name in ipairs(directory_entries()) do
    assert(not name:find("tmp", 1, true), "temporary file left: " .. name)
  end
end)

-- A small checkpoint to damage.
local small_path = path("small.ckpt")
tensor.save(small_path, {w = tensor.new({1.0, 2.0, 3.0}), step = 10, tag = "abc"})
local small = read_bytes(small_path)

h.test("every truncation is a clear error", function()
  for length = 0, #small - 1 do
    write_bytes(path("cut.ckpt"), small:sub(1, length))
    h.err_any(function() tensor.load(path("cut.ckpt")) end,
              {"is truncated or corrupted", "is empty, not a checkpoint"})
  end
  write_bytes(path("cut.ckpt"), small:sub(1, #small - 3))
  h.err(function() tensor.load(path("cut.ckpt")) end, "tensor.load: '" .. path("cut.ckpt"),
        "is truncated or corrupted")
end)

h.test("every flipped bit is detected", function()
  for position = 1, #small do
    for _, mask in ipairs({0x01, 0x80}) do
      local byte = small:byte(position) ~ mask
      write_bytes(path("flip.ckpt"), small:sub(1, position - 1) .. string.char(byte) ..
                  small:sub(position + 1))
      h.err_any(function() tensor.load(path("flip.ckpt")) end,
                {"is truncated or corrupted", "is not a lazylua checkpoint",
                 "has checkpoint format version"})
    end
  end
  -- a flip inside the tensor data is caught by the checksum
  local data_at = small:find(string.pack("<f", 2.0), 1, true)
  assert(data_at, "tensor bytes not found")
  write_bytes(path("flip.ckpt"), small:sub(1, data_at - 1) .. string.char(small:byte(data_at) ~ 4) ..
              small:sub(data_at + 1))
  h.err(function() tensor.load(path("flip.ckpt")) end, "checksum mismatch")
end)

h.test("another format version is refused", function()
  -- field 2 (format_version) is the varint right after the magic string
  local magic = "lazylua-checkpoint"
  local at = small:find(magic, 1, true) + #magic
  assert(small:sub(at, at + 1) == "\x10\x01", "layout: version 1 follows the magic")
  write_bytes(path("v2.ckpt"), small:sub(1, at) .. "\x02" .. small:sub(at + 2))
  h.err(function() tensor.load(path("v2.ckpt")) end,
        "has checkpoint format version 2; this lazylua reads version 1")
end)

h.test("foreign files and bad paths", function()
  h.err(function() tensor.load(path("missing.ckpt")) end, "cannot open", "No such file or directory")
  h.err(function() tensor.load(dir) end, "is a directory")
  write_bytes(path("text.ckpt"), "-- just some Lua source\nreturn 1\n")
  h.err_any(function() tensor.load(path("text.ckpt")) end,
            {"is truncated or corrupted", "is not a lazylua checkpoint"})
  write_bytes(path("empty.ckpt"), "")
  h.err(function() tensor.load(path("empty.ckpt")) end, "is empty, not a checkpoint")
  h.err(function() tensor.save(dir .. "/no/such/dir/x.ckpt", {}) end, "cannot create a file next to")
end)

h.test("special files: symlinks are followed, devices and FIFOs refused, stale temporaries removed", function()
  local function sh(command) assert(os.execute(command), command) end
  -- A save through a symlink writes the file it points to; the link stays.
  sh("cd '" .. dir .. "' && touch real.ckpt && ln -s real.ckpt link.ckpt && ln -s missing.ckpt dangling.ckpt")
  tensor.save(path("link.ckpt"), {w = tensor.new({1, 2})})
  h.eq(tensor.load(path("real.ckpt")).w:tolist(), {1, 2})
  assert(io.popen("test -L '" .. path("link.ckpt") .. "' && echo link"):read("l") == "link",
         "the symlink was replaced by a file")
  tensor.save(path("dangling.ckpt"), {w = tensor.new({3})})
  h.eq(tensor.load(path("missing.ckpt")).w:tolist(), {3})
  -- A FIFO or a device is neither replaced nor waited on.
  sh("mkfifo '" .. path("fifo.ckpt") .. "'")
  h.err(function() tensor.save(path("fifo.ckpt"), {}) end, "is a FIFO, not a regular file")
  h.err(function() tensor.load(path("fifo.ckpt")) end, "is a FIFO, not a regular file")
  assert(io.popen("test -p '" .. path("fifo.ckpt") .. "' && echo fifo"):read("l") == "fifo")
  h.err(function() tensor.save("/dev/null", {}) end, "'/dev/null' is a device")
  h.err(function() tensor.load("/dev/zero") end, "is a device, not a regular file")
  -- What a killed save left behind is removed by the next save of that path
  -- once it is old; a young one may belong to a save still running.
  sh("cd '" .. dir .. "' && touch -d '2 hours ago' real.ckpt.tmp-AbC123 && touch real.ckpt.tmp-XyZ789")
  tensor.save(path("real.ckpt"), {})
  assert(not io.open(path("real.ckpt.tmp-AbC123")), "a stale temporary file was left")
  assert(io.open(path("real.ckpt.tmp-XyZ789")), "a young temporary file was removed")
end)

h.test("bad arguments and unsupported values", function()
  h.err(function() tensor.save(path("x.ckpt"), tensor.zeros(2)) end, "bad argument #2 to 'save'", "table expected")
  h.err(function() tensor.save(path("x.ckpt")) end, "bad argument #2 to 'save'")
  h.err(function() tensor.save(42, {}) end, "bad argument #1 to 'save'")
  h.err(function() tensor.load() end, "bad argument #1 to 'load'")
  h.err(function() tensor.save(path("x.ckpt"), {model = {forward = print}}) end,
        "cannot save a function (at 'model.forward')")
  h.err(function() tensor.save(path("x.ckpt"), {file = io.stdout}) end, "cannot save a userdata (at 'file')")
  h.err(function() tensor.save(path("x.ckpt"), {co = coroutine.create(print)}) end,
        "cannot save a thread (at 'co')")
  local cycle = {a = {}}
  cycle.a.back = cycle
  h.err(function() tensor.save(path("x.ckpt"), cycle) end, "contains itself (a cycle cannot be saved)")
  h.err(function() tensor.save(path("x.ckpt"), {[1.5] = 1}) end, "a float key in the top-level table")
  h.err(function() tensor.save(path("x.ckpt"), {list = {[true] = 1}}) end, "a boolean key in 'list'")
  local closed
  do
    local t <close> = tensor.zeros(2)
    closed = t
  end
  h.err(function() tensor.save(path("x.ckpt"), {[3] = closed}) end, "the tensor at '[3]' is closed")
  local deep = {}
  local node = deep
  for _ = 1, 40 do node.next = {}; node = node.next end
  h.err(function() tensor.save(path("x.ckpt"), deep) end, "nested deeper than 30 levels")
  -- after all of these the module still works
  tensor.save(path("after.ckpt"), {ok = tensor.ones(2)})
  h.check(tensor.load(path("after.ckpt")).ok, "f32", {1, 1})
end)

for _, name in ipairs(directory_entries()) do os.remove(path(name)) end
lfs.rmdir(dir)
h.done("test_checkpoint")
