// disk_cache.h - compiled graphs kept on disk across processes (docs/architecture.md §5,
// stage 6), so a second run of the same script compiles nothing and, since
// the record holds the optimized program and its plan, does not even run
// the passes and codegen.
//
// Example (the compile step of an executor, after the in-memory cache missed):
//   DiskCache& cache = DiskCache::instance();
//   std::string plan_bytes;
//   std::shared_ptr<Library> library = cache.load(graph.key, &plan_bytes);
//   if (!library || !deserialize_plan(plan_bytes, ...)) {
//     ...passes and codegen...
//     library = cache.build(graph.key, source, summary, &error, plan_bytes);
//   }
//   if (!library) fall_back_to_reference(error);
//
// Layout: <dir>/<16-hex key>-<8-hex identity hash>.so, the object, and .rec,
// a CacheEntry record (cache_entry.proto) with the format version, key,
// toolchain identity and flags, lazylua's build identity, a graph summary,
// the caller's payload (the plan) and its checksum, and the object's size
// and FNV-1a checksum. The identity hash covers the toolchain identity and
// lazylua_build_identity(), so another compiler or another lazylua build
// uses other files, and never runs a plan this build did not make.
// Beside the entries: common-<16 hex>.h and .h.gch, the text every generated
// source starts with and its precompiled form, through which build()
// compiles (precompiled_header.h); they are not entries (no size bound).
//
// Safety rules:
// - Every file is written under a unique temporary name and renamed into
//   place, the object before the record; so a complete record always names a
//   complete object, and a reader that finds no record has a plain miss.
// - load() trusts nothing: the record must parse and match (version, key,
//   toolchain and build identity, payload checksum), the object must have the
//   recorded size and checksum, and define the key (built_for); otherwise
//   both files are deleted and the caller compiles again. Only regular files
//   are read (O_NOFOLLOW, a size cap), only from a directory that is ours
//   and 0700, inside parents that are root's or ours and writable by no one
//   else unless sticky (as sshd's StrictModes; checked on the resolved path,
//   which the cache then uses: trusted_directory in disk_cache.cpp).
// - build_detached() leaves compiles to a process that outlives us (at exit,
//   for compiles still in flight): a shell compiles into a temporary object,
//   then renames it and then a prepared record into place. That record has
//   no object checksum (object_verified false): load() then checks the
//   object by its key symbol alone, and rewrites the record with the size
//   and checksum it read, so later loads verify them.
// - Processes sharing a directory may race on a key: each builds, each renames;
//   builds of one source are byte-identical (see compile_shared_object), and a
//   mismatch from any other cause is detected by the next load and rebuilt.
// - A directory that cannot be created or written disables the disk cache:
//   load() misses, build() builds in a private temporary directory.
// - The directory is bounded (LAZYLUA_CACHE_MAX, default 1 GiB): when a build
//   takes it past the bound, the least recently used entries (by the mtime
//   of their record, which load() touches) go until it is under 90% of it.
//   Detached builds are counted at the next scan of a later build.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "compiler/toolchain.h"

namespace lazylua::compiler {

// Bumped when the record or the object's ABI changes: old entries then miss.
// 2: the record holds the plan (payload), the key is the graph key.
constexpr uint32_t kCacheFormatVersion = 2;

// LAZYLUA_CACHE_DIR, else $XDG_CACHE_HOME/lazylua, else ~/.cache/lazylua;
// "" if none can be named (no HOME).
std::string default_cache_directory();

// LAZYLUA_CACHE_MAX in bytes: a number with an optional K, M or G suffix
// (powers of 1024); 0 means no bound. Unset or unreadable: 1 GiB (an
// unreadable value is said once on stderr).
uint64_t cache_size_bound_from_environment();

class DiskCache {
 public:
  // The process's cache, in default_cache_directory(). Thread-safe.
  static DiskCache& instance();
  // The process's cache in `directory` (made on first use, never destroyed,
  // like instance()): an embedding host may give each interpreter its own.
  static DiskCache& for_directory(const std::string& directory);

  // A cache in `directory`, created (mkdir -p, mode 0700) if missing; ""
  // gives a disabled cache. Tests make their own; everyone else uses instance().
  explicit DiskCache(std::string directory,
                     uint64_t max_bytes = cache_size_bound_from_environment());
  DiskCache(const DiskCache&) = delete;
  DiskCache& operator=(const DiskCache&) = delete;

  bool enabled() const { return enabled_; }
  const std::string& directory() const { return directory_; }
  // When !enabled(): why, for LAZYLUA_DEBUG.
  const std::string& why_disabled() const { return why_disabled_; }

  // The verified, loaded entry for `key`, or nullptr (a miss); *payload (if
  // given) gets the payload stored with it. A bad entry is deleted. Never
  // compiles, never throws.
  std::shared_ptr<Library> load(uint64_t key, std::string* payload = nullptr);

  // Compiles `source` with toolchain(), stores it under `key` and returns it
  // loaded; graph_summary (ops and shapes, for people reading the cache) and
  // payload (for the caller's next load) go into the record. When the cache
  // is disabled or cannot be written it still builds and returns a library.
  // nullptr + *error when the compiler fails or does not work. Never throws.
  std::shared_ptr<Library> build(uint64_t key, const std::string& source,
                                 const std::string& graph_summary, std::string* error,
                                 const std::string& payload = "");

  // One build for build_detached: build()'s arguments.
  struct DetachedBuild {
    uint64_t key = 0;
    std::string source, graph_summary, payload;
  };
  // Leaves `builds` to one process that outlives this one (start_detached:
  // /bin/sh running the compiler on each in turn), for compiles in flight
  // at exit. Returns once the sources and records are written and the shell
  // started (about a millisecond), or at once when the cache is disabled,
  // the toolchain was never found, or an entry exists already. Builds that
  // fail leave nothing behind. False if nothing was started; never throws.
  bool build_detached(const std::vector<DetachedBuild>& builds);

  // Where key's files live (with toolchain()'s identity).
  std::string object_path(uint64_t key) const;
  std::string record_path(uint64_t key) const;

 private:
  std::string entry_stem(uint64_t key) const;  // with toolchain()
  std::string entry_stem(uint64_t key, const Toolchain& tool) const;
  // The record of `key`'s entry, built with `tool`; object: its bytes, or
  // nullptr while a detached compiler has yet to make it.
  static std::string record_bytes(uint64_t key, const Toolchain& tool,
                                  const std::string& graph_summary, const std::string& payload,
                                  const std::string* object);
  void remove_entry(uint64_t key) const;
  void remove_stale_temporaries() const;
  // Called after a build added `added_bytes`: evicts old entries when the
  // directory is past max_bytes_.
  void enforce_size_bound(uint64_t added_bytes);

  std::string directory_;
  bool enabled_ = false;
  std::string why_disabled_;
  std::once_flag stale_cleanup_;
  uint64_t max_bytes_;  // 0: unbounded
  std::mutex size_mutex_;
  // The directory's entry bytes as of our last scan plus our builds since;
  // -1 before the first scan. Other processes' builds are seen at the next
  // scan, which happens whenever this estimate passes the bound.
  int64_t known_bytes_ = -1;
};

}  // namespace lazylua::compiler
