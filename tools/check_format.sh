#!/usr/bin/env bash
# check_format.sh - every C and C++ file as .clang-format lays it out
# (clang-format from Debian's clang-format package); run by .ci/run. Lists
# the files that differ; `clang-format -i FILE` fixes one.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format > /dev/null; then
  echo "check_format.sh: clang-format is not installed (tools/setup.sh installs it)" >&2
  exit 1
fi
mapfile -t files < <( (git ls-files; git ls-files --others --exclude-standard) |
  grep -E '\.(cpp|h|hpp|c)$' | sort -u)
bad=()
for file in "${files[@]}"; do
  [ -f "$file" ] || continue
  clang-format --dry-run --Werror "$file" > /dev/null 2>&1 || bad+=("$file")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "check_format.sh: ${#bad[@]} file(s) not formatted by .clang-format:" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "check_format.sh: ${#files[@]} files formatted"
