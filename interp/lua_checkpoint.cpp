// lua_checkpoint.cpp - tensor.save(path, table) and tensor.load(path).
//
// The file is a CheckpointFile (interp/checkpoint.proto) whose payload is
// the serialized table, covered by a crc32. Loading checks, in order, that
// the file parses, is ours, has our format version and an intact checksum,
// and only then decodes the payload, validating every tensor's dtype, shape
// and byte count: a damaged file gives an error, never garbage tensors.
#include "interp/lua_checkpoint.h"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <climits>
#include <cstring>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "interp/checkpoint.pb.h"
#include "interp/file_bytes.h"
#include "interp/lua_safe.h"
#include "interp/lua_tensor_internal.h"
#include "interp/runtime.h"
#include "tensor/array.h"

namespace lazylua::binding {
namespace {

namespace proto = lazylua::checkpoint;

// Tensor data is written as it sits in memory; the format says little-endian.
static_assert(std::endian::native == std::endian::little,
              "checkpoints store little-endian data: add byte swapping for this target");

constexpr const char* kMagic = "lazylua-checkpoint";
constexpr uint32_t kFormatVersion = 1;
// Protobuf refuses to parse messages nested deeper than 100 levels, and each
// Lua table costs three (Table, Entry, Value): refuse deeper tables on save.
constexpr int kMaxTableDepth = 30;

// The crc32 of the magic followed by the payload. Starting with the magic
// makes the checksum of an empty payload non-zero, so a file cut off right
// before its payload (which proto3 reads as payload "" and checksum 0) does
// not pass for a checkpoint of an empty table.
uint32_t payload_checksum(const std::string& payload) {
  uLong crc = crc32_z(0, reinterpret_cast<const Bytef*>(kMagic), std::strlen(kMagic));
  crc = crc32_z(crc, reinterpret_cast<const Bytef*>(payload.data()), payload.size());
  return static_cast<uint32_t>(crc);
}

proto::DType to_proto(DType dtype) {
  switch (dtype) {
    case DType::boolean:
      return proto::DTYPE_BOOL;
    case DType::i32:
      return proto::DTYPE_I32;
    case DType::i64:
      return proto::DTYPE_I64;
    case DType::f32:
      return proto::DTYPE_F32;
    case DType::f64:
      return proto::DTYPE_F64;
  }
  return proto::DTYPE_UNSPECIFIED;
}

std::optional<DType> from_proto(int dtype) {
  switch (dtype) {
    case proto::DTYPE_BOOL:
      return DType::boolean;
    case proto::DTYPE_I32:
      return DType::i32;
    case proto::DTYPE_I64:
      return DType::i64;
    case proto::DTYPE_F32:
      return DType::f32;
    case proto::DTYPE_F64:
      return DType::f64;
    default:
      return std::nullopt;
  }
}

// Where in the saved table a value sits, for messages: `layers[2].weight`.
class KeyPath {
 public:
  void push_integer(int64_t key) { parts_.push_back(fmt::format("[{}]", key)); }
  void push_string(const std::string& key) {
    const bool identifier = !key.empty() && !std::isdigit(static_cast<unsigned char>(key[0])) &&
                            std::all_of(key.begin(), key.end(), [](char c) {
                              return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
                            });
    if (!identifier) {
      parts_.push_back(fmt::format("[\"{}\"]", key));
    } else {
      parts_.push_back(parts_.empty() ? key : "." + key);
    }
  }
  void pop() { parts_.pop_back(); }
  std::string text() const {
    if (parts_.empty()) return "the top-level table";
    std::string joined;
    for (const std::string& part : parts_) joined += part;
    return "'" + joined + "'";
  }

 private:
  std::vector<std::string> parts_;
};

// ---- save ----

using Key = std::variant<int64_t, std::string>;

struct Encoder {
  lua_State* L;
  KeyPath path;
  std::vector<const void*> open_tables;  // the tables being encoded: a cycle check
  // Tensors are synced together once the walk is over, then copied here.
  std::vector<std::pair<proto::TensorData*, Tensor>> tensors;

  void encode_table(int index, proto::Table* out) {
    index = lua_absindex(L, index);
    const void* identity = lua_topointer(L, index);
    if (std::find(open_tables.begin(), open_tables.end(), identity) != open_tables.end()) {
      fail("tensor.save: the table at {} contains itself (a cycle cannot be saved)", path.text());
    }
    if (static_cast<int>(open_tables.size()) >= kMaxTableDepth) {
      fail("tensor.save: tables nested deeper than {} levels (at {})", kMaxTableDepth, path.text());
    }
    if (!lua_checkstack(L, 8)) fail("tensor.save: Lua stack overflow");
    open_tables.push_back(identity);

    // Sorted keys make the file a function of the table's contents.
    std::vector<Key> keys;
    lua_pushnil(L);
    while (lua_next(L, index) != 0) {
      lua_pop(L, 1);  // the value
      if (lua_isinteger(L, -1)) {
        keys.emplace_back(static_cast<int64_t>(lua_tointeger(L, -1)));
      } else if (lua_type(L, -1) == LUA_TSTRING) {
        size_t length = 0;
        const char* text = lua_tolstring(L, -1, &length);
        keys.emplace_back(std::string(text, length));
      } else {
        const char* type = lua_type(L, -1) == LUA_TNUMBER ? "float" : luaL_typename(L, -1);
        lua_pop(L, 2);
        fail("tensor.save: a {} key in {} (keys must be strings or integers)", type, path.text());
      }
    }
    std::sort(keys.begin(), keys.end());  // integers (index 0) before strings

    for (const Key& key : keys) {
      proto::Entry* entry = out->add_entries();
      if (const int64_t* integer = std::get_if<int64_t>(&key)) {
        entry->set_integer_key(*integer);
        path.push_integer(*integer);
        lua_pushinteger(L, *integer);
      } else {
        const std::string& text = std::get<std::string>(key);
        entry->set_string_key(text);
        path.push_string(text);
        lua_safe::push_string(L, text);
      }
      lua_rawget(L, index);
      encode_value(-1, entry->mutable_value());
      lua_pop(L, 1);
      path.pop();
    }
    open_tables.pop_back();
  }

  // A module (or an optimizer, a schedule) is an object whose class has a
  // state_dict method: saved as a table it would load back as plain data
  // without its methods. The class chain is walked with raw accesses only
  // (no metamethod runs, so nothing can raise through this C++ frame).
  void refuse_object_with_state_dict(int index) {
    index = lua_absindex(L, index);
    if (!lua_checkstack(L, 8)) fail("tensor.save: Lua stack overflow");
    const int top = lua_gettop(L);
    lua_pushvalue(L, index);
    bool has_state_dict = false;
    int depth = 0;
    std::string class_name;
    for (; depth < 16 && lua_type(L, -1) == LUA_TTABLE; depth++) {
      lua_safe::read_field(L, -1, "state_dict");
      has_state_dict = lua_type(L, -1) == LUA_TFUNCTION;
      lua_pop(L, 1);
      if (has_state_dict || !lua_getmetatable(L, -1)) break;
      if (class_name.empty()) {
        lua_safe::read_field(L, -1, "__name");
        if (lua_type(L, -1) == LUA_TSTRING) class_name = lua_tostring(L, -1);
        lua_pop(L, 1);
      }
      lua_safe::read_field(L, -1, "__index");
      // An __index function (a class that computes some fields) stands
      // for no table: the class is then the metatable itself.
      if (lua_type(L, -1) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_pushvalue(L, -1);
      }
      lua_remove(L, -2);  // the metatable
      lua_remove(L, -2);  // the table it belongs to
    }
    lua_settop(L, top);
    // A table holding a state_dict function itself is plain data, whose
    // function encode_value refuses anyway; an object gets it from a class.
    if (!has_state_dict || depth == 0) return;
    fail(
        "tensor.save: {} is an object{}, which would load back as a plain table without its "
        "methods; save its state instead: tensor.save(path, {{model = model:state_dict()}}) "
        "(opt:state_dict() for an optimizer), and load it with load_state_dict",
        path.text(), class_name.empty() ? "" : " of class " + class_name);
  }

  void encode_value(int index, proto::Value* out) {
    switch (lua_type(L, index)) {
      case LUA_TNUMBER:
        if (lua_isinteger(L, index)) {
          out->set_integer(lua_tointeger(L, index));
        } else {
          out->set_number(lua_tonumber(L, index));
        }
        return;
      case LUA_TSTRING: {
        size_t length = 0;
        const char* text = lua_tolstring(L, index, &length);
        out->set_string(text, length);
        return;
      }
      case LUA_TBOOLEAN:
        out->set_boolean(lua_toboolean(L, index));
        return;
      case LUA_TTABLE:
        refuse_object_with_state_dict(index);
        encode_table(index, out->mutable_table());
        return;
      case LUA_TUSERDATA:
        if (const Tensor* tensor = to_tensor(L, index)) {
          if (!*tensor) fail("tensor.save: the tensor at {} is closed", path.text());
          tensors.emplace_back(out->mutable_tensor(), *tensor);
          return;
        }
        break;
      default:
        break;
    }
    fail(
        "tensor.save: cannot save a {} (at {}); a checkpoint holds tables, numbers, strings, "
        "booleans and tensors",
        luaL_typename(L, index), path.text());
  }

  // Syncs every pending tensor in one go, then copies the data.
  void copy_tensor_data() {
    std::vector<TensorImpl*> targets;
    for (auto& [message, tensor] : tensors) targets.push_back(tensor.get());
    if (!targets.empty()) tensor_context(L)->sync(targets, SyncCause::host_read);
    for (auto& [message, tensor] : tensors) {
      const Array data = contiguous(observe(tensor, SyncCause::host_read));
      message->set_dtype(to_proto(data.dtype));
      for (int d = 0; d < data.rank(); d++) message->add_shape(data.shape[d]);
      const size_t bytes = static_cast<size_t>(data.numel()) * dtype_size(data.dtype);
      if (bytes > 0) message->set_data(data.raw_data(), bytes);
    }
  }
};

int save(lua_State* L) {
  if (lua_type(L, 1) != LUA_TSTRING) type_error(L, 1, "save", "string (a file path)");
  if (lua_type(L, 2) != LUA_TTABLE) type_error(L, 2, "save", "table");
  const std::string path = lua_tostring(L, 1);

  Encoder encoder{L, {}, {}, {}};
  encoder.refuse_object_with_state_dict(2);
  proto::Table table;
  encoder.encode_table(2, &table);
  encoder.copy_tensor_data();

  if (table.ByteSizeLong() > static_cast<size_t>(INT_MAX)) {
    fail("tensor.save: the checkpoint would be {} bytes; the format holds at most 2 GiB",
         table.ByteSizeLong());
  }
  proto::CheckpointFile file;
  file.set_magic(kMagic);
  file.set_format_version(kFormatVersion);
  std::string payload;
  table.SerializeToString(&payload);
  table.Clear();  // the tensor data now lives in payload only
  file.set_payload_crc32(payload_checksum(payload));
  file.set_payload(std::move(payload));
  std::string bytes;
  file.SerializeToString(&bytes);
  write_file(path, bytes, "tensor.save");
  return 0;
}

// ---- load ----

struct Decoder {
  lua_State* L;
  const std::string& file_path;
  KeyPath path;

  [[noreturn]] void corrupted(const std::string& what) {
    fail("tensor.load: '{}' is corrupted: {} at {}", file_path, what, path.text());
  }

  void push_table(const proto::Table& table) {
    if (!lua_checkstack(L, 8)) fail("tensor.load: Lua stack overflow");
    lua_safe::create_table(L, 0, table.entries_size());
    for (const proto::Entry& entry : table.entries()) {
      switch (entry.key_case()) {
        case proto::Entry::kIntegerKey:
          path.push_integer(entry.integer_key());
          lua_pushinteger(L, entry.integer_key());
          break;
        case proto::Entry::kStringKey:
          path.push_string(entry.string_key());
          lua_safe::push_string(L, entry.string_key());
          break;
        default:
          corrupted("an entry without a key");
      }
      push_value(entry.value());
      lua_safe::set_raw(L, -3);
      path.pop();
    }
  }

  void push_value(const proto::Value& value) {
    switch (value.kind_case()) {
      case proto::Value::kInteger:
        lua_pushinteger(L, value.integer());
        return;
      case proto::Value::kNumber:
        lua_pushnumber(L, value.number());
        return;
      case proto::Value::kString:
        lua_safe::push_string(L, value.string());
        return;
      case proto::Value::kBoolean:
        lua_pushboolean(L, value.boolean());
        return;
      case proto::Value::kTable:
        push_table(value.table());
        return;
      case proto::Value::kTensor:
        check_extents(value.tensor());
        push_tensor(L, decode_tensor(value.tensor()));
        return;
      default:
        corrupted("a value of unknown kind");
    }
  }

  // Extents whose product leaves int64 (2^40 x 2^40) are corrupt: checked
  // before anything multiplies them (a wrapped product could pass for 0).
  void check_extents(const proto::TensorData& message) {
    int64_t count = 1;
    for (const int64_t extent : message.shape()) {
      if (extent < 0) corrupted(fmt::format("extent {}", extent));
      if (__builtin_mul_overflow(count, extent, &count)) corrupted("a tensor too large");
    }
  }

  Array decode_tensor(const proto::TensorData& message) {
    const std::optional<DType> dtype = from_proto(message.dtype());
    if (!dtype) corrupted(fmt::format("unknown dtype code {}", static_cast<int>(message.dtype())));
    if (message.shape_size() > kMaxDims) {
      corrupted(fmt::format("a tensor of {} dimensions", message.shape_size()));
    }
    Shape shape;
    for (const int64_t extent : message.shape()) {
      if (extent < 0 || extent > kMaxElements) corrupted(fmt::format("extent {}", extent));
      shape.push_back(extent);
    }
    int64_t count = 0;
    try {
      count = checked_numel(shape, "tensor.load");
    } catch (const Error&) {
      corrupted(fmt::format("a tensor of shape {}, too large", shape_string(shape)));
    }
    const size_t expected = static_cast<size_t>(count) * dtype_size(*dtype);
    if (message.data().size() != expected) {
      corrupted(
          fmt::format("{} bytes of tensor data, expected {}", message.data().size(), expected));
    }
    if (*dtype == DType::boolean) {
      for (const char byte : message.data()) {
        if (byte != 0 && byte != 1) corrupted("a bool tensor holding a byte other than 0 or 1");
      }
    }
    Array array = Array::empty(shape, *dtype, "tensor.load");
    if (expected > 0) std::memcpy(array.raw_data(), message.data().data(), expected);
    return array;
  }
};

int load(lua_State* L) {
  if (lua_type(L, 1) != LUA_TSTRING) type_error(L, 1, "load", "string (a file path)");
  const std::string path = lua_tostring(L, 1);
  proto::CheckpointFile file;
  {
    // At most protobuf's 2 GiB, all a message can hold (save refuses more):
    // a larger file is refused from its size, before it is read.
    const HostBytes bytes =
        read_file_bytes(path, "tensor.load", ReadOptions{.max_bytes = INT_MAX, .gunzip = false});
    if (bytes.size() == 0) fail("tensor.load: '{}' is empty, not a checkpoint", path);
    if (!file.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
      fail("tensor.load: '{}' is truncated or corrupted (it does not parse as a checkpoint)", path);
    }
  }
  if (file.magic() != kMagic) fail("tensor.load: '{}' is not a lazylua checkpoint", path);
  if (file.format_version() == 0) {  // proto3 reads a missing field as 0: cut off there
    fail("tensor.load: '{}' is truncated or corrupted (no format version)", path);
  }
  if (file.format_version() != kFormatVersion) {
    fail("tensor.load: '{}' has checkpoint format version {}; this lazylua reads version {}", path,
         file.format_version(), kFormatVersion);
  }
  const uint32_t computed = payload_checksum(file.payload());
  if (computed != file.payload_crc32()) {
    fail(
        "tensor.load: '{}' is truncated or corrupted (checksum mismatch: stored {:08x}, "
        "computed {:08x})",
        path, file.payload_crc32(), computed);
  }
  proto::Table table;
  if (!table.ParseFromString(file.payload())) {
    fail("tensor.load: '{}' is corrupted (its payload does not parse)", path);
  }
  file.Clear();
  Decoder decoder{L, path, {}};
  decoder.push_table(table);
  return 1;
}

}  // namespace

void register_checkpoint_functions(lua_State* L) {
  // A sandboxed interpreter touches no file: it gets neither.
  if (is_sandboxed(L)) return;
  const luaL_Reg functions[] = {
      {"save", guarded<save>},
      {"load", guarded<load>},
      {nullptr, nullptr},
  };
  luaL_setfuncs(L, functions, 0);
}

}  // namespace lazylua::binding
