// `muflow bench --url` sends the same requests `muflow run` serves for a topology file.

#include "http/client/topology_requests.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "actors/server.hpp"

namespace muflow::http::client {
namespace {

using ::testing::HasSubstr;

constexpr const char* kSimTopology = R"(
wiring = "sync"
backend = "sim"
[cluster]
num_devices = 2
kind = "H100-SXM"
[model]
preset = "mixtral-8x7b"
[workload]
kind = "poisson"
num_requests = 12
rate = 5.0
input = [4, 40]
output = [2, 9]
seed = 11
)";

TEST(TopologyRequests, SameRequestsAsTheInProcessServer) {
  absl::StatusOr<engine::topology::Topology> t =
      engine::topology::parse_topology_string(kSimTopology, "test.toml", ".");
  ASSERT_TRUE(t.ok()) << t.status();
  absl::StatusOr<std::vector<engine::serving::Request>> mine = make_topology_requests(*t);
  ASSERT_TRUE(mine.ok()) << mine.status();
  absl::StatusOr<std::unique_ptr<actors::Server>> server = actors::Server::create(*t);
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<std::vector<engine::serving::Request>> theirs = (*server)->make_workload();
  ASSERT_TRUE(theirs.ok()) << theirs.status();
  ASSERT_EQ(mine->size(), 12u);
  ASSERT_EQ(mine->size(), theirs->size());
  for (size_t i = 0; i < mine->size(); ++i) {
    EXPECT_EQ((*mine)[i].id, (*theirs)[i].id);
    EXPECT_EQ((*mine)[i].arrival_s, (*theirs)[i].arrival_s);
    EXPECT_EQ((*mine)[i].prompt, (*theirs)[i].prompt);
    EXPECT_EQ((*mine)[i].max_new_tokens, (*theirs)[i].max_new_tokens);
  }
}

TEST(TopologyRequests, TextPromptsWithoutTokenizerAreAClearError) {
  absl::StatusOr<engine::topology::Topology> t =
      engine::topology::parse_topology_string(kSimTopology, "test.toml", ".");
  ASSERT_TRUE(t.ok()) << t.status();
  t->workload.kind = "prompts";
  t->workload.prompts = {"In the beginning"};
  t->workload.max_new_tokens = 4;
  const absl::StatusOr<std::vector<engine::serving::Request>> r = make_topology_requests(*t);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("tokenizer"));
}

}  // namespace
}  // namespace muflow::http::client
