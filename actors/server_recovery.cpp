// Server::run across processes, surviving lost workers (#18 item 5): attempts of one run. An
// attempt is one run_together; when the process group loses a worker during it, the attempt
// fails, and the next one serves on the survivors (the group re-places the lost devices) the
// requests that were taken and unfinished — each under its id, with its prompt followed by
// the tokens it had generated, so that the prefill rebuilds its KV cache (actors/readmission.hpp
// says why the outputs equal a fault-free run's) — and then the requests still to come. The
// host's callbacks see one run.
//
// Thread ownership: RecoveryState is written by the attempt's callbacks (the coordinator's
// thread, one at a time) and by the host thread between attempts; run_together returns only
// after every actor of the attempt finished (actor_system::await_all_actors_done), which
// orders the two.

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "actors/readmission.hpp"
#include "actors/server.hpp"
#include "engine/seconds_between.hpp"
#include "spdlog/spdlog.h"

namespace muflow::actors {
namespace {

using Clock = std::chrono::steady_clock;
using engine::seconds_between;
using engine::serving::Request;

struct RecoveryState {
  Clock::time_point origin;  // the run's clock: 0 = the first attempt's start
  double offset_s = 0;       // the current attempt's start on the run's clock
  bool keep_outputs = true;
  std::map<int64_t, ResumableRequest> taken;  // by id
  std::map<int64_t, RequestOutput> finished;  // by id (keep_outputs only)
  int64_t next_id = 0;  // the id of the next request of a source the coordinator would number
  // Counts of the current attempt, and of the attempts that failed before it.
  int64_t tokens = 0, finished_requests = 0, completed = 0, rejected = 0;
  int64_t earlier_tokens = 0, earlier_finished = 0, earlier_completed = 0, earlier_rejected = 0;
  bool awaiting_first_token = false;  // since the last recovery, until a token comes
  Clock::time_point first_token_after_recovery{};
};

// The current attempt's requests: the re-admitted ones (ids kept, arrivals in the past), then
// the host's source, whose requests are numbered as the coordinator would number them (unless
// the source is materialized: ids checked with the list) and recorded as taken. Arrivals are
// shifted to the attempt's clock.
class AttemptSource final : public engine::serving::RequestSource {
 public:
  AttemptSource(std::deque<Request> readmitted, engine::serving::RequestSourcePtr rest, bool number,
                RecoveryState* state)
      : readmitted_(std::move(readmitted)),
        rest_(std::move(rest)),
        number_(number),
        state_(state) {}

  int64_t remaining() const override {
    return static_cast<int64_t>(readmitted_.size()) + (rest_ ? rest_->remaining() : 0);
  }

  std::optional<Request> next() override {
    if (!readmitted_.empty()) {
      Request r = std::move(readmitted_.front());
      readmitted_.pop_front();
      return r;
    }
    if (!rest_) return std::nullopt;
    std::optional<Request> r = rest_->next();
    if (!r) return std::nullopt;
    if (number_) r->id = state_->next_id++;
    state_->taken[r->id].request = *r;
    r->arrival_s = std::max(0.0, r->arrival_s - state_->offset_s);
    return r;
  }

 private:
  std::deque<Request> readmitted_;
  engine::serving::RequestSourcePtr rest_;
  const bool number_;
  RecoveryState* state_;
};

// The attempt's callbacks: the host's, with each request shown as one run's (its id, its
// original prompt, every token, times on the run's clock), plus the bookkeeping above.
RunCallbacks attempt_callbacks(const RunCallbacks& host, const std::shared_ptr<RecoveryState>& st) {
  RunCallbacks cb;
  // As the host asked (the coordinator forgets a finished request at once when false); the
  // outputs returned are the ones kept here (st->finished), merged over attempts.
  cb.keep_outputs = host.keep_outputs;
  cb.stop_requested = host.stop_requested;
  if (host.on_progress) {  // counts over the whole run, not the attempt
    cb.on_progress = [st, user = host.on_progress](int64_t finished, int64_t requests,
                                                   int64_t tokens, double clock_s) {
      user(finished + st->earlier_finished, requests + st->earlier_finished,
           tokens + st->earlier_tokens, clock_s);
    };
  }
  cb.on_token = [st, user = host.on_token](int64_t id, int32_t token) {
    ++st->tokens;
    if (auto it = st->taken.find(id); it != st->taken.end()) it->second.on_token(token);
    if (st->awaiting_first_token) {
      st->first_token_after_recovery = Clock::now();
      st->awaiting_first_token = false;
    }
    if (user) user(id, token);
  };
  cb.on_finish = [st, user = host.on_finish](const RequestOutput& out) {
    ++st->finished_requests;
    if (out.finish_s >= 0) ++st->completed;
    if (out.finish_reason == FinishReason::kRejected) ++st->rejected;
    auto it = st->taken.find(out.request_id);
    RequestOutput merged =
        merged_output(it != st->taken.end() ? &it->second : nullptr, out, st->offset_s, st->origin);
    if (user) user(merged);
    if (st->keep_outputs) st->finished[out.request_id] = std::move(merged);
    if (it != st->taken.end()) st->taken.erase(it);
  };
  return cb;
}

// The requests to re-admit after a lost worker: every taken, unfinished one, with the tokens
// it generated appended to its prompt and counted against its max_new_tokens, arriving now
// (or at its own arrival if that is still to come), by (arrival, id).
std::deque<Request> readmissions(RecoveryState& st) {
  std::vector<Request> out;
  for (auto& [id, t] : st.taken) out.push_back(readmission(t, st.offset_s));
  std::sort(out.begin(), out.end(), [](const Request& a, const Request& b) {
    return std::tie(a.arrival_s, a.id) < std::tie(b.arrival_s, b.id);
  });
  return std::deque<Request>(std::make_move_iterator(out.begin()),
                             std::make_move_iterator(out.end()));
}

}  // namespace

absl::StatusOr<RunOutcome> Server::run_recovering(SourceSubmissionPtr sub, RunCallbacks callbacks) {
  auto st = std::make_shared<RecoveryState>();
  st->keep_outputs = callbacks.keep_outputs;
  std::vector<RunRecovery> recoveries;
  std::deque<Request> readmitted;
  size_t lost_before = group_->lost_workers().size();
  const size_t max_attempts = topology_.workers.size() + 1;
  for (size_t attempt = 0;; ++attempt) {
    auto attempt_sub = std::make_shared<SourceSubmission>();
    attempt_sub->source = std::make_shared<AttemptSource>(std::move(readmitted), sub->source,
                                                          !sub->materialized, st.get());
    attempt_sub->validate = sub->validate;
    attempt_sub->materialized = sub->materialized;
    attempt_sub->keep_ids = true;
    std::vector<RunCallbacks> cbs;
    cbs.push_back(attempt_callbacks(callbacks, st));
    Clock::time_point started{};
    absl::StatusOr<std::vector<RunOutcome>> out =
        run_together({this}, {attempt_sub}, std::move(cbs), &started);
    if (attempt == 0) {
      // An attempt that failed while the group set it up never started: the run's clock then
      // starts at that failure (losses recorded meanwhile come out at 0 or just before).
      st->origin = started != Clock::time_point{} ? started : Clock::now();
    } else {
      if (started != Clock::time_point{}) {
        recoveries.back().resumed_s = seconds_between(st->origin, started);
      }
      if (!st->awaiting_first_token) {
        recoveries.back().first_token_s =
            seconds_between(st->origin, st->first_token_after_recovery);
      }
    }
    const std::vector<ProcessGroup::LostWorker> lost = group_->lost_workers();
    const bool lost_one = lost.size() > lost_before;
    const absl::Status status = out.ok() ? out->front().status : out.status();
    if (status.ok() || !lost_one || attempt + 1 >= max_attempts ||
        (out.ok() && out->front().stopped)) {
      if (!out.ok()) return out.status();
      RunOutcome outcome = std::move(out->front());
      if (!outcome.status.ok()) return outcome.status;
      outcome.outputs.clear();
      for (auto& [id, o] : st->finished) outcome.outputs.push_back(std::move(o));
      if (!recoveries.empty()) {
        engine::serving::RunMetrics& m = outcome.metrics;
        m.num_requests += st->earlier_finished;
        m.num_completed_requests += st->earlier_completed;
        m.num_rejected_requests += st->earlier_rejected;
        m.num_output_tokens += st->earlier_tokens;
        m.duration_s += st->offset_s;
        m.output_tokens_per_s =
            m.duration_s > 0 ? static_cast<double>(m.num_output_tokens) / m.duration_s : 0.0;
      }
      outcome.recoveries = std::move(recoveries);
      return outcome;
    }
    // A worker was lost: the group hosts its devices on the survivors from the next attempt.
    RunRecovery r;
    std::vector<std::string> what;
    for (size_t i = lost_before; i < lost.size(); ++i) what.push_back(lost[i].description);
    r.lost = absl::StrJoin(what, "; ");
    r.detected_s = std::max(0.0, seconds_between(st->origin, lost[lost_before].detected));
    r.readmitted_requests = static_cast<int64_t>(st->taken.size());
    lost_before = lost.size();
    st->earlier_tokens += std::exchange(st->tokens, 0);
    st->earlier_finished += std::exchange(st->finished_requests, 0);
    st->earlier_completed += std::exchange(st->completed, 0);
    st->earlier_rejected += std::exchange(st->rejected, 0);
    st->offset_s = seconds_between(st->origin, Clock::now());
    readmitted = readmissions(*st);
    spdlog::warn("muflow: {}; re-admitting {} unfinished requests on the surviving processes",
                 r.lost, r.readmitted_requests);
    recoveries.push_back(std::move(r));
    st->awaiting_first_token = true;
  }
}

}  // namespace muflow::actors
