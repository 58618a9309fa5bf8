-- bench_data.lua - how close data.read_idx comes to memory speed: reading
-- the 26 MB gzipped Fashion-MNIST training images (47 MB of pixels) into
-- an f32 tensor (188 MB), gzipped and plain, against references measured
-- side by side in the same run, best of several rounds each:
--   gzip -dc FILE > /dev/null      zlib's inflate alone, no conversion
--   cat PLAIN > /dev/null          the pixels copied from the page cache
--   t * 1.5                        one compiled elementwise pass writing a
--                                  fresh tensor as large as read_idx's
--
--   build/lazylua bench/bench_data.lua [FILE.gz]
local data = require "data"
local now = require("progress").now

local gz = arg[1] or "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"
local probe = io.open(gz, "rb")
if not probe then
  io.stderr:write("bench_data.lua: ", gz, " not found (install Debian's dataset-fashion-mnist)\n")
  os.exit(1)
end
probe:close()

local plain = os.tmpname()
assert(os.execute(string.format("gzip -dc '%s' > '%s'", gz, plain)), "gzip -dc failed")

local function shell_seconds(command)
  local start = now()
  assert(os.execute(command), command)
  return now() - start
end

local function read_seconds(path)
  collectgarbage()  -- free the previous round's tensor first
  local start = now()
  local t = data.read_idx(path, {dtype = "f32"})
  local seconds = now() - start
  return seconds, t
end

-- The elementwise pass compiles before it is timed.
local sample = data.read_idx(plain, {dtype = "f32"})
tensor.sync(sample * 1.5)

local rounds = 7
local best = {}
local function keep(name, seconds) best[name] = math.min(best[name] or math.huge, seconds) end
for _ = 1, rounds do
  keep("read_idx gzip", (read_seconds(gz)))
  keep("read_idx plain", (read_seconds(plain)))
  keep("gzip -dc", shell_seconds(string.format("gzip -dc '%s' > /dev/null", gz)))
  keep("cat plain", shell_seconds(string.format("cat '%s' > /dev/null", plain)))
  collectgarbage()
  local start = now()
  tensor.sync(sample * 1.5)
  keep("elementwise pass", now() - start)
end
os.remove(plain)

print(string.format("%s: %d x %d x %d u8 -> f32, best of %d rounds", gz, sample:size(1),
  sample:size(2), sample:size(3), rounds))
for _, name in ipairs({"read_idx gzip", "read_idx plain", "gzip -dc", "cat plain",
                       "elementwise pass"}) do
  print(string.format("  %-18s %7.1f ms", name, best[name] * 1000))
end
local function ratio(a, b)
  print(string.format("  %-18s / %-18s %5.2f", a, b, best[a] / best[b]))
end
print("ratios (lower is faster):")
ratio("read_idx gzip", "gzip -dc")
ratio("read_idx gzip", "elementwise pass")
ratio("read_idx plain", "cat plain")
ratio("read_idx plain", "elementwise pass")
