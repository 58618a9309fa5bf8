#!/usr/bin/env bash
# line_budget.sh - the size of the code, printed by .ci/run: lines per part
# of the tree, and the largest files. Fails when a file passes the budget of
# one file (STYLE: files under about 1,000 lines), so that a file is split
# when it grows, not years later.
#
#   tools/line_budget.sh [MAX_LINES_PER_FILE]     default 1000
set -euo pipefail
cd "$(dirname "$0")/.."
max=${1:-1000}

# Tracked sources, and new files not yet added (a change under review).
files=$( (git ls-files; git ls-files --others --exclude-standard) |
  grep -E '\.(cpp|h|hpp|c|lua|sh|proto|cmake)$|CMakeLists\.txt$' | sort -u)

echo "line budget: lines per directory (sources, tests, scripts)"
for file in $files; do
  [ -f "$file" ] || continue
  printf '%s %s\n' "$(wc -l < "$file")" "$(dirname "$file")"
done | awk '{ lines[$2] += $1; total += $1 }
  END { for (d in lines) printf "  %7d  %s\n", lines[d], d; printf "  %7d  total\n", total }' |
  sort -k2

echo "line budget: the largest files (budget $max lines each)"
over=0
# awk, not head: head exits after 8 lines and sort, still writing, dies of
# SIGPIPE, which pipefail turns into this script's failure (CI exit 141).
for file in $files; do
  [ -f "$file" ] || continue
  printf '%d %s\n' "$(wc -l < "$file")" "$file"
done | sort -rn | awk 'NR <= 8' | while read -r lines file; do
  printf '  %7d  %s\n' "$lines" "$file"
done
for file in $files; do
  [ -f "$file" ] || continue
  lines=$(wc -l < "$file")
  if [ "$lines" -gt "$max" ]; then
    echo "line budget: $file has $lines lines, over $max: split it" >&2
    over=1
  fi
done
exit $over
