// disk_cache.cpp - compiled graphs kept on disk; see disk_cache.h for the rules.
#include "compiler/disk_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <vector>

#include "compiler/cache_entry.pb.h"
#include "compiler/precompiled_header.h"

namespace lazylua::compiler {

namespace {

// Temporaries older than this were left by a process that died mid-build
// (a build takes well under a second); younger ones may be in use.
constexpr time_t kStaleTemporarySeconds = 3600;

// mkdir -p. Mode 0700: the cache holds code we will run, so it is nobody
// else's to write (XDG also asks for 0700).
bool make_directories(const std::string& path, std::string* error) {
  for (size_t end = 1; end <= path.size(); ++end) {
    if (end < path.size() && path[end] != '/') continue;
    std::string prefix = path.substr(0, end);
    if (mkdir(prefix.c_str(), 0700) == 0 || errno == EEXIST) continue;
    int mkdir_error = errno;
    struct stat info;
    if (stat(prefix.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) continue;
    *error = "cannot create " + prefix + ": " + errno_text(mkdir_error);
    return false;
  }
  struct stat info;
  if (stat(path.c_str(), &info) != 0) {
    *error = "cannot use " + path + ": " + errno_text(errno);
    return false;
  }
  if (!S_ISDIR(info.st_mode)) {
    *error = path + " is not a directory";
    return false;
  }
  return true;
}

// Whether we can create files in `directory`: trying is the only reliable
// test (access() ignores read-only mounts for root, and ACLs in general).
bool can_write_in(const std::string& directory, std::string* error) {
  std::string probe = unique_temp_path(directory + "/write-check");
  if (!write_new_file(probe, "", error)) return false;
  unlink(probe.c_str());
  return true;
}

std::string mode_text(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// A directory whose objects we may dlopen: ours (the effective user's) and
// writable by nobody else, or another user could plant code that we run.
// Its ancestors too, as sshd's StrictModes checks a user's files: each
// owned by root or by us, and writable by no one else unless sticky (like
// /tmp, where only an entry's owner may rename or delete it). Otherwise
// another user could rename the cache directory, or a parent, between this
// check and the later opens, and put one of theirs in its place. With the
// whole chain safe, nobody else can change what our paths name, so the
// cache opens files by path (dlopen and the compiler need paths anyway)
// rather than through one directory descriptor and openat.
//
// The chain is checked on the resolved path (realpath), which *resolved
// receives and the cache then uses: a symlink on the way (~/.cache ->
// /data/me/cache) is followed once, here, so that the link's owner cannot
// later point it elsewhere.
bool trusted_directory(const std::string& directory, std::string* resolved, std::string* error) {
  char* real = realpath(directory.c_str(), nullptr);
  if (!real) {
    *error = "cannot use " + directory + ": " + errno_text(errno);
    return false;
  }
  const std::string path = real;
  free(real);
  const uid_t me = geteuid();
  struct stat info;
  if (lstat(path.c_str(), &info) != 0) {
    *error = "cannot use " + path + ": " + errno_text(errno);
    return false;
  }
  if (info.st_uid != me) {
    *error = path + " belongs to user " + std::to_string(info.st_uid) + ", not to this user (" +
             std::to_string(me) + ")";
    return false;
  }
  if (info.st_mode & (S_IWGRP | S_IWOTH)) {
    *error =
        path + " is writable by other users (mode " + mode_text(info.st_mode) + "; chmod go-w it)";
    return false;
  }
  // The ancestors, from the parent up to "/".
  for (size_t slash = path.rfind('/'); slash != std::string::npos && path.size() > 1;
       slash = slash == 0 ? std::string::npos : path.rfind('/', slash - 1)) {
    const std::string ancestor = slash == 0 ? "/" : path.substr(0, slash);
    if (lstat(ancestor.c_str(), &info) != 0) {
      *error = "cannot use " + ancestor + ": " + errno_text(errno);
      return false;
    }
    if (!S_ISDIR(info.st_mode)) {  // a symlink swapped in since realpath
      *error = ancestor + " is not a directory";
      return false;
    }
    if (info.st_uid != 0 && info.st_uid != me) {
      *error = path + " is inside " + ancestor + ", which belongs to user " +
               std::to_string(info.st_uid) + ", not to root or this user (" + std::to_string(me) +
               ")";
      return false;
    }
    if ((info.st_mode & (S_IWGRP | S_IWOTH)) && !(info.st_mode & S_ISVTX)) {
      *error = path + " is inside " + ancestor + ", which is writable by other users (mode " +
               mode_text(info.st_mode) + ", not sticky): they could rename it away";
      return false;
    }
  }
  *resolved = path;
  return true;
}

std::string home_directory() {
  if (const char* home = std::getenv("HOME"); home && *home) return home;
  struct passwd entry;
  struct passwd* found = nullptr;
  char buffer[4096];
  if (getpwuid_r(getuid(), &entry, buffer, sizeof buffer, &found) == 0 && found && found->pw_dir &&
      *found->pw_dir) {
    return found->pw_dir;
  }
  return "";
}

// The object of graph `key` defines its key (see built_for): a consistent
// entry that holds another graph's object is then still a miss.
constexpr const char* kKeySymbol = "lazylua_graph_key";

std::string key_definition(uint64_t key) {
  char text[96];
  std::snprintf(text, sizeof text, "\nconst unsigned long long %s = 0x%016llxULL;\n", kKeySymbol,
                static_cast<unsigned long long>(key));
  return text;
}

bool built_for(const Library& library, uint64_t key) {
  const auto* stored = static_cast<const unsigned long long*>(library.symbol(kKeySymbol));
  return stored && *stored == key;
}

// Whether `name` is one of an entry's two files; *stem is the name without
// its extension. Entries are named <16 hex>-<8 hex>.so and .rec (entry_stem).
bool is_entry_file(const std::string& name, std::string* stem) {
  const size_t dot = name.rfind('.');
  if (dot != 16 + 1 + 8) return false;
  const std::string extension = name.substr(dot);
  if (extension != ".so" && extension != ".rec") return false;
  for (size_t i = 0; i < dot; i++) {
    const bool hex = std::isxdigit(static_cast<unsigned char>(name[i]));
    if (i == 16 ? name[i] != '-' : !hex) return false;
  }
  *stem = name.substr(0, dot);
  return true;
}

constexpr uint64_t kDefaultCacheBound = uint64_t{1} << 30;

}  // namespace

uint64_t cache_size_bound_from_environment() {
  const char* text = std::getenv("LAZYLUA_CACHE_MAX");
  if (!text || !*text) return kDefaultCacheBound;
  char* end = nullptr;
  errno = 0;
  const unsigned long long number = std::strtoull(text, &end, 10);
  uint64_t scale = 1;
  if (*end == 'K' || *end == 'k') scale = uint64_t{1} << 10;
  if (*end == 'M' || *end == 'm') scale = uint64_t{1} << 20;
  if (*end == 'G' || *end == 'g') scale = uint64_t{1} << 30;
  if (scale != 1) end++;
  uint64_t bytes = 0;
  if (end == text || *end != '\0' || errno != 0 ||
      !std::isdigit(static_cast<unsigned char>(*text)) ||
      __builtin_mul_overflow(number, scale, &bytes)) {
    static std::once_flag told;
    std::call_once(told, [text] {
      std::fprintf(stderr,
                   "lazylua: LAZYLUA_CACHE_MAX=%s is not a size (such as 500M or 2G); using 1G\n",
                   text);
    });
    return kDefaultCacheBound;
  }
  return bytes;
}

std::string default_cache_directory() {
  if (const char* chosen = std::getenv("LAZYLUA_CACHE_DIR"); chosen && *chosen) return chosen;
  // XDG says a relative XDG_CACHE_HOME is invalid and must be ignored.
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && xdg[0] == '/') {
    return std::string(xdg) + "/lazylua";
  }
  std::string home = home_directory();
  return home.empty() ? "" : home + "/.cache/lazylua";
}

DiskCache& DiskCache::instance() {
  // Must not call toolchain(): toolchain() asks for this cache's directory.
  // Never destroyed: the compile thread may still be using it at exit.
  static DiskCache* cache = new DiskCache(default_cache_directory());
  return *cache;
}

DiskCache& DiskCache::for_directory(const std::string& directory) {
  static std::mutex mutex;
  static auto* caches = new std::map<std::string, DiskCache*>;
  std::lock_guard lock(mutex);
  DiskCache*& cache = (*caches)[directory];
  if (!cache) cache = new DiskCache(directory);
  return *cache;
}

DiskCache::DiskCache(std::string directory, uint64_t max_bytes)
    : directory_(std::move(directory)), max_bytes_(max_bytes) {
  try {
    while (directory_.size() > 1 && directory_.back() == '/') directory_.pop_back();
    if (directory_.empty()) {
      why_disabled_ = "no cache directory (set LAZYLUA_CACHE_DIR or HOME)";
      return;
    }
    std::string error;
    if (!make_directories(directory_, &error) || !can_write_in(directory_, &error)) {
      why_disabled_ = "the disk cache is off: " + error;
      return;
    }
    std::string resolved;
    if (!trusted_directory(directory_, &resolved, &error)) {
      // Objects from this directory would run in this process: say so once.
      why_disabled_ = "the disk cache is off: " + error;
      std::fprintf(stderr, "lazylua: %s\n", why_disabled_.c_str());
      return;
    }
    directory_ = resolved;
    enabled_ = true;
  } catch (const std::exception& exception) {
    enabled_ = false;
    why_disabled_ = std::string("the disk cache is off: ") + exception.what();
  }
}

std::string DiskCache::entry_stem(uint64_t key) const {
  return entry_stem(key, identified_toolchain());
}

std::string DiskCache::entry_stem(uint64_t key, const Toolchain& tool) const {
  const std::string identity = tool.identity + "\n" + lazylua_build_identity();
  const uint64_t identity_hash = fnv1a_64(identity.data(), identity.size());
  char name[48];
  std::snprintf(name, sizeof name, "/%016llx-%08x", static_cast<unsigned long long>(key),
                static_cast<unsigned>((identity_hash ^ (identity_hash >> 32)) & 0xffffffffu));
  return directory_ + name;
}

std::string DiskCache::object_path(uint64_t key) const {
  return entry_stem(key) + ".so";
}
std::string DiskCache::record_path(uint64_t key) const {
  return entry_stem(key) + ".rec";
}

void DiskCache::remove_entry(uint64_t key) const {
  // Record first: a record without its object would be a wasted read, an
  // object without a record is a plain miss.
  std::string stem = entry_stem(key);
  unlink((stem + ".rec").c_str());
  unlink((stem + ".so").c_str());
}

std::shared_ptr<Library> DiskCache::load(uint64_t key, std::string* payload) {
  if (!enabled_) return nullptr;
  try {
    // Loading needs no trial build: the object is checked by dlopen and its key.
    const Toolchain& tool = identified_toolchain();
    if (tool.identity.empty()) return nullptr;
    std::string stem = entry_stem(key);
    std::string record_text, error;
    bool missing = false;
    if (!read_file(stem + ".rec", &record_text, &error, &missing)) {
      // No record: never built, or another process is between its two
      // renames. Either way not ours to delete.
      if (!missing) remove_entry(key);
      return nullptr;
    }
    cache::CacheEntry record;
    bool valid =
        record.ParseFromString(record_text) && record.format_version() == kCacheFormatVersion &&
        record.key() == key && record.toolchain_identity() == tool.identity &&
        record.build_identity() == lazylua_build_identity() &&
        fnv1a_64(record.payload().data(), record.payload().size()) == record.payload_checksum();
    std::string object;
    if (valid) valid = read_file(stem + ".so", &object, &error);
    if (valid && record.object_verified()) {
      valid = object.size() == record.object_size() &&
              fnv1a_64(object.data(), object.size()) == record.object_checksum();
    }
    if (!valid) {
      remove_entry(key);
      return nullptr;
    }
    // dlopen by the final name: the bytes there were just verified, and any
    // later replacement is a complete file too (rename is atomic).
    // dlopen runs the object's constructors before built_for checks its key:
    // an entry that passed the record checks but holds other code would run
    // it. Acceptable because only this user can write here (the whole chain
    // is checked at start, trusted_directory): such an object is one this
    // user put there, and this user can run code anyway.
    std::shared_ptr<Library> library = compiler::load(stem + ".so", &error);
    if (!library || !built_for(*library, key)) {
      library.reset();
      remove_entry(key);
      return nullptr;
    }
    if (!record.object_verified()) {
      // A detached compiler's entry, checked by its key symbol: from now on
      // by the size and checksum of the bytes we loaded (best effort).
      std::string verified =
          record_bytes(key, tool, record.graph_summary(), record.payload(), &object);
      write_file_atomically(stem + ".rec", verified, &error);
    } else {
      // Used now: the size bound evicts the entries unused the longest.
      utimensat(AT_FDCWD, (stem + ".rec").c_str(), nullptr, 0);
    }
    if (payload) *payload = std::move(*record.mutable_payload());
    return library;
  } catch (const std::exception&) {  // bad_alloc: a miss
    return nullptr;
  }
}

std::shared_ptr<Library> DiskCache::build(uint64_t key, const std::string& source,
                                          const std::string& graph_summary, std::string* error,
                                          const std::string& payload) {
  try {
    const Toolchain& tool = toolchain();
    if (!tool.works) {
      *error = tool.why_not;
      return nullptr;
    }
    if (!enabled_) return build_in_private_directory(tool, source, error);
    std::call_once(stale_cleanup_, [this] { remove_stale_temporaries(); });

    std::string stem = entry_stem(key);
    std::string object_file = stem + ".so";
    std::string temporary_object = unique_temp_path(object_file);
    std::string temporary_source = temporary_object + ".c";
    std::string write_error;
    bool written = false;
    // Through the directory's precompiled common header when it can.
    bool compiled = compile_generated_source(tool, source + key_definition(key), directory_,
                                             temporary_source, temporary_object, error, &written);
    unlink(temporary_source.c_str());
    if (!written) {
      // The directory went away or filled up since we checked: still run.
      unlink(temporary_object.c_str());
      return build_in_private_directory(tool, source, error);
    }
    std::string object;
    std::shared_ptr<Library> library;
    if (compiled && read_file(temporary_object, &object, error)) {
      // Loaded under the temporary name, before the rename: we run exactly
      // the bytes we built and checksummed, whatever another process later
      // does to object_file. (glibc matches a later dlopen of object_file to
      // this mapping by inode, so load() in this process shares it.)
      library = compiler::load(temporary_object, error);
    }
    if (!library) {
      unlink(temporary_object.c_str());
      return nullptr;
    }
    if (rename(temporary_object.c_str(), object_file.c_str()) != 0) {
      unlink(temporary_object.c_str());
      return library;  // works; just not cached
    }

    const std::string record = record_bytes(key, tool, graph_summary, payload, &object);
    // Best effort: without its record the object is a miss, rebuilt next time.
    if (write_file_atomically(stem + ".rec", record, &write_error)) {
      enforce_size_bound(object.size() + record.size());
    }
    return library;
  } catch (const std::exception& exception) {
    *error = exception.what();
    return nullptr;
  }
}

std::string DiskCache::record_bytes(uint64_t key, const Toolchain& tool,
                                    const std::string& graph_summary, const std::string& payload,
                                    const std::string* object) {
  cache::CacheEntry record;
  record.set_format_version(kCacheFormatVersion);
  record.set_key(key);
  record.set_toolchain_identity(tool.identity);
  std::string command;
  for (const std::string& word : tool.command) command += (command.empty() ? "" : " ") + word;
  record.set_compiler_command(command);
  for (const std::string& flag : tool.flags) record.add_flags(flag);
  record.set_graph_summary(graph_summary);
  record.set_build_identity(lazylua_build_identity());
  record.set_payload(payload);
  record.set_payload_checksum(fnv1a_64(payload.data(), payload.size()));
  if (object) {
    record.set_object_size(object->size());
    record.set_object_checksum(fnv1a_64(object->data(), object->size()));
    record.set_object_verified(true);
  }
  record.set_created_unix_seconds(static_cast<int64_t>(std::time(nullptr)));
  return record.SerializeAsString();
}

namespace {

// A word for a /bin/sh command line: single-quoted, so nothing in it is
// expanded ('\'' is how sh spells a quote inside one).
std::string shell_quoted(const std::string& word) {
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

}  // namespace

bool DiskCache::build_detached(const std::vector<DetachedBuild>& builds) {
  std::vector<std::string> written;  // removed if the shell does not start
  try {
    bool checked = false;
    const Toolchain* tool = toolchain_if_identified(&checked);
    if (!enabled_ || !tool || (checked && !tool->works) || builds.empty()) return false;
    // The compiler as compile_shared_object runs it, then each entry's two
    // renames, the object first; whatever fails, the temporaries go.
    // Arguments: per build, its source, temporary object, temporary record
    // and the entry's stem.
    // Unchecked (the process ended during toolchain()'s trial build): a
    // graph that compiles is the check, and its verdict is remembered as
    // toolchain() would, or the next short run would start over.
    std::string remember_verdict = ":";
    if (!checked && !tool->verdict_file.empty()) {
      const std::string temporary = unique_temp_path(tool->verdict_file);
      remember_verdict = "printf %s " + shell_quoted(tool->identity) + " >" +
                         shell_quoted(temporary) + " && mv -f " + shell_quoted(temporary) + " " +
                         shell_quoted(tool->verdict_file);
    }
    // Bounded like any compile (LAZYLUA_CC_TIMEOUT): coreutils' timeout
    // kills the compiler's whole process group (cc1, as, ld), where there is one.
    std::string compile = "$limit ";
    for (const std::string& word : tool->command) compile += shell_quoted(word) + " ";
    for (const std::string& word : tool->flags) compile += shell_quoted(word) + " ";
    const std::string script =
        "limit=\nif command -v timeout >/dev/null 2>&1; then limit=\"timeout -s KILL " +
        std::to_string(compile_timeout_seconds()) +
        "\"; fi\n"
        "while [ \"$#\" -ge 4 ]; do\n"
        "  " +
        compile +
        "-x c - -o \"$2\" -lm <\"$1\" &&\n"
        "    mv -f \"$2\" \"$4.so\" && mv -f \"$3\" \"$4.rec\" && " +
        remember_verdict +
        "\n"
        "  rm -f \"$1\" \"$2\" \"$3\"\n"
        "  shift 4\n"
        "done\n";
    std::vector<std::string> argv = {"/bin/sh", "-c", script, "lazylua-detached-cc"};
    std::string error;
    for (const DetachedBuild& build : builds) {
      const std::string stem = entry_stem(build.key, *tool);
      struct stat info;
      if (lstat((stem + ".rec").c_str(), &info) == 0) continue;  // built meanwhile
      const std::string object = unique_temp_path(stem + ".so");
      const std::string source = object + ".c";
      const std::string record = unique_temp_path(stem + ".rec");
      if (!write_new_file(source, build.source + key_definition(build.key), &error)) continue;
      written.push_back(source);
      if (!write_new_file(
              record, record_bytes(build.key, *tool, build.graph_summary, build.payload, nullptr),
              &error)) {
        unlink(source.c_str());
        written.pop_back();
        continue;
      }
      written.push_back(record);
      for (const std::string& path : {source, object, record, stem}) argv.push_back(path);
    }
    if (argv.size() > 4 && start_detached(argv, &error)) return true;
  } catch (const std::exception&) {  // bad_alloc: nothing started
  }
  for (const std::string& path : written) unlink(path.c_str());
  return false;
}

// Runs once per process, on its first build (which costs far more than a
// directory scan): removes temporaries that a crashed process left behind.
void DiskCache::remove_stale_temporaries() const {
  DIR* listing = opendir(directory_.c_str());
  if (!listing) return;
  time_t now = std::time(nullptr);
  while (const dirent* entry = readdir(listing)) {
    std::string name = entry->d_name;
    if (!is_temp_name(name)) continue;
    std::string path = directory_ + "/" + name;
    struct stat info;
    if (lstat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
        now - info.st_mtime > kStaleTemporarySeconds) {
      unlink(path.c_str());
    }
  }
  closedir(listing);
}

void DiskCache::enforce_size_bound(uint64_t added_bytes) {
  if (max_bytes_ == 0) return;
  std::lock_guard lock(size_mutex_);
  if (known_bytes_ >= 0) {
    known_bytes_ += static_cast<int64_t>(added_bytes);
    if (static_cast<uint64_t>(known_bytes_) <= max_bytes_) return;
  }
  struct Entry {
    uint64_t bytes = 0;
    timespec last_used{};  // the record's mtime; an object alone: its own
    bool has_record = false;
  };
  std::map<std::string, Entry> entries;
  DIR* listing = opendir(directory_.c_str());
  if (!listing) return;
  while (const dirent* found = readdir(listing)) {
    std::string stem;
    const std::string name = found->d_name;
    if (!is_entry_file(name, &stem)) continue;
    struct stat info;
    if (lstat((directory_ + "/" + name).c_str(), &info) != 0) continue;
    Entry& entry = entries[stem];
    entry.bytes += static_cast<uint64_t>(info.st_size);
    const bool record = name.back() == 'c';
    if (record || !entry.has_record) entry.last_used = info.st_mtim;
    entry.has_record = entry.has_record || record;
  }
  closedir(listing);
  uint64_t total = 0;
  std::vector<std::pair<timespec, std::string>> by_age;
  for (const auto& [stem, entry] : entries) {
    total += entry.bytes;
    by_age.push_back({entry.last_used, stem});
  }
  // Down to 90%, so that the next few builds do not each rescan.
  const uint64_t target = max_bytes_ - max_bytes_ / 10;
  if (total > max_bytes_) {
    std::sort(by_age.begin(), by_age.end(), [](const auto& a, const auto& b) {
      return a.first.tv_sec != b.first.tv_sec ? a.first.tv_sec < b.first.tv_sec
                                              : a.first.tv_nsec < b.first.tv_nsec;
    });
    const time_t now = std::time(nullptr);
    for (const auto& [last_used, stem] : by_age) {
      if (total <= target) break;
      const Entry& entry = entries[stem];
      // An object without a record may be another process's build between
      // its two renames: only an old one is abandoned.
      if (!entry.has_record && now - last_used.tv_sec < kStaleTemporarySeconds) continue;
      // Record first, as in remove_entry: an object without one is a miss.
      // A process that has the object loaded keeps its mapping.
      unlink((directory_ + "/" + stem + ".rec").c_str());
      unlink((directory_ + "/" + stem + ".so").c_str());
      total -= entry.bytes;
    }
  }
  known_bytes_ = static_cast<int64_t>(total);
}

}  // namespace lazylua::compiler
