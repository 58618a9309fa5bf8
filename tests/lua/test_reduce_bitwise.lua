-- test_reduce_bitwise.lua - float reductions give the same bits in every
-- tier: sum, mean, prod, softmax and log_softmax over every dim (and over
-- everything), f32 and f64, of many shapes (0-length, odd, and long enough
-- to span several thread chunks), computed by generated code
-- (LAZYLUA_COMPILE=sync), the reference interpreter (LAZYLUA_COMPILE=off)
-- and the eager kernels (LAZYLUA_EAGER=1), each also with one thread. All
-- follow one summation order (tensor/kernels/reduce_order.h); a different
-- order in one tier shows up here as other last bits.
--
-- The script runs itself as child processes, one per tier; each child saves
-- its results with tensor.save and the parent compares them value by value
-- with %a (NaN-aware: a NaN's sign and payload are not compared).
local h = dofile("helpers.lua")

local CHILD_VARIABLE = "LAZYLUA_REDUCE_BITWISE_OUT"

-- Shapes; the last ones span several chunks of the kernels' thread work
-- (lines and columns of 300000, a whole tensor of 2.1M).
local SHAPES = {
  {0}, {1}, {31}, {33}, {1000}, {65537}, {2100000},
  {0, 5}, {3, 0}, {1, 1}, {7, 31}, {33, 1}, {31, 33}, {300, 257}, {1000, 33}, {5, 7, 9},
  {4, 65537}, {2, 300000}, {300000, 2}, {3, 1025, 5},
}

local function results()
  local out = {}
  local function add(name, t) out[#out + 1] = {name = name, value = t} end
  for _, dtype in ipairs({"f32", "f64"}) do
    for s, shape in ipairs(SHAPES) do
      tensor.manual_seed(1000 + s)
      local x = tensor.randn(shape, {dtype = dtype})
      local near_one = x * 0.01 + 1 -- products that neither vanish nor overflow
      tensor.sync(x, near_one)
      local tag = dtype .. "[" .. table.concat(shape, "x") .. "]"
      local big = 1
      for _, n in ipairs(shape) do big = big * n end
      -- Everything, read from memory and with a fused producer.
      add(tag .. " sum()", x:sum())
      add(tag .. " mean()", x:mean())
      add(tag .. " prod()", near_one:prod())
      add(tag .. " (x*x):sum()", (x * x):sum())
      for d = 1, #shape do
        for _, keep in ipairs({false, true}) do
          local k = keep and ",keep" or ""
          add(tag .. " sum(" .. d .. k .. ")", x:sum(d, keep))
          add(tag .. " mean(" .. d .. k .. ")", x:mean(d, keep))
        end
        add(tag .. " prod(" .. d .. ")", near_one:prod(d))
        add(tag .. " (x*x):sum(" .. d .. ")", (x * x):sum(d))
        add(tag .. " (x*0.5+1):mean(" .. d .. ")", (x * 0.5 + 1):mean(d))
        if big <= 300000 then
          add(tag .. " softmax(" .. d .. ")", x:softmax(d))
          add(tag .. " log_softmax(" .. d .. ")", x:log_softmax(d))
        end
      end
      if #shape == 2 and big <= 700000 then
        -- Strided reads: the transpose's dims are the other way round in memory.
        local t = x:t()
        add(tag .. " t:sum()", t:sum())
        add(tag .. " t:sum(1)", t:sum(1))
        add(tag .. " t:sum(2)", t:sum(2))
        add(tag .. " t:mean(2)", t:mean(2))
        add(tag .. " (t*t):sum(2)", (t * t):sum(2))
        if big <= 300000 then add(tag .. " t:softmax(2)", t:softmax(2)) end
      end
    end
    -- The exponentials softmax uses: see `comparable` below.
    tensor.manual_seed(8)
    add(dtype .. " exp", (tensor.randn({4099}, {dtype = dtype}) * 3):exp())
    -- Sums over a matmul's result (the training case that showed the bug).
    tensor.manual_seed(7)
    local a = tensor.randn({300, 64}, {dtype = dtype})
    local b = tensor.randn({64, 257}, {dtype = dtype})
    local m = a:matmul(b)
    add(dtype .. " matmul:sum()", m:sum())
    add(dtype .. " matmul:sum(1)", m:sum(1))
    add(dtype .. " matmul:mean(2)", m:mean(2))
  end
  return out
end

local child_path = os.getenv(CHILD_VARIABLE)
if child_path then
  local list = results()
  local saved = {}
  for i, r in ipairs(list) do saved[i] = {name = r.name, value = r.value} end
  tensor.save(child_path, saved)
  os.exit(0)
end

local interpreter = assert(arg and arg[-1], "arg[-1] (the interpreter) is not set")
local script = arg[0]

local function quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- Runs this script as a child under `env` and loads what it saved.
local function run_tier(env)
  local path = os.tmpname()
  local command = string.format("env -u LAZYLUA_EAGER -u LAZYLUA_COMPILE -u LAZYLUA_THREADS %s %s=%s %s %s 2>&1",
                                env, CHILD_VARIABLE, quote(path), quote(interpreter), quote(script))
  local pipe = assert(io.popen(command, "r"))
  local output = pipe:read("a")
  local ok = pipe:close()
  assert(ok, "child (" .. env .. ") failed:\n" .. output)
  local loaded = tensor.load(path)
  os.remove(path)
  return loaded
end

local function bits(t)
  local out = {}
  for i, v in ipairs(h.flatten(t:tolist())) do
    out[i] = v ~= v and "nan" or string.format("%a", v)
  end
  return out
end

-- Same bits, quickly (with tensor ops, eagerly): equal and with equal
-- reciprocals (which tells -0 from +0), or both NaN.
local function same_bits(a, b)
  if a:numel() == 0 then return true end
  local equal = a:eq(b):logical_and((1 / a):eq(1 / b))
  return equal:logical_or(a:ne(a):logical_and(b:ne(b))):all():item()
end

local TIERS = {
  {name = "compiled", env = "LAZYLUA_COMPILE=sync"},
  {name = "interpreted", env = "LAZYLUA_COMPILE=off"},
  {name = "eager", env = "LAZYLUA_EAGER=1"},
  {name = "compiled, 1 thread", env = "LAZYLUA_COMPILE=sync LAZYLUA_THREADS=1", threads = true},
  {name = "eager, 1 thread", env = "LAZYLUA_EAGER=1 LAZYLUA_THREADS=1", threads = true},
}

-- Which results two tiers must agree on. Softmax's exponentials come from
-- each tier's math library (generated code: compiler/kernel_math.h; eager:
-- fast_math.h), which are to become one; until they give the same bits for
-- exp, softmax cannot, whatever the order of its sums, and is left out (the
-- test says so). The products themselves of matmul depend on how the rows
-- are split between threads, so matmul cases are not compared across
-- thread counts.
local function comparable(name, exp_agrees, threads)
  if name:find(" exp$") then return false end -- only the gate
  if name:find("softmax") and not exp_agrees then return false end
  if threads and name:find("matmul") then return false end
  return true
end

tensor.set_eager(true) -- the comparisons need no graphs
local outputs = {}
for i, tier in ipairs(TIERS) do outputs[i] = run_tier(tier.env) end

for i = 2, #TIERS do
  h.test(TIERS[1].name .. " and " .. TIERS[i].name .. " give the same bits", function()
    local base, other = outputs[1], outputs[i]
    assert(#base == #other, "different result counts")
    local exp_agrees = true
    for r = 1, #base do
      if base[r].name:find(" exp$") then
        local want, got = bits(base[r].value), bits(other[r].value)
        for e = 1, #want do exp_agrees = exp_agrees and want[e] == got[e] end
      end
    end
    if not exp_agrees then
      print(string.format("  note: exp differs between %s and %s: softmax not compared", TIERS[1].name,
                          TIERS[i].name))
    end
    local failures = {}
    for r = 1, #base do
      assert(base[r].name == other[r].name)
      if not comparable(base[r].name, exp_agrees, TIERS[i].threads) then goto next end
      assert(h.same_list(base[r].value:size(), other[r].value:size()), base[r].name .. ": different sizes")
      local want, got = {}, {}
      if not same_bits(base[r].value, other[r].value) then
        want, got = bits(base[r].value), bits(other[r].value)
      end
      for e = 1, #want do
        if want[e] ~= got[e] then
          failures[#failures + 1] = string.format("%s element %d: %s %s, %s %s", base[r].name, e,
                                                  TIERS[1].name, want[e], TIERS[i].name, got[e])
          break
        end
      end
      ::next::
    end
    assert(#failures == 0, #failures .. " results differ:\n" .. table.concat(failures, "\n", 1,
                                                                         math.min(#failures, 40)))
  end)
end

-- Sanity: the results are sums at all (not, say, all zero).
h.test("the compared results are the sums", function()
  for _, r in ipairs(outputs[1]) do
    if r.name == "f64[1000] sum()" then
      tensor.manual_seed(1000 + 5)
      local want = 0
      for _, v in ipairs(tensor.randn({1000}, {dtype = "f64"}):tolist()) do want = want + v end
      assert(math.abs(r.value:item() - want) < 1e-9, r.value:item() .. " vs " .. want)
      return
    end
  end
  error("no f64[1000] sum() result")
end)

h.done("test_reduce_bitwise")
