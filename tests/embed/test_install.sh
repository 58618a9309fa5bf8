#!/bin/bash
# test_install.sh BUILD_DIR SOURCE_DIR - runs README.md's "Embedding"
# commands as written: every line of its ```sh blocks (but the build, which
# ctest has done), in a temporary $HOME so that `~/.local` is a fresh prefix,
# with no LD_LIBRARY_PATH. A line ending in `# prints: TEXT` must print
# TEXT. The host sources are this folder's (the README's C example and
# consumer/CMakeLists.txt must be these files, checked first). Then checks
# the installed layout: no readline in liblazylua or lazylua.so, nothing in
# share/lua/5.4, `require "lazylua.nn"` from the stock lua5.4 with no prior
# `require "lazylua"`, C++17 from the CMake target alone, and the rock's
# install (only lazylua.so, into luarocks' LIBDIR).
set -euo pipefail
build=$1
source=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LAZYLUA_CACHE_DIR=$work/cache
unset LD_LIBRARY_PATH PKG_CONFIG_PATH LUA_PATH LUA_CPATH LUA_PATH_5_4 LUA_CPATH_5_4 LUA_INIT LUA_INIT_5_4

fail() { echo "FAIL: $*" >&2; exit 1; }

embedding=$(sed -n '/^## Embedding/,/^## Layout/p' "$source/README.md")
# 1. The README's sources are the tested ones.
sed -n '/^```c$/,/^```$/p' <<< "$embedding" | sed '1d;$d' > "$work/readme_example.c"
diff -u "$source/tests/embed/host_example.c" "$work/readme_example.c" ||
  fail "README.md's Embedding example differs from tests/embed/host_example.c"
sed -n '/^```cmake$/,/^```$/p' <<< "$embedding" | sed '1d;$d' > "$work/readme_consumer.txt"
diff -u "$source/tests/embed/consumer/CMakeLists.txt" "$work/readme_consumer.txt" ||
  fail "README.md's CMakeLists.txt differs from tests/embed/consumer/CMakeLists.txt"

# 2. The README's commands, line by line, from a folder holding `build` (the
# tree ctest built), host_example.c and consumer/.
awk '/^```sh$/ { inside = 1; next } /^```$/ { inside = 0; next } inside' <<< "$embedding" |
  grep -v '^cmake -S \. -B build' > "$work/commands.sh"
[ "$(grep -c . "$work/commands.sh")" -ge 8 ] || fail "README.md's commands not found:
$(cat "$work/commands.sh")"
home=$work/home
mkdir -p "$home" "$work/run/consumer"
ln -s "$(cd "$build" && pwd)" "$work/run/build"
cp "$source/tests/embed/host_example.c" "$source/tests/embed/host_example.cpp" "$work/run/"
cp "$source/tests/embed/host_example.c" "$source/tests/embed/host_example.cpp" \
  "$source/tests/embed/consumer/CMakeLists.txt" "$work/run/consumer/"
(
  cd "$work/run"
  export HOME=$home
  while IFS= read -r line; do
    if [[ $line == *"# prints: "* ]]; then
      expected=${line##*# prints: }
      output=$(eval "$line") || fail "failed: $line"
      [ "$output" = "$expected" ] || fail "'$line' printed '$output', expected '$expected'"
    else
      eval "$line" > "$work/step.log" 2>&1 || { cat "$work/step.log"; fail "failed: $line"; }
    fi
  done < "$work/commands.sh"
  # The pkg-config line ran with PKG_CONFIG_PATH from the README's export.
  [ "${PKG_CONFIG_PATH:-}" = "$home/.local/lib/pkgconfig" ] || fail "PKG_CONFIG_PATH not exported"
) || exit 1
prefix=$home/.local

# 3. The installed layout.
for file in include/lazylua.h include/lazylua.hpp bin/lazylua bin/lazylua-lint \
            lib/pkgconfig/lazylua.pc lib/cmake/lazylua/lazyluaConfig.cmake lib/lua/5.4/lazylua.so \
            lib/liblazylua.so.0 share/man/man1/lazylua.1; do
  [ -e "$prefix/$file" ] || fail "not installed: $file"
done
[ -e "$prefix/share/lua" ] && fail "Lua files installed under share/lua: $(find "$prefix/share/lua")"
ls "$prefix"/lib/lua/5.4 | grep -vx lazylua.so && fail "more than lazylua.so in lib/lua/5.4"
grep '#include "' "$prefix/include/lazylua.h" "$prefix/include/lazylua.hpp" |
  grep -v '#include "lazylua.h"' && fail "public headers include internal headers"
# readline (GPL) only in the program.
for library in "$prefix/lib/liblazylua.so.0" "$prefix/lib/lua/5.4/lazylua.so"; do
  if ldd "$library" | grep -i readline; then fail "$library links readline"; fi
done
# grep without -q reads all of ldd's output: with -q it stops at the match,
# ldd gets SIGPIPE, and pipefail reports the pipeline as failed.
ldd "$prefix/bin/lazylua" | grep libreadline >/dev/null || fail "the lazylua program lost readline"

# 4. Stock lua5.4 and the installed module: every stdlib module by its
# qualified name, each as the first require of its process; the short names
# are not taken from Lua's package space.
export LUA_CPATH="$prefix/lib/lua/5.4/?.so;;" LUA_PATH="$prefix/share/lua/5.4/?.lua;;"
for file in "$source"/stdlib/*.lua; do
  module=lazylua.$(basename "$file" .lua)
  output=$(lua5.4 -e "local m = require '$module'; print(m ~= nil, package.loaded['$module'] == m)" 2>&1) ||
    fail "lua5.4: require '$module' failed: $output"
  [ "$output" = $'true\ttrue' ] || fail "require '$module' printed '$output'"
done
output=$(lua5.4 -e '
local nn = require "lazylua.nn"
local tensor = require "lazylua"
local data, optim = require "lazylua.data", require "lazylua.optim"
-- Linear(2, 1) with weight {{2, 3}} and bias {1}: x = {4, 5} gives 2*4 + 3*5 + 1 = 24.
local layer = nn.Linear(2, 1)
layer.weight = tensor.new({{2, 3}}, {dtype = "f32"})
layer.bias = tensor.new({1}, {dtype = "f32"})
print(layer(tensor.new({{4, 5}}, {dtype = "f32"})):sum():item(), require("tensor") == tensor)
print(pcall(require, "nn"))' 2>&1) || fail "lua5.4 with lazylua.nn: $output"
[[ $output == $'24.0\ttrue\nfalse\tmodule \'nn\' not found:'* ]] || fail "lua5.4 printed: $output"
# The program keeps the short names, one module under both.
output=$("$prefix/bin/lazylua" -e 'print(require "nn" == require "lazylua.nn", require "data" == require "lazylua.data")')
[ "$output" = $'true\ttrue' ] || fail "lazylua: short names printed '$output'"

# 5. C++17 comes from the target (cxx_std_17), even for a project asking C++14.
cmake -S "$work/run/consumer" -B "$work/consumer14" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_CXX_STANDARD=14 > "$work/consumer14.log" 2>&1 || { cat "$work/consumer14.log"; fail "configure"; }
cmake --build "$work/consumer14" --target host_cpp > "$work/consumer14.log" 2>&1 ||
  { cat "$work/consumer14.log"; fail "C++14 project: lazylua::lazylua does not ask for C++17"; }
# (lazylua.hpp does not compile as C++14; CMake leaves out -std= when the
# compiler's default is the standard asked for.)
if grep -qs 'std=[a-z+]*14' "$work/consumer14/CMakeFiles/host_cpp.dir/flags.make"; then
  fail "host_cpp was compiled as C++14"
fi

# 6. The rock: configured with the rockspec's variables, the install is
# lazylua.so into luarocks' LIBDIR, and nothing else.
# luarocks' PREFIX is the rock's own folder, LIBDIR its lib/ (deployed to
# the tree's lib/lua/5.4), LUADIR its lua/ (deployed to share/lua/5.4).
rock_vars=$(lua5.4 - "$source/lazylua-0.1.0-1.rockspec" "$work/rock" <<'LUA'
local spec = {}
loadfile(arg[1], "t", spec)()
for name, value in pairs(spec.build.variables) do
  value = value:gsub("%$%(PREFIX%)", arg[2]):gsub("%$%(LIBDIR%)", arg[2] .. "/lib")
  value = value:gsub("%$%(LUADIR%)", arg[2] .. "/lua")
  print("-D" .. name .. "=" .. value)
end
LUA
)
mapfile -t rock_flags <<< "$rock_vars"
cmake -S "$source" -B "$work/rock-build" "${rock_flags[@]}" > "$work/rock.log" 2>&1 ||
  { cat "$work/rock.log"; fail "configure with the rockspec's variables"; }
destinations=$(grep -o 'DESTINATION "[^"]*"' "$work/rock-build/cmake_install.cmake" | sort -u)
[ "$destinations" = "DESTINATION \"$work/rock/lib\"" ] || fail "the rock installs into:
$destinations"
grep -q 'lazylua\.so"' "$work/rock-build/cmake_install.cmake" || fail "the rock does not install lazylua.so"
echo "install test passed"
