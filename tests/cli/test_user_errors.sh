# test_user_errors.sh - an uncaught error raised inside the stdlib names the
# script's own file and line (not stdlib/*.lua), as the interpreter prints it
# and exits with status 1: a string lr for optim.SGD, a wrong target for a
# loss, and a failing layer of an nn.Sequential (named by index and type).
set -u
LAZYLUA=${1:?usage: bash test_user_errors.sh /path/to/lazylua}
case $LAZYLUA in /*) ;; *) LAZYLUA=$PWD/$LAZYLUA ;; esac
WORK=$(mktemp -d "${TMPDIR:-/tmp}/lazylua_user_errors.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
export LAZYLUA_CACHE_DIR=$WORK/cache
failures=0

# expect_first_line NAME EXPECTED: runs $WORK/NAME.lua; its stderr's first
# line must be EXPECTED (lua.c prefixes the program name as run) and the
# status 1.
expect_first_line() {
  (cd "$WORK" && "$LAZYLUA" "$1.lua" >/dev/null 2>"$1.stderr")
  local status=$? first
  first=$(head -n 1 "$WORK/$1.stderr")
  if [ "$status" != 1 ] || [ "$first" != "$2" ]; then
    echo "FAIL $1: status $status, first line:"
    echo "  got:      $first"
    echo "  expected: $2"
    failures=$((failures + 1))
  fi
}

cat >"$WORK/string_lr.lua" <<'LUA'
local nn, optim = require "nn", require "optim"
local model = nn.Linear(2, 2)

local opt = optim.SGD(model:parameters(), {lr = "0.1"})
LUA
expect_first_line string_lr \
  "$LAZYLUA: string_lr.lua:4: SGD: lr must be a number >= 0, got the string \"0.1\""

cat >"$WORK/loss_shape.lua" <<'LUA'
local nn = require "nn"
local function loss_of(output, target)
  local loss = nn.MSELoss()(output, target)
  return loss
end
print(loss_of(tensor.zeros(3), tensor.zeros(4)))
LUA
expect_first_line loss_shape \
  "$LAZYLUA: loss_shape.lua:3: MSELoss: input [3] and target [4] differ in shape"

cat >"$WORK/layer.lua" <<'LUA'
local nn = require "nn"
local model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(784, 10))
local x = tensor.zeros(64, 784)
local y = model(x)
LUA
expect_first_line layer \
  "$LAZYLUA: layer.lua:4: nn.Sequential layer 3 (Linear(784 -> 10)): matmul: shapes [64, 256] and [784, 10] cannot be multiplied (256 vs 784)"

cat >"$WORK/typo.lua" <<'LUA'
local nn = require "nn"
local model = nn.Sequential(nn.Linear(4, 4), nn.relu, nn.Linear(4, 2))
LUA
expect_first_line typo \
  "$LAZYLUA: typo.lua:2: nn.Sequential: argument 2 is nil (a misspelt layer name?)"

if [ "$failures" -gt 0 ]; then
  echo "$failures case(s) failed"
  exit 1
fi
echo "test_user_errors: OK"
