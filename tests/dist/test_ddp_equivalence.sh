# test_ddp_equivalence.sh LAZYLUA MPIEXEC - data-parallel training gives the
# single-process result: N steps of the Fashion-MNIST MLP on 2 ranks (64
# images each, a sharded loader, nn.DistributedDataParallel) end with the
# parameters of one process with batch 128 over the same samples, within
# the float tolerance stated below. Then scripts/fashion_mnist.lua under
# mpirun: only rank 0 prints and writes, the ranks end with identical
# parameters, --resume works with as many ranks and refuses another count.
# Every mpirun is bounded by `timeout`.
MPIEXEC=${2:-mpirun}
HERE=$(cd "$(dirname "$0")" && pwd)
SCRIPTS=$HERE/../../scripts
# LAZYLUA, WORK (removed at exit), check and finish.
source "$HERE/../cli/lib.sh"
# Open MPI refuses root without these; tests run on localhost only. The
# other two as in lib.sh of this folder: waiting ranks yield their core, and
# no leak checks for ranks under the sanitizer build.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_mpi_yield_when_idle=1
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
export LAZYLUA_PROGRESS=0
unset LAZYLUA_COMPILE

# ranks N ARGS...: the lazylua program on N ranks of this machine, at most 180 s.
ranks() {
  local count=$1
  shift
  timeout 180 "$MPIEXEC" -np "$count" --oversubscribe "$LAZYLUA" "$@"
}

# The real data set when installed (Debian's dataset-fashion-mnist), else
# the synthetic one of the command-line tests (same format).
DATA=/usr/share/datasets/fashion-mnist
if [ ! -e "$DATA/train-images-idx3-ubyte.gz" ]; then
  DATA=$WORK/data
  mkdir -p "$DATA"
  "$LAZYLUA" "$HERE/../cli/fixtures/synthetic_fashion.lua" "$DATA" 4096 512 || exit 1
fi

# within MAX_DIFFERENCE SCALE FACTOR: MAX_DIFFERENCE <= FACTOR * SCALE.
within() { awk -v d="$1" -v s="$2" -v f="$3" 'BEGIN { exit !(d <= f * s) }'; }
beyond() { awk -v d="$1" -v s="$2" -v f="$3" 'BEGIN { exit !(d > f * s) }'; }

# --- Equivalence ------------------------------------------------------------
# SGD with momentum, 20 steps. The only difference between the runs is the
# order of float32 additions: a gradient element is a sum over 128 samples,
# here two sums of 64 added by the all-reduce, and divided by 2 after
# instead of as part of the mean. Each ordering is within 128 * 2^-24
# (~8e-6) of the exact sum relative to the sum of magnitudes; SGD adds
# lr * gradient, so after 20 steps the parameters may differ by a few
# 1e-7 of their scale (measured: 1.5e-7 of max |parameter|). The tolerance,
# 1e-5 of max |parameter|, is ~70 times that, and far below what a real
# mistake gives: one step more or less moves them by 0.24 of their scale
# (checked below, so the test can be seen to fail).
"$LAZYLUA" "$HERE/ddp_driver.lua" "$DATA" 20 sgd "$WORK/one_sgd.t"
check "one process, SGD: parameters written" test -s "$WORK/one_sgd.t"
ranks 2 "$HERE/ddp_driver.lua" "$DATA" 20 sgd "$WORK/two_sgd.t"
check "2 ranks, SGD: exit 0 and parameters written" test -s "$WORK/two_sgd.t"
read -r difference scale _ _ < <("$LAZYLUA" "$HERE/compare_parameters.lua" "$WORK/one_sgd.t" "$WORK/two_sgd.t")
echo "     SGD, 20 steps: max |1 process - 2 ranks| = $difference, max |parameter| = $scale"
check "2 ranks x 64 = 1 process x 128 (SGD, 20 steps, within 1e-5 of the scale)" within "$difference" "$scale" 1e-5
# The test can fail: 19 steps instead of 20 is far outside the tolerance.
"$LAZYLUA" "$HERE/ddp_driver.lua" "$DATA" 19 sgd "$WORK/one_sgd19.t"
read -r difference scale _ _ < <("$LAZYLUA" "$HERE/compare_parameters.lua" "$WORK/one_sgd19.t" "$WORK/two_sgd.t")
check "one step fewer is far outside the tolerance" beyond "$difference" "$scale" 1e-2
# Eager ranks (MPI called directly) give the lazy single process's result.
LAZYLUA_EAGER=1 ranks 2 "$HERE/ddp_driver.lua" "$DATA" 20 sgd "$WORK/two_sgd_eager.t"
read -r difference scale _ _ < <("$LAZYLUA" "$HERE/compare_parameters.lua" "$WORK/one_sgd.t" "$WORK/two_sgd_eager.t")
check "2 eager ranks = 1 lazy process (SGD, within 1e-5 of the scale)" within "$difference" "$scale" 1e-5

# Adam, 6 steps. Adam divides each step by sqrt(v) + 1e-8, so an element
# whose gradients so far are near the rounding level (a pixel that is
# almost never lit) moves by a rounding-dependent share of lr = 1e-3, and
# over more steps the model's dynamics amplify that (after 20 steps
# elements differ by up to 4e-3, with no error anywhere). Measured after 3
# to 8 steps: at most 7.6e-6, in at most 3 of the 269322 elements beyond
# 1e-6. The check: at most 5e-5 (5% of one step's lr), and fewer than
# 0.01% of the elements (27) beyond 1e-6; ranks that did not average
# would differ by ~lr in most elements. Adam is blind to a wrong scale (a
# sum for a mean); the SGD check above is not.
"$LAZYLUA" "$HERE/ddp_driver.lua" "$DATA" 6 adam "$WORK/one_adam.t"
ranks 2 "$HERE/ddp_driver.lua" "$DATA" 6 adam "$WORK/two_adam.t"
read -r difference scale elements differing < <("$LAZYLUA" "$HERE/compare_parameters.lua" "$WORK/one_adam.t" "$WORK/two_adam.t" 1e-6)
echo "     Adam, 6 steps: max |1 process - 2 ranks| = $difference, $differing of $elements elements differ by > 1e-6"
check "2 ranks = 1 process (Adam, 6 steps, within 5e-5)" within "$difference" 1 5e-5
check "fewer than 0.01% of the elements differ by more than 1e-6" test "${differing:-99999}" -lt 27

# --- scripts/fashion_mnist.lua under mpirun ---------------------------------
SMALL=$WORK/small
mkdir -p "$SMALL"
"$LAZYLUA" "$HERE/../cli/fixtures/synthetic_fashion.lua" "$SMALL" 1024 256 || exit 1
OUT=$WORK/out
mkdir -p "$OUT"
count() { grep -Ec "$1" "$2"; }

# A whole run (2 epochs of 8 global batches): one report, written once.
ranks 2 "$SCRIPTS/fashion_mnist.lua" "$SMALL" --epochs 2 --out "$OUT" >"$WORK/full.out" 2>"$WORK/full.err"
check "full run on 2 ranks: exit 0" test $? = 0
check "the data line is printed once (rank 0 only)" test "$(count '^Fashion-MNIST: ' "$WORK/full.out")" = 1
check "the model is printed once" test "$(count '^Sequential\(' "$WORK/full.out")" = 1
check "the data-parallel line is printed once" \
  test "$(count '^data-parallel on 2 ranks: 64 images per rank in each batch of 128$' "$WORK/full.out")" = 1
check "each epoch line is printed once" test "$(count '^epoch 2: train loss' "$WORK/full.out")" = 1
check "the final accuracy is printed once" test "$(count '^test accuracy [0-9.]+% after 2 epochs$' "$WORK/full.out")" = 1
check "the ranks end with identical parameters" test "$(count '^parameters identical on 2 ranks$' "$WORK/full.out")" = 1
check "the checkpoint and the plot are written" test -s "$OUT/fashion_mnist.ckpt" -a -s "$OUT/fashion_mnist_loss.svg"
check "nothing on stderr" test ! -s "$WORK/full.err"

# --steps, --save-state and --resume with as many ranks: the resumed run
# ends with the parameters of the run that never stopped, bit for bit.
ranks 2 "$SCRIPTS/fashion_mnist.lua" "$SMALL" --steps 5 --save-state "$WORK/part.state" --out "$OUT" >"$WORK/part.out" 2>&1
check "--steps 5 on 2 ranks: exit 0" test $? = 0
check "--steps stop: parameters identical, printed once" \
  test "$(count '^parameters identical on 2 ranks$' "$WORK/part.out")" = 1
check "--steps stop: the stop is printed once" test "$(count '^stopped after 5 steps' "$WORK/part.out")" = 1
ranks 2 "$SCRIPTS/fashion_mnist.lua" "$SMALL" --resume "$WORK/part.state" --steps 12 --save-state "$WORK/resumed.state" \
  --out "$OUT" >"$WORK/resumed.out" 2>&1
check "--resume on 2 ranks: exit 0" test $? = 0
check "--resume: printed once" test "$(count '^resumed from ' "$WORK/resumed.out")" = 1
ranks 2 "$SCRIPTS/fashion_mnist.lua" "$SMALL" --steps 12 --save-state "$WORK/straight.state" --out "$OUT" \
  >"$WORK/straight.out" 2>&1
cat >"$WORK/same_model.lua" <<'EOF'
local a, b = tensor.load(arg[1]).model, tensor.load(arg[2]).model
local names = 0
for name, t in pairs(a) do
  names = names + 1
  if not b[name] or (t - b[name]):abs():max():item() ~= 0 then os.exit(1) end
end
os.exit(names == 6 and 0 or 1)
EOF
check "5 steps, --resume to 12 = 12 steps straight (bit for bit)" \
  "$LAZYLUA" "$WORK/same_model.lua" "$WORK/resumed.state" "$WORK/straight.state"
"$LAZYLUA" "$SCRIPTS/fashion_mnist.lua" "$SMALL" --resume "$WORK/part.state" --out "$OUT" >"$WORK/refused.out" 2>&1
check "a 2-rank state resumed by one process is refused" \
  grep -q 'the state of a run on 2 ranks, this one has 1: resume with as many ranks' "$WORK/refused.out"

# A global batch that does not divide among the ranks: a clear error.
ranks 2 "$SCRIPTS/fashion_mnist.lua" "$SMALL" --batch 127 --out "$OUT" >"$WORK/odd.out" 2>&1
check "--batch 127 on 2 ranks: fails" test $? != 0
check "--batch 127 on 2 ranks: says why" grep -q -- '--batch 127 (the global batch) does not divide among 2 ranks' "$WORK/odd.out"

finish
