# test_init.sh - LUA_INIT_5_4 and LUA_INIT (a chunk or @file), their errors
# and -E, compared with the stock lua5.4 (see lib.sh).
source "$(dirname "$0")/lib.sh" "$@"

same_as_lua "LUA_INIT chunk" --env 'LUA_INIT=print("init ran", type(arg))' -- -e 'print("body")'
same_as_lua "LUA_INIT runs before the script" --env 'LUA_INIT=x = "from init"' -- fixtures/args.lua
same_as_lua "LUA_INIT @file" --env 'LUA_INIT=@fixtures/init.lua' -- -e 'print("initialized:", initialized)'
same_as_lua "LUA_INIT_5_4 wins over LUA_INIT" --env 'LUA_INIT=print("plain")' --env 'LUA_INIT_5_4=print("versioned")' -- -e ''
same_as_lua "empty LUA_INIT_5_4 still wins" --env 'LUA_INIT=print("plain")' --env 'LUA_INIT_5_4=' -- -e 'print("body")'
same_as_lua "-E ignores LUA_INIT @file" --env 'LUA_INIT=@fixtures/init.lua' -- -E -e 'print(initialized)'
same_as_lua "-E ignores LUA_INIT_5_4" --env 'LUA_INIT_5_4=print("versioned")' -- -E -e 'print("body")'
same_as_lua "runtime error in LUA_INIT" --env 'LUA_INIT=error("init fails")' -- -e 'print("not reached")'
same_as_lua "syntax error in LUA_INIT" --env 'LUA_INIT=x = = 1' -- -e 'print("not reached")'
same_as_lua "error in LUA_INIT_5_4" --env 'LUA_INIT_5_4=local t = nil; t.x = 1' -- fixtures/args.lua
same_as_lua "LUA_INIT @missing file" --env 'LUA_INIT=@fixtures/no_such_init.lua' -- -e 'print("not reached")'
same_as_lua "LUA_INIT error object table" --env 'LUA_INIT=error({})' -- -e ''
same_as_lua "os.exit in LUA_INIT" --env 'LUA_INIT=os.exit(4)' -- -e 'print("not reached")'
same_as_lua "LUA_INIT with stdin script" --env 'LUA_INIT=print("init")' --stdin fixtures/stdin_chunk.lua --
same_as_lua "LUA_INIT with -i" --env 'LUA_INIT=answer = 42' --input $'answer\n' -- -i
same_as_lua "LUA_INIT and -v" --env 'LUA_INIT=print("init")' -- -v

finish
