#!/bin/bash
# test_blas_core.sh PROGRAM MODULE_DIR HOST PRELOADED_HOST - the OpenBLAS
# kernel set ("core") in use, read through tensor.config(), in the three ways
# lazylua runs: the lazylua program, lazylua.so required by the stock lua5.4,
# and a host program linked to liblazylua (HOST). PRELOADED_HOST is the same
# host linked to libopenblas too, so OpenBLAS is loaded before lazylua is.
#
# The expected core is derived here from /proc/cpuinfo, independently of
# tensor/blas.cpp (which reads cpuid): AVX-512 F+BW+VL+DQ -> SkylakeX,
# AVX2+FMA -> Haswell, AVX -> Sandybridge. On any CPU with AVX2 a pre-AVX
# core (Prescott, Nehalem...) is a failure whoever chose it.
set -uo pipefail
program=$1
module_dir=$2
host=$3
preloaded_host=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LAZYLUA_CACHE_DIR=$work/cache
unset OPENBLAS_CORETYPE LAZYLUA_BLAS OPENBLAS_VERBOSE LUA_INIT LUA_INIT_5_4

failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { [[ $flags == *" $1 "* ]]; }
expected=""
if has avx512f && has avx512bw && has avx512vl && has avx512dq; then
  expected=SkylakeX
elif has avx2 && has fma; then
  expected=Haswell
elif has avx; then
  expected=Sandybridge
fi
pre_avx=" Unknown Katmai Coppermine Northwood Prescott Banias Atom Core2 Penryn Dunnington Nehalem "
pre_avx+="Athlon Opteron Opteron_SSE3 Barcelona Nano Bobcat "
echo "CPU flags give: ${expected:-no AVX, the core OpenBLAS picks is kept}"

# A chunk that runs a product, checks it by hand, and prints the core, who chose it, and OPENBLAS_CORETYPE as the
# script and a child process see it.
read -r -d '' chunk <<'EOF'
local t = tensor or require "lazylua"
local a = t.new({{1, 2}, {3, 4}}, {dtype = "f32"})
local p = a:matmul(a):tolist()  -- {{7, 10}, {15, 22}}
assert(p[1][1] == 7 and p[1][2] == 10 and p[2][1] == 15 and p[2][2] == 22, "wrong product")
local c = t.config()
local child = io.popen("printenv OPENBLAS_CORETYPE || echo unset"):read("l")
print(c.blas_core, c.blas_core_source, tostring(os.getenv("OPENBLAS_CORETYPE")), child, c.blas_threads)
EOF

run_program() { "$program" -e "$chunk"; }
run_module() { lua5.4 -e "package.cpath = '$module_dir/?.so;' .. package.cpath" -e "$chunk"; }
run_host() { "$host" "$chunk"; }
run_preloaded() { "$preloaded_host" "$chunk"; }

# check NAME EXPECTED_CORE EXPECTED_SOURCE EXPECTED_ENV COMMAND...
check() {
  local name=$1 want_core=$2 want_source=$3 want_env=$4
  shift 4
  local output
  output=$("$@" 2>"$work/stderr") || { fail "$name: exit status $?: $(cat "$work/stderr")"; return; }
  local core source env child blas_threads
  IFS=$'\t' read -r core source env child blas_threads <<<"$output"
  echo "  $name: core $core ($source), OPENBLAS_CORETYPE in script '$env', in a child '$child'"
  if [[ $pre_avx == *" $core "* ]] && { has avx2 || has avx512f; }; then
    fail "$name: a CPU with AVX2/AVX-512 runs the pre-AVX OpenBLAS core $core"
  fi
  [ -z "$want_core" ] || [ "$core" = "$want_core" ] || fail "$name: core $core, expected $want_core"
  [ -z "$want_source" ] || [ "$source" = "$want_source" ] ||
    fail "$name: core chosen by $source, expected $want_source"
  [ "$env" = "$want_env" ] || fail "$name: os.getenv('OPENBLAS_CORETYPE') = $env, expected $want_env"
  local want_child=$want_env
  [ "$want_env" = nil ] && want_child=unset
  [ "$child" = "$want_child" ] || fail "$name: a child process sees OPENBLAS_CORETYPE=$child"
  [ "$blas_threads" = 1 ] || fail "$name: OpenBLAS runs $blas_threads threads of its own, expected 1"
}

source=lazylua
[ -n "$expected" ] || source=openblas
for way in program module host; do
  # (a) lazylua's choice, and the environment left as the user had it.
  check "$way" "$expected" "$source" nil "run_$way"
  # (b) the user's OPENBLAS_CORETYPE wins, and stays visible.
  OPENBLAS_CORETYPE=Haswell check "$way with OPENBLAS_CORETYPE=Haswell" Haswell \
    OPENBLAS_CORETYPE Haswell "run_$way"
done

# A host that loaded OpenBLAS itself: its copy runs with the core OpenBLAS
# chose (still never a pre-AVX one here: check() tests that), and lazylua
# reports it as OpenBLAS's choice.
# (grep reads all of ldd's output: with pipefail, grep -q's early exit could
# fail the pipeline by ldd's SIGPIPE.)
if ldd "$preloaded_host" | grep libopenblas >/dev/null; then
  check "host with OpenBLAS linked" "" openblas nil run_preloaded
  OPENBLAS_CORETYPE=Haswell check "host with OpenBLAS linked, OPENBLAS_CORETYPE=Haswell" \
    Haswell OPENBLAS_CORETYPE Haswell run_preloaded
else
  fail "$preloaded_host does not link libopenblas"
fi

# lazylua's own targets do not link OpenBLAS: it is loaded after choosing.
for file in "$program" "$module_dir/lazylua.so" "$host"; do
  if readelf -d "$file" | grep NEEDED | grep -q openblas; then fail "$file links libopenblas"; fi
done
liblazylua=$(ldd "$host" | awk '/liblazylua/ {print $3}')
if readelf -d "$liblazylua" | grep NEEDED | grep -q openblas; then fail "$liblazylua links libopenblas"; fi

# No OpenBLAS: a float product is a Lua error naming the cause, the process
# goes on (integer products need no BLAS), and -v still prints.
output=$(LAZYLUA_BLAS=$work/missing/libopenblas.so.0 "$program" -e '
local a = tensor.ones(2, 2)
local ok, message = pcall(function() return a:matmul(a):tolist() end)
print(ok, message)
local i = tensor.new({{1, 2}, {3, 4}}, {dtype = "i32"})
print(i:matmul(i):tolist()[2][2], tensor.config().blas)' 2>&1)
expected_output="false	(command line):3: error in the op recorded at (command line):3: matmul: \
cannot load OpenBLAS ($work/missing/libopenblas.so.0: cannot open shared object file: \
No such file or directory); LAZYLUA_BLAS names that file
22	none"
[ "$output" = "$expected_output" ] || fail "without OpenBLAS printed:
$output
expected:
$expected_output"
output=$(LAZYLUA_BLAS=$work/missing.so "$program" -v 2>&1 | sed -n 2p)
[[ $output == "tensors: "*"no BLAS: cannot load OpenBLAS"*"; convolutions: oneDNN "* ]] ||
  fail "-v without OpenBLAS: $output"

# -v: one line on what the tensors run on, between lazylua's and Lua's lines,
# ending with the library and ISA of convolutions.
output=$("$program" -v | sed -n 2p)
convolutions="; convolutions: oneDNN "
[[ $output == "tensors: "*" threads, "*" kernels, OpenBLAS "*" with ${expected:-}"*"$convolutions"* ]] ||
  fail "-v second line: '$output'"

if [ "$failures" -gt 0 ]; then
  echo "$failures failures" >&2
  exit 1
fi
echo "blas core test passed"
