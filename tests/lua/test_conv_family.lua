-- test_conv_family.lua - tensor.conv1d/2d/3d and conv_transpose1d/2d/3d
-- (stride, dilation, asymmetric and "same" padding, groups, depthwise with a
-- multiplier, bias, output_padding): values against a direct nested-loop
-- reference written here, a few against PyTorch's values, gradients of x,
-- weight and bias against central differences of that reference (f64),
-- layers big enough for the chunked, multi-sample, pointwise (in place and
-- gathered) and depthwise (phase planes) kernels, one recorded op per call,
-- and clear errors that leave the process usable.
local h = dofile("helpers.lua")

-- ---- The reference: flat row-major lists and direct loops ----

local function numel(shape)
  local n = 1
  for _, e in ipairs(shape) do n = n * e end
  return n
end

-- A deterministic list of `count` values in [-1, 1).
local function values(seed, count)
  local out, state = {}, seed
  for i = 1, count do
    state = (state * 1103515245 + 12345) % 2147483648
    out[i] = state / 1073741824 - 1
  end
  return out
end

-- Calls f(index list) for every index of `shape` (0-based), row-major.
local function each_index(shape, f)
  local index = {}
  for d = 1, #shape do index[d] = 0 end
  for _ = 1, numel(shape) do
    f(index)
    for d = #shape, 1, -1 do
      index[d] = index[d] + 1
      if index[d] < shape[d] then break end
      index[d] = 0
    end
  end
end

local function offset(shape, index)
  local at = 0
  for d = 1, #shape do at = at * shape[d] + index[d] end
  return at + 1
end

-- Per-dim options as lists of `rank` numbers.
local function full_options(o, rank, ws)
  local function dims(v, default)
    if v == nil then v = default end
    if type(v) == "number" then
      local out = {}
      for d = 1, rank do out[d] = v end
      return out
    end
    return v
  end
  local r = {stride = dims(o.stride, 1), dilation = dims(o.dilation, 1),
    output_padding = dims(o.output_padding, 0), groups = o.groups or 1, before = {}, after = {}}
  local p = o.padding or 0
  if p == "valid" then p = 0 end
  if p == "same" then  -- the odd pad after, as PyTorch
    p = {}
    for d = 1, rank do
      local total = r.dilation[d] * (ws[d + 2] - 1)
      p[d] = {total // 2, total - total // 2}
    end
  end
  for d = 1, rank do
    local pd = type(p) == "number" and p or p[d]
    if type(pd) == "table" then r.before[d], r.after[d] = pd[1], pd[2]
    else r.before[d], r.after[d] = pd, pd end
  end
  return r
end

-- out[n, o, p] = bias[o] + sum over c of its group, taps k of
-- w[o, c, k] * x[n, g*Cg + c, p*stride - before + k*dilation].
local function ref_conv(x, xs, w, ws, b, opts)
  local rank = #xs - 2
  local o = full_options(opts, rank, ws)
  local ys = {xs[1], ws[1]}
  for d = 1, rank do
    ys[d + 2] = (xs[d + 2] + o.before[d] + o.after[d] - o.dilation[d] * (ws[d + 2] - 1) - 1)
      // o.stride[d] + 1
  end
  local cg, og = ws[2], ws[1] // o.groups
  local y = {}
  local kernel = {table.unpack(ws, 3)}
  each_index(ys, function(yi)
    local oc = yi[2]
    local g = oc // og
    local sum = b and b[oc + 1] or 0
    for c = 0, cg - 1 do
      each_index(kernel, function(k)
        local xi = {yi[1], g * cg + c}
        for d = 1, rank do
          local at = yi[d + 2] * o.stride[d] - o.before[d] + k[d] * o.dilation[d]
          if at < 0 or at >= xs[d + 2] then return end
          xi[d + 2] = at
        end
        local wi = {oc, c}
        for d = 1, rank do wi[d + 2] = k[d] end
        sum = sum + w[offset(ws, wi)] * x[offset(xs, xi)]
      end)
    end
    y[offset(ys, yi)] = sum
  end)
  return y, ys
end

-- The transposed convolution by its definition: every input element
-- scatters x * w into out[n, g*Og + o, i*stride - before + k*dilation].
local function ref_conv_transpose(x, xs, w, ws, b, opts)
  local rank = #xs - 2
  local o = full_options(opts, rank, ws)
  local og = ws[2]
  local cg = xs[2] // o.groups
  local ys = {xs[1], og * o.groups}
  for d = 1, rank do
    ys[d + 2] = (xs[d + 2] - 1) * o.stride[d] - o.before[d] - o.after[d]
      + o.dilation[d] * (ws[d + 2] - 1) + o.output_padding[d] + 1
  end
  local y = {}
  each_index(ys, function(yi) y[offset(ys, yi)] = b and b[yi[2] + 1] or 0 end)
  local kernel = {table.unpack(ws, 3)}
  each_index(xs, function(xi)
    local c = xi[2]
    local g = c // cg
    for oc = 0, og - 1 do
      each_index(kernel, function(k)
        local yi = {xi[1], g * og + oc}
        for d = 1, rank do
          local at = xi[d + 2] * o.stride[d] - o.before[d] + k[d] * o.dilation[d]
          if at < 0 or at >= ys[d + 2] then return end
          yi[d + 2] = at
        end
        local wi = {c, oc}
        for d = 1, rank do wi[d + 2] = k[d] end
        local at = offset(ys, yi)
        y[at] = y[at] + x[offset(xs, xi)] * w[offset(ws, wi)]
      end)
    end
  end)
  return y, ys
end

local function make(list, shape, dtype)
  return tensor.new(list, {dtype = dtype}):reshape(table.unpack(shape))
end

local function flat(t) return h.flatten(t:tolist()) end

local calls = {conv = {tensor.conv1d, tensor.conv2d, tensor.conv3d},
  transpose = {tensor.conv_transpose1d, tensor.conv_transpose2d, tensor.conv_transpose3d}}

-- Runs one case: x, weight (and bias) from seeds, through tensor and the
-- reference; returns both and the inputs.
local function run_case(case, dtype)
  local transposed = case.transpose
  local rank = #case.x - 2
  local x = values(case.seed or 1, numel(case.x))
  local w = values((case.seed or 1) + 1, numel(case.w))
  local out_channels = transposed and case.w[2] * (case.opts.groups or 1) or case.w[1]
  local b = case.bias and values((case.seed or 1) + 2, out_channels) or nil
  local f = (transposed and calls.transpose or calls.conv)[rank]
  local bt = b and make(b, {out_channels}, dtype) or nil
  local y = bt and f(make(x, case.x, dtype), make(w, case.w, dtype), bt, case.opts)
              or f(make(x, case.x, dtype), make(w, case.w, dtype), case.opts)
  local want, want_shape = (transposed and ref_conv_transpose or ref_conv)(x, case.x, w, case.w, b,
    case.opts)
  return y, want, want_shape, x, w, b
end

local cases = {
  {name = "conv1d stride 2, padding {1, 2}, dilation 2, bias", x = {2, 3, 11}, w = {4, 3, 3},
    bias = true, opts = {stride = 2, padding = {{1, 2}}, dilation = 2}},
  {name = "conv2d groups 2, stride {2, 1}, asymmetric padding, dilation {1, 2}, bias",
    x = {2, 4, 7, 6}, w = {6, 2, 3, 2}, bias = true,
    opts = {groups = 2, stride = {2, 1}, padding = {{1, 0}, {2, 1}}, dilation = {1, 2}}},
  {name = "conv2d padding \"same\" with an even kernel and dilation", x = {1, 2, 6, 5},
    w = {3, 2, 4, 3}, opts = {padding = "same", dilation = {1, 2}}},
  {name = "conv2d padding \"valid\", stride 3", x = {1, 2, 8, 7}, w = {2, 2, 2, 3},
    opts = {padding = "valid", stride = 3}},
  {name = "conv2d depthwise, multiplier 2, stride 2, padding 1, bias", x = {2, 3, 7, 6},
    w = {6, 1, 3, 3}, bias = true, opts = {groups = 3, stride = 2, padding = 1}},
  {name = "conv2d depthwise, dilation 2, padding {{2, 1}, {0, 2}}", x = {1, 4, 6, 7},
    w = {4, 1, 3, 2}, opts = {groups = 4, dilation = 2, padding = {{2, 1}, {0, 2}}}},
  {name = "conv2d 1x1 (a matrix product), groups 2, bias", x = {2, 6, 4, 5}, w = {4, 3, 1, 1},
    bias = true, opts = {groups = 2}},
  {name = "conv2d five small samples in one chunk, groups 2", x = {5, 4, 5, 5}, w = {4, 2, 3, 3},
    bias = true, opts = {groups = 2, padding = 1}},
  {name = "conv2d over several chunks of one sample's positions", x = {1, 2, 70, 66},
    w = {2, 2, 3, 3}, bias = true, opts = {padding = {{1, 2}, {0, 1}}, dilation = {2, 1}}},
  {name = "conv1d over several chunks of a long line, stride 3", x = {2, 2, 9000},
    w = {2, 2, 5}, opts = {stride = 3, padding = 2}},
  {name = "conv3d groups 2, stride {1, 2, 1}, asymmetric padding, dilation {2, 1, 1}",
    x = {1, 2, 5, 4, 5}, w = {2, 1, 2, 3, 2}, bias = true,
    opts = {groups = 2, stride = {1, 2, 1}, padding = {{0, 1}, {1, 1}, {1, 0}}, dilation = {2, 1, 1}}},
  {name = "conv3d depthwise multiplier 2", x = {1, 2, 4, 4, 3}, w = {4, 1, 2, 2, 2},
    opts = {groups = 2, padding = 1}},
  {name = "conv_transpose1d groups 2, stride 2, padding 1, output_padding 1, bias",
    transpose = true, x = {2, 4, 5}, w = {4, 3, 3}, bias = true,
    opts = {groups = 2, stride = 2, padding = 1, output_padding = 1}},
  {name = "conv_transpose2d asymmetric padding, dilation 2, output_padding at the stride",
    transpose = true, x = {1, 3, 4, 3}, w = {3, 2, 3, 2},
    opts = {stride = {1, 2}, dilation = 2, padding = {{1, 0}, {0, 1}}, output_padding = {1, 1}}},
  {name = "conv_transpose2d depthwise, stride 2", transpose = true, x = {2, 3, 4, 4},
    w = {3, 2, 3, 3}, bias = true, opts = {groups = 3, stride = 2, padding = 1}},
  {name = "conv_transpose3d stride 2, output_padding {1, 0, 1}", transpose = true,
    x = {1, 2, 3, 2, 3}, w = {2, 2, 2, 2, 2}, bias = true,
    opts = {stride = 2, output_padding = {1, 0, 1}}},
  -- The phase planes of the depthwise kernel: strides 3 and 2 (3 x 2 phases),
  -- dilation, padding on one side only per dim, a multiplier of 3.
  {name = "conv2d depthwise multiplier 3, stride {3, 2}, dilation {1, 2}, one-sided padding, bias",
    x = {2, 2, 9, 11}, w = {6, 1, 3, 3}, bias = true,
    opts = {groups = 2, stride = {3, 2}, dilation = {1, 2}, padding = {{2, 0}, {0, 3}}}},
  {name = "conv2d depthwise over planes of more than one pass's 2048 positions",
    x = {1, 2, 40, 60}, w = {2, 1, 3, 3}, opts = {groups = 2, padding = 1}},
  {name = "conv1d depthwise stride 2 over a long line", x = {2, 3, 5000}, w = {3, 1, 5},
    opts = {groups = 3, stride = 2, padding = 2}},
  -- 1x1 windows of up to 64 input channels (f32): register tiles of 6 rows
  -- by 2 vectors, then one vector, then a masked one (29 positions: 16 + 8
  -- + 5 with 8 lanes, 16 + 13 with 16); 13 rows (6 + 6 + 1); a plane in
  -- two runs of positions, each in two passes (1216 and 1189 > 1024), the
  -- second ending in a masked tile; exactly 64 channels; 65 (OpenBLAS). In
  -- f64 all run on OpenBLAS: small planes of several samples gathered into
  -- one product; planes of 256 positions or more read in place, per sample.
  {name = "conv2d 1x1 over small planes of 9 samples (one gathered product), bias",
    x = {9, 5, 3, 3}, w = {6, 5, 1, 1}, bias = true, opts = {}},
  {name = "conv2d 1x1 over planes of 272 positions, one product per sample", x = {3, 3, 16, 17},
    w = {4, 3, 1, 1}, opts = {}},
  {name = "conv2d 1x1, 13 outputs over 29 positions, bias", x = {3, 7, 1, 29},
    w = {13, 7, 1, 1}, bias = true, opts = {}},
  {name = "conv1d 1x1 over 2405 positions, 64 channels", x = {1, 64, 2405}, w = {9, 64, 1},
    opts = {}},
  {name = "conv1d 1x1 of 65 channels, 20 outputs", x = {2, 65, 37}, w = {20, 65, 1}, bias = true,
    opts = {}},
  -- Taps that read only padding at every output are left out: DeepLabV3's
  -- ASPP shape, where the centre tap alone reads the input (a 1x1 window);
  -- one dim trimmed to its middle row, the other whole; a 3-D window
  -- trimmed on one side only, with stride 2.
  {name = "conv2d dilation 6, padding 6 over 6x6 (the centre tap only), bias", x = {2, 3, 6, 6},
    w = {4, 3, 3, 3}, bias = true, opts = {dilation = 6, padding = 6}},
  {name = "conv2d dilation {7, 1}, padding {7, 1} over 6x5 (the middle row of taps)",
    x = {1, 5, 6, 5}, w = {3, 5, 3, 3}, opts = {dilation = {7, 1}, padding = {7, 1}}},
  {name = "conv3d taps past the input's end on one side, stride 2",
    x = {1, 2, 4, 3, 5}, w = {2, 2, 2, 3, 2},
    opts = {stride = {2, 1, 2}, dilation = {4, 3, 1}, padding = {{0, 4}, {3, 3}, {0, 1}}}},
  -- Kept whole: dilation 24's shape scaled down (each tap reads the input
  -- for some outputs); a 1x1 window under padding past its reach (outputs
  -- that read nothing hold the bias).
  {name = "conv2d dilation 6, padding 6 over 8x9, bias", x = {2, 3, 8, 9}, w = {4, 3, 3, 3},
    bias = true, opts = {dilation = 6, padding = 6}},
  {name = "conv2d 1x1 with padding 2 (outputs that read nothing), bias", x = {2, 2, 3, 3},
    w = {3, 2, 1, 1}, bias = true, opts = {padding = 2}},
  -- f32: padding wider than oneDNN's direct kernel takes (it falls back to an
  -- im2col product), so the input is padded before the kernel runs:
  -- symmetric; asymmetric with stride 2; windows that never reach x's last
  -- row and column.
  {name = "conv2d dilation 4, padding 4, bias", x = {2, 8, 20, 20}, w = {8, 8, 3, 3},
    bias = true, opts = {dilation = 4, padding = 4}},
  {name = "conv2d dilation 4, stride 2, padding {{5, 2}, {4, 4}}", x = {1, 16, 24, 24},
    w = {16, 16, 3, 3}, opts = {dilation = 4, stride = 2, padding = {{5, 2}, {4, 4}}}},
  {name = "conv2d dilation 4, stride 2, padding {{4, 0}, {4, 0}}, last row unread",
    x = {1, 8, 22, 22}, w = {8, 8, 3, 3}, bias = true,
    opts = {dilation = 4, stride = 2, padding = {{4, 0}, {4, 0}}}},
  -- f32: oneDNN's input gradient, with the bias added after.
  {name = "conv_transpose2d stride 2, output_padding 1, bias", transpose = true,
    x = {2, 4, 5, 5}, w = {4, 3, 3, 3}, bias = true,
    opts = {stride = 2, padding = 1, output_padding = 1}},
}

for _, case in ipairs(cases) do
  for _, dtype in ipairs({"f64", "f32"}) do
    h.test(case.name .. " (" .. dtype .. ") against a direct loop", function()
      local y, want, want_shape = run_case(case, dtype)
      h.shape(y, want_shape)
      h.eq(flat(y), want, dtype == "f64" and h.F64 or {rel = 1e-5, abs = 1e-5})
    end)
  end
end

-- ---- Gradients against central differences of the reference ----

local function check_gradients(case)
  local y, _, want_shape, x, w, b = run_case(case, "f64")
  local R = values(99, numel(want_shape))
  local reference = case.transpose and ref_conv_transpose or ref_conv
  local function loss()
    local out = reference(x, case.x, w, case.w, b, case.opts)
    local s = 0
    for i = 1, #out do s = s + out[i] * R[i] end
    return s
  end
  local rank = #case.x - 2
  local f = (case.transpose and calls.transpose or calls.conv)[rank]
  local xt = make(x, case.x, "f64"):requires_grad(true)
  local wt = make(w, case.w, "f64"):requires_grad(true)
  local bt = b and make(b, {#b}, "f64"):requires_grad(true) or nil
  y = bt and f(xt, wt, bt, case.opts) or f(xt, wt, case.opts)
  ;(y * make(R, want_shape, "f64")):sum():backward()
  local pairs_ = {{xt, x}, {wt, w}}
  if bt then pairs_[3] = {bt, b} end
  for _, pair in ipairs(pairs_) do
    local analytic = flat(pair[1]:grad())
    local list = pair[2]
    for e = 1, #list do
      local saved = list[e]
      list[e] = saved + 1e-6
      local up = loss()
      list[e] = saved - 1e-6
      local down = loss()
      list[e] = saved
      local numeric = (up - down) / 2e-6
      assert(math.abs(numeric - analytic[e]) <= 1e-6 * math.max(1, math.abs(numeric)),
        string.format("element %d: backward %.10g, differences %.10g", e, analytic[e], numeric))
    end
  end
end

for _, k in ipairs({1, 2, 5, 7, 11, 13, 14, 15, 16, 17, 20}) do
  local case = cases[k]
  h.test(case.name .. ": gradients of x, weight and bias against differences", function()
    check_gradients(case)
  end)
end

h.test("gradients over several chunks (positions and samples) against differences, sampled",
    function()
  -- The chunked kernels against the loop, for a few elements of each gradient.
  for _, case in ipairs({cases[8], cases[9]}) do
    local y, _, want_shape, x, w = run_case(case, "f64")
    local R = values(7, numel(want_shape))
    local xt = make(x, case.x, "f64"):requires_grad(true)
    local wt = make(w, case.w, "f64"):requires_grad(true)
    y = tensor.conv2d(xt, wt, case.opts)
    ;(y * make(R, want_shape, "f64")):sum():backward()
    local gx, gw = flat(xt:grad()), flat(wt:grad())
    -- The loss is linear: the gradient of element e is the loss at a unit input.
    local function unit_loss(xs, ws)
      local out = ref_conv(xs, case.x, ws, case.w, nil, case.opts)
      local s = 0
      for i = 1, #out do s = s + out[i] * R[i] end
      return s
    end
    local zero_x, zero_w = {}, {}
    for i = 1, #x do zero_x[i] = 0 end
    for i = 1, #w do zero_w[i] = 0 end
    for _, e in ipairs({1, 2, #w // 2, #w}) do
      zero_w[e] = 1
      h.eq(gw[e], unit_loss(x, zero_w), h.F64)
      zero_w[e] = 0
    end
    for _, e in ipairs({1, 17, #x // 3, #x // 2 + 5, #x}) do
      zero_x[e] = 1
      h.eq(gx[e], unit_loss(zero_x, w), h.F64)
      zero_x[e] = 0
    end
  end
end)

-- ---- PyTorch's values ----
-- Generated once with PyTorch 1.13 (torch.nn.functional, f64) from inputs
-- x[i] = sin(0.37 i), w[i] = cos(0.21 i), b[i] = sin(1.3 i) (i = 1, 2, ...
-- in row-major order) and pasted here.

local function sequence(shape, f, scale)
  local out = {}
  for i = 1, numel(shape) do out[i] = f(scale * i) end
  return make(out, shape, "f64")
end

local torch_cases = {
  {"conv2d groups 2, dilation {2, 1}, padding \"same\", bias",
    function()
      return tensor.conv2d(sequence({1, 4, 3, 4}, math.sin, 0.37), sequence({4, 2, 3, 3}, math.cos, 0.21),
        sequence({4}, math.sin, 1.3), {padding = "same", dilation = {2, 1}, groups = 2})
    end, {1, 4, 3, 4}, {
    1.7272336520701439, 2.0785809351154287, 2.2555058014390297, 1.7977362731920148,
    1.3108399429509128, 1.1157481132059983, -0.090239844623353549, -0.099882909947206167,
    1.0438987838825615, 1.0254413577080554, 1.2154864620913577, 1.0784819310161577,
    -0.6406651787984966, -1.2286445631298513, -1.3230971388971113, -0.71992425127243742,
    1.1844279274784331, 1.5710542305699584, 2.252848659980681, 1.9645743655492023,
    -0.25580638330504402, -0.61145594281939541, -0.78770264205392981, -0.32662595118706572,
    -1.4626268117996521, -2.0025235295881112, -2.3055694611977309, -1.9151763008584013,
    0.50160614914659818, 0.87214599581527597, 1.1248301098689544, 0.61735926486227011,
    -1.3649365443052903, -1.8799820773962692, -2.30762913923594, -1.8718435965798925,
    -0.31285465007553426, 0.041007271980848414, 0.09948833640121435, -0.092294821214596867,
    -2.9581235113195374, -3.5655060416963464, -3.1173817669224499, -2.2977004659842786,
    -0.10935005093662975, 0.42940317350686719, 0.72983011142025844, 0.34116798999771014}},
  {"conv_transpose2d groups 2, stride 2, padding 1, output_padding 1, dilation {1, 2}, bias",
    function()
      return tensor.conv_transpose2d(sequence({1, 2, 2, 2}, math.sin, 0.37),
        sequence({2, 1, 3, 2}, math.cos, 0.21), sequence({2}, math.sin, 1.3),
        {stride = 2, padding = 1, output_padding = 1, groups = 2, dilation = {1, 2}})
    end, {1, 2, 4, 4}, {
    0.96355818541719296, 1.7497662246222463, 0.96355818541719296, 1.4136203003431489,
    0.96355818541719296, 3.2015072586982649, 0.96355818541719296, 2.0790946149243656,
    0.96355818541719296, 2.3661028786510938, 0.96355818541719296, 1.6282716281135148,
    0.96355818541719296, 1.7329994637022539, 0.96355818541719296, 1.268115386406854,
    0.51550137182146416, -0.21976532625743195, 0.51550137182146416, 0.11335839610432974,
    0.51550137182146416, -0.84155638994995441, 0.51550137182146416, -0.15175075222073253,
    0.51550137182146416, 0.19426661143703028, 0.51550137182146416, 0.42432804946978836,
    0.51550137182146416, -0.032189183153960133, 0.51550137182146416, 0.36868526794421008}},
  {"conv1d depthwise multiplier 2, stride 2, padding 2, dilation 2",
    function()
      return tensor.conv1d(sequence({1, 3, 9}, math.sin, 0.37), sequence({6, 1, 3}, math.cos, 0.21),
        {stride = 2, padding = 2, dilation = 2, groups = 3})
    end, {1, 6, 5}, {
    1.0539362287619829, 1.9482604425121715, 2.1771930049647414, 1.267316718392735,
    0.34151488099588101, 0.45384917230979493, 0.98101280239084154, 1.2364099063310412,
    0.8450868806636963, 0.25658771516516654, 0.35998577627597661, 0.33177562944291422,
    0.1118533336128448, -0.16657528931855978, -0.075850471011924103, 1.1399296670583707,
    1.6420264181746407, 1.3764134201439739, 0.39084965100492575, -0.068546485980608973,
    -1.6619883994777525, -2.3912674725454592, -1.8635177743604621, -0.3610310974524204,
    0.3653897179916647, -1.4181305130160315, -2.2059449470656909, -1.8332587084203624,
    -0.50166288530561054, 0.31744154475567543}},
  {"conv3d stride {1, 2, 1}, padding {1, 0, 1}",
    function()
      return tensor.conv3d(sequence({1, 2, 3, 4, 3}, math.sin, 0.37),
        sequence({2, 2, 2, 2, 2}, math.cos, 0.21), {stride = {1, 2, 1}, padding = {1, 0, 1}})
    end, {1, 2, 4, 2, 4}, {
    -1.6508917449980123, -2.7100622639684304, -1.9080315799356815, -0.51880997460102141,
    1.3583508914777542, 3.0010986269642252, 3.2046444134429777, 1.437496078946485,
    -0.092614617456134821, -0.23680034727015048, -0.45830892123363659, -0.11268234681795605,
    -0.35658705870957741, -0.3800799087552808, -0.14254705942240459, -0.073705235477190059,
    0.52376564980162454, 0.69635669131314615, 0.63066321824652116, 0.20179968181114394,
    -0.27670036746982613, -0.46188812964421211, -0.61999070230487319, -0.17029167639820006,
    0.70512469534069278, 0.66767037738974011, -0.25170587311734666, -0.58302005486522968,
    -1.197805084448532, -2.3293120557748974, -1.835508524714782, -0.58203673400903666,
    1.9028813010107872, 3.370405424410944, 2.672191307877871, 0.92924089182213154,
    -1.2954134247829756, -3.0731869526587561, -3.5518446951901717, -1.7146681823236551,
    0.22285988718470556, 0.60079898990375313, 0.997939980188985, 0.42955144332295958,
    0.51569001596797603, 0.60116726610407456, 0.12275214198878955, -0.00042888564535042224,
    -0.84638302781539076, -1.3276730619215675, -1.1463601526220772, -0.42903287574111593,
    0.50767554733338094, 1.0041282635101594, 1.2633171254471975, 0.51917448442096448,
    -1.0304687121235627, -1.4545236038104254, -0.6662759349814511, 0.11407833538510675,
    1.1176852628816432, 2.398860753766844, 2.2384695896960212, 0.87919953995023215}},
}

for _, case in ipairs(torch_cases) do
  h.test(case[1] .. " against PyTorch's values", function()
    local y = case[2]()
    h.shape(y, case[3])
    h.eq(flat(y), case[4], h.F64)
  end)
end

-- ---- API ----

h.test("methods, the bias slot left nil, and conv2d's old calls", function()
  local x = make(values(3, 2 * 2 * 5 * 5), {2, 2, 5, 5}, "f64")
  local w = make(values(4, 3 * 2 * 3 * 3), {3, 2, 3, 3}, "f64")
  local want = flat(tensor.conv2d(x, w, {stride = 2, padding = 1}))
  h.eq(flat(x:conv2d(w, {stride = 2, padding = 1})), want, h.EXACT)
  h.eq(flat(tensor.conv2d(x, w, nil, {stride = {2, 2}, padding = {1, 1}})), want, h.EXACT)
  h.eq(flat(x:conv2d(w, nil, {stride = 2, padding = {{1, 1}, {1, 1}}})), want, h.EXACT)
  local ref = ref_conv(values(3, 100), {2, 2, 5, 5}, values(4, 54), {3, 2, 3, 3}, nil,
    {stride = 2, padding = 1})
  h.eq(want, ref, h.F64)
  local x1 = make(values(5, 12), {1, 2, 6}, "f32")
  h.shape(x1:conv1d(make(values(6, 8), {4, 2, 1}, "f32")), {1, 4, 6})
  h.shape(x1:conv_transpose1d(make(values(6, 8), {2, 4, 1}, "f32")), {1, 4, 6})
  h.shape(tensor.conv3d(make(values(7, 64), {1, 1, 4, 4, 4}, "f32"),
    make(values(8, 8), {1, 1, 2, 2, 2}, "f32")), {1, 1, 3, 3, 3})
end)

h.test("a grouped convolution is one recorded op, shown with its window", function()
  if os.getenv("LAZYLUA_EAGER") == "1" then return end
  local x = tensor.ones(1, 8, 5, 5)
  local y = tensor.conv2d(x, tensor.ones(8, 1, 3, 3), tensor.ones(8),
    {groups = 8, stride = 2, padding = {{1, 0}, {1, 1}}, dilation = {1, 2}})
  local convs = 0
  for _, node in ipairs(tensor.graph(y).nodes) do
    if node.op == "conv" then
      convs = convs + 1
      h.eq(node.name, "conv2d")
      h.eq(#node.inputs, 3)
      h.eq(node.attrs[1], 8)
    end
  end
  h.eq(convs, 1)
end)

-- ---- Bad inputs ----

h.test("bad inputs are clear errors naming the function and the value", function()
  local x = tensor.ones(1, 4, 6, 6)
  local w = tensor.ones(4, 2, 3, 3)
  h.err(function() tensor.conv2d(x, w, {groups = 2, stride = 0}) end, "conv2d", "got stride 0x0")
  h.err(function() tensor.conv1d(tensor.ones(1, 2, 5), tensor.ones(1, 2, 3), {stride = {1, 1}}) end,
    "conv1d: stride must be an integer or a list of 1 integers")
  h.err(function() tensor.conv2d(x, w, {groups = 3}) end, "conv2d", "groups 3 does not divide")
  h.err(function() tensor.conv2d(x, tensor.ones(4, 3, 3, 3), {groups = 2}) end, "conv2d",
    "weight must be [O, 2, 3, 3] for a 4-channel input with groups 2")
  h.err(function() tensor.conv2d(x, tensor.ones(3, 4, 3, 3), {groups = 2}) end, "conv2d")
  h.err(function() tensor.conv2d(x, w, {groups = 0}) end, "conv2d", "groups must be")
  h.err(function() tensor.conv2d(x, w, {groups = 2, dilation = 4}) end, "conv2d",
    "is smaller than the kernel 9x9 (kernel 3x3 dilated by 4x4)")
  h.err(function() tensor.conv2d(x, w, tensor.ones(3), {groups = 2}) end, "conv2d",
    "bias must be [4]")
  h.err(function() tensor.conv2d(x, w, {groups = 2, strde = 1}) end,
    "conv2d: unknown option 'strde' (options: dilation, groups, padding, stride)")
  h.err(function() tensor.conv2d(x, w, {groups = 2, padding = -1}) end, "conv2d", "padding")
  h.err(function() tensor.conv2d(x, w, {groups = 2, padding = 70000}) end, "conv2d", "65535")
  h.err(function() tensor.conv2d(x, w, {groups = 2, stride = 2, padding = "same"}) end,
    "conv2d", "\"same\" needs stride 1")
  h.err(function() tensor.conv2d(x, w, {groups = 2, padding = "full"}) end, "conv2d", "\"full\"")
  h.err(function() tensor.conv2d(x, w, {groups = 2, stride = {1, 2, 3}}) end, "conv2d",
    "stride must be an integer or a pair")
  h.err(function() tensor.conv2d(x, w, {groups = 2, dilation = 1.5}) end, "conv2d", "fraction")
  h.err(function() tensor.conv1d(x, w) end, "conv1d", "[N, C, L]")
  h.err(function() tensor.conv3d(x, w) end, "conv3d", "[N, C, D, H, W]")
  h.err(function() tensor.conv2d(x, tensor.ones(4, 2, 3, 3, {dtype = "f64"}), {groups = 2}) end,
    "conv2d", "f64")
  h.err(function() tensor.conv2d(tensor.ones(1, 4, 6, 6, {dtype = "i32"}), w, {groups = 2}) end,
    "conv2d", "f32 or f64")
  h.err(function() tensor.conv2d(x, w, "same") end, "conv2d", "bias tensor or options table")
  -- transposed
  local wt = tensor.ones(4, 3, 3, 3)
  h.err(function() tensor.conv_transpose2d(x, wt, {stride = 2, output_padding = 2}) end,
    "conv_transpose2d", "output_padding 2")
  h.err(function() tensor.conv_transpose2d(x, wt, {output_padding = 1}) end, "conv_transpose2d",
    "output_padding 1")
  h.err(function() tensor.conv_transpose2d(x, wt, {padding = 5}) end, "conv_transpose2d",
    "at least 1")
  h.err(function() tensor.conv_transpose2d(x, tensor.ones(3, 3, 3, 3)) end, "conv_transpose2d",
    "input's 4 channels")
  h.err(function() tensor.conv_transpose2d(x, wt, {groups = 3}) end, "conv_transpose2d",
    "groups 3 does not divide")
  h.err(function() tensor.conv_transpose2d(x, wt, tensor.ones(4)) end, "conv_transpose2d",
    "bias must be [3]")
  h.err(function() tensor.conv_transpose2d(x, wt, {padding = "same"}) end, "conv_transpose2d")
  h.err(function() tensor.conv_transpose2d(x, wt, {outpt_padding = 1}) end,
    "unknown option 'outpt_padding'")
  h.still_works()
  h.shape(tensor.conv2d(x, w, {groups = 2, padding = "same"}), {1, 4, 6, 6})
  h.shape(tensor.conv_transpose2d(x, wt, {stride = 2, output_padding = 1}), {1, 3, 14, 14})
end)
h.done("test_conv_family")
