#pragma once
/// \file
/// Scratch file names for tests. ctest runs every test in a process of its own, two at a time
/// (`ctest -j2`) or more, and CI may run beside another checkout: a fixed name in the temp
/// folder is shared by tests that run at once (one writes while the other reads). The process
/// id makes each name private to one running test.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <string_view>

namespace muflow::testing {

/// `name` under gtest's temp folder, prefixed "muflow-<pid>-": unique to this process. The
/// caller creates and removes what it puts there.
inline std::filesystem::path scratch_path(std::string_view name) {
  return std::filesystem::path(::testing::TempDir()) /
         ("muflow-" + std::to_string(static_cast<long>(::getpid())) + "-" + std::string(name));
}

}  // namespace muflow::testing
