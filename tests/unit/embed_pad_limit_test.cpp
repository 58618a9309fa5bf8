// embed_pad_limit_test.cpp - tensor.pad of a huge extent under a memory
// limit: refused by the limit (LAZYLUA_ERROR_MEMORY) when the output is
// allocated, quickly and without host memory for the padded extent (the
// pad once built a table of positions for it first: 4.2 GB of RSS and 16 s
// before the limit refused a 2^28 replicate pad).
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>

#include "lazylua.h"

namespace {

// The peak RSS (VmHWM) in KiB, or -1 if /proc cannot tell.
long peak_rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

// Resets VmHWM to the current RSS (Linux 4.0+); false if not allowed.
bool reset_peak_rss() {
  std::ofstream clear_refs("/proc/self/clear_refs");
  clear_refs << "5";
  clear_refs.flush();
  return static_cast<bool>(clear_refs);
}

TEST(EmbedPadLimit, HugePadIsRefusedByTheLimitAtSmallMemory) {
  lazylua_options options;
  lazylua_options_init(&options);
  options.memory_limit = size_t{64} << 20;
  for (const char* eager : {"false", "true"}) {
    lazylua_interpreter* lua = nullptr;
    ASSERT_EQ(lazylua_open(&options, &lua), LAZYLUA_OK);
    ASSERT_EQ(
        lazylua_run_string(lua, (std::string("tensor.set_eager(") + eager + ")").c_str(), nullptr),
        LAZYLUA_OK);
    const bool measured = reset_peak_rss();
    const long before = peak_rss_kib();
    const auto start = std::chrono::steady_clock::now();
    // The output is 1 GiB (2^28 + 1 floats).
    EXPECT_EQ(lazylua_run_string(
                  lua,
                  "local p = tensor.pad(tensor.ones(1, 1), {0, 1 << 28}, {mode = 'replicate'})\n"
                  "tensor.sync(p)\n",
                  "=pad"),
              LAZYLUA_ERROR_MEMORY)
        << eager << ": " << lazylua_error_message(lua);
    EXPECT_NE(std::string(lazylua_error_message(lua)).find("past its memory limit"),
              std::string::npos)
        << lazylua_error_message(lua);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, 20.0) << eager;
    if (measured && before > 0) {
      // The refused output is 1 GiB; the work around it stays well under
      // that (the limit itself is 64 MB).
      EXPECT_LT(peak_rss_kib() - before, 256 * 1024) << eager;
    }
    // Still usable, and a small pad works.
    EXPECT_EQ(lazylua_run_string(
                  lua,
                  "local p = tensor.pad(tensor.new({1, 2}), {2, 1}, {mode = 'replicate'})\n"
                  "assert(table.concat(p:tolist(), ' ') == '1 1 1 2 2')\n",
                  "=small"),
              LAZYLUA_OK)
        << lazylua_error_message(lua);
    lazylua_close(lua);
  }
}

}  // namespace
