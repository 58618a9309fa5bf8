#!/bin/bash
# test_lua_module.sh MODULE_DIR SOURCE_DIR - the stock lua5.4 program loads the built
# lazylua.so with require, records lazy tensor work and syncs it.
set -euo pipefail
export LUA_CPATH="$1/?.so"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LAZYLUA_CACHE_DIR=$work/cache

fail() { echo "FAIL: $*" >&2; exit 1; }

# x = {1, 2, 3, 4}: x * 3 - 1 = {2, 5, 8, 11}, sum 26; mean of squares of x
# = (1 + 4 + 9 + 16) / 4 = 7.5. Before the sync nothing has run: syncs = 0.
output=$(lua5.4 -e '
local t = require "lazylua"
local x = t.new({1, 2, 3, 4}, {dtype = "f64"})
local y = x * 3 - 1
local z = (x * x):mean()
print(t.metrics().syncs)
t.sync(y, z)
print(t.metrics().syncs)
print(table.concat(y:tolist(), " "), z:item())
print(require("tensor") == t, type(t.mark_step))
')
expected=$'0\n1\n2.0 5.0 8.0 11.0\t7.5\ntrue\tfunction'
[ "$output" = "$expected" ] || fail "printed:
$output
expected:
$expected"

# Only the entry points are exported (luaopen_lazylua, and
# luaopen_lazylua_<name> for each stdlib module), Lua is not linked in twice
# (the module uses the Lua of the program that loads it), and GNU readline
# (GPL) is not linked at all.
if ldd "$1/lazylua.so" | grep liblua >/dev/null; then fail "lazylua.so links a Lua library"; fi
if ldd "$1/lazylua.so" | grep -i readline; then fail "lazylua.so links readline"; fi
exported=$(nm -D --defined-only "$1/lazylua.so" | awk '{print $3}' | sort)
expected=$( (echo luaopen_lazylua; for file in "$2"/stdlib/*.lua; do
  echo "luaopen_lazylua_$(basename "$file" .lua)"; done) | sort)
[ "$exported" = "$expected" ] || fail "exports: $exported
expected: $expected"

# require "lazylua.nn" first, with no require "lazylua" before: found in
# lazylua.so by Lua's all-in-one searcher. Linear(2, 1) with weight {{2, 3}}
# and bias {1} maps {4, 5} to 2*4 + 3*5 + 1 = 24. The short name "nn" is
# not taken in stock Lua's package space.
output=$(lua5.4 -e '
local nn = require "lazylua.nn"
local t = require "tensor"
local layer = nn.Linear(2, 1)
layer.weight = t.new({{2, 3}}, {dtype = "f32"})
layer.bias = t.new({1}, {dtype = "f32"})
print(layer(t.new({{4, 5}}, {dtype = "f32"})):sum():item(), require("lazylua") == t)
print(require("lazylua.optim").SGD ~= nil, package.loaded["lazylua.nn"] == nn)
print(pcall(require, "nn"))' 2>&1) || fail "require lazylua.nn: $output"
[[ $output == $'24.0\ttrue\ntrue\ttrue\nfalse\tmodule \'nn\' not found:'* ]] ||
  fail "require lazylua.nn printed: $output"

# An error inside the module is a Lua error, caught by pcall.
output=$(lua5.4 -e '
local t = require "lazylua"
local ok, message = pcall(function() return t.ones(2, 3) + t.ones(4) end)
print(ok, message ~= nil)')
[ "$output" = $'false\ttrue' ] || fail "error handling printed '$output'"
echo "lua module test passed"
