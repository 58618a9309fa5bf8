# test_interactive.sh - the REPL with stdin from a pipe or file (-i, or no
# arguments): prompts, echoed lines and results on stdout, errors on stderr,
# compared with `lua5.4 -i < file` (see lib.sh). The terminal REPL (readline,
# Ctrl-C, completion, history) is tested through a pty in
# tests/unit/repl_pty_test.cpp.
source "$(dirname "$0")/lib.sh" "$@"

same_as_lua "expressions print" --input $'1 + 1\n"text"\nnil\n1, 2, nil\n' -- -i
same_as_lua "= prints" --input $'=2 * 21\n= "spaced"\n' -- -i
same_as_lua "statements print nothing" --input $'x = 10\nlocal y = 2\nx\ny\n' -- -i
same_as_lua "return prints" --input $'return 1, 2\nreturn\n' -- -i
same_as_lua "multi-line function" --input $'function f()\nreturn 7\nend\nf()\n' -- -i
same_as_lua "multi-line table" --input $'t = {\n1,\n2,\n}\n#t\n' -- -i
same_as_lua "multi-line string" --input $'s = [[a\nb]]\ns\n' -- -i
same_as_lua "runtime error" --input $'error("boom")\nprint("after")\n' -- -i
same_as_lua "error objects" --input $'error({})\nerror(setmetatable({}, {__tostring = function() return "E!" end}))\nerror()\n' -- -i
same_as_lua "syntax error" --input $'x = = 1\nprint("after")\n' -- -i
same_as_lua "syntax error after continuation" --input $'if x then\n)\nprint("after")\n' -- -i
same_as_lua "end of input inside a chunk" --input $'function f()\n' -- -i
same_as_lua "_PROMPT and _PROMPT2" --input $'_PROMPT = "lua> "\n_PROMPT2 = "...> "\nif true then\nprint("inside")\nend\n' -- -i
same_as_lua "_PROMPT through __tostring" --input $'_PROMPT = setmetatable({}, {__tostring = function() return "obj> " end})\n1\n' -- -i
same_as_lua "_PROMPT a number" --input $'_PROMPT = 42\n1\n' -- -i
same_as_lua "print replaced" --input $'print = function(...) io.write("[", select("#", ...), "]\\n") end\n1, 2\n' -- -i
same_as_lua "print removed" --input $'print = nil\n1\n' -- -i
same_as_lua "values with __tostring" --input $'setmetatable({}, {__tostring = function() return "custom" end})\n' -- -i
same_as_lua "__tostring error while printing" --input $'setmetatable({}, {__tostring = function() error("bad tostring") end})\n"next"\n' -- -i
same_as_lua "empty and blank lines" --input $'\n   \n1\n' -- -i
same_as_lua "last line without newline" --input $'print("a")\n2' -- -i
same_as_lua "comment line" --input $'-- just a comment\n1 -- trailing comment\n' -- -i
same_as_lua "long line" --input "print('$(printf 'x%.0s' {1..600})')" -- -i
same_as_lua "os.exit in the REPL" --input $'print("bye")\nos.exit(3)\nprint("not reached")\n' -- -i
same_as_lua "-i after a script" --input $'x\n' -- -i fixtures/args.lua a
same_as_lua "-i after -e" --input $'x\n' -- -i -e 'x = "from -e"'
same_as_lua "-i after a failing script" --input $'print("not reached")\n' -- -i fixtures/error.lua
same_as_lua "-i and -v" --input $'1\n' -- -v -i
same_as_lua "script reading stdin then REPL" --input $'first\n' -- -i -e 'print("read", io.read("l"))'
same_as_lua "empty input" -- -i

finish
