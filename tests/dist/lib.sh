# lib.sh - sourced by the tests/dist drivers: runs a Lua script of this
# folder as a job of N ranks on localhost, under a time bound.
#   source lib.sh LAZYLUA MPIEXEC
# Open MPI refuses to run as root without these two (containers, CI).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# A rank waiting in a collective yields its core instead of spinning on
# it (3 ranks share 2 cores).
export OMPI_MCA_mpi_yield_when_idle=1
# Under the sanitizer build (.ci/run): Open MPI's components allocate at
# MPI_Init and are unloaded before exit, so their memory shows as leaks with
# no frames to name; leak checking is off for the ranks (every other ASan
# check stays on; the one-rank paths are leak-checked by the Lua tests).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
lazylua=$1
mpiexec=${2:-mpirun}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# One compile cache for the driver's runs: the compiled mode builds each
# graph once (ranks share the cache: entries are written atomically).
export LAZYLUA_CACHE_DIR=${LAZYLUA_CACHE_DIR:-$work/cache}
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# The four ways a graph can run: lazy with background compiles (the
# default), every graph compiled first, every graph interpreted, eager.
modes="lazy compiled interpreted eager"
mode_env() {  # mode_env MODE -> the env assignments for that mode
  case $1 in
    lazy) echo "LAZYLUA_COMPILE=background" ;;
    compiled) echo "LAZYLUA_COMPILE=sync" ;;
    interpreted) echo "LAZYLUA_COMPILE=off" ;;
    eager) echo "LAZYLUA_EAGER=1" ;;
  esac
}

# run_ranks N MODE SCRIPT [ARGS...]: output in $out, status in $status. The
# `timeout` is the hang guard: a job that deadlocks fails instead of
# blocking ctest.
run_ranks() {
  local ranks=$1 mode=$2 script=$3
  shift 3
  out=$(env $(mode_env "$mode") timeout 60 "$mpiexec" --oversubscribe -np "$ranks" \
    "$lazylua" "$here/$script" "$@" 2>&1)
  status=$?
}

# run_everywhere SCRIPT EXPECTED_LINE: on 2 and 3 ranks in every mode, the
# job succeeds and rank 0 prints the line ("... ok on N ranks (MODE)").
run_everywhere() {
  local script=$1 name=$2
  for ranks in 2 3; do
    for mode in $modes; do
      run_ranks "$ranks" "$mode" "$script"
      if [ $status -ne 0 ] || ! grep -q "^$name: ok on $ranks ranks" <<<"$out"; then
        fail "$script on $ranks ranks, $mode mode (status $status):"
        echo "$out" | head -40
      else
        echo "$script: ok on $ranks ranks, $mode"
      fi
    done
  done
}

finish() {
  if [ $failures -ne 0 ]; then
    echo "$failures failure(s)"
    exit 1
  fi
  echo "all passed"
}
