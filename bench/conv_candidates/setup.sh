#!/usr/bin/env bash
# setup.sh - installs the candidate libraries (Debian's oneDNN 2.6.3 and
# XNNPACK 2022-02 snapshot, with pthreadpool's header) if they are missing,
# and builds conv_bench into work/. Idempotent; run as root for the install.
# lazylua itself never links these: this bench only measures them.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
missing=()
for package in libdnnl-dev libxnnpack-dev libpthreadpool-dev; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  apt-get install -y "${missing[@]}" >/dev/null || {
    apt-get update >/dev/null
    apt-get install -y "${missing[@]}" >/dev/null
  }
fi
mkdir -p "$here/work"
binary="$here/work/conv_bench"
sources=("$here/conv_bench.cpp" "$here/conv_facts.cpp" "$here/candidates.h" "$here/bench_util.h")
stale=0
[ -x "$binary" ] || stale=1
for source in "${sources[@]}"; do [ "$source" -nt "$binary" ] && stale=1; done
if [ "$stale" = 1 ]; then
  echo "setup: building $binary"
  # -fopenmp: the same libgomp that Debian's libdnnl uses, for omp_set_num_threads.
  g++ -std=c++20 -O2 -march=native -fopenmp -Wall -Wextra -Werror -o "$binary" \
    "$here/conv_bench.cpp" "$here/conv_facts.cpp" -ldnnl -lXNNPACK -lpthreadpool
fi
if [ ! -s "$here/layers.txt" ]; then
  /usr/bin/python3 "$here/list_layers.py" > "$here/layers.txt"
fi
echo "setup: oneDNN $(dpkg -s libdnnl-dev | sed -n 's/^Version: //p'), XNNPACK $(dpkg -s libxnnpack-dev | sed -n 's/^Version: //p')"
