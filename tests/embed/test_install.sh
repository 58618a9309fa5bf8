#!/bin/bash
# test_install.sh BUILD_DIR SOURCE_DIR - installs lazylua into a temporary
# prefix and builds host programs against the installed package, once with
# find_package(lazylua) and once with pkg-config; runs them and the
# installed Lua module, and checks the numbers they print.
set -euo pipefail
build=$1
source=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
export LAZYLUA_CACHE_DIR=$work/cache

fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" > "$work/install.log"
for file in include/lazylua.h include/lazylua.hpp bin/lazylua lib/pkgconfig/lazylua.pc \
            lib/cmake/lazylua/lazyluaConfig.cmake lib/lua/5.4/lazylua.so; do
  [ -e "$prefix/$file" ] || fail "not installed: $file"
done
ls "$prefix"/lib/liblazylua.so* > /dev/null || fail "liblazylua.so not installed"
# Nothing internal is needed by the installed headers.
grep '#include "' "$prefix/include/lazylua.h" "$prefix/include/lazylua.hpp" |
  grep -v '#include "lazylua.h"' && fail "public headers include internal headers"

# The README's example is this very file.
sed -n '/^## Embedding/,/^## Layout/p' "$source/README.md" | sed -n '/^```c$/,/^```$/p' |
  sed '1d;$d' > "$work/readme_example.c"
diff -u "$source/tests/embed/host_example.c" "$work/readme_example.c" ||
  fail "README.md's Embedding example differs from tests/embed/host_example.c"

# Expected by hand: x = {{1, 2, 3}, {4, -5, 6}}, weights = {{1, 0}, {0, 1}, {1, 1}}:
# x @ weights = {{4, 5}, {10, 1}}; - 2 = {{2, 3}, {8, -1}}; relu = {{2, 3}, {8, 0}}.
expected_c="2 3 8 0"
# x = {{1, 2}, {3, 4}} * 5 + 1 = {{6, 11}, {16, 21}}; sums over dim 1 = {22, 32}.
expected_cpp="22 32"

# 1. CMake: find_package(lazylua) and lazylua::lazylua.
cmake -S "$source/tests/embed/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release > "$work/consumer.log" || { cat "$work/consumer.log"; fail "configure"; }
cmake --build "$work/consumer" > "$work/consumer-build.log" 2>&1 ||
  { cat "$work/consumer-build.log"; fail "build against find_package"; }
output=$("$work/consumer/host_example_c")
[ "$output" = "$expected_c" ] || fail "find_package C host printed '$output', expected '$expected_c'"
output=$("$work/consumer/host_example_cpp")
[ "$output" = "$expected_cpp" ] || fail "find_package C++ host printed '$output', expected '$expected_cpp'"

# 2. pkg-config.
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
cc -std=c99 -Wall -Wextra -Werror -o "$work/host_pc" "$source/tests/embed/host_example.c" \
  $(pkg-config --cflags --libs lazylua) -Wl,-rpath,"$prefix/lib"
output=$("$work/host_pc")
[ "$output" = "$expected_c" ] || fail "pkg-config host printed '$output', expected '$expected_c'"

# 3. The installed program and Lua module.
output=$("$prefix/bin/lazylua" -e 'print((tensor.ones(3) * 4):sum():item())')
[ "$output" = "12.0" ] || fail "installed lazylua printed '$output'"
output=$(LUA_CPATH="$prefix/lib/lua/5.4/?.so" lua5.4 -e \
  'local t = require "lazylua"; print((t.arange(5) * 2):sum():item())')
[ "$output" = "20" ] || fail "installed module printed '$output'"
echo "install test passed"
