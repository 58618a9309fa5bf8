// precompiled_header.h - the text every generated source starts with (the
// includes and kernel math: common_source_text() in codegen.h), parsed once
// per toolchain rather than by every graph's compile (docs/architecture.md,
// stage 6).
//
// Parsing that text is about half of a typical graph's compile (~70 ms of
// ~160 ms of CPU with GCC 12 at -O2), and a split build (compile_parts in
// toolchain.cpp) parses it once per part. So the disk cache directory keeps
// it as a header with its GCC precompiled form beside it, and a graph's
// compiler gets `-include <header>` and only the graph's own text. GCC
// records in the .gch the state the text leaves behind (its macros, its
// declarations, the `#pragma GCC optimize` of codegen_prelude()), so the
// object is the same, byte for byte, as from the whole text on stdin.
//
// Example (what DiskCache::build does):
//   bool written = false;
//   if (!compile_generated_source(tool, source, cache.directory(), source_file, object_file,
//                                 &error, &written) && !written) { ...build elsewhere... }
//
// Files, in the cache directory: common-<16 hex>.h, the text, and
// common-<16 hex>.h.gch, the header compiled with the toolchain's flags
// (less -shared) and `-x c-header`. The hex is a hash of the text and the
// toolchain's identity (compiler, its version, the CPU, the flags), so that
// another lazylua's text, another compiler or other flags never meet a
// header that is not theirs. Each file is written under a temporary name and
// renamed into place (processes share the directory). Headers whose .gch no
// process has used for a week go when a new one is made.
//
// Falling back: with no cache directory, a source that does not start with
// the common text, a header that cannot be made, or any failure of a compile
// through the header, the whole source is compiled as before. Each compile
// through the header has -Werror=invalid-pch (toolchain.h): a .gch that GCC
// finds but will not use (a stale or corrupt file) fails the compile rather
// than being parsed as text unnoticed. When the whole source then compiles,
// the header was at fault: its .gch is removed (the next process makes it
// again) and this process compiles whole sources from then on.
#pragma once

#include <string>

#include "compiler/toolchain.h"

namespace lazylua::compiler {

// The path of the common header for `tool` in `directory` (a disk cache
// directory: ours and trusted), its .gch made now if it is missing (a build
// of ~0.25 s, once per directory and toolchain); "" when it cannot be made
// or failed before in this process, or when an interrupt stopped its build
// (tried again by the next call). Thread-safe; never throws.
std::string precompiled_common_header(const Toolchain& tool, const std::string& directory);

// Writes the generated C `source` to source_path and compiles it into the
// shared object output_path (compile_shared_object): through `directory`'s
// common header when source starts with common_source_text() and there is
// one, else, and after any failure that way, as the whole text. The files
// stay where they are (the caller removes source_path, and output_path on
// failure). False + *error when the compiler fails, or when source_path
// cannot be written (*written then false). Never throws.
bool compile_generated_source(const Toolchain& tool, const std::string& source,
                              const std::string& directory, const std::string& source_path,
                              const std::string& output_path, std::string* error, bool* written);

}  // namespace lazylua::compiler
