#!/usr/bin/env bash
# run.sh [model...] - the real-model suite: lazylua against PyTorch eager and ONNX
# Runtime on models PyTorch exports (export.py), at batch 1 and 8, from opset 13 and 17
# files, and (resnet18_training) a training step of resnet18 (batch 8) through the
# imported model. Prints one table (report.py). Without arguments, every model of
# export.py and the training step.
#
# Each measurement is a process of its own (run_lazylua.lua, run_torch.py, run_ort.js);
# for each model and batch the three run back to back, so that the noise of a shared
# machine hits all three. PyTorch does not read the ONNX files: it runs once per model
# and batch, and its figures stand in both opsets' rows. lazylua starts each run on an
# empty LAZYLUA_CACHE_DIR: "native by call" is the first call that ran native code only.
#
# Environment: LAZYLUA (the binary, default build/lazylua), BUDGET (seconds of calls per
# run, default 15), OPSETS (default "13 17"), BATCHES (default "1 8"), RUN_TIMEOUT
# (seconds a run may take, default 900), MEMORY_LIMIT_MB (address space of each run,
# default 16000: a run that would take the machine down fails with its error instead).
# The files and the raw results (work/results-*.jsonl) go to bench/models/work/.
#
# OPENBLAS_CORETYPE is unset for every run: each program then runs the OpenBLAS kernels it
# picks for this CPU (lazylua chooses its core itself, `lazylua -v` names it), not a core
# some shell profile forced on all of them. Set BENCH_OPENBLAS_CORETYPE to force one.
set -uo pipefail
unset OPENBLAS_CORETYPE
if [ -n "${BENCH_OPENBLAS_CORETYPE:-}" ]; then export OPENBLAS_CORETYPE=$BENCH_OPENBLAS_CORETYPE; fi
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
LAZYLUA=${LAZYLUA:-$ROOT/build/lazylua}
case $LAZYLUA in /*) ;; *) LAZYLUA=$PWD/$LAZYLUA ;; esac
BUDGET=${BUDGET:-15}
OPSETS=${OPSETS:-"13 17"}
BATCHES=${BATCHES:-"1 8"}
RUN_TIMEOUT=${RUN_TIMEOUT:-900}
MEMORY_LIMIT_MB=${MEMORY_LIMIT_MB:-16000}
WORK=$HERE/work
PYTHON=/usr/bin/python3
# The longest last: on a busy machine, RUN_TIMEOUT cuts them, not the rest.
# resnet18_training is the training step on resnet18's files.
ALL_MODELS=(squeezenet1_1 resnet18 resnet18_training shufflenet_v2_x1_0 transformer_encoder gru
            lstm mobilenet_v2 efficientnet_b0 vit_b_16 deeplabv3_resnet50)

if [ ! -x "$LAZYLUA" ]; then echo "run.sh: no lazylua binary at $LAZYLUA (set LAZYLUA)" >&2; exit 1; fi
models=("$@")
if [ ${#models[@]} -eq 0 ]; then models=("${ALL_MODELS[@]}"); fi

"$HERE/setup.sh" || exit 1
mkdir -p "$WORK"
models_list=$(IFS=,; echo "${models[*]}")
opsets_list=$(echo $OPSETS | tr ' ' ,)
batches_list=$(echo $BATCHES | tr ' ' ,)
if [[ " ${models[*]} " == *" resnet18"* && ",$batches_list," != *",8,"* ]]; then
  batches_list=$batches_list,8  # the training step's batch
fi
RESULTS=$WORK/results-$(date +%Y%m%d-%H%M%S).jsonl
load_at_start=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date +%s)
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/lazylua_models.XXXXXX")
trap 'rm -rf "$SCRATCH"' EXIT

# measure RUNNER MODE MODEL OPSET BATCH COMMAND...: runs one measurement under the time
# and memory limits and appends "RUNNER<TAB>{json}" to RESULTS; a run that died reports
# its status and the last line of its stderr as its error.
measure() {
  local runner=$1 mode=$2 model=$3 opset=$4 batch=$5
  shift 5
  echo "run.sh: $(date +%T) $runner $mode $model opset $opset batch $batch" >&2
  (ulimit -v $((MEMORY_LIMIT_MB * 1024)); exec timeout --kill-after=10 "$RUN_TIMEOUT" "$@") \
    >"$SCRATCH/out" 2>"$SCRATCH/err" </dev/null
  local status=$?
  local line
  line=$(grep -m1 '^RESULT ' "$SCRATCH/out" | cut -c8-)
  if [ -z "$line" ]; then
    local reason="exit status $status"
    if [ $status = 124 ] || [ $status = 137 ]; then reason="timed out after ${RUN_TIMEOUT} s"; fi
    line=$("$PYTHON" -c 'import json, sys; m, n, o, b, e = sys.argv[1:]; print(json.dumps(
      {"mode": m, "model": n, "opset": int(o), "batch": int(b), "error": e}))' \
      "$mode" "$model" "$opset" "$batch" "$reason$(grep -v '^\s*$' "$SCRATCH/err" | tail -n 1 | sed 's/^/: /')")
  fi
  printf '%s\t%s\n' "$runner" "$line" >>"$RESULTS"
}

lazylua_run() {  # MODE NAME OPSET BATCH: on an empty cache
  rm -rf "$SCRATCH/cache"
  mkdir "$SCRATCH/cache"
  LAZYLUA_CACHE_DIR=$SCRATCH/cache LAZYLUA_PROGRESS=0 \
    measure lazylua "$1" "$2" "$3" "$4" "$LAZYLUA" "$HERE/run_lazylua.lua" "$1" "$WORK" "$2" "$3" "$4" "$BUDGET"
}

# exported MODEL: whether WORK has all of MODEL's files (importing torch to find out
# takes seconds).
exported() {
  local file
  for file in "$1.pt" $(for o in $OPSETS; do echo "$1_op$o.onnx"; done) \
      $(for b in ${batches_list//,/ }; do echo "$1_x$b.npy $1_y$b.npy $1_f64_y$b.npy"; done); do
    [ -f "$WORK/$file" ] || return 1
  done
  if [ "$1" = resnet18 ] && [ ! -f "$WORK/resnet18_t8.npy" ]; then return 1; fi
}

for entry in "${models[@]}"; do
  model=${entry%_training}
  # Exported just before it is measured: a model PyTorch cannot export has an error in
  # its row, and the others go on.
  if ! exported "$model"; then
    echo "run.sh: $(date +%T) exporting $model" >&2
    timeout "$RUN_TIMEOUT" "$PYTHON" "$HERE/export.py" "$WORK" --models "$model" \
      --opsets "$opsets_list" --batches "$batches_list" --f64 2>"$SCRATCH/export.err"
    status=$?
    if [ $status != 0 ]; then
      reason="exit status $status"
      if [ $status = 124 ]; then reason="timed out after $RUN_TIMEOUT s"; fi
      line=$("$PYTHON" -c 'import json, sys; print(json.dumps({"model": sys.argv[1], "error": sys.argv[2]}))' \
        "$model" "export.py: $reason$(grep -v '^\s*$' "$SCRATCH/export.err" | tail -n 1 | sed 's/^/: /')")
      printf 'export\t%s\n' "$line" >>"$RESULTS"
      continue
    fi
  fi
  if [ "$entry" = resnet18_training ]; then
    training_opset=${OPSETS##* }
    lazylua_run train resnet18 "$training_opset" 8
    measure torch train resnet18 "$training_opset" 8 "$PYTHON" "$HERE/run_torch.py" train "$WORK" resnet18 8 "$BUDGET"
    continue
  fi
  for batch in $BATCHES; do
    torch_done=0
    for opset in $OPSETS; do
      lazylua_run infer "$model" "$opset" "$batch"
      if [ $torch_done = 0 ]; then
        measure torch infer "$model" "$opset" "$batch" \
          "$PYTHON" "$HERE/run_torch.py" infer "$WORK" "$model" "$batch" "$BUDGET"
        torch_done=1
      fi
      measure ort infer "$model" "$opset" "$batch" node "$HERE/run_ort.js" "$WORK" "$model" "$opset" "$batch" "$BUDGET"
    done
  done
done
echo "run.sh: raw results in $RESULTS" >&2
"$PYTHON" "$HERE/report.py" "$RESULTS"
echo "$(nproc) cores; load average $load_at_start at the start, $(cut -d' ' -f1-3 /proc/loadavg)" \
  "at the end; $(( $(date +%s) - started )) s; BUDGET=$BUDGET OPSETS='$OPSETS' BATCHES='$BATCHES'"
echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'); lazylua's$("$LAZYLUA" -v | sed -n 's/^tensors:/ tensors:/p')"
