#!/bin/bash
# test_readme_snippets.sh LAZYLUA - README.md's Lua snippets run as shown:
# each ```lua block is saved as a script and run by lazylua from an empty
# folder (so a snippet cannot lean on files beside it), and must exit 0; a
# line ending in `--> VALUE` after a print must print VALUE. Every relative
# link of the README names a file of the repository.
set -euo pipefail
lazylua=$1
case $lazylua in /*) ;; *) lazylua=$PWD/$lazylua ;; esac
source_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LAZYLUA_CACHE_DIR=$work/cache HOME=$work LAZYLUA_PROGRESS=0
unset LUA_INIT LUA_INIT_5_4 LAZYLUA_EAGER
fail() { echo "FAIL: $*" >&2; exit 1; }

# 1. Links.
links=$(grep -oE '\]\([^)#]+' "$source_dir/README.md" | sed 's/^](//' | grep -v '^https\?:' || true)
for link in $links; do
  [[ $link == /* || $link == ..* ]] && fail "README.md links outside the repository: $link"
  [ -e "$source_dir/$link" ] || fail "README.md links a missing file: $link"
done

# 2. Snippets.
awk -v dir="$work" '
  /^```lua$/ { n++; file = dir "/snippet" n ".lua"; inside = 1; next }
  /^```$/ { inside = 0; next }
  inside { print > file }' "$source_dir/README.md"
count=$(ls "$work"/snippet*.lua | wc -l)
[ "$count" -ge 3 ] || fail "only $count Lua snippets found"
mkdir "$work/run"
for snippet in "$work"/snippet*.lua; do
  output=$(cd "$work/run" && "$lazylua" "$snippet" 2>&1) ||
    fail "$(basename "$snippet") failed:
$(cat "$snippet")
---
$output"
  # print(...) --> VALUE: VALUE is among the printed lines (in order).
  expected=$(grep -E '^print\(.*--> ?[^ ]' "$snippet" | sed -E 's/.*--> ?([^:]*[^ :]).*/\1/' || true)
  if [ -n "$expected" ]; then
    printed=$(grep -vE '^\[lazylua\]' <<< "$output" | head -n "$(wc -l <<< "$expected")")
    [ "$printed" = "$expected" ] || fail "$(basename "$snippet") printed:
$printed
expected:
$expected"
  fi
done
echo "README snippets test passed ($count snippets)"
