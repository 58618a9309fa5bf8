#!/usr/bin/env bash
# test_failure.sh - when one rank dies (SIGKILL from itself or from outside,
# an uncaught Lua error, os.exit(3), dist.abort(4)) or ends early (its
# script returns, os.exit(0)) while the others wait in a collective
# (failure.lua), the whole job ends within seconds with a non-zero status,
# the failing rank's reason and the survivors' "stopped by the MPI
# launcher". A collective only rank 0 reads, at the end, works. The 20 s bound is a hang guard, not a speed test (the
# job ends in about a second here); `timeout 60` stops a hung job.
#   bash test_failure.sh LAZYLUA MPIEXEC
set -u
source "$(dirname "$0")/lib.sh"
bound_ms=20000
need_survivor=yes

# job RANKS MODE CASE: runs failure.lua; $out, $status and $ms (wall time).
job() {
  local ranks=$1 mode=$2 case=$3
  local start=$(date +%s%N)
  run_ranks "$ranks" "$mode" failure.lua "$case" "$work/pid"
  ms=$((($(date +%s%N) - start) / 1000000))
}

# check WHAT EXPECTED_STATUS TEXT...: the job ended in time, with that
# status ("nonzero": any but 0) and every TEXT in its output; no survivor
# got through the collective.
check() {
  local what=$1 want=$2
  shift 2
  local problems=()
  if [ $status -eq 124 ]; then problems+=("hung (stopped by timeout after 60 s)"); fi
  if [ "$want" = nonzero ]; then
    [ $status -ne 0 ] || problems+=("status 0")
  elif [ $status -ne "$want" ]; then
    problems+=("status $status, expected $want")
  fi
  [ $ms -lt $bound_ms ] || problems+=("took $ms ms (bound $bound_ms)")
  for text in "$@"; do
    grep -qF -- "$text" <<<"$out" || problems+=("no '$text' in the output")
  done
  if grep -q "passed the collective" <<<"$out"; then problems+=("a rank got through the collective"); fi
  # A survivor (any rank but 1) says why it stopped. Open MPI may drop the
  # last output of some ranks when it ends a job, so one of them suffices.
  # (Where rank 1 ends early, rank 0 fails too, with the handshake's error.)
  if [ "$need_survivor" = yes ] && ! grep -qE "^lazylua: rank [^1] of [0-9]+: stopped by the MPI launcher \(another rank failed, or the job was stopped\)" <<<"$out"; then
    problems+=("no survivor said it was stopped by the MPI launcher")
  fi
  if [ ${#problems[@]} -ne 0 ]; then
    fail "$what: $(IFS=';'; echo "${problems[*]}")"
    echo "$out" | head -40
  else
    echo "$what: ok (status $status, $ms ms)"
  fi
}

for ranks in 2 3; do
  for mode in lazy eager; do
    job $ranks $mode kill_self
    check "$ranks ranks, $mode: rank 1 kills itself (SIGKILL)" nonzero "rank 1 ready" \
      "process rank 1" "signal 9"

    job $ranks $mode lua_error
    check "$ranks ranks, $mode: uncaught Lua error on rank 1" nonzero \
      "failure.lua" "attempt to index a nil value (field 'missing_field')"

    # (Open MPI's "MPI_ABORT was invoked" notice is sometimes lost: the
    # status is the evidence.)
    job $ranks $mode os_exit
    check "$ranks ranks, $mode: os.exit(3) on rank 1" 3

    job $ranks $mode abort
    check "$ranks ranks, $mode: dist.abort(4) on rank 1" 4

    # Ending normally with a collective still to make: the exit handshake
    # (tensor/collectives.cpp) names it instead of waiting forever.
    need_survivor=no
    job $ranks $mode return_early
    check "$ranks ranks, $mode: rank 1's script ends while rank 0 waits" nonzero \
      "rank 1 does no more collectives (its script ended)"
    job $ranks $mode exit_zero
    check "$ranks ranks, $mode: os.exit(0) on rank 1 while rank 0 waits" nonzero \
      "rank 1 does no more collectives (its script ended)"
    need_survivor=yes

    # A result only rank 0 reads, at the very end: every rank runs it.
    job $ranks $mode read_on_rank_0
    if [ $status -ne 0 ] || ! grep -q "^rank 0 reads $((2 * ranks * (ranks + 1) / 2))\$" <<<"$out"; then
      fail "$ranks ranks, $mode: a collective read on rank 0 only (status $status, $ms ms):"
      echo "$out" | head -20
    else
      echo "$ranks ranks, $mode: a collective read on rank 0 only at the end: ok ($ms ms)"
    fi
  done
done

# Killed from outside: the driver sends SIGKILL to rank 1 while rank 0
# waits for it; the job must end within the bound from the kill.
rm -f "$work/pid"
( env LAZYLUA_COMPILE=background timeout 60 "$mpiexec" --oversubscribe -np 2 "$lazylua" \
    "$here/failure.lua" killed_by_driver "$work/pid" >"$work/out" 2>&1
  echo $? >"$work/status" ) &
launcher=$!
for _ in $(seq 100); do
  [ -s "$work/pid" ] && break
  sleep 0.1
done
if [ ! -s "$work/pid" ]; then
  fail "killed from outside: rank 1 never wrote its pid"
  wait $launcher
else
  start=$(date +%s%N)
  kill -9 "$(cat "$work/pid")"
  wait $launcher
  ms=$((($(date +%s%N) - start) / 1000000))
  status=$(cat "$work/status")
  out=$(cat "$work/out")
  check "2 ranks: rank 1 killed by another process (SIGKILL)" nonzero "process rank 1" "signal 9"
fi
finish
