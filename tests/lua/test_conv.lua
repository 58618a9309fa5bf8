-- test_conv.lua - tensor.conv2d and tensor.max_pool2d (the ops behind
-- nn.Conv2d and nn.MaxPool2d): results against direct loops in Lua doubles,
-- gradients against an independent construction (padding, shifted windows
-- and a matrix product, differentiated by autograd's rules for those ops)
-- and against loops, batches that span several column chunks, NaN and tie
-- rules, eager and lazy giving the same bits, and clear errors that leave
-- the process usable.
local h = dofile("helpers.lua")
local lh = dofile("lazy_helpers.lua")

-- helpers.lua's direct loop, without bias
local function conv_loop(X, Wt, sh, sw, ph, pw) return h.conv2d_loop(X, Wt, nil, sh, sw, ph, pw) end

-- Max pooling of nested tables with -inf padding: values, and each
-- window's first maximum (row-major), the position that gets its gradient.
local function pool_loop(X, KH, KW, sh, sw, ph, pw)
  local N, C, H, W = #X, #X[1], #X[1][1], #X[1][1][1]
  local OH, OW = (H + 2 * ph - KH) // sh + 1, (W + 2 * pw - KW) // sw + 1
  local out, where = {}, {}
  for n = 1, N do
    out[n], where[n] = {}, {}
    for c = 1, C do
      out[n][c], where[n][c] = {}, {}
      for oh = 1, OH do
        out[n][c][oh], where[n][c][oh] = {}, {}
        for ow = 1, OW do
          local best, at = -math.huge, nil
          for i = 1, KH do
            for j = 1, KW do
              local y, x = (oh - 1) * sh - ph + i, (ow - 1) * sw - pw + j
              if y >= 1 and y <= H and x >= 1 and x <= W then
                local v = X[n][c][y][x]
                if at == nil or v > best or (v ~= v and best == best) then best, at = v, {y, x} end
              end
            end
          end
          out[n][c][oh][ow], where[n][c][oh][ow] = best, at
        end
      end
    end
  end
  return out, where
end

-- The convolution built from other ops: zero padding by cat, the K*K
-- shifted windows by narrow (stride by reshape and select), one matrix
-- product. Its gradients come from those ops' rules.
local function conv_by_windows(x, w, sh, sw, ph, pw)
  local n, c, hgt, wid = table.unpack(x:size())
  local o, _, kh, kw = table.unpack(w:size())
  local oh, ow = (hgt + 2 * ph - kh) // sh + 1, (wid + 2 * pw - kw) // sw + 1
  local eh, ew = math.max(0, (kh - 1) + sh * oh - (hgt + 2 * ph)), math.max(0, (kw - 1) + sw * ow - (wid + 2 * pw))
  local function zeros(a, b) return tensor.zeros(n, c, a, b, {dtype = x:dtype()}) end
  local xp = tensor.cat({zeros(ph, wid), x, zeros(ph + eh, wid)}, 3)
  xp = tensor.cat({zeros(hgt + 2 * ph + eh, pw), xp, zeros(hgt + 2 * ph + eh, pw + ew)}, 4)
  local rows = {}
  for i = 1, kh do
    for j = 1, kw do
      local win = xp:narrow(3, i, sh * oh):narrow(4, j, sw * ow)
      win = win:reshape(n, c, oh, sh, ow, sw):select(6, 1):select(4, 1)  -- [N, C, OH, OW]
      rows[#rows + 1] = win:permute(2, 1, 3, 4)                          -- [C, N, OH, OW]
    end
  end
  local columns = tensor.stack(rows, 2):reshape(c * kh * kw, n * oh * ow)
  local y = w:reshape(o, c * kh * kw):matmul(columns)
  return y:reshape(o, n, oh, ow):permute(2, 1, 3, 4)
end

local CASES = {
  {kh = 3, kw = 3, sh = 1, sw = 1, ph = 1, pw = 1},
  {kh = 3, kw = 3, sh = 1, sw = 1, ph = 0, pw = 0},
  {kh = 3, kw = 2, sh = 2, sw = 1, ph = 1, pw = 0},
  {kh = 2, kw = 3, sh = 1, sw = 3, ph = 0, pw = 2},
  {kh = 1, kw = 1, sh = 2, sw = 2, ph = 0, pw = 0},
  {kh = 5, kw = 5, sh = 3, sw = 2, ph = 2, pw = 1},
}

for _, dtype in ipairs({"f32", "f64"}) do
  for _, k in ipairs(CASES) do
    h.test(string.format("conv2d %s %dx%d stride %dx%d padding %dx%d against a loop", dtype,
        k.kh, k.kw, k.sh, k.sw, k.ph, k.pw), function()
      local x = tensor.new(h.rand_list(7, {3, 2, 7, 6}, -1, 1), {dtype = dtype})
      local w = tensor.new(h.rand_list(8, {4, 2, k.kh, k.kw}, -1, 1), {dtype = dtype})
      local y = tensor.conv2d(x, w, {stride = {k.sh, k.sw}, padding = {k.ph, k.pw}})
      local tol = dtype == "f32" and {rel = 1e-5, abs = 1e-5} or h.F64
      h.near(y, conv_loop(x:tolist(), w:tolist(), k.sh, k.sw, k.ph, k.pw), tol, dtype)
    end)
  end
end

h.test("conv2d: a single number is both stride and padding; methods too", function()
  local x = tensor.new(h.rand_list(9, {2, 3, 5, 5}, -1, 1))
  local w = tensor.new(h.rand_list(10, {2, 3, 3, 3}, -1, 1))
  h.near(x:conv2d(w, {stride = 2, padding = 1}), conv_loop(x:tolist(), w:tolist(), 2, 2, 1, 1),
    {rel = 1e-5, abs = 1e-5})
  h.near(tensor.conv2d(x, w), conv_loop(x:tolist(), w:tolist(), 1, 1, 0, 0), {rel = 1e-5, abs = 1e-5})
end)

-- 37 samples of 8x8 (64 outputs each) span three column chunks (16, 16, 5),
-- whose weight-gradient products are added in order.
for _, k in ipairs({CASES[1], CASES[3]}) do
  h.test(string.format("conv2d over several chunks, forward and gradients, stride %dx%d", k.sh, k.sw), function()
    local x = tensor.new(h.rand_list(11, {37, 3, 8, 8}, -1, 1), {dtype = "f64"})
    local w = tensor.new(h.rand_list(12, {5, 3, k.kh, k.kw}, -1, 1), {dtype = "f64"})
    local r = nil
    local function run(f)
      local xg, wg = x:clone():requires_grad(true), w:clone():requires_grad(true)
      local y = f(xg, wg)
      r = r or tensor.new(h.rand_list(13, y:size(), 0.5, 1.5), {dtype = "f64"})
      ;(y * r):sum():backward()
      return y, xg:grad(), wg:grad()
    end
    local y1, gx1, gw1 = run(function(a, b)
      return tensor.conv2d(a, b, {stride = {k.sh, k.sw}, padding = {k.ph, k.pw}})
    end)
    local y2, gx2, gw2 = run(function(a, b) return conv_by_windows(a, b, k.sh, k.sw, k.ph, k.pw) end)
    h.near(y1, y2:tolist(), h.F64)
    h.near(gx1, gx2:tolist(), h.F64)
    h.near(gw1, gw2:tolist(), {rel = 1e-11, abs = 1e-11})
  end)
end

-- Gradients against central differences of the loop itself, f64.
h.test("conv2d gradients against finite differences", function()
  local X = h.rand_list(14, {2, 2, 5, 4}, -1, 1)
  local Wt = h.rand_list(15, {3, 2, 3, 2}, -1, 1)
  local R = h.rand_list(16, {2, 3, 3, 3}, 0.5, 1.5)  -- the output: 2x3x3x3 for stride 2, padding 1
  local function loss(Xv, Wv)
    local out, s = conv_loop(Xv, Wv, 2, 2, 1, 1), 0
    local fo, fr = h.flatten(out), h.flatten(R)
    for i = 1, #fo do s = s + fo[i] * fr[i] end
    return s
  end
  local x = tensor.new(X, {dtype = "f64"}):requires_grad(true)
  local w = tensor.new(Wt, {dtype = "f64"}):requires_grad(true)
  local y = tensor.conv2d(x, w, {stride = 2, padding = 1})
  h.shape(y, {2, 3, 3, 3})
  ;(y * tensor.new(R, {dtype = "f64"})):sum():backward()
  for _, which in ipairs({{x, X}, {w, Wt}}) do
    local analytic = h.flatten(which[1]:grad():tolist())
    local list = which[2]
    local flat_positions = {}
    local function visit(v) for i = 1, #v do if type(v[i]) == "table" then visit(v[i]) else flat_positions[#flat_positions + 1] = {v, i} end end end
    visit(list)
    for e, at in ipairs(flat_positions) do
      local t, i = at[1], at[2]
      local saved = t[i]
      t[i] = saved + 1e-6
      local up = loss(X, Wt)
      t[i] = saved - 1e-6
      local down = loss(X, Wt)
      t[i] = saved
      local numeric = (up - down) / 2e-6
      assert(math.abs(numeric - analytic[e]) <= 1e-6 * math.max(1, math.abs(numeric)),
        string.format("element %d: backward %.10g, differences %.10g", e, analytic[e], numeric))
    end
  end
end)

for _, k in ipairs({{kh = 2, kw = 2, sh = 2, sw = 2, ph = 0, pw = 0},
                    {kh = 3, kw = 3, sh = 2, sw = 2, ph = 1, pw = 1},
                    {kh = 3, kw = 2, sh = 1, sw = 2, ph = 0, pw = 1},
                    {kh = 2, kw = 3, sh = 3, sw = 1, ph = 1, pw = 0}}) do
  h.test(string.format("max_pool2d %dx%d stride %dx%d padding %dx%d: values and gradients", k.kh,
      k.kw, k.sh, k.sw, k.ph, k.pw), function()
    -- Integers in [-3, 3]: many ties, so the first maximum must be chosen.
    local X = h.map(h.rand_list(17, {2, 3, 7, 8}, -3, 3), function(v) return math.floor(v + 0.5) end)
    local want, where = pool_loop(X, k.kh, k.kw, k.sh, k.sw, k.ph, k.pw)
    local x = tensor.new(X, {dtype = "f32"}):requires_grad(true)
    local y = tensor.max_pool2d(x, {k.kh, k.kw}, {stride = {k.sh, k.sw}, padding = {k.ph, k.pw}})
    h.near(y, want, h.EXACT)
    local G = h.rand_list(18, y:size(), 0.5, 1.5)
    y:backward(tensor.new(G, {dtype = "f32"}))
    local grad = h.map(X, function() return 0 end)
    for n = 1, #where do for c = 1, #where[n] do for i = 1, #where[n][c] do for j = 1, #where[n][c][i] do
      local at = where[n][c][i][j]
      grad[n][c][at[1]][at[2]] = grad[n][c][at[1]][at[2]] + G[n][c][i][j]
    end end end end
    h.near(x:grad(), grad, {rel = 1e-6, abs = 1e-6})
  end)
end

h.test("max_pool2d: NaN is the maximum of its window; infinities kept", function()
  local nan, inf = 0 / 0, math.huge
  local x = tensor.new({{{{1, nan, 3, 4}, {5, 6, 7, -inf}, {inf, 0, -1, -2}, {nan, nan, -inf, -inf}}}})
  local y = tensor.max_pool2d(x, 2):tolist()[1][1]
  assert(y[1][1] ~= y[1][1] and y[1][2] == 7 and y[2][1] ~= y[2][1] and y[2][2] == -1, h.show(y))
  x:requires_grad(true)
  tensor.max_pool2d(x, 2):sum():backward()
  -- The gradient goes to the first NaN of a window, never to a later one.
  h.near(x:grad(), {{{{0, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 1, 0}, {1, 0, 0, 0}}}}, h.EXACT)
end)

-- Padded and unpadded windows over odd-sized planes wide enough for several
-- vector blocks per row, against pool_loop, bit for bit: values drawn from
-- a few integers, +0 and -0, -inf and NaNs of both signs, so that ties
-- must keep the first maximum in row-major order (-0 or +0, whichever comes
-- first), a NaN the first NaN, and a window of -inf values its first -inf
-- (the padding never counts). The gradient gives each output a distinct
-- integer, so that x's gradient shows every window's position exactly.
do
  local nan = 0 / 0
  local other_nan = -nan
  local function bits(v) return string.format("%a", v) end
  -- y holds exactly the values of the nested list `want`, bit for bit.
  local function same_bits(y, want)
    local got, expected = h.flatten(y:tolist()), h.flatten(want)
    assert(#got == #expected, string.format("%d outputs, expected %d", #got, #expected))
    for i = 1, #got do
      assert(bits(got[i]) == bits(expected[i]),
        string.format("output %d: %s, expected %s", i, bits(got[i]), bits(expected[i])))
    end
  end
  -- Profiles: many ties; mostly -inf (whole windows of -inf at the borders).
  local profiles = {
    ties = function(u)
      if u < 0.04 then return nan elseif u < 0.08 then return other_nan
      elseif u < 0.14 then return -math.huge elseif u < 0.3 then return -0.0
      elseif u < 0.45 then return 0.0 end
      return math.floor(u * 5) - 2
    end,
    neg_inf = function(u)
      if u < 0.75 then return -math.huge elseif u < 0.8 then return nan
      elseif u < 0.9 then return -0.0 end
      return 0.0
    end,
  }
  local cases = {  -- kh, kw, sh, sw, ph, pw, H, W
    {3, 3, 2, 2, 1, 1, 9, 37},   -- ResNet's stem, odd sizes
    {3, 3, 1, 1, 1, 1, 7, 40},   -- stride 1
    {2, 2, 3, 3, 1, 1, 10, 50},  -- stride above the kernel
    {2, 5, 1, 4, 1, 2, 6, 71},   -- a stride of 4 across, tall and wide windows
    {5, 3, 3, 2, 2, 1, 11, 33},
    {4, 4, 4, 4, 2, 2, 7, 23},
    {1, 1, 2, 2, 0, 0, 5, 35},
    {3, 3, 2, 2, 0, 0, 9, 9},    -- no padding
    {3, 3, 1, 2, 1, 1, 2, 3},    -- a plane lower than the window
  }
  for ci, c in ipairs(cases) do
    local kh, kw, sh, sw, ph, pw, H, W = table.unpack(c)
    for _, dtype in ipairs({"f32", "f64"}) do
      for name, draw in pairs(profiles) do
        h.test(string.format("max_pool2d %dx%d stride %dx%d padding %dx%d over %dx%d, %s, %s: bits and positions",
            kh, kw, sh, sw, ph, pw, H, W, dtype, name), function()
          local X = h.map(h.rand_list(30 + ci, {2, 2, H, W}, 0, 1), draw)
          local want, where = pool_loop(X, kh, kw, sh, sw, ph, pw)
          local x = tensor.new(X, {dtype = dtype}):requires_grad(true)
          local y = tensor.max_pool2d(x, {kh, kw}, {stride = {sh, sw}, padding = {ph, pw}})
          same_bits(y, want)
          local count, G = 0, h.map(want, function() return 0 end)
          for n = 1, #G do for ch = 1, #G[n] do for i = 1, #G[n][ch] do for j = 1, #G[n][ch][i] do
            count = count + 1
            G[n][ch][i][j] = count
          end end end end
          y:backward(tensor.new(G, {dtype = dtype}))
          local grad = h.map(X, function() return 0 end)
          for n = 1, #where do for ch = 1, #where[n] do for i = 1, #where[n][ch] do for j = 1, #where[n][ch][i] do
            local at = where[n][ch][i][j]
            grad[n][ch][at[1]][at[2]] = grad[n][ch][at[1]][at[2]] + G[n][ch][i][j]
          end end end end
          h.near(x:grad(), grad, h.EXACT)
        end)
      end
    end
  end

  -- 2x2 windows of stride 2 without padding (the CNNs' pooling) have a
  -- kernel of their own: vectors of whole windows, the last one of a row
  -- running on into the rows that follow, except at the end of a thread's
  -- planes, where the row's last windows are done one by one. Odd sizes (a
  -- last row or column in no window: its gradient is +0), rows shorter and
  -- longer than a vector, and enough planes to be split between threads.
  -- The gradient has -0 among its values (x's gradient there is 0 + -0 =
  -- +0, as the general kernel's fill and add give), compared bit for bit.
  local fast = {  -- N, C, H, W
    {2, 2, 28, 28}, {2, 3, 14, 14}, {1, 2, 9, 37}, {2, 2, 7, 33}, {1, 2, 3, 2}, {2, 1, 2, 17},
    {3, 2, 11, 4}, {4, 100, 7, 15}, {3, 300, 5, 4},
  }
  for si, shape in ipairs(fast) do
    for _, dtype in ipairs({"f32", "f64"}) do
      for name, draw in pairs(profiles) do
        h.test(string.format("max_pool2d 2x2 stride 2 over %s, %s, %s: bits and positions",
            table.concat(shape, "x"), dtype, name), function()
          local X = h.map(h.rand_list(60 + si, shape, 0, 1), draw)
          local want, where = pool_loop(X, 2, 2, 2, 2, 0, 0)
          local x = tensor.new(X, {dtype = dtype}):requires_grad(true)
          local y = tensor.max_pool2d(x, 2)
          same_bits(y, want)
          local count = 0
          local G = h.map(want, function()
            count = count + 1
            return count % 5 == 0 and -0.0 or count
          end)
          y:backward(tensor.new(G, {dtype = dtype}))
          local grad = h.map(X, function() return 0.0 end)
          for n = 1, #where do for ch = 1, #where[n] do for i = 1, #where[n][ch] do for j = 1, #where[n][ch][i] do
            local at = where[n][ch][i][j]
            grad[n][ch][at[1]][at[2]] = grad[n][ch][at[1]][at[2]] + G[n][ch][i][j]
          end end end end
          local got_grad, expected_grad = h.flatten(x:grad():tolist()), h.flatten(grad)
          for i = 1, #got_grad do
            assert(bits(got_grad[i]) == bits(expected_grad[i]), string.format("gradient %d: %s, expected %s",
              i, bits(got_grad[i]), bits(expected_grad[i])))
          end
        end)
      end
    end
  end
end

h.test("nn.Conv2d and nn.MaxPool2d use the ops and keep their results", function()
  local nn = require "nn"
  tensor.manual_seed(4)
  local conv = nn.Conv2d(2, 3, 3, {padding = 1, stride = 2})
  local x = tensor.randn(2, 2, 6, 5)
  local want = h.conv2d_loop(x:tolist(), conv.weight:tolist(), conv.bias:tolist(), 2, 2, 1, 1)
  h.near(conv(x), want, {rel = 1e-5, abs = 1e-5})
  h.near(nn.MaxPool2d(3, {stride = 2, padding = 1})(x), (pool_loop(x:tolist(), 3, 3, 2, 2, 1, 1)), h.EXACT)
  -- Integer images take the generic windows (max_pool2d is for floats).
  local xi = tensor.new({{{{1, 5, 2, 0}, {3, 4, 9, 9}}}})
  h.eq(nn.MaxPool2d(2)(xi):tolist(), {{{{5, 9}}}})
end)

if lh.LAZY then
  h.test("eager and lazy give the same bits for conv2d, max_pool2d and their gradients", function()
    local function run(eager)
      tensor.set_eager(eager)
      local x = tensor.new(h.rand_list(19, {9, 3, 9, 9}, -1, 1)):requires_grad(true)
      local w = tensor.new(h.rand_list(20, {4, 3, 3, 3}, -1, 1)):requires_grad(true)
      local y = tensor.max_pool2d(tensor.conv2d(x, w, {padding = 1}):relu(), 2)
      ;(y * y):sum():backward()
      local out = {y:tolist(), x:grad():tolist(), w:grad():tolist()}
      tensor.set_eager(false)
      return out
    end
    local eager, lazy = run(true), run(false)
    local fe, fl = h.flatten(eager), h.flatten(lazy)
    assert(#fe == #fl)
    for i = 1, #fe do
      assert(string.format("%a", fe[i]) == string.format("%a", fl[i]),
        string.format("element %d: eager %a, lazy %a", i, fe[i], fl[i]))
    end
  end)
end

h.test("bad arguments are clear errors, and the process goes on", function()
  local x = tensor.ones(1, 2, 5, 5)
  local w = tensor.ones(3, 2, 3, 3)
  h.err(function() tensor.conv2d(tensor.ones(2, 5, 5), w) end, "conv2d: input must be [N, C, H, W]")
  h.err(function() tensor.conv2d(x:long(), w:long()) end, "conv2d: input must be f32 or f64")
  h.err(function() tensor.conv2d(x, tensor.ones(3, 4, 3, 3)) end, "conv2d: weight must be [O, 2, 3, 3]")
  h.err(function() tensor.conv2d(x, w:double()) end, "conv2d: weight is f64 but the input is f32")
  h.err(function() tensor.conv2d(x, tensor.ones(3, 2, 7, 7)) end, "is smaller than the kernel 7x7")
  h.err(function() tensor.conv2d(x, w, {stride = 0}) end, "kernel size and stride must be 1 to")
  h.err(function() tensor.conv2d(x, w, {padding = -1}) end, "padding must be 0 to")
  h.err(function() tensor.conv2d(x, w, {stride = {1, 2, 3}}) end, "stride must be an integer or a pair")
  h.err(function() tensor.conv2d(x, w, {padding = 1.5}) end, "padding must be an integer or a pair")
  h.err(function() tensor.conv2d(x, w, {stride = math.maxinteger}) end, "kernel size and stride must be 1 to")
  h.err(function() tensor.conv2d(x, "w") end, "conv2d")
  h.err(function() tensor.max_pool2d(x) end, "kernel size expected")
  h.err(function() tensor.max_pool2d(x, 2, {padding = 2}) end, "must be at most half the kernel")
  h.err(function() tensor.max_pool2d(x, 6) end, "is smaller than the kernel 6x6")
  h.err(function() tensor.max_pool2d(x:long(), 2) end, "max_pool2d: input must be f32 or f64")
  -- Still usable: a correct call after the errors.
  h.eq(tensor.conv2d(x, w, {padding = 1}):sum():item(), 3 * 2 * (9 * 9 + 12 * 6 + 4 * 4))
end)

-- f32 2-D convolutions run on oneDNN with weights packed once per weight
-- buffer (tensor/kernels/conv_onednn.cpp): the packed copy must follow the
-- buffer's value. Each result is checked against the layer in f64 (lazylua's
-- own kernels, not oneDNN's).
local function near_f64(y, x, w, b, opts, what)
  local want = b and tensor.conv2d(x:double(), w:double(), b:double(), opts)
    or tensor.conv2d(x:double(), w:double(), opts)
  local err = (y:double() - want):abs():max():item()
  local scale = want:abs():max():item()
  assert(err <= 1e-5 * scale, string.format("%s: off by %g (scale %g)", what, err, scale))
end

h.test("conv2d with packed weights: in-place writes to the weight are seen", function()
  tensor.manual_seed(31)
  local x = tensor.randn(2, 16, 12, 12)
  local w, b = tensor.randn(64, 16, 3, 3), tensor.randn(64)
  local opts = {padding = 1}
  local first = tensor.conv2d(x, w, b, opts)
  near_f64(first, x, w, b, opts, "first call")
  w:mul_(2)
  local second = tensor.conv2d(x, w, b, opts)
  near_f64(second, x, w, b, opts, "after w:mul_(2)")
  assert((second - first):abs():max():item() > 1, "the doubled weight changed nothing")
  local other = tensor.randn(64, 16, 3, 3)
  w:copy_(other)
  near_f64(tensor.conv2d(x, w, b, opts), x, other, b, opts, "after w:copy_(other)")
  -- A view's in-place write reaches the base's buffer.
  w:narrow(1, 1, 32):zero_()
  local third = tensor.conv2d(x, w, b, opts)
  near_f64(third, x, w, b, opts, "after zeroing a view of the weight")
  h.eq(third:narrow(2, 1, 32):sub(b:narrow(1, 1, 32):view(1, 32, 1, 1)):abs():max():item(), 0)
end)

h.test("conv2d with packed weights: new weights, freed ones, a training loop", function()
  tensor.manual_seed(32)
  local x = tensor.randn(1, 8, 10, 10)
  -- New weights each time, the old ones freed: a new buffer at an old
  -- buffer's address must not find the old buffer's packed copy.
  for i = 1, 6 do
    local w = tensor.randn(32, 8, 3, 3)
    near_f64(tensor.conv2d(x, w), x, w, nil, {}, "new weight " .. i)
    w = nil
    collectgarbage()
  end
  -- SGD steps on a conv's weight: each step's output is the f64 layer's
  -- with that step's weight. Each step calls the layer twice (and syncs in
  -- between), so its weights are kept packed; the step then updates them in
  -- place (eagerly, or as a compiled plan that takes the buffer over).
  local nn = require "nn"
  local conv = nn.Conv2d(8, 32, 3, {padding = 1})
  local opt = require("optim").SGD(conv:parameters(), {lr = 0.1})
  for step = 1, 5 do
    opt:zero_grad()
    tensor.no_grad(function() return conv(x):sum():item() end)
    local y = conv(x)
    near_f64(y, x, conv.weight:detach(), conv.bias:detach(), {padding = 1}, "step " .. step)
    y:square():mean():backward()
    opt:step()
  end
end)

h.test("LAZYLUA_CONV=columns gives the same layer within rounding; a bad value is said", function()
  local interpreter = assert(arg and arg[-1], "arg[-1] (the interpreter) is not set")
  local script = os.tmpname()
  local f = assert(io.open(script, "w"))
  f:write([[
    tensor.manual_seed(5)
    local y = tensor.conv2d(tensor.randn(1, 16, 9, 9), tensor.randn(32, 16, 3, 3), {padding = 1})
    io.write(string.format("%.9g", y:abs():sum():item()))
  ]])
  f:close()
  local function run(value)
    local pipe = assert(io.popen(string.format("LAZYLUA_CONV=%s %s %s 2>&1", value,
      arg[-1]:gsub("'", ""), script)))
    local out = pipe:read("a")
    pipe:close()
    return out
  end
  local onednn, columns, bad = run("onednn"), run("columns"), run("mkl")
  os.remove(script)
  local a, c = tonumber(onednn), tonumber(columns)
  assert(a and c, "outputs: " .. onednn .. " / " .. columns)
  assert(math.abs(a - c) <= 1e-5 * a, string.format("onednn %s, columns %s", onednn, columns))
  assert(bad:find("LAZYLUA_CONV=mkl is not onednn or columns; using onednn", 1, true), bad)
  assert(tonumber(bad:match("[%d.]+$")) == a, bad)
end)

-- tensor.config().conv and `lazylua -v` name the oneDNN that runs f32
-- convolutions and the ISA oneDNN chose for its kernels, or say that
-- LAZYLUA_CONV=columns turned it off. Children get LAZYLUA_CONV (and
-- oneDNN's cap) set explicitly, so the caller's environment does not matter.
h.test("tensor.config().conv: oneDNN's version, its ISA, and LAZYLUA_CONV=columns", function()
  local interpreter = assert(arg and arg[-1], "arg[-1] (the interpreter) is not set")
  local function child(settings, options)
    local pipe = assert(io.popen(string.format("env -u ONEDNN_MAX_CPU_ISA -u DNNL_MAX_CPU_ISA " ..
      "%s '%s' %s 2>&1", settings, interpreter:gsub("'", ""), options)))
    local out = pipe:read("a")
    pipe:close()
    return out
  end
  local function config(settings)
    return child(settings, [[-e 'io.write(tensor.config().conv)']])
  end
  local conv = tensor.config().conv
  assert(type(conv) == "string", "tensor.config().conv is " .. tostring(conv))
  local summary = "^oneDNN %d+%.%d+%.%d+, [%w_]+"
  assert(conv:match(summary), conv)
  local off = ", off (LAZYLUA_CONV=columns)"
  if os.getenv("LAZYLUA_CONV") == "columns" then
    assert(conv:sub(-#off) == off, conv)
  else
    assert(not conv:find("off", 1, true), conv)
  end

  local on, columns = config("LAZYLUA_CONV=onednn"), config("LAZYLUA_CONV=columns")
  assert(on:match(summary .. "$"), on)
  assert(columns == on .. off, "LAZYLUA_CONV=columns gives '" .. columns .. "', on '" .. on .. "'")
  local isa = on:match(", ([%w_]+)$")
  -- A name outside the map means a newer oneDNN: add it to isa_name().
  assert(not isa:find("^isa_0x"), "oneDNN ISA not named in conv_onednn.cpp: " .. on)

  -- The ISA is oneDNN's effective one, not a guess from the CPU: its own
  -- cap lowers it. And a CPU with AVX2 never reports less without the cap.
  if isa ~= "reference" then
    h.eq(config("LAZYLUA_CONV=onednn ONEDNN_MAX_CPU_ISA=SSE41"), (on:gsub("[%w_]+$", "sse41")))
    local cpuinfo = io.open("/proc/cpuinfo")
    local flags = cpuinfo and (cpuinfo:read("a"):match("\nflags%s*:([^\n]*)") or "") or ""
    if cpuinfo then cpuinfo:close() end
    if (" " .. flags .. " "):find(" avx2 ", 1, true) then
      assert(isa:find("^avx2") or isa:find("^avx512"), "a CPU with AVX2, oneDNN reports " .. on)
    end
  end

  -- `lazylua -v` ends its tensors line with the same text.
  for _, setting in ipairs({"LAZYLUA_CONV=onednn", "LAZYLUA_CONV=columns"}) do
    local line = child(setting, "-v"):match("\n(tensors: [^\n]*)")
    local want = "; convolutions: " .. (setting == "LAZYLUA_CONV=columns" and columns or on)
    assert(line and line:sub(-#want) == want, setting .. " -v: " .. tostring(line))
  end
end)

h.test("empty batches and channels", function()
  h.shape(tensor.conv2d(tensor.ones(0, 2, 5, 5), tensor.ones(3, 2, 3, 3)), {0, 3, 3, 3})
  h.eq(tensor.conv2d(tensor.ones(1, 0, 5, 5), tensor.ones(3, 0, 3, 3)):sum():item(), 0)
  -- No input channels: the output is the bias.
  h.eq(tensor.conv2d(tensor.ones(1, 0, 5, 5), tensor.ones(32, 0, 3, 3), tensor.full({32}, 2.0))
    :sum():item(), 2 * 32 * 9)
  h.shape(tensor.max_pool2d(tensor.ones(0, 2, 4, 4), 2), {0, 2, 2, 2})
end)

h.done("test_conv")
