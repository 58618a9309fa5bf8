# lib.sh - helpers for the command-line tests, sourced by each test_*.sh.
#
# The tests are differential: each case runs the stock lua5.4 and lazylua
# with the same arguments, environment and stdin, then compares stdout,
# stderr and the exit status. Before comparing, lazylua's own lines (the
# extra first two lines of -v: its version, what the tensors run on) are
# dropped, the program names are unified (lazylua runs with argv[0] =
# "lazylua", lua5.4 with argv[0] = "lua5.4") and addresses such as
# "table: 0x55d0..." are masked.
#
# Usage in a test: source lib.sh "$@"; same_as_lua NAME [options] -- ARGS...;
# finish. Options: --input TEXT (stdin), --stdin FILE, --env NAME=VALUE.
set -u

LAZYLUA=${1:?usage: bash test_X.sh /path/to/lazylua}
case $LAZYLUA in /*) ;; *) LAZYLUA=$PWD/$LAZYLUA ;; esac
REFERENCE_LUA=${REFERENCE_LUA:-/usr/bin/lua5.4}
if [ ! -x "$REFERENCE_LUA" ]; then echo "lua5.4 not found at $REFERENCE_LUA" >&2; exit 1; fi
if [ ! -x "$LAZYLUA" ]; then echo "lazylua not found at $LAZYLUA" >&2; exit 1; fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/lazylua_cli_test.XXXXXX")
# Only this shell cleans up: a forked child of it (which may briefly carry
# the trap before it execs a command) must never remove WORK.
MAIN_SHELL=$BASHPID
trap '[ "$BASHPID" = "$MAIN_SHELL" ] && rm -rf "$WORK"' EXIT
# Nothing from the caller's environment may change what either program does.
unset LUA_INIT LUA_INIT_5_4 LUA_PATH LUA_PATH_5_4 LUA_CPATH LUA_CPATH_5_4 INPUTRC
unset LAZYLUA_DEBUG LAZYLUA_EAGER
export HOME=$WORK LAZYLUA_HISTORY=
export LAZYLUA_CACHE_DIR=$WORK/cache

failures=0
cases=0
VERSION_LINE_PATTERN='^lazylua [0-9][^ ]* \(lazy tensors for Lua\)$'
CONFIG_LINE_PATTERN='^tensors: [0-9]+ threads?, '

# run_program ARGV0 BINARY OUTPUT_PREFIX INPUT ARGS...: runs one program,
# saving .stdout, .stderr and .status. Uses the caller's env_settings array.
run_program() {
  local argv0=$1 binary=$2 output=$3 input=$4
  shift 4
  # A fresh bash (not a subshell of this one, which would carry our EXIT
  # trap) sets argv[0] and execs the program.
  env ${env_settings[@]+"${env_settings[@]}"} bash -c 'exec -a "$0" "$@"' "$argv0" "$binary" "$@" \
    <"$input" >"$output.stdout" 2>"$output.stderr"
  echo $? >"$output.status"
}

mask_addresses() { sed -E 's/0x[0-9a-fA-F]+/0xADDR/g' "$1" >"$1.masked" && mv "$1.masked" "$1"; }

# compare_file LABEL EXPECTED ACTUAL [EXPECTED_NAME]: prints a diff, returns 1 on difference.
compare_file() {
  if ! cmp -s "$2" "$3"; then
    echo "  $1 differs (--- ${4:-lua5.4}, +++ lazylua):"
    diff -u --label "${4:-lua5.4}" --label lazylua "$2" "$3" | sed 's/^/    /'
    return 1
  fi
}

same_as_lua() {
  local name=$1
  shift
  local input=/dev/null
  local -a env_settings=()
  while [ $# -gt 0 ]; do
    case $1 in
      --input) printf '%s' "$2" >"$WORK/input"; input=$WORK/input; shift 2 ;;
      --stdin) input=$2; shift 2 ;;
      --env) env_settings+=("$2"); shift 2 ;;
      --) shift; break ;;
      *) echo "same_as_lua: bad option $1" >&2; exit 2 ;;
    esac
  done
  cases=$((cases + 1))
  run_program lua5.4 "$REFERENCE_LUA" "$WORK/expected" "$input" "$@"
  run_program lazylua "$LAZYLUA" "$WORK/actual" "$input" "$@"
  if head -n 1 "$WORK/actual.stdout" | grep -Eq "$VERSION_LINE_PATTERN"; then
    # The version line, and the line on what the tensors run on after it.
    local lazylua_lines=1
    if sed -n 2p "$WORK/actual.stdout" | grep -Eq "$CONFIG_LINE_PATTERN"; then lazylua_lines=2; fi
    tail -n +$((lazylua_lines + 1)) "$WORK/actual.stdout" >"$WORK/actual.trimmed"
    mv "$WORK/actual.trimmed" "$WORK/actual.stdout"
  fi
  sed -i 's/lazylua/lua5.4/g' "$WORK/actual.stdout" "$WORK/actual.stderr"
  local file
  for file in expected.stdout expected.stderr actual.stdout actual.stderr; do
    mask_addresses "$WORK/$file"
  done
  local ok=1
  compare_file stdout "$WORK/expected.stdout" "$WORK/actual.stdout" || ok=0
  compare_file stderr "$WORK/expected.stderr" "$WORK/actual.stderr" || ok=0
  compare_file "exit status" "$WORK/expected.status" "$WORK/actual.status" || ok=0
  report_case "$name" $ok "$*"
}

# same_as_lua_interrupted NAME -- ARGS...: like same_as_lua, but sends
# SIGINT (what Ctrl-C sends) once the program has written "ready" to stderr.
same_as_lua_interrupted() {
  local name=$1
  shift 2
  cases=$((cases + 1))
  local program
  for program in expected actual; do
    local binary=$REFERENCE_LUA argv0=lua5.4
    if [ $program = actual ]; then binary=$LAZYLUA argv0=lazylua; fi
    # The background job creates its files later: no stale "ready" may remain.
    rm -f "$WORK/$program".*
    bash -c 'exec -a "$0" "$@"' "$argv0" "$binary" "$@" </dev/null >"$WORK/$program.stdout" 2>"$WORK/$program.stderr" &
    local pid=$! waited=0
    until grep -q ready "$WORK/$program.stderr" 2>/dev/null || [ $waited -ge 100 ]; do
      sleep 0.1
      waited=$((waited + 1))
    done
    kill -INT $pid
    # A program that ignores the signal must fail the test, not hang it.
    waited=0
    while [ "$(awk '{print $3}' /proc/$pid/stat 2>/dev/null || echo Z)" != Z ] && [ $waited -lt 100 ]; do
      sleep 0.1
      waited=$((waited + 1))
    done
    kill -KILL $pid 2>/dev/null
    wait $pid
    echo $? >"$WORK/$program.status"
  done
  sed -i 's/lazylua/lua5.4/g' "$WORK/actual.stdout" "$WORK/actual.stderr"
  local ok=1
  compare_file stdout "$WORK/expected.stdout" "$WORK/actual.stdout" || ok=0
  compare_file stderr "$WORK/expected.stderr" "$WORK/actual.stderr" || ok=0
  compare_file "exit status" "$WORK/expected.status" "$WORK/actual.status" || ok=0
  report_case "$name" $ok "$*"
}

# lazylua_interrupted NAME STDOUT -- ARGS...: a check of lazylua alone (for
# what lua5.4 cannot do: it never stops a busy coroutine). Sends SIGINT once
# the program has written "ready" to stderr; it must exit within 10 s with
# status 1, print STDOUT and report "interrupted!" with a traceback.
lazylua_interrupted() {
  local name=$1 expected_stdout=$2
  shift 3
  cases=$((cases + 1))
  rm -f "$WORK"/actual.*
  bash -c 'exec -a "$0" "$@"' lazylua "$LAZYLUA" "$@" </dev/null >"$WORK/actual.stdout" 2>"$WORK/actual.stderr" &
  local pid=$! waited=0
  until grep -q ready "$WORK/actual.stderr" 2>/dev/null || [ $waited -ge 100 ]; do
    sleep 0.1
    waited=$((waited + 1))
  done
  kill -INT $pid
  waited=0
  while [ "$(awk '{print $3}' /proc/$pid/stat 2>/dev/null || echo Z)" != Z ] && [ $waited -lt 100 ]; do
    sleep 0.1
    waited=$((waited + 1))
  done
  kill -KILL $pid 2>/dev/null
  wait $pid
  local status=$? ok=1
  if [ -n "$expected_stdout" ]; then
    printf '%s\n' "$expected_stdout" >"$WORK/expected.stdout"
  else
    : >"$WORK/expected.stdout"
  fi
  compare_file stdout "$WORK/expected.stdout" "$WORK/actual.stdout" expected || ok=0
  if [ $status != 1 ]; then echo "  exit status $status, expected 1"; ok=0; fi
  if ! grep -q "interrupted!" "$WORK/actual.stderr" || ! grep -q "stack traceback:" "$WORK/actual.stderr"; then
    echo "  stderr lacks 'interrupted!' and a traceback:"
    sed 's/^/    /' "$WORK/actual.stderr"
    ok=0
  fi
  report_case "$name" $ok "$*"
}

# report_case NAME OK(1/0) DETAILS
report_case() {
  if [ "$2" = 1 ]; then
    echo "ok   $1"
  else
    echo "FAIL $1  (arguments: $3)"
    failures=$((failures + 1))
  fi
}

# check NAME COMMAND...: one case, passed when COMMAND succeeds (returns
# COMMAND's failure, so that a caller can show more).
check() {
  local name=$1
  shift
  cases=$((cases + 1))
  if "$@"; then
    report_case "$name" 1 ""
  else
    report_case "$name" 0 "$*"
    return 1
  fi
}

# expect_lazylua NAME EXPECTED_STDOUT EXPECTED_STATUS -- ARGS...: a check of
# lazylua alone (for what lua5.4 does not have).
expect_lazylua() {
  local name=$1 expected_stdout=$2 expected_status=$3
  shift 4
  local -a env_settings=()
  cases=$((cases + 1))
  run_program lazylua "$LAZYLUA" "$WORK/actual" /dev/null "$@"
  printf '%s\n' "$expected_stdout" >"$WORK/expected.stdout"
  echo "$expected_status" >"$WORK/expected.status"
  local ok=1
  compare_file stdout "$WORK/expected.stdout" "$WORK/actual.stdout" expected || ok=0
  compare_file "exit status" "$WORK/expected.status" "$WORK/actual.status" expected || ok=0
  if [ $ok = 0 ] && [ -s "$WORK/actual.stderr" ]; then sed 's/^/  stderr: /' "$WORK/actual.stderr"; fi
  report_case "$name" $ok "$*"
}

finish() {
  echo "$((cases - failures)) of $cases cases passed"
  [ "$failures" -eq 0 ]
}
