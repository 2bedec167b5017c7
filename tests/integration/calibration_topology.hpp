#pragma once
// The topology the calibration tests measure with `muflow calibrate` (actors::calibrate):
// calibration_test.cpp and sim_prediction_test.cpp.
#include <cstdint>
#include <string>

#include "invariance_fixtures.hpp"

namespace muflow::testing_fixtures {

// A small synthetic Mixtral (hidden `hidden`, expert FFN `ffn`) on 2 cpu devices wired `wiring`,
// one thread each, batches of up to 8 requests.
inline Topology calibration_topology(const std::string& wiring, int64_t hidden = 128,
                                     int64_t ffn = 256) {
  Topology cpu = topology_for(2);
  cpu.wiring = wiring;
  ModelConfig c = small_mixtral(2);
  c.hidden_size = hidden;
  c.expert_ffn = ffn;
  cpu.model.synthetic = c;
  cpu.model.seed = 3;
  cpu.threads_per_device = 1;
  cpu.scheduler.max_batch_requests = 8;
  cpu.scheduler.max_prefill_tokens = 128;
  cpu.sampling.stop_at_eos = false;
  return cpu;
}

}  // namespace muflow::testing_fixtures
