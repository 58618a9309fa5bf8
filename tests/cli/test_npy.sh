#!/usr/bin/env bash
# test_npy.sh - tensor.load_npy/save_npy and load_npz/save_npz against NumPy
# itself (python3-numpy, tools/setup.sh): NumPy writes arrays of every
# dtype lazylua reads (big-endian, Fortran order, 0-dim, empty, versions
# 1.0/2.0/3.0, np.savez and np.savez_compressed) together with their values
# as a Lua table; lazylua loads the files and compares. Then lazylua writes
# files (views, pending lazy results, every dtype) that NumPy loads and
# compares with np.array_equal, dtypes and shapes included, against arrays
# NumPy computes itself. Runs lazy and eager (LAZYLUA_EAGER=1).
# Usage: bash test_npy.sh /path/to/lazylua
set -u
lazylua=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
export LAZYLUA_CACHE_DIR=$work/cache

# The python3 with NumPy: Debian's, even where another python3 comes first
# in PATH (pyenv and the like).
python=""
for candidate in python3 /usr/bin/python3; do
  if "$candidate" -c 'import numpy' 2>/dev/null; then python=$candidate; break; fi
done
if [ -z "$python" ]; then echo "test_npy: no python3 with NumPy (tools/setup.sh installs python3-numpy)"; exit 1; fi

# ---- NumPy writes, lazylua reads -------------------------------------------
"$python" - <<'PY' || { echo "FAIL: numpy could not write the fixtures"; exit 1; }
import numpy as np

rng = np.random.default_rng(7)
arrays = {
    "f32": rng.standard_normal((2, 3)).astype("<f4"),
    "f64": np.array([1.5, -0.0, np.inf, -np.inf, np.nan, 1e-300, 2.0**-1074], "<f8"),
    "i32": np.array([[0, -1, 2**31 - 1], [-2**31, 7, 8]], "<i4"),
    "i64": np.array([2**62 + 1, -2**63, 2**63 - 1, 0], "<i8"),
    "bool": np.array([[True, False], [False, True]]),
    "big_f4": np.array([1.25, -3.5, 1e30], ">f4"),
    "big_f8": np.array([[1.0 / 3, -2.5e-200]], ">f8"),
    "big_i4": np.array([1, -2, 2**31 - 1], ">i4"),
    "big_i8": np.array([2**40 + 3, -5], ">i8"),
    "big_u2": np.array([65535, 1, 256], ">u2"),
    "u1": np.array([0, 1, 255, 128], "|u1"),
    "i1": np.array([-128, 127, -1, 0], "|i1"),
    "i2": np.array([-32768, 32767, -2], "<i2"),
    "u2": np.array([65535, 0, 40000], "<u2"),
    "u4": np.array([4294967295, 0, 3], "<u4"),
    "u8": np.array([2**63 - 1, 0, 12345678901234], "<u8"),
    "f2": np.array([1.5, -2.0, 65504.0, 6e-8, np.inf], "<f2"),
    "scalar": np.array(3.25),
    "scalar_i64": np.array(-9, np.int64),
    "empty": np.zeros((0, 3), np.float32),
    "empty1": np.zeros((0,), np.int64),
    "fortran3": np.asfortranarray(np.arange(24, dtype=np.int32).reshape(2, 3, 4)),
    "fortran2": np.asfortranarray(rng.standard_normal((2, 5))),
    "rank8": np.arange(16, dtype=np.float64).reshape(1, 2, 1, 2, 1, 2, 1, 2),
}
assert arrays["fortran3"].flags.f_contiguous and not arrays["fortran3"].flags.c_contiguous

# How each NumPy dtype reads in lazylua (docs/tensor_api.md, "NumPy files").
lazylua_dtype = {"float32": "f32", "float64": "f64", "int32": "i32", "int64": "i64",
                 "bool": "bool", "uint8": "i32", "int8": "i32", "int16": "i32",
                 "uint16": "i32", "uint32": "i64", "uint64": "i64", "float16": "f32"}

def lua_number(value, kind):
    if kind == "b":
        return "true" if value else "false"
    if kind in "iu":
        return "math.tointeger(%d)" % value if value != -2**63 else "math.mininteger"
    value = float(value)
    if np.isnan(value):
        return "0/0"
    if np.isinf(value):
        return "math.huge" if value > 0 else "-math.huge"
    return repr(value) if "e" in repr(value) or "." in repr(value) else repr(value) + ".0"

def lua_case(name, a):
    values = ", ".join(lua_number(v, a.dtype.kind) for v in a.flatten(order="C"))
    shape = ", ".join(str(n) for n in a.shape)
    return '{name = "%s", dtype = "%s", shape = {%s}, values = {%s}}' % (
        name, lazylua_dtype[a.dtype.name], shape, values)

cases = []
for name, a in arrays.items():
    np.save(name + ".npy", a)
    cases.append(lua_case(name, a))
# Format versions 2.0 and 3.0 (4-byte header lengths)
for version in [(2, 0), (3, 0)]:
    name = "v%d" % version[0]
    a = np.arange(6, dtype=np.float32).reshape(3, 2) * version[0]
    with open(name + ".npy", "wb") as f:
        np.lib.format.write_array(f, a, version=version)
    cases.append(lua_case(name, a))

npz_plain = {"weights": arrays["f32"], "labels": arrays["i64"], "mask": arrays["bool"],
             "scalar": arrays["scalar"], "fortran": arrays["fortran3"]}
npz_compressed = {"big": np.arange(20000, dtype=np.float64) % 7, "f2": arrays["f2"],
                  "empty": arrays["empty"], "u1": arrays["u1"]}
np.savez("plain.npz", **npz_plain)
np.savez_compressed("compressed.npz", **npz_compressed)
np.savez("positional.npz", arrays["i32"], arrays["u2"])  # arr_0, arr_1

with open("expected.lua", "w") as f:
    f.write("return {\n  npy = {\n")
    for case in cases:
        f.write("    %s,\n" % case)
    for archive, content in [("plain", npz_plain), ("compressed", npz_compressed),
                             ("positional", {"arr_0": arrays["i32"], "arr_1": arrays["u2"]})]:
        f.write("  },\n  %s = {\n" % archive)
        for name, a in content.items():
            f.write("    %s,\n" % lua_case(name, a))
    f.write("  },\n}\n")

# Files lazylua must refuse with a clear message
np.save("complex.npy", np.array([1 + 2j], np.complex64))
np.save("object.npy", np.array([{}, 1], dtype=object), allow_pickle=True)
np.save("structured.npy", np.zeros(2, dtype=[("x", "<f4"), ("y", "<i4")]))
np.save("unicode.npy", np.array(["ab", "c"]))
np.save("u8_big.npy", np.array([2**63], np.uint64))
np.save("datetime.npy", np.array(["2020-01-01"], "datetime64[D]"))
PY

cat > read_numpy.lua <<'LUA'
local expected = dofile("expected.lua")
local checked = 0

local function same(a, b)
  if a ~= a then return b ~= b end  -- NaN
  return a == b and (a ~= 0 or 1 / a == 1 / b)  -- -0.0 stays -0.0
end

local function flatten(list, out)
  out = out or {}
  if type(list) ~= "table" then out[#out + 1] = list return out end
  for _, v in ipairs(list) do flatten(v, out) end
  return out
end

local function check(label, t, case)
  assert(tensor.is_tensor(t), label .. ": not a tensor")
  assert(t:dtype() == case.dtype, string.format("%s: dtype %s, expected %s", label, t:dtype(), case.dtype))
  local size = t:size()
  assert(#size == #case.shape, string.format("%s: %d dims, expected %d", label, #size, #case.shape))
  for d = 1, #size do
    assert(size[d] == case.shape[d], string.format("%s: extent %d is %d, expected %d", label, d, size[d], case.shape[d]))
  end
  local got = t:dim() == 0 and {t:item()} or flatten(t:tolist())
  assert(#got == #case.values, string.format("%s: %d values, expected %d", label, #got, #case.values))
  for i = 1, #got do
    local want = case.values[i]
    if case.dtype == "f32" and want == want and math.abs(want) ~= math.huge then
      want = string.unpack("<f", string.pack("<f", want))  -- the f32 nearest NumPy's value
    end
    if math.type(got[i]) == "integer" or math.type(want) == "integer" then
      assert(math.type(got[i]) == math.type(want) and got[i] == want,
             string.format("%s[%d]: %s, expected %s", label, i, tostring(got[i]), tostring(want)))
    else
      assert(type(got[i]) == type(want) and (type(want) == "boolean" and got[i] == want or same(got[i], want)),
             string.format("%s[%d]: %s, expected %s", label, i, tostring(got[i]), tostring(want)))
    end
  end
  checked = checked + 1
end

for _, case in ipairs(expected.npy) do
  local t = tensor.load_npy(case.name .. ".npy")
  check(case.name .. ".npy", t, case)
  -- and back: lazylua writes what it read, NumPy compares (below)
  tensor.save_npy("back_" .. case.name .. ".npy", t)
end
for _, archive in ipairs({"plain", "compressed", "positional"}) do
  local loaded = tensor.load_npz(archive .. ".npz")
  local count = 0
  for _ in pairs(loaded) do count = count + 1 end
  assert(count == #expected[archive], archive .. ".npz: " .. count .. " entries, expected " .. #expected[archive])
  for _, case in ipairs(expected[archive]) do
    check(archive .. ".npz:" .. case.name, loaded[case.name], case)
  end
end

local function refuses(file, ...)
  local ok, message = pcall(tensor.load_npy, file)
  assert(not ok, file .. " loaded")
  for _, needle in ipairs({...}) do
    assert(message:find(needle, 1, true), file .. ": the message lacks '" .. needle .. "': " .. message)
  end
  checked = checked + 1
end
refuses("complex.npy", "tensor.load_npy", "complex.npy", "complex numbers", "<c8")
refuses("object.npy", "Python objects", "|O")
refuses("structured.npy", "structured dtype")
refuses("unicode.npy", "strings", "<U2")
refuses("u8_big.npy", "9223372036854775808", "beyond i64's range")
refuses("datetime.npy", "dates or times")
print("read_numpy: " .. checked .. " checks")
LUA

cat > write_numpy.lua <<'LUA'
-- Tensors NumPy recomputes in check_lazylua.py: keep the two in step.
local base = tensor.arange(12):reshape(3, 4)               -- i64
local transposed = base:t()                                -- a non-contiguous view
local narrowed = base:narrow(2, 2, 2)                      -- a view at an offset
local pending = (base:double() * 0.5 + 1):exp():sum(1)     -- a lazy result, never synced before
local f32 = tensor.linspace(-1, 1, 7):float() / 3
local i32 = tensor.new({{-2147483648, 2147483647}, {0, -1}}, {dtype = "i32"})
local i64 = tensor.new({math.mininteger, math.maxinteger, 0}, {dtype = "i64"})
local bool = base:gt(5)
local special = tensor.new({0 / 0, math.huge, -math.huge, -0.0, 1e-310}, {dtype = "f64"})
local scalar = tensor.new(2.5, {dtype = "f64"})
local empty = tensor.zeros(0, 4):float()
local rank8 = tensor.arange(16):float():reshape(2, 1, 2, 1, 2, 1, 2, 1)
local files = {transposed = transposed, narrowed = narrowed, pending = pending, f32 = f32, i32 = i32,
               i64 = i64, bool = bool, special = special, scalar = scalar, empty = empty, rank8 = rank8}
for name, t in pairs(files) do tensor.save_npy("out_" .. name .. ".npy", t) end
tensor.save_npz("out_plain.npz", files)
tensor.save_npz("out_compressed.npz", files, {compressed = true})
-- and lazylua reads its own archive back unchanged
local again = tensor.load_npz("out_compressed.npz")
for name, t in pairs(files) do
  assert(again[name]:dtype() == t:dtype(), name)
  assert(tostring(again[name]) == tostring(t), name .. ":\n" .. tostring(again[name]) .. "\nvs\n" .. tostring(t))
end
print("write_numpy: done")
LUA

cat > check_lazylua.py <<'PY'
import sys
import zipfile
import numpy as np

failures = []
def check(label, got, want):
    if got.dtype != want.dtype or got.shape != want.shape or not np.array_equal(got, want, equal_nan=want.dtype.kind == "f"):
        failures.append("%s: got %s %s %r, expected %s %s %r" % (label, got.dtype, got.shape, got, want.dtype, want.shape, want))
    elif want.dtype.kind == "f" and not np.array_equal(np.signbit(got[want == 0]), np.signbit(want[want == 0])):
        failures.append("%s: signs of zeros differ: %r vs %r" % (label, got, want))

base = np.arange(12, dtype=np.int64).reshape(3, 4)
expected = {
    "transposed": base.T,
    "narrowed": base[:, 1:3],
    "pending": np.exp(base.astype(np.float64) * 0.5 + 1).sum(0),
    "f32": (np.linspace(-1, 1, 7).astype(np.float32) / np.float32(3)),
    "i32": np.array([[-2147483648, 2147483647], [0, -1]], np.int32),
    "i64": np.array([-2**63, 2**63 - 1, 0], np.int64),
    "bool": base > 5,
    "special": np.array([np.nan, np.inf, -np.inf, -0.0, 1e-310]),
    "scalar": np.array(2.5),
    "empty": np.zeros((0, 4), np.float32),
    "rank8": np.arange(16, dtype=np.float32).reshape(2, 1, 2, 1, 2, 1, 2, 1),
}
for name, want in expected.items():
    got = np.load("out_%s.npy" % name)
    if name == "pending":  # a sum: reassociation may move the last bit
        if got.dtype != want.dtype or got.shape != want.shape or not np.allclose(got, want, rtol=1e-12):
            failures.append("pending: %r vs %r" % (got, want))
        continue
    check("out_%s.npy" % name, got, want)
    with open("out_%s.npy" % name, "rb") as f:
        if np.lib.format.read_magic(f) != (1, 0):
            failures.append("out_%s.npy is not version 1.0" % name)
for archive, method in [("out_plain.npz", zipfile.ZIP_STORED), ("out_compressed.npz", zipfile.ZIP_DEFLATED)]:
    with zipfile.ZipFile(archive) as z:
        if z.testzip() is not None:
            failures.append("%s: bad CRC in %s" % (archive, z.testzip()))
        methods = {info.compress_type for info in z.infolist() if info.file_size > 200}
        if methods != {method}:
            failures.append("%s: compression methods %s" % (archive, methods))
    with np.load(archive) as loaded:
        if sorted(loaded.files) != sorted(expected):
            failures.append("%s: entries %s" % (archive, sorted(loaded.files)))
        for name, want in expected.items():
            if name != "pending":
                check("%s:%s" % (archive, name), loaded[name], want)

# What lazylua read and wrote back equals what NumPy wrote, in lazylua's dtype
import glob
mapping = {"float16": np.float32, "uint8": np.int32, "int8": np.int32, "int16": np.int32,
           "uint16": np.int32, "uint32": np.int64, "uint64": np.int64}
for path in sorted(glob.glob("back_*.npy")):
    original = np.load(path[len("back_"):])
    native = original.astype(original.dtype.newbyteorder("="))
    want = native.astype(mapping.get(native.dtype.name, native.dtype))
    check(path, np.load(path), want.copy(order="C"))

for failure in failures:
    print("FAIL:", failure)
print("check_lazylua: %d failures" % len(failures))
sys.exit(1 if failures else 0)
PY

failures=0
for mode in lazy eager; do
  rm -f back_*.npy out_*
  eager=$([ $mode = eager ] && echo 1 || echo 0)
  if ! LAZYLUA_EAGER=$eager timeout -k 5 120 "$lazylua" read_numpy.lua; then
    echo "FAIL ($mode): lazylua reading NumPy's files"; failures=$((failures + 1))
  fi
  if ! LAZYLUA_EAGER=$eager timeout -k 5 120 "$lazylua" write_numpy.lua; then
    echo "FAIL ($mode): lazylua writing files"; failures=$((failures + 1))
  fi
  if ! "$python" check_lazylua.py; then
    echo "FAIL ($mode): NumPy reading lazylua's files"; failures=$((failures + 1))
  fi
done
if [ $failures -ne 0 ]; then echo "test_npy: $failures failures"; exit 1; fi
echo "test_npy: OK"
