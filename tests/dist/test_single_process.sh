#!/usr/bin/env bash
# test_single_process.sh - dist without mpirun (single.lua): size 1, rank
# 0, not initialized, every collective the identity, no MPI started, in
# every mode, with no launcher variable set, and quickly; then the same
# script as a 1-rank mpirun job.
#   bash test_single_process.sh LAZYLUA MPIEXEC
set -u
source "$(dirname "$0")/lib.sh"
# Whatever launched ctest, this process is no rank of a job.
for name in $(env | grep -oE '^(OMPI|PMIX|PMI)_[A-Za-z0-9_]*' | grep -v '^OMPI_ALLOW_RUN_AS_ROOT'); do
  unset "$name"
done
for mode in $modes; do
  start=$(date +%s%N)
  out=$(env $(mode_env "$mode") timeout 30 "$lazylua" "$here/single.lua" 2>&1)
  status=$?
  milliseconds=$((($(date +%s%N) - start) / 1000000))
  if [ $status -ne 0 ] || [ "$out" != "single: ok (no launcher)" ]; then
    fail "without a launcher, $mode mode (status $status): $out"
  # A hang guard, not a speed test: MPI_Init's wait for a launcher that is
  # not there would take far longer.
  elif [ $milliseconds -gt 10000 ]; then
    fail "without a launcher, $mode mode took $milliseconds ms"
  else
    echo "single.lua without a launcher: ok, $mode ($milliseconds ms)"
  fi
done
run_ranks 1 lazy single.lua launched
if [ $status -ne 0 ] || ! grep -q "^single: ok (mpirun -np 1)" <<<"$out"; then
  fail "as a 1-rank job (status $status): $out"
else
  echo "single.lua as a 1-rank job: ok"
fi
finish
