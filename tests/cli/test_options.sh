# test_options.sh - every option of the lua5.4 command line, alone and
# combined, compared with the stock lua5.4 (see lib.sh).
source "$(dirname "$0")/lib.sh" "$@"
MODULES=LUA_PATH=fixtures/?.lua

# -e
same_as_lua "-e" -- -e 'print(1 + 1)'
same_as_lua "-e twice, in order" -- -e 'x = 1' -e 'print(x + 1)'
same_as_lua "-e glued to its argument" -- '-eprint("glued")'
same_as_lua "-e then script sees globals" -- -e 'x = 5' fixtures/args.lua a b
same_as_lua "-e with an error stops" -- -e 'print("first")' -e 'error("second fails")' -e 'print("third")'
same_as_lua "-e syntax error" -- -e 'x = = 1'
same_as_lua "-e does not read stdin" --input 'print("stdin ran")' -- -e 'print("e ran")'

# -l
same_as_lua "-l mod" --env "$MODULES" -- -l mod_hello -e 'print(mod_hello.name)'
same_as_lua "-l glued" --env "$MODULES" -- -lmod_hello -e 'print(mod_hello.name)'
same_as_lua "-l g=mod" --env "$MODULES" -- -l h=mod_hello -e 'print(h.name, mod_hello)'
same_as_lua "-l and -e run in order" --env "$MODULES" -- -e 'print("e first", mod_hello)' -l mod_hello -e 'print("e after", mod_hello.name)'
same_as_lua "-l missing module" --env "$MODULES" -- -l no_such_module -e 'print("not reached")'
same_as_lua "-l module that fails" --env "$MODULES" -- -l mod_broken
same_as_lua "-l standard library" -- -l string -e 'print(string == require "string")'

# -v
same_as_lua "-v" -- -v
same_as_lua "-v twice" -- -v -v
same_as_lua "-v and script" -- -v fixtures/args.lua one
same_as_lua "-v and -e" -- -v -e 'print(3)'
same_as_lua "-v does not read stdin" --input 'print("stdin ran")' -- -v

# -W
same_as_lua "warnings off by default" -- -e 'warn("hidden")'
same_as_lua "-W turns warnings on" -- -W -e 'warn("hello", " world")'
same_as_lua "-W acts in order" -- -e 'warn("before")' -W -e 'warn("after")'
same_as_lua "-W and @off" -- -W -e 'warn("@off") warn("hidden") warn("@on") warn("shown")'

# -E
same_as_lua "-E ignores LUA_INIT" --env 'LUA_INIT=print("init ran")' -- -E -e 'print("body")'
same_as_lua "-E ignores LUA_PATH" --env 'LUA_PATH=/nowhere/?.lua' -- -E -e 'print(package.path)'
same_as_lua "-E ignores LUA_CPATH" --env 'LUA_CPATH=/nowhere/?.so' -- -E -e 'print(package.cpath)'
same_as_lua "LUA_PATH without -E" --env 'LUA_PATH=/nowhere/?.lua;;' -- -e 'print(package.path)'
same_as_lua "LUA_PATH_5_4 wins" --env 'LUA_PATH=/a/?.lua' --env 'LUA_PATH_5_4=/b/?.lua' -- -e 'print(package.path)'

# -, -- and stdin
same_as_lua "- runs stdin with arguments" --stdin fixtures/stdin_chunk.lua -- - a b
same_as_lua "-- then nothing runs stdin" --stdin fixtures/stdin_chunk.lua -- --
same_as_lua "-- then a script" -- -- fixtures/args.lua -e x
same_as_lua "-- then - is a file name" --stdin fixtures/stdin_chunk.lua -- -- - a
same_as_lua "-e then -- runs nothing more" --stdin fixtures/stdin_chunk.lua -- -e 'print(1)' --
same_as_lua "no arguments, stdin not a terminal" --stdin fixtures/stdin_chunk.lua --
same_as_lua "stdin with a syntax error" --input 'x = = 1' --
same_as_lua "stdin with a runtime error" --input $'print("a")\nerror("from stdin")' --
same_as_lua "empty stdin" --

# Bad options: nothing runs, usage on stderr, status 1.
same_as_lua "unrecognized -x" -- -x
same_as_lua "unrecognized --x" -- --x
same_as_lua "unrecognized -ix" -- -ix
same_as_lua "unrecognized -vx" -- -vx
same_as_lua "unrecognized -Ex" -- -Ex
same_as_lua "unrecognized -Wx" -- -Wx
same_as_lua "-e needs argument" -- -e
same_as_lua "-l needs argument" -- -l
same_as_lua "-e followed by an option" -- -e -v
same_as_lua "bad option after a good -e" -- -e 'print("not run")' -z
same_as_lua "options after the script are arguments" -- fixtures/args.lua -x -e --

finish
