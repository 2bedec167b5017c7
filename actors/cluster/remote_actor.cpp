#include "actors/cluster/remote_actor.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "actors/cluster/actor_codec.hpp"
#include "actors/cluster/frame_kinds.hpp"
#include "actors/messages.hpp"
#include "spdlog/spdlog.h"
#include "transport/cluster/frame.hpp"

namespace muflow::actors::cluster {

namespace {
const ActorAddress kCoordinator{ActorRole::kCoordinator, 0, 0};
constexpr auto kPrefixBytes = static_cast<size_t>(transport::cluster::kFramePrefixBytes);
}  // namespace

absl::Status Outbox::send(uint32_t process, const ActorAddress& to,
                          const caf::type_erased_tuple& content) {
  const auto now = std::chrono::steady_clock::now();
  if (to == kCoordinator && is_report(content)) {
    std::lock_guard<std::mutex> lock(reports_mu_);
    if (closed_) return absl::FailedPreconditionError("the run's data plane is closed");
    PendingReports& p = reports_[process];
    if (p.reports.empty()) p.oldest = now;
    p.reports.push_back(caf::message::copy(content));
    flush_locked(p.reports.size() >= kMaxPendingReports ? std::nullopt : std::optional(now));
    return absl::OkStatus();
  }
  absl::StatusOr<Framed> parts = frame(to, content);  // outside the lock
  if (!parts.ok()) return parts.status();
  std::lock_guard<std::mutex> lock(reports_mu_);
  // The waiting reports go first, whatever this message's destination: they then precede
  // what their actors sent next, and none waits at a run's end for a message to the driver
  // that never comes (a worker without a DP rank sends only to other workers).
  flush_locked(std::nullopt);
  return hand_over(process, to, std::move(*parts));
}

void Outbox::flush_locked(std::optional<std::chrono::steady_clock::time_point> aged_at) {
  for (auto it = reports_.begin(); it != reports_.end();) {
    PendingReports& p = it->second;
    if (p.reports.empty() || (aged_at && *aged_at - p.oldest < kReportsFlushAfter)) {
      ++it;
      continue;
    }
    const uint32_t process = it->first;
    std::vector<caf::message> reports = std::move(p.reports);
    it = reports_.erase(it);
    const caf::message batch = reports.size() == 1
                                   ? std::move(reports.front())
                                   : caf::make_message(reports_atom::value, std::move(reports));
    absl::StatusOr<Framed> parts = frame(kCoordinator, batch.content());
    absl::Status s =
        parts.ok() ? hand_over(process, kCoordinator, std::move(*parts)) : parts.status();
    if (!s.ok() && !absl::IsFailedPrecondition(s)) {
      spdlog::error("muflow cluster: reports for process {} were not sent: {}", process,
                    std::string(s.message()));
    }
  }
}

void Outbox::flush_aged() {
  std::lock_guard<std::mutex> lock(reports_mu_);
  flush_locked(std::chrono::steady_clock::now());
}

absl::StatusOr<Outbox::Framed> Outbox::frame(const ActorAddress& to,
                                             const caf::type_erased_tuple& content) {
  absl::StatusOr<EncodedFrame> m = encode_actor_frame(to, content, kPrefixBytes);
  if (!m.ok()) return m.status();
  if (m->header_bytes > std::numeric_limits<uint32_t>::max()) {  // the prefix's field
    return absl::InvalidArgumentError(absl::StrFormat(
        "a message for %s with a %d-byte header: a frame holds at most 4 GiB of header",
        to_string(to), m->header_bytes));
  }
  transport::cluster::FramePrefix p;
  p.kind = static_cast<uint16_t>(FrameKind::kActorMessage);
  p.source = self_;
  p.run = run_;
  p.header_bytes = static_cast<uint32_t>(m->header_bytes);
  p.payload_bytes = m->payload_bytes;
  Framed f;
  f.prefix = p;  // its sequence is set when it is handed over
  f.bytes = std::move(m->bytes);
  return f;
}

absl::Status Outbox::hand_over(uint32_t process, const ActorAddress& to, Framed f) {
  std::shared_lock<std::shared_mutex> lock(mu_);
  if (plane_ == nullptr) return absl::FailedPreconditionError("the run's data plane is closed");
  if (const int64_t limit = plane_->options().max_message_bytes;
      f.bytes.size() > static_cast<uint64_t>(limit)) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "a %d-byte message for %s in process %d is larger than the data plane's %d-byte limit "
        "(max_message_bytes: --max-message-mib of `muflow worker`, `run` and `serve`)",
        f.bytes.size(), to_string(to), process, limit));
  }
  f.prefix.sequence = next_sequence_[process]++;
  transport::cluster::write_frame_prefix(
      f.prefix, std::span<char, kPrefixBytes>(f.bytes.data(), kPrefixBytes));
  std::vector<std::vector<char>> parts;
  parts.push_back(std::move(f.bytes));
  plane_->send(process, std::move(parts), [process, to](absl::Status s) {
    if (s.ok()) return;
    spdlog::error("muflow cluster: a message for {} in process {} was not delivered: {}",
                  to_string(to), process, std::string(s.message()));
  });
  return absl::OkStatus();
}

absl::Status Outbox::ping(uint32_t process) {
  transport::cluster::FramePrefix p;
  p.kind = static_cast<uint16_t>(FrameKind::kPing);
  p.source = self_;
  p.run = run_;
  std::lock_guard<std::mutex> reports_lock(reports_mu_);  // the sequence, in hand-over order
  std::shared_lock<std::shared_mutex> lock(mu_);
  if (plane_ == nullptr) return absl::FailedPreconditionError("the run's data plane is closed");
  p.sequence = next_sequence_[process]++;
  plane_->send(process, {transport::cluster::encode_frame_prefix(p)});
  return absl::OkStatus();
}

void Outbox::on_undeliverable(std::function<bool(const std::string&)> fail_run) {
  std::lock_guard<std::mutex> lock(fail_mu_);
  fail_run_ = std::move(fail_run);
}

void Outbox::undeliverable(const std::string& what) {
  spdlog::error("muflow cluster: {}", what);
  std::function<bool(const std::string&)> fail;
  {
    std::lock_guard<std::mutex> lock(fail_mu_);
    if (failed_) return;
    fail = fail_run_;
  }
  if (!fail || !fail(what)) return;
  std::lock_guard<std::mutex> lock(fail_mu_);
  failed_ = true;
}

void Outbox::close() {
  std::lock_guard<std::mutex> reports_lock(reports_mu_);
  closed_ = true;
  flush_locked(std::nullopt);
  std::unique_lock<std::shared_mutex> lock(mu_);
  plane_ = nullptr;
}

namespace {

class RemoteActor final : public caf::monitorable_actor {
 public:
  RemoteActor(caf::actor_config& cfg, std::shared_ptr<Outbox> outbox, uint32_t process,
              ActorAddress to)
      : caf::monitorable_actor(cfg), outbox_(std::move(outbox)), process_(process), to_(to) {}

  const char* name() const override { return "muflow.remote"; }

  void enqueue(caf::mailbox_element_ptr what, caf::execution_unit* host) override {
    if (what == nullptr) return;
    const caf::type_erased_tuple& content = what->content();
    if (content.match_elements<caf::exit_msg>()) {
      caf::error reason = content.get_as<caf::exit_msg>(0).reason;
      cleanup(std::move(reason), host);
      return;
    }
    if (getf(is_terminated_flag)) return;
    if (absl::Status s = outbox_->send(process_, to_, content);
        !s.ok() && !absl::IsFailedPrecondition(s)) {  // closed: the run ended, nothing to say
      outbox_->undeliverable(absl::StrFormat("dropped a message for %s in process %d: %s",
                                             to_string(to_), process_, s.message()));
    }
  }

 private:
  std::shared_ptr<Outbox> outbox_;
  const uint32_t process_;
  const ActorAddress to_;
};

}  // namespace

caf::actor make_remote_actor(caf::actor_system& sys, std::shared_ptr<Outbox> outbox,
                             uint32_t process, const ActorAddress& to) {
  caf::actor_config cfg;
  auto ptr = caf::make_actor<RemoteActor, caf::strong_actor_ptr>(
      sys.next_actor_id(), sys.node(), &sys, cfg, std::move(outbox), process, to);
  return caf::actor_cast<caf::actor>(std::move(ptr));
}

}  // namespace muflow::actors::cluster
