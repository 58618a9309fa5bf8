// lua_bytecode.h - a Lua 5.4 chunk as Lua's own parser compiled it: the
// function prototypes of `lua_dump`'s output, decoded, with the source line
// of every instruction. lazylua-lint reads scripts through this, so that
// what it analyses is exactly what the interpreter will run, with no second
// Lua grammar in the project.
//
// Example:
//   std::string error;
//   std::optional<Proto> main = compile_chunk(text, "@train.lua", &error);
//   for (size_t pc = 0; pc < main->code.size(); pc++)
//     if (opcode(main->code[pc]) == Opcode::SELF) ... main->lines[pc] ...
//
// The dump format and the instruction layout are those of Lua 5.4 (ldump.c,
// lopcodes.h); the reader checks the header's version and sizes, and every
// count against the bytes left, so a different Lua is an error, not garbage.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lazylua::lint {

// Lua 5.4's opcodes in their numeric order.
// clang-format off
#define LAZYLUA_LUA_OPCODES(X)                                                                   \
  X(MOVE) X(LOADI) X(LOADF) X(LOADK) X(LOADKX) X(LOADFALSE) X(LFALSESKIP) X(LOADTRUE)            \
  X(LOADNIL) X(GETUPVAL) X(SETUPVAL) X(GETTABUP) X(GETTABLE) X(GETI) X(GETFIELD) X(SETTABUP)     \
  X(SETTABLE) X(SETI) X(SETFIELD) X(NEWTABLE) X(SELF) X(ADDI) X(ADDK) X(SUBK) X(MULK) X(MODK)    \
  X(POWK) X(DIVK) X(IDIVK) X(BANDK) X(BORK) X(BXORK) X(SHRI) X(SHLI) X(ADD) X(SUB) X(MUL)        \
  X(MOD) X(POW) X(DIV) X(IDIV) X(BAND) X(BOR) X(BXOR) X(SHL) X(SHR) X(MMBIN) X(MMBINI)           \
  X(MMBINK) X(UNM) X(BNOT) X(NOT) X(LEN) X(CONCAT) X(CLOSE) X(TBC) X(JMP) X(EQ) X(LT) X(LE)      \
  X(EQK) X(EQI) X(LTI) X(LEI) X(GTI) X(GEI) X(TEST) X(TESTSET) X(CALL) X(TAILCALL) X(RETURN)     \
  X(RETURN0) X(RETURN1) X(FORLOOP) X(FORPREP) X(TFORPREP) X(TFORCALL) X(TFORLOOP) X(SETLIST)     \
  X(CLOSURE) X(VARARG) X(VARARGPREP) X(EXTRAARG)
// clang-format on

enum class Opcode : uint8_t {
#define LAZYLUA_OPCODE_ENUM(name) name,
  LAZYLUA_LUA_OPCODES(LAZYLUA_OPCODE_ENUM)
#undef LAZYLUA_OPCODE_ENUM
      count
};

const char* opcode_name(Opcode op);

// The fields of an instruction (lopcodes.h: iABC, iABx, iAsBx, isJ).
inline Opcode opcode(uint32_t i) {
  return static_cast<Opcode>(i & 0x7F);
}
inline int arg_a(uint32_t i) {
  return static_cast<int>((i >> 7) & 0xFF);
}
inline int arg_k(uint32_t i) {
  return static_cast<int>((i >> 15) & 1);
}
inline int arg_b(uint32_t i) {
  return static_cast<int>((i >> 16) & 0xFF);
}
inline int arg_c(uint32_t i) {
  return static_cast<int>((i >> 24) & 0xFF);
}
inline int arg_bx(uint32_t i) {
  return static_cast<int>(i >> 15);
}
inline int arg_sbx(uint32_t i) {
  return arg_bx(i) - ((1 << 16) - 1);
}
inline int arg_sj(uint32_t i) {
  return static_cast<int>(i >> 7) - ((1 << 24) - 1);
}

struct Constant {
  enum class Kind { nil, boolean, integer, number, string } kind = Kind::nil;
  std::string text;  // a string's bytes
};

struct LocalVariable {
  std::string name;
  int start_pc = 0;  // live in [start_pc, end_pc)
  int end_pc = 0;
};

struct Proto {
  std::string source;
  int line_defined = 0;
  int last_line_defined = 0;
  std::vector<uint32_t> code;
  std::vector<int> lines;  // the source line of each instruction
  std::vector<Constant> constants;
  // Where each upvalue comes from when the function is created: a register
  // of the enclosing function (in_stack) or one of its upvalues.
  struct Upvalue {
    bool in_stack = false;
    int index = 0;
  };
  std::vector<Upvalue> upvalues;
  std::vector<std::string> upvalue_names;
  std::vector<LocalVariable> locals;
  std::vector<Proto> protos;  // the functions defined inside, in order
};

// The string constant `index` of `proto`, or null when it is not a string.
const std::string* string_constant(const Proto& proto, int index);

// Compiles `text` with Lua's parser (`chunk_name` as luaL_loadbuffer takes
// it, "@file" for a file) and decodes the result. On a syntax error or a
// dump this reader does not understand: nullopt, and *error says why (a
// syntax error as Lua words it: "file:line: message").
std::optional<Proto> compile_chunk(const std::string& text, const std::string& chunk_name,
                                   std::string* error);

// Decodes the bytes of lua_dump (with debug information). Exposed for tests
// of damaged input.
std::optional<Proto> decode_dump(const std::string& bytes, std::string* error);

}  // namespace lazylua::lint
