# test_onnx_export_scripts.sh - scripts/fashion_mnist.lua and fashion_cnn.lua
# with --export FILE.onnx, on the tiny synthetic data set of
# test_training_scripts.sh: the file is written, passes libonnx's checker and
# strict shape inference (build/onnx_check) and, re-imported
# (fixtures/check_onnx_export.lua), computes what the run's checkpoint
# computes, and so does PyTorch running the file (fixtures/onnx_torch_run.py).
# A bad --export path is a clear error.
source "$(dirname "$0")/lib.sh" "$@"

HERE=$(cd "$(dirname "$0")" && pwd)
SCRIPTS=$HERE/../../scripts
CHECKER=$(dirname "$LAZYLUA")/onnx_check
DATA=$WORK/data
mkdir -p "$DATA"
if ! "$LAZYLUA" "$HERE/fixtures/synthetic_fashion.lua" "$DATA" 96 64; then
  echo "cannot write the synthetic data set" >&2
  exit 1
fi
gzip "$DATA/t10k-images-idx3-ubyte"
has_line() { grep -Eq "$1" "$2"; }
env_settings=()

for pair in mnist:mlp cnn:cnn; do
  script=${pair%%:*} model=${pair##*:}
  out=$WORK/$script
  mkdir -p "$out"
  run_program lazylua "$LAZYLUA" "$out/run" /dev/null "$SCRIPTS/fashion_$script.lua" "$DATA" \
    --epochs 1 --batch 32 --out "$out" --export "$out/model.onnx"
  check "$script: exit status 0" test "$(cat "$out/run.status")" = 0 ||
    sed 's/^/  stderr: /' "$out/run.stderr"
  check "$script: exported line" has_line "^exported $out/model.onnx$" "$out/run.stdout"
  check "$script: libonnx accepts the file" "$CHECKER" "$out/model.onnx"
  run_program lazylua "$LAZYLUA" "$out/check" /dev/null "$HERE/fixtures/check_onnx_export.lua" \
    "$out/fashion_$script.ckpt" "$out/model.onnx" "$model" "$DATA" "$out"
  check "$script: the re-imported model computes the checkpoint's outputs" \
    has_line '^onnx export ok$' "$out/check.stdout" || sed 's/^/  stderr: /' "$out/check.stderr"
  # A consumer sharing no code with lazylua: its own protobuf reader, PyTorch's ops.
  check "$script: PyTorch runs the file to the Lua model's outputs" \
    /usr/bin/python3 "$HERE/fixtures/onnx_torch_run.py" "$out/model.onnx" "$out/input.npy" "$out/expected.npy"
done

run_program lazylua "$LAZYLUA" "$WORK/bad" /dev/null "$SCRIPTS/fashion_mnist.lua" "$DATA" \
  --epochs 1 --batch 32 --out "$WORK" --export "$WORK/no/such/dir/model.onnx"
check "bad --export path: exit status 1" test "$(cat "$WORK/bad.status")" = 1
check "bad --export path: message" has_line 'onnx.export: cannot write .*no/such/dir/model.onnx' "$WORK/bad.stderr"

finish
