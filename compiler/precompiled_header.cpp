// precompiled_header.cpp - the common text of generated sources compiled
// once per toolchain; see precompiled_header.h.
#include "compiler/precompiled_header.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <map>
#include <mutex>
#include <vector>

#include "compiler/codegen.h"
#include "tensor/interrupt.h"

namespace lazylua::compiler {

namespace {

constexpr const char* kHeaderPrefix = "common-";
// A header whose .gch no process has used for this long belongs to a
// lazylua or a compiler that is gone.
constexpr time_t kUnusedHeaderSeconds = 7 * 24 * 3600;

// Per header path: usable (true) or failed (false) in this process. A path
// names one text and one toolchain, so what was found once holds.
std::mutex headers_mutex;
std::map<std::string, bool>* known_headers = new std::map<std::string, bool>();  // used at exit

std::string header_path(const Toolchain& tool, const std::string& directory) {
  const std::string named = common_source_text() + '\0' + tool.identity;
  char name[48];
  std::snprintf(name, sizeof name, "/%s%016llx.h", kHeaderPrefix,
                static_cast<unsigned long long>(fnv1a_64(named.data(), named.size())));
  return directory + name;
}

// Removes the other headers in `directory` whose .gch has not been used for
// kUnusedHeaderSeconds (each process marks its own as used: use_header).
void remove_unused_headers(const std::string& directory, const std::string& keep) {
  DIR* listing = opendir(directory.c_str());
  if (!listing) return;
  const time_t now = std::time(nullptr);
  std::vector<std::string> unused;
  while (const dirent* entry = readdir(listing)) {
    const std::string name = entry->d_name;
    if (name.compare(0, 7, kHeaderPrefix) != 0 || name.size() < 6 ||
        name.compare(name.size() - 6, 6, ".h.gch") != 0) {
      continue;
    }
    const std::string path = directory + "/" + name;
    struct stat info;
    if (path != keep + ".gch" && lstat(path.c_str(), &info) == 0 &&
        now - info.st_mtime > kUnusedHeaderSeconds) {
      unused.push_back(path);
    }
  }
  closedir(listing);
  for (const std::string& gch : unused) {
    unlink(gch.c_str());
    unlink(gch.substr(0, gch.size() - 4).c_str());  // its .h
  }
}

// Makes `path` hold the common text and path.gch its precompiled form,
// unless they do already. False if either cannot be made.
bool make_header(const Toolchain& tool, const std::string& path) {
  const std::string& text = common_source_text();
  std::string found, error;
  if (!read_file(path, &found, &error) || found != text) {
    if (!write_file_atomically(path, text, &error)) return false;
  }
  const std::string gch = path + ".gch";
  struct stat info;
  if (lstat(gch.c_str(), &info) == 0 && S_ISREG(info.st_mode) && info.st_size > 0) {
    utimensat(AT_FDCWD, gch.c_str(), nullptr, 0);  // used now (remove_unused_headers)
    return true;
  }
  // An interrupt stops this build as it stops a graph's (a slow or loaded
  // compiler can take long here); the header is then tried again by the
  // next compile (precompiled_common_header).
  std::vector<std::string> arguments;
  for (const std::string& flag : tool.flags) {
    if (flag != "-shared") arguments.push_back(flag);  // nothing is linked
  }
  const std::string temporary = unique_temp_path(gch);
  arguments.insert(arguments.end(), {"-x", "c-header", path, "-o", temporary});
  bool built = run_compiler(tool, arguments, "", &error);
  if (built && rename(temporary.c_str(), gch.c_str()) != 0) {
    error = "cannot rename " + temporary + ": " + errno_text(errno);
    built = false;
  }
  unlink(temporary.c_str());  // after a failure
  if (!built) {
    if (compiler_debug_level() >= 1) {
      std::fprintf(stderr, "[lazylua] no precompiled header %s: %s\n", gch.c_str(), error.c_str());
    }
    return false;
  }
  const size_t slash = path.rfind('/');
  remove_unused_headers(path.substr(0, slash), path);
  return true;
}

// After a compile through `path` failed and the whole text compiled.
void forget_header(const std::string& path, const std::string& error) {
  std::lock_guard lock(headers_mutex);
  (*known_headers)[path] = false;
  unlink((path + ".gch").c_str());
  if (compiler_debug_level() >= 1) {
    std::fprintf(stderr,
                 "[lazylua] the precompiled header %s.gch failed, removed it (the whole "
                 "source compiled):\n%s\n",
                 path.c_str(), error.c_str());
  }
}

}  // namespace

std::string precompiled_common_header(const Toolchain& tool, const std::string& directory) {
  try {
    if (directory.empty() || tool.identity.empty()) return "";
    const std::string path = header_path(tool, directory);
    std::lock_guard lock(headers_mutex);
    const auto known = known_headers->find(path);
    if (known != known_headers->end()) return known->second ? path : "";
    const bool usable = make_header(tool, path);
    if (!usable && interrupt_requested()) return "";  // not a verdict: tried again next time
    (*known_headers)[path] = usable;
    return usable ? path : "";
  } catch (const std::exception&) {  // bad_alloc: no header
    return "";
  }
}

bool compile_generated_source(const Toolchain& tool, const std::string& source,
                              const std::string& directory, const std::string& source_path,
                              const std::string& output_path, std::string* error, bool* written) {
  *written = false;
  try {
    const std::string& common = common_source_text();
    std::string header;
    if (source.compare(0, common.size(), common) == 0) {
      header = precompiled_common_header(tool, directory);
    }
    std::string header_error;
    if (!header.empty()) {
      if (!write_new_file(source_path, source.substr(common.size()), error)) return false;
      *written = true;
      if (compile_shared_object(tool, source_path, output_path, &header_error, header)) {
        return true;
      }
      if (interrupt_requested()) {
        *error = header_error;
        return false;
      }
      unlink(source_path.c_str());  // written again below, whole
    }
    *written = false;
    if (!write_new_file(source_path, source, error)) return false;
    *written = true;
    if (!compile_shared_object(tool, source_path, output_path, error)) return false;
    if (!header.empty()) forget_header(header, header_error);
    return true;
  } catch (const std::exception& exception) {
    *error = exception.what();
    return false;
  }
}

}  // namespace lazylua::compiler
