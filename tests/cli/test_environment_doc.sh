#!/bin/bash
# test_environment_doc.sh LAZYLUA - docs/environment.md lists every LAZYLUA_*
# environment variable the sources read: getenv("LAZYLUA_...") in C and C++,
# os.getenv("LAZYLUA_...") in Lua, and names kept in a constant first
# (kLibraryVariable[] = "LAZYLUA_BLAS", CHILD_VARIABLE = "..."). The README
# links the page.
set -euo pipefail
source_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$source_dir"
fail() { echo "FAIL: $*" >&2; exit 1; }

read_names=$(
  { grep -rhoE 'getenv\(\s*"LAZYLUA_[A-Z0-9_]+"' --include='*.c' --include='*.cpp' --include='*.h' \
      --include='*.lua' interp tensor compiler lint stdlib scripts bench tests tools || true
    grep -rhoE '[A-Za-z_]*(VARIABLE|Variable)(\[\])?\s*=\s*"LAZYLUA_[A-Z0-9_]+"' \
      --include='*.cpp' --include='*.h' --include='*.lua' interp tensor compiler lint stdlib \
      scripts bench tests || true
  } | grep -oE 'LAZYLUA_[A-Z0-9_]+' | sort -u)
[ "$(wc -l <<< "$read_names")" -ge 15 ] || fail "too few variables found: $read_names"
missing=""
for name in $read_names; do
  grep -q "\`$name\`" docs/environment.md || missing="$missing $name"
done
[ -z "$missing" ] || fail "docs/environment.md does not list:$missing"
grep -q '](docs/environment.md)' README.md || fail "README.md does not link docs/environment.md"
echo "environment doc test passed ($(wc -l <<< "$read_names") variables)"
