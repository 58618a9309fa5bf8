-- test_safe_files.lua - the one pair of safe file helpers (interp/file_bytes.h)
-- as every file function reaches them: onnx.load/read_tensor, onnx.export,
-- tensor.profile, plot.line_chart, the NumPy readers' decompression bounds,
-- and the native read_file/write_file themselves. Special files are refused
-- at once (never waited on, never written into), writes replace the whole
-- file or nothing, and the interpreter goes on after each error.
-- tests/files/test_hostile_files.sh holds the larger hostile cases (bombs of
-- 256 MiB, killed writes, LAZYLUA_PROFILE).
local h = dofile("helpers.lua")
local native = require "stdlib.native"
local onnx = require "onnx"
local plot = require "plot"

local temp, remove_temporaries = h.temp_paths()

local function sh(command) assert(os.execute(command), command) end
local function is_fifo(path) return os.execute("test -p '" .. path .. "'") == true end
local function mode_of(path) return io.popen("stat -c %a '" .. path .. "'"):read("l") end

local fifo = temp("fifo")
sh("mkfifo '" .. fifo .. "'")
local directory = temp("dir")
sh("mkdir '" .. directory .. "'")

h.test("the ONNX readers refuse a FIFO, a device and a directory, naming the function", function()
  for _, name in ipairs({"load", "read_tensor"}) do
    local fn = onnx[name]
    h.err(function() fn(fifo) end, "onnx." .. name .. ": '" .. fifo .. "' is a FIFO, not a regular file")
    h.err(function() fn("/dev/zero") end, "onnx." .. name .. ": '/dev/zero' is a device, not a regular file")
    h.err(function() fn(directory) end,
          "onnx." .. name .. ": '" .. directory .. "' is a directory, not a regular file")
    h.err(function() fn(42) end, "onnx." .. name .. ": expected a file path, got number")
    h.still_works()
  end
end)

h.test("onnx.export refuses a FIFO and leaves it alone; it replaces a file whole, keeping its mode", function()
  local function double(x) return x * 2 end
  h.err(function() onnx.export(double, {tensor.ones(2)}, fifo) end,
        "onnx.export: '" .. fifo .. "' is a FIFO, not a regular file; it was left alone")
  assert(is_fifo(fifo), "the FIFO was replaced")
  local path = temp("model.onnx")
  h.write_bytes(path, "an old model")
  sh("chmod 600 '" .. path .. "'")
  onnx.export(double, {tensor.ones(2)}, path)
  h.eq(mode_of(path), "600")
  h.eq(onnx.load(path)(tensor.new({1.5, -3})):tolist(), {3, -6})
  h.still_works()
end)

h.test("tensor.profile and plot.line_chart refuse a FIFO and a directory", function()
  for _, target in ipairs({fifo, directory}) do
    local kind = target == fifo and "a FIFO" or "a directory"
    h.err(function() tensor.profile(function() return (tensor.ones(2) * 2):sum():item() end, target) end,
          "tensor.profile: '" .. target .. "' is " .. kind .. ", not a regular file; it was left alone")
    h.err(function() plot.line_chart(target, {{name = "a", values = {1, 2, 3}}}) end,
          "plot.line_chart: '" .. target .. "' is " .. kind .. ", not a regular file; it was left alone")
  end
  assert(is_fifo(fifo), "the FIFO was replaced")
  -- The profiler stopped: a new profile runs and writes its trace.
  local trace = temp("trace.json")
  h.eq(tensor.profile(function() return (tensor.ones(2) * 3):sum():item() end, trace), 6)
  assert(h.read_bytes(trace):find('"traceEvents"', 1, true), "no trace written")
  local svg = temp("chart.svg")
  plot.line_chart(svg, {{name = "a", values = {1, 2, 3}}})
  assert(h.read_bytes(svg):find("</svg>\n$"), "the chart is not whole")
  h.still_works()
end)

h.test("native.read_file: the bytes as they are, up to a limit checked before reading", function()
  local path = temp("hundred.bin")
  local bytes = string.rep("\0\1\2\255", 25)
  h.write_bytes(path, bytes)
  assert(native.read_file(path, "my.reader", 100) == bytes, "the bytes differ")
  h.err(function() native.read_file(path, "my.reader", 99) end,
        "my.reader: '" .. path .. "' is 100 bytes, more than the 99 bytes my.reader reads")
  -- gzip bytes stay gzip bytes: no decompression behind the caller's back
  local gz = temp("hundred.gz")
  native.write_gzip(gz, bytes)
  assert(native.read_file(gz, "my.reader", 1000):sub(1, 2) == "\31\139", "gunzipped")
  h.err(function() native.read_file(fifo, "my.reader", 100) end, "my.reader: '" .. fifo .. "' is a FIFO")
  h.err(function() native.read_file(path, "my.reader", -1) end, "a size limit below 0")
  h.still_works()
end)

h.test("native.write_file: exact bytes, through symlinks, never into special files", function()
  local real, link = temp("real.bin"), temp("link.bin")
  sh("ln -s '" .. real .. "' '" .. link .. "'")
  local bytes = "\0binary\255\n" .. string.rep("x", 5000)
  native.write_file(link, bytes, "my.writer")
  assert(h.read_bytes(real) == bytes, "the file the link leads to holds other bytes")
  assert(os.execute("test -L '" .. link .. "'"), "the link was replaced")
  h.eq(mode_of(real), "644")
  h.err(function() native.write_file(fifo, "x", "my.writer") end,
        "my.writer: '" .. fifo .. "' is a FIFO, not a regular file; it was left alone")
  h.err(function() native.write_file("/dev/null", "x", "my.writer") end, "is a device")
  h.err(function() native.write_file(directory .. "/no/such/x", "x", "my.writer") end,
        "my.writer: cannot write", "cannot create a file next to it")
  h.still_works()
end)

-- A .npy file of shape (1,) f32 with `extra` zero bytes after its data.
local function npy_with_extra(extra)
  local header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }"
  header = header .. string.rep(" ", 128 - 10 - #header - 1) .. "\n"  -- data at byte 128
  return "\x93NUMPY\1\0" .. string.pack("<I2", #header) .. header .. string.pack("<f", 2.5) ..
         string.rep("\0", extra)
end

h.test("a .npy.gz file may not inflate past what its header announces", function()
  local ok_path, bomb = temp("ok.npy.gz"), temp("bomb.npy.gz")
  native.write_gzip(ok_path, npy_with_extra(0))
  h.eq(tensor.load_npy(ok_path):tolist(), {2.5})
  native.write_gzip(bomb, npy_with_extra(16 * 1024 * 1024))
  h.err(function() tensor.load_npy(bomb) end, "tensor.load_npy: '" .. bomb ..
        "' decompresses to more than the 132 bytes its content announces")
  h.still_works()
end)

remove_temporaries()
os.remove(fifo)
os.remove(directory)
h.done("test_safe_files")
