-- test_data.lua - the data module: IDX files (raw and gzip) and CSV files
-- that the test writes itself, their error messages, the DataLoader's
-- batching and shuffling, and the progress display's output format.
local h = dofile("helpers.lua")
local data = require "data"
local progress = require "progress"
local native = require "stdlib.native"

local temp, remove_temporaries = h.temp_paths()

local read_bytes, write_bytes = h.read_bytes, h.write_bytes

-- An IDX file: magic (0, 0, type, rank), big-endian uint32 dims, elements.
local function idx_bytes(type_code, dims, element_format, values)
  local parts = {string.pack(">BBBB", 0, 0, type_code, #dims)}
  for _, d in ipairs(dims) do parts[#parts + 1] = string.pack(">I4", d) end
  for _, v in ipairs(values) do parts[#parts + 1] = string.pack(element_format, v) end
  return table.concat(parts)
end

local images = {0, 255, 17, 128, 1, 2, 3, 4, 250, 251, 252, 253}   -- 3 images of 2x2
local labels = {9, 0, 3}
write_bytes(temp("images.idx"), idx_bytes(0x08, {3, 2, 2}, "B", images))
write_bytes(temp("labels.idx"), idx_bytes(0x08, {3}, "B", labels))
native.write_gzip(temp("images.idx.gz"), idx_bytes(0x08, {3, 2, 2}, "B", images))

h.test("read_idx: u8 images and labels, raw and gzip", function()
  local want = {{{0, 255}, {17, 128}}, {{1, 2}, {3, 4}}, {{250, 251}, {252, 253}}}
  h.check(data.read_idx(temp("images.idx")), "i64", want)
  h.check(data.read_idx(temp("images.idx.gz")), "i64", want)
  h.check(data.read_idx(temp("labels.idx")), "i64", {9, 0, 3})
  local floats = data.read_idx(temp("images.idx.gz"), {dtype = "f32"})
  h.check(floats, "f32", want)
  h.check(data.read_idx(temp("labels.idx"), {dtype = "i32"}), "i32", {9, 0, 3})
  h.check(data.read_idx(temp("labels.idx"), {dtype = "bool"}), "bool", {true, false, true})
end)

h.test("read_idx: every element type, big-endian", function()
  local cases = {
    {0x09, "b", {-128, -1, 0, 127}, "i64"},
    {0x0B, ">i2", {-32768, -2, 300, 32767}, "i64"},
    {0x0C, ">i4", {-2147483648, -5, 70000, 2147483647}, "i64"},
    {0x0D, ">f", {1.5, -0.25, 2.0 ^ 100, -7}, "f32"},
    {0x0E, ">d", {0.1, -1e300, 2.5, 1 / 3}, "f64"},
  }
  for _, case in ipairs(cases) do
    local path = temp(string.format("type%02x.idx", case[1]))
    write_bytes(path, idx_bytes(case[1], {2, 2}, case[2], case[3]))
    h.check(data.read_idx(path), case[4], {{case[3][1], case[3][2]}, {case[3][3], case[3][4]}})
  end
end)

h.test("read_idx: damaged files are clear errors", function()
  local good = idx_bytes(0x08, {3, 2, 2}, "B", images)
  local function err_for(bytes, ...)
    write_bytes(temp("bad.idx"), bytes)
    h.err(function() data.read_idx(temp("bad.idx")) end, ...)
  end
  err_for(good:sub(1, #good - 1), "is truncated: its header announces 12 elements, the file holds 11")
  err_for(good:sub(1, 2), "is truncated: no IDX header")
  err_for(good:sub(1, 9), "is truncated in its header")
  err_for(good .. "x", "has data after the 12 elements its header announces")
  err_for("\1\0\8\1" .. good:sub(5), "is not an IDX file (bad magic number 01000801)")
  err_for("\0\0\7\1" .. good:sub(5), "unknown IDX element type 0x07")
  err_for("\0\0\8\0", "has 0 dimensions")
  err_for("\0\0\8\9" .. string.rep("\0\0\0\1", 9), "has 9 dimensions")
  -- a gzip stream cut short, and corrupted compressed bytes
  native.write_gzip(temp("big.idx.gz"), idx_bytes(0x08, {4000}, "B", (function()
    local v = {}
    for i = 1, 4000 do v[i] = (i * 7919) % 256 end
    return v
  end)()))
  local gz = read_bytes(temp("big.idx.gz"))
  write_bytes(temp("cut.idx.gz"), gz:sub(1, #gz // 2))
  h.err(function() data.read_idx(temp("cut.idx.gz")) end, "cut.idx.gz", "corrupted or truncated")
  local middle = #gz // 2
  write_bytes(temp("flip.idx.gz"), gz:sub(1, middle) .. string.char(gz:byte(middle + 1) ~ 0xFF) ..
              gz:sub(middle + 2))
  h.err_any(function() data.read_idx(temp("flip.idx.gz")) end, {"is corrupted", "is truncated"})
  h.err(function() data.read_idx(temp("nothing.idx")) end, "cannot open", "No such file")
  h.err(function() data.read_idx(temp("images.idx"), {dtype = "f16"}) end, "f16")
  h.err(function() data.read_idx(temp("images.idx"), {scale = 2}) end, "unknown option 'scale'")
  h.err(function() data.read_idx(42) end, "bad argument #1 to 'data.read_idx'")
  -- errors point at the caller's line, not inside stdlib/data.lua
  local message = h.err(function() data.read_idx(temp("nothing.idx")) end, "cannot open")
  assert(message:find("^[^:]*test_data%.lua:%d+: data%.read_idx: cannot open"), message)
  -- still usable afterwards
  h.check(data.read_idx(temp("labels.idx")), "i64", {9, 0, 3})
end)

h.test("read_idx: a large u8 file loads quickly", function()
  local rows = 10000
  local row = string.rep(string.char(7, 200, 0, 31), 196)   -- 784 bytes
  write_bytes(temp("large.idx"), string.pack(">BBBBI4I4I4", 0, 0, 8, 3, rows, 28, 28) ..
              string.rep(row, rows))
  local start = os.clock()
  local t = data.read_idx(temp("large.idx"), {dtype = "f32"})
  local seconds = os.clock() - start
  h.shape(t, {rows, 28, 28})
  h.check(t[rows][28]:narrow(1, 25, 4), "f32", {7, 200, 0, 31})
  assert(seconds < 1.0, string.format("7.8 MB took %.2f s", seconds))
end)

-- The gzip file of `bytes`, as zlib writes it (write_gzip).
local function gzip_of(bytes)
  local path = temp("member.gz")
  native.write_gzip(path, bytes)
  return read_bytes(path)
end

h.test("read_idx: several gzip members, bytes after them, a lying size", function()
  -- 5000 u8 elements split over two members: the last member's size in the
  -- file's trailer (3 bytes) is far from the whole (5012).
  local values = {}
  for i = 1, 5000 do values[i] = (i * 31) % 251 end
  local whole = idx_bytes(0x08, {50, 100}, "B", values)
  local members = gzip_of(whole:sub(1, -4)) .. gzip_of(whole:sub(-3))
  write_bytes(temp("members.idx.gz"), members)
  local t = data.read_idx(temp("members.idx.gz"))
  h.shape(t, {50, 100})
  h.eq(t:sum():item(), (function()
    local total = 0
    for _, v in ipairs(values) do total = total + v end
    return total
  end)())
  h.eq(t[1][1]:item(), values[1])
  h.eq(t[50][98]:item(), values[4998])
  h.eq(t[50][100]:item(), values[5000])
  -- many members, the first the biggest: the room doubles until it fits
  local parts = {gzip_of(whole:sub(1, 4000))}
  for i = 4001, #whole, 7 do parts[#parts + 1] = gzip_of(whole:sub(i, i + 6)) end
  write_bytes(temp("many.idx.gz"), table.concat(parts))
  h.check(data.read_idx(temp("many.idx.gz")), "i64", t:tolist())
  -- bytes after the last member are ignored, as gzip -d and zlib do...
  write_bytes(temp("tail.idx.gz"), members .. "\0\0\0\0 not gzip")
  h.check(data.read_idx(temp("tail.idx.gz")), "i64", t:tolist())
  -- ... unless they start another member, which must then be whole
  write_bytes(temp("tail_member.idx.gz"), members .. "\31\139\8")
  h.err(function() data.read_idx(temp("tail_member.idx.gz")) end, "corrupted or truncated",
        "member at byte " .. #members)
  -- ISIZE (the last 4 bytes: the length mod 2^32) is checked, whether it
  -- claims less, more, or absurdly much
  local single = gzip_of(whole)
  for _, size in ipairs({#whole - 1, #whole + 1, 0, 0xFFFFFFFF}) do
    write_bytes(temp("lying.idx.gz"), single:sub(1, -5) .. string.pack("<I4", size))
    h.err(function() data.read_idx(temp("lying.idx.gz")) end, "lying.idx.gz", "is corrupted")
  end
  write_bytes(temp("lying.idx.gz"), single)
  h.check(data.read_idx(temp("lying.idx.gz")), "i64", t:tolist())
  -- a crc32 that does not match the data
  local crc = #single - 7
  write_bytes(temp("crc.idx.gz"), single:sub(1, crc - 1) .. string.char(single:byte(crc) ~ 1) ..
              single:sub(crc + 1))
  h.err(function() data.read_idx(temp("crc.idx.gz")) end, "is corrupted")
  -- the gzip magic alone, an empty member, an empty file, a directory
  write_bytes(temp("magic.idx.gz"), "\31\139")
  h.err(function() data.read_idx(temp("magic.idx.gz")) end, "corrupted or truncated")
  write_bytes(temp("empty_member.idx.gz"), gzip_of(""))
  h.err(function() data.read_idx(temp("empty_member.idx.gz")) end, "is truncated: no IDX header")
  write_bytes(temp("empty.idx"), "")
  h.err(function() data.read_idx(temp("empty.idx")) end, "is truncated: no IDX header")
  h.err(function() data.read_idx("/") end, "'/' is a directory, not a regular file")
end)

h.test("read_idx: millions of elements, raw and gzip, every one converted", function()
  -- 3 MiB + 5 bytes of u8 (several parallel chunks and a ragged end) with a
  -- period of 256: value (i * 7919) % 256 at 0-based position i.
  local period = {}
  for i = 0, 255 do period[i + 1] = string.char((i * 7919) % 256) end
  local count = 3 * 1048576 + 5
  local body = string.rep(table.concat(period), count // 256) ..
               table.concat(period, "", 1, count % 256)
  local bytes = string.pack(">BBBBI4", 0, 0, 8, 1, count) .. body
  write_bytes(temp("millions.idx"), bytes)
  write_bytes(temp("millions.idx.gz"), gzip_of(bytes))
  local function check_all(t, dtype)
    h.shape(t, {count})
    assert(t:dtype() == dtype, t:dtype())
    local got = t:tolist()
    for i = 0, count - 1 do
      if got[i + 1] ~= (i * 7919) % 256 then
        error(string.format("%s: element %d is %s, not %d", dtype, i, got[i + 1], (i * 7919) % 256))
      end
    end
  end
  for _, name in ipairs({"millions.idx", "millions.idx.gz"}) do
    check_all(data.read_idx(temp(name), {dtype = "f32"}), "f32")
    check_all(data.read_idx(temp(name)), "i64")
  end
  check_all(data.read_idx(temp("millions.idx.gz"), {dtype = "i32"}), "i32")
  check_all(data.read_idx(temp("millions.idx"), {dtype = "f64"}), "f64")
end)

h.test("read_csv: gzip like read_idx", function()
  write_bytes(temp("numbers.csv.gz"), gzip_of("a,b\n1,2\n") .. gzip_of("3,4\n"))
  local t, names = data.read_csv(temp("numbers.csv.gz"), {header = true})
  h.check(t, "i64", {{1, 2}, {3, 4}})  -- integers only: i64
  assert(h.same_list(names, {"a", "b"}), h.show(names))
  write_bytes(temp("cut.csv.gz"), gzip_of("1,2\n3,4\n"):sub(1, -3))
  h.err(function() data.read_csv(temp("cut.csv.gz")) end, "corrupted or truncated")
end)

h.test("read_csv: header, delimiters, blank lines, CRLF", function()
  write_bytes(temp("good.csv"), 'x,"y value", z\r\n1, 2.5,-3\r\n\r\n4e2,+5,nan\n  6 ,7,inf\n')
  local t, names = data.read_csv(temp("good.csv"), {header = true})
  assert(h.same_list(names, {"x", "y value", "z"}), h.show(names))
  local v = t:tolist()
  h.shape(t, {3, 3})
  assert(t:dtype() == "f32")
  h.eq(v[1], {1, 2.5, -3})
  h.eq({v[2][1], v[2][2]}, {400, 5})
  assert(v[2][3] ~= v[2][3], "nan")
  h.eq(v[3], {6, 7, math.huge})
  write_bytes(temp("semi.csv"), "1;2\n3;4\n")
  local s, no_names = data.read_csv(temp("semi.csv"), {delimiter = ";", dtype = "i64"})
  h.check(s, "i64", {{1, 2}, {3, 4}})
  assert(no_names == nil)
  write_bytes(temp("header_only.csv"), "a,b\n")
  local e, header = data.read_csv(temp("header_only.csv"), {header = true})
  h.shape(e, {0, 2})
  assert(h.same_list(header, {"a", "b"}), h.show(header))
end)

h.test("read_csv: bad values and ragged rows name line and column", function()
  write_bytes(temp("bad.csv"), "1,2,3\n4,five,6\n")
  h.err(function() data.read_csv(temp("bad.csv")) end, "bad.csv' line 2, column 2: 'five' is not a number")
  write_bytes(temp("ragged.csv"), "a,b\n1,2\n3\n")
  h.err(function() data.read_csv(temp("ragged.csv"), {header = true}) end,
        "line 3: 1 values, expected 2 (as in line 1)")
  write_bytes(temp("empty_field.csv"), "1,,3\n")
  h.check(data.read_csv(temp("empty_field.csv")), "f32", {{1, 0 / 0, 3}})  -- a missing value
  write_bytes(temp("frac.csv"), "1.5\n")
  h.err(function() data.read_csv(temp("frac.csv"), {dtype = "i64"}) end, "'1.5' is not an integer")
  h.err(function() data.read_csv(temp("semi.csv"), {delimiter = ";;"}) end, "one character")
  h.err(function() data.read_csv(temp("none.csv")) end, "cannot open")
  h.err(function() data.read_csv(temp("semi.csv"), {headers = true}) end, "unknown option 'headers'")
end)

-- A dataset whose rows say which sample they are: x[i] = {i, 10 i}, y[i] = i.
local function numbered(n)
  local rows = {}
  for i = 1, n do rows[i] = {i, 10 * i} end
  return tensor.new(rows), tensor.arange(1, n + 1)
end

local function epoch_labels(loader)
  local seen, sizes = {}, {}
  for x, y in loader:iter() do
    local xs, ys = x:tolist(), y:tolist()
    sizes[#sizes + 1] = #ys
    for i, label in ipairs(ys) do
      assert(xs[i][1] == label and xs[i][2] == 10 * label, "x and y rows stay together")
      seen[#seen + 1] = label
    end
  end
  return seen, sizes
end

local function options(extra)
  local o = {progress = false}
  for k, v in pairs(extra) do o[k] = v end
  return o
end

h.test("DataLoader: batch count, order, last batch and drop_last", function()
  local x, y = numbered(10)
  local loader = data.DataLoader({x, y}, options{batch_size = 3})
  assert(#loader == 4)
  local seen, sizes = epoch_labels(loader)
  h.eq(seen, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
  h.eq(sizes, {3, 3, 3, 1})
  local dropping = data.DataLoader({x, y}, options{batch_size = 3, drop_last = true})
  assert(#dropping == 3)
  seen, sizes = epoch_labels(dropping)
  h.eq(sizes, {3, 3, 3})
  h.eq(seen, {1, 2, 3, 4, 5, 6, 7, 8, 9})
  assert(#data.DataLoader(x, options{batch_size = 10}) == 1)
  assert(#data.DataLoader(x, options{batch_size = 11, drop_last = true}) == 0)
  -- a single tensor dataset yields one tensor per batch
  local count = 0
  for batch, extra in data.DataLoader(y, options{batch_size = 4}):iter() do
    assert(extra == nil and tensor.is_tensor(batch))
    count = count + 1
  end
  assert(count == 3)
end)

h.test("DataLoader: shuffle is a permutation, reproducible under a seed", function()
  local x, y = numbered(37)
  local a = data.DataLoader({x, y}, options{batch_size = 5, shuffle = true, seed = 11})
  local b = data.DataLoader({x, y}, options{batch_size = 5, shuffle = true, seed = 11})
  local a1, a2 = epoch_labels(a), epoch_labels(a)
  local b1, b2 = epoch_labels(b), epoch_labels(b)
  h.eq(b1, a1)
  h.eq(b2, a2)
  for _, order in ipairs({a1, a2}) do
    local sorted = {table.unpack(order)}
    table.sort(sorted)
    for i = 1, 37 do assert(sorted[i] == i, "each sample exactly once per epoch") end
  end
  assert(not h.same_list(a1, a2), "epochs are shuffled differently")
  local identity = true
  for i = 1, 37 do if a1[i] ~= i then identity = false end end
  assert(not identity, "the order is shuffled")
  local c = data.DataLoader({x, y}, options{batch_size = 5, shuffle = true, seed = 12})
  assert(not h.same_list(epoch_labels(c), a1), "another seed, another order")
  -- the seeded shuffle leaves tensor.manual_seed's stream alone
  tensor.manual_seed(5)
  local r1 = tensor.rand(3):tolist()
  tensor.manual_seed(5)
  epoch_labels(data.DataLoader({x, y}, options{batch_size = 5, shuffle = true, seed = 1}))
  h.eq(tensor.rand(3):tolist(), r1)
  -- without a seed, tensor.manual_seed makes the order reproducible
  local d = data.DataLoader({x, y}, options{batch_size = 5, shuffle = true})
  tensor.manual_seed(3)
  local d1 = epoch_labels(d)
  tensor.manual_seed(3)
  h.eq(epoch_labels(d), d1)
end)

h.test("DataLoader: a break ends the epoch cleanly; bad arguments", function()
  local x, y = numbered(6)
  local loader = data.DataLoader({x, y}, options{batch_size = 2})
  for _ in loader:iter() do break end
  local seen = epoch_labels(loader)
  h.eq(seen, {1, 2, 3, 4, 5, 6})
  h.err(function() data.DataLoader({x, tensor.zeros(5)}) end, "dataset[2] has 5 rows, dataset[1] has 6")
  h.err(function() data.DataLoader({x, "y"}) end, "dataset[2] is a string, not a tensor")
  h.err(function() data.DataLoader({}) end, "expected a list of tensors")
  h.err(function() data.DataLoader({tensor.full({}, 1)}) end, "0-d tensor")
  h.err(function() data.DataLoader({x}, {batch_size = 0}) end, "batch_size must be a positive integer")
  h.err(function() data.DataLoader({x}, {batch = 2}) end, "unknown option 'batch'")
  h.err(function() data.DataLoader({x}, {shuffle = true, seed = 1.5}) end, "seed must be an integer")
end)

-- A stream that keeps what is written, and a clock the test moves.
local function capture()
  local parts = {}
  return {write = function(self, ...) for _, s in ipairs({...}) do parts[#parts + 1] = s end end,
          text = function() return table.concat(parts) end}
end

h.test("progress: plain lines at every 10% when not a terminal", function()
  local now = 100.0
  local out = capture()
  local bar = progress.new(20, {description = "epoch 1", terminal = false, stream = out,
                                clock = function() return now end})
  for i = 1, 20 do
    now = now + 0.5
    bar:set_postfix{loss = 1 / i, acc = "ok"}
    bar:update()
  end
  bar:close()
  local lines = {}
  for line in out:text():gmatch("[^\n]+") do lines[#lines + 1] = line end
  assert(#lines == 10, "one line per 10%: got " .. #lines)
  assert(lines[1] == "epoch 1: 2/20 (10%), 2.0 it/s, elapsed 00:01, eta 00:09, acc=ok, loss=0.5",
         lines[1])
  assert(lines[10] == "epoch 1: 20/20 (100%), 2.0 it/s, elapsed 00:10, eta 00:00, acc=ok, loss=0.05",
         lines[10])
  -- slow steps are shown as seconds per step
  now = 0
  local slow = capture()
  local b = progress.new(2, {terminal = false, stream = slow, clock = function() return now end})
  now = 4
  b:update()
  now = 8
  b:update()
  b:close()  -- nothing new to report: no third line
  assert(slow:text() == "1/2 (50%), 4.00 s/it, elapsed 00:04, eta 00:04\n" ..
                        "2/2 (100%), 4.00 s/it, elapsed 00:08, eta 00:00\n", slow:text())
end)

h.test("progress: terminal line and disabled output", function()
  local now = 0.0
  local out = capture()
  local bar = progress.new(4, {description = "train", terminal = true, stream = out, width = 80,
                               clock = function() return now end})
  now = 1
  bar:update()
  local text = out:text()
  assert(text:sub(1, 1) == "\r" and text:find("\27[K", 1, true), "redrawn in place")
  local line = text:sub(2, text:find("\27", 1, true) - 1)
  assert(line:find("^train  25%%|████████") and line:find("| 1/4 %[00:01<00:03, 1%.0 it/s%]$"),
         "terminal line: " .. line)
  assert(utf8.len(line) <= 80, "fits the width")
  -- the bar is a quarter full: full blocks make up a quarter of its cells
  local cells = line:match("|(.-)|")
  local full = select(2, cells:gsub("█", ""))
  assert(full == utf8.len(cells) // 4, "a quarter of the bar: " .. cells)
  bar:close()
  assert(out:text():sub(-1) == "\n", "close ends the line")
  local silent = capture()
  local off = progress.new(3, {enabled = false, stream = silent, terminal = false})
  for _ = 1, 3 do off:update() end
  off:close()
  assert(silent:text() == "")
  assert(progress.format_duration(3725) == "1:02:05" and progress.format_duration(61) == "01:01")
end)

h.test("DataLoader drives the progress display", function()
  local x, y = numbered(8)
  local out = capture()
  local loader = data.DataLoader({x, y}, {batch_size = 2, description = "demo",
                                          progress_options = {terminal = false, stream = out}})
  for _, by in loader:iter() do loader:set_postfix{last = by:tolist()[2]} end
  local lines = {}
  for line in out:text():gmatch("[^\n]+") do lines[#lines + 1] = line end
  assert(#lines == 4, "4 batches, 4 lines (each crosses a 10% mark)")
  assert(lines[4]:find("^demo: 4/4 %(100%%%)") and lines[4]:find("last=8$"), lines[4])
  -- tensors as postfix values are read when drawn
  local out2 = capture()
  local l2 = data.DataLoader({x}, {batch_size = 8, progress_options = {terminal = false, stream = out2}})
  for bx in l2:iter() do l2:set_postfix{sum = bx:sum()} end
  assert(out2:text():find("epoch 1: 1/1 %(100%%%).*sum=396\n$"), out2:text())
end)

remove_temporaries()
h.done("test_data")
