# test_interrupts.sh - Ctrl-C (SIGINT) while lazylua is inside a long C++
# call: a big graph on the reference interpreter, and a sync compile whose C
# compiler is slow. Lua's hook alone would stop them only when the call
# returns (seconds to minutes later); tensor/interrupt.h stops them at once.
# The bounds are generous (seconds) for a loaded machine: what the tests tell
# apart is "at once" from "after the whole graph or compile" (100 s here).
source "$(dirname "$0")/lib.sh" "$@"

# run_and_interrupt NAME READY_FILE BOUND ARGS...: runs lazylua in the
# background (the environment comes from the caller's exports), waits until
# READY_FILE exists (60 s at most), sends SIGINT half a second later and
# waits up to BOUND seconds for the process to end. Sets STATUS (or "hung",
# after which the process is killed) and ELAPSED_MS, from the signal to the
# end; the output is in WORK/run.stdout and WORK/run.stderr.
run_and_interrupt() {
  local name=$1 ready=$2 bound=$3
  shift 3
  rm -f "$WORK"/run.*
  "$LAZYLUA" "$@" </dev/null >"$WORK/run.stdout" 2>"$WORK/run.stderr" &
  local pid=$! waited=0
  until [ -e "$ready" ] || [ $waited -ge 600 ]; do
    sleep 0.1
    waited=$((waited + 1))
  done
  sleep 0.5
  local start
  start=$(date +%s%N)
  kill -INT $pid
  waited=0
  while alive $pid && [ $waited -lt $((bound * 100)) ]; do
    sleep 0.01
    waited=$((waited + 1))
  done
  ELAPSED_MS=$((($(date +%s%N) - start) / 1000000))
  if alive $pid; then
    kill -KILL $pid
    wait $pid
    STATUS=hung
  else
    wait $pid
    STATUS=$?
  fi
  echo "     $name: SIGINT to exit in $ELAPSED_MS ms"
}

# check CONDITION MESSAGE: records a failed expectation of the current case.
check() {
  if ! eval "$1"; then
    echo "  $2"
    ok=0
  fi
}

# alive PID: the process exists and is not a zombie.
alive() {
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) && [ "$state" != Z ]
}

show_output() {
  sed 's/^/    stdout: /' "$WORK/run.stdout"
  sed 's/^/    stderr: /' "$WORK/run.stderr"
}

# --- The reference interpreter: a first-run graph of 1200 big elementwise
# ops (LAZYLUA_COMPILE=off), about a minute on 2 cores when not stopped.
cat >"$WORK/reference.lua" <<EOF
local x = tensor.ones(50000000, {dtype = "f32"})
local y = x
for i = 1, 400 do y = (y * 1.0001 + 0.5):sqrt() end
io.open("$WORK/reference.ready", "w"):close()
print(y:sum():item())
EOF
cases=$((cases + 1))
ok=1
LAZYLUA_COMPILE=off run_and_interrupt "reference interpreter" "$WORK/reference.ready" 10 \
  "$WORK/reference.lua"
check '[ "$STATUS" = 1 ]' "exit status $STATUS, expected 1 within 10 s of SIGINT"
check 'grep -q "reference.lua:5: interrupted!" "$WORK/run.stderr"' \
  "stderr lacks 'reference.lua:5: interrupted!'"
check 'grep -q "stack traceback:" "$WORK/run.stderr"' "stderr lacks a traceback"
check '[ ! -s "$WORK/run.stdout" ]' "something was printed"
[ $ok = 1 ] || show_output
report_case "SIGINT stops a big graph on the reference interpreter" $ok "reference.lua"

# --- A sync compile (LAZYLUA_COMPILE=sync) with a C compiler that takes
# 100 s for the first graph it builds: SIGINT stops the compiler's process
# group, the sync raises "interrupted!" where the script synced, and the
# same graph compiles (now quickly) at the next sync. Nothing is left
# behind: no compiler process, no temporary file in the cache directory, no
# private build directory in TMPDIR.
cat >"$WORK/slowcc" <<'EOF'
#!/bin/sh
# A C compiler that is slow once: the first graph it builds (not the
# toolchain's probe) waits 100 s, so that SIGINT arrives during the build.
case " $* " in *" --version "*) exec cc "$@" ;; esac
source=$(cat)
if [ ! -e "$SLOW_MARKER" ] && ! printf '%s' "$source" | grep -q lazylua_probe; then
  : >"$SLOW_MARKER"
  sleep 100 &
  echo $! >"$SLOW_MARKER.sleep"
  wait
fi
printf '%s\n' "$source" | cc "$@"
EOF
chmod +x "$WORK/slowcc"
cat >"$WORK/compile.lua" <<'EOF'
local x = tensor.ones(1000)
local y = (x * 2 + 1):exp()
local ok, message = pcall(function() return y:sum():item() end)
print(ok, message)
print(y:sum():item() > 20000)
EOF

# sync_compile_case NAME CACHE_DIR: the case above with LAZYLUA_CACHE_DIR
# set to CACHE_DIR (a file instead of a directory: no disk cache, so the
# build happens in a private directory under TMPDIR).
sync_compile_case() {
  local name=$1 cache=$2
  cases=$((cases + 1))
  ok=1
  local marker=$WORK/slow.$cases
  mkdir -p "$WORK/tmp.$cases"
  LAZYLUA_COMPILE=sync LAZYLUA_CC=$WORK/slowcc LAZYLUA_CC_TIMEOUT=300 SLOW_MARKER=$marker \
    LAZYLUA_CACHE_DIR=$cache TMPDIR=$WORK/tmp.$cases \
    run_and_interrupt "$name" "$marker.sleep" 20 "$WORK/compile.lua"
  check '[ "$STATUS" = 0 ]' "exit status $STATUS, expected 0 within 20 s of SIGINT"
  check '[ "$(sed -n 1p "$WORK/run.stdout")" = "$(printf "false\t%s" "$WORK/compile.lua:3: interrupted!")" ]' \
    "the first sync did not raise 'compile.lua:3: interrupted!'"
  check '[ "$(sed -n 2p "$WORK/run.stdout")" = true ]' "the next sync did not work"
  check '! grep -q "compiling a graph failed" "$WORK/run.stderr"' \
    "the interrupted build was taken for a failed one"
  local sleeper
  sleeper=$(cat "$marker.sleep" 2>/dev/null)
  # (A zombie is dead: some init processes reap orphans late.)
  check '[ -n "$sleeper" ] && ! alive "$sleeper"' "the compiler's process group lives on"
  if [ -d "$cache" ]; then
    check '[ -z "$(find "$cache" -name "*.tmp*")" ]' "temporary files left in the cache: $(ls -a "$cache")"
  fi
  check '[ -z "$(ls -A "$WORK/tmp.$cases")" ]' "left in TMPDIR: $(ls -A "$WORK/tmp.$cases")"
  [ $ok = 1 ] || show_output
  report_case "$name" $ok "compile.lua"
}

sync_compile_case "SIGINT stops a sync compile (disk cache)" "$WORK/cache"
: >"$WORK/not_a_directory"
sync_compile_case "SIGINT stops a sync compile (private build directory)" "$WORK/not_a_directory"

finish
