#!/bin/bash
# bench_erf.sh [LAZYLUA] [LAZYLUA_BEFORE] - f32 erf, erfc, gelu and tanh on
# [197, 3072] (ViT-B's MLP activations at batch 1), compiled
# (LAZYLUA_COMPILE=sync), in ns per element; the exact-GELU pattern
# 0.5 x (1 + erf(x / sqrt 2)) written out; and a ViT-like MLP block
# (Linear 768 -> 3072, nn.GELU(), Linear 3072 -> 768, exported by PyTorch at
# opset 17, where GELU is Div, Erf, Add, Mul, Mul) imported from ONNX, in ms
# per call. Side by side: LAZYLUA, LAZYLUA_BEFORE (e.g. a build of main)
# when given, and PyTorch (2 threads) from /usr/bin/python3. Each figure is
# the best of 3 timed loops; the machine is shared, so read the ratios.
#
#   bash bench/bench_erf.sh build/lazylua ../main/build/lazylua
set -euo pipefail
lazylua=${1:-build/lazylua}
before=${2:-}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

cat > "$dir/torch_part.py" <<'PY'
import sys, time, torch
torch.set_num_threads(2)
torch.manual_seed(0)
mlp = torch.nn.Sequential(torch.nn.Linear(768, 3072), torch.nn.GELU(), torch.nn.Linear(3072, 768)).eval()
torch.onnx.export(mlp, torch.randn(197, 768), sys.argv[1] + "/mlp.onnx", opset_version=17,
                  do_constant_folding=True, input_names=["x"], output_names=["y"])
def best(f):
    f()
    times = []
    for _ in range(3):
        calls, start = 0, time.perf_counter()
        while True:
            f(); calls += 1
            if time.perf_counter() - start > 0.3: break
        times.append((time.perf_counter() - start) / calls)
    return min(times)
x = torch.randn(197, 3072)
n = x.numel()
with torch.no_grad():
    for name, f in [("erf", torch.erf), ("erfc", torch.erfc), ("gelu", torch.nn.functional.gelu),
                    ("tanh", torch.tanh),
                    ("pattern", lambda x: x * 0.5 * (torch.erf(x / 1.4142135623730951) + 1))]:
        print("%s\t%.3f" % (name, best(lambda: f(x)) / n * 1e9))
    h = torch.randn(197, 768)
    print("mlp\t%.3f" % (best(lambda: mlp(h)) * 1e3))
PY

cat > "$dir/lazylua_part.lua" <<'LUA'
local now = require("progress").now
local onnx = require "onnx"
local function best(f)
  tensor.sync(f())  -- compiles
  local times = {}
  for k = 1, 3 do
    local calls, start = 0, now()
    repeat
      tensor.sync(f())
      calls = calls + 1
    until now() - start > 0.3
    times[k] = (now() - start) / calls
  end
  return math.min(table.unpack(times))
end
tensor.manual_seed(1)
local x = tensor.randn(197, 3072)
tensor.sync(x)
local n = x:numel()
for _, name in ipairs({"erf", "erfc", "gelu", "tanh"}) do
  print(string.format("%s\t%.3f", name, best(function() return x[name](x) end) / n * 1e9))
end
print(string.format("pattern\t%.3f", best(function() return x * 0.5 * ((x / math.sqrt(2)):erf() + 1) end) / n * 1e9))
local model = onnx.load(arg[1])
local h = tensor.randn(197, 768)
tensor.sync(h)
print(string.format("mlp\t%.3f", best(function() return model(h) end) * 1e3))
LUA

/usr/bin/python3 "$dir/torch_part.py" "$dir" > "$dir/torch.txt"
LAZYLUA_COMPILE=sync "$lazylua" "$dir/lazylua_part.lua" "$dir/mlp.onnx" > "$dir/after.txt"
if [ -n "$before" ]; then
  LAZYLUA_COMPILE=sync "$before" "$dir/lazylua_part.lua" "$dir/mlp.onnx" > "$dir/before.txt"
else
  : > "$dir/before.txt"
fi

awk -F'\t' -v has_before="$before" '
  FILENAME ~ /torch/ { torch[$1] = $2; order[++n] = $1 }
  FILENAME ~ /after/ { after[$1] = $2 }
  FILENAME ~ /before/ { before[$1] = $2 }
  END {
    printf "%-9s %12s %12s %12s %14s %14s\n", "", "before", "after", "PyTorch", "before/after", "PyTorch/after"
    for (i = 1; i <= n; i++) {
      k = order[i]; unit = (k == "mlp") ? "ms/call" : "ns/elem"
      b = (k in before) ? sprintf("%.2f", before[k]) : "-"
      r = (k in before) ? sprintf("%.1fx", before[k] / after[k]) : "-"
      printf "%-9s %12s %12.2f %12.2f %14s %13.2fx  (%s)\n", k, b, after[k], torch[k], r, torch[k] / after[k], unit
    }
    print "erf, erfc, gelu, tanh, pattern: [197, 3072] f32; mlp: [197, 768] through Linear 768->3072, GELU, Linear 3072->768 from ONNX"
  }' "$dir/torch.txt" "$dir/after.txt" "$dir/before.txt"
