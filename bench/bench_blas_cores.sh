#!/bin/bash
# bench_blas_cores.sh [LAZYLUA] - f32 matrix products (eager a:matmul(b), so
# each is one call into OpenBLAS split on lazylua's threads) with each
# OpenBLAS kernel set ("core") that fits x86-64 CPUs with AVX2 or AVX-512,
# at 1 and 2 threads, against the core lazylua picks itself. The runs are
# interleaved and each figure is the best of 3; the machine is shared, so
# read the ratios, not the rates. This is how tensor/blas.cpp's choice was
# made; rerun it on a new kind of machine.
#
#   bash bench/bench_blas_cores.sh build/lazylua
set -euo pipefail
lazylua=${1:-build/lazylua}
cores="Haswell Zen SkylakeX Cooperlake"
unset OPENBLAS_CORETYPE
export LAZYLUA_EAGER=1

# Prints "shape GFLOP/s" per line: A[m,k] @ B[k,n], with B or A transposed
# as the MLP's backward products are.
read -r -d '' chunk <<'LUA' || true
local now = require("progress").now
local shapes = {
  {"1024^3", 1024, 1024, 1024, false, false},
  {"128x784@784x256", 128, 784, 256, false, false},
  {"128x256@256x256", 128, 256, 256, false, false},
  {"784x128@128x256 (A^T)", 784, 128, 256, true, false},
  {"128x256@256x784 (B^T)", 128, 256, 784, false, true},
}
for _, s in ipairs(shapes) do
  local name, m, k, n, ta, tb = table.unpack(s)
  local a = ta and tensor.randn(k, m):t() or tensor.randn(m, k)
  local b = tb and tensor.randn(n, k):t() or tensor.randn(k, n)
  local calls = math.max(1, math.floor(4e8 / (2 * m * n * k)))
  local best = math.huge
  for _ = 1, 3 do
    local start = now()
    for _ = 1, calls do a:matmul(b) end
    best = math.min(best, (now() - start) / calls)
  end
  print(string.format("%s\t%.1f", name, 2 * m * n * k / best * 1e-9))
end
LUA

declare -A rate
for round in 1 2 3; do
  for threads in 1 2; do
    for core in lazylua $cores; do
      if [ "$core" = lazylua ]; then
        output=$(LAZYLUA_THREADS=$threads "$lazylua" -e "$chunk")
      else
        output=$(OPENBLAS_CORETYPE=$core LAZYLUA_THREADS=$threads "$lazylua" -e "$chunk")
      fi
      while IFS=$'\t' read -r shape gflops; do
        key="$threads|$core|$shape"
        if [ -z "${rate[$key]:-}" ] ||
          awk -v a="$gflops" -v b="${rate[$key]}" 'BEGIN { exit !(a > b) }'; then
          rate[$key]=$gflops
        fi
      done <<<"$output"
    done
  done
done

chosen=$("$lazylua" -e 'local c = tensor.config() print(c.blas_core .. " (" .. c.blas_core_source .. ")")')
echo "OpenBLAS core of lazylua's choice: $chosen; CPU: $("$lazylua" -e 'print(tensor.config().cpu)')"
echo "GFLOP/s of eager a:matmul(b), best of 3 interleaved rounds; ratio = core / lazylua's choice"
shapes=("1024^3" "128x784@784x256" "128x256@256x256" "784x128@128x256 (A^T)" "128x256@256x784 (B^T)")
for threads in 1 2; do
  echo "$threads thread(s):"
  for shape in "${shapes[@]}"; do
    line=$(printf '  %-24s lazylua %7.1f' "$shape" "${rate[$threads|lazylua|$shape]}")
    for core in $cores; do
      line+=$(awk -v c="$core" -v a="${rate[$threads|$core|$shape]}" \
        -v b="${rate[$threads|lazylua|$shape]}" 'BEGIN { printf "  %s %.2f", c, a / b }')
    done
    echo "$line"
  done
done
