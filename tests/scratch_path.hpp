#pragma once
/// \file
/// Scratch file names for tests. ctest runs every test in a process of its own, two at a time
/// (`ctest -j2`) or more, and CI may run beside another checkout: a fixed name in the temp
/// folder is shared by tests that run at once (one writes while the other reads). The process
/// id makes each name private to one running test.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace muflow::testing {

/// `name` under gtest's temp folder, prefixed "muflow-<pid>-": unique to this process. The
/// caller creates what it puts there (a file or a folder); whatever is there when the test
/// process exits is removed then, as `ScratchCleanup` says (kept after a failure).
inline std::filesystem::path scratch_path(std::string_view name);

/// Scratch files and folders removed when the test process exits, if every test in it passed
/// (a failed test keeps its files to look at; MUFLOW_KEEP_TEST_FILES=1 keeps them always).
/// Only the process that registered a path removes it: a forked child that exits does not.
/// ctest runs each test in a process of its own, so a path lives as long as its test.
class ScratchCleanup {
 public:
  static void remove_at_exit(const std::filesystem::path& path) {
    static ScratchCleanup cleanup;
    cleanup.paths_.push_back(path);
  }
  ~ScratchCleanup() {
    if (::getpid() != pid_ || std::getenv("MUFLOW_KEEP_TEST_FILES") != nullptr) return;
    if (const ::testing::UnitTest* u = ::testing::UnitTest::GetInstance(); u && u->Failed()) {
      return;
    }
    for (const std::filesystem::path& p : paths_) {
      std::error_code ec;
      std::filesystem::remove_all(p, ec);
    }
  }

 private:
  ScratchCleanup() : pid_(::getpid()) {}
  pid_t pid_;
  std::vector<std::filesystem::path> paths_;
};

inline std::filesystem::path scratch_path(std::string_view name) {
  std::filesystem::path p =
      std::filesystem::path(::testing::TempDir()) /
      ("muflow-" + std::to_string(static_cast<long>(::getpid())) + "-" + std::string(name));
  ScratchCleanup::remove_at_exit(p);
  return p;
}

}  // namespace muflow::testing
