# test_real_models.sh - real models that PyTorch exports, imported by onnx.load: the
# files are made at test time by bench/models/export.py (Debian's python3-torch and
# python3-torchvision, random weights, BatchNorm statistics calibrated, nothing
# downloaded): squeezenet1_1, resnet18 and mobilenet_v2 at 64x64 (small, so that the test
# stays fast) and the TransformerEncoder (d 128, 4 layers, seq 32), at opsets 13 and 17
# with a dynamic batch. Each runs at batch 1 and 3 from the one file and must match
# PyTorch's outputs within 1e-4 of their scale (fixtures/check_real_models.lua). The
# opset 13 files run in eager mode, the opset 17 files compiled (LAZYLUA_COMPILE=sync),
# so both tiers see every op. A wrong input is an error naming the ONNX node, and the
# model computes after it.
source "$(dirname "$0")/lib.sh" "$@"

HERE=$(cd "$(dirname "$0")" && pwd)
EXPORT=$HERE/../../bench/models/export.py
MODELS=(squeezenet1_1 resnet18 mobilenet_v2 transformer_encoder)
if ! /usr/bin/python3 -c 'import torch, torchvision' 2>"$WORK/import.stderr"; then
  echo "PyTorch or torchvision is missing (tools/setup.sh installs python3-torch and python3-torchvision):" >&2
  cat "$WORK/import.stderr" >&2
  exit 1
fi
models_list=$(IFS=,; echo "${MODELS[*]}")
check "PyTorch exports ${MODELS[*]}" /usr/bin/python3 "$EXPORT" "$WORK/models" \
  --models "$models_list" --size 64 --batches 1,3 --opsets 13,17 ||
  exit 1

has_line() { grep -Eq "$1" "$2"; }
for pass in 13:LAZYLUA_EAGER=1 17:LAZYLUA_COMPILE=sync; do
  opset=${pass%%:*}
  env_settings=("${pass#*:}" LAZYLUA_PROGRESS=0)
  run_program lazylua "$LAZYLUA" "$WORK/op$opset" /dev/null "$HERE/fixtures/check_real_models.lua" \
    "$WORK/models" "$opset" 1,3 "${MODELS[@]}"
  sed 's/^/  /' "$WORK/op$opset.stdout"
  check "opset $opset (${pass#*:}): exit status 0" test "$(cat "$WORK/op$opset.status")" = 0 ||
    sed 's/^/  stderr: /' "$WORK/op$opset.stderr"
  for model in "${MODELS[@]}"; do
    for batch in 1 3; do
      check "opset $opset: $model at batch $batch matches PyTorch" \
        has_line "^ok $model op$opset b$batch " "$WORK/op$opset.stdout"
    done
  done
  check "opset $opset: a wrong input names the node, the model computes after it" \
    has_line "^ok ${MODELS[0]} op$opset: wrong channels" "$WORK/op$opset.stdout"
done

finish
