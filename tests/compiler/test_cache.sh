#!/usr/bin/env bash
# test_cache.sh - the compile cache seen from outside: a second process hits
# the disk cache, corrupt entries are rebuilt silently, an unusable cache
# directory and a missing C compiler still give correct results.
# Usage: bash test_cache.sh /path/to/lazylua
set -u
lazylua=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# A script with a graph of a few kernels; prints its result and the metrics.
cat > "$work/program.lua" <<'LUA'
local a = tensor.arange(1000):float() / 700
local b = (a * a + 3):sqrt():tanh() + a:exp():log()
local s = (b - a):sum()
local row = tensor.new({{1, 2, 3}, {4, 5, 6}}):float():softmax(2)
-- A convolution with its Clip folded in (a plan record with an epilogue).
local x = tensor.arange(150):float():reshape({2, 3, 5, 5}) / 40 - 1
local w = tensor.arange(108):float():reshape({4, 3, 3, 3}) / 50 - 1
local clipped = tensor.conv2d(x, w, nil, {padding = 1})
  :maximum(tensor.full({}, 0.0)):minimum(tensor.full({}, 0.5))
local clipped_sum = clipped:sum()
tensor.sync(s, row, clipped, clipped_sum)
local m = tensor.metrics()
print(string.format("result %.4f %.4f %.4f", s:item(), row[2][3]:item(), clipped_sum:item()))
print(string.format("compiles %d disk %d native %d interpreted %d",
  m.compiles, m.disk_hits, m.native_runs, m.interpreted_runs))
LUA

# Native code may sum in another order than the eager kernels: results
# agree within 1e-5 relative (docs/architecture.md §3's reassociation tolerance).
same_result() {  # same_result "result x y" "result x y"
  awk -v a="$1" -v b="$2" 'BEGIN {
    n = split(a, x, " "); m = split(b, y, " ");
    if (n != m || x[1] != "result") exit 1;
    for (i = 2; i <= n; i++) {
      d = x[i] - y[i]; if (d < 0) d = -d;
      s = y[i] < 0 ? -y[i] : y[i];
      if (d > 1e-5 * s + 1e-6) exit 1;
    }
  }'
}

run() {  # run CACHE_DIR [ENV...] -> output in $out, status in $status
  local dir=$1
  shift
  out=$(env LAZYLUA_COMPILE=sync LAZYLUA_CACHE_DIR="$dir" "$@" "$lazylua" "$work/program.lua" 2>"$work/stderr")
  status=$?
  err=$(cat "$work/stderr")
}

expected_result=$(LAZYLUA_EAGER=1 "$lazylua" "$work/program.lua" | head -1)
[ -n "$expected_result" ] || fail "the eager run printed nothing"

# 1. A first process compiles; a second one compiles nothing.
run "$work/cache"
[ $status -eq 0 ] || fail "first run exited $status: $err"
same_result "$(echo "$out" | head -1)" "$expected_result" || fail "first run: '$out' vs eager '$expected_result'"
echo "$out" | grep -q "compiles [1-9]" || fail "first run compiled nothing: $out"
ls "$work/cache"/*.so > /dev/null 2>&1 || fail "no shared object in the cache"
run "$work/cache"
same_result "$(echo "$out" | head -1)" "$expected_result" || fail "second run: wrong result $out"
echo "$out" | grep -q "compiles 0 disk [1-9]" || fail "second run did not hit the disk cache: $out"
[ -z "$err" ] || fail "second run wrote to stderr: $err"

# 2. Corrupt entries (truncated, flipped byte, garbage record) are rebuilt
# with no word to the user.
for so in "$work/cache"/*.so; do truncate -s 100 "$so"; break; done
first_record=$(ls "$work/cache"/*.rec | head -1)
echo "garbage" > "$first_record"
run "$work/cache"
[ $status -eq 0 ] || fail "run after corruption exited $status"
same_result "$(echo "$out" | head -1)" "$expected_result" || fail "after corruption: wrong result $out"
echo "$out" | grep -q "compiles [1-9]" || fail "corrupt entries were not rebuilt: $out"
[ -z "$err" ] || fail "corruption was reported to the user: $err"
for so in "$work/cache"/*.so; do  # complement one byte of each object
  byte=$(od -An -tu1 -j2000 -N1 "$so" | tr -d ' ')
  printf "\\$(printf '%03o' $((byte ^ 255)))" | dd of="$so" bs=1 seek=2000 conv=notrunc status=none
done
run "$work/cache"
same_result "$(echo "$out" | head -1)" "$expected_result" || fail "after a flipped byte: wrong result $out"
echo "$out" | grep -q "compiles [1-9]" || fail "flipped entries were not rebuilt: $out"
run "$work/cache"
echo "$out" | grep -q "compiles 0 disk [1-9]" || fail "rebuilt entries are not hits: $out"

# 3. An unusable cache directory (a path below a regular file) still runs.
touch "$work/not-a-directory"
run "$work/not-a-directory/cache"
[ $status -eq 0 ] || fail "unusable cache dir: exit $status: $err"
same_result "$(echo "$out" | head -1)" "$expected_result" || fail "unusable cache dir: wrong result $out"
echo "$out" | grep -q "native [1-9]" || fail "unusable cache dir: nothing ran natively: $out"

# 3b. A cache directory other users can write is not used (its objects
# would run here), said once; the graphs still run natively.
mkdir -p "$work/shared" && chmod 0777 "$work/shared"
run "$work/shared"
[ $status -eq 0 ] || fail "shared cache dir: exit $status: $err"
same_result "$(echo "$out" | head -1)" "$expected_result" || fail "shared cache dir: wrong result $out"
echo "$out" | grep -q "native [1-9]" || fail "shared cache dir: nothing ran natively: $out"
[ "$(echo "$err" | grep -c 'writable by other users')" -eq 1 ] || fail "shared cache dir: not said once: $err"
! ls "$work/shared"/*.so > /dev/null 2>&1 || fail "shared cache dir: objects were written there"

# 3b'. A 0700 cache inside a parent other users can write (not sticky) is
# not used either: they could rename it away and put theirs in its place
# (the parents are checked as sshd's StrictModes does). Inside a sticky
# one, like /tmp, it is.
mkdir -p "$work/open" && chmod 0777 "$work/open"
run "$work/open/cache"
[ $status -eq 0 ] || fail "cache in an open parent: exit $status: $err"
same_result "$(echo "$out" | head -1)" "$expected_result" || fail "cache in an open parent: wrong result $out"
[ "$(echo "$err" | grep -c "is inside $work/open, which is writable by other users")" -eq 1 ] ||
  fail "cache in an open parent: not said once: $err"
! ls "$work/open/cache"/*.so > /dev/null 2>&1 || fail "cache in an open parent: objects were written there"
chmod 1777 "$work/open"
run "$work/open/cache"
[ $status -eq 0 ] && [ -z "$err" ] || fail "cache in a sticky parent: exit $status: $err"
ls "$work/open/cache"/*.so > /dev/null 2>&1 || fail "cache in a sticky parent: not used"

# 3c. A FIFO or a symlink to /dev/zero in place of an entry: no hang, no
# memory blow-up, the entry is rebuilt.
rm -rf "$work/cache3"
run "$work/cache3"
record=$(ls "$work/cache3"/*.rec | head -1)
object=${record%.rec}.so
rm -f "$record" "$object" && mkfifo "$record" && ln -s /dev/zero "$object"
out=$(timeout 60 env LAZYLUA_COMPILE=sync LAZYLUA_CACHE_DIR="$work/cache3" "$lazylua" \
  "$work/program.lua" 2>&1)
status=$?
[ $status -eq 0 ] || fail "FIFO/symlink entry: exit $status: $out"
same_result "$(echo "$out" | head -1)" "$expected_result" || fail "FIFO/symlink entry: wrong result $out"
[ -f "$record" ] && [ ! -L "$object" ] || fail "FIFO/symlink entry was not replaced"

# 3d. A compiler that hangs is killed after LAZYLUA_CC_TIMEOUT (the graph
# runs interpreted, said once), and one still running when lazylua exits
# does not outlive it. Stale private build directories are removed.
cat > "$work/slowcc" <<'SH'
#!/bin/sh
# Hangs on generated graphs (their source, on stdin, has lazylua_kernel
# functions) in a child of its own, as cc runs cc1; compiles everything
# else (the toolchain probe) with cc.
source=$(cat)
case "$source" in *lazylua_kernel*) sleep HANG & wait; exit 1;; esac
printf '%s\n' "$source" | exec cc "$@"
SH
# The hanging sleep's length is this run's own (300.PID), so that the
# checks below never see another test run's compilers on a shared machine.
hang=300.$$
sed -i "s/sleep HANG/sleep $hang/" "$work/slowcc"
chmod +x "$work/slowcc"
start=$(date +%s)
run "$work/cache4" LAZYLUA_CC="$work/slowcc" LAZYLUA_CC_TIMEOUT=2
[ $status -eq 0 ] || fail "hanging compiler: exit $status: $err"
same_result "$(echo "$out" | head -1)" "$expected_result" || fail "hanging compiler: wrong result $out"
[ "$(echo "$err" | grep -c 'took longer than 2 s (LAZYLUA_CC_TIMEOUT)')" -eq 1 ] ||
  fail "hanging compiler: not said once: $err"
[ $(($(date +%s) - start)) -lt 20 ] || fail "hanging compiler: the run took $(($(date +%s) - start)) s"
mkdir -p "$work/tmp/lazylua-AbCdEf" && touch "$work/tmp/lazylua-AbCdEf/graph.c" &&
  touch -d '2 hours ago' "$work/tmp/lazylua-AbCdEf"
TMPDIR="$work/tmp" LAZYLUA_COMPILE=sync LAZYLUA_CACHE_DIR="$work/not-a-directory/cache" \
  "$lazylua" "$work/program.lua" > /dev/null 2>&1
# A compile in flight at exit goes on in a detached compiler (it lands in
# the disk cache for the next run), bounded by LAZYLUA_CC_TIMEOUT like any.
LAZYLUA_CACHE_DIR="$work/cache5" LAZYLUA_CC="$work/slowcc" LAZYLUA_CC_TIMEOUT=2 "$lazylua" -e '
  local x = tensor.randn(100)
  tensor.mark_step()
  print((x * 2):exp():sum():item())  -- its compile starts in the background and hangs
  for _ = 1, 100 do
    if os.execute("pgrep -f \"sleep '"$hang"'\" > /dev/null") then break end
    os.execute("sleep 0.05")
  end
  assert(os.execute("pgrep -f \"sleep '"$hang"'\" > /dev/null"), "the hanging compile never started")
' > /dev/null 2>"$work/stderr" || fail "exit with a compile in flight: $(cat "$work/stderr")"
sleep 3 # the detached compiler starts over, then runs into its 2 s bound
# (Up to 30 s more: a loaded machine or a sanitizer build starts it late.)
for _ in $(seq 300); do pgrep -f "sleep $hang" > /dev/null || break; sleep 0.1; done
pgrep -f "sleep $hang" > /dev/null && fail "a compiler outlived LAZYLUA_CC_TIMEOUT" && pkill -f "sleep $hang"
[ ! -e "$work/tmp/lazylua-AbCdEf" ] || fail "a stale private build directory was left"

# 4. No C compiler: correct results on the interpreter, said once.
run "$work/cache2" LAZYLUA_CC=/nonexistent
[ $status -eq 0 ] || fail "no compiler: exit $status"
same_result "$(echo "$out" | head -1)" "$expected_result" || fail "no compiler: wrong result $out"
[ "$(echo "$err" | grep -c 'no working C compiler')" -eq 1 ] || fail "no compiler: not said exactly once: $err"

if [ $failures -ne 0 ]; then
  echo "test_cache: $failures failed"
  exit 1
fi
echo "test_cache: OK"
