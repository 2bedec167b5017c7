// Server::run edge cases: request order, the position limit, bad arrival times and scheduler
// limits, and a host callback that throws. None may hang, crash, or change the answer.
#include "actors/server.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/exec/reference_decoder.hpp"
#include "engine/trace/trace.hpp"
#include "engine/trace/trace_reader.hpp"
#include "scratch_path.hpp"
#include "small_topology.hpp"

namespace muflow {
namespace {

using engine::serving::Request;
using engine::topology::Topology;
using testing_fixtures::small_topology;


Request make_request(int64_t id, int len, double arrival_s, int64_t max_new) {
  Request r;
  r.id = id;
  r.arrival_s = arrival_s;
  r.max_new_tokens = max_new;
  for (int j = 0; j < len; ++j) r.prompt.push_back(static_cast<int32_t>(3 + (id * 13 + j * 7) % 90));
  return r;
}

void expect_matches_reference(actors::Server& server, const std::vector<Request>& requests,
                              const actors::RunOutcome& out) {
  ASSERT_EQ(out.outputs.size(), requests.size());
  for (const Request& r : requests) {
    absl::StatusOr<engine::exec::ReferenceResult> ref =
        engine::exec::reference_generate(*server.model(), r, server.topology().sampling, false);
    ASSERT_TRUE(ref.ok()) << ref.status();
    EXPECT_EQ(out.outputs[r.id].request_id, r.id);
    EXPECT_EQ(out.outputs[r.id].prompt, r.prompt);
    EXPECT_EQ(out.outputs[r.id].output, ref->output_ids) << "request " << r.id;
  }
}

TEST(ServerRun, ArrivalOrderDiffersFromIdOrder) {
  auto server = actors::Server::create(small_topology(2));
  ASSERT_TRUE(server.ok()) << server.status();
  // Request 0 arrives last; outputs must still be indexed by request id.
  std::vector<Request> requests = {make_request(0, 6, 0.004, 5), make_request(1, 3, 0.0, 7),
                                   make_request(2, 9, 0.0, 4), make_request(3, 4, 0.002, 6)};
  absl::StatusOr<actors::RunOutcome> out = (*server)->run(requests);
  ASSERT_TRUE(out.ok()) << out.status();
  expect_matches_reference(**server, requests, *out);
}

TEST(ServerRun, StopsAtMaxPositionLikeTheReference) {
  auto server = actors::Server::create(small_topology(3, /*max_position=*/16));
  ASSERT_TRUE(server.ok()) << server.status();
  std::vector<Request> requests = {make_request(0, 10, 0, 50), make_request(1, 14, 0, 50),
                                   make_request(2, 15, 0, 50)};
  absl::StatusOr<actors::RunOutcome> out = (*server)->run(requests);
  ASSERT_TRUE(out.ok()) << out.status();
  expect_matches_reference(**server, requests, *out);
  // Positions 0..15 exist: a prompt of p tokens can generate 16 - p + 1 tokens (the last one
  // is sampled from position 15 and never fed back).
  EXPECT_EQ(out->outputs[0].output.size(), 7u);
  EXPECT_EQ(out->outputs[2].output.size(), 2u);
}

TEST(ServerRun, RejectsBadArrivalTimes) {
  auto server = actors::Server::create(small_topology(2));
  ASSERT_TRUE(server.ok()) << server.status();
  for (double bad : {std::nan(""), -1.0, std::numeric_limits<double>::infinity(), 1e300}) {
    absl::StatusOr<actors::RunOutcome> out = (*server)->run({make_request(0, 3, bad, 2)});
    ASSERT_FALSE(out.ok()) << bad;
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(out.status().message()).find("arrival time"), std::string::npos);
  }
}

TEST(ServerRun, RejectsSchedulerLimitsBelowOne) {
  Topology t = small_topology(2);
  t.scheduler.max_prefill_tokens = 0;
  auto server = actors::Server::create(t);
  ASSERT_FALSE(server.ok());
  EXPECT_NE(std::string(server.status().message()).find("max_prefill_tokens"), std::string::npos);
  t = small_topology(2);
  t.scheduler.max_batch_requests = 0;
  server = actors::Server::create(t);
  ASSERT_FALSE(server.ok());
  EXPECT_NE(std::string(server.status().message()).find("max_batch_requests"), std::string::npos);
}

TEST(ServerRun, ThrowingCallbackFailsTheRunWithoutHanging) {
  auto server = actors::Server::create(small_topology(2));
  ASSERT_TRUE(server.ok()) << server.status();
  actors::RunCallbacks cb;
  cb.on_token = [](int64_t, int32_t) { throw std::runtime_error("host is gone"); };
  absl::StatusOr<actors::RunOutcome> out =
      (*server)->run({make_request(0, 4, 0, 3), make_request(1, 5, 0, 3)}, cb);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(std::string(out.status().message()).find("host is gone"), std::string::npos)
      << out.status();
  // The server stays usable for the next run.
  std::vector<Request> requests = {make_request(0, 4, 0, 3)};
  out = (*server)->run(requests);
  ASSERT_TRUE(out.ok()) << out.status();
  expect_matches_reference(**server, requests, *out);
}

// Appends the event's phase, name, place, times and args as one line.
void append_line(const engine::trace::TraceEventView& v, std::vector<std::string>& lines) {
  lines.push_back(std::string(1, v.phase) + " " + std::string(v.name) + " " +
                  std::to_string(v.pid) + "/" + std::to_string(v.tid) + " " +
                  std::to_string(v.ts_us) + "+" + std::to_string(v.dur_us) + " " +
                  (v.args == nullptr ? "-" : v.args->dump()));
}

// Server::set_keep_trace: the outcome holds the run's trace, which reads as the trace file
// the same run writes; with no file named, nothing is written; without it, no trace is kept.
TEST(ServerRun, KeptTraceReadsAsTheTraceFile) {
  Topology t = small_topology(2);
  const std::filesystem::path file = muflow::testing::scratch_path("kept-trace.json");
  t.trace_file = file.string();
  auto server = actors::Server::create(t);
  ASSERT_TRUE(server.ok()) << server.status();
  (*server)->set_keep_trace(true);
  const std::vector<Request> requests = {make_request(0, 6, 0, 5), make_request(1, 3, 0, 4)};
  absl::StatusOr<actors::RunOutcome> out = (*server)->run(requests);
  ASSERT_TRUE(out.ok()) << out.status();
  expect_matches_reference(**server, requests, *out);
  ASSERT_NE(out->trace, nullptr);

  std::vector<std::string> kept, written;
  nlohmann::json kept_other, written_other;
  int64_t stage_runs = 0;
  ASSERT_TRUE(engine::trace::visit_recorded_events(
                  *out->trace, "kept",
                  [&](const engine::trace::TraceEventView& v) {
                    append_line(v, kept);
                    if (v.phase == 'X' && v.args != nullptr && v.args->contains("tokens")) {
                      ++stage_runs;
                    }
                    return absl::OkStatus();
                  },
                  &kept_other)
                  .ok());
  std::ifstream in(file, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_TRUE(engine::trace::stream_trace_events(
                  text, file.string(),
                  [&](const engine::trace::TraceEventView& v) {
                    append_line(v, written);
                    return absl::OkStatus();
                  },
                  &written_other)
                  .ok());
  EXPECT_EQ(kept, written);
  EXPECT_EQ(kept_other, written_other);
  EXPECT_GT(stage_runs, 0);
  // The run's metrics are in otherData, as in the file.
  EXPECT_EQ(kept_other.at("metrics").at("num_output_tokens"), out->metrics.num_output_tokens);

  // No file named: the trace is kept, nothing is written.
  std::filesystem::remove(file);
  t.trace_file.clear();
  server = actors::Server::create(t);
  ASSERT_TRUE(server.ok()) << server.status();
  (*server)->set_keep_trace(true);
  out = (*server)->run(requests);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_NE(out->trace, nullptr);
  EXPECT_GT(out->trace->num_events(), 0);
  EXPECT_FALSE(std::filesystem::exists(file));
  // Not kept (the default): none.
  (*server)->set_keep_trace(false);
  out = (*server)->run(requests);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->trace, nullptr);
}

TEST(ServerRun, StreamsEveryTokenOnceInOrder) {
  auto server = actors::Server::create(small_topology(4));
  ASSERT_TRUE(server.ok()) << server.status();
  std::vector<Request> requests = {make_request(0, 8, 0, 6), make_request(1, 2, 0, 9),
                                   make_request(2, 12, 0.001, 3)};
  std::vector<std::vector<int32_t>> streamed(requests.size());
  actors::RunCallbacks cb;
  cb.on_token = [&](int64_t id, int32_t token) { streamed.at(id).push_back(token); };
  absl::StatusOr<actors::RunOutcome> out = (*server)->run(requests, cb);
  ASSERT_TRUE(out.ok()) << out.status();
  for (const Request& r : requests) EXPECT_EQ(streamed[r.id], out->outputs[r.id].output);
  EXPECT_EQ(out->metrics.ttft.num_samples, 3);
}

// #15: the KV need of a request is capped by the positions it can use, so max_new_tokens =
// INT64_MAX does not wrap around admission and 10^12 (256 TB of KV at face value) is not
// refused: on sim with per-request admission (async) both run and stop at the position limit.
TEST(ServerRun, HugeMaxNewTokensIsCappedByThePositionLimit) {
  Topology t = small_topology(4, /*max_position=*/24);
  t.backend = "sim";
  t.wiring = "async";
  for (auto& d : t.devices) d.kind = "A100-80GB";
  auto server = actors::Server::create(t);
  ASSERT_TRUE(server.ok()) << server.status();
  std::vector<Request> requests = {make_request(0, 6, 0, std::numeric_limits<int64_t>::max()),
                                   make_request(1, 6, 0, 1000000000000)};
  absl::StatusOr<actors::RunOutcome> out = (*server)->run(requests);
  ASSERT_TRUE(out.ok()) << out.status();
  // Positions 0..23: a 6-token prompt generates 24 - 6 + 1 tokens.
  EXPECT_EQ(out->outputs[0].output.size(), 19u);
  EXPECT_EQ(out->outputs[1].output.size(), 19u);
}

}  // namespace
}  // namespace muflow
