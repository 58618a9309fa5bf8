-- bench_compile_scale.lua - how the cold compile time of one graph grows
-- with its size (issue 12): for N = 100, 1000, 10000, the compile seconds
-- (passes + fusion + codegen + the C compiler, tensor.metrics()) of
--   cat1d:  tensor.cat of N tensors of 4 elements;
--   cat2d:  tensor.cat of N 3x2 tensors along dim 2;
--   chain:  x = x + 1, N times, then x:sum();
--   step:   mark_step over N pending tensors t[i] = a * i;
--   sum:    acc = acc + inputs[i] over N distinct inputs;
--   distinct: N/10 reductions of distinct lengths (N/10 distinct kernels);
-- each in a fresh process with an empty cache directory, with the seconds
-- per 1000 nodes (flat when the growth is linear), the kernels run and the
-- distinct C functions compiled.
--
--   build/lazylua bench/bench_compile_scale.lua [N ...]

-- Builds one graph of `n` nodes and returns the tensors to sync (inputs
-- are synced first: they are data, not part of the graph timed).
local cases = {}
function cases.cat1d(n)
  local parts = {}
  for i = 1, n do parts[i] = tensor.randn(4) end
  tensor.mark_step()
  return {tensor.cat(parts)}
end
function cases.cat2d(n)
  local parts = {}
  for i = 1, n do parts[i] = tensor.randn(3, 2) end
  tensor.mark_step()
  return {tensor.cat(parts, 2)}
end
function cases.chain(n)
  local x = tensor.randn(1000)
  tensor.mark_step()
  for _ = 1, n do x = x + 1 end
  return {x:sum()}
end
function cases.step(n)
  local a = tensor.randn(16)
  tensor.mark_step()
  local results = {}
  for i = 1, n do results[i] = a * i end
  return results
end
function cases.sum(n)
  local inputs = {}
  for i = 1, n do inputs[i] = tensor.randn(16) end
  tensor.mark_step()
  local acc = inputs[1]
  for i = 2, n do acc = acc + inputs[i] end
  return {acc}
end
-- N/10 reductions of distinct lengths: each its own C function (as the
-- layers of a real model, of other shapes), so the C compiler's time
-- follows the functions and a large file compiles as parallel parts.
function cases.distinct(n)
  local results = {}
  for i = 1, n // 10 do
    local x = tensor.arange(1, i + 8):float()
    results[i] = (x * i + 1):tanh():sum()
  end
  return results
end
local order = {"cat1d", "cat2d", "chain", "step", "sum", "distinct"}

-- Child mode: one measurement, "compile_seconds nodes kernels functions".
if arg[1] == "--child" then
  local results = cases[arg[2]](tonumber(arg[3]))
  local before = tensor.metrics()
  tensor.mark_step()
  local after = tensor.metrics()
  assert(results[1]:size() ~= nil)
  print(string.format("%.6f %d %d %d", after.compile_seconds - before.compile_seconds,
    after.nodes_executed - before.nodes_executed, after.kernels, after.kernel_functions or -1))
  os.exit(0)
end

local program = arg[-1] or "lazylua"
local script = arg[0]
local sizes = {}
for i = 1, #arg do sizes[#sizes + 1] = tonumber(arg[i]) end
if #sizes == 0 then sizes = {100, 1000, 10000} end

local function child(case, n)
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. dir))
  local command = string.format(
    "LAZYLUA_COMPILE=sync LAZYLUA_CC_TIMEOUT=600 LAZYLUA_CACHE_DIR=%s %s %s --child %s %d",
    dir, program, script, case, n)
  local pipe = assert(io.popen(command))
  local text = pipe:read("*a")
  pipe:close()
  os.execute("rm -rf " .. dir)
  local seconds, nodes, kernels, functions = text:match("([%d%.]+) (%d+) (%d+) (%-?%d+)")
  if not seconds then error("measurement failed: " .. text) end
  return tonumber(seconds), tonumber(nodes), tonumber(kernels), tonumber(functions)
end

print("cold compile of one graph (fresh process, empty cache, LAZYLUA_COMPILE=sync):")
print(string.format("%-6s %6s %7s %10s %12s %8s %10s", "graph", "N", "nodes", "compile s",
  "s/1000 nodes", "kernels", "functions"))
for _, case in ipairs(order) do
  for _, n in ipairs(sizes) do
    local seconds, nodes, kernels, functions = child(case, n)
    print(string.format("%-6s %6d %7d %10.3f %12.4f %8d %10d", case, n, nodes, seconds,
      seconds / nodes * 1000, kernels, functions))
    io.stdout:flush()
  end
end
