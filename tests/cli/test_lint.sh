# test_lint.sh - lazylua-lint: the findings for fixtures/lint/breaks.lua are
# the lines written out below by hand (line, column and words); a clean
# script prints nothing and exits 0; syntax errors, unreadable and hostile
# files exit 2 with a message and do not stop the files after them. The
# instruction decoder is checked against luac5.4's own listing of every Lua
# file in the repository.
set -u
LAZYLUA=${1:?usage: bash test_lint.sh /path/to/lazylua}
case $LAZYLUA in /*) ;; *) LAZYLUA=$PWD/$LAZYLUA ;; esac
LINT=$(dirname "$LAZYLUA")/lazylua-lint
cd "$(dirname "$0")/fixtures/lint" || exit 1
WORK=$(mktemp -d "${TMPDIR:-/tmp}/lazylua_lint_test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
failures=0

check() {  # NAME EXPECTED_STATUS EXPECTED_STDOUT_FILE ACTUAL_STATUS
  local name=$1 want_status=$2 want=$3 status=$4
  if [ "$status" != "$want_status" ] || ! diff -u "$want" "$WORK/out" > "$WORK/diff"; then
    echo "FAIL: $name (exit $status, expected $want_status)"
    cat "$WORK/diff" "$WORK/err"
    failures=$((failures + 1))
  else
    echo "ok: $name"
  fi
}

# One finding per graph break of breaks.lua; the loop of lines 7-16 ends its
# step, the while and repeat loops sync every iteration (said once each, no
# mark_step line), and of nested()'s two loops only the outer one is named.
cat > "$WORK/expected" << 'EOF'
breaks.lua:9:3: print(w) syncs on every iteration of the loop at line 7: print it every N steps, or after mark_step
breaks.lua:11:8: s in a comparison (`>`) syncs on every iteration of the loop at line 7: compare after mark_step, or keep the test in tensors (tensor.where)
breaks.lua:13:20: `..` of loss (tostring) syncs on every iteration of the loop at line 7: format it every N steps, or after mark_step
breaks.lua:14:14: loss:item() syncs on every iteration of the loop at line 7: log every N steps, or read it after mark_step
breaks.lua:14:24: w:tolist() syncs on every iteration of the loop at line 7: log every N steps, or read it after mark_step
breaks.lua:22:16: string.format(v) syncs on every iteration of the loop at line 19: print it every N steps, or after mark_step
breaks.lua:27:15: w:max():item() syncs on every iteration of the loop at line 26: log every N steps, or read it after mark_step
breaks.lua:30:3: this loop records tensor ops but never calls tensor.mark_step() (or an optimizer's step()): its graph grows every iteration
EOF
"$LINT" breaks.lua > "$WORK/out" 2> "$WORK/err"
check "graph breaks found, with lines and columns" 1 "$WORK/expected" $?

: > "$WORK/empty"
"$LINT" clean.lua > "$WORK/out" 2> "$WORK/err"
check "a clean script" 0 "$WORK/empty" $?

# A `#!` first line is skipped as lua5.4 skips it; line numbers stay.
{ echo '#!/usr/bin/env lazylua'; cat breaks.lua; } > "$WORK/shebang.lua"
awk '{ sub(/^breaks.lua/, "shebang.lua"); split($0, f, ":"); line = f[2] + 1
       sub(/^shebang.lua:[0-9]+/, "shebang.lua:" line)
       if (match($0, /loop at line [0-9]+/)) {
         n = substr($0, RSTART + 13, RLENGTH - 13) + 1
         $0 = substr($0, 1, RSTART - 1) "loop at line " n substr($0, RSTART + RLENGTH) }
       print }' "$WORK/expected" > "$WORK/shebang"
(cd "$WORK" && "$LINT" shebang.lua) > "$WORK/out" 2> "$WORK/err"
check "a #! line" 1 "$WORK/shebang" $?

# The stdlib by its lazylua.* names: `require "lazylua"` is the tensor
# module (its loop's print is a break), lazylua.optim's step() ends a step.
cat > "$WORK/qualified.lua" << 'LUA'
local t = require "lazylua"
local nn, optim = require "lazylua.nn", require "lazylua.optim"
local model = nn.Linear(4, 2)
local opt = optim.SGD(model:parameters(), {lr = 0.1})
local w = t.randn(4, 4)
for step = 1, 10 do
  model(w):sum():backward()
  opt:step()
end
for i = 1, 3 do
  w = w * 2
  print(w)
end
LUA
echo 'qualified.lua:12:3: print(w) syncs on every iteration of the loop at line 10: print it every N steps, or after mark_step' > "$WORK/qualified_expected"
(cd "$WORK" && "$LINT" qualified.lua) > "$WORK/out" 2> "$WORK/err"
check 'require "lazylua" and "lazylua.optim"' 1 "$WORK/qualified_expected" $?

# The repository's own scripts are clean.
(cd ../../../.. && "$LINT" scripts/*.lua) > "$WORK/out" 2> "$WORK/err"
check "scripts/*.lua" 0 "$WORK/empty" $?

# Errors: each says what and where, on stderr, and the next file is read.
expect_error() {  # NAME PATTERN ARGS...
  local name=$1 pattern=$2
  shift 2
  "$LINT" "$@" > "$WORK/out" 2> "$WORK/err"
  local status=$?
  if [ $status -ne 2 ] || ! grep -qE "$pattern" "$WORK/err"; then
    echo "FAIL: $name (exit $status)"
    cat "$WORK/err"
    failures=$((failures + 1))
  else
    echo "ok: $name"
  fi
}
expect_error "a syntax error, worded as lua5.4 words it" \
  "^lazylua-lint: syntax_error.lua:4: unexpected symbol near 'end'$" syntax_error.lua
expect_error "a missing file" "^lazylua-lint: cannot read $WORK/none.lua: No such file" \
  "$WORK/none.lua"
expect_error "a directory" "^lazylua-lint: (cannot read $WORK|.*$WORK)" "$WORK"
luac5.4 -o "$WORK/binary.luac" clean.lua
expect_error "a precompiled chunk" "attempt to load a binary chunk" "$WORK/binary.luac"
head -c 4096 /dev/urandom > "$WORK/noise.lua"
expect_error "random bytes" "^lazylua-lint: " "$WORK/noise.lua"
printf 'local t = tensor.ones(2)\0for i = 1, 2 do print(t) end\n' > "$WORK/nul.lua"
expect_error "a NUL byte" "^lazylua-lint: .*nul.lua:1: " "$WORK/nul.lua"
# The files after a bad one are still read.
"$LINT" "$WORK/none.lua" breaks.lua > "$WORK/out" 2> "$WORK/err"
check "a bad file, then a good one" 2 "$WORK/expected" $?
"$LINT" > "$WORK/out" 2> "$WORK/err"
[ $? -eq 2 ] && grep -q '^usage: lazylua-lint FILE' "$WORK/err" && echo "ok: no file" ||
  { echo "FAIL: no file"; failures=$((failures + 1)); }

# The decoder against luac: each function's line span, and every
# instruction's number, line and opcode.
root=../../../..
listed=0
for file in "$root"/scripts/*.lua "$root"/stdlib/*.lua "$root"/tests/lua/*.lua breaks.lua clean.lua; do
  luac5.4 -l -p "$file" | awk '
    /^(main|function) </ { match($0, /:[0-9]+,[0-9]+>/); print "function <" substr($0, RSTART + 1, RLENGTH - 1); next }
    /^\t[0-9]+\t\[[0-9]+\]\t/ { gsub(/[ \t]+$/, "", $3); print $1, $2, $3 }' > "$WORK/luac"
  "$LINT" --listing "$file" > "$WORK/ours" 2> "$WORK/err"
  if ! diff -q "$WORK/luac" "$WORK/ours" > /dev/null || [ ! -s "$WORK/ours" ]; then
    echo "FAIL: listing of $file differs from luac5.4 -l"
    diff "$WORK/luac" "$WORK/ours" | head -5
    failures=$((failures + 1))
  fi
  listed=$((listed + 1))
done
echo "ok: $listed files decoded as luac5.4 lists them"

if [ $failures -gt 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all passed"
