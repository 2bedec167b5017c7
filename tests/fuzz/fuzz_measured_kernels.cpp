// Fuzzes the measured stage-kernel CSV that `muflow calibrate` writes and `[cost] kernels`
// reads (kernels/sim/measured_kernels.hpp): MeasuredKernels::read_csv, then, when it parses,
// every lookup the sim makes (attention for decode and prefill sequences, experts at the
// file's width and half of it, alone and beside busy neighbours, the LM head, in-run host
// times). Besides sanitizer findings it aborts when the mean stage overhead is not finite
// and non-negative or `concurrent` < 1 (both bounded by the parser); the lookups' values are
// not checked (an extrapolated fit may go negative).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "kernels/sim/measured_kernels.hpp"
#include "tests/fuzz/fuzz_input_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace sim = muflow::kernels::sim;
  const std::string path = muflow::fuzz::write_input("kernels.csv", data, size);
  absl::StatusOr<sim::MeasuredKernels> m = sim::MeasuredKernels::read_csv(path);
  if (!m.ok()) return 0;
  int64_t ffn = 1;
  if (auto it = m->meta().find("ffn"); it != m->meta().end()) {
    (void)absl::SimpleAtoi(it->second, &ffn);
  }
  const std::vector<sim::AttentionSequence> seqs = {{1, 40}, {16, 16}, {3, 1000}};
  (void)m->attention_seconds(seqs);
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{100000}}) {
    for (double share : {0.0, 0.5, 1.0}) {
      (void)m->expert_seconds(n, ffn, share);
      (void)m->expert_seconds(n, std::max<int64_t>(1, ffn / 2), share);
    }
    (void)m->lm_head_seconds(n);
    for (auto k :
         {sim::MeasuredKernels::RunKind::kAttention, sim::MeasuredKernels::RunKind::kExpert,
          sim::MeasuredKernels::RunKind::kSampler}) {
      (void)m->host_seconds(k, n);
    }
  }
  // Row times are bounded (kMaxRowSeconds), so their mean is finite and non-negative.
  if (!std::isfinite(m->stage_overhead_s()) || m->stage_overhead_s() < 0) std::abort();
  if (m->concurrent() < 1) std::abort();
  return 0;
}
