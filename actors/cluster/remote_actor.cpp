#include "actors/cluster/remote_actor.hpp"

#include <string>
#include <utility>

#include "actors/cluster/actor_codec.hpp"
#include "actors/cluster/frame_kinds.hpp"
#include "actors/messages.hpp"
#include "spdlog/spdlog.h"
#include "transport/cluster/frame.hpp"

namespace muflow::actors::cluster {

absl::Status Outbox::send(uint32_t process, const ActorAddress& to,
                          const caf::type_erased_tuple& content) {
  const auto now = std::chrono::steady_clock::now();
  const ActorAddress coordinator{ActorRole::kCoordinator, 0, 0};
  if (to == coordinator && is_report(content)) {
    std::optional<caf::message> batch;
    {
      std::lock_guard<std::mutex> lock(reports_mu_);
      PendingReports& p = reports_[process];
      if (p.reports.empty()) p.oldest = now;
      p.reports.push_back(caf::message::copy(content));
      if (p.reports.size() >= kMaxPendingReports) batch = take_reports(process, false, now);
    }
    if (batch) return send_now(process, coordinator, batch->content());
    flush_reports(/*aged_only=*/true);
    return absl::OkStatus();
  }
  // What waits for `process` goes first: reports precede what their actors sent next.
  std::optional<caf::message> batch;
  {
    std::lock_guard<std::mutex> lock(reports_mu_);
    batch = take_reports(process, false, now);
  }
  if (batch) {
    if (absl::Status s = send_now(process, coordinator, batch->content()); !s.ok()) return s;
  }
  absl::Status s = send_now(process, to, content);
  flush_reports(/*aged_only=*/true);
  return s;
}

std::optional<caf::message> Outbox::take_reports(uint32_t process, bool aged_only,
                                                 std::chrono::steady_clock::time_point now) {
  auto it = reports_.find(process);
  if (it == reports_.end() || it->second.reports.empty()) return std::nullopt;
  if (aged_only && now - it->second.oldest < kReportsFlushAfter) return std::nullopt;
  std::vector<caf::message> reports = std::move(it->second.reports);
  reports_.erase(it);
  if (reports.size() == 1) return std::move(reports.front());
  return caf::make_message(reports_atom::value, std::move(reports));
}

void Outbox::flush_reports(bool aged_only) {
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::pair<uint32_t, caf::message>> due;
  {
    std::lock_guard<std::mutex> lock(reports_mu_);
    if (reports_.empty()) return;
    std::vector<uint32_t> processes;
    for (const auto& [process, pending] : reports_) processes.push_back(process);
    for (uint32_t process : processes) {
      if (auto batch = take_reports(process, aged_only, now)) due.emplace_back(process, *batch);
    }
  }
  for (const auto& [process, batch] : due) {
    if (absl::Status s = send_now(process, {ActorRole::kCoordinator, 0, 0}, batch.content());
        !s.ok() && !absl::IsFailedPrecondition(s)) {
      spdlog::error("muflow cluster: reports for process {} were not sent: {}", process,
                    std::string(s.message()));
    }
  }
}

void Outbox::flush_aged() { flush_reports(/*aged_only=*/true); }

absl::Status Outbox::send_now(uint32_t process, const ActorAddress& to,
                              const caf::type_erased_tuple& content) {
  absl::StatusOr<EncodedMessage> m = encode_actor_message(to, content);
  if (!m.ok()) return m.status();
  transport::cluster::FramePrefix p;
  p.kind = static_cast<uint16_t>(FrameKind::kActorMessage);
  p.source = self_;
  p.header_bytes = static_cast<uint32_t>(m->header.size());
  p.payload_bytes = m->payload.size();
  p.sequence = sequence_.fetch_add(1, std::memory_order_relaxed);
  std::vector<std::vector<char>> parts;
  parts.push_back(transport::cluster::encode_frame_prefix(p));
  parts.push_back(std::move(m->header));
  if (!m->payload.empty()) parts.push_back(std::move(m->payload));
  std::shared_lock<std::shared_mutex> lock(mu_);
  if (plane_ == nullptr) return absl::FailedPreconditionError("the run's data plane is closed");
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
  p.sequence = sequence_.fetch_add(1, std::memory_order_relaxed);
  std::shared_lock<std::shared_mutex> lock(mu_);
  if (plane_ == nullptr) return absl::FailedPreconditionError("the run's data plane is closed");
  plane_->send(process, {transport::cluster::encode_frame_prefix(p)});
  return absl::OkStatus();
}

void Outbox::close() {
  flush_reports(/*aged_only=*/false);
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
      spdlog::error("muflow cluster: dropped a message for {} in process {}: {}", to_string(to_),
                    process_, std::string(s.message()));
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
