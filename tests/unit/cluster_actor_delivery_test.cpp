// What a muflow process does with an actor message a peer sent it during a run
// (actors/cluster/cluster_layout.hpp: `deliver_actor_frame`, `fail_run`; #18): a well-formed
// message for an actor this process hosts reaches that actor bit for bit; a message for a
// device another process hosts, for an actor outside the run, for an actor slot without a
// handle, a token batch whose rows are not the model's width or name a DP rank the run does
// not have, or bytes that do not decode are refused with an error naming what was wrong, and
// nothing reaches any actor; a message stamped with another run attempt is dropped unread. A
// refused message fails the run on the driver through its coordinator.

#include <gtest/gtest.h>

#include <bit>
#include <caf/all.hpp>
#include <chrono>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "actors/cluster/actor_codec.hpp"
#include "actors/cluster/cluster_layout.hpp"
#include "actors/cluster/frame_kinds.hpp"
#include "actors/messages.hpp"
#include "actors/run_context.hpp"
#include "transport/cluster/frame.hpp"

namespace muflow::actors::cluster {
namespace {

using engine::dataflow::Activations;
using engine::dataflow::StageKind;
using engine::dataflow::TokenBatch;
using engine::dataflow::TokenBatchPtr;

constexpr int64_t kHidden = 8;
constexpr uint64_t kRun = 7;  // the run attempt of every TestRun and of frame_of's frames

TokenBatchPtr delivered_batch(int rows, int width) {
  auto b = std::make_shared<TokenBatch>();
  b->layer = {StageKind::kExpert, 0, 0};
  b->payload = engine::dataflow::Payload::kExpertInputs;
  b->iteration = 5;
  b->act = std::make_shared<Activations>(rows, width);
  for (int r = 0; r < rows; ++r) {
    engine::dataflow::TokenMeta m;
    m.request_id = 40 + r;
    m.position = r;
    b->tokens.push_back(m);
    for (int c = 0; c < width; ++c) b->act->row(r)[c] = 0.75f * r - 0.125f * c;
  }
  b->act->row(0)[1] = std::bit_cast<float>(0x7fc00321u);  // a NaN payload survives
  return b;
}

// An encoded message and the frame view over it (the view points into `bytes`).
struct Frame {
  EncodedMessage encoded;
  transport::cluster::FrameView view;
};

std::unique_ptr<Frame> frame_of(const ActorAddress& to, const caf::message& m) {
  auto enc = encode_actor_message(to, m.content());
  EXPECT_TRUE(enc.ok()) << enc.status();
  auto f = std::make_unique<Frame>();
  f->encoded = std::move(*enc);
  f->view.prefix.kind = static_cast<uint16_t>(FrameKind::kActorMessage);
  f->view.prefix.run = kRun;
  f->view.prefix.header_bytes = static_cast<uint32_t>(f->encoded.header.size());
  f->view.prefix.payload_bytes = f->encoded.payload.size();
  f->view.header = f->encoded.header;
  f->view.payload = f->encoded.payload;
  return f;
}

// A run of one layer, two expert slots (devices 0 and 1), one attention rank (device 0), as
// process `self` sees it: process 1 hosts device 0, process 2 device 1. The actors of the
// run are one test actor (`probe`), except expert slot 0 of layer 0 when `missing_slot`.
struct TestRun {
  explicit TestRun(uint32_t self, bool missing_slot = false)
      : sys(cfg), probe(sys), layout(sys, self, {1, 2}, nullptr, kRun) {
    ctx.config.hidden_size = kHidden;
    ctx.config.num_layers = 1;
    ctx.placement.num_devices = 2;
    ctx.num_ranks = 1;
    ctx.sites.experts = {{{0, 0}, {1, 0}}};
    ctx.sites.attention = {{{0, 1}}};
    ctx.sites.samplers = {{0, 2}};
    const auto a = caf::actor_cast<caf::actor>(probe);
    ctx.actors.experts = {{missing_slot ? caf::actor{} : a, a}};
    ctx.actors.attention = {{a}};
    ctx.actors.samplers = {a};
    ctx.actors.devices = {a, a};
    ctx.actors.coordinator = a;
    ctx.actors.dispatch = {a};     // block 0's dispatch replica gathers with DP rank 0,
    ctx.placement.rank_device = {0};  // on device 0, which this process (1) hosts
  }
  // True when the probe received none of the messages these tests send within 100 ms.
  bool nothing_received() {
    bool got = false;
    probe->receive([&](batch_atom, const TokenBatchPtr&) { got = true; },
                   [&](failed_atom, const std::string&) { got = true; },
                   caf::after(std::chrono::milliseconds(100)) >> [] {});
    return !got;
  }
  // True when the probe received no report for the coordinator within 100 ms.
  bool nothing_received_any() {
    bool got = false;
    auto seen = [&](auto&&...) { got = true; };
    probe->receive(
        [&](busy_atom, int64_t, double, double) { seen(); },
        [&](load_atom, int64_t, int64_t, const std::vector<int64_t>&, double, int64_t) { seen(); },
        [&](layer_atom, int64_t, int64_t, double, const std::vector<double>&) { seen(); },
        [&](rows_atom, bool, int64_t, int64_t) { seen(); },
        [&](fetch_atom, int64_t, int64_t, double) { seen(); },
        caf::after(std::chrono::milliseconds(100)) >> [] {});
    return !got;
  }
  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scoped_actor probe;
  RunContext ctx;
  ClusterLayout layout;
};

// deliver_actor_frame's error, OK for a delivered frame; a frame of another run is a failure.
absl::Status delivery_status(const RunContext& ctx, const ClusterLayout& layout,
                             const transport::cluster::FrameView& frame,
                             const ActorMessageLimits& limits) {
  absl::StatusOr<FrameDelivery> done = deliver_actor_frame(ctx, layout, frame, limits);
  if (!done.ok()) return done.status();
  if (*done != FrameDelivery::kDelivered) return absl::InternalError("not delivered");
  return absl::OkStatus();
}

TEST(ClusterActorDelivery, AMessageForAHostedActorArrivesBitForBit) {
  TestRun run(/*self=*/1);
  TokenBatchPtr sent = delivered_batch(2, kHidden);
  auto f = frame_of({ActorRole::kExpert, 0, 0}, caf::make_message(batch_atom::value, sent));
  ASSERT_TRUE(delivery_status(run.ctx, run.layout, f->view, {}).ok());
  bool got = false;
  run.probe->receive(
      [&](batch_atom, const TokenBatchPtr& b) {
        got = true;
        ASSERT_TRUE(b && b->act);
        EXPECT_EQ(b->tokens.size(), 2u);
        EXPECT_EQ(b->tokens[1].request_id, 41);
        EXPECT_EQ(std::memcmp(b->act->data.data(), sent->act->data.data(),
                              sent->act->data.size() * sizeof(float)),
                  0);
      },
      caf::after(std::chrono::seconds(10)) >> [] {});
  EXPECT_TRUE(got) << "the hosted expert got nothing";
  // A shared expert's output (two hidden widths) is a model width too.
  auto wide = frame_of({ActorRole::kExpert, 0, 0},
                       caf::make_message(batch_atom::value, delivered_batch(1, 2 * kHidden)));
  EXPECT_TRUE(delivery_status(run.ctx, run.layout, wide->view, {}).ok());
  EXPECT_FALSE(run.nothing_received());
}

// A straggler of another run attempt (one that failed when a worker was lost, sent before its
// sender stopped it) must not reach the actors of the attempt now running, which have the same
// addresses: it is dropped unread, whether it would decode or not, and does not fail the run.
TEST(ClusterActorDelivery, AFrameOfAnotherRunAttemptIsDroppedUnread) {
  TestRun run(/*self=*/1);
  for (const uint64_t other : {kRun - 1, kRun + 1, uint64_t{0}}) {
    auto f = frame_of({ActorRole::kExpert, 0, 0},
                      caf::make_message(batch_atom::value, delivered_batch(2, kHidden)));
    f->view.prefix.run = other;
    absl::StatusOr<FrameDelivery> done = deliver_actor_frame(run.ctx, run.layout, f->view, {});
    ASSERT_TRUE(done.ok()) << "run " << other << ": " << done.status();
    EXPECT_EQ(*done, FrameDelivery::kOtherRun) << "run " << other;
    EXPECT_TRUE(run.nothing_received()) << "a frame of run " << other << " was delivered";
    // Bytes that would not decode are not looked at either.
    f->view.header = f->view.header.first(3);
    done = deliver_actor_frame(run.ctx, run.layout, f->view, {});
    ASSERT_TRUE(done.ok()) << "run " << other << ": " << done.status();
    EXPECT_EQ(*done, FrameDelivery::kOtherRun) << "run " << other;
  }
  // The same frame stamped with this run's attempt arrives.
  auto f = frame_of({ActorRole::kExpert, 0, 0},
                    caf::make_message(batch_atom::value, delivered_batch(2, kHidden)));
  absl::StatusOr<FrameDelivery> done = deliver_actor_frame(run.ctx, run.layout, f->view, {});
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(*done, FrameDelivery::kDelivered);
  EXPECT_FALSE(run.nothing_received());
}

TEST(ClusterActorDelivery, MessagesThisProcessMustNotTakeAreRefusedAndNotDelivered) {
  TestRun run(/*self=*/1);
  struct Case {
    const char* what;
    std::unique_ptr<Frame> frame;
    const char* error;
  };
  std::vector<Case> cases;
  cases.push_back({"an expert on process 2's device",
                   frame_of({ActorRole::kExpert, 0, 1},
                            caf::make_message(batch_atom::value, delivered_batch(1, kHidden))),
                   "which process 1 does not host"});
  cases.push_back({"a layer the run does not have",
                   frame_of({ActorRole::kExpert, 3, 0},
                            caf::make_message(batch_atom::value, delivered_batch(1, kHidden))),
                   "does not host"});
  cases.push_back({"the coordinator, on a worker",
                   frame_of({ActorRole::kCoordinator, 0, 0},
                            caf::make_message(failed_atom::value, std::string("x"))),
                   "does not host"});
  cases.push_back({"rows of the wrong width",
                   frame_of({ActorRole::kExpert, 0, 0},
                            caf::make_message(batch_atom::value, delivered_batch(1, kHidden - 3))),
                   "rows of 5 values"});
  for (const int32_t rank : {1, -1}) {  // the run has one DP rank
    TokenBatchPtr b = delivered_batch(2, kHidden);
    b->tokens[1].origin_rank = rank;
    cases.push_back({"a row for a DP rank the run does not have",
                     frame_of({ActorRole::kExpert, 0, 0}, caf::make_message(batch_atom::value, b)),
                     "for DP rank"});
  }
  {  // the same row in a collective's contribution from another process
    TokenBatchPtr b = delivered_batch(1, kHidden);
    b->tokens[0].origin_rank = 3;
    auto c = std::make_shared<Contribution>();
    c->source = 0;
    c->dests = {0};
    c->parts = {b};
    cases.push_back({"a contribution's row for a DP rank the run does not have",
                     frame_of({ActorRole::kDispatch, 0, 0},
                              caf::make_message(contrib_atom::value, ContributionPtr(c))),
                     "for DP rank 3"});
  }
  for (Case& c : cases) {
    absl::Status s = delivery_status(run.ctx, run.layout, c.frame->view, {});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.what << ": " << s;
    EXPECT_NE(s.message().find(c.error), std::string::npos) << c.what << ": " << s;
  }
  // Bytes that do not decode: a header cut short.
  auto cut = frame_of({ActorRole::kExpert, 0, 0},
                      caf::make_message(batch_atom::value, delivered_batch(1, kHidden)));
  cut->view.header = cut->view.header.first(cut->view.header.size() - 1);
  absl::Status s = delivery_status(run.ctx, run.layout, cut->view, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(run.nothing_received()) << "a refused message reached an actor";
}

// Reports for the coordinator (busy time, a barrier's metrics) are checked against the run
// before the metrics recorder sees them: its asserts and per-block tables are not for peers.
TEST(ClusterActorDelivery, ReportsForTheCoordinatorAreCheckedAgainstTheRun) {
  TestRun driver(/*self=*/0);
  const ActorAddress coordinator{ActorRole::kCoordinator, 0, 0};
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    const char* what;
    caf::message message;
    const char* error;  // nullptr: accepted
  };
  const std::vector<Case> cases = {
      {"busy time", caf::make_message(busy_atom::value, int64_t{1}, 0.5, 0.75), nullptr},
      {"busy on device 2", caf::make_message(busy_atom::value, int64_t{2}, 0.5, 0.75),
       "device 2 (the run has 2)"},
      {"busy backwards", caf::make_message(busy_atom::value, int64_t{0}, 0.75, 0.5),
       "busy interval [0.75, 0.5]"},
      {"busy forever", caf::make_message(busy_atom::value, int64_t{0}, 0.5, inf), "busy interval"},
      {"a load",
       caf::make_message(load_atom::value, int64_t{0}, int64_t{3}, std::vector<int64_t>{4, 0}, 0.5,
                         int64_t{0}),
       nullptr},
      {"a load of block 2^40",
       caf::make_message(load_atom::value, int64_t{1} << 40, int64_t{3}, std::vector<int64_t>{4, 0},
                         0.5, int64_t{0}),
       "block 1099511627776 (the model has 1)"},
      {"a load over 3 devices",
       caf::make_message(load_atom::value, int64_t{0}, int64_t{3}, std::vector<int64_t>{4, 0, 1},
                         0.5, int64_t{0}),
       "3 per-device entries (the run has 2 devices)"},
      {"a negative load",
       caf::make_message(load_atom::value, int64_t{0}, int64_t{3}, std::vector<int64_t>{-4, 0}, 0.5,
                         int64_t{0}),
       "negative token count"},
      {"a layer end",
       caf::make_message(layer_atom::value, int64_t{0}, int64_t{3}, 0.5,
                         std::vector<double>{0.25, -1.0}),
       nullptr},
      {"a layer end of iteration -1",
       caf::make_message(layer_atom::value, int64_t{0}, int64_t{-1}, 0.5,
                         std::vector<double>{0.25, -1.0}),
       "iteration -1"},
      {"a layer end over 1 device",
       caf::make_message(layer_atom::value, int64_t{0}, int64_t{3}, 0.5, std::vector<double>{0.25}),
       "1 per-device entries"},
      {"rows", caf::make_message(rows_atom::value, true, int64_t{3}, int64_t{8}), nullptr},
      {"more remote rows than rows",
       caf::make_message(rows_atom::value, true, int64_t{9}, int64_t{8}), "9 remote rows of 8"},
      {"negative fetches", caf::make_message(fetch_atom::value, int64_t{-1}, int64_t{0}, 0.0),
       "negative expert"},
  };
  for (const Case& c : cases) {
    auto f = frame_of(coordinator, c.message);
    absl::Status s = delivery_status(driver.ctx, driver.layout, f->view, {});
    if (c.error == nullptr) {
      EXPECT_TRUE(s.ok()) << c.what << ": " << s;
      EXPECT_FALSE(driver.nothing_received_any()) << c.what << " did not arrive";
      continue;
    }
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.what << ": " << s;
    EXPECT_NE(s.message().find(c.error), std::string::npos) << c.what << ": " << s;
    EXPECT_TRUE(driver.nothing_received_any()) << c.what << " reached the coordinator";
  }
}

// A worker's batched reports (kReports) reach the coordinator one by one, in order, or, when
// one of them is out of range, none does.
TEST(ClusterActorDelivery, ABundleOfReportsArrivesInOrderOrNotAtAll) {
  TestRun driver(/*self=*/0);
  const ActorAddress coordinator{ActorRole::kCoordinator, 0, 0};
  std::vector<caf::message> reports = {
      caf::make_message(busy_atom::value, int64_t{0}, 0.25, 0.5),
      caf::make_message(rows_atom::value, true, int64_t{1}, int64_t{4}),
      caf::make_message(busy_atom::value, int64_t{1}, 0.5, 0.75)};
  auto f = frame_of(coordinator, caf::make_message(reports_atom::value, reports));
  ASSERT_TRUE(delivery_status(driver.ctx, driver.layout, f->view, {}).ok());
  std::vector<std::string> got;
  for (int i = 0; i < 3; ++i) {
    driver.probe->receive([&](busy_atom, int64_t device, double,
                              double) { got.push_back("busy " + std::to_string(device)); },
                          [&](rows_atom, bool, int64_t, int64_t rows) {
                            got.push_back("rows " + std::to_string(rows));
                          },
                          caf::after(std::chrono::seconds(10)) >> [] {});
  }
  EXPECT_EQ(got, (std::vector<std::string>{"busy 0", "rows 4", "busy 1"}));
  reports.push_back(caf::make_message(busy_atom::value, int64_t{9}, 0.5, 0.75));
  auto bad = frame_of(coordinator, caf::make_message(reports_atom::value, reports));
  absl::Status s = delivery_status(driver.ctx, driver.layout, bad->view, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("device 9"), std::string::npos) << s;
  EXPECT_TRUE(driver.nothing_received_any()) << "part of a refused bundle was delivered";
}

TEST(ClusterActorDelivery, AHostedSlotWithoutAnActorIsRefused) {
  TestRun run(/*self=*/1, /*missing_slot=*/true);
  auto f = frame_of({ActorRole::kExpert, 0, 0},
                    caf::make_message(batch_atom::value, delivered_batch(1, kHidden)));
  absl::Status s = delivery_status(run.ctx, run.layout, f->view, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("which this run does not have"), std::string::npos) << s;
  EXPECT_TRUE(run.nothing_received());
}

TEST(ClusterActorDelivery, ARefusedMessageFailsTheRunThroughTheDriversCoordinator) {
  TestRun driver(/*self=*/0);
  fail_run(driver.ctx, driver.layout, nullptr, "process 2 sent rows of 5 values");
  std::string reason;
  driver.probe->receive([&](failed_atom, const std::string& why) { reason = why; },
                        caf::after(std::chrono::seconds(10)) >> [] {});
  EXPECT_EQ(reason, "process 2 sent rows of 5 values");
  // A worker without an outbox (its data plane gone) sends nothing, and does not crash.
  TestRun worker(/*self=*/1);
  fail_run(worker.ctx, worker.layout, nullptr, "late");
  EXPECT_TRUE(worker.nothing_received());
}

}  // namespace
}  // namespace muflow::actors::cluster
