# test_lazylua.sh - what lazylua has and lua5.4 has not: its version line,
# the `tensor` global; and the program name taken from argv[0].
source "$(dirname "$0")/lib.sh" "$@"

lua_version=$("$REFERENCE_LUA" -v)
lazylua_line=$("$LAZYLUA" -v | head -n 1)
config_line=$("$LAZYLUA" -v | sed -n 2p)
expect_lazylua "-v: lazylua's lines, then Lua's line last" "$lazylua_line
$config_line
$lua_version" 0 -- -v
cases=$((cases + 1))
if echo "$config_line" | grep -Eq "$CONFIG_LINE_PATTERN"; then
  report_case "-v second line: threads, kernels and BLAS" 1 ""
else
  echo "  second line of -v: '$config_line'"
  report_case "-v second line: threads, kernels and BLAS" 0 "-v"
fi
# It ends with what runs convolutions: oneDNN's version and the ISA it chose.
cases=$((cases + 1))
if echo "$config_line" | grep -Eq '; convolutions: oneDNN [0-9]+\.[0-9]+\.[0-9]+, [a-z0-9_]+$'; then
  report_case "-v second line ends with oneDNN and its ISA" 1 ""
else
  echo "  second line of -v: '$config_line'"
  report_case "-v second line ends with oneDNN and its ISA" 0 "-v"
fi
cases=$((cases + 1))
if echo "$lazylua_line" | grep -Eq "$VERSION_LINE_PATTERN"; then
  report_case "-v first line names lazylua" 1 ""
else
  echo "  first line of -v: '$lazylua_line'"
  report_case "-v first line names lazylua" 0 "-v"
fi
expect_lazylua "tensor global" "table	table" 0 -- -e 'print(type(tensor), type(package.loaded.tensor))'
expect_lazylua "tensor global with -E" "table" 0 -- -E -e 'print(type(tensor))'

# Messages start with argv[0] as given.
cases=$((cases + 1))
message=$( (exec -a ./my-lua "$LAZYLUA" -e 'error("x", 0)') 2>&1 | head -n 1)
if [ "$message" = "./my-lua: x" ]; then
  report_case "program name is argv[0]" 1 ""
else
  echo "  got: '$message'"
  report_case "program name is argv[0]" 0 "-e error"
fi
cases=$((cases + 1))
message=$( (exec -a "" "$LAZYLUA" -e 'error("x", 0)') 2>&1 | head -n 1)
if [ "$message" = "lazylua: x" ]; then
  report_case "empty argv[0] gives 'lazylua'" 1 ""
else
  echo "  got: '$message'"
  report_case "empty argv[0] gives 'lazylua'" 0 "-e error"
fi

finish
