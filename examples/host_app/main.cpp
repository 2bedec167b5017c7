// host_app: a C++ program that embeds muflow through its installed CMake package. Opens an
// engine from a topology file, submits prompts from two threads, streams their text, cancels
// one mid-stream, waits, and prints the metrics. Usage: host_app TOPOLOGY.toml
#include <atomic>
#include <cstdio>
#include <muflow/muflow.hpp>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s TOPOLOGY.toml\n", argv[0]);
    return 2;
  }
  muflow::Result<std::unique_ptr<muflow::Engine>> opened = muflow::Engine::open(argv[1]);
  if (!opened.ok()) {
    std::fprintf(stderr, "%s\n", opened.status().to_string().c_str());  // e.g. NOT_FOUND: ...
    return 1;
  }
  muflow::Engine& engine = **opened;
  std::mutex out;  // stdout is written by callbacks (an engine thread) and by the submitters
  std::atomic<int> failed{0};

  // Callbacks of one request; `cancel_after` > 0 cancels it after that many tokens.
  auto callbacks = [&](int cancel_after) {
    muflow::StreamCallbacks cb;
    cb.on_token = [&, cancel_after, n = 0](muflow::RequestId id, muflow::TokenId,
                                           std::string_view piece) mutable {
      std::lock_guard<std::mutex> lock(out);
      std::printf("[%lld]%.*s", static_cast<long long>(id), static_cast<int>(piece.size()),
                  piece.data());
      if (++n == cancel_after) engine.cancel(id);  // callbacks may cancel and submit
    };
    cb.on_finish = [&](const muflow::Completion& c) {
      std::lock_guard<std::mutex> lock(out);
      std::printf("\nrequest %lld: %s after %zu tokens (TTFT %.1f ms):%s\n",
                  static_cast<long long>(c.id), muflow::finish_reason_name(c.reason),
                  c.tokens.size(), c.time_to_first_token_ms, c.text.c_str());
      if (!c.status.ok()) ++failed;
    };
    return cb;
  };
  auto submit_two = [&](std::string first, std::string second, int cancel_second_after) {
    const std::pair<std::string, int> requests[] = {{first, 0}, {second, cancel_second_after}};
    for (const auto& [prompt, cancel_after] : requests) {
      muflow::Result<muflow::RequestId> id =
          engine.submit(prompt, {/*max_tokens=*/24}, callbacks(cancel_after));
      if (!id.ok()) {
        ++failed;
        std::fprintf(stderr, "%s\n", id.status().to_string().c_str());
      }
    }
  };
  std::thread a(submit_two, "In the beginning God created", "The LORD is my shepherd;", 0);
  std::thread b(submit_two, "And God said, Let there be", "Blessed are the meek:", 4);
  a.join();
  b.join();

  muflow::Result<muflow::Metrics> m = engine.wait();  // every request has ended
  if (!m.ok()) {
    std::fprintf(stderr, "%s\n", m.status().to_string().c_str());
    return 1;
  }
  std::printf(
      "%lld requests (%lld completed), %lld tokens, %.0f tokens/s, TTFT mean %.2f ms "
      "p99 %.2f ms, ITL mean %.2f ms p99 %.2f ms\n",
      static_cast<long long>(m->num_requests), static_cast<long long>(m->num_completed_requests),
      static_cast<long long>(m->num_output_tokens), m->output_tokens_per_s, m->ttft.mean_ms,
      m->ttft.p99_ms, m->itl.mean_ms, m->itl.p99_ms);
  return failed == 0 && engine.shutdown().ok() ? 0 : 1;
}
