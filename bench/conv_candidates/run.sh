#!/usr/bin/env bash
# run.sh - the candidate convolution libraries against lazylua's own kernels
# on every convolution layer of resnet18 and mobilenet_v2, side by side in
# one run, then the facts that decide an integration (ISA, threading,
# determinism, accuracy, an idle pool's cost). See README.md.
#
#   bench/conv_candidates/run.sh [> report.md]
#
# Environment: LAZYLUA (the binary; default build/lazylua of this checkout,
# else /work/main/build/lazylua), THREADS (2), BATCHES ("1 8"),
# BUDGET_MS (at least this much steady time per measurement; 300),
# PARTS ("table facts idle"), LAYERS (the layer list; layers.txt), STAT
# (median, or min: the fastest call, for a machine shared with other work).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
threads="${THREADS:-2}"
batches="${BATCHES:-1 8}"
budget="${BUDGET_MS:-300}"
parts="${PARTS:-table facts idle}"
export CONV_BENCH_STAT="${STAT:-median}"
lazylua="${LAZYLUA:-$root/build/lazylua}"
[ -x "$lazylua" ] || lazylua=/work/main/build/lazylua
# lazylua picks OpenBLAS's best core itself when the user has not chosen one.
unset OPENBLAS_CORETYPE
"$here/setup.sh" >&2
bench="$here/work/conv_bench"
layers="${LAYERS:-$here/layers.txt}"
results="$here/work/results-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$results"

echo "# Convolution candidates: lazylua, oneDNN, XNNPACK"
echo
echo "$(date -u '+%F %T') UTC; $(nproc) cores ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)); $threads threads; load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "lazylua: $lazylua (eager mode: the kernel alone); every time is the $CONV_BENCH_STAT of at least 7 steady calls and ${budget} ms, each call timed alone (after 2 warm-up calls)."

if [[ " $parts " == *" table "* ]]; then
  for batch in $batches; do
    # The three candidates, one process each, per batch, one after another.
    LAZYLUA_EAGER=1 LAZYLUA_THREADS="$threads" "$lazylua" "$here/lazylua_layers.lua" \
      "$layers" "$batch" "$budget" > "$results/lazylua_b$batch.tsv"
    "$bench" table "$layers" "$batch" "$threads" "$budget" onednn > "$results/onednn_b$batch.tsv"
    "$bench" table "$layers" "$batch" "$threads" "$budget" xnnpack > "$results/xnnpack_b$batch.tsv"
  done
  # shellcheck disable=SC2086
  /usr/bin/python3 "$here/report.py" "$layers" "$results" $batches
fi

if [[ " $parts " == *" facts "* ]]; then
  echo
  echo "## ISA and threading"
  echo
  echo '```'
  grep -E '^(resnet18 6|mobilenet_v2 7) ' "$layers" > "$results/two_layers.txt"
  ONEDNN_VERBOSE=1 "$bench" table "$results/two_layers.txt" 1 "$threads" 1 onednn 2>&1 |
    grep -E '^onednn_verbose,(info,cpu|exec,cpu,convolution)' | cut -d, -f1-7 | sort -u
  echo "libdnnl.so links: $(ldd "$(ldconfig -p | sed -n 's/.*libdnnl.so.2 .*=> //p' | head -1)" | grep -oE 'lib(gomp|omp|iomp5|tbb)[^ ]*' | sort -u | tr '\n' ' ')"
  echo '```'
  echo
  echo "## Determinism and accuracy (two processes; the digest must match)"
  echo
  echo '```'
  "$bench" facts "$layers" | tee "$results/facts1.txt"
  "$bench" facts "$layers" > "$results/facts2.txt"
  echo "second process: $(grep digest "$results/facts2.txt")"
  echo '```'
fi

if [[ " $parts " == *" idle "* ]]; then
  echo
  echo "## An idle pool's cost: a convolution, then 1 ms of other 2-thread work on a sleeping pool, repeated"
  echo
  echo '```'
  env -u OMP_WAIT_POLICY "$bench" idle "$layers" "$threads"
  echo '```'
  echo
  echo '```'
  OMP_WAIT_POLICY=passive "$bench" idle "$layers" "$threads"
  echo '```'
fi
echo
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); raw rows in $results"
