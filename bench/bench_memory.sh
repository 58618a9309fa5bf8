#!/bin/bash
# bench_memory.sh [LAZYLUA [BEFORE_LAZYLUA]] - peak resident memory (VmHWM) of
# ViT-B/16 inference at batch 1 and 8 (torchvision, weights=None, exported
# by PyTorch at opset 13, run through onnx.load) and of a training step of a
# 4-layer transformer encoder written in Lua, in lazylua's three modes
# (LAZYLUA_COMPILE=sync, the default background compile, LAZYLUA_EAGER=1),
# next to PyTorch eager's peak for the same model, all in one run. "load"
# is the peak while the model is read or built; "run" the peak while it
# runs (bench_memory.lua resets the high-water mark in between). With
# BEFORE_LAZYLUA, another build's run peak is shown too (e.g. the main
# branch's, to show a change).
#
#   bash bench/bench_memory.sh build/lazylua /work/main/build/lazylua
#
# Environment: CALLS (ViT calls per process, 3), STEPS (training steps, 3),
# WORKLOADS (default "vit1 vit8 transformer"), BENCH_DIR (where vit.onnx is
# kept; a temporary folder by default).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
lazylua=$(realpath "${1:-build/lazylua}")
before=${2:+$(realpath "$2")}
calls=${CALLS:-3}
steps=${STEPS:-3}
workloads=${WORKLOADS:-"vit1 vit8 transformer"}
dir=${BENCH_DIR:-$(mktemp -d)}
python=/usr/bin/python3
# A model this size takes a while to compile on a loaded 2-core machine.
export LAZYLUA_CC_TIMEOUT=${LAZYLUA_CC_TIMEOUT:-900} OMP_WAIT_POLICY=passive

if [[ $workloads == *vit* && ! -s $dir/vit.onnx ]]; then
  "$python" -c 'import torchvision' 2>/dev/null ||
    { echo "bench_memory.sh: needs torchvision (apt-get install python3-torchvision)" >&2; exit 1; }
  "$python" "$here/bench_memory_torch.py" export "$dir/vit.onnx" 2>/dev/null
fi

arguments() {  # arguments WORKLOAD: bench_memory's arguments for it
  case $1 in
    vit1) echo "vit $dir/vit.onnx 1 $calls" ;;
    vit8) echo "vit $dir/vit.onnx 8 $calls" ;;
    transformer) echo "transformer $steps" ;;
  esac
}
field() { awk -v key="$1" '$1 == key { print $2 }'; }
run_lazylua() {  # run_lazylua BINARY MODE WORKLOAD: "load run" in MB
  local environment=()
  case $2 in
    sync) environment=(LAZYLUA_COMPILE=sync) ;;
    default) environment=() ;;
    eager) environment=(LAZYLUA_EAGER=1) ;;
  esac
  local output
  # shellcheck disable=SC2046
  output=$(cd "$here" && env "${environment[@]}" "$1" bench_memory.lua $(arguments "$3") 2>&1) ||
    { echo "- -"; echo "$output" >&2; return; }
  echo "$(field load_mb <<<"$output") $(field run_mb <<<"$output")"
}

printf '%-12s %-8s %10s %10s %12s %10s %10s %8s\n' workload mode "load MB" "run MB" \
  "before run" "torch load" "torch run" "run/torch"
for workload in $workloads; do
  # shellcheck disable=SC2046
  torch=$(cd "$here" && "$python" bench_memory_torch.py $(arguments "$workload" | sed "s| $dir/vit.onnx||") 2>&1)
  torch_load=$(field load_mb <<<"$torch")
  torch_run=$(field run_mb <<<"$torch")
  for mode in sync default eager; do
    read -r load run <<<"$(run_lazylua "$lazylua" "$mode" "$workload")"
    old=-
    if [[ -n $before ]]; then read -r _ old <<<"$(run_lazylua "$before" "$mode" "$workload")"; fi
    ratio=$(awk -v a="$run" -v b="$torch_run" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }')
    printf '%-12s %-8s %10s %10s %12s %10s %10s %8s\n' "$workload" "$mode" "$load" "$run" "$old" \
      "${torch_load:--}" "${torch_run:--}" "$ratio"
  done
done
