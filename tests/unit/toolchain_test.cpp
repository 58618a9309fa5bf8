// toolchain_test.cpp - finding the system C compiler, building shared objects
// with it and loading them (through DiskCache::build, as the runtime does);
// the cold compile time of a generated-size file.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "compiler/disk_cache.h"
#include "compiler/toolchain.h"

namespace lazylua::compiler {
namespace {

namespace fs = std::filesystem;

// A fresh directory under the system's temporary directory, removed after
// the test. `name` may hold blanks, to prove no shell is involved.
class TemporaryDirectory {
 public:
  explicit TemporaryDirectory(const std::string& name = "toolchain") {
    std::string pattern = (fs::temp_directory_path() / ("lazylua-test-" + name + "-XXXXXX"));
    if (!mkdtemp(pattern.data())) ADD_FAILURE() << "mkdtemp failed";
    path_ = pattern;
  }
  ~TemporaryDirectory() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }
  std::vector<std::string> names() const {
    std::vector<std::string> found;
    for (const auto& entry : fs::directory_iterator(path_)) {
      found.push_back(entry.path().filename());
    }
    return found;
  }

 private:
  std::string path_;
};

const char kAddSource[] = "int add(int a, int b) { return a + b; }\n";

// ~100 kernels shaped like generated code: elementwise loops over float
// arrays and row reductions, plus one driver calling them all.
std::string hundred_kernel_source() {
  const char* expressions[] = {"a[i] + b[i]",        "a[i] * b[i]",
                               "a[i] - b[i] * 0.5f", "(a[i] > 0.0f ? a[i] : 0.0f)",
                               "a[i] * a[i] + b[i]", "a[i] / (1.0f + b[i] * b[i])"};
  std::string source = "#include <stdint.h>\n#include <math.h>\n";
  std::string driver = "void run(float** buffers, int64_t n) {\n";
  char text[1024];
  for (int k = 0; k < 100; ++k) {
    if (k % 5 == 4) {
      std::snprintf(text, sizeof text,
                    "static void kernel_%d(const float* restrict a, const float* restrict b,\n"
                    "    float* restrict out, int64_t rows, int64_t cols) {\n"
                    "  for (int64_t r = 0; r < rows; ++r) {\n"
                    "    float acc = 0.0f;\n"
                    "    for (int64_t c = 0; c < cols; ++c) acc += a[r*cols+c] * b[r*cols+c];\n"
                    "    out[r] = sqrtf(acc);\n"
                    "  }\n}\n",
                    k);
      source += text;
      std::snprintf(text, sizeof text,
                    "  kernel_%d(buffers[%d], buffers[%d], buffers[%d], n / 16, 16);\n", k, k,
                    k + 1, k + 2);
    } else {
      std::snprintf(text, sizeof text,
                    "static void kernel_%d(const float* restrict a, const float* restrict b,\n"
                    "    float* restrict out, int64_t n) {\n"
                    "  for (int64_t i = 0; i < n; ++i) out[i] = %s;\n}\n",
                    k, expressions[k % 6]);
      source += text;
      std::snprintf(text, sizeof text, "  kernel_%d(buffers[%d], buffers[%d], buffers[%d], n);\n",
                    k, k, k + 1, k + 2);
    }
    driver += text;
  }
  return source + driver + "}\n";
}

TEST(Toolchain, WorksOnThisMachine) {
  const Toolchain& tool = toolchain();
  ASSERT_TRUE(tool.works) << tool.why_not;
  ASSERT_FALSE(tool.command.empty());
  EXPECT_NE(tool.identity.find(tool.command[0]), std::string::npos);
  EXPECT_NE(tool.identity.find("-march=native"), std::string::npos);
  EXPECT_NE(tool.identity.find("cpu: "), std::string::npos);
  std::printf("[ toolchain ] %s\n", tool.identity.c_str());
}

// Objects are built as the runtime builds them: DiskCache::build, which
// compiles with toolchain() under a temporary name, loads and renames it.
constexpr uint64_t kKey = 0x1234abcd;

TEST(Toolchain, BuildsAndLoadsAFunction) {
  TemporaryDirectory directory;
  DiskCache cache(directory.path());
  std::string error;
  std::shared_ptr<Library> library = cache.build(kKey, kAddSource, "add", &error);
  ASSERT_TRUE(library) << error;
  auto add = reinterpret_cast<int (*)(int, int)>(library->symbol("add"));
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add(2, 40), 42);
  EXPECT_EQ(library->symbol("no_such_function"), nullptr);
  // Only the object and its record are left: no source, no temporaries.
  std::vector<std::string> names = directory.names();
  std::sort(names.begin(), names.end());
  const std::vector<std::string> expected{fs::path(cache.record_path(kKey)).filename(),
                                          fs::path(cache.object_path(kKey)).filename()};
  EXPECT_EQ(names, expected);
}

TEST(Toolchain, PathsWithBlanksNeedNoShell) {
  TemporaryDirectory directory("with blanks; $(false) 'quotes'");
  DiskCache cache(directory.path() + "/a cache");
  ASSERT_TRUE(cache.enabled()) << cache.why_disabled();
  std::string error;
  std::shared_ptr<Library> library = cache.build(kKey, kAddSource, "add", &error);
  ASSERT_TRUE(library) << error;
  auto add = reinterpret_cast<int (*)(int, int)>(library->symbol("add"));
  EXPECT_EQ(add(1, 2), 3);
}

TEST(Toolchain, SyntaxErrorGivesTheCompilerMessage) {
  TemporaryDirectory directory;
  DiskCache cache(directory.path());
  std::string error;
  EXPECT_EQ(cache.build(kKey, "int broken(int a) { return a +; }\n", "broken", &error), nullptr);
  EXPECT_NE(error.find("error"), std::string::npos) << error;
  EXPECT_NE(error.find("<stdin>:1"), std::string::npos) << error;
  EXPECT_LE(error.size(), 2200u);
  EXPECT_TRUE(directory.names().empty());  // nothing half-built left behind
}

TEST(Toolchain, HugeErrorOutputIsCutNotBlocking) {
  // Thousands of errors: more than a pipe holds, so the reader must drain it.
  std::string source;
  for (int i = 0; i < 800; ++i) source += "int f" + std::to_string(i) + "(void) { return x; }\n";
  TemporaryDirectory directory;
  std::string error;
  EXPECT_EQ(DiskCache(directory.path()).build(kKey, source, "bad", &error), nullptr);
  EXPECT_GT(error.size(), 1000u);
  EXPECT_LE(error.size(), 2200u);
}

TEST(Toolchain, MissingCompilerSaysWhy) {
  Toolchain tool = find_toolchain("/nonexistent", "", "");
  EXPECT_FALSE(tool.works);
  EXPECT_NE(tool.why_not.find("/nonexistent"), std::string::npos) << tool.why_not;
  EXPECT_NE(tool.why_not.find("No such file"), std::string::npos) << tool.why_not;

  Toolchain not_in_path = find_toolchain("lazylua-no-such-cc", "", "");
  EXPECT_FALSE(not_in_path.works);
  EXPECT_NE(not_in_path.why_not.find("lazylua-no-such-cc"), std::string::npos);

  Toolchain empty = find_toolchain("   ", "", "");
  EXPECT_FALSE(empty.works);
  EXPECT_FALSE(empty.why_not.empty());
}

TEST(Toolchain, CompilerThatFailsSaysWhy) {
  Toolchain tool = find_toolchain("false", "", "");  // runs, exits 1
  EXPECT_FALSE(tool.works);
  EXPECT_NE(tool.why_not.find("status 1"), std::string::npos) << tool.why_not;

  // Runs --version fine but cannot build: `cc` with a flag it rejects.
  Toolchain bad_flags = find_toolchain("cc", "-fno-such-flag-at-all", "");
  EXPECT_FALSE(bad_flags.works);
  EXPECT_NE(bad_flags.why_not.find("cannot build"), std::string::npos) << bad_flags.why_not;
  EXPECT_NE(bad_flags.why_not.find("no-such-flag"), std::string::npos) << bad_flags.why_not;
}

TEST(Toolchain, ExtraFlagsArePartOfTheIdentity) {
  Toolchain plain = find_toolchain("cc", "", "");
  Toolchain extra = find_toolchain("cc", " -DLAZYLUA_TEST=1 ", "");
  ASSERT_TRUE(plain.works) << plain.why_not;
  ASSERT_TRUE(extra.works) << extra.why_not;
  EXPECT_EQ(extra.flags.back(), "-DLAZYLUA_TEST=1");
  EXPECT_NE(plain.identity, extra.identity);
}

TEST(Toolchain, PassedCheckIsRememberedPerIdentity) {
  TemporaryDirectory directory;
  Toolchain first = find_toolchain("cc", "", directory.path());
  ASSERT_TRUE(first.works) << first.why_not;
  std::vector<std::string> names = directory.names();
  ASSERT_EQ(names.size(), 1u);
  EXPECT_EQ(names[0].rfind("toolchain-", 0), 0u);

  auto start = std::chrono::steady_clock::now();
  Toolchain second = find_toolchain("cc", "", directory.path());
  double milliseconds =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(second.works);
  EXPECT_EQ(second.identity, first.identity);
  std::printf("[ measure ] toolchain found from a remembered verdict in %.1f ms\n", milliseconds);

  // A verdict file that names another identity is not believed.
  std::string verdict = directory.path() + "/" + names[0];
  std::string error;
  ASSERT_TRUE(write_file_atomically(verdict, "someone else", &error)) << error;
  Toolchain third = find_toolchain("cc", "", directory.path());
  EXPECT_TRUE(third.works);
  std::string contents;
  ASSERT_TRUE(read_file(verdict, &contents, &error));
  EXPECT_EQ(contents, first.identity);  // checked again, then rewritten
}

TEST(Toolchain, ColdCompileOfAHundredKernels) {
  const Toolchain& tool = toolchain();
  ASSERT_TRUE(tool.works) << tool.why_not;
  std::string source = hundred_kernel_source();
  auto start = std::chrono::steady_clock::now();
  std::string error;
  std::shared_ptr<Library> library = build_in_private_directory(tool, source, &error);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(library) << error;
  std::printf("[ measure ] cold compile of 100 kernels (%zu bytes of C): %.3f s (target 0.5 s)\n",
              source.size(), seconds);

  // And the object computes what the C says: buffers[k] = 1 for all k.
  auto run = reinterpret_cast<void (*)(float**, int64_t)>(library->symbol("run"));
  ASSERT_NE(run, nullptr);
  std::vector<std::vector<float>> storage(102, std::vector<float>(64, 1.0f));
  std::vector<float*> buffers;
  for (auto& buffer : storage) buffers.push_back(buffer.data());
  run(buffers.data(), 64);
  EXPECT_FLOAT_EQ(storage[2][0], 2.0f);  // kernel_0: a + b
}

TEST(Toolchain, FileHelpers) {
  TemporaryDirectory directory;
  std::string path = directory.path() + "/file";
  std::string error, contents;
  bool missing = false;
  EXPECT_FALSE(read_file(path, &contents, &error, &missing));
  EXPECT_TRUE(missing);
  ASSERT_TRUE(write_file_atomically(path, std::string(100000, 'x'), &error)) << error;
  ASSERT_TRUE(read_file(path, &contents, &error, &missing)) << error;
  EXPECT_EQ(contents.size(), 100000u);
  EXPECT_FALSE(write_new_file(path, "y", &error));  // exclusive create
  EXPECT_NE(error.find("File exists"), std::string::npos) << error;

  std::string first = unique_temp_path(path), second = unique_temp_path(path);
  EXPECT_NE(first, second);
  EXPECT_TRUE(is_temp_name(fs::path(first).filename()));
  EXPECT_FALSE(is_temp_name("0123456789abcdef-01234567.so"));
  EXPECT_EQ(fnv1a_64("", 0), 14695981039346656037ull);
  EXPECT_EQ(fnv1a_64("a", 1), 0xaf63dc4c8601ec8cull);
}

}  // namespace
}  // namespace lazylua::compiler
