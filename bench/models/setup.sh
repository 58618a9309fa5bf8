#!/usr/bin/env bash
# setup.sh - what the model suite (bench/models/run.sh) measures against:
# PyTorch's torchvision models (Debian's python3-torchvision, beside the
# python3-torch that tools/setup.sh installs) and ONNX Runtime, from the npm
# package onnxruntime-node at the version package-lock.json pins, installed
# into bench/models/node_modules. ONNX Runtime is a peer to compare with,
# never a dependency of lazylua. Idempotent: installs only what is missing.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)

versions() { /usr/bin/python3 -c 'import torch, torchvision; print(f"torch {torch.__version__}, torchvision {torchvision.__version__}")' 2>/dev/null; }
if ! torch_versions=$(versions); then
  echo "setup: installing python3-torch python3-torchvision"
  sudo_prefix=()
  if [ "$(id -u)" -ne 0 ]; then sudo_prefix=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_prefix[@]}" apt-get update -qq
  "${sudo_prefix[@]}" apt-get install -y -qq --no-install-recommends python3-torch python3-torchvision
  torch_versions=$(versions)
fi

for tool in node npm; do
  if ! command -v $tool >/dev/null; then
    echo "setup: $tool is missing (Debian's nodejs and npm packages)" >&2
    exit 1
  fi
done

pinned=$(sed -n 's/.*"onnxruntime-node": "\([^"]*\)".*/\1/p' "$HERE/package.json")
installed=$(cd "$HERE" && node -p 'require("onnxruntime-node/package.json").version' 2>/dev/null || true)
if [ "$installed" != "$pinned" ]; then
  echo "setup: installing onnxruntime-node $pinned into $HERE/node_modules"
  # The CPU binaries are in the npm package; its install script would only
  # fetch the CUDA provider (from NuGet), which the suite does not use.
  (cd "$HERE" && ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund --loglevel=error)
fi
echo "setup: $torch_versions, onnxruntime-node $pinned"
