# test_real_models.sh - real models that PyTorch exports, imported by onnx.load: the
# files are made at test time by bench/models/export.py (Debian's python3-torch and
# python3-torchvision, random weights, BatchNorm statistics calibrated, nothing
# downloaded): squeezenet1_1 and resnet18 at 64x64 (small, so that the test stays fast)
# and the TransformerEncoder (d 128, 4 layers, seq 32), at opsets 13 and 17 with a
# dynamic batch. Each runs at batch 1 and 3 from the one file and must match PyTorch's
# outputs within 1e-4 of their scale (fixtures/check_real_models.lua). The opset 13
# files run in eager mode, the opset 17 files compiled (LAZYLUA_COMPILE=sync), so both
# tiers run every op. mobilenet_v2 (grouped, depthwise convolutions) runs in the eager
# pass only: compiling its graphs (one conv2d per group today) takes minutes. A wrong
# input is an error naming the ONNX node, and the model computes after it.
source "$(dirname "$0")/lib.sh" "$@"

HERE=$(cd "$(dirname "$0")" && pwd)
EXPORT=$HERE/../../bench/models/export.py
MODELS=(squeezenet1_1 resnet18 transformer_encoder)
EAGER_ONLY=(mobilenet_v2)
if ! /usr/bin/python3 -c 'import torch, torchvision' 2>"$WORK/import.stderr"; then
  echo "PyTorch or torchvision is missing (tools/setup.sh installs python3-torch and python3-torchvision):" >&2
  cat "$WORK/import.stderr" >&2
  exit 1
fi
models_list=$(IFS=,; echo "${MODELS[*]}")
check "PyTorch exports ${MODELS[*]} at opsets 13 and 17" /usr/bin/python3 "$EXPORT" "$WORK/models" \
  --models "$models_list" --size 64 --batches 1,3 --opsets 13,17 || exit 1
check "PyTorch exports ${EAGER_ONLY[*]} at opset 13" /usr/bin/python3 "$EXPORT" "$WORK/models" \
  --models "$(IFS=,; echo "${EAGER_ONLY[*]}")" --size 64 --batches 1,3 --opsets 13 || exit 1

has_line() { grep -Eq "$1" "$2"; }
for pass in 13:LAZYLUA_EAGER=1 17:LAZYLUA_COMPILE=sync; do
  opset=${pass%%:*}
  models=("${MODELS[@]}")
  if [ "$opset" = 13 ]; then models+=("${EAGER_ONLY[@]}"); fi
  env_settings=("${pass#*:}" LAZYLUA_PROGRESS=0)
  run_program lazylua "$LAZYLUA" "$WORK/op$opset" /dev/null "$HERE/fixtures/check_real_models.lua" \
    "$WORK/models" "$opset" 1,3 "${models[@]}"
  sed 's/^/  /' "$WORK/op$opset.stdout"
  check "opset $opset (${pass#*:}): exit status 0" test "$(cat "$WORK/op$opset.status")" = 0 ||
    sed 's/^/  stderr: /' "$WORK/op$opset.stderr"
  for model in "${models[@]}"; do
    for batch in 1 3; do
      check "opset $opset: $model at batch $batch matches PyTorch" \
        has_line "^ok $model op$opset b$batch " "$WORK/op$opset.stdout"
    done
  done
  check "opset $opset: a wrong input names the node, the model computes after it" \
    has_line "^ok ${MODELS[0]} op$opset: wrong channels" "$WORK/op$opset.stdout"
done

finish
