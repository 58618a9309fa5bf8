// precompiled_header_test.cpp - the common text of generated sources,
// compiled once into a precompiled header in the cache directory: a graph
// compiled through it gives the same object as from its whole text, the
// header is really used (not parsed again), and a corrupt or stale .gch, or a
// directory where none can be made, still gives a correct compile.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "compiler/codegen.h"
#include "compiler/disk_cache.h"
#include "compiler/precompiled_header.h"
#include "compiler/toolchain.h"
#include "test_directory.h"

namespace lazylua::compiler {
namespace {

namespace fs = std::filesystem;

// One kernel as codegen writes them: it calls kernel math (ll_tanhf, whose
// vector clone the header defines) in a strided loop that only the
// prelude's `#pragma GCC optimize` vectorizes, so its code shows whether
// the compile saw the header's functions and its pragma.
std::string kernel_text(int k) {
  return std::string(kSourcePartMark) + "int lazylua_test_kernel_" + std::to_string(k) +
         "(float* restrict out, const float* restrict in, long n, long stride) {\n"
         "  for (long i = 0; i < n; i++) out[i] = ll_tanhf(in[i * stride]) + " +
         std::to_string(k) + ".0f;\n  return 0;\n}\n";
}

// A generated source of `kernels` kernels: common_source_text() first.
std::string generated_source(int kernels = 1) {
  std::string source = common_source_text();
  for (int k = 0; k < kernels; k++) source += kernel_text(k);
  return source;
}

class PrecompiledHeaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(toolchain().works) << toolchain().why_not;
    directory_ = make_test_directory("pch");
    ASSERT_FALSE(directory_.empty());
  }
  void TearDown() override { remove_test_directory(directory_); }

  std::string read(const std::string& path) {
    std::string bytes, error;
    EXPECT_TRUE(read_file(path, &bytes, &error)) << error;
    return bytes;
  }

  void write(const std::string& path, const std::string& bytes) {
    std::string error;
    fs::remove(path);
    ASSERT_TRUE(write_new_file(path, bytes, &error)) << error;
  }

  // The object `source` makes compiled whole, as before precompiled headers.
  std::string whole_object(const std::string& source, const std::string& name = "whole") {
    const std::string source_path = directory_ + "/" + name + ".c";
    const std::string object_path = directory_ + "/" + name + ".so";
    write(source_path, source);
    std::string error;
    EXPECT_TRUE(compile_shared_object(toolchain(), source_path, object_path, &error)) << error;
    return read(object_path);
  }

  // compile_generated_source into <name>.so: its object, and in *compiled_text
  // the text the compiler was given (left at <name>.c).
  std::string generated_object(const std::string& source, const std::string& directory,
                               const std::string& name, std::string* compiled_text = nullptr) {
    const std::string source_path = directory_ + "/" + name + ".c";
    const std::string object_path = directory_ + "/" + name + ".so";
    std::string error;
    bool written = false;
    EXPECT_TRUE(compile_generated_source(toolchain(), source, directory, source_path, object_path,
                                         &error, &written))
        << error;
    EXPECT_TRUE(written);
    if (compiled_text) *compiled_text = read(source_path);
    return read(object_path);
  }

  // Loads <name>.so and checks that its kernel computes tanh(x) + 0.
  void expect_kernel_works(const std::string& name) {
    std::string error;
    std::shared_ptr<Library> library = load(directory_ + "/" + name + ".so", &error);
    ASSERT_TRUE(library) << error;
    auto kernel = reinterpret_cast<int (*)(float*, const float*, long, long)>(
        library->symbol("lazylua_test_kernel_0"));
    ASSERT_NE(kernel, nullptr);
    std::vector<float> in(64), out(32);
    for (size_t i = 0; i < in.size(); i++) in[i] = static_cast<float>(i) * 0.1f - 3.0f;
    kernel(out.data(), in.data(), 32, 2);
    for (size_t i = 0; i < out.size(); i++) {
      EXPECT_NEAR(out[i], std::tanh(in[2 * i]), 1e-6) << i;
    }
  }

  std::string directory_;
};

TEST_F(PrecompiledHeaderTest, IsUsedAndGivesTheSameObject) {
  const std::string source = generated_source();
  const std::string whole = whole_object(source);
  const std::string header = precompiled_common_header(toolchain(), directory_);
  ASSERT_FALSE(header.empty());
  EXPECT_EQ(read(header), common_source_text());
  ASSERT_TRUE(fs::is_regular_file(header + ".gch"));
  // GCC reads the .gch, not the text: with the text made unusable, a compile
  // through the header works only if the .gch is used.
  write(header, "#error the precompiled header was not used\n");
  std::string compiled_text;
  EXPECT_EQ(generated_object(source, directory_, "through", &compiled_text), whole);
  EXPECT_EQ(compiled_text, source.substr(common_source_text().size()));  // the graph's own text
  expect_kernel_works("through");
  EXPECT_TRUE(fs::is_regular_file(header + ".gch"));  // it did not fail
}

TEST_F(PrecompiledHeaderTest, SplitBuildsIncludeItInEveryPart) {
  const std::string source = generated_source(40);  // parts on two or more threads
  const std::string header = precompiled_common_header(toolchain(), directory_);
  ASSERT_FALSE(header.empty());
  const std::string whole = whole_object(source);
  write(header, "#error the precompiled header was not used\n");
  EXPECT_EQ(generated_object(source, directory_, "through"), whole);
  expect_kernel_works("through");
}

TEST_F(PrecompiledHeaderTest, CorruptOrStaleHeaderStillCompiles) {
  const std::string source = generated_source();
  const std::string whole = whole_object(source);
  // A .gch of other flags (another -fno-math-errno setting, which GCC
  // checks): what a stale file would be. GCC would parse the text instead,
  // unnoticed, but for -Werror=invalid-pch.
  Toolchain other = toolchain();
  other.flags.erase(std::remove(other.flags.begin(), other.flags.end(), "-fno-math-errno"),
                    other.flags.end());
  other.identity += " (other flags)";
  const std::string other_directory = directory_ + "/other";
  fs::create_directory(other_directory);
  const std::string other_header = precompiled_common_header(other, other_directory);
  ASSERT_FALSE(other_header.empty());
  const std::string stale = read(other_header + ".gch");

  const std::string cases[] = {"truncated", "stale", "empty"};
  for (const std::string& name : cases) {
    SCOPED_TRACE(name);
    const std::string directory = directory_ + "/" + name;
    fs::create_directory(directory);
    const std::string header = precompiled_common_header(toolchain(), directory);
    ASSERT_FALSE(header.empty());
    const std::string gch = header + ".gch";
    if (name == "truncated") fs::resize_file(gch, fs::file_size(gch) / 2);
    if (name == "stale") write(gch, stale);
    if (name == "empty") fs::resize_file(gch, 0);
    std::string compiled_text;
    EXPECT_EQ(generated_object(source, directory, name, &compiled_text), whole);
    EXPECT_EQ(compiled_text, source);  // compiled again, whole
    expect_kernel_works(name);
    // The failed header is removed (the next process makes it again) and no
    // longer tried in this one.
    EXPECT_FALSE(fs::exists(gch));
    EXPECT_EQ(precompiled_common_header(toolchain(), directory), "");
  }
}

TEST_F(PrecompiledHeaderTest, NoUsableDirectoryCompilesTheWholeText) {
  const std::string source = generated_source();
  const std::string whole = whole_object(source);
  const std::string name = fs::path(precompiled_common_header(toolchain(), directory_)).filename();
  ASSERT_FALSE(name.empty());
  // Where the .gch should go there is a directory: no rename can replace
  // it, even as root.
  const std::string blocked = directory_ + "/blocked";
  fs::create_directories(blocked + "/" + name + ".gch");
  std::vector<std::string> unusable = {"", directory_ + "/missing", blocked};
  if (geteuid() != 0) {  // root writes anyway
    const std::string read_only = directory_ + "/read-only";
    fs::create_directory(read_only);
    fs::permissions(read_only, fs::perms::owner_read | fs::perms::owner_exec);
    unusable.push_back(read_only);
  }
  for (const std::string& directory : unusable) {
    SCOPED_TRACE(directory);
    EXPECT_EQ(precompiled_common_header(toolchain(), directory), "");
    std::string compiled_text;
    EXPECT_EQ(generated_object(source, directory, "fallback", &compiled_text), whole);
    EXPECT_EQ(compiled_text, source);
    fs::remove(directory_ + "/fallback.c");
  }
}

TEST_F(PrecompiledHeaderTest, DiskCacheBuildsThroughIt) {
  DiskCache cache(directory_);
  ASSERT_TRUE(cache.enabled()) << cache.why_disabled();
  std::string error;
  std::shared_ptr<Library> library = cache.build(42, generated_source(), "tanh", &error);
  ASSERT_TRUE(library) << error;
  const std::string header = precompiled_common_header(toolchain(), directory_);
  ASSERT_FALSE(header.empty());
  EXPECT_TRUE(fs::is_regular_file(header + ".gch"));
  auto kernel = reinterpret_cast<int (*)(float*, const float*, long, long)>(
      library->symbol("lazylua_test_kernel_0"));
  ASSERT_NE(kernel, nullptr);
  float in[2] = {0.5f, 9.0f}, out[1] = {0.0f};
  kernel(out, in, 1, 2);
  EXPECT_NEAR(out[0], std::tanh(0.5f), 1e-6);
  // A source without the common text compiles as it is.
  library = cache.build(43, "int add(int a, int b) { return a + b; }\n", "add", &error);
  ASSERT_TRUE(library) << error;
}

}  // namespace
}  // namespace lazylua::compiler
