#include "http/client/http_load.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <numeric>
#include <system_error>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace muflow::http::client {
namespace {

constexpr size_t kPrestartedWorkers = 16;
// Latest arrival accepted (about 116 days, as actors::Server): keeps the clock arithmetic
// far from overflow.
constexpr double kMaxArrivalS = 1e7;

absl::Status validate(const std::vector<engine::serving::Request>& requests,
                      const LoadOptions& options) {
  if (options.model.empty()) {
    return absl::InvalidArgumentError(
        "no model name for the requests (give one, or let the "
        "server's GET /v1/models name it)");
  }
  if (options.max_concurrency < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "max_concurrency must be >= 0 (0 = no cap), got %d", options.max_concurrency));
  }
  for (const engine::serving::Request& r : requests) {
    if (r.prompt.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat("request %d: empty prompt", r.id));
    }
    if (r.max_new_tokens < 1) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "request %d: max_new_tokens must be >= 1, got %d", r.id, r.max_new_tokens));
    }
    if (!(r.arrival_s >= 0.0 && r.arrival_s <= kMaxArrivalS)) {  // also rejects NaN
      return absl::InvalidArgumentError(absl::StrFormat(
          "request %d: arrival time %g s is outside [0, %g] s", r.id, r.arrival_s, kMaxArrivalS));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LoadRun> run_http_load(const BaseUrl& url,
                                      const std::vector<engine::serving::Request>& requests,
                                      const LoadOptions& options, const RecordSink& on_record) {
  if (absl::Status s = validate(requests, options); !s.ok()) return s;
  const auto origin = std::chrono::steady_clock::now();
  // Checks the client options once, before anything is sent.
  if (auto probe = OpenAiStreamClient::create(url, options.client, origin); !probe.ok()) {
    return probe.status();
  }
  const size_t n = requests.size();
  LoadRun run;
  run.records.resize(n);
  for (size_t i = 0; i < n; ++i) {
    RequestRecord& rec = run.records[i];
    rec.id = requests[i].id;
    rec.scheduled_s = requests[i].arrival_s;
    rec.num_prompt_tokens = static_cast<int64_t>(requests[i].prompt.size());
    rec.max_tokens = requests[i].max_new_tokens;
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return requests[a].arrival_s < requests[b].arrival_s;
  });
  const int64_t cap_option = options.max_concurrency > 0
                                 ? std::min(options.max_concurrency, kMaxInFlightRequests)
                                 : kMaxInFlightRequests;
  const size_t cap = std::min(static_cast<size_t>(cap_option), n);

  // Shared between the scheduling thread and the workers; everything below `mu` is guarded
  // by it (records[i] is written by the worker that ran request i, under it).
  std::mutex mu;
  std::condition_variable cv;
  std::deque<size_t> queue;  // arrived, not yet taken by a worker
  int64_t idle = 0;          // workers waiting for a request
  int64_t in_flight = 0;
  bool closing = false;

  auto worker = [&]() {
    absl::StatusOr<std::unique_ptr<OpenAiStreamClient>> client =
        OpenAiStreamClient::create(url, options.client, origin);
    for (;;) {
      size_t i = 0;
      {
        std::unique_lock<std::mutex> lock(mu);
        ++idle;
        cv.wait(lock, [&] { return !queue.empty() || closing; });
        --idle;
        if (queue.empty()) return;  // closing and drained
        i = queue.front();
        queue.pop_front();
        ++in_flight;
        run.max_in_flight = std::max(run.max_in_flight, in_flight);
      }
      CompletionResult result;
      if (client.ok()) {
        CompletionRequest cr;
        cr.model = options.model;
        cr.prompt = requests[i].prompt;
        cr.max_tokens = requests[i].max_new_tokens;
        cr.ignore_eos = options.ignore_eos;
        cr.temperature = options.temperature;
        result = (*client)->complete(cr);
      } else {  // not expected: the same options were accepted above
        result.error = std::string(client.status().message());
        result.failure = FailureKind::kConnect;
      }
      std::lock_guard<std::mutex> lock(mu);
      --in_flight;
      run.records[i].result = std::move(result);
      if (on_record) on_record(run.records[i]);
    }
  };

  std::vector<std::thread> workers;
  absl::Status spawn_error;
  // A few workers up front, so the first arrivals do not wait for a thread to start; more
  // are started when a request arrives and none is idle.
  try {
    while (workers.size() < std::min<size_t>(cap, kPrestartedWorkers)) workers.emplace_back(worker);
  } catch (const std::system_error& e) {
    spawn_error =
        absl::InternalError(absl::StrFormat("cannot start a worker thread: %s", e.what()));
  }
  for (size_t i : order) {
    if (!spawn_error.ok()) break;
    std::this_thread::sleep_until(origin +
                                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                      std::chrono::duration<double>(requests[i].arrival_s)));
    std::lock_guard<std::mutex> lock(mu);
    queue.push_back(i);
    if (static_cast<int64_t>(queue.size()) > idle && workers.size() < cap) {
      try {
        workers.emplace_back(worker);
      } catch (const std::system_error& e) {
        spawn_error = absl::InternalError(
            absl::StrFormat("cannot start a worker thread (%d running): %s; lower max_concurrency",
                            workers.size(), e.what()));
        break;
      }
    }
    cv.notify_one();
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    closing = true;
  }
  cv.notify_all();
  for (std::thread& t : workers) t.join();
  run.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - origin).count();
  if (!spawn_error.ok()) return spawn_error;
  return run;
}

}  // namespace muflow::http::client
