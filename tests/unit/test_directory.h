// test_directory.h - a fresh directory for a test that writes files (the
// disk cache's, precompiled headers), removed afterwards.
#pragma once

#include <gtest/gtest.h>

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace lazylua {

// A new directory "lazylua-test-<name>-XXXXXX" under the system's temporary
// directory, resolved as the disk cache resolves its own (a symlinked TMPDIR);
// "" (and a test failure) when it cannot be made.
inline std::string make_test_directory(const std::string& name) {
  std::string pattern =
      std::filesystem::temp_directory_path() / ("lazylua-test-" + name + "-XXXXXX");
  if (!mkdtemp(pattern.data())) {
    ADD_FAILURE() << "mkdtemp failed for " << pattern;
    return "";
  }
  return std::filesystem::canonical(pattern).string();
}

// Removes `path` and what it holds, even after a test took away its write
// permission.
inline void remove_test_directory(const std::string& path) {
  if (path.empty()) return;
  std::error_code ignored;
  std::filesystem::permissions(path, std::filesystem::perms::owner_all,
                               std::filesystem::perm_options::add, ignored);
  std::filesystem::remove_all(path, ignored);
}

}  // namespace lazylua
