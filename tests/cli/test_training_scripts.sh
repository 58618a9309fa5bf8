# test_training_scripts.sh - scripts/fashion_mnist.lua and fashion_cnn.lua
# end to end on a tiny synthetic data set in Fashion-MNIST's IDX format
# (fixtures/synthetic_fashion.lua: the class is the row of a bright bar, so
# the models learn it in two short epochs): the output lines, the accuracy,
# the checkpoint (loaded back into a fresh model by
# fixtures/check_checkpoint.lua), the loss SVG, and bad command lines. Each
# script runs lazily (graphs compiled in the background), with every graph
# compiled before it runs, and eagerly, and the three give the same bits.
source "$(dirname "$0")/lib.sh" "$@"

HERE=$(cd "$(dirname "$0")" && pwd)
SCRIPTS=$HERE/../../scripts
DATA=$WORK/data
LIMIT=452 # not a multiple of either batch size: each epoch ends with a partial batch
mkdir -p "$DATA"
if ! "$LAZYLUA" "$HERE/fixtures/synthetic_fashion.lua" "$DATA" 512 1000; then
  echo "cannot write the synthetic data set" >&2
  exit 1
fi
gzip "$DATA/t10k-images-idx3-ubyte" # the scripts read gzip and plain files alike
export LAZYLUA_PROGRESS=1

has_line() { grep -Eq "$1" "$2"; }
at_least() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 >= b + 0) }'; }

# run_training SCRIPT MODEL BATCH MODE: runs scripts/fashion_SCRIPT.lua for two
# epochs and checks everything it writes. MODE: lazy, native or eager.
run_training() {
  local script=$1 model=$2 batch=$3 mode=$4
  local name="$script ($mode)" out=$WORK/$script-$mode
  local -a env_settings=()
  case $mode in
    native) env_settings=(LAZYLUA_COMPILE=sync) ;;
    eager) env_settings=(LAZYLUA_EAGER=1) ;;
  esac
  mkdir -p "$out"
  run_program lazylua "$LAZYLUA" "$out/run" /dev/null "$SCRIPTS/fashion_$script.lua" "$DATA" \
    --epochs 2 --batch "$batch" --limit $LIMIT --out "$out" --seed 3
  local log=$out/run.stdout
  check "$name: exit status 0" test "$(cat "$out/run.status")" = 0 ||
    sed 's/^/  stderr: /' "$out/run.stderr"
  check "$name: data line" has_line "^Fashion-MNIST: $LIMIT training and 1000 test images from $DATA " "$log"
  # Stdout is not a terminal: the DataLoader's progress comes as plain lines.
  check "$name: progress lines" has_line '^epoch 2: [0-9]+/[0-9]+ \([0-9]+%\), .* it/s, elapsed' "$log"
  check "$name: epoch lines" has_line '^epoch 2: train loss [0-9.]+, test accuracy [0-9.]+%, [0-9]+ steps/s$' "$log"
  local steps=$(((LIMIT + batch - 1) / batch * 2))
  check "$name: steps/s line" has_line "^$steps steps in [0-9.]+ s: [0-9]+ steps/s$" "$log"
  check "$name: compiler line" has_line '^compiler: [0-9]+ compiles \([0-9.]+ s\), [0-9]+ memory cache hits, [0-9]+ disk cache hits, [0-9]+ distinct graphs, [0-9]+ graphs run natively, [0-9]+ interpreted while compiling$' "$log"
  if [ "$mode" != eager ]; then
    # Data preparation, the first and the later training steps, the last
    # partial batch, evaluation: a bounded set of graphs however long it runs.
    local graphs=$(sed -nE 's/^compiler: .* ([0-9]+) distinct graphs.*/\1/p' "$log")
    check "$name: at most 7 distinct graphs (got ${graphs:-none})" at_least 7 "${graphs:-99}"
  fi
  if [ "$mode" = native ]; then
    check "$name: every graph ran natively" has_line ' 0 interpreted while compiling$' "$log"
  fi
  local accuracy=$(sed -nE 's/^test accuracy ([0-9.]+)% after 2 epochs$/\1/p' "$log")
  check "$name: test accuracy ${accuracy:-missing}% >= 90%" at_least "${accuracy:-0}" 90
  check "$name: saved line" has_line "^saved $out/fashion_$script.ckpt and $out/fashion_${script}_loss.svg$" "$log"

  run_program lazylua "$LAZYLUA" "$out/check" /dev/null "$HERE/fixtures/check_checkpoint.lua" \
    "$out/fashion_$script.ckpt" "$model" "$DATA" $LIMIT 2
  check "$name: checkpoint loads into a fresh model" has_line '^checkpoint ok$' "$out/check.stdout" ||
    sed 's/^/  stderr: /' "$out/check.stderr"

  local svg=$out/fashion_${script}_loss.svg
  check "$name: loss SVG is well-formed XML" xmllint --noout "$svg"
  check "$name: loss SVG has a curve" grep -q '<polyline' "$svg"
}

run_training mnist mlp 8 lazy
run_training mnist mlp 8 native
run_training mnist mlp 8 eager
run_training cnn cnn 32 lazy
run_training cnn cnn 32 native
run_training cnn cnn 32 eager

# Same seed, same bits: the first steps of a lazy run are interpreted while
# their code compiles, a native run compiles every graph first, an eager run
# compiles nothing; all share one math library and one reduction order, so
# the trained parameters (the checkpoints) are equal byte for byte.
# What the runs print of the losses and accuracies is the same text too.
printed_results() {
  sed -nE 's/^(epoch [0-9]+: train loss [0-9.]+, test accuracy [0-9.]+%).*/\1/p;
           /^test accuracy [0-9.]+% after/p' "$1"
}
for script in mnist cnn; do
  printed_results "$WORK/$script-lazy/run.stdout" > "$WORK/$script-lazy.results"
  for mode in native eager; do
    check "$script: the $mode run's parameters equal the lazy run's, bit for bit" \
      cmp "$WORK/$script-lazy/fashion_$script.ckpt" "$WORK/$script-$mode/fashion_$script.ckpt"
    printed_results "$WORK/$script-$mode/run.stdout" > "$WORK/$script-$mode.results"
    check "$script: the $mode run prints the lazy run's losses and accuracies" \
      cmp "$WORK/$script-lazy.results" "$WORK/$script-$mode.results"
    check "$script: losses and accuracies were printed" test -s "$WORK/$script-$mode.results"
  done
done

# expect_usage_error NAME STDERR_PATTERN ARGS...: a non-zero exit status and
# a message on stderr.
expect_usage_error() {
  local name=$1 pattern=$2
  shift 2
  local -a env_settings=()
  run_program lazylua "$LAZYLUA" "$WORK/usage" /dev/null "$@"
  check "$name: non-zero exit status" test "$(cat "$WORK/usage.status")" != 0
  check "$name: message" has_line "$pattern" "$WORK/usage.stderr" ||
    sed 's/^/  stderr: /' "$WORK/usage.stderr"
}

for script in mnist cnn; do
  expect_usage_error "$script: unknown option" "^fashion_$script.lua: unknown option --bogus$" \
    "$SCRIPTS/fashion_$script.lua" "$DATA" --bogus 1
  expect_usage_error "$script: option without a value" "^fashion_$script.lua: missing value for --epochs$" \
    "$SCRIPTS/fashion_$script.lua" "$DATA" --epochs
  expect_usage_error "$script: not a number" "^fashion_$script.lua: not a number: two$" \
    "$SCRIPTS/fashion_$script.lua" "$DATA" --batch two
  expect_usage_error "$script: missing data directory" \
    "^fashion_$script.lua: train-images-idx3-ubyte not found in $WORK/nowhere " \
    "$SCRIPTS/fashion_$script.lua" "$WORK/nowhere"
done

finish
