#!/usr/bin/env bash
# Installs what lazylua needs to build, test and run, from Debian's packages.
# Idempotent: installs only what is missing. Run as root (or with sudo).
set -euo pipefail

# build-essential brings GCC's sanitizer runtimes (libasan8, libubsan1) for
# .ci/run's sanitizer build; the tests also use gzip and coreutils (timeout,
# mkfifo, truncate), which every Debian system has. clang-format is for
# .ci/run's layout check (tools/check_format.sh); jq parses the profiler's
# trace files in the tests. Open MPI runs data-parallel training (stdlib
# dist.lua, tensor/collectives.cpp): libopenmpi-dev to build against it,
# openmpi-bin for mpirun (its dependencies bring what a localhost job
# needs: ssh-client is only used to reach other machines). ONNX import and
# export (stdlib/onnx.lua) compile libonnx-dev's onnx.proto; the ONNX
# backend test suites the conformance runner uses are libonnx-testdata.
# python3-torch (PyTorch 1.13) is the independent reference: the tests run
# the files lazylua exports through it, and bench/ compares against it;
# python3-torchvision's models are the real models that
# tests/cli/test_real_models.sh and bench/models/ import.
packages=(
  build-essential cmake pkg-config
  liblua5.4-dev lua5.4 lua-filesystem
  libreadline-dev libfmt-dev
  libprotobuf-dev protobuf-compiler
  libopenblas-dev libdnnl-dev
  libopenmpi-dev openmpi-bin
  libonnx-dev libonnx-testdata
  libgtest-dev
  zlib1g-dev libdeflate-dev libxml2-utils
  clang-format
  jq
  python3-numpy python3-torch python3-torchvision
  dataset-fashion-mnist
  wamerican
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$package")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages are installed"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo_prefix=()
if [ "$(id -u)" -ne 0 ]; then sudo_prefix=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_prefix[@]}" apt-get update -qq
"${sudo_prefix[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
