// A malformed topology is an error, never an abort: toml++ 3.3's parser asserts (abort) on
// some malformed keys, e.g. a NUL byte in a table header, when its code is compiled without
// NDEBUG (a header-only toml++ in a Debug build; Debian's libtomlplusplus.so is built with
// NDEBUG). The top-level CMakeLists.txt defines TOML_ASSERT away for every target. The first
// four inputs abort such a toml++ (found by fuzzing toml::parse, tests/fuzz/); the others are
// neighbours that must fail the same way.
#include <string>

#include <gtest/gtest.h>

#include "engine/topology/topology.hpp"

namespace muflow::engine {
namespace {

TEST(TopologyMalformedTest, ControlCharactersInKeysAreSyntaxErrors) {
  const std::string inputs[] = {
      std::string("[\0b]\n", 5),
      std::string("a = 1\n[\0\0b]\n", 13),
      std::string("[[\0]]\n", 6),
      std::string("[ \0]\n", 5),
      std::string("a.\0 = 1\n", 8),
      std::string("\0 = 1\n", 6),
      std::string("x = {\0 = 1}\n", 12),
  };
  for (const std::string& text : inputs) {
    absl::StatusOr<topology::Topology> t =
        topology::parse_topology_string(text, "bad.toml", MUFLOW_SOURCE_DIR "/topologies");
    ASSERT_FALSE(t.ok()) << "input of " << text.size() << " bytes parsed";
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << t.status();
    EXPECT_NE(t.status().message().find("bad.toml:"), std::string::npos) << t.status();
  }
}

}  // namespace
}  // namespace muflow::engine
