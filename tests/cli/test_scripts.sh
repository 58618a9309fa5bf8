# test_scripts.sh - running scripts: arguments and the arg table, error
# reports with tracebacks, error objects, exit statuses and os.exit,
# compared with the stock lua5.4 (see lib.sh).
source "$(dirname "$0")/lib.sh" "$@"

# Arguments: `...` of the main chunk and the arg table with negative indices.
same_as_lua "script without arguments" -- fixtures/args.lua
same_as_lua "script arguments" -- fixtures/args.lua one two 'three words' ''
same_as_lua "arg table with options" -- -W -e 'y = 1' -E fixtures/args.lua a
same_as_lua "arg table without a script" -- -e 'for i = -3, 3 do print(i, arg[i]) end'
same_as_lua "arg table of stdin script" --stdin fixtures/args.lua -- - x y
same_as_lua "script output without newline" -- -e 'io.write("partial")'
same_as_lua "script reads stdin" --input $'line one\nline two\n' -- -e 'for l in io.lines() do print("got", l) end'

# Errors: "progname: message", a traceback, status 1.
same_as_lua "runtime error with traceback" -- fixtures/error.lua
same_as_lua "error raised by Lua" -- fixtures/error_runtime.lua
same_as_lua "syntax error in script" -- fixtures/syntax_error.lua
same_as_lua "missing script file" -- fixtures/no_such_script.lua
same_as_lua "script is a directory" -- fixtures
same_as_lua "error object: table" -- fixtures/error_table.lua
same_as_lua "error object: table with __tostring" -- fixtures/error_tostring.lua
same_as_lua "error object: nil" -- -e 'error(nil)'
same_as_lua "error object: number" -- -e 'error(42)'
same_as_lua "error object: boolean" -- -e 'error(false)'
same_as_lua "error with level 2" -- -e 'local function f() error("caller blamed", 2) end f()'
same_as_lua "error without position" -- -e 'error("no position", 0)'
same_as_lua "__tostring returning a non-string" -- -e 'error(setmetatable({}, {__tostring = function() return 1 end}))'
same_as_lua "error in a coroutine" -- -e 'coroutine.wrap(function() error("in coroutine") end)()'
same_as_lua "error after output" -- -e 'print("out") io.write("pending") error("late")'
same_as_lua "pcall keeps running" -- -e 'print(pcall(error, "caught")) print("still running")'
same_as_lua "error in -e before script" -- -e 'error("e fails")' fixtures/args.lua

# Exit statuses and os.exit.
same_as_lua "success is 0" -- -e 'local x = 1'
same_as_lua "os.exit(3)" -- fixtures/exit_codes.lua 3
same_as_lua "os.exit(0)" -- fixtures/exit_codes.lua 0
same_as_lua "os.exit(true)" -- fixtures/exit_codes.lua true
same_as_lua "os.exit(false)" -- fixtures/exit_codes.lua false
same_as_lua "os.exit(5, true) closes the state" -- fixtures/exit_codes.lua close
same_as_lua "os.exit() is success" -- fixtures/exit_codes.lua
same_as_lua "os.exit in -e" -- -e 'os.exit(7)' -e 'print("not reached")'
same_as_lua "__gc runs at normal exit" -- -e 'setmetatable({}, {__gc = function() print("collected") end})'
same_as_lua "__close runs on error" -- -e 'do local x <close> = setmetatable({}, {__close = function() print("closed") end}) error("oops") end'

# Ctrl-C (SIGINT) stops a running script with "interrupted!" and a traceback.
same_as_lua_interrupted "SIGINT in the main chunk" -- -e 'io.stderr:write("ready\n") while true do end'
same_as_lua_interrupted "SIGINT in a function" -- -e 'local function spin() while true do end end io.stderr:write("ready\n") spin()'
same_as_lua_interrupted "SIGINT inside pcall is caught" -- -e 'io.stderr:write("ready\n") print(pcall(function() while true do end end)) print("after")'

# ... also inside coroutines (lua5.4 cannot: the hook is the main thread's),
# however they nest and whether a pcall catches the first "interrupted!".
lazylua_interrupted "SIGINT in a wrapped coroutine" "" -- -e 'io.stderr:write("ready\n") coroutine.wrap(function() while true do end end)()'
lazylua_interrupted "SIGINT in a resumed coroutine" "" -- -e 'io.stderr:write("ready\n") print(coroutine.resume(coroutine.create(function() while true do end end))) while true do end'
lazylua_interrupted "SIGINT in nested coroutines" "" -- -e 'io.stderr:write("ready\n") coroutine.wrap(function() coroutine.wrap(function() while true do end end)() end)()'
lazylua_interrupted "SIGINT in an inner coroutine its resumer catches" "" -- -e 'io.stderr:write("ready\n") coroutine.wrap(function() while true do coroutine.resume(coroutine.create(function() while true do end end)) end end)()'
lazylua_interrupted "SIGINT caught by pcall in a coroutine" "false" -- -e 'io.stderr:write("ready\n") coroutine.wrap(function() print((pcall(function() while true do end end))) end)() print("not reached")'

# The coroutine library lazylua replaces (for those interrupts) behaves as
# lua5.4's: results, messages, to-be-closed variables, stack limits.
same_as_lua "coroutine.resume and coroutine.wrap" -- fixtures/coroutines.lua

# The collector runs in generational mode, as in lua5.4.
same_as_lua "generational collector" -- -e 'print(collectgarbage("incremental"))'

finish
