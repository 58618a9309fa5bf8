# test_debug_report.sh - LAZYLUA_DEBUG=1 explains each new graph of a sync
# site as it is made, and reports at exit the sites that made more than two
# graphs and the lines that synced more than once; without it, stderr stays
# empty (what the script prints is all there is).
set -u
LAZYLUA=${1:?usage: bash test_debug_report.sh /path/to/lazylua}
cd "$(dirname "$0")" || exit 1
WORK=$(mktemp -d "${TMPDIR:-/tmp}/lazylua_debug_test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
export LAZYLUA_CACHE_DIR=$WORK/cache
unset LAZYLUA_EAGER
failures=0
expect() {  # NAME FILE PATTERN (a fixed string)
  if grep -qF -- "$3" "$2"; then echo "ok: $1"; else
    echo "FAIL: $1: no line with: $3"; cat "$2"; failures=$((failures + 1)); fi
}

LAZYLUA_DEBUG=1 "$LAZYLUA" fixtures/recompiles.lua > "$WORK/out" 2> "$WORK/err"
[ $? -eq 0 ] || { echo "FAIL: the script failed"; cat "$WORK/err"; exit 1; }
# Batches 1 and 2 share a graph (a narrowed batch is an input, and so is
# its transpose); batch 3 has 1 row: one new graph at the barrier (line 10)
# and one at the item (line 9), each explained; epoch 2 makes none.
expect "the short batch explained" "$WORK/err" \
  "[lazylua] new graph at fixtures/recompiles.lua:10 (barrier), the 2nd there: an input's shape changed: [1, 2]"
expect "the cached shape named" "$WORK/err" "where the cached graph had [2, 2]"
expect "the hint" "$WORK/err" "Hint: a last short batch? drop_last, or pad it to the batch size"
count=$(grep -c "new graph at" "$WORK/err")
[ "$count" -eq 2 ] && echo "ok: two explanations" ||
  { echo "FAIL: $count explanations, expected 2"; failures=$((failures + 1)); }
expect "the exit report" "$WORK/err" "[lazylua] report:"
expect "the line that synced every step" "$WORK/err" \
  "fixtures/recompiles.lua:9: item synced 6 times (once a step) in \`local value = loss:item()\`: log every N steps, or read it after mark_step"

"$LAZYLUA" fixtures/recompiles.lua > "$WORK/out" 2> "$WORK/err"
if [ -s "$WORK/err" ] || [ "$(cat "$WORK/out")" != done ]; then
  echo "FAIL: without LAZYLUA_DEBUG stderr must be empty"; cat "$WORK/err"; failures=$((failures + 1))
else
  echo "ok: quiet without LAZYLUA_DEBUG"
fi

# LAZYLUA_PROFILE writes a Chrome trace at exit: the fixture's 12 syncs
# (6 items, 6 barriers) are 12 sync spans.
LAZYLUA_PROFILE="$WORK/trace.json" "$LAZYLUA" fixtures/recompiles.lua > "$WORK/out" 2> "$WORK/err"
syncs=$(grep -c '"cat":"sync"' "$WORK/trace.json" 2>/dev/null)
if [ "$syncs" = 12 ] && head -c 40 "$WORK/trace.json" | grep -qF '{"displayTimeUnit":"ms","traceEvents":['; then
  echo "ok: LAZYLUA_PROFILE"
else
  echo "FAIL: LAZYLUA_PROFILE: $syncs sync spans, expected 12"; cat "$WORK/err"; failures=$((failures + 1))
fi
# The trace parses as JSON (jq), and with native code its kernels are
# spans named by the Lua lines of their ops.
LAZYLUA_COMPILE=sync LAZYLUA_PROFILE="$WORK/native.json" "$LAZYLUA" fixtures/recompiles.lua \
  > "$WORK/out" 2> "$WORK/err"
kernels=$(jq '[.traceEvents[] | select(.ph == "X" and .cat == "kernel"
                and (.name | test("fixtures/recompiles.lua:[0-9]+")))] | length' "$WORK/native.json")
threads=$(jq '[.traceEvents[] | select(.ph == "M" and .name == "thread_name")] | length' \
  "$WORK/native.json")
if [ "${kernels:-0}" -gt 0 ] && [ "${threads:-0}" -ge 1 ]; then
  echo "ok: the trace parses; $kernels kernel spans named with Lua lines"
else
  echo "FAIL: trace: kernels named with lines: ${kernels:-none}, threads: ${threads:-none}"
  head -c 2000 "$WORK/native.json"; failures=$((failures + 1))
fi
LAZYLUA_PROFILE=/nonexistent-dir/trace.json "$LAZYLUA" fixtures/recompiles.lua > "$WORK/out" 2> "$WORK/err"
[ $? -eq 0 ] && grep -qF "lazylua: LAZYLUA_PROFILE: cannot write '/nonexistent-dir/trace.json'" "$WORK/err" &&
  echo "ok: an unwritable LAZYLUA_PROFILE is said" ||
  { echo "FAIL: unwritable LAZYLUA_PROFILE"; cat "$WORK/err"; failures=$((failures + 1)); }

if [ $failures -gt 0 ]; then echo "$failures failure(s)"; exit 1; fi
echo "all passed"
