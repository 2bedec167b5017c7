#pragma once
/// \file
/// The sim backend's device cost model (ARCHITECTURE.md §4): how long an op takes on a
/// device kind, by a roofline with a batch-size efficiency curve, optionally calibrated
/// against measured kernel times.
///
///   seconds = num_kernels · launch_overhead_s
///           + max( flops / (peak_flops(precision) · eff(n)),  bytes / (hbm_bytes_per_s · mem_eff)
///           )
///   eff(n)  = e_max · n / (n + n_half)                   (n = tokens in the call)
///
/// Since the ops' flops are proportional to n, the compute term equals
/// flops_per_token · (n + n_half) / (peak · e_max): affine in the batch, which is what the
/// measured V100 Switch-expert kernel shows above ~40 tokens (below that it is flat: launch
/// overhead plus the weight stream).
///
/// Ownership and threads: a CostModel is a plain value (copyable, no I/O except in
/// `calibrate_expert_ffn`, no globals); const member functions may be called concurrently,
/// mutating ones need external synchronisation (thread-compatible). Results are
/// deterministic: the same inputs give bitwise the same seconds on one build.

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "kernels/sim/device_kind.hpp"
#include "kernels/sim/kernel_time_csv.hpp"
#include "kernels/sim/op_cost.hpp"
#include "kernels/sim/precision.hpp"

namespace muflow::kernels::sim {

/// The timing parameters of one (device kind, precision) pair.
struct KernelTiming {
  double launch_overhead_s = 0;  ///< per kernel launch, seconds
  EfficiencyCurve curve;
};

/// Outcome of `calibrate_expert_ffn`: the fitted timing and how well it reproduces the file.
struct CalibrationFit {
  KernelTiming timing;               ///< now used by the model for (kind, precision)
  double fixed_overhead_s = 0;       ///< fitted per-call fixed time = 3 · launch_overhead_s
  double compute_s_per_token = 0;    ///< fitted slope of the compute-bound regime, seconds
  int64_t num_samples = 0;           ///< rows fitted (rows with num_tokens = 0 are skipped:
                                     ///< no kernel runs for an empty batch in muflow)
  int64_t num_skipped = 0;           ///< rows skipped (num_tokens = 0)
  int64_t num_memory_bound = 0;      ///< fitted rows the model puts in the memory-bound regime
  double mean_rel_error = 0;         ///< mean |predicted − measured| / measured over the rows
  double rms_rel_error = 0;          ///< root mean square of the same
  double max_rel_error = 0;          ///< largest of the same
  int64_t max_rel_error_tokens = 0;  ///< num_tokens of the row with the largest error
};

/// Roofline time of `op` on `kind` with explicit timing parameters; `num_tokens` is the batch
/// size for eff(n). Returns 0 for num_tokens == 0 (an empty batch launches nothing).
/// Precondition (MUFLOW_ASSERT): num_tokens >= 0, positive peaks and bandwidth.
double roofline_seconds(const DeviceKind& kind, const KernelTiming& timing, Precision precision,
                        const OpCost& op, int64_t num_tokens);

/// Per-device-kind op durations for the sim backend. Default-constructed, every kind uses its
/// datasheet values and default curve (device_kind.cpp); `set_timing` or
/// `calibrate_expert_ffn` override one (kind name, precision) pair.
class CostModel {
 public:
  CostModel() = default;

  /// Timing used for (kind, precision): the override if set, else the kind's defaults.
  KernelTiming timing(const DeviceKind& kind, Precision precision) const;

  /// Overrides the timing of (kind_name, precision). Precondition (MUFLOW_ASSERT):
  /// launch_overhead_s >= 0, e_max in (0, 1], n_half >= 0, mem_eff in (0, 1].
  void set_timing(const std::string& kind_name, Precision precision, const KernelTiming& timing);

  /// Modelled duration in seconds of `op` on one device of `kind` for a batch of
  /// `num_tokens` tokens (see the file comment); 0 for an empty batch.
  double seconds(const DeviceKind& kind, Precision precision, const OpCost& op,
                 int64_t num_tokens) const;

  /// Fits launch overhead, e_max and n_half of (kind, precision) to measured times of one
  /// expert FFN [hidden -> ffn -> hidden] of `ffn_kind` (the V100 CSV: hidden 768, ffn 3072,
  /// kTwoLayer, "V100-32GB", kF32), read with `read_kernel_times_csv`, and stores them.
  ///
  /// Model fitted, per row (n tokens, t seconds), with M(n) = bytes(n) / (hbm · mem_eff) fixed
  /// by the datasheet and the kind's mem_eff:
  ///   t ≈ L + max(c0 + c1 · n, M(n)),   L >= 0, c0 >= 0, c1 > 0
  /// minimising Σ ((prediction − t) / t)² (relative error, so small and large batches count
  /// alike). Deterministic search: for every split "first k rows (by n) memory-bound, the
  /// rest compute-bound" and every active set of the constraints, the weighted linear least
  /// squares solution is evaluated on the true (max) objective; the best is kept. Then
  /// launch_overhead_s = L / 3 (the op's 3 kernels), e_max = flops_per_token / (peak · c1),
  /// n_half = c0 / c1.
  ///
  /// Errors (messages name the file, and the line where one is at fault): those of
  /// `read_kernel_times_csv`; InvalidArgument for a row with num_tokens > 0 and time 0, fewer
  /// than 3 distinct positive token counts, times that do not grow with tokens, or a fit
  /// faster than the kind's peak (e_max > 1: wrong dims, ffn kind, precision or device).
  /// On error the model is unchanged.
  absl::StatusOr<CalibrationFit> calibrate_expert_ffn(const std::string& csv_path, int64_t hidden,
                                                      int64_t ffn, FfnKind ffn_kind,
                                                      const DeviceKind& kind, Precision precision);

  /// Same fit on samples already in memory; `source_name` prefixes error messages.
  absl::StatusOr<CalibrationFit> calibrate_expert_ffn(std::span<const KernelTimeSample> samples,
                                                      const std::string& source_name,
                                                      int64_t hidden, int64_t ffn, FfnKind ffn_kind,
                                                      const DeviceKind& kind, Precision precision);

 private:
  std::map<std::pair<std::string, Precision>, KernelTiming> overrides_;
};

/// `CostModel{}.seconds(...)`: the kind's datasheet defaults, no calibration.
double seconds(const DeviceKind& kind, Precision precision, const OpCost& op, int64_t num_tokens);

}  // namespace muflow::kernels::sim
