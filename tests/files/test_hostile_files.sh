#!/usr/bin/env bash
# test_hostile_files.sh - files chosen to break the readers: IDX files
# (data.read_idx), CSV files (data.read_csv), gzip streams, checkpoints
# (tensor.load), NumPy files (tensor.load_npy, load_npz), ONNX files
# (onnx.load, read_tensor) and the compiled-graph cache's entries, each
# truncated, damaged, lying about their sizes, a gzip or deflate bomb, or
# replaced by a FIFO, a symlink to /dev/zero, a device, a directory or a
# terabyte-long sparse file; and paths chosen to break the writers
# (onnx.export, tensor.profile, LAZYLUA_PROFILE, plot.line_chart): a FIFO, a
# device, a directory, a write that fails or is killed halfway. Every case
# runs in its own process under a timeout and must end in a clear Lua error
# naming the problem, or in the correct result: never a hang, a crash, a
# sanitizer report, a silent wrong value, or a special file or old file
# written into.
# Usage: bash test_hostile_files.sh /path/to/lazylua
set -u
lazylua=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")  # the cases run elsewhere
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
cases=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# Helpers every case's Lua code can use: dir (this test's directory),
# expect_error(f, needle...), expect(got, want) on nested tables, and
# checkpoint(table_bytes) building a checkpoint file with a valid checksum
# around a serialized Table (the fields of interp/checkpoint.proto).
cat > "$work/prelude.lua" <<'LUA'
dir = os.getenv("HOSTILE_DIR")
data = require "data"

local function quit(message)
  io.stderr:write(message, "\n")
  os.exit(3)
end

function expect_error(f, ...)
  local ok, message = pcall(f)
  if ok then quit("expected an error, got a result: " .. tostring(message)) end
  message = tostring(message)
  for _, needle in ipairs({...}) do
    if not message:find(needle, 1, true) then
      quit(string.format("the message lacks %q: %s", needle, message:sub(1, 400)))
    end
  end
  if #message > 600 then quit("a message of " .. #message .. " bytes: " .. message:sub(1, 200)) end
  if message:find("[%z\1-\8\14-\31\127-\255]") then quit("unprintable bytes in the message") end
end

local function show(v)
  if math.type(v) then return string.format("%.17g", v) end  -- 1 and 1.0 alike
  if type(v) ~= "table" then return tostring(v) end
  local parts = {}
  for i = 1, #v do parts[i] = show(v[i]) end
  return "{" .. table.concat(parts, ", ") .. "}"
end

function expect(got, want)
  if show(got) ~= show(want) then quit("got " .. show(got) .. ", expected " .. show(want)) end
end

function write(name, bytes)
  local f = assert(io.open(dir .. "/" .. name, "wb"))
  f:write(bytes)
  f:close()
  return dir .. "/" .. name
end

function read(name)
  local f = assert(io.open(dir .. "/" .. name, "rb"))
  local bytes = f:read("a")
  f:close()
  return bytes
end

-- protobuf wire format
function varint(n)
  local out = {}
  repeat
    local byte = n & 0x7f
    n = n >> 7  -- logical shift: negative int64s take ten bytes
    out[#out + 1] = string.char(n ~= 0 and (byte | 0x80) or byte)
  until n == 0
  return table.concat(out)
end
function field(number, bytes) return varint(number << 3 | 2) .. varint(#bytes) .. bytes end
function int_field(number, n) return varint(number << 3) .. varint(n) end

local crc_table = {}
for i = 0, 255 do
  local c = i
  for _ = 1, 8 do c = (c & 1) == 1 and (0xEDB88320 ~ (c >> 1)) or (c >> 1) end
  crc_table[i] = c
end
local function crc32(bytes)
  local c = 0xFFFFFFFF
  for i = 1, #bytes do c = crc_table[(c ~ bytes:byte(i)) & 0xff] ~ (c >> 8) end
  return c ~ 0xFFFFFFFF
end

-- A checkpoint whose payload is the serialized Table `table_bytes`.
function checkpoint(table_bytes)
  local magic = "lazylua-checkpoint"
  return field(1, magic) .. int_field(2, 1) .. field(3, table_bytes) ..
         varint(4 << 3 | 5) .. string.pack("<I4", crc32(magic .. table_bytes))
end

-- The process's peak resident memory so far (VmHWM), in MiB; a case that
-- must not have inflated a bomb checks it stayed small.
function expect_small_rss(limit_mib)
  for line in io.lines("/proc/self/status") do
    local kib = line:match("^VmHWM:%s*(%d+)")
    if kib and tonumber(kib) / 1024 > limit_mib then
      quit(string.format("peak RSS %.0f MiB, more than %d MiB", tonumber(kib) / 1024, limit_mib))
    end
  end
end

-- Whether `path` is a FIFO ("p") or a character device ("c") (test -p, -c).
function is_kind(flag, path) return os.execute("test -" .. flag .. " '" .. path .. "'") == true end

-- A zip archive of entries {name =, method = 0 or 8, crc =, size = (the
-- uncompressed size claimed), data = (the stored bytes)}, as .npz files are.
function zip(entries)
  local files, directory, offset = {}, {}, 0
  for _, e in ipairs(entries) do
    local common = string.pack("<I2I2I2I2I2I4I4I4I2I2", 20, 0, e.method, 0, 0x21, e.crc, #e.data,
                               e.size, #e.name, 0)
    local file = "PK\3\4" .. common .. e.name .. e.data
    directory[#directory + 1] = "PK\1\2" .. string.pack("<I2", 20) .. common ..
                                string.pack("<I2I2I2I4I4", 0, 0, 0, 0, offset) .. e.name
    files[#files + 1] = file
    offset = offset + #file
  end
  local central = table.concat(directory)
  return table.concat(files) .. central ..
         string.pack("<I4I2I2I2I2I4I4I2", 0x06054b50, 0, 0, #entries, #entries, #central, offset, 0)
end

-- A Table of one entry "w" holding a tensor (dtype code, shape, data).
function tensor_table(dtype, shape, bytes)
  local packed = {}
  for i, extent in ipairs(shape) do packed[i] = varint(extent) end
  local tensor_data = int_field(1, dtype) .. field(2, table.concat(packed)) .. field(3, bytes)
  local value = field(6, tensor_data)
  return field(1, field(2, "w") .. field(3, value))
end
LUA

# check NAME SECONDS LUA_CODE: runs the code in a fresh process; it must
# finish in time and exit 0 (the helpers exit 3 on a wrong answer).
check() {
  local name=$1 limit=$2 code=$3
  cases=$((cases + 1))
  HOSTILE_DIR=$work timeout -k 5 "$limit" "$lazylua" -e "dofile('$work/prelude.lua')" -e "$code" \
    > "$work/out" 2> "$work/err"
  local status=$?
  if [ $status -eq 124 ] || [ $status -eq 137 ]; then
    fail "$name: no result within ${limit} s (a hang)"
  elif [ $status -gt 128 ]; then
    fail "$name: killed by signal $((status - 128)): $(tail -c 800 "$work/err")"
  elif [ $status -ne 0 ]; then
    fail "$name: exit $status: $(head -c 800 "$work/err")"
  fi
}

# ---------------------------------------------------------------------------
# IDX files (data.read_idx)

cd "$work" || exit 1
printf '\x00\x00\x08\x01\x00\x00\x00\x03\x07\x08\x09' > ok.idx
gzip -c ok.idx > ok.idx.gz
: > empty.idx
printf '\x00\x00\x08\x02\x00\x00\x00\x03' > header_cut.idx
printf '\x00\x00\x08\x01\x00\x00\x00\x05\x01\x02\x03' > data_cut.idx
printf '\x00\x00\x08\x01\x00\x00\x00\x02\x01\x02\x03' > trailing.idx
printf 'PK\x03\x04\x00\x00\x00\x00' > magic.idx
printf '\x00\x00\x0a\x01\x00\x00\x00\x01\x01' > type.idx
printf '\x00\x00\x08\x00' > rank0.idx
printf '\x00\x00\x08\x09' > rank9.idx
printf '\x00\x00\x08\x04\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01' > huge_dims.idx
printf '\x00\x00\x08\x02\x00\x01\x00\x00\x00\x01\x00\x00\x01\x02\x03' > four_giga.idx
printf '\x00\x00\x08\x02\x00\x00\x00\x00\xff\xff\xff\xff' > zero_extent.idx
printf '\x00\x00\x0d\x01\x00\x00\x00\x02\x7f\xc0\x00\x00\xff\x80\x00\x00' > nan_inf.idx
size=$(stat -c %s ok.idx.gz)
cp ok.idx.gz flipped.idx.gz
printf '\xff' | dd of=flipped.idx.gz bs=1 seek=$((size / 2)) conv=notrunc status=none
head -c $((size - 6)) ok.idx.gz > cut.idx.gz
cp ok.idx.gz crc.idx.gz
printf '\x00\x00\x00\x00' | dd of=crc.idx.gz bs=1 seek=$((size - 8)) conv=notrunc status=none
cp ok.idx.gz isize.idx.gz
printf '\xff\xff\xff\xff' | dd of=isize.idx.gz bs=1 seek=$((size - 4)) conv=notrunc status=none
{ cat ok.idx.gz; printf 'not gzip'; } > after.idx.gz
{ head -c 5 ok.idx | gzip -c; tail -c +6 ok.idx | gzip -c; } > members.idx.gz
# gzip bombs behind a header announcing 3 bytes: 256 MiB of zeros in one
# member, and 4 GiB in 64 members of 64 MiB
{ cat ok.idx; head -c 256M /dev/zero; } | gzip -1 > bomb1.idx.gz
head -c 64M /dev/zero | gzip -1 > zeros.gz
{ cat ok.idx.gz; for _ in $(seq 64); do cat zeros.gz; done; } > bomb64.idx.gz
rm zeros.gz
mkfifo fifo.idx
ln -s /dev/zero zero_link.idx
mkdir dir.idx
truncate -s 1T sparse.idx

check "idx: a valid file" 20 'expect(data.read_idx(dir .. "/ok.idx"):tolist(), {7, 8, 9})'
check "idx: a valid gzip file" 20 'expect(data.read_idx(dir .. "/ok.idx.gz"):tolist(), {7, 8, 9})'
check "idx: an empty file" 20 'expect_error(function() data.read_idx(dir .. "/empty.idx") end, "is truncated: no IDX header")'
check "idx: a cut header" 20 'expect_error(function() data.read_idx(dir .. "/header_cut.idx") end, "is truncated in its header")'
check "idx: cut data" 20 'expect_error(function() data.read_idx(dir .. "/data_cut.idx") end, "announces 5 elements, the file holds 3")'
check "idx: trailing data" 20 'expect_error(function() data.read_idx(dir .. "/trailing.idx") end, "has data after the 2 elements")'
check "idx: a wrong magic number" 20 'expect_error(function() data.read_idx(dir .. "/magic.idx") end, "is not an IDX file")'
check "idx: an unknown element type" 20 'expect_error(function() data.read_idx(dir .. "/type.idx") end, "unknown IDX element type 0x0a")'
check "idx: no dimensions" 20 'expect_error(function() data.read_idx(dir .. "/rank0.idx") end, "has 0 dimensions")'
check "idx: nine dimensions" 20 'expect_error(function() data.read_idx(dir .. "/rank9.idx") end, "has 9 dimensions")'
check "idx: dims whose product overflows" 20 'expect_error(function() data.read_idx(dir .. "/huge_dims.idx") end, "data.read_idx")'
check "idx: 2^32 elements announced, 3 held" 20 'expect_error(function() data.read_idx(dir .. "/four_giga.idx") end, "announces 4294967296 elements, the file holds 3")'
check "idx: a 0 extent next to a huge one" 20 '
  local t = data.read_idx(dir .. "/zero_extent.idx")
  expect(t:size(), {0, 4294967295})
  expect(t:numel(), 0)'
check "idx: NaN and -inf stay what they are" 20 '
  local v = data.read_idx(dir .. "/nan_inf.idx"):tolist()
  assert(v[1] ~= v[1] and v[2] == -math.huge, "decoded " .. tostring(v[1]) .. ", " .. tostring(v[2]))'
check "idx: a flipped byte in the gzip stream" 20 'expect_error(function() data.read_idx(dir .. "/flipped.idx.gz") end, "is corrupted or truncated")'
check "idx: a cut gzip stream" 20 'expect_error(function() data.read_idx(dir .. "/cut.idx.gz") end, "is corrupted or truncated")'
check "idx: a wrong gzip crc32" 20 'expect_error(function() data.read_idx(dir .. "/crc.idx.gz") end, "is corrupted or truncated")'
check "idx: a wrong gzip length" 20 'expect_error(function() data.read_idx(dir .. "/isize.idx.gz") end, "is corrupted or truncated")'
check "idx: bytes after the last gzip member are ignored (as gzip -d does)" 20 'expect(data.read_idx(dir .. "/after.idx.gz"):tolist(), {7, 8, 9})'
check "idx: two gzip members" 20 'expect(data.read_idx(dir .. "/members.idx.gz"):tolist(), {7, 8, 9})'
check "idx: a one-member gzip bomb" 20 'expect_error(function() data.read_idx(dir .. "/bomb1.idx.gz") end, "decompresses to more than the 11 bytes its content announces")'
check "idx: a 64-member gzip bomb" 20 'expect_error(function() data.read_idx(dir .. "/bomb64.idx.gz") end, "decompresses to more than the 11 bytes its content announces")'
check "idx: a FIFO (no writer)" 20 'expect_error(function() data.read_idx(dir .. "/fifo.idx") end, "is a FIFO, not a regular file")'
check "idx: a symlink to /dev/zero" 20 'expect_error(function() data.read_idx(dir .. "/zero_link.idx") end, "is a device, not a regular file")'
check "idx: /dev/null" 20 'expect_error(function() data.read_idx("/dev/null") end, "is a device, not a regular file")'
check "idx: a directory" 20 'expect_error(function() data.read_idx(dir .. "/dir.idx") end, "is a directory, not a regular file")'
check "idx: a missing file" 20 'expect_error(function() data.read_idx(dir .. "/missing.idx") end, "cannot open", "No such file")'
check "idx: a sparse terabyte" 20 'expect_error(function() data.read_idx(dir .. "/sparse.idx") end, "data.read_idx", "cannot allocate")'
check "idx: a /proc file (reads as empty)" 20 'expect_error(function() data.read_idx("/proc/self/status") end, "is not an IDX file")'
rm -f bomb1.idx.gz bomb64.idx.gz sparse.idx

# ---------------------------------------------------------------------------
# CSV files (data.read_csv)

printf '1,2\n3,4\n' > ok.csv
gzip -c ok.csv > ok.csv.gz
printf '\xef\xbb\xbfa,b\n1,2\n' > bom_header.csv
printf '\xef\xbb\xbf1,2\n3,4\n' > bom.csv
printf '1,2\r\n3,4\r\n' > crlf.csv
printf '"a","b"\n1,2\n' > quoted_header.csv
printf '"1","2"\n' > quoted_numbers.csv
printf '"a,b",c\n1,2\n' > quoted_delimiter.csv
head -c 20000000 /dev/zero | tr '\0' '9' > huge_number.csv
head -c 20000000 /dev/zero | tr '\0' 'a' > huge_text.csv
{ printf '"'; head -c 20000000 /dev/zero | tr '\0' 'a'; } > open_quote.csv
{ printf '"'; head -c 20000000 /dev/zero | tr '\0' '"'; printf '"\n'; } > quotes.csv
seq 100000 | awk '{ print "w" $1 "," $1 }' > words.csv
{ printf '1'; for _ in $(seq 1000); do printf ',1,1,1,1,1,1,1,1,1,1'; done; printf '\n'; } > wide.csv
head -c 65536 "$lazylua" > binary.csv
printf '1,2\x00\n' > nul.csv
printf '1,2\n3\n' > ragged.csv
: > empty.csv
printf 'a,b\n' > header_only.csv
gzip -c -n ok.csv > flipped.csv.gz  # -n: no name in the header, the data starts at byte 10
printf '\xff' | dd of=flipped.csv.gz bs=1 seek=11 conv=notrunc status=none
mkfifo fifo.csv
ln -s /dev/zero zero_link.csv
mkdir dir.csv

check "csv: a valid file" 20 'expect(data.read_csv(dir .. "/ok.csv"):tolist(), {{1, 2}, {3, 4}})'
check "csv: a valid gzip file" 20 'expect(data.read_csv(dir .. "/ok.csv.gz"):tolist(), {{1, 2}, {3, 4}})'
check "csv: a byte order mark before a header" 20 '
  local t, names = data.read_csv(dir .. "/bom_header.csv", {header = true})
  expect(names, {"a", "b"})
  expect(t:tolist(), {{1, 2}})'
check "csv: a byte order mark before numbers" 20 'expect(data.read_csv(dir .. "/bom.csv"):tolist(), {{1, 2}, {3, 4}})'
check "csv: CRLF line ends" 20 'expect(data.read_csv(dir .. "/crlf.csv"):tolist(), {{1, 2}, {3, 4}})'
check "csv: quoted column names" 20 '
  local t, names = data.read_csv(dir .. "/quoted_header.csv", {header = true})
  expect(names, {"a", "b"})
  expect(t:tolist(), {{1, 2}})'
check "csv: quoted numbers are numbers (RFC 4180 quoting)" 20 'expect(data.read_csv(dir .. "/quoted_numbers.csv"):tolist(), {{1, 2}})'
check "csv: a quoted delimiter in a name" 20 '
  local t, names = data.read_csv(dir .. "/quoted_delimiter.csv", {header = true})
  expect(names, {"a,b", "c"})
  expect(t:tolist(), {{1, 2}})'
check "csv: a quote opened in the first byte of 20 MB, never closed" 20 'expect_error(function() data.read_csv(dir .. "/open_quote.csv") end, "line 1: a quoted field is not closed")'
check "csv: 20 MB of doubled quotes in one text cell" 20 '
  local t, _, categories = data.read_csv(dir .. "/quotes.csv", {text = true})
  expect(t:tolist(), {{1}})
  expect(#categories[1][1], 10000000)'
check "csv: a text column of 100000 distinct words" 20 '
  local t, _, categories = data.read_csv(dir .. "/words.csv", {text = {1}})
  expect(t:size(), {100000, 2})
  expect(#categories[1], 100000)
  expect(categories[1][100000], "w100000")
  expect(t[100000]:tolist(), {100000, 100000})'
check "csv: a 20 MB number" 20 'expect_error(function() data.read_csv(dir .. "/huge_number.csv") end, "is not a number", "(20000000 bytes)")'
check "csv: a 20 MB word" 20 'expect_error(function() data.read_csv(dir .. "/huge_text.csv") end, "is not a number", "(20000000 bytes)")'
check "csv: 10001 columns" 20 '
  local t = data.read_csv(dir .. "/wide.csv")
  expect(t:size(), {1, 10001})
  expect(t:sum():item(), 10001.0)'
check "csv: binary garbage" 20 'expect_error(function() data.read_csv(dir .. "/binary.csv") end, "data.read_csv", "line")'
check "csv: a NUL byte in a cell" 20 'expect_error(function() data.read_csv(dir .. "/nul.csv") end, "column 2: ", "2\\x00", "is not a number")'
check "csv: a short row" 20 'expect_error(function() data.read_csv(dir .. "/ragged.csv") end, "line 2: 1 values, expected 2")'
check "csv: an empty file" 20 'expect(data.read_csv(dir .. "/empty.csv"):size(), {0, 0})'
check "csv: a header only" 20 '
  local t, names = data.read_csv(dir .. "/header_only.csv", {header = true})
  expect(t:size(), {0, 2})
  expect(names, {"a", "b"})'
check "csv: a damaged gzip stream" 20 'expect_error(function() data.read_csv(dir .. "/flipped.csv.gz") end, "is corrupted or truncated")'
check "csv: a FIFO (no writer)" 20 'expect_error(function() data.read_csv(dir .. "/fifo.csv") end, "is a FIFO, not a regular file")'
check "csv: a symlink to /dev/zero" 20 'expect_error(function() data.read_csv(dir .. "/zero_link.csv") end, "is a device, not a regular file")'
check "csv: a directory" 20 'expect_error(function() data.read_csv(dir .. "/dir.csv") end, "is a directory, not a regular file")'
rm -f huge_number.csv huge_text.csv open_quote.csv quotes.csv words.csv

# ---------------------------------------------------------------------------
# Checkpoints (tensor.load)

mkfifo fifo.ckpt
ln -s /dev/zero zero_link.ckpt
mkdir dir.ckpt
truncate -s 1T sparse.ckpt

check "checkpoint: every truncation and every flipped byte is an error" 60 '
  tensor.save(dir .. "/ok.ckpt", {w = tensor.arange(6):reshape(2, 3):float(), n = 3, s = "x"})
  local bytes = read("ok.ckpt")
  local loaded = tensor.load(dir .. "/ok.ckpt")
  expect(loaded.w:tolist(), {{0, 1, 2}, {3, 4, 5}})
  for length = 0, #bytes - 1 do
    write("cut.ckpt", bytes:sub(1, length))
    expect_error(function() tensor.load(dir .. "/cut.ckpt") end, "tensor.load")
  end
  for position = 1, #bytes do
    write("flip.ckpt", bytes:sub(1, position - 1) .. string.char(bytes:byte(position) ~ 0xff) ..
          bytes:sub(position + 1))
    expect_error(function() tensor.load(dir .. "/flip.ckpt") end, "tensor.load")
  end'
check "checkpoint: a well-formed file of the right checksum parses (the test's encoder)" 20 '
  write("made.ckpt", checkpoint(tensor_table(4, {2}, string.pack("<ff", 1.5, -2))))
  expect(tensor.load(dir .. "/made.ckpt").w:tolist(), {1.5, -2.0})'
check "checkpoint: a shape of 2^40 x 2^40" 20 '
  write("huge.ckpt", checkpoint(tensor_table(4, {1 << 40, 1 << 40}, "")))
  expect_error(function() tensor.load(dir .. "/huge.ckpt") end, "is corrupted", "too large")'
check "checkpoint: an extent above the limit" 20 '
  write("extent.ckpt", checkpoint(tensor_table(4, {1 << 62}, "")))
  expect_error(function() tensor.load(dir .. "/extent.ckpt") end, "is corrupted")'
check "checkpoint: a negative extent" 20 '
  write("negative.ckpt", checkpoint(tensor_table(4, {-1}, "")))
  expect_error(function() tensor.load(dir .. "/negative.ckpt") end, "is corrupted", "extent -1")'
check "checkpoint: nine dimensions" 20 '
  write("rank.ckpt", checkpoint(tensor_table(4, {1, 1, 1, 1, 1, 1, 1, 1, 1}, "\0\0\0\0")))
  expect_error(function() tensor.load(dir .. "/rank.ckpt") end, "is corrupted", "9 dimensions")'
check "checkpoint: fewer data bytes than the shape needs" 20 '
  write("short.ckpt", checkpoint(tensor_table(4, {1 << 31}, "\0\0\0\0")))
  expect_error(function() tensor.load(dir .. "/short.ckpt") end, "is corrupted", "4 bytes of tensor data")'
check "checkpoint: an unknown dtype" 20 '
  write("dtype.ckpt", checkpoint(tensor_table(99, {1}, "\0")))
  expect_error(function() tensor.load(dir .. "/dtype.ckpt") end, "is corrupted", "unknown dtype code 99")'
check "checkpoint: a bool tensor holding 2" 20 '
  write("bool.ckpt", checkpoint(tensor_table(1, {2}, "\1\2")))
  expect_error(function() tensor.load(dir .. "/bool.ckpt") end, "is corrupted", "bool tensor")'
check "checkpoint: tables nested 500 deep" 20 '
  local t = field(1, field(2, "x") .. field(3, field(5, "")))
  for _ = 1, 500 do t = field(1, field(2, "x") .. field(3, field(5, t))) end
  write("deep.ckpt", checkpoint(t))
  expect_error(function() tensor.load(dir .. "/deep.ckpt") end, "is corrupted")'
check "checkpoint: a string claiming 2^60 bytes" 20 '
  local t = field(1, field(2, "x") .. varint(3 << 3 | 2) .. varint(1 << 60) .. "abc")
  write("long.ckpt", checkpoint(t))
  expect_error(function() tensor.load(dir .. "/long.ckpt") end, "is corrupted")'
check "checkpoint: a FIFO" 20 'expect_error(function() tensor.load(dir .. "/fifo.ckpt") end, "is a FIFO")'
check "checkpoint: a symlink to /dev/zero" 20 'expect_error(function() tensor.load(dir .. "/zero_link.ckpt") end, "is a device")'
check "checkpoint: a directory" 20 'expect_error(function() tensor.load(dir .. "/dir.ckpt") end, "is a directory")'
check "checkpoint: a sparse terabyte" 20 'expect_error(function() tensor.load(dir .. "/sparse.ckpt") end, "tensor.load", "is 1024.0 GiB, more than the 2.0 GiB tensor.load reads")'
rm -f sparse.ckpt

# ---------------------------------------------------------------------------
# NumPy files (tensor.load_npy, tensor.load_npz)

cat > npy_helpers.lua <<'LUA'
-- A version 1.0 .npy file of this header text and data.
function npy(header, bytes, version)
  version = version or 1
  local length = version == 1 and string.pack("<I2", #header) or string.pack("<I4", #header)
  return "\x93NUMPY" .. string.char(version, 0) .. length .. header .. (bytes or "")
end
function f4_header(shape) return "{'descr': '<f4', 'fortran_order': False, 'shape': " .. shape .. ", }\n" end
-- bytes with `replacement` written at 1-based `position`
function patch(bytes, position, replacement)
  return bytes:sub(1, position - 1) .. replacement .. bytes:sub(position + #replacement)
end
function load_npy(name) return function() tensor.load_npy(dir .. "/" .. name) end end
function load_npz(name) return function() tensor.load_npz(dir .. "/" .. name) end end
LUA
mkfifo fifo.npy
ln -s /dev/zero zero_link.npy
mkdir dir.npz

npy_check() { check "$1" "${3:-20}" "dofile(dir .. '/npy_helpers.lua') $2"; }
npy_check "npy: a hand-made valid file" '
  write("ok.npy", npy(f4_header("(2,)"), string.pack("<ff", 1.5, -2)))
  expect(tensor.load_npy(dir .. "/ok.npy"):tolist(), {1.5, -2.0})'
npy_check "npy: every truncation of a saved file is an error" '
  tensor.save_npy(dir .. "/saved.npy", tensor.arange(6):reshape(2, 3))
  local bytes = read("saved.npy")
  expect(tensor.load_npy(dir .. "/saved.npy"):tolist(), {{0, 1, 2}, {3, 4, 5}})
  for length = 0, #bytes - 1 do
    write("cut.npy", bytes:sub(1, length))
    expect_error(load_npy("cut.npy"), "tensor.load_npy", "cut.npy")
  end'
npy_check "npy: an empty file" 'write("empty.npy", "") expect_error(load_npy("empty.npy"), "is truncated", "no complete .npy header")'
npy_check "npy: a wrong magic" 'write("magic.npy", "PK\3\4" .. string.rep("\0", 60)) expect_error(load_npy("magic.npy"), "is not a .npy file")'
npy_check "npy: format version 4.0" 'write("v4.npy", npy(f4_header("(1,)"), "\0\0\0\0", 4)) expect_error(load_npy("v4.npy"), "version 4.0", "reads versions 1.0, 2.0 and 3.0")'
npy_check "npy: a header that lies about its length" '
  write("long_header.npy", "\x93NUMPY\1\0\255\255{}")
  expect_error(load_npy("long_header.npy"), "is truncated in its header", "2 of 65535")'
npy_check "npy: a 2 GiB header (version 2.0)" '
  write("huge_header.npy", "\x93NUMPY\2\0" .. string.pack("<I4", 0x7fffffff) .. "{}")
  expect_error(load_npy("huge_header.npy"), "announces a header of 2147483647 bytes", "at most 65536")'
npy_check "npy: fewer data bytes than the shape needs" '
  write("short.npy", npy(f4_header("(1000000,)"), "\0\0\0\0"))
  expect_error(load_npy("short.npy"), "announces 1000000 elements", "the file holds 4 bytes")'
npy_check "npy: more data bytes than the shape needs" '
  write("long.npy", npy(f4_header("(1,)"), "\0\0\0\0\0"))
  expect_error(load_npy("long.npy"), "announces 1 elements", "the file holds 5 bytes")'
npy_check "npy: a shape of 2^40 x 2^40" '
  write("huge.npy", npy(f4_header("(1099511627776, 1099511627776)"), ""))
  expect_error(load_npy("huge.npy"), "shape [1099511627776, 1099511627776], too large")'
npy_check "npy: an extent of 30 digits" '
  write("digits.npy", npy(f4_header("(999999999999999999999999999999,)"), ""))
  expect_error(load_npy("digits.npy"), "shape extent too large")'
npy_check "npy: a negative extent" '
  write("negative.npy", npy(f4_header("(-1,)"), ""))
  expect_error(load_npy("negative.npy"), "does not parse", "a non-negative integer in the shape")'
npy_check "npy: nine dimensions" '
  write("rank9.npy", npy(f4_header("(1, 1, 1, 1, 1, 1, 1, 1, 1)"), "\0\0\0\0"))
  expect_error(load_npy("rank9.npy"), "9 dimensions", "at most 8")'
npy_check "npy: a 0 extent next to a huge one" '
  write("zero_extent.npy", npy(f4_header("(0, 1099511627776)"), ""))
  expect(tensor.load_npy(dir .. "/zero_extent.npy"):size(), {0, 1099511627776})'
npy_check "npy: a header that is not a dict" '
  write("garbage.npy", npy("__import__(\"os\").system(\"false\")\n", ""))
  expect_error(load_npy("garbage.npy"), "does not parse", "expected '"'"'{'"'"'")'
npy_check "npy: a header without a shape" '
  write("no_shape.npy", npy("{'"'"'descr'"'"': '"'"'<f4'"'"', '"'"'fortran_order'"'"': False}", ""))
  expect_error(load_npy("no_shape.npy"), "without '"'"'shape'"'"'")'
npy_check "npy: an unterminated string in the header" '
  write("quote.npy", npy("{'"'"'descr'"'"': '"'"'<f4", ""))
  expect_error(load_npy("quote.npy"), "does not parse", "the end of a string")'
npy_check "npy: an unknown dtype" '
  write("dtype.npy", npy("{'"'"'descr'"'"': '"'"'<q9'"'"', '"'"'fortran_order'"'"': False, '"'"'shape'"'"': (1,)}", "\0"))
  expect_error(load_npy("dtype.npy"), "an element type lazylua does not read", "<q9")'
npy_check "npy: a FIFO" 'expect_error(load_npy("fifo.npy"), "is a FIFO")'
npy_check "npy: a symlink to /dev/zero" 'expect_error(load_npy("zero_link.npy"), "is a device")'
npy_check "npy: save over a directory is refused" '
  expect_error(function() tensor.save_npy(dir .. "/dir.npz", tensor.ones(1)) end, "tensor.save_npy", "is a directory, not a regular file; it was left alone")'

npy_check "npz: every truncation and every flipped byte: an error or the right result" '
  tensor.save_npz(dir .. "/ok.npz", {w = tensor.arange(6):float(), b = tensor.new({true, false})})
  local bytes = read("ok.npz")
  for length = 0, #bytes - 1 do
    write("cut.npz", bytes:sub(1, length))
    expect_error(load_npz("cut.npz"), "tensor.load_npz", "cut.npz")
  end
  for position = 1, #bytes do
    write("flip.npz", patch(bytes, position, string.char(bytes:byte(position) ~ 0xff)))
    local ok, loaded = pcall(tensor.load_npz, dir .. "/flip.npz")
    if ok then  -- a byte nobody reads (a date, a version): the content is intact
      expect(loaded.w:tolist(), {0, 1, 2, 3, 4, 5})
      expect(loaded.b:tolist(), {true, false})
    else
      expect_error(load_npz("flip.npz"), "tensor.load_npz")
    end
  end' 120
npy_check "npz: a compressed archive, every flipped byte" '
  tensor.save_npz(dir .. "/ok_deflated.npz", {w = tensor.zeros(300)}, {compressed = true})
  local bytes = read("ok_deflated.npz")
  for position = 1, #bytes do
    write("flip.npz", patch(bytes, position, string.char(bytes:byte(position) ~ 0xff)))
    local ok, loaded = pcall(tensor.load_npz, dir .. "/flip.npz")
    if ok then expect(loaded.w:sum():item(), 0.0) else expect_error(load_npz("flip.npz"), "tensor.load_npz") end
  end' 60
npy_check "npz: not a zip archive" 'write("plain.npz", npy(f4_header("(1,)"), "\0\0\0\0")) expect_error(load_npz("plain.npz"), "is not a zip archive")'
npy_check "npz: zip64" '
  tensor.save_npz(dir .. "/one.npz", {w = tensor.ones(2)})
  local bytes = read("one.npz")
  write("zip64.npz", patch(bytes, #bytes - 22 + 11, "\255\255"))
  expect_error(load_npz("zip64.npz"), "is a zip64 archive", "not supported")'
npy_check "npz: an encrypted entry" '
  tensor.save_npz(dir .. "/one.npz", {w = tensor.ones(2)})
  local bytes = read("one.npz")
  local central = bytes:find("PK\1\2", 1, true)
  write("encrypted.npz", patch(bytes, central + 8, "\1\0"))
  expect_error(load_npz("encrypted.npz"), "entry '"'"'w.npy'"'"' is encrypted")'
npy_check "npz: an unknown compression method" '
  tensor.save_npz(dir .. "/one.npz", {w = tensor.ones(2)})
  local bytes = read("one.npz")
  local central = bytes:find("PK\1\2", 1, true)
  write("bzip2.npz", patch(patch(bytes, 9, "\12\0"), central + 10, "\12\0"))
  expect_error(load_npz("bzip2.npz"), "compression method 12")'
npy_check "npz: a deflated entry claiming 4 GiB" '
  tensor.save_npz(dir .. "/z.npz", {w = tensor.zeros(1000)}, {compressed = true})
  local bytes = read("z.npz")
  local central = bytes:find("PK\1\2", 1, true)
  write("claim.npz", patch(bytes, central + 24, string.pack("<I4", 0xfffffff0)))
  expect_error(load_npz("claim.npz"), "claims 4294967280 bytes", "more than deflate can give")'
npy_check "npz: a deflated entry claiming a few bytes more than it holds" '
  tensor.save_npz(dir .. "/z.npz", {w = tensor.zeros(1000)}, {compressed = true})
  local bytes = read("z.npz")
  local central = bytes:find("PK\1\2", 1, true)
  local size = string.unpack("<I4", bytes, central + 24)
  write("more.npz", patch(bytes, central + 24, string.pack("<I4", size + 5)))
  expect_error(load_npz("more.npz"), "claims " .. (size + 5) .. " bytes, more than the " .. size .. " its content announces")'
npy_check "npz: a deflated entry claiming a few bytes fewer than it holds" '
  tensor.save_npz(dir .. "/z.npz", {w = tensor.zeros(1000)}, {compressed = true})
  local bytes = read("z.npz")
  local central = bytes:find("PK\1\2", 1, true)
  local size = string.unpack("<I4", bytes, central + 24)
  write("fewer.npz", patch(bytes, central + 24, string.pack("<I4", size - 5)))
  expect_error(load_npz("fewer.npz"), "does not inflate to the " .. (size - 5) .. " bytes")'
npy_check "npz: a wrong CRC-32" '
  tensor.save_npz(dir .. "/one.npz", {w = tensor.ones(2)})
  local bytes = read("one.npz")
  local central = bytes:find("PK\1\2", 1, true)
  write("crc.npz", patch(bytes, central + 16, "\0\0\0\0"))
  expect_error(load_npz("crc.npz"), "the CRC-32 of entry '"'"'w.npy'"'"' does not match")'
npy_check "npz: two entries of one name" '
  tensor.save_npz(dir .. "/two.npz", {a = tensor.ones(2), b = tensor.ones(2)})
  write("twice.npz", (read("two.npz"):gsub("b%.npy", "a.npy")))
  expect_error(load_npz("twice.npz"), "holds two entries named '"'"'a.npy'"'"'")'
npy_check "npz: an entry that is not .npy" '
  tensor.save_npz(dir .. "/one.npz", {w = tensor.ones(2)})
  write("txt.npz", (read("one.npz"):gsub("w%.npy", "w.txt")))
  expect_error(load_npz("txt.npz"), "entry '"'"'w.txt'"'"' is not a .npy file")'
npy_check "npz: an entry whose .npy lies about its size" '
  tensor.save_npz(dir .. "/one.npz", {w = tensor.ones(2)})
  local bytes = read("one.npz")
  local bad = bytes:gsub("%(2,%)", "(9,)")
  -- the CRC covers the entry: recompute it as a writer that lies would
  local entry_start = bytes:find("\x93NUMPY", 1, true)
  local entry = bad:sub(entry_start, entry_start + 128 + 8 - 1)
  local crc = 0xFFFFFFFF
  for i = 1, #entry do
    crc = crc ~ entry:byte(i)
    for _ = 1, 8 do crc = (crc & 1) == 1 and (0xEDB88320 ~ (crc >> 1)) or (crc >> 1) end
  end
  crc = crc ~ 0xFFFFFFFF
  bad = patch(bad, 15, string.pack("<I4", crc))
  local central = bad:find("PK\1\2", 1, true)
  bad = patch(bad, central + 16, string.pack("<I4", crc))
  write("lying.npz", bad)
  expect_error(load_npz("lying.npz"), "entry '"'"'w.npy'"'"' announces 9 elements", "holds 8 bytes")'
npy_check "npz: a directory" 'expect_error(load_npz("dir.npz"), "is a directory")'

# ---------------------------------------------------------------------------
# NumPy decompression bombs: 256 MiB of zeros behind a header announcing 4
# bytes of data (1 MiB of gzip). Each is refused from its first bytes,
# before it is inflated: quickly, and with a small peak RSS, not 256 MiB.

"$lazylua" -e "tensor.save_npy('$work/one.npy', tensor.ones(1))"
gzip -c one.npy > one.npy.gz
{ cat one.npy; head -c 256M /dev/zero; } | gzip -1 -n > bomb.npy.gz  # -n: a 10-byte header
# the header's first 5 bytes in a member of their own, the rest and the
# zeros in a second one: the first member must not hide the bomb
{ head -c 5 one.npy | gzip -c; { tail -c +6 one.npy; head -c 256M /dev/zero; } | gzip -1; } > bomb_members.npy.gz
{ printf 'not npy'; head -c 256M /dev/zero; } | gzip -1 > bomb_garbage.npy.gz

npy_check "npy.gz: a valid file" 'expect(tensor.load_npy(dir .. "/one.npy.gz"):tolist(), {1.0})'
npy_check "npy.gz: a cut stream, and a flipped byte in it" '
  local gz = read("one.npy.gz")
  write("cut.npy.gz", gz:sub(1, 30))
  expect_error(load_npy("cut.npy.gz"), "tensor.load_npy: ", "is corrupted or truncated")
  write("flip.npy.gz", patch(gz, #gz // 2, string.char(gz:byte(#gz // 2) ~ 0xff)))
  expect_error(load_npy("flip.npy.gz"), "tensor.load_npy: ", "is corrupted or truncated")'
npy_check "npy.gz: a bomb" '
  expect_error(load_npy("bomb.npy.gz"), "decompresses to more than the 132 bytes its content announces")
  expect_small_rss(100)'
npy_check "npy.gz: a bomb behind a tiny first gzip member" '
  expect_error(load_npy("bomb_members.npy.gz"), "decompresses to more than the 132 bytes its content announces")
  expect_small_rss(100)'
npy_check "npy.gz: a bomb that is no .npy file" '
  expect_error(load_npy("bomb_garbage.npy.gz"), "is not a .npy file")
  expect_small_rss(100)'
# .npz entries deflated from the same bytes: the raw deflate data of the
# gzip file (between its 10-byte header and 8-byte trailer), its CRC-32 and
# its length.
npz_bomb='local gz = read("bomb.npy.gz")
  local deflated = gz:sub(11, -9)
  local crc, size = string.unpack("<I4I4", gz, #gz - 7)'
npy_check "npz: a deflate bomb in a .npy entry, claiming its true size" "$npz_bomb"'
  write("bomb.npz", zip({{name = "w.npy", method = 8, crc = crc, size = size, data = deflated}}))
  expect_error(load_npz("bomb.npz"), "entry '"'"'w.npy'"'"' claims 268435588 bytes, more than the 132 its content announces")
  expect_small_rss(100)'
npy_check "npz: a deflate bomb in an entry that is not .npy" "$npz_bomb"'
  write("bomb_bin.npz", zip({{name = "w.bin", method = 8, crc = crc, size = size, data = deflated}}))
  expect_error(load_npz("bomb_bin.npz"), "entry '"'"'w.bin'"'"' is not a .npy file")
  expect_small_rss(100)'
npy_check "npz: entries claiming more than half of the memory in all" '
  local memory
  for line in io.lines("/proc/meminfo") do memory = memory or tonumber(line:match("^MemTotal:%s*(%d+)")) end
  local claim = 4000000000  -- each entry: below 4 GiB, from enough bytes for deflate to give it
  local data = string.rep("\0", claim // 1032 + 1)
  local entries = {}
  for k = 1, memory * 1024 // 2 // claim + 1 do
    entries[k] = {name = "w" .. k .. ".npy", method = 8, crc = 0, size = claim, data = data}
  end
  write("greedy.npz", zip(entries))
  expect_error(load_npz("greedy.npz"), "once inflated, more than half of this machine'"'"'s memory")
  expect_small_rss(200)' 60
rm -f bomb.npy.gz bomb_members.npy.gz bomb_garbage.npy.gz bomb.npz bomb_bin.npz greedy.npz

# ---------------------------------------------------------------------------
# ONNX files (onnx.load, onnx.read_tensor)

mkfifo fifo.onnx
ln -s /dev/zero zero_link.onnx
mkdir dir.onnx
truncate -s 1T sparse.onnx
onnx_check() { check "$1" "${3:-20}" "onnx = require 'onnx' $2"; }
onnx_check "onnx: a valid model, and every truncation of it is an error" '
  onnx.export(function(x) return x * 2 + 1 end, {tensor.ones(3)}, dir .. "/ok.onnx")
  expect(onnx.load(dir .. "/ok.onnx")(tensor.new({1, 2, 3})):tolist(), {3, 5, 7})
  local bytes = read("ok.onnx")
  for length = 0, #bytes - 1 do
    write("cut.onnx", bytes:sub(1, length))
    expect_error(function() onnx.load(dir .. "/cut.onnx") end, "onnx.load: ")
  end' 60
onnx_check "onnx: a tensor file" '
  local native = require "stdlib.native"
  write("t.pb", native.onnx_encode_tensor(tensor.new({1.5, -2}), "t"))
  local t, name = onnx.read_tensor(dir .. "/t.pb")
  expect(t:tolist(), {1.5, -2.0})
  expect(name, "t")'
for function in load read_tensor; do
  onnx_check "onnx.$function: a FIFO (no writer)" "expect_error(function() onnx.$function(dir .. \"/fifo.onnx\") end, \"onnx.$function: \", \"/fifo.onnx' is a FIFO, not a regular file\")"
  onnx_check "onnx.$function: a symlink to /dev/zero" "expect_error(function() onnx.$function(dir .. \"/zero_link.onnx\") end, \"onnx.$function: \", \"is a device, not a regular file\")"
  onnx_check "onnx.$function: /dev/zero" "expect_error(function() onnx.$function(\"/dev/zero\") end, \"onnx.$function: '/dev/zero' is a device, not a regular file\")"
  onnx_check "onnx.$function: a directory" "expect_error(function() onnx.$function(dir .. \"/dir.onnx\") end, \"onnx.$function: \", \"/dir.onnx' is a directory, not a regular file\")"
  onnx_check "onnx.$function: a sparse terabyte, refused unread" "expect_error(function() onnx.$function(dir .. \"/sparse.onnx\") end, \"is 1024.0 GiB, more than the 2.0 GiB onnx.$function reads\")"
  onnx_check "onnx.$function: a missing file" "expect_error(function() onnx.$function(dir .. \"/missing.onnx\") end, \"onnx.$function: cannot open\", \"No such file\")"
done
if [ "$(id -u)" = 0 ]; then
  mknod null_device.onnx c 1 3
  onnx_check "onnx.load: a character device made with mknod" 'expect_error(function() onnx.load(dir .. "/null_device.onnx") end, "is a device, not a regular file")'
fi
rm -f sparse.onnx

# ---------------------------------------------------------------------------
# Writers (onnx.export, tensor.profile, LAZYLUA_PROFILE, plot.line_chart): a
# FIFO or a device is refused at once and left as it was; a write that
# fails or is killed halfway leaves the old file whole.

mkfifo fifo.out
if [ "$(id -u)" = 0 ]; then mknod device.out c 1 3; else ln -s /dev/null device.out; fi
mkdir dir.out
export_call='require("onnx").export(function(x) return x * 2 end, {tensor.ones(2)}, dir .. "/'
profile_call='tensor.profile(function() return (tensor.ones(2) * 2):sum():item() end, dir .. "/'
plot_call='require("plot").line_chart(dir .. "/'
plot_series='", {{name = "a", values = {1, 2, 3}}})'
for target in fifo.out device.out dir.out; do
  kind=$(case $target in fifo.out) echo "a FIFO";; device.out) echo "a device";; *) echo "a directory";; esac)
  flag=$(case $target in fifo.out) echo p;; device.out) echo c;; *) echo d;; esac)
  left_alone="/$target' is $kind, not a regular file; it was left alone"
  check "onnx.export to $kind" 20 "expect_error(function() $export_call$target\") end, 'onnx.export: ', \"$left_alone\")
    assert(is_kind('$flag', dir .. '/$target'), 'it was replaced')"
  check "tensor.profile to $kind" 20 "expect_error(function() $profile_call$target\") end, 'tensor.profile: ', \"$left_alone\")
    assert(is_kind('$flag', dir .. '/$target'), 'it was replaced')
    expect((tensor.ones(2) * 3):sum():item(), 6.0)"
  check "plot.line_chart to $kind" 20 "expect_error(function() $plot_call$target$plot_series end, 'plot.line_chart: ', \"$left_alone\")
    assert(is_kind('$flag', dir .. '/$target'), 'it was replaced')"
  cases=$((cases + 1))
  LAZYLUA_PROFILE="$work/$target" timeout -k 5 20 "$lazylua" -e 'print((tensor.ones(2) * 2):sum():item())' > out 2> err
  status=$?
  if [ $status -ne 0 ] || [ "$(cat out)" != "4.0" ] ||
     ! grep -qF "lazylua: LAZYLUA_PROFILE: '$work/$target' is $kind, not a regular file; it was left alone" err; then
    fail "LAZYLUA_PROFILE to $kind: exit $status, out '$(cat out)', err: $(head -c 800 err)"
  fi
done
check "the writers through a symlink write the file it leads to, and keep the link" 20 '
  os.execute("cd " .. dir .. " && rm -f real.svg link.svg && ln -s real.svg link.svg")
  require("plot").line_chart(dir .. "/link.svg", {{name = "a", values = {1, 2, 3}}})
  assert(read("real.svg"):find("</svg>", 1, true), "the file the link leads to was not written")
  assert(os.execute("test -L " .. dir .. "/link.svg"), "the link was replaced")'

# The debug report at exit quotes the script's lines from its file: a
# script read from a FIFO is not opened again (that would wait forever).
cases=$((cases + 1))
mkfifo script.lua
timeout 30 sh -c "printf 'for i = 1, 3 do print((tensor.ones(2) * i):sum():item()) end\\n' > script.lua" &
LAZYLUA_DEBUG=1 timeout -k 5 20 "$lazylua" script.lua > out 2> err
status=$?
wait
if [ $status -ne 0 ] || [ "$(tr '\n' ' ' < out)" != "2.0 4.0 6.0 " ] || ! grep -q 'synced 3 times' err; then
  fail "LAZYLUA_DEBUG report of a script read from a FIFO: exit $status, out '$(cat out)', err: $(tail -c 400 err)"
fi

# limited_write NAME FILE CODE: runs CODE with files limited to 4 KiB
# (ulimit -f), twice: with SIGXFSZ ignored (the write fails with EFBIG, and
# CODE checks the error) and with it fatal (the process dies halfway
# through the write). FILE must keep its old content each time.
limited_write() {
  local name=$1 file=$2 code=$3 mode status
  for mode in error killed; do
    cases=$((cases + 1))
    printf 'the old content' > "$file"
    {  # the outer redirection: no "File size limit exceeded" from this shell
      (
        if [ $mode = error ]; then trap '' XFSZ; fi
        ulimit -f 4
        HOSTILE_DIR=$work exec timeout -k 5 60 "$lazylua" -e "dofile('$work/prelude.lua')" -e "$code"
      ) > "$work/out" 2> "$work/err"
      status=$?
    } 2> /dev/null
    if ! printf 'the old content' | cmp -s - "$file"; then
      fail "$name ($mode): the old file was changed to $(wc -c < "$file") bytes"
    elif [ $mode = error ] && [ $status -ne 0 ]; then
      fail "$name ($mode): exit $status: $(head -c 800 "$work/err")"
    elif [ $mode = killed ] && [ $status -ne $((128 + 25)) ]; then
      fail "$name ($mode): exit $status, not killed by SIGXFSZ: $(head -c 800 "$work/err")"
    elif [ $mode = error ] && ls "$file".tmp-* > /dev/null 2>&1; then
      fail "$name ($mode): a temporary file was left behind"
    fi
    rm -f "$file".tmp-*
  done
}
limited_write "onnx.export of 80 KB into a 4 KiB file limit" "$work/big.onnx" '
  local w = tensor.arange(20000):float()
  local ok, message = pcall(require("onnx").export, function(x) return x * w end, {tensor.ones(20000)}, dir .. "/big.onnx")
  if ok then os.exit(3) end
  expect_error(function() error(message) end, "onnx.export: cannot write", "big.onnx", "File too large")'
limited_write "plot.line_chart of a large chart into a 4 KiB file limit" "$work/big.svg" '
  local values = {}
  for i = 1, 3000 do values[i] = math.sin(i / 100) end
  expect_error(function() require("plot").line_chart(dir .. "/big.svg", {{name = "a", values = values}}) end,
               "plot.line_chart: cannot write", "File too large")'

# ---------------------------------------------------------------------------
# The compiled-graph cache: each entry of a filled cache replaced in turn;
# the program must still give its result, and its entry be rebuilt.

cat > program.lua <<'LUA'
local a = tensor.arange(12):float():reshape(3, 4)
local b = ((a * 0.5):exp() + a:t():sum(2)):sum(1)
print(table.concat(b:tolist(), " "))
LUA
expected=$(LAZYLUA_EAGER=1 "$lazylua" program.lua)
run_cached() {  # run_cached NAME: the program with the cache in ./cache
  cases=$((cases + 1))
  out=$(LAZYLUA_COMPILE=sync LAZYLUA_CACHE_DIR="$work/cache" timeout -k 5 60 "$lazylua" program.lua 2>&1)
  local status=$?
  if [ $status -ne 0 ]; then
    fail "cache, $1: exit $status: $(echo "$out" | tail -c 800)"
  elif ! awk -v a="$out" -v b="$expected" 'BEGIN {
      n = split(a, x, " "); m = split(b, y, " "); if (n != m) exit 1;
      for (i = 1; i <= n; i++) { d = x[i] - y[i]; if (d < 0) d = -d; if (d > 1e-4 * (y[i] < 0 ? -y[i] : y[i]) + 1e-4) exit 1 }
    }'; then
    fail "cache, $1: printed '$out', eager mode '$expected'"
  fi
}
run_cached "filling it"
for kind in fifo devzero directory empty sparse garbage; do
  for entry in cache/*.so cache/*.rec; do
    [ -e "$entry" ] || [ -L "$entry" ] || continue
    rm -rf "$entry"
    case $kind in
      fifo) mkfifo "$entry" ;;
      devzero) ln -s /dev/zero "$entry" ;;
      directory) mkdir "$entry" ;;
      empty) : > "$entry" ;;
      sparse) truncate -s 1T "$entry" ;;
      garbage) head -c 4096 "$lazylua" > "$entry" ;;
    esac
  done
  run_cached "every entry replaced by: $kind"
done
run_cached "after the repairs"

# ---------------------------------------------------------------------------
# CSV gzip bombs (data.read_csv): a .csv.gz may decompress to 100 times its
# size (64 MiB at least). A 1 MiB file of 64 members, each 8 MiB of "0,0,..."
# lines, would be 512 MiB: refused after about 100 MiB, at a small RSS. A small file of a
# high ratio under the 64 MiB floor is read.

cd "$work" || exit 1
yes 0,0,0,0,0,0,0 | head -c 8M | gzip -9 > zeros8m.csv.gz
for _ in $(seq 64); do cat zeros8m.csv.gz; done > bomb.csv.gz
yes 0,1 | head -c 2M | gzip -9 > dense_small.csv.gz
check "csv: a 1 MiB gzip bomb of 512 MiB" 20 'expect_error(function() data.read_csv(dir .. "/bomb.csv.gz") end, "bomb.csv.gz'"'"' decompresses to more than", "likely gzip bomb; gunzip it first")'
check "csv: a 2 MiB table in a few KiB of gzip" 20 'expect(data.read_csv(dir .. "/dense_small.csv.gz"):size(), {524288, 2})'
if [ -x /usr/bin/time ]; then
  cases=$((cases + 1))
  HOSTILE_DIR=$work /usr/bin/time -f %M -o rss.txt timeout -k 5 20 "$lazylua" \
    -e "dofile('$work/prelude.lua')" \
    -e 'expect_error(function() data.read_csv(dir .. "/bomb.csv.gz") end, "likely gzip bomb")' \
    > /dev/null 2>&1
  rss_kib=$(tail -1 rss.txt)
  if [ "${rss_kib:-999999999}" -gt 262144 ]; then
    fail "csv: the gzip bomb cost ${rss_kib} KiB of RSS (more than 256 MiB)"
  fi
fi
rm -f zeros8m.csv.gz bomb.csv.gz dense_small.csv.gz rss.txt
# (end of the CSV gzip bomb block)

if [ $failures -ne 0 ]; then
  echo "test_hostile_files: $failures of $cases cases failed"
  exit 1
fi
echo "test_hostile_files: $cases cases OK"
