// lua_bytecode.cpp - reads lua_dump's output (ldump.c of Lua 5.4).
#include "lint/lua_bytecode.h"

#include <lauxlib.h>
#include <lua.h>

#include <cstring>
#include <memory>

namespace lazylua::lint {
namespace {

// Thrown inside the reader only; decode_dump turns it into its error.
struct Malformed {
  const char* what;
};

class DumpReader {
 public:
  explicit DumpReader(const std::string& bytes) : bytes_(bytes) {}

  Proto read_chunk() {
    expect("\x1bLua", 4, "not a Lua chunk");
    if (byte() != 0x54 || byte() != 0) throw Malformed{"not a Lua 5.4 chunk"};
    expect("\x19\x93\r\n\x1a\n", 6, "a damaged chunk header");
    if (byte() != sizeof(uint32_t) || byte() != sizeof(int64_t) || byte() != sizeof(double)) {
      throw Malformed{"a chunk from a Lua with other type sizes"};
    }
    int64_t check_integer;
    double check_number;
    take(&check_integer, sizeof check_integer);
    take(&check_number, sizeof check_number);
    if (check_integer != 0x5678 || check_number != 370.5) {
      throw Malformed{"a chunk from a Lua with another number format"};
    }
    byte();  // the main function's upvalue count, read again with it
    return read_function("");
  }

  bool at_end() const { return position_ == bytes_.size(); }

 private:
  Proto read_function(const std::string& parent_source) {
    Proto proto;
    std::optional<std::string> source = string();
    proto.source = source ? *source : parent_source;
    proto.line_defined = count(1 << 30);
    proto.last_line_defined = count(1 << 30);
    byte();  // parameters
    byte();  // vararg
    byte();  // stack size
    proto.code.resize(count(remaining() / 4));
    for (uint32_t& instruction : proto.code) take(&instruction, sizeof instruction);
    proto.constants.resize(count(remaining()));
    for (Constant& constant : proto.constants) constant = read_constant();
    proto.upvalues.resize(count(remaining() / 3));
    for (Proto::Upvalue& upvalue : proto.upvalues) {
      upvalue.in_stack = byte() != 0;
      upvalue.index = byte();
      byte();  // kind: regular, constant, to-be-closed
    }
    proto.protos.reserve(count(remaining()));
    for (size_t k = proto.protos.capacity(); k > 0; k--) {
      proto.protos.push_back(read_function(proto.source));
    }
    read_debug(proto);
    return proto;
  }

  Constant read_constant() {
    Constant constant;
    switch (byte()) {
      case 0:  // LUA_VNIL
        return constant;
      case 1:   // LUA_VFALSE
      case 17:  // LUA_VTRUE
        constant.kind = Constant::Kind::boolean;
        return constant;
      case 3:  // LUA_VNUMINT
        constant.kind = Constant::Kind::integer;
        position_ += need(8);
        return constant;
      case 19:  // LUA_VNUMFLT
        constant.kind = Constant::Kind::number;
        position_ += need(8);
        return constant;
      case 4:   // LUA_VSHRSTR
      case 20:  // LUA_VLNGSTR
        constant.kind = Constant::Kind::string;
        constant.text = string().value_or("");
        return constant;
      default:
        throw Malformed{"a constant of an unknown type"};
    }
  }

  // lineinfo holds each instruction's line as a difference from the one
  // before, or -128 where abslineinfo has the line (ldebug.c).
  void read_debug(Proto& proto) {
    const size_t deltas = count(remaining());
    if (deltas != 0 && deltas != proto.code.size())
      throw Malformed{"line information of a bad size"};
    std::vector<int8_t> delta(deltas);
    take(delta.data(), deltas);
    const size_t absolutes = count(remaining() / 2);
    std::vector<std::pair<int, int>> absolute(absolutes);  // pc, line
    for (auto& [pc, line] : absolute) {
      pc = count(1 << 30);
      line = count(1 << 30);
    }
    proto.lines.assign(proto.code.size(), 0);
    int line = proto.line_defined;
    size_t next_absolute = 0;
    for (size_t pc = 0; pc < deltas; pc++) {
      if (delta[pc] != -128) {
        line += delta[pc];
      } else {
        if (next_absolute >= absolute.size() ||
            absolute[next_absolute].first != static_cast<int>(pc)) {
          throw Malformed{"line information out of order"};
        }
        line = absolute[next_absolute++].second;
      }
      proto.lines[pc] = line;
    }
    proto.locals.resize(count(remaining() / 3));
    for (LocalVariable& local : proto.locals) {
      local.name = string().value_or("");
      local.start_pc = count(1 << 30);
      local.end_pc = count(1 << 30);
    }
    proto.upvalue_names.resize(count(remaining()));
    for (std::string& name : proto.upvalue_names) name = string().value_or("");
  }

  // ldump.c's dumpSize: 7 bits a byte, most significant first, the last
  // byte marked by its high bit.
  size_t count(size_t limit) {
    size_t value = 0;
    for (int k = 0;; k++) {
      if (k == 10) throw Malformed{"a damaged size"};
      const uint8_t b = byte();
      value = (value << 7) | (b & 0x7F);
      if (b & 0x80) break;
    }
    if (value > limit) throw Malformed{"a count larger than the chunk"};
    return value;
  }

  std::optional<std::string> string() {
    const size_t size = count(remaining() + 1);
    if (size == 0) return std::nullopt;
    std::string text = bytes_.substr(position_, need(size - 1));
    position_ += size - 1;
    return text;
  }

  uint8_t byte() {
    need(1);
    return static_cast<uint8_t>(bytes_[position_++]);
  }
  void take(void* out, size_t size) {
    std::memcpy(out, bytes_.data() + position_, need(size));
    position_ += size;
  }
  void expect(const char* literal, size_t size, const char* message) {
    if (bytes_.compare(position_, size, literal, size) != 0) throw Malformed{message};
    position_ += size;
  }
  size_t need(size_t size) const {
    if (size > remaining()) throw Malformed{"a truncated chunk"};
    return size;
  }
  size_t remaining() const { return bytes_.size() - position_; }

  const std::string& bytes_;
  size_t position_ = 0;
};

int append_bytes(lua_State*, const void* data, size_t size, void* out) {
  static_cast<std::string*>(out)->append(static_cast<const char*>(data), size);
  return 0;
}

}  // namespace

const char* opcode_name(Opcode op) {
  static const char* const names[] = {
#define LAZYLUA_OPCODE_NAME(name) #name,
      LAZYLUA_LUA_OPCODES(LAZYLUA_OPCODE_NAME)
#undef LAZYLUA_OPCODE_NAME
  };
  return op < Opcode::count ? names[static_cast<int>(op)] : "?";
}

const std::string* string_constant(const Proto& proto, int index) {
  if (index < 0 || index >= static_cast<int>(proto.constants.size())) return nullptr;
  const Constant& constant = proto.constants[index];
  return constant.kind == Constant::Kind::string ? &constant.text : nullptr;
}

std::optional<Proto> decode_dump(const std::string& bytes, std::string* error) {
  try {
    DumpReader reader(bytes);
    Proto main = reader.read_chunk();
    if (!reader.at_end()) throw Malformed{"bytes after the chunk"};
    return main;
  } catch (const Malformed& malformed) {
    *error = malformed.what;
    return std::nullopt;
  }
}

std::optional<Proto> compile_chunk(const std::string& text, const std::string& chunk_name,
                                   std::string* error) {
  std::unique_ptr<lua_State, decltype(&lua_close)> state(luaL_newstate(), lua_close);
  if (!state) {
    *error = "not enough memory";
    return std::nullopt;
  }
  lua_State* L = state.get();
  // As luaL_loadfile: a first line starting with '#' (#!/usr/bin/env ...)
  // is skipped, its newline kept so that line numbers stay right.
  std::string source = text;
  if (!source.empty() && source[0] == '#') source.erase(0, source.find('\n'));
  if (luaL_loadbufferx(L, source.data(), source.size(), chunk_name.c_str(), "t") != LUA_OK) {
    const char* message = lua_tostring(L, -1);
    *error = message ? message : "the chunk does not load";
    return std::nullopt;
  }
  std::string bytes;
  lua_dump(L, append_bytes, &bytes, 0);
  return decode_dump(bytes, error);
}

}  // namespace lazylua::lint
