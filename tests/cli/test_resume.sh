# test_resume.sh - scripts/fashion_mnist.lua and fashion_cnn.lua continue a
# run bit for bit: N steps, --save-state, then --resume to the end give the
# checkpoint (the trained parameters, byte for byte) and the printed losses
# and accuracies of the run that never stopped. Stops within the first
# epoch, at an epoch's end and within the second epoch; a resumed run that
# stops and is resumed again; SGD with momentum and Adam; a state written by
# a lazy run and resumed eagerly. Then the refusals: another script's state,
# other run settings, a file that is no training state.
source "$(dirname "$0")/lib.sh" "$@"

HERE=$(cd "$(dirname "$0")" && pwd)
SCRIPTS=$HERE/../../scripts
DATA=$WORK/data
LIMIT=452 # 15 batches of 32 per epoch, the last one partial
mkdir -p "$DATA"
if ! "$LAZYLUA" "$HERE/fixtures/synthetic_fashion.lua" "$DATA" 512 1000; then
  echo "cannot write the synthetic data set" >&2
  exit 1
fi
export LAZYLUA_PROGRESS=0

has_line() { grep -Eq "$1" "$2"; }

# train SCRIPT OUT MODE ARGS...: runs scripts/fashion_SCRIPT.lua on the data
# with the run's settings and ARGS, writing into OUT (made) and OUT.stdout.
train() {
  local script=$1 out=$2 mode=$3
  shift 3
  local -a env_settings=()
  [ "$mode" = eager ] && env_settings=(LAZYLUA_EAGER=1)
  mkdir -p "$out"
  run_program lazylua "$LAZYLUA" "$out" /dev/null "$SCRIPTS/fashion_$script.lua" "$DATA" --out "$out" "$@"
  if [ "$(cat "$out.status")" != 0 ]; then
    echo "  fashion_$script.lua $* exited with $(cat "$out.status"):"
    sed 's/^/    /' "$out.stderr"
  fi
}

# The epoch lines and the final accuracy, without the speeds.
printed_results() {
  sed -nE 's/^(epoch [0-9]+: train loss [0-9.]+, test accuracy [0-9.]+%).*/\1/p;
           /^test accuracy [0-9.]+% after/p' "$1"
}

# same_run NAME SCRIPT STRAIGHT RESUMED: the resumed run ends as the straight one.
same_run() {
  local name=$1 script=$2 straight=$3 resumed=$4
  check "$name: exit status 0" test "$(cat "$resumed.status")" = 0
  check "$name: the parameters equal the uninterrupted run's, byte for byte" \
    cmp "$straight/fashion_$script.ckpt" "$resumed/fashion_$script.ckpt"
  printed_results "$straight.stdout" | tail -n 1 >"$straight.final"
  printed_results "$resumed.stdout" | tail -n 1 >"$resumed.final"
  check "$name: the same final accuracy is printed" cmp "$straight.final" "$resumed.final"
  check "$name: an accuracy was printed" test -s "$resumed.final"
}

# Each epoch line a resumed run prints equals the uninterrupted run's line
# for that epoch (the epoch's loss includes the steps before the stop).
same_epoch_lines() {
  local name=$1 straight=$2 resumed=$3
  printed_results "$straight.stdout" >"$straight.results"
  printed_results "$resumed.stdout" | grep '^epoch' >"$resumed.epochs"
  check "$name: epoch lines were printed" test -s "$resumed.epochs"
  check "$name: its epoch lines are the uninterrupted run's" \
    bash -c 'while IFS= read -r line; do grep -qxF "$line" "$1" || exit 1; done <"$2"' _ \
    "$straight.results" "$resumed.epochs"
}

RUN=(--epochs 2 --batch 32 --limit $LIMIT --seed 3)

for optimizer in adam sgd; do
  straight=$WORK/mnist-$optimizer
  train mnist "$straight" lazy "${RUN[@]}" --optimizer $optimizer
  for stop in 10 15 20; do
    part=$WORK/mnist-$optimizer-stop$stop
    train mnist "$part" lazy "${RUN[@]}" --optimizer $optimizer --steps $stop --save-state "$part.state"
    check "mnist $optimizer: stop after $stop steps" \
      has_line "^stopped after $stop steps \(--steps\); the training state is in $part.state$" "$part.stdout"
    check "mnist $optimizer: no checkpoint at a stop" test ! -e "$part/fashion_mnist.ckpt"
    resumed=$WORK/mnist-$optimizer-resumed$stop
    # the run settings come from the state file: only the data and --out here
    train mnist "$resumed" lazy --resume "$part.state"
    check "mnist $optimizer: resumed line" \
      has_line "^resumed from $part.state: epoch [12], batch [0-9]+, $stop steps done$" "$resumed.stdout"
    same_run "mnist $optimizer, stopped at $stop" mnist "$straight" "$resumed"
    same_epoch_lines "mnist $optimizer, stopped at $stop" "$straight" "$resumed"
  done
done

# Stopped at 7, resumed and stopped again at 22 (the settings repeated on
# the command line, as they may be), resumed to the end.
straight=$WORK/mnist-adam
first=$WORK/mnist-twice-1 second=$WORK/mnist-twice-2 last=$WORK/mnist-twice-3
train mnist "$first" lazy "${RUN[@]}" --steps 7 --save-state "$first.state"
train mnist "$second" lazy "${RUN[@]}" --resume "$first.state" --steps 22 --save-state "$second.state"
check "mnist twice: second stop" has_line '^stopped after 22 steps' "$second.stdout"
train mnist "$last" lazy --resume "$second.state"
same_run "mnist, stopped twice" mnist "$straight" "$last"

# A state written lazily, resumed eagerly: every tier computes the same bits.
eager=$WORK/mnist-eager-resumed
train mnist "$eager" eager --resume "$WORK/mnist-adam-stop10.state"
same_run "mnist, resumed eagerly" mnist "$straight" "$eager"

# The convolutional network, stopped within the second epoch.
straight=$WORK/cnn
train cnn "$straight" lazy "${RUN[@]}"
part=$WORK/cnn-stop18
train cnn "$part" lazy "${RUN[@]}" --steps 18 --save-state "$part.state"
train cnn "$WORK/cnn-resumed" lazy --resume "$part.state"
same_run "cnn, stopped at 18" cnn "$straight" "$WORK/cnn-resumed"
same_epoch_lines "cnn, stopped at 18" "$straight" "$WORK/cnn-resumed"

# --save-state without a stop: the state after the last epoch resumes to a
# run with nothing left to do, which reports the same accuracy.
full=$WORK/mnist-full
train mnist "$full" lazy "${RUN[@]}" --save-state "$full.state"
check "mnist: a full run with --save-state keeps its parameters" \
  cmp "$WORK/mnist-adam/fashion_mnist.ckpt" "$full/fashion_mnist.ckpt"
train mnist "$WORK/mnist-nothing-left" lazy --resume "$full.state"
same_run "mnist, resumed after the last epoch" mnist "$full" "$WORK/mnist-nothing-left"

# expect_refusal NAME PATTERN SCRIPT ARGS...: exit status 1 and the message.
expect_refusal() {
  local name=$1 pattern=$2 script=$3
  shift 3
  train "$script" "$WORK/refused" lazy "$@" 2>/dev/null >/dev/null
  check "$name: exit status 1" test "$(cat "$WORK/refused.status")" = 1
  check "$name: message" has_line "$pattern" "$WORK/refused.stderr" ||
    sed 's/^/  stderr: /' "$WORK/refused.stderr"
}
state=$WORK/mnist-adam-stop10.state
expect_refusal "another script's state" \
  "^fashion_cnn.lua: --resume $state: the state of a fashion_mnist.lua run, not of fashion_cnn.lua$" cnn --resume "$state"
expect_refusal "other run settings" \
  "^fashion_mnist.lua: --resume $state: --batch 64 differs from the resumed run's 32$" mnist --resume "$state" --batch 64
expect_refusal "another optimizer" \
  "^fashion_mnist.lua: --resume $state: --optimizer sgd differs from the resumed run's adam$" \
  mnist --resume "$state" --optimizer sgd
expect_refusal "a model checkpoint is no training state" \
  "^fashion_mnist.lua: --resume $WORK/mnist-adam/fashion_mnist.ckpt: not a training state \(write one with --save-state\)$" \
  mnist --resume "$WORK/mnist-adam/fashion_mnist.ckpt"
expect_refusal "a missing file" \
  "^fashion_mnist.lua: --resume $WORK/nowhere.state: tensor.load: cannot open '$WORK/nowhere.state': No such file or directory$" \
  mnist --resume "$WORK/nowhere.state"

finish
