// An Outbox's reports for the coordinator (actors/cluster/remote_actor.hpp, #18): busy time and
// a barrier's metrics wait and leave as one kReports message right before the next other
// message to the same process, in the order they were made; they leave on their own once
// kMaxPendingReports wait, once the oldest waited kReportsFlushAfter (at the next send or
// `flush_aged`), and at `close`. Every frame carries the outbox's run attempt. Two UCX data
// planes in this process carry them.

#include <gtest/gtest.h>

#include <caf/all.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "actors/cluster/actor_codec.hpp"
#include "actors/cluster/remote_actor.hpp"
#include "actors/messages.hpp"
#include "transport/cluster/data_plane.hpp"
#include "transport/cluster/frame.hpp"
#include "transport/cluster/received_queue.hpp"

namespace muflow::actors::cluster {
namespace {

using transport::cluster::DataPlane;

const ActorAddress kCoordinator{ActorRole::kCoordinator, 0, 0};
constexpr uint64_t kRun = 3;  // the run attempt the outbox stamps on every frame

std::unique_ptr<DataPlane> make_plane(uint32_t process, transport::cluster::ReceivedQueue& in,
                                      int64_t max_bytes = int64_t{1} << 30) {
  DataPlane::Options o;
  o.process = process;
  o.max_message_bytes = max_bytes;
  o.name = "plane-" + std::to_string(process);
  auto p = DataPlane::create(o, in.handler());
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? std::move(*p) : nullptr;
}

caf::message busy(int64_t device, double begin) {
  return caf::make_message(busy_atom::value, device, begin, begin + 0.5);
}

// The next message `in` received, decoded (nullopt after `wait` without one); `sequence`
// (optional) gets its frame's sequence number.
std::optional<DecodedMessage> next(transport::cluster::ReceivedQueue& in,
                                   std::chrono::milliseconds wait = std::chrono::seconds(10),
                                   uint64_t* sequence = nullptr) {
  std::optional<transport::cluster::Received> r = in.pop(wait);
  if (!r) return std::nullopt;
  auto frame = transport::cluster::parse_frame(r->view());
  EXPECT_TRUE(frame.ok()) << frame.status();
  if (!frame.ok()) return std::nullopt;
  if (sequence != nullptr) *sequence = frame->prefix.sequence;
  EXPECT_EQ(frame->prefix.run, kRun) << "a frame without the outbox's run attempt";
  auto d = decode_actor_message(frame->header, frame->payload);
  EXPECT_TRUE(d.ok()) << d.status();
  if (!d.ok()) return std::nullopt;
  return std::move(*d);
}

// The begin times of the busy reports in a kReports message, in order.
std::vector<double> busy_begins(const DecodedMessage& d) {
  std::vector<double> out;
  if (!d.message.match_elements<reports_atom, std::vector<caf::message>>()) return out;
  for (const caf::message& m : d.message.get_as<std::vector<caf::message>>(1)) {
    if (m.match_elements<busy_atom, int64_t, double, double>()) out.push_back(m.get_as<double>(2));
  }
  return out;
}

class OutboxReports : public ::testing::Test {
 protected:
  void SetUp() override {
    driver_ = make_plane(0, to_driver_);
    worker_ = make_plane(1, to_worker_);
    ASSERT_TRUE(driver_ && worker_);
    ASSERT_TRUE(worker_->connect(0, driver_->address()).ok());
    outbox_ = std::make_unique<Outbox>(worker_.get(), 1, kRun);
  }
  void TearDown() override {
    if (outbox_) outbox_->close();
  }
  transport::cluster::ReceivedQueue to_driver_, to_worker_;
  std::unique_ptr<DataPlane> driver_, worker_;
  std::unique_ptr<Outbox> outbox_;
};

TEST_F(OutboxReports, ReportsWaitAndLeaveTogetherBeforeTheNextMessage) {
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(outbox_->send(0, kCoordinator, busy(i, i).content()).ok());
  ASSERT_TRUE(outbox_->send(0, kCoordinator,
                            caf::make_message(rows_atom::value, true, int64_t{2}, int64_t{5})
                                .content())
                  .ok());
  EXPECT_FALSE(next(to_driver_, std::chrono::milliseconds(100)).has_value())
      << "a report left on its own";
  ASSERT_TRUE(outbox_
                  ->send(0, kCoordinator,
                         caf::make_message(failed_atom::value, std::string("stop")).content())
                  .ok());  // not a report: the reports leave first, then it
  uint64_t seq = 99;
  auto reports = next(to_driver_, std::chrono::seconds(10), &seq);
  ASSERT_TRUE(reports.has_value());
  EXPECT_EQ(seq, 0u) << "frames are numbered per destination from 0, in the order they left";
  EXPECT_EQ(reports->to, kCoordinator);
  EXPECT_EQ(busy_begins(*reports), (std::vector<double>{0, 1, 2}));
  ASSERT_TRUE((reports->message.match_elements<reports_atom, std::vector<caf::message>>()));
  const auto& all = reports->message.get_as<std::vector<caf::message>>(1);
  ASSERT_EQ(all.size(), 4u);
  EXPECT_TRUE((all[3].match_elements<rows_atom, bool, int64_t, int64_t>()));
  auto failed = next(to_driver_, std::chrono::seconds(10), &seq);  // after the reports
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(seq, 1u);
  EXPECT_TRUE((failed->message.match_elements<failed_atom, std::string>()));
}

TEST_F(OutboxReports, ManyReportsLeaveWithoutWaiting) {
  for (size_t i = 0; i < Outbox::kMaxPendingReports; ++i) {
    ASSERT_TRUE(outbox_->send(0, kCoordinator, busy(0, static_cast<double>(i)).content()).ok());
  }
  auto reports = next(to_driver_);
  ASSERT_TRUE(reports.has_value());
  EXPECT_EQ(busy_begins(*reports).size(), Outbox::kMaxPendingReports);
}

TEST_F(OutboxReports, OldReportsLeaveOnFlushAgedAndAtClose) {
  ASSERT_TRUE(outbox_->send(0, kCoordinator, busy(1, 7.0).content()).ok());
  outbox_->flush_aged();  // too young
  EXPECT_FALSE(next(to_driver_, std::chrono::milliseconds(50)).has_value());
  std::this_thread::sleep_for(Outbox::kReportsFlushAfter);
  outbox_->flush_aged();
  auto one = next(to_driver_);
  ASSERT_TRUE(one.has_value());
  // A single report leaves as itself.
  ASSERT_TRUE((one->message.match_elements<busy_atom, int64_t, double, double>()));
  EXPECT_EQ(one->message.get_as<double>(2), 7.0);

  ASSERT_TRUE(outbox_->send(0, kCoordinator, busy(2, 8.0).content()).ok());
  outbox_->close();
  auto last = next(to_driver_);
  ASSERT_TRUE(last.has_value()) << "close dropped a waiting report";
  EXPECT_EQ(last->message.get_as<double>(2), 8.0);
  outbox_.reset();
}

// A worker that sends only to other workers does not keep its reports: they leave before
// its next message to any process.
TEST_F(OutboxReports, AMessageToAnotherProcessSendsTheWaitingReportsFirst) {
  transport::cluster::ReceivedQueue to_other;
  auto other = make_plane(2, to_other);
  ASSERT_TRUE(other);
  ASSERT_TRUE(worker_->connect(2, other->address()).ok());
  ASSERT_TRUE(outbox_->send(0, kCoordinator, busy(0, 3.0).content()).ok());
  ASSERT_TRUE(outbox_
                  ->send(2, {ActorRole::kSampler, 0, 0},
                         caf::make_message(release_atom::value, int64_t{4}).content())
                  .ok());
  auto report = next(to_driver_);
  ASSERT_TRUE(report.has_value()) << "the report stayed behind";
  EXPECT_EQ(report->message.get_as<double>(2), 3.0);
  uint64_t seq = 99;
  EXPECT_TRUE(next(to_other, std::chrono::seconds(10), &seq).has_value());
  EXPECT_EQ(seq, 0u) << "process 2's frames are numbered from 0 too";
  outbox_->close();
  outbox_.reset();
}

TEST_F(OutboxReports, AReportAfterCloseIsRefused) {
  outbox_->close();
  EXPECT_EQ(outbox_->send(0, kCoordinator, busy(0, 1.0).content()).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(next(to_driver_, std::chrono::milliseconds(100)).has_value());
  outbox_.reset();
}

// Only reports for the coordinator wait: a sampled batch or a token batch goes at once.
TEST_F(OutboxReports, OtherMessagesAreNotHeldBack) {
  ASSERT_TRUE(outbox_->send(0, {ActorRole::kSampler, 0, 0},
                            caf::make_message(release_atom::value, int64_t{4}).content())
                  .ok());
  auto release = next(to_driver_);
  ASSERT_TRUE(release.has_value());
  EXPECT_TRUE((release->message.match_elements<release_atom, int64_t>()));
}

// A message larger than the data plane's limit is refused before it is sent (the receiver
// would drain and drop it, and the run would wait for it forever); a remote handle that could
// not send one reports it to the run (the cluster runtime then fails the run) until the run
// was failed once, and smaller messages still go.
TEST(OutboxLimit, AMessageAboveThePlanesLimitIsRefusedAndTheRunToldUntilItFailed) {
  transport::cluster::ReceivedQueue to_driver, to_worker;
  auto driver = make_plane(0, to_driver);
  auto worker = make_plane(1, to_worker, /*max_bytes=*/512);
  ASSERT_TRUE(driver && worker);
  ASSERT_TRUE(worker->connect(0, driver->address()).ok());
  auto outbox = std::make_shared<Outbox>(worker.get(), 1, kRun);
  const caf::message big = caf::make_message(failed_atom::value, std::string(2048, 'x'));
  const absl::Status refused = outbox->send(0, kCoordinator, big.content());
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_NE(refused.message().find("512-byte limit"), std::string::npos) << refused;
  EXPECT_FALSE(next(to_driver, std::chrono::milliseconds(200)).has_value())
      << "an oversized message was sent";

  // The callback says whether it failed a run: until one did (e.g. none was started yet),
  // each undeliverable message is handed to it; after, they are only logged.
  std::mutex mu;
  std::vector<std::string> told;
  bool run_started = false;
  outbox->on_undeliverable([&](const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    told.push_back(what);
    return run_started;
  });
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  const caf::actor sampler = make_remote_actor(sys, outbox, 0, {ActorRole::kSampler, 0, 0});
  caf::anon_send(sampler, failed_atom::value, std::string(2048, 'x'));  // enqueued in this thread
  {
    std::lock_guard<std::mutex> lock(mu);
    run_started = true;
  }
  caf::anon_send(sampler, failed_atom::value, std::string(4096, 'y'));
  caf::anon_send(sampler, failed_atom::value, std::string(8192, 'z'));
  caf::anon_send(sampler, release_atom::value, int64_t{4});
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(told.size(), 2u) << "told until a run was failed, then no more";
    EXPECT_NE(told[1].find("dropped a message for"), std::string::npos) << told[1];
    EXPECT_NE(told[1].find("max_message_bytes"), std::string::npos) << told[1];
    EXPECT_NE(told[0], told[1]) << "the second message (4,096 bytes of text) was not told";
  }
  auto release = next(to_driver);
  ASSERT_TRUE(release.has_value()) << "a message under the limit was held back";
  EXPECT_TRUE((release->message.match_elements<release_atom, int64_t>()));
  anon_send_exit(sampler, caf::exit_reason::user_shutdown);
  outbox->close();
}

}  // namespace
}  // namespace muflow::actors::cluster
