#!/usr/bin/env bash
# fuzz.sh - the differential fuzzer (tests/lua/test_fuzz_programs.lua) for
# longer hunts than CI's fixed seeds: N random programs, each replayed
# eagerly and lazily, once with graphs compiled in the background (most run
# interpreted) and once with LAZYLUA_COMPILE=sync (every graph compiled).
#
#   tools/fuzz.sh N [FIRST_SEED]     e.g. tools/fuzz.sh 500
#
# Program i has seed FIRST_SEED + i - 1 (FIRST_SEED is random unless given);
# a failing program replays alone with the command printed for it.
# Environment: LAZYLUA (the program; default build/lazylua, e.g.
# build-sanitize/lazylua), FUZZ_MODES (default "background sync"),
# FUZZ_BATCH (programs per process, default 50), FUZZ_TIMEOUT (seconds per
# process, default 900; a hang is a failure), FUZZ_FAMILY (only one of
# alias, autograd, scan, viewchain), FUZZ_MEMORY_KB (address space per process, default
# 8000000: a runaway fails instead of filling the machine; not applied to a
# build with AddressSanitizer, whose shadow memory needs terabytes of it).
set -u
cd "$(dirname "$0")/.."
root=$(pwd)
count=${1:?usage: tools/fuzz.sh N [FIRST_SEED]}
first=${2:-$(( (RANDOM << 15 | RANDOM) + 1 ))}
lazylua=${LAZYLUA:-$root/build/lazylua}
modes=${FUZZ_MODES:-background sync}
batch=${FUZZ_BATCH:-50}
limit=${FUZZ_TIMEOUT:-900}
memory=${FUZZ_MEMORY_KB:-8000000}
case $lazylua in /*) ;; *) lazylua=$root/$lazylua ;; esac
[ -x "$lazylua" ] || { echo "fuzz.sh: no program at $lazylua (build first, or set LAZYLUA)"; exit 2; }
if ldd "$lazylua" | grep libasan >/dev/null; then memory=unlimited; fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=()
echo "fuzz.sh: $count programs, seeds $first..$((first + count - 1)), modes: $modes, $lazylua"
start=$SECONDS
for mode in $modes; do
  for ((seed = first; seed < first + count; seed += batch)); do
    n=$(( first + count - seed < batch ? first + count - seed : batch ))
    log=$work/$mode-$seed
    (cd tests/lua && ulimit -v "$memory" && env LAZYLUA_COMPILE="$mode" LAZYLUA_CACHE_DIR="$work/cache" \
       LAZYLUA_FUZZ_SEED="$seed" LAZYLUA_FUZZ_PROGRAMS="$n" LAZYLUA_FUZZ_TRACE=1 \
       ${FUZZ_FAMILY:+LAZYLUA_FUZZ_FAMILY=$FUZZ_FAMILY} \
       timeout -k 10 "$limit" "$lazylua" test_fuzz_programs.lua) > "$log.out" 2> "$log.err"
    status=$?
    for bad in $(sed -n 's/^FUZZ FAIL seed=\([0-9]*\).*/\1/p' "$log.out"); do
      failed+=("$mode:$bad")
      echo "FAIL: seed $bad ($mode); replay: cd tests/lua && LAZYLUA_COMPILE=$mode" \
           "LAZYLUA_FUZZ_SEED=$bad LAZYLUA_FUZZ_PROGRAMS=1 $lazylua test_fuzz_programs.lua"
    done
    if [ $status -ne 0 ] && ! grep -q "^FUZZ FAIL" "$log.out"; then
      # a crash, a hang or a sanitizer report: the seed that was running
      last=$(sed -n 's/^fuzz: seed \([0-9]*\)$/\1/p' "$log.err" | tail -1)
      failed+=("$mode:${last:-?}")
      what=$([ $status -eq 124 ] && echo "timed out after ${limit}s" || echo "exited $status")
      echo "FAIL: seed ${last:-?} ($mode) $what; replay: cd tests/lua &&" \
           "LAZYLUA_COMPILE=$mode LAZYLUA_FUZZ_SEED=${last:-$seed} LAZYLUA_FUZZ_PROGRAMS=1" \
           "$lazylua test_fuzz_programs.lua"
      grep -v "^fuzz: seed" "$log.err" | tail -20
    fi
    echo "fuzz.sh: $mode, seeds $seed..$((seed + n - 1)) done ($((SECONDS - start)) s)"
  done
done
echo "fuzz.sh: $count programs x $(echo $modes | wc -w) modes in $((SECONDS - start)) s," \
     "${#failed[@]} failure(s)${failed[*]:+: ${failed[*]}}"
[ ${#failed[@]} -eq 0 ]
