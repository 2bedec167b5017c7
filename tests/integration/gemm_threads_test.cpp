// #16 item 4: `[cluster] threads_per_device` changes speed, never the answer. Concurrent
// requests on a synthetic Mixtral big enough that the GEMMs do split over threads (hidden 256,
// expert FFN 1024: a 4-row gate|up GEMM already has 2^21 multiply-adds, which the fixed-order
// kernel gives two threads) run with 1, 2 and 3 threads per device on one and on two devices;
// every run's tokens and prompt logits must be bitwise those of the single-threaded,
// one-request-at-a-time reference decoder.
#include <gtest/gtest.h>

#include "invariance_fixtures.hpp"

namespace muflow::testing_fixtures {
namespace {

ModelConfig threaded_mixtral() {
  ModelConfig c = small_mixtral(2);
  c.vocab_size = 512;
  c.hidden_size = 256;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.num_experts = 4;
  c.expert_ffn = 1024;
  return c;
}

TEST(GemmThreadsRun, OutputsAreBitwiseEqualForEveryThreadCountOnOneAndTwoDevices) {
  Topology base = topology_for(1);
  base.model.synthetic = threaded_mixtral();
  base.model.seed = 5;
  base.scheduler.max_batch_requests = 6;
  base.scheduler.max_prefill_tokens = 48;
  const Reference ref = reference_for(base, 8, 31);
  ASSERT_EQ(ref.tokens.size(), 8u);
  for (const int devices : {1, 2}) {
    for (const int64_t threads : {1, 2, 3}) {
      Topology t = base;
      t.devices = topology_for(devices).devices;
      t.threads_per_device = threads;
      const actors::RunOutcome out = run_topology(t, ref.requests);
      const std::string what =
          std::to_string(devices) + " device(s), " + std::to_string(threads) + " thread(s) each";
      EXPECT_GT(expect_outputs_match(out.outputs, ref.tokens, ref.logits, what), 0) << what;
    }
  }
}

}  // namespace
}  // namespace muflow::testing_fixtures
