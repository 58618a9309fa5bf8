// stdlib_native.cpp - the native part of the stdlib's data and progress
// modules. The Lua side (stdlib/data.lua, stdlib/progress.lua) parses
// options; these functions take plain positional arguments.
//
//   read_idx(path, dtype|nil) -> tensor        IDX file, gzip or not
//   read_csv(path, delimiter, header, dtype, text) -> tensor, names|nil, categories
//     (interp/csv_reader.cpp)
//   take_rows(tensor, index|nil, first, count) -> tensor   eager row gather
//   read_file(path, function, max_bytes) -> string   the safe file helpers
//   write_file(path, bytes, function)                  (interp/file_bytes.h)
//   write_gzip(path, bytes)                    for tests: make .gz fixtures
//   isatty(fd) -> boolean, terminal_width() -> integer|nil
//   monotonic_seconds() -> number
#include "interp/stdlib_native.h"

#include <sys/ioctl.h>
#include <unistd.h>
#include <zlib.h>

#include <charconv>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "interp/csv_reader.h"
#include "interp/file_bytes.h"
#include "interp/lua_tensor_internal.h"
#include "interp/runtime.h"
#include "tensor/array.h"
#include "tensor/checked.h"
#include "tensor/thread_pool.h"

namespace lazylua {
namespace {

using binding::check_integer;
using binding::check_tensor;
using binding::guarded;
using binding::type_error;

std::string check_string(lua_State* L, int arg, const char* function) {
  if (lua_type(L, arg) != LUA_TSTRING) type_error(L, arg, function, "string");
  size_t length = 0;
  const char* text = lua_tolstring(L, arg, &length);
  return std::string(text, length);
}

std::optional<DType> optional_dtype(lua_State* L, int arg, const char* function) {
  if (lua_isnoneornil(L, arg)) return std::nullopt;
  return parse_dtype(check_string(L, arg, function));
}

// The gzip file of `bytes` (write_gzip, for test fixtures). zlib on
// purpose: files written by one implementation and read by another
// (libdeflate, file_bytes.cpp) check both.
std::string gzip_bytes(const std::string& bytes, const char* function) {
  // One deflate call: zlib counts a call's bytes in 32 bits.
  if (bytes.size() > UINT32_MAX / 2) fail("{}: more than 2 GiB to compress", function);
  z_stream stream{};
  if (deflateInit2(&stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8,
                   Z_DEFAULT_STRATEGY) != Z_OK) {
    fail("{}: out of memory: cannot make a gzip compressor", function);
  }
  std::string out(deflateBound(&stream, static_cast<uLong>(bytes.size())), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  stream.avail_in = static_cast<uInt>(bytes.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  const int status = deflate(&stream, Z_FINISH);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  if (status != Z_STREAM_END) fail("{}: zlib could not compress (status {})", function, status);
  return out;
}

// ---- IDX (the MNIST format) ----
// Header: two zero bytes, an element type code, the number of dims, then one
// big-endian uint32 per dim; then the elements, big-endian, row-major.

struct IdxType {
  uint8_t code;
  const char* name;
  int size;
  bool is_integer;
};
constexpr IdxType kIdxTypes[] = {
    {0x08, "u8", 1, true},  {0x09, "i8", 1, true},   {0x0B, "i16", 2, true},
    {0x0C, "i32", 4, true}, {0x0D, "f32", 4, false}, {0x0E, "f64", 8, false},
};

// The element at `bytes` (big-endian) as a double or an int64.
template <typename Out>
Out decode_idx_element(const uint8_t* bytes, uint8_t code) {
  switch (code) {
    case 0x08:
      return static_cast<Out>(bytes[0]);
    case 0x09:
      return static_cast<Out>(static_cast<int8_t>(bytes[0]));
    case 0x0B:
      return static_cast<Out>(static_cast<int16_t>((bytes[0] << 8) | bytes[1]));
    case 0x0C:
      return static_cast<Out>(static_cast<int32_t>((uint32_t{bytes[0]} << 24) |
                                                   (uint32_t{bytes[1]} << 16) |
                                                   (uint32_t{bytes[2]} << 8) | bytes[3]));
    case 0x0D: {
      const uint32_t bits = (uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) |
                            (uint32_t{bytes[2]} << 8) | bytes[3];
      float value;
      std::memcpy(&value, &bits, sizeof value);
      return static_cast<Out>(value);
    }
    default: {
      uint64_t bits = 0;
      for (int i = 0; i < 8; i++) bits = (bits << 8) | bytes[i];
      double value;
      std::memcpy(&value, &bits, sizeof value);
      return static_cast<Out>(value);
    }
  }
}

// Elements per parallel chunk of the conversion (pixels: 1 MiB read, 4 MiB written).
constexpr int64_t kIdxConvertGrain = int64_t{1} << 20;

template <typename Out>
void convert_idx_chunk(const uint8_t* bytes, size_t count, const IdxType& type, Out* out) {
  if constexpr (std::is_same_v<Out, bool>) {
    for (size_t i = 0; i < count; i++) {
      out[i] = decode_idx_element<double>(bytes + i * type.size, type.code) != 0;
    }
  } else if (type.code == 0x08) {  // the common case (pixels, labels): a tight loop
    for (size_t i = 0; i < count; i++) out[i] = static_cast<Out>(bytes[i]);
  } else {
    for (size_t i = 0; i < count; i++) {
      out[i] = decode_idx_element<Out>(bytes + i * type.size, type.code);
    }
  }
}

// The length in bytes of the IDX file whose first bytes are `bytes`, as its
// header announces it; SIZE_MAX when they are not a whole valid header (the
// full read then says what is wrong).
size_t idx_length(const uint8_t* bytes, size_t size) {
  if (size < 4 || bytes[0] != 0 || bytes[1] != 0) return SIZE_MAX;
  const IdxType* type = nullptr;
  for (const IdxType& candidate : kIdxTypes) {
    if (candidate.code == bytes[2]) type = &candidate;
  }
  const int rank = bytes[3];
  const size_t header_size = 4 + 4 * static_cast<size_t>(rank);
  if (!type || rank < 1 || rank > kMaxDims || size < header_size) return SIZE_MAX;
  size_t length = static_cast<size_t>(type->size);
  for (int d = 0; d < rank; d++) {
    const uint8_t* b = bytes + 4 + 4 * d;
    const size_t extent = (size_t{b[0]} << 24) | (size_t{b[1]} << 16) | (size_t{b[2]} << 8) | b[3];
    if (__builtin_mul_overflow(length, extent, &length)) return SIZE_MAX;
  }
  return length > SIZE_MAX - header_size ? SIZE_MAX : length + header_size;
}

Array read_idx_file(const std::string& path, std::optional<DType> requested) {
  const char* function = "data.read_idx";
  // The whole file at once: gunzipping in one call and converting in one
  // parallel pass is several times faster than streaming chunk by chunk. A
  // gzip file decompresses to no more than its header announces: a gzip
  // bomb is refused before it fills the memory.
  const HostBytes file = read_file_bytes(path, function, idx_length);
  const uint8_t* bytes = file.data();
  const size_t size = file.size();
  if (size < 4) fail("{}: '{}' is truncated: no IDX header", function, path);
  if (bytes[0] != 0 || bytes[1] != 0) {
    fail("{}: '{}' is not an IDX file (bad magic number {:02x}{:02x}{:02x}{:02x})", function, path,
         bytes[0], bytes[1], bytes[2], bytes[3]);
  }
  const IdxType* type = nullptr;
  for (const IdxType& candidate : kIdxTypes) {
    if (candidate.code == bytes[2]) type = &candidate;
  }
  if (!type) fail("{}: '{}' has unknown IDX element type 0x{:02x}", function, path, bytes[2]);
  const int rank = bytes[3];
  if (rank < 1 || rank > kMaxDims) {
    fail("{}: '{}' has {} dimensions (lazylua tensors have 1 to {})", function, path, rank,
         kMaxDims);
  }
  const size_t header_size = 4 + 4 * static_cast<size_t>(rank);
  if (size < header_size) fail("{}: '{}' is truncated in its header", function, path);
  Shape shape;
  for (int d = 0; d < rank; d++) {
    const uint8_t* b = bytes + 4 + 4 * d;
    shape.push_back((int64_t{b[0]} << 24) | (int64_t{b[1]} << 16) | (int64_t{b[2]} << 8) | b[3]);
  }
  const int64_t count = checked_numel(shape, function);
  // Whole elements only: a partial last one counts as missing.
  const size_t held = (size - header_size) / type->size;
  if (static_cast<uint64_t>(count) > held) {
    fail("{}: '{}' is truncated: its header announces {} elements, the file holds {}", function,
         path, count, held);
  }
  if (size - header_size > static_cast<size_t>(count) * type->size) {
    fail("{}: '{}' has data after the {} elements its header announces", function, path, count);
  }
  const DType dtype = requested.value_or(type->is_integer     ? DType::i64
                                         : type->code == 0x0D ? DType::f32
                                                              : DType::f64);
  Array out = Array::empty(shape, dtype, function);
  const uint8_t* elements = bytes + header_size;
  visit_dtype(dtype, [&](auto zero) {
    using Out = decltype(zero);
    Out* target = out.data<Out>();
    // Both cores: the first write to each page of `out` faults it in, and
    // that costs as much as the conversion.
    parallel_for(count, kIdxConvertGrain, [&](int64_t begin, int64_t end) {
      convert_idx_chunk(elements + begin * type->size, static_cast<size_t>(end - begin), *type,
                        target + begin);
    });
  });
  return out;
}

int read_idx(lua_State* L) {
  const std::string path = check_string(L, 1, "data.read_idx");
  const std::optional<DType> dtype = optional_dtype(L, 2, "data.read_idx");
  push_tensor(L, read_idx_file(path, dtype));
  return 1;
}

// ---- Batches ----

// Rows first..first+count-1 (1-based) of `source`, or the rows named by
// those positions of the i64 `index`, copied into a new data tensor. Eager on
// purpose: a batch is input data, not part of the step's graph.
int take_rows(lua_State* L) {
  const char* function = "take_rows";
  const Array source = observe(check_tensor(L, 1, function), SyncCause::host_read);
  if (source.rank() == 0) fail("DataLoader: a 0-d tensor has no rows");
  // 1-based first position; checked before anything is added to it or
  // allocated for `count`.
  const int64_t first_position = check_integer(L, 3, function);
  const int64_t count = check_integer(L, 4, function);
  const int64_t first = first_position >= 1 ? first_position - 1 : -1;  // -1: out of range
  const int64_t rows = source.shape[0];
  std::vector<int64_t> picks;
  if (lua_isnoneornil(L, 2)) {
    if (!range_fits(first, count, rows)) {
      fail("{}: rows out of range", function);
    }
    picks.resize(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; i++) picks[i] = first + i;
  } else {
    const Array index = ops::cast(
        contiguous(observe(check_tensor(L, 2, function), SyncCause::host_read)), DType::i64);
    if (!range_fits(first, count, index.numel())) {
      fail("{}: index positions out of range", function);
    }
    picks.resize(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; i++) {
      const int64_t row = index.data<int64_t>()[first + i] - 1;
      if (row < 0 || row >= rows) fail("DataLoader: row {} out of range 1..{}", row + 1, rows);
      picks[i] = row;
    }
  }
  Shape shape = source.shape;
  shape[0] = count;
  Array out = Array::empty(shape, source.dtype, function);
  const size_t row_bytes =
      static_cast<size_t>(numel(shape) / std::max<int64_t>(count, 1)) * dtype_size(source.dtype);
  char* target = static_cast<char*>(out.raw_data());
  const bool rows_contiguous = source.is_contiguous();
  for (int64_t i = 0; i < count; i++) {
    const Array row = source.selected(0, picks[i]);
    const Array data = rows_contiguous ? row : contiguous(row);
    if (row_bytes > 0) std::memcpy(target + i * row_bytes, data.raw_data(), row_bytes);
  }
  push_tensor(L, std::move(out));
  return 1;
}

// ---- Files, terminals, time ----

// Pushes the string [data, data + size) in a protected call: a memory
// error raised there must not jump over the caller's C++ objects (the
// buffer holding the bytes); it becomes an Error instead.
int push_string_body(lua_State* L) {
  lua_pushlstring(L, static_cast<const char*>(lua_touserdata(L, 1)),
                  static_cast<size_t>(lua_tointeger(L, 2)));
  return 1;
}
void push_string(lua_State* L, const uint8_t* data, size_t size, const char* function) {
  if (!lua_checkstack(L, 3)) fail("{}: Lua stack overflow", function);
  lua_pushcfunction(L, push_string_body);
  lua_pushlightuserdata(L, const_cast<uint8_t*>(data));
  lua_pushinteger(L, static_cast<lua_Integer>(size));
  if (lua_pcall(L, 2, 1, 0) != LUA_OK) {
    const std::string message = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "an error";
    lua_pop(L, 1);
    fail("{}: {} (a string of {} bytes)", function, message, size);
  }
}

// read_file(path, function, max_bytes): the bytes of the regular file at
// `path` as they are (no gunzip), refused when larger than max_bytes. Its
// errors name `function`, the stdlib function reading (onnx.load).
int read_file(lua_State* L) {
  const std::string path = check_string(L, 1, "read_file");
  const std::string function = check_string(L, 2, "read_file");
  const int64_t max_bytes = check_integer(L, 3, "read_file");
  if (max_bytes < 0) binding::argument_error(3, "read_file", "a size limit below 0");
  const HostBytes bytes =
      read_file_bytes(path, function.c_str(),
                      ReadOptions{.max_bytes = static_cast<size_t>(max_bytes), .gunzip = false});
  push_string(L, bytes.data(), bytes.size(), function.c_str());
  return 1;
}

// write_file(path, bytes, function): `bytes` written to `path`, atomically;
// only a regular file (or a new one) is replaced. Errors name `function`.
int write_file(lua_State* L) {
  const std::string path = check_string(L, 1, "write_file");
  size_t size = 0;
  if (lua_type(L, 2) != LUA_TSTRING) type_error(L, 2, "write_file", "string");
  const char* bytes = lua_tolstring(L, 2, &size);
  const std::string function = check_string(L, 3, "write_file");
  lazylua::write_file(path, std::string_view(bytes, size), function.c_str());
  return 0;
}

int write_gzip(lua_State* L) {
  const std::string path = check_string(L, 1, "write_gzip");
  const std::string bytes = check_string(L, 2, "write_gzip");
  lazylua::write_file(path, gzip_bytes(bytes, "write_gzip"), "write_gzip");
  return 0;
}

int is_terminal(lua_State* L) {
  lua_pushboolean(L, isatty(static_cast<int>(check_integer(L, 1, "isatty"))) == 1);
  return 1;
}

int terminal_width(lua_State* L) {
  winsize size{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) {
    lua_pushinteger(L, size.ws_col);
  } else {
    lua_pushnil(L);
  }
  return 1;
}

int monotonic_seconds(lua_State* L) {
  const auto now = std::chrono::steady_clock::now().time_since_epoch();
  lua_pushnumber(L, std::chrono::duration<double>(now).count());
  return 1;
}

}  // namespace

int open_stdlib_native(lua_State* L) {
  const luaL_Reg functions[] = {
      {"take_rows", guarded<take_rows>},
      {"isatty", guarded<is_terminal>},
      {"terminal_width", guarded<terminal_width>},
      {"monotonic_seconds", guarded<monotonic_seconds>},
      {nullptr, nullptr},
  };
  // The ones that open files by name: a sandbox has none of them (data.lua
  // then leaves out its readers too).
  const luaL_Reg file_functions[] = {
      {"read_idx", guarded<read_idx>},     {"read_csv", guarded<read_csv>},
      {"read_file", guarded<read_file>},   {"write_file", guarded<write_file>},
      {"write_gzip", guarded<write_gzip>}, {nullptr, nullptr},
  };
  const bool sandboxed = is_sandboxed(L);
  luaL_newlib(L, functions);
  if (!sandboxed) luaL_setfuncs(L, file_functions, 0);
  add_dist_functions(L);
  add_onnx_functions(L);
  add_call_replay_functions(L);
  lua_pushboolean(L, sandboxed);
  lua_setfield(L, -2, "sandbox");
  return 1;
}

}  // namespace lazylua
