# test_modules.sh - C modules: Debian's lfs.so does not link liblua, so it
# loads only if the program exports the Lua C API (-Wl,-E). Compared with
# the stock lua5.4 (see lib.sh).
source "$(dirname "$0")/lib.sh" "$@"

same_as_lua "require lfs in a script" -- fixtures/lfs_use.lua
same_as_lua "-l lfs" -- -l lfs -e 'print(type(lfs.dir), lfs.attributes("fixtures", "mode"))'
same_as_lua "package.loadlib of lfs" -- -e 'local f = package.searchpath("lfs", package.cpath) print(f ~= nil, type(package.loadlib(f, "luaopen_lfs")))'
same_as_lua "missing C module" --env 'LUA_CPATH=/nowhere/?.so' --env 'LUA_PATH=/nowhere/?.lua' -- -e 'print(pcall(require, "no_such_c_module"))'

# require's "module not found" message is lua5.4's, byte for byte, whatever
# the name: the embedded-stdlib searcher adds no line of its own (scripts
# match that message). Names near the embedded ones included.
for name in no_such_module a.b.c nn.missing nnx stdlib.nativex stdlib stdlib/nn stdlib.native.x \
  tensor.x data. '' ' ' '?' ';;'; do
  same_as_lua "missing module '$name'" -- -e "print(select(2, pcall(require, '$name')))"
done
same_as_lua "missing module, uncaught" -- -e 'require "no_such_module"'
same_as_lua "missing module from a script" --env 'LUA_PATH=./?.lua;/nowhere/?/init.lua' -- fixtures/require_missing.lua

finish
