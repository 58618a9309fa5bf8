-- test_compile_parts.lua - one graph of 24 distinct kernels (one per
-- length, so no two share a C function): under LAZYLUA_COMPILE=sync its
-- source is large enough to be compiled as parts in parallel
-- (compiler/toolchain.h split_source), and every kernel, whichever part it
-- landed in, must give the value computed here by hand, in every mode.
local KERNELS = 24
local results = {}
for n = 1, KERNELS do
  -- sum over i = 1..n of (i * n + 1) = n * n(n+1)/2 + n, exact in f32 here
  local x = tensor.arange(1, n + 1):float()
  results[n] = (x * n + 1):sum()
end
tensor.mark_step()  -- one graph with all 24 reductions
for n = 1, KERNELS do
  local want = n * n * (n + 1) / 2 + n
  local got = results[n]:item()
  assert(got == want, string.format("kernel of length %d: %s, want %s", n, got, want))
end
if os.getenv("LAZYLUA_COMPILE") == "sync" and os.getenv("LAZYLUA_EAGER") ~= "1" then
  local metrics = tensor.metrics()
  assert(metrics.native_runs >= 1, "the graph ran natively")
  assert(metrics.kernel_functions >= KERNELS,
    "distinct kernels: " .. tostring(metrics.kernel_functions))
end
print("ok")
