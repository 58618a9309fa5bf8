#!/usr/bin/env bash
# test_golden_codegen.sh - the generated C of the graphs in golden/graphs.lua
# must equal golden/<name>.golden. A change to the passes or codegen that changes
# a kernel fails here and shows the difference; when the change is meant,
#   LAZYLUA_UPDATE_GOLDEN=1 bash tests/compiler/test_golden_codegen.sh build/lazylua
# rewrites the files, and the diff goes into the commit for review.
# Usage: bash test_golden_codegen.sh /path/to/lazylua
set -u
lazylua=$1
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! "$lazylua" "$here/golden/graphs.lua" "$work" > "$work/out.txt" 2>&1; then
  echo "FAIL: graphs.lua did not run:"
  cat "$work/out.txt"
  exit 1
fi
if [ "${LAZYLUA_UPDATE_GOLDEN:-}" = 1 ]; then
  rm -f "$here"/golden/*.golden
  cp "$work"/*.golden "$here/golden/"
  echo "rewrote $(ls "$work"/*.golden | wc -l) golden files in $here/golden"
  exit 0
fi

failures=0
for generated in "$work"/*.golden; do
  name=$(basename "$generated")
  if [ ! -f "$here/golden/$name" ]; then
    echo "FAIL: $name: no golden file (LAZYLUA_UPDATE_GOLDEN=1 writes it)"
    failures=$((failures + 1))
  elif ! diff -u "$here/golden/$name" "$generated" > "$work/diff.txt"; then
    echo "FAIL: $name: the generated C differs from golden/$name:"
    head -60 "$work/diff.txt"
    failures=$((failures + 1))
  fi
done
for golden in "$here"/golden/*.golden; do
  [ -f "$work/$(basename "$golden")" ] || {
    echo "FAIL: $(basename "$golden"): graphs.lua no longer writes it"
    failures=$((failures + 1))
  }
done
if [ "$failures" -gt 0 ]; then
  echo "$failures of $(ls "$work"/*.golden | wc -l) graphs differ; if the change is meant:"
  echo "  LAZYLUA_UPDATE_GOLDEN=1 bash tests/compiler/test_golden_codegen.sh build/lazylua"
  exit 1
fi
echo "ok: $(ls "$work"/*.golden | wc -l) graphs generate their golden C"
