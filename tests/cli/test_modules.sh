# test_modules.sh - C modules: Debian's lfs.so does not link liblua, so it
# loads only if the program exports the Lua C API (-Wl,-E). Compared with
# the stock lua5.4 (see lib.sh).
source "$(dirname "$0")/lib.sh" "$@"

same_as_lua "require lfs in a script" -- fixtures/lfs_use.lua
same_as_lua "-l lfs" -- -l lfs -e 'print(type(lfs.dir), lfs.attributes("fixtures", "mode"))'
same_as_lua "package.loadlib of lfs" -- -e 'local f = package.searchpath("lfs", package.cpath) print(f ~= nil, type(package.loadlib(f, "luaopen_lfs")))'
same_as_lua "missing C module" --env 'LUA_CPATH=/nowhere/?.so' --env 'LUA_PATH=/nowhere/?.lua' -- -e 'print(pcall(require, "no_such_c_module"))'

finish
