-- test_conv_threads.lua - the convolution kernels give the same bits with 1
-- and 2 threads (their chunks depend on the shapes only), on layers of real
-- models' shapes that take each path of tensor/kernels/conv.cpp and
-- conv_depthwise.cpp: columns cut into parts of a sample's positions,
-- several samples per chunk, a 1x1 window in register tiles, read in
-- place or gathered, the
-- depthwise phase planes (strides 1 and 2) and the 3-D depthwise lines, and
-- the weight gradient's partial sums over several tasks. Each result is also
-- checked against the same layer computed in f64.
local h = dofile("helpers.lua")

local CHILD_VARIABLE = "LAZYLUA_TEST_CONV_THREADS_OUT"

-- {name, x shape, weight shape, options}
local LAYERS = {
  {"3x3 over parts of a 56x56 plane", {2, 16, 56, 56}, {8, 16, 3, 3}, {padding = 1}},
  {"3x3 stride 2, several 7x7 samples per chunk", {6, 64, 14, 14}, {32, 64, 3, 3},
    {stride = 2, padding = 1}},
  -- 1x1: up to 64 input channels, conv_pointwise.cpp's register tiles (rows
  -- in bands, planes in runs); more, OpenBLAS in place or gathered.
  {"1x1 of 24 channels over 16x16 planes", {3, 24, 16, 16}, {40, 24, 1, 1}, {}},
  {"1x1 of 48 channels over 7x7 planes, bands of rows", {1, 48, 7, 7}, {100, 48, 1, 1}, {}},
  {"1x1 of 16 channels over runs of a 48x50 plane", {2, 16, 48, 50}, {13, 16, 1, 1}, {}},
  {"1x1 of 72 channels over 16x16 planes, in place", {3, 72, 16, 16}, {40, 72, 1, 1}, {}},
  {"1x1 of 80 channels over 7x7 planes, gathered", {5, 80, 7, 7}, {20, 80, 1, 1}, {}},
  {"depthwise 3x3 over 28x28", {2, 24, 28, 28}, {24, 1, 3, 3}, {groups = 24, padding = 1}},
  {"depthwise 3x3 stride 2 multiplier 2", {2, 12, 15, 15}, {24, 1, 3, 3},
    {groups = 12, stride = 2, padding = 1}},
  {"depthwise 3-D", {1, 6, 5, 6, 7}, {6, 1, 3, 3, 3}, {groups = 6, padding = 1}},
  -- f32 through oneDNN (tensor/kernels/conv_onednn.cpp): 64 outputs in two
  -- parts per sample; a first layer's 3 channels; 48 outputs in one part,
  -- dilated, strided and padded unevenly; a bias.
  {"oneDNN 3x3, outputs in two parts", {3, 32, 14, 14}, {64, 32, 3, 3}, {padding = 1}},
  {"oneDNN 7x7 stride 2 from 3 channels", {1, 3, 40, 40}, {64, 3, 7, 7},
    {stride = 2, padding = 3}},
  {"oneDNN 3x3 dilated 2, stride 2, uneven pads", {2, 16, 17, 19}, {48, 16, 3, 3},
    {stride = 2, dilation = 2, padding = {{1, 2}, {0, 3}}}},
  {"oneDNN 5x3 with a bias", {2, 8, 11, 9}, {32, 8, 5, 3}, {padding = {2, 1}}, true},
  -- 13 samples of 14x14 in runs of 3, 3, 3 and 4 (two primitives), the
  -- weight gradient over four partial sums; an input gradient over input
  -- channels in two parts.
  {"oneDNN 3x3 over uneven runs of samples", {13, 16, 14, 14}, {32, 16, 3, 3}, {padding = 1}},
  {"oneDNN input gradient in two parts", {2, 64, 9, 9}, {16, 64, 3, 3}, {padding = 1}},
  -- Depthwise through oneDNN (the forward pass): channels in two parts,
  -- stride 2, a bias; a 5x5 window over one part.
  {"oneDNN depthwise 3x3 stride 2, two parts, bias", {3, 64, 15, 15}, {64, 1, 3, 3},
    {groups = 64, stride = 2, padding = 1}, true},
  {"oneDNN depthwise 5x5", {2, 40, 14, 14}, {40, 1, 5, 5}, {groups = 40, padding = 2}},
}

local function results()
  local out = {}
  for _, layer in ipairs(LAYERS) do
    local name, xs, ws, opts, with_bias = table.unpack(layer)
    for _, dtype in ipairs({"f32", "f64"}) do
      tensor.manual_seed(7)
      local x = tensor.randn(table.unpack(xs)):to(dtype):requires_grad(true)
      local w = tensor.randn(table.unpack(ws)):to(dtype):requires_grad(true)
      local b = with_bias and tensor.randn(ws[1]):to(dtype):requires_grad(true) or nil
      local conv = #xs == 5 and tensor.conv3d or tensor.conv2d
      local y = b and conv(x, w, b, opts) or conv(x, w, opts)
      tensor.manual_seed(8)
      local r = tensor.randn(table.unpack(y:size())):to(dtype)
      ;(y * r):sum():backward()
      out[#out + 1] = {name = name .. " " .. dtype, y = y:detach(), gx = x:grad(), gw = w:grad()}
    end
  end
  return out
end

local child_path = os.getenv(CHILD_VARIABLE)
if child_path then
  tensor.save(child_path, results())
  os.exit(0)
end

local interpreter = assert(arg and arg[-1], "arg[-1] (the interpreter) is not set")
local function quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- Runs this script as a child with `threads` threads and loads what it
-- saved. The child runs eagerly whatever the parent's tier: every tier calls
-- the same kernels, and compiling each layer's graphs would take a minute.
local function run_child(threads)
  local path = os.tmpname()
  local command = string.format(
    "env -u LAZYLUA_COMPILE LAZYLUA_EAGER=1 LAZYLUA_THREADS=%d %s=%s %s %s 2>&1", threads,
    CHILD_VARIABLE, quote(path), quote(interpreter), quote(arg[0]))
  local pipe = assert(io.popen(command, "r"))
  local output = pipe:read("a")
  assert(pipe:close(), "child with " .. threads .. " threads failed:\n" .. output)
  local loaded = tensor.load(path)
  os.remove(path)
  return loaded
end

-- Equal and with equal reciprocals (which tells -0 from +0).
local function same_bits(a, b)
  return a:eq(b):logical_and((1 / a):eq(1 / b)):all():item()
end

local one, two = run_child(1), run_child(2)

h.test("conv layers give the same bits with 1 and 2 threads (forward and gradients)", function()
  assert(#one == #LAYERS * 2 and #two == #one)
  for i = 1, #one do
    for _, part in ipairs({"y", "gx", "gw"}) do
      assert(same_bits(one[i][part], two[i][part]),
        string.format("%s: %s differs between 1 and 2 threads", one[i].name, part))
    end
  end
end)

h.test("conv layers in f32 agree with the same layers in f64", function()
  for i = 1, #one, 2 do
    local f32, f64 = one[i], one[i + 1]
    for _, part in ipairs({"y", "gx", "gw"}) do
      local scale = f64[part]:abs():max():item()
      local err = (f32[part]:double() - f64[part]):abs():max():item()
      assert(err <= 1e-5 * scale, string.format("%s: %s differs from f64 by %g (scale %g)",
        f32.name, part, err, scale))
    end
  end
end)
h.done("test_conv_threads")
