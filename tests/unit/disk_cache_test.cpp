// disk_cache_test.cpp - the on-disk compile cache: hits without compiling,
// corrupt entries are misses that get rebuilt, an unusable directory only
// turns the cache off, and concurrent builders of one key all succeed.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "compiler/cache_entry.pb.h"
#include "compiler/disk_cache.h"
#include "test_directory.h"

namespace lazylua::compiler {
namespace {

namespace fs = std::filesystem;

const char kSource[] = "int add(int a, int b) { return a + b; }\n";
constexpr uint64_t kKey = 0x0123456789abcdefull;

class DiskCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(toolchain().works) << toolchain().why_not;
    directory_ = make_test_directory("cache");
    ASSERT_FALSE(directory_.empty());
  }
  void TearDown() override { remove_test_directory(directory_); }

  // Builds kSource under `key` in a cache of our directory and checks it runs.
  void build_entry(uint64_t key = kKey) {
    DiskCache cache(directory_);
    ASSERT_TRUE(cache.enabled()) << cache.why_disabled();
    std::string error;
    std::shared_ptr<Library> library = cache.build(key, kSource, "add(i32[], i32[])", &error);
    ASSERT_TRUE(library) << error;
    expect_adds(library);
    // The library goes out of scope here: the tests below modify the files,
    // and writing into a mapped object would crash whoever has it mapped.
  }

  void build_entry_in(DiskCache& cache) {
    std::string error;
    expect_adds(cache.build(kKey, kSource, "add", &error));
    expect_adds(cache.load(kKey));
  }

  static void expect_adds(const std::shared_ptr<Library>& library) {
    ASSERT_TRUE(library);
    auto add = reinterpret_cast<int (*)(int, int)>(library->symbol("add"));
    ASSERT_NE(add, nullptr);
    EXPECT_EQ(add(20, 22), 42);
  }

  std::vector<std::string> names() const {
    std::vector<std::string> found;
    for (const auto& entry : fs::directory_iterator(directory_)) {
      std::string name = entry.path().filename();
      if (name.rfind("toolchain-", 0) != 0) found.push_back(name);
    }
    std::sort(found.begin(), found.end());
    return found;
  }

  // A load that misses must delete the entry, and a build must then work.
  void expect_miss_then_rebuild() {
    DiskCache cache(directory_);
    EXPECT_EQ(cache.load(kKey), nullptr);
    EXPECT_FALSE(fs::exists(cache.object_path(kKey)));
    EXPECT_FALSE(fs::exists(cache.record_path(kKey)));
    build_entry();
    expect_adds(DiskCache(directory_).load(kKey));
  }

  cache::CacheEntry read_record() {
    std::string bytes, error;
    EXPECT_TRUE(read_file(DiskCache(directory_).record_path(kKey), &bytes, &error)) << error;
    cache::CacheEntry record;
    EXPECT_TRUE(record.ParseFromString(bytes));
    return record;
  }

  void write_record(const cache::CacheEntry& record) {
    std::string error;
    ASSERT_TRUE(write_file_atomically(DiskCache(directory_).record_path(kKey),
                                      record.SerializeAsString(), &error))
        << error;
  }

  std::string directory_;
};

TEST_F(DiskCacheTest, BuildStoresAnEntryThatLaterLoadsHit) {
  build_entry();
  DiskCache cache(directory_);
  std::string object = cache.object_path(kKey);
  ASSERT_TRUE(fs::exists(object));
  ASSERT_TRUE(fs::exists(cache.record_path(kKey)));
  EXPECT_EQ(names().size(), 2u);  // .so + .rec, no temporaries
  EXPECT_EQ(fs::path(object).filename().string().substr(0, 17), "0123456789abcdef-");

  cache::CacheEntry record = read_record();
  EXPECT_EQ(record.format_version(), kCacheFormatVersion);
  EXPECT_EQ(record.key(), kKey);
  EXPECT_EQ(record.toolchain_identity(), toolchain().identity);
  EXPECT_EQ(record.graph_summary(), "add(i32[], i32[])");
  EXPECT_EQ(record.object_size(), fs::file_size(object));
  EXPECT_GT(record.flags_size(), 0);

  // A new cache (as in a second process) hits without compiling: the object
  // file is the same inode with the same modification time.
  struct stat before, after;
  ASSERT_EQ(stat(object.c_str(), &before), 0);
  DiskCache second(directory_);
  auto start = std::chrono::steady_clock::now();
  std::shared_ptr<Library> library = second.load(kKey);
  double milliseconds =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  expect_adds(library);
  ASSERT_EQ(stat(object.c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino);
  EXPECT_EQ(before.st_mtim.tv_nsec, after.st_mtim.tv_nsec);
  EXPECT_EQ(names().size(), 2u);
  std::printf("[ measure ] disk cache hit (verify + dlopen): %.2f ms (target 10 ms)\n",
              milliseconds);

  EXPECT_EQ(second.load(kKey + 1), nullptr);  // another key: a plain miss
}

TEST_F(DiskCacheTest, TruncatedObjectIsAMissAndIsRebuilt) {
  build_entry();
  std::string object = DiskCache(directory_).object_path(kKey);
  fs::resize_file(object, fs::file_size(object) / 2);
  expect_miss_then_rebuild();
}

TEST_F(DiskCacheTest, EmptyObjectIsAMiss) {
  build_entry();
  fs::resize_file(DiskCache(directory_).object_path(kKey), 0);
  expect_miss_then_rebuild();
}

TEST_F(DiskCacheTest, FlippedByteInObjectIsAMiss) {
  build_entry();
  std::string object = DiskCache(directory_).object_path(kKey);
  std::string bytes, error;
  ASSERT_TRUE(read_file(object, &bytes, &error)) << error;
  bytes[bytes.size() / 2] ^= 0x20;
  ASSERT_TRUE(write_file_atomically(object, bytes, &error)) << error;
  expect_miss_then_rebuild();
}

TEST_F(DiskCacheTest, MissingObjectIsAMiss) {
  build_entry();
  fs::remove(DiskCache(directory_).object_path(kKey));
  expect_miss_then_rebuild();
}

TEST_F(DiskCacheTest, GarbageRecordIsAMiss) {
  build_entry();
  std::string error;
  ASSERT_TRUE(write_file_atomically(DiskCache(directory_).record_path(kKey),
                                    "\xff\xfe garbage \x01\x02", &error));
  expect_miss_then_rebuild();
}

TEST_F(DiskCacheTest, TruncatedRecordIsAMiss) {
  build_entry();
  std::string record = DiskCache(directory_).record_path(kKey);
  fs::resize_file(record, fs::file_size(record) - 3);
  expect_miss_then_rebuild();
}

TEST_F(DiskCacheTest, RecordFromAnotherVersionIsAMiss) {
  build_entry();
  cache::CacheEntry record = read_record();
  record.set_format_version(kCacheFormatVersion + 1);
  write_record(record);
  expect_miss_then_rebuild();
}

TEST_F(DiskCacheTest, RecordForAnotherKeyIsAMiss) {
  build_entry();
  cache::CacheEntry record = read_record();
  record.set_key(kKey ^ 1);
  write_record(record);
  expect_miss_then_rebuild();
}

TEST_F(DiskCacheTest, RecordFromAnotherToolchainIsAMiss) {
  build_entry();
  cache::CacheEntry record = read_record();
  record.set_toolchain_identity("cc: some other compiler");
  write_record(record);
  expect_miss_then_rebuild();
}

TEST_F(DiskCacheTest, ObjectWithoutRecordIsAMissButNotDeleted) {
  // What a reader sees while a writer is between its two renames.
  build_entry();
  DiskCache cache(directory_);
  fs::remove(cache.record_path(kKey));
  EXPECT_EQ(cache.load(kKey), nullptr);
  EXPECT_TRUE(fs::exists(cache.object_path(kKey)));
}

TEST_F(DiskCacheTest, CompileErrorIsReportedAndLeavesNothing) {
  DiskCache cache(directory_);
  std::string error;
  EXPECT_EQ(cache.build(kKey, "int broken( {\n", "broken", &error), nullptr);
  EXPECT_NE(error.find("error"), std::string::npos) << error;
  EXPECT_TRUE(names().empty());
  EXPECT_EQ(cache.load(kKey), nullptr);
}

TEST_F(DiskCacheTest, UnusableDirectoryOnlyDisablesTheCache) {
  // A path under a regular file cannot be created, even by root.
  std::string file = directory_ + "/a-file";
  std::string error;
  ASSERT_TRUE(write_new_file(file, "x", &error)) << error;
  std::vector<std::string> unusable = {file + "/cache", file};
  if (geteuid() != 0) {
    // Not root: a read-only directory is unusable too. (Root writes anyway.)
    std::string read_only = directory_ + "/read-only";
    fs::create_directory(read_only);
    fs::permissions(read_only, fs::perms::owner_read | fs::perms::owner_exec);
    unusable.push_back(read_only);
    unusable.push_back(read_only + "/sub");
  }
  for (const std::string& path : unusable) {
    DiskCache cache(path);
    EXPECT_FALSE(cache.enabled()) << path;
    EXPECT_FALSE(cache.why_disabled().empty());
    EXPECT_EQ(cache.load(kKey), nullptr);
    std::shared_ptr<Library> library = cache.build(kKey, kSource, "add", &error);
    expect_adds(library);
    EXPECT_EQ(cache.load(kKey), nullptr);
  }
  DiskCache no_directory("");
  EXPECT_FALSE(no_directory.enabled());
  expect_adds(no_directory.build(kKey, kSource, "add", &error));
}

TEST_F(DiskCacheTest, DirectoryOthersCanWriteIsNotUsed) {
  // Another user could plant an object there that this process would run.
  std::string shared = directory_ + "/shared";
  fs::create_directory(shared);
  fs::permissions(shared, fs::perms::all);  // 0777
  DiskCache open_to_all(shared);
  EXPECT_FALSE(open_to_all.enabled());
  EXPECT_NE(open_to_all.why_disabled().find("writable by other users"), std::string::npos)
      << open_to_all.why_disabled();
  std::string error;
  expect_adds(open_to_all.build(kKey, kSource, "add", &error));
  EXPECT_FALSE(fs::exists(open_to_all.object_path(kKey)));
  fs::permissions(shared, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  EXPECT_TRUE(DiskCache(shared).enabled()) << DiskCache(shared).why_disabled();
  if (geteuid() == 0) {  // root can hand the directory to another user
    ASSERT_EQ(chown(shared.c_str(), 65534, 65534), 0);
    DiskCache foreign(shared);
    EXPECT_FALSE(foreign.enabled());
    EXPECT_NE(foreign.why_disabled().find("belongs to user 65534"), std::string::npos)
        << foreign.why_disabled();
  }
}

TEST_F(DiskCacheTest, ParentsMustBeSafeAsSshdStrictModesChecksThem) {
  // Another user could rename a parent they can write, with our 0700
  // cache in it, and put a directory of theirs in its place.
  const std::string open = directory_ + "/open";
  fs::create_directory(open);
  fs::permissions(open, fs::perms::all);  // 0777, not sticky
  const std::string inside = open + "/cache";
  DiskCache under_open(inside);  // created 0700 by us: the leaf alone is fine
  EXPECT_FALSE(under_open.enabled());
  EXPECT_NE(under_open.why_disabled().find("is inside " + open), std::string::npos)
      << under_open.why_disabled();
  EXPECT_NE(under_open.why_disabled().find("mode 0777, not sticky"), std::string::npos)
      << under_open.why_disabled();
  std::string error;
  expect_adds(under_open.build(kKey, kSource, "add", &error));
  EXPECT_FALSE(fs::exists(under_open.object_path(kKey)));

  // Sticky, as /tmp is: only an entry's owner may rename it. Accepted.
  fs::permissions(open, fs::perms::all | fs::perms::sticky_bit);
  DiskCache under_sticky(inside);
  EXPECT_TRUE(under_sticky.enabled()) << under_sticky.why_disabled();
  // /tmp itself (our fixture's directory is in it): world-writable and sticky.
  struct stat tmp {};
  ASSERT_EQ(stat(fs::temp_directory_path().c_str(), &tmp), 0);
  if ((tmp.st_mode & S_IWOTH) && (tmp.st_mode & S_ISVTX)) {
    EXPECT_TRUE(DiskCache(directory_ + "/in-tmp").enabled());
  }

  // Group-writable is as bad as world-writable.
  fs::permissions(open, fs::perms::owner_all | fs::perms::group_all);
  EXPECT_FALSE(DiskCache(inside).enabled());
  fs::permissions(open, fs::perms::owner_all);

  // A symlink in an unsafe directory, to a safe cache: followed once, the
  // cache then uses the resolved path (the link's owner cannot re-point it).
  const std::string safe = directory_ + "/safe";
  fs::create_directory(safe);
  fs::permissions(safe, fs::perms::owner_all);
  fs::permissions(open, fs::perms::all);
  fs::create_directory_symlink(safe, open + "/link");
  DiskCache through_link(open + "/link");
  ASSERT_TRUE(through_link.enabled()) << through_link.why_disabled();
  EXPECT_EQ(through_link.object_path(kKey).rfind(fs::canonical(safe).string() + "/", 0), 0u)
      << through_link.object_path(kKey);
  build_entry_in(through_link);
  EXPECT_TRUE(fs::exists(fs::path(safe) / fs::path(through_link.object_path(kKey)).filename()));

  // And the reverse: a link from a safe place into an unsafe one is judged
  // where it leads.
  fs::create_directory_symlink(inside, safe + "/to-open");
  EXPECT_FALSE(DiskCache(safe + "/to-open").enabled());

  if (geteuid() == 0) {  // root can hand a parent to another user
    const std::string foreign = directory_ + "/foreign";
    fs::create_directory(foreign);
    fs::permissions(foreign, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                 fs::perms::others_read | fs::perms::others_exec);  // 0755
    DiskCache before(foreign + "/cache");
    EXPECT_TRUE(before.enabled()) << before.why_disabled();
    ASSERT_EQ(chown(foreign.c_str(), 65534, 65534), 0);
    DiskCache after(foreign + "/cache");
    EXPECT_FALSE(after.enabled());
    EXPECT_NE(after.why_disabled().find("which belongs to user 65534"), std::string::npos)
        << after.why_disabled();
  }
}

TEST_F(DiskCacheTest, ConsistentEntryHoldingAnotherGraphsObjectIsAMiss) {
  // Entry B gets A's object and a record that matches it (size, checksum),
  // as a copied or colliding entry would: the key inside the object decides.
  constexpr uint64_t kOther = kKey ^ 0xff;
  build_entry(kKey);
  DiskCache cache(directory_);
  fs::copy_file(cache.object_path(kKey), cache.object_path(kOther));
  cache::CacheEntry record = read_record();
  record.set_key(kOther);
  std::string error;
  ASSERT_TRUE(write_file_atomically(cache.record_path(kOther), record.SerializeAsString(), &error));
  EXPECT_EQ(cache.load(kOther), nullptr);
  EXPECT_FALSE(fs::exists(cache.object_path(kOther)));  // evicted
  EXPECT_FALSE(fs::exists(cache.record_path(kOther)));
  expect_adds(cache.load(kKey));
}

TEST_F(DiskCacheTest, SpecialFilesInPlaceOfAnEntryAreMissesNotHangs) {
  for (const char* kind : {"fifo record", "fifo object", "/dev/zero object", "huge object"}) {
    SCOPED_TRACE(kind);
    build_entry();
    DiskCache cache(directory_);
    const std::string kind_text = kind;
    const bool record = kind_text.find("record") != std::string::npos;
    const std::string target = record ? cache.record_path(kKey) : cache.object_path(kKey);
    fs::remove(target);
    if (kind_text.rfind("fifo", 0) == 0) {
      ASSERT_EQ(mkfifo(target.c_str(), 0600), 0);
    } else if (kind_text.rfind("/dev/zero", 0) == 0) {
      fs::create_symlink("/dev/zero", target);
    } else {  // sparse: no disk used, but over the size limit
      std::FILE* file = std::fopen(target.c_str(), "w");
      ASSERT_NE(file, nullptr);
      std::fclose(file);
      fs::resize_file(target, kMaxReadBytes + 1);
      cache::CacheEntry entry = read_record();
      entry.set_object_size(kMaxReadBytes + 1);
      write_record(entry);
    }
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(cache.load(kKey), nullptr);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
    EXPECT_FALSE(fs::exists(fs::symlink_status(target)));  // evicted
    build_entry();
    expect_adds(DiskCache(directory_).load(kKey));
  }
}

TEST_F(DiskCacheTest, MissingDirectoryIsCreated) {
  std::string nested = directory_ + "/a/b/c/";
  DiskCache cache(nested);
  ASSERT_TRUE(cache.enabled()) << cache.why_disabled();
  EXPECT_EQ(cache.directory(), directory_ + "/a/b/c");
  EXPECT_TRUE(fs::is_directory(nested));
  std::string error;
  expect_adds(cache.build(kKey, kSource, "add", &error));
  expect_adds(DiskCache(nested).load(kKey));
}

TEST_F(DiskCacheTest, ThreadsBuildingOneKeyAllSucceed) {
  DiskCache shared(directory_);
  std::vector<std::shared_ptr<Library>> libraries(4);
  std::vector<std::string> errors(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      // Half share one cache object, half have their own: both must work.
      DiskCache own(directory_);
      DiskCache& cache = i % 2 ? shared : own;
      libraries[i] = cache.build(kKey, kSource, "add", &errors[i]);
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(libraries[i]) << errors[i];
    expect_adds(libraries[i]);
  }
  libraries.clear();
  expect_adds(DiskCache(directory_).load(kKey));
  EXPECT_EQ(names().size(), 2u);  // no temporaries left
}

TEST_F(DiskCacheTest, ProcessesBuildingOneKeyAllSucceed) {
  std::vector<pid_t> children;
  for (int i = 0; i < 3; ++i) {
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      DiskCache cache(directory_);
      std::string error;
      std::shared_ptr<Library> library = cache.build(kKey, kSource, "add", &error);
      auto add = library ? reinterpret_cast<int (*)(int, int)>(library->symbol("add")) : nullptr;
      _exit(add && add(1, 2) == 3 ? 0 : 1);
    }
    children.push_back(child);
  }
  for (pid_t child : children) {
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  expect_adds(DiskCache(directory_).load(kKey));
  EXPECT_EQ(names().size(), 2u);
}

TEST_F(DiskCacheTest, StaleTemporariesAreRemovedOnFirstBuild) {
  DiskCache cache(directory_);
  std::string stale = unique_temp_path(cache.object_path(kKey));
  std::string fresh = unique_temp_path(cache.object_path(kKey));
  std::string error;
  ASSERT_TRUE(write_new_file(stale, "left by a crash", &error));
  ASSERT_TRUE(write_new_file(fresh, "being written now", &error));
  fs::last_write_time(stale, fs::file_time_type::clock::now() - std::chrono::hours(2));
  expect_adds(cache.build(kKey + 7, kSource, "add", &error));
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(fresh));
}

TEST_F(DiskCacheTest, SizeBoundEvictsTheLeastRecentlyUsedEntries) {
  constexpr uint64_t kKeys[] = {0x1111, 0x2222, 0x3333, 0x4444};
  DiskCache unbounded(directory_, 0);
  std::string error;
  for (int i = 0; i < 3; i++) ASSERT_TRUE(unbounded.build(kKeys[i], kSource, "add", &error));
  const auto entry_bytes = [&](uint64_t key) {
    return fs::file_size(unbounded.object_path(key)) + fs::file_size(unbounded.record_path(key));
  };
  const uint64_t one = entry_bytes(kKeys[0]);
  EXPECT_EQ(entry_bytes(kKeys[1]), one);
  // Records dated 100, 200 and 300 s after the epoch; then entry 0 is used.
  for (int i = 0; i < 3; i++) {
    const timespec times[2] = {{100 * (i + 1), 0}, {100 * (i + 1), 0}};
    ASSERT_EQ(utimensat(AT_FDCWD, unbounded.record_path(kKeys[i]).c_str(), times, 0), 0);
  }
  expect_adds(unbounded.load(kKeys[0]));

  // Room for 3.5 entries: the 4th build passes the bound, and eviction goes
  // down to 90% of it (3.15 entries), so exactly the oldest goes: entry 1.
  DiskCache bounded(directory_, one * 7 / 2);
  ASSERT_TRUE(bounded.build(kKeys[3], kSource, "add", &error));
  EXPECT_TRUE(fs::exists(bounded.record_path(kKeys[0])));
  EXPECT_FALSE(fs::exists(bounded.record_path(kKeys[1])));
  EXPECT_FALSE(fs::exists(bounded.object_path(kKeys[1])));
  EXPECT_TRUE(fs::exists(bounded.record_path(kKeys[2])));
  EXPECT_TRUE(fs::exists(bounded.object_path(kKeys[3])));
  expect_adds(bounded.load(kKeys[2]));
  EXPECT_EQ(bounded.load(kKeys[1]), nullptr);
}

TEST(DiskCache, SizeBoundIsReadFromTheEnvironment) {
  const char* before = std::getenv("LAZYLUA_CACHE_MAX");
  const std::optional<std::string> saved =
      before ? std::optional<std::string>(before) : std::nullopt;
  unsetenv("LAZYLUA_CACHE_MAX");
  EXPECT_EQ(cache_size_bound_from_environment(), uint64_t{1} << 30);
  const std::pair<const char*, uint64_t> cases[] = {
      {"0", 0},           {"4096", 4096},     {"500M", 500ull << 20},
      {"2G", 2ull << 30}, {"64k", 65536},     {"junk", 1ull << 30},
      {"-5", 1ull << 30}, {"5T", 1ull << 30}, {"99999999999G", 1ull << 30}};
  for (const auto& [text, bytes] : cases) {
    setenv("LAZYLUA_CACHE_MAX", text, 1);
    EXPECT_EQ(cache_size_bound_from_environment(), bytes) << text;
  }
  if (saved) {
    setenv("LAZYLUA_CACHE_MAX", saved->c_str(), 1);
  } else {
    unsetenv("LAZYLUA_CACHE_MAX");
  }
}

TEST(DiskCache, DefaultDirectoryFollowsTheEnvironment) {
  auto saved = [](const char* name) {
    const char* value = std::getenv(name);
    return std::make_pair(std::string(name),
                          value ? std::optional<std::string>(value) : std::optional<std::string>());
  };
  auto cache_dir = saved("LAZYLUA_CACHE_DIR"), xdg = saved("XDG_CACHE_HOME"), home = saved("HOME");

  setenv("LAZYLUA_CACHE_DIR", "/somewhere/cache", 1);
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  setenv("HOME", "/home/someone", 1);
  EXPECT_EQ(default_cache_directory(), "/somewhere/cache");
  unsetenv("LAZYLUA_CACHE_DIR");
  EXPECT_EQ(default_cache_directory(), "/xdg/lazylua");
  setenv("XDG_CACHE_HOME", "relative/is/ignored", 1);
  EXPECT_EQ(default_cache_directory(), "/home/someone/.cache/lazylua");
  unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(default_cache_directory(), "/home/someone/.cache/lazylua");

  for (const auto& [name, value] : {cache_dir, xdg, home}) {
    if (value) {
      setenv(name.c_str(), value->c_str(), 1);
    } else {
      unsetenv(name.c_str());
    }
  }
}

}  // namespace
}  // namespace lazylua::compiler
