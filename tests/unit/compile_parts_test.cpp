// compile_parts_test.cpp - a large generated source compiled as parts in
// parallel (toolchain.h split_source, compile_shared_object), and the
// estimate and rule that decide when a run waits for a build
// (build_schedule.h).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "compiler/build_schedule.h"
#include "compiler/disk_cache.h"
#include "compiler/toolchain.h"
#include "tensor/thread_pool.h"

namespace lazylua::compiler {
namespace {

namespace fs = std::filesystem;

const std::string kCommon =
    "#include <stdint.h>\n"
    "static inline int twice(int x) { return 2 * x; }\n";

// One marked kernel as codegen writes them: its text uses the common part.
std::string kernel_text(int k) {
  return std::string(kSourcePartMark) + "int kernel_" + std::to_string(k) +
         "(int x) { return twice(x) + " + std::to_string(k) + "; }\n";
}

std::string source_of(int kernels, const std::string& broken_kernel = "") {
  std::string source = kCommon;
  for (int k = 0; k < kernels; k++) source += kernel_text(k);
  return source + broken_kernel;
}

TEST(SplitSource, PartsHoldTheCommonTextAndWholeKernelsInOrder) {
  const std::string source = source_of(20);
  const std::vector<std::string> parts = split_source(source, 2);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(split_source_part_count(source, 2), 2u);
  std::string kernels;
  for (const std::string& part : parts) {
    ASSERT_EQ(part.compare(0, kCommon.size(), kCommon), 0);
    const std::string own = part.substr(kCommon.size());
    // Whole kernels: a part's own text starts at a mark.
    EXPECT_EQ(own.compare(0, std::string(kSourcePartMark).size(), kSourcePartMark), 0);
    kernels += own;
  }
  EXPECT_EQ(kCommon + kernels, source);  // every kernel once, in order
  // Split by bytes: neither part has more than 12 of the 20 kernels.
  for (const std::string& part : parts) {
    size_t count = 0;
    for (size_t at = part.find("int kernel_"); at != std::string::npos;
         at = part.find("int kernel_", at + 1)) {
      count++;
    }
    EXPECT_GE(count, 8u);
    EXPECT_LE(count, 12u);
  }
}

TEST(SplitSource, SmallSourcesAndOneCompilerStayWhole) {
  // 8 kernels per part at least: 15 kernels are one part, 16 are two.
  EXPECT_EQ(split_source(source_of(15), 2), std::vector<std::string>{source_of(15)});
  EXPECT_EQ(split_source(source_of(16), 2).size(), 2u);
  EXPECT_EQ(split_source(source_of(40), 1), std::vector<std::string>{source_of(40)});
  EXPECT_EQ(split_source(source_of(40), 4).size(), 4u);
  EXPECT_EQ(split_source_part_count(source_of(40), 8), 5u);
  EXPECT_EQ(split_source("int f(void) { return 1; }\n", 4).size(), 1u);
}

class SplitBuild : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_threads_ = thread_count();
    set_thread_count(2);  // the split follows the pool's size
    std::string pattern = (fs::temp_directory_path() / "lazylua-test-parts-XXXXXX");
    ASSERT_TRUE(mkdtemp(pattern.data()));
    directory_ = pattern;
  }
  void TearDown() override {
    set_thread_count(saved_threads_);
    std::error_code ignored;
    fs::remove_all(directory_, ignored);
  }
  size_t files() const {
    return static_cast<size_t>(std::distance(fs::directory_iterator(directory_), {}));
  }
  int saved_threads_ = 1;
  std::string directory_;
};

TEST_F(SplitBuild, EveryKernelOfEveryPartIsLoadedAndRight) {
  const std::string source = source_of(24);
  ASSERT_EQ(split_source_part_count(source, thread_count()), 2u);
  DiskCache cache(directory_);
  std::string error;
  std::shared_ptr<Library> library = cache.build(0x5eed, source, "parts", &error);
  ASSERT_TRUE(library) << error;
  for (int k = 0; k < 24; k++) {
    const std::string name = "kernel_" + std::to_string(k);
    auto kernel = reinterpret_cast<int (*)(int)>(library->symbol(name.c_str()));
    ASSERT_NE(kernel, nullptr) << name;
    EXPECT_EQ(kernel(10), 20 + k) << name;
  }
  EXPECT_EQ(files(), 2u);  // the object and its record: no part is left
  // The disk cache loads the linked object in a later lookup.
  EXPECT_TRUE(cache.load(0x5eed, nullptr));
}

TEST_F(SplitBuild, AnErrorInOnePartFailsTheBuildWithTheCompilersMessage) {
  const std::string source = source_of(24, std::string(kSourcePartMark) + "int broken( {\n");
  DiskCache cache(directory_);
  std::string error;
  EXPECT_FALSE(cache.build(0xbad, source, "parts", &error));
  EXPECT_NE(error.find("error"), std::string::npos) << error;
  EXPECT_EQ(files(), 0u);  // no part, object or record left behind
}

TEST(BuildSchedule, WaitsOnlyWhenTheBuildEndsBeforeAnotherInterpretedRun) {
  EXPECT_TRUE(wait_for_build_is_shorter(0.1, 0.2));
  // Within its estimate, a build has the rest of it left; past it, it is
  // expected to run over by as much again.
  EXPECT_DOUBLE_EQ(expected_remaining_seconds(1.0, 0.25), 0.75);
  EXPECT_DOUBLE_EQ(expected_remaining_seconds(1.0, 1.5), 0.5);
  EXPECT_DOUBLE_EQ(expected_remaining_seconds(1.0, 1.0), 0.0);
  EXPECT_FALSE(wait_for_build_is_shorter(0.3, 0.2));
  EXPECT_FALSE(wait_for_build_is_shorter(0.0, 0.0));  // no interpreted run to compare
  EXPECT_DOUBLE_EQ(longest_build_wait_seconds(0.2), 0.4);
}

TEST(BuildSchedule, TheEstimateGrowsWithKernelsAndFollowsFinishedBuilds) {
  const double small = expected_toolchain_seconds(source_of(2), 1);
  const double large = expected_toolchain_seconds(source_of(400), 1);
  EXPECT_GT(small, 0);
  EXPECT_GT(large, small);
  // Two compilers share the kernels: less time, but not below the common part's.
  const double split = expected_toolchain_seconds(source_of(400), 2);
  EXPECT_LT(split, large);
  EXPECT_GT(split, large / 2);
  // A build that took twice the estimate moves the next one half-way there.
  record_toolchain_seconds(large, 2 * large);
  const double after = expected_toolchain_seconds(source_of(400), 1);
  EXPECT_NEAR(after, 1.5 * large, 1e-9 * large);
  record_toolchain_seconds(after, after / 3);  // back to where it was
  EXPECT_NEAR(expected_toolchain_seconds(source_of(400), 1), large, 0.2 * large);
}

}  // namespace
}  // namespace lazylua::compiler
