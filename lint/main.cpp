// lazylua-lint: reports likely graph breaks in Lua scripts without running
// them (lint.h), one `file:line:column: message` a line as luacheck prints.
// Exit status: 0 when nothing was found, 1 when something was, 2 when a
// file could not be read or compiled.
//
//   lazylua-lint train.lua eval.lua
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "lint/lint.h"

namespace {

const char kUsage[] =
    "usage: lazylua-lint FILE...\n"
    "Reports likely graph breaks of lazy tensor code in loops: a value read\n"
    "(:item(), :tolist(), print, tostring, `..`, a comparison) on every\n"
    "iteration, and loops that record tensor ops but never end the step\n"
    "(tensor.mark_step() or an optimizer's step()). Exit status: 0 clean,\n"
    "1 findings, 2 a file that cannot be read or has a syntax error.\n";

bool read_file(const char* path, std::string* text) {
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored)) {
    errno = EISDIR;
    return false;
  }
  std::ifstream file(path, std::ios::binary);
  if (!file) return false;
  std::ostringstream bytes;
  bytes << file.rdbuf();
  if (file.bad()) return false;
  *text = bytes.str();
  return true;
}

// `--listing FILE`: each instruction as `pc [line] OPCODE` (pc from 1, as
// luac -l prints), for checking the decoder against luac.
int print_listing(const lazylua::lint::Proto& proto) {
  std::printf("function <%d,%d>\n", proto.line_defined, proto.last_line_defined);
  for (size_t pc = 0; pc < proto.code.size(); pc++) {
    std::printf("%zu [%d] %s\n", pc + 1, proto.lines[pc],
                lazylua::lint::opcode_name(lazylua::lint::opcode(proto.code[pc])));
  }
  for (const lazylua::lint::Proto& inner : proto.protos) print_listing(inner);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool listing = false;
  int first = 1;
  if (argc > 1 && (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h"))) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (argc > 1 && !std::strcmp(argv[1], "--listing")) listing = true, first = 2;
  if (first >= argc) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  int status = 0;
  int total = 0;
  for (int k = first; k < argc; k++) {
    const char* path = argv[k];
    std::string text;
    if (!read_file(path, &text)) {
      std::fprintf(stderr, "lazylua-lint: cannot read %s: %s\n", path, std::strerror(errno));
      status = 2;
      continue;
    }
    std::string error;
    const auto main_function = lazylua::lint::compile_chunk(text, std::string("@") + path, &error);
    if (!main_function) {
      std::fprintf(stderr, "lazylua-lint: %s\n", error.c_str());
      status = 2;
      continue;
    }
    if (listing) {
      print_listing(*main_function);
      continue;
    }
    for (const lazylua::lint::Finding& finding : lazylua::lint::lint_chunk(*main_function, text)) {
      std::printf("%s:%d:%d: %s\n", path, finding.line, finding.column, finding.message.c_str());
      total++;
    }
  }
  if (total > 0 && status == 0) status = 1;
  return status;
}
