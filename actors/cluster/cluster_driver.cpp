#include "actors/cluster/cluster_driver.hpp"

#include <algorithm>
#include <atomic>
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "actors/cluster/cluster_layout.hpp"
#include "actors/cluster/control_messages.hpp"
#include "actors/cluster/driver_link.hpp"
#include "actors/cluster/frame_kinds.hpp"
#include "actors/cluster/listen_address.hpp"
#include "actors/cluster/lost_workers.hpp"
#include "actors/cluster/rejoin_probe.hpp"
#include "actors/cluster/remote_actor.hpp"
#include "engine/trace/trace_merge.hpp"
#include "spdlog/spdlog.h"
#include "transport/cluster/cluster_secret.hpp"
#include "transport/cluster/data_plane.hpp"
#include "transport/cluster/frame.hpp"

namespace muflow::actors::cluster {
namespace {

using transport::cluster::ClusterSecret;
using transport::cluster::DataPlane;
using transport::cluster::Received;

// What the data plane's progress thread reads to deliver a frame: set by start, cleared by
// close (under the mutex), so a frame is delivered only while the run's actors exist.
struct Inbox {
  std::mutex mu;
  std::shared_ptr<const RunContext> ctx;
  const ClusterLayout* layout = nullptr;
  ActorMessageLimits limits;
};

// When each process was last heard from on the data plane (steady-clock nanoseconds;
// [process], 0 unused): set by the data plane's progress thread for every frame, read by the
// gate watcher.
struct Heartbeats {
  explicit Heartbeats(size_t processes)
      : last_heard_ns(std::make_unique<std::atomic<int64_t>[]>(processes)), size(processes) {}
  std::unique_ptr<std::atomic<int64_t>[]> last_heard_ns;
  const size_t size;
};

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void on_frame(Inbox& inbox, Heartbeats& beats, Received&& r) {
  auto reject = [&](const std::string& why) {
    spdlog::error("muflow driver: rejected a {}-byte data-plane message from process {}: {}",
                  r.size, r.tag, why);
  };
  auto frame = transport::cluster::parse_frame(r.view());
  if (!frame.ok()) return reject(std::string(frame.status().message()));
  if (frame->prefix.source != r.tag) {
    return reject(absl::StrFormat("its frame claims process %d", frame->prefix.source));
  }
  // Any frame from a process shows it is alive (the heartbeat's answer, or run traffic that
  // a pong may be queued behind).
  if (r.tag < beats.size) beats.last_heard_ns[r.tag].store(steady_ns(), std::memory_order_relaxed);
  if (frame->prefix.kind == static_cast<uint16_t>(FrameKind::kPong)) return;
  if (frame->prefix.kind != static_cast<uint16_t>(FrameKind::kActorMessage)) {
    return reject(absl::StrFormat("unexpected frame kind %d", frame->prefix.kind));
  }
  std::lock_guard<std::mutex> lock(inbox.mu);
  // Late messages of a run that ended (a failed attempt's stragglers): nothing to deliver to.
  // One of an earlier attempt that reaches this one is not delivered either (kOtherRun).
  if (!inbox.ctx) return;
  absl::StatusOr<FrameDelivery> done =
      deliver_actor_frame(*inbox.ctx, *inbox.layout, *frame, inbox.limits);
  if (!done.ok()) {
    reject(std::string(done.status().message()));
    fail_run(*inbox.ctx, *inbox.layout, nullptr,
             absl::StrFormat("the driver rejected a message from process %d: %s", r.tag,
                             done.status().message()));
  }
}

// Fails the run `inbox` delivers to, if one is started (a message it needed was not sent or
// not delivered), and says whether it did; otherwise the message belonged to no run and is
// only logged where it was dropped. Any thread.
bool fail_started_run(const std::weak_ptr<Inbox>& weak, const std::string& what) {
  const std::shared_ptr<Inbox> inbox = weak.lock();
  if (!inbox) return false;
  std::lock_guard<std::mutex> lock(inbox->mu);
  if (!inbox->ctx) return false;
  fail_run(*inbox->ctx, *inbox->layout, nullptr, what);
  return true;
}

// Monitors every live worker's gate (its CAF proxy: the middleman stops it, with a down
// message, once the worker's connection breaks, e.g. when the process died). A lost worker is
// recorded in `lost`, and its process's remote handles are stopped: the coordinator monitors
// every handle of the wiring, so the run fails at once instead of waiting for its messages.
struct WatchedGate {
  uint32_t process = 0;
  std::string name;  // "worker HOST:PORT (process N)"
  caf::actor gate;
};
//
// It also pings every live worker over the data plane each `heartbeat.interval` (the worker's
// progress thread answers) and counts one as lost the same way once a ping stays unanswered for
// `heartbeat.timeout` (any frame from it answers): a hung worker (SIGSTOP, a stuck call, a
// machine that lost power) keeps its connection open, which the monitor alone would notice
// only after TCP's timeouts. Such a worker also gets cl_stop, so that if it comes back it stops
// the run's actors instead of sending on.
struct HeartbeatPlan {
  std::chrono::milliseconds interval{0}, timeout{0};  // timeout 0: off
  std::shared_ptr<Heartbeats> beats;
  std::shared_ptr<Outbox> outbox;
};

caf::behavior gate_watcher(caf::event_based_actor* self, std::vector<WatchedGate> gates,
                           std::vector<std::pair<uint32_t, caf::actor>> remotes,
                           std::shared_ptr<LostState> lost, HeartbeatPlan heartbeat,
                           RejoinPlan rejoin) {
  // Records `g` as lost (once) and stops its process's remote handles.
  auto declare_lost = [remotes, lost, interval = rejoin.interval](const WatchedGate& g,
                                                                  std::string description) {
    ProcessGroup::LostWorker w;
    w.process = g.process;
    w.description = std::move(description);
    w.detected = std::chrono::steady_clock::now();
    {
      std::lock_guard<std::mutex> lock(lost->mu);
      if (!lost->processes.insert(g.process).second) return false;
      lost->list.push_back(w);
      back_off_if_returned_lately(*lost, g.process, interval, g.name);
    }
    spdlog::error("muflow driver: {}; the run fails and its devices move to the survivors",
                  w.description);
    for (const auto& [process, handle] : remotes) {
      if (process == g.process) {
        caf::anon_send_exit(handle, caf::exit_reason::remote_link_unreachable);
      }
    }
    return true;
  };
  for (const WatchedGate& g : gates) self->monitor(g.gate);
  self->set_down_handler([self, gates, declare_lost](caf::down_msg& down) {
    for (const WatchedGate& g : gates) {
      if (g.gate.address() != down.source) continue;
      declare_lost(
          g, absl::StrFormat("%s was lost (%s)", g.name, self->home_system().render(down.reason)));
    }
  });
  const bool beating = heartbeat.timeout.count() > 0 && heartbeat.interval.count() > 0;
  if (beating) self->send(self, heartbeat_atom::value);
  // Answers of the gates to the cl_stop sent to a hung worker (if it ever answers): ignored,
  // errors included (the default error handler would stop this actor).
  self->set_error_handler([](caf::error&) {});
  // [process]: when the oldest ping not answered yet was sent (steady ns), 0 when none is.
  auto pending = std::make_shared<std::vector<int64_t>>(heartbeat.beats->size, 0);
  caf::actor checker;
  if (rejoin.interval.count() > 0) {
    // Linked: it stops with the watcher (after the check under way, at most ~1 s).
    checker = self->spawn<caf::detached + caf::hidden + caf::linked>(tcp_checker,
                                                                     tcp_check_bound(rejoin));
    self->delayed_send(self, rejoin.interval, rejoin_atom::value);
  }
  auto probes = std::make_shared<Probes>(rejoin.workers.size() + 1);
  return {
      [](run_stop_atom) {},       // lives until close() stops it
      [](const std::string&) {},  // a gate's answer to cl_stop
      [self, lost, rejoin, probes, checker](rejoin_atom) {
        for (const RejoinPlan::Worker& w : rejoin.workers) {
          {
            std::lock_guard<std::mutex> lock(lost->mu);
            if (lost->processes.count(w.process) == 0 || lost->returned.count(w.process) != 0) {
              continue;
            }
            if (auto it = lost->retry_after.find(w.process);
                it != lost->retry_after.end() && std::chrono::steady_clock::now() < it->second) {
              continue;
            }
          }
          if (!probes->under_way[w.process]) {
            probe_lost_worker(self, checker, w, rejoin, lost, probes);
          }
        }
        self->delayed_send(self, rejoin.interval, rejoin_atom::value);
      },
      [self, gates, lost, heartbeat, declare_lost, pending](heartbeat_atom) {
        const int64_t now = steady_ns();
        const auto timeout_ns =
            std::chrono::duration_cast<std::chrono::nanoseconds>(heartbeat.timeout).count();
        for (const WatchedGate& g : gates) {
          {
            std::lock_guard<std::mutex> lock(lost->mu);
            if (lost->processes.count(g.process) != 0) continue;
          }
          if (g.process >= heartbeat.beats->size) continue;
          int64_t& oldest = (*pending)[g.process];
          // Any frame from the worker since the oldest unanswered ping was sent answers it. The
          // timeout runs from a ping sent and not answered, never from this actor's own last
          // turn: a late turn (a starved or paused driver) sends no pings, so it loses nobody.
          if (oldest != 0 && heartbeat.beats->last_heard_ns[g.process].load() >= oldest) oldest = 0;
          if (oldest != 0 && now - oldest > timeout_ns) {
            if (declare_lost(g,
                             absl::StrFormat("%s was lost (no answer to a heartbeat sent %.1f s "
                                             "ago)",
                                             g.name, static_cast<double>(now - oldest) * 1e-9))) {
              // If it comes back, it stops the run's actors instead of sending on.
              self->send(g.gate, run_stop_atom::value);
            }
            continue;
          }
          if (heartbeat.outbox->ping(g.process).ok() && oldest == 0) oldest = now;
        }
        self->delayed_send(self, heartbeat.interval, heartbeat_atom::value);
      },
  };
}

class ClusterDriver final : public ProcessGroup {
 public:
  ClusterDriver(std::vector<ListenAddress> workers, ClusterSecret secret,
                ClusterDriverOptions options)
      : workers_(std::move(workers)),
        secret_(std::make_shared<const ClusterSecret>(std::move(secret))),
        options_(options) {}
  ~ClusterDriver() override { close(); }

  void configure(caf::actor_system_config& cfg) override { cfg.load<caf::io::middleman>(); }

  absl::StatusOr<ProcessLayout*> open(caf::actor_system& sys,
                                      const std::shared_ptr<RunContext>& ctx) override {
    close();
    const engine::topology::Topology& topo = ctx->topology;
    if (topo.source_text.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: a run across workers needs the topology's TOML text (parse it from a file or "
          "string)",
          topo.source));
    }
    sys_ = &sys;
    ++run_number_;  // this attempt's: stamps its frames (a worker drops an earlier one's)
    inbox_ = std::make_shared<Inbox>();
    DataPlane::Options o;
    o.process = 0;
    o.name = "driver data plane";
    o.max_message_bytes = options_.max_message_bytes;
    beats_ = std::make_shared<Heartbeats>(workers_.size() + 1);
    auto plane = DataPlane::create(
        o,
        [inbox = inbox_, beats = beats_](Received&& r) { on_frame(*inbox, *beats, std::move(r)); },
        [inbox = std::weak_ptr<Inbox>(inbox_)](uint64_t tag, uint64_t bytes,
                                               const std::string& why) {
          (void)fail_started_run(inbox, absl::StrFormat("the driver dropped a %d-byte message "
                                                        "from process %d: %s",
                                                        bytes, tag, why));
        });
    if (!plane.ok()) return plane.status();
    plane_ = std::move(*plane);
    // A lost worker's devices go to the survivors (its address stays empty: nobody connects
    // to it, and it gets no run).
    std::set<uint32_t> lost, returning;
    {
      std::lock_guard<std::mutex> lock(lost_->mu);
      // A lost worker that answered again is joined like the others; if it cannot be joined or
      // set up after all, it is lost again (below), never the run's error.
      for (uint32_t p : lost_->returned) {
        lost_->processes.erase(p);
        lost_->taken_back_at[p] = std::chrono::steady_clock::now();
      }
      returning.swap(lost_->returned);
      lost = lost_->processes;
    }
    const auto num_processes = static_cast<uint32_t>(workers_.size() + 1);
    std::vector<std::string> addresses(workers_.size() + 1);
    addresses[0].assign(plane_->address().begin(), plane_->address().end());
    gates_.assign(workers_.size(), caf::actor{});
    joined_.resize(workers_.size(), false);
    for (size_t i = 0; i < workers_.size(); ++i) {
      if (lost.count(static_cast<uint32_t>(i + 1)) != 0) continue;
      absl::StatusOr<WorkerLink> link = join_worker(
          sys, workers_[i], *secret_, static_cast<uint32_t>(i + 1), *plane_, options_.join_timeout);
      if (!link.ok()) {
        // One that served this driver before and cannot be reached now (Unavailable) is lost
        // (it died between runs, or while a recovery sets up the next attempt): the run goes
        // on without it. One never reached, or one that refuses the driver (PermissionDenied:
        // another token, another driver's process index), is a configuration error: the run
        // fails.
        const bool came_back = returning.count(static_cast<uint32_t>(i + 1)) != 0;
        if (!came_back && (!joined_[i] || !absl::IsUnavailable(link.status()))) {
          return link.status();
        }
        note_lost(i, absl::StrFormat("%s was lost (it cannot be reached again: %s)", worker_name(i),
                                     link.status().message()));
        lost.insert(static_cast<uint32_t>(i + 1));
        continue;
      }
      joined_[i] = true;
      addresses[i + 1].assign(link->ucx_address.begin(), link->ucx_address.end());
      gates_[i] = link->gate;
    }
    std::vector<uint32_t> device_process =
        replace_lost_devices(device_processes(topo), lost, num_processes);
    const std::string device_map = format_device_processes(device_process);
    for (size_t i = 0; i < gates_.size(); ++i) {
      if (!gates_[i]) continue;
      const int64_t trace_max_events = ctx->trace ? ctx->trace->max_events() : int64_t{-1};
      if (absl::Status s =
              ask(i, options_.setup_timeout, "set up the run", setup_atom::value, topo.source_text,
                  topo.base_dir, addresses, device_map, trace_max_events, run_number_);
          !s.ok()) {
        // No answer (Unavailable: the worker died or hangs while it sets up) loses the worker:
        // this run fails, and the caller's next attempt (Server::run, ServingEngine) sets up
        // on the survivors. An answer that refuses the run (FailedPrecondition: e.g. the model
        // is not at the path on that machine) is the run's error.
        // A worker that came back and refuses (e.g. restarted with another model folder) is
        // lost again, so the caller's next attempt leaves it out, and tried again later.
        const bool came_back = returning.count(static_cast<uint32_t>(i + 1)) != 0;
        if (absl::IsUnavailable(s) || came_back) {
          stop_quietly(i);  // one that was only slow drops the run it may still set up
          note_lost(i, absl::StrFormat("%s was lost while setting up the run (%s)", worker_name(i),
                                       s.message()));
        }
        return s;
      }
    }
    outbox_ = std::make_shared<Outbox>(plane_.get(), 0, run_number_);
    // A message for a worker that cannot be sent (e.g. larger than the data plane's limit)
    // fails the run, instead of leaving it waiting for the message.
    outbox_->on_undeliverable([inbox = std::weak_ptr<Inbox>(inbox_)](const std::string& what) {
      return fail_started_run(inbox, "the driver " + what);
    });
    layout_ =
        std::make_unique<ClusterLayout>(sys, 0, std::move(device_process), outbox_, run_number_);
    ctx_ = ctx;
    limits_ = limits_for(ctx->config, topo);
    return layout_.get();
  }

  absl::Status start() override {
    {
      std::lock_guard<std::mutex> lock(inbox_->mu);
      inbox_->ctx = ctx_;
      inbox_->layout = layout_.get();
      inbox_->limits = limits_;
    }
    started_at_.assign(gates_.size(), {});
    stopped_.assign(gates_.size(), false);
    for (size_t i = 0; i < gates_.size(); ++i) {
      if (!gates_[i]) continue;
      const auto sent = std::chrono::steady_clock::now();
      if (absl::Status s = ask(i, options_.join_timeout, "start the run", run_start_atom::value);
          !s.ok()) {
        if (absl::IsUnavailable(s)) {  // it died (or hangs) since its setup: as in open
          stop_quietly(i);
          note_lost(i, absl::StrFormat("%s was lost while the run started (%s)", worker_name(i),
                                       s.message()));
        }
        return s;
      }
      // The worker's clock origin, on this process's clock: the middle of the round trip
      // (off by at most half of it, a fraction of a millisecond on one host or a LAN).
      started_at_[i] = sent + (std::chrono::steady_clock::now() - sent) / 2;
    }
    // From here a lost worker fails the run (the coordinator sees its handles stop).
    std::vector<WatchedGate> watched;
    for (size_t i = 0; i < gates_.size(); ++i) {
      if (gates_[i]) watched.push_back({static_cast<uint32_t>(i + 1), worker_name(i), gates_[i]});
    }
    // Hidden: not an actor of the run (the run awaits its own actors before close stops this).
    HeartbeatPlan heartbeat{options_.heartbeat_interval, options_.heartbeat_timeout, beats_,
                            outbox_};
    RejoinPlan rejoin{options_.rejoin_interval, options_.join_timeout, {}, secret_};
    for (size_t i = 0; i < workers_.size(); ++i) {
      rejoin.workers.push_back({static_cast<uint32_t>(i + 1), worker_name(i), workers_[i]});
    }
    watcher_ = sys_->spawn<caf::hidden>(gate_watcher, std::move(watched), layout_->remotes(), lost_,
                                        std::move(heartbeat), std::move(rejoin));
    return absl::OkStatus();
  }

  absl::Status finish(RunContext& ctx) override {
    std::set<uint32_t> lost;
    {
      std::lock_guard<std::mutex> lock(lost_->mu);
      lost = lost_->processes;
    }
    absl::Status first_error = absl::OkStatus();
    auto note = [&](absl::Status s) {
      if (!s.ok() && first_error.ok()) first_error = std::move(s);
    };
    for (size_t i = 0; i < gates_.size(); ++i) {
      if (!gates_[i] || lost.count(static_cast<uint32_t>(i + 1)) != 0) continue;
      if (absl::Status s = ask(i, options_.stop_timeout, "stop the run", run_stop_atom::value);
          !s.ok()) {
        note(std::move(s));
        continue;
      }
      stopped_[i] = true;
      if (!ctx.trace) continue;
      std::string text;
      {
        caf::scoped_actor self{*sys_};
        self->request(gates_[i], options_.stop_timeout, run_trace_atom::value)
            .receive([&](std::string& t) { text = std::move(t); },
                     [&](caf::error& err) {
                       note(absl::UnavailableError(absl::StrFormat(
                           "%s did not send its trace: %s", worker_name(i), sys_->render(err))));
                     });
      }
      if (text.empty()) continue;
      // Bounded before parsing: muflow writes well under 1 KiB per event, so a trace above
      // that per event of the cap is refused, not parsed.
      const auto max_bytes = static_cast<size_t>(ctx.trace->max_events() + 1) * 1024;
      if (text.size() > max_bytes) {
        note(absl::InvalidArgumentError(absl::StrFormat(
            "%s sent a %d-byte trace; at most %d bytes (1 KiB per event of the cap) are taken",
            worker_name(i), text.size(), max_bytes)));
        continue;
      }
      nlohmann::json trace = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (trace.is_discarded()) {
        note(absl::InvalidArgumentError(
            absl::StrFormat("%s sent a trace that is not JSON", worker_name(i))));
        continue;
      }
      const double shift_us =
          std::chrono::duration<double, std::micro>(started_at_.at(i) - ctx.t0).count();
      absl::StatusOr<int64_t> added =
          engine::trace::merge_trace(trace, worker_name(i) + "'s trace", shift_us, *ctx.trace);
      if (!added.ok()) note(added.status());
    }
    return first_error;
  }

  void close() override {
    if (watcher_) {
      caf::anon_send_exit(watcher_, caf::exit_reason::user_shutdown);
      watcher_ = nullptr;
    }
    if (inbox_) {
      std::lock_guard<std::mutex> lock(inbox_->mu);
      inbox_->ctx = nullptr;
      inbox_->layout = nullptr;
    }
    std::set<uint32_t> lost;
    {
      std::lock_guard<std::mutex> lock(lost_->mu);
      lost = lost_->processes;
    }
    for (size_t i = 0; i < gates_.size(); ++i) {
      if (!gates_[i] || lost.count(static_cast<uint32_t>(i + 1)) != 0) continue;
      if (i < stopped_.size() && stopped_[i]) continue;  // finish stopped it
      if (absl::Status s = ask(i, options_.stop_timeout, "stop the run", run_stop_atom::value);
          !s.ok()) {
        spdlog::warn("muflow driver: {}", std::string(s.message()));
      }
    }
    stopped_.clear();
    gates_.clear();
    if (outbox_) outbox_->close();
    // Sends to a lost worker never complete: drop its endpoint, so that the plane stops at
    // once instead of waiting for them (part of the time to the first token after recovery).
    if (plane_) {
      for (uint32_t p : lost) plane_->drop_peer(p);
    }
    plane_.reset();  // after the outbox closed: no remote handle sends through it any more
    outbox_.reset();
    layout_.reset();
    ctx_.reset();
    inbox_.reset();
    beats_.reset();
  }

  absl::StatusOr<StageLoad> stage_load(std::chrono::milliseconds timeout) override {
    if (!ctx_) return absl::FailedPreconditionError("no run is started across the workers");
    std::set<uint32_t> lost;
    {
      std::lock_guard<std::mutex> lock(lost_->mu);
      lost = lost_->processes;
    }
    StageLoad total;
    caf::scoped_actor self{*sys_, /*hide=*/true};
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (size_t i = 0; i < gates_.size(); ++i) {
      if (!gates_[i] || lost.count(static_cast<uint32_t>(i + 1)) != 0) continue;
      // Asked in tries of growing length (an answer to an earlier try is dropped), so that a
      // worker lost meanwhile ends the wait within a try instead of at `timeout`: a question
      // sent just before its connection broke is never answered, and the caller holds the
      // group, which the recovery needs.
      std::chrono::milliseconds try_for{250};
      for (bool answered = false; !answered;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        caf::error failure;
        self->request(gates_[i], std::max(std::chrono::milliseconds(1), std::min(try_for, left)),
                      run_stats_atom::value)
            .receive(
                [&](int64_t kv, int64_t attention, int64_t expert, int64_t sampler) {
                  StageLoad w;
                  w.kv_bytes = std::max<int64_t>(0, kv);
                  w.queued_attention_tokens = std::max<int64_t>(0, attention);
                  w.queued_expert_tokens = std::max<int64_t>(0, expert);
                  w.queued_sampler_tokens = std::max<int64_t>(0, sampler);
                  total += w;
                  answered = true;
                },
                [&](caf::error& err) { failure = std::move(err); });
        if (answered) break;
        bool lost_now = false;
        {
          std::lock_guard<std::mutex> lock(lost_->mu);
          lost_now = lost_->processes.count(static_cast<uint32_t>(i + 1)) != 0;
        }
        if (lost_now || failure != caf::sec::request_timeout ||
            std::chrono::steady_clock::now() >= deadline) {
          return absl::UnavailableError(
              absl::StrFormat("%s did not report its stages: %s", worker_name(i),
                              lost_now ? std::string("it was lost") : sys_->render(failure)));
        }
        try_for *= 2;
      }
    }
    return total;
  }

  std::vector<LostWorker> lost_workers() const override {
    std::lock_guard<std::mutex> lock(lost_->mu);
    return lost_->list;
  }

  std::vector<ReturnedWorker> returned_workers() const override {
    std::lock_guard<std::mutex> lock(lost_->mu);
    return lost_->returned_list;
  }

 private:
  // Sends cl_stop to worker `i` without waiting for its answer (from this node, which the
  // gate authenticated; an anonymous sender is refused).
  void stop_quietly(size_t i) {
    if (i >= gates_.size() || !gates_[i]) return;
    caf::scoped_actor self{*sys_};
    self->send(gates_[i], run_stop_atom::value);
  }

  // Records worker `i` as lost outside a started run (no watcher: nothing of a run to stop).
  void note_lost(size_t i, std::string description) {
    ProcessGroup::LostWorker w;
    w.process = static_cast<uint32_t>(i + 1);
    w.description = std::move(description);
    w.detected = std::chrono::steady_clock::now();
    spdlog::error("muflow driver: {}; its devices move to the survivors", w.description);
    std::lock_guard<std::mutex> lock(lost_->mu);
    if (lost_->processes.insert(w.process).second) {
      lost_->list.push_back(std::move(w));
      back_off_if_returned_lately(*lost_, static_cast<uint32_t>(i + 1), options_.rejoin_interval,
                                  worker_name(i));
    }
    if (i < gates_.size()) gates_[i] = caf::actor{};
  }

  std::string worker_name(size_t i) const {
    return absl::StrFormat("worker %s:%d (process %d)", workers_[i].host, workers_[i].port, i + 1);
  }

  // Sends `xs` to worker i's gate and waits for its answer ("" = done, else what failed).
  template <class... Ts>
  absl::Status ask(size_t i, std::chrono::milliseconds timeout, const char* what, Ts&&... xs) {
    const std::string where = worker_name(i);
    caf::scoped_actor self{*sys_};
    absl::Status result = absl::OkStatus();
    self->request(gates_[i], timeout, std::forward<Ts>(xs)...)
        .receive(
            [&](const std::string& failure) {
              if (!failure.empty()) {
                result = absl::FailedPreconditionError(
                    absl::StrFormat("%s could not %s: %s", where, what, failure));
              }
            },
            [&](caf::error& err) {
              result = absl::UnavailableError(
                  absl::StrFormat("%s did not %s: %s", where, what, sys_->render(err)));
            });
    return result;
  }

  const std::vector<ListenAddress> workers_;
  const std::shared_ptr<const ClusterSecret> secret_;  // shared with the gate watcher
  const ClusterDriverOptions options_;
  caf::actor_system* sys_ = nullptr;
  std::shared_ptr<Inbox> inbox_;
  std::unique_ptr<DataPlane> plane_;
  std::shared_ptr<Outbox> outbox_;
  std::unique_ptr<ClusterLayout> layout_;
  std::shared_ptr<const RunContext> ctx_;
  ActorMessageLimits limits_;
  std::vector<caf::actor> gates_;  // [worker]: empty for a lost worker
  std::vector<bool> joined_;       // [worker]: joined in some run of this group
  caf::actor watcher_;             // the gates' monitor while a run is started
  std::shared_ptr<Heartbeats> beats_;  // this run's: when each worker last answered a ping
  // [worker]: when its run's clock started, on this process's steady clock (start)
  std::vector<std::chrono::steady_clock::time_point> started_at_;
  std::vector<bool> stopped_;  // [worker]: finish stopped its share of the run
  uint64_t run_number_ = 0;    // the attempt `open` set up last (1, 2, ...; frame.hpp's `run`)
  std::shared_ptr<LostState> lost_ = std::make_shared<LostState>();
};

}  // namespace

absl::StatusOr<std::shared_ptr<ProcessGroup>> make_cluster_driver(
    const engine::topology::Topology& topology, ClusterDriverOptions options) {
  if (topology.workers.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s lists no [[cluster.workers]]", topology.source));
  }
  std::vector<ListenAddress> workers;
  for (size_t i = 0; i < topology.workers.size(); ++i) {
    absl::StatusOr<ListenAddress> a = parse_listen_address(topology.workers[i].address);
    if (!a.ok()) {
      return absl::InvalidArgumentError(absl::StrFormat("%s: [[cluster.workers]] %d: %s",
                                                        topology.source, i, a.status().message()));
    }
    if (a->port == 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: [[cluster.workers]] %d: address %s has port 0 (a worker started by `muflow run "
          "--spawn-workers` gets its port from that worker; otherwise give the port it "
          "listens on)",
          topology.source, i, topology.workers[i].address));
    }
    workers.push_back(*a);
  }
  absl::StatusOr<ClusterSecret> secret = ClusterSecret::load(topology.cluster_token_file);
  if (!secret.ok()) return secret.status();
  return std::shared_ptr<ProcessGroup>(
      std::make_shared<ClusterDriver>(std::move(workers), std::move(*secret), options));
}

}  // namespace muflow::actors::cluster
