#pragma once
/// \file
/// The in-run host time rows of a measured-kernels table (`host_attention`, ..., `host_grant`:
/// kernels/sim/measured_kernels.hpp) as `muflow calibrate` builds them (actors/calibration.hpp,
/// issue #19 item 3): from samples of traced runs on a real backend, each a stage run's span,
/// a barrier's gap or a grant's hand-off measured minus the sim's replay of the same run,
/// pooled by kind and size bucket; then refined against replays that charge the rows so far.
///
/// Why a refinement: a row changes the replay's timeline (which runs overlap, hence the
/// memory-bandwidth share of expert runs on one host, and what the μ-queues gather), so the
/// excess over the kernel rows alone is not what the rows must add for the sim to reproduce
/// the traced runs. On the 2-core VM (bench/README.md, 2026-11-27 stop 47), sync: the first
/// refinement moved rows by 10–150 µs and the second by under 11 µs, and the calibration's
/// own replay came within 2–4 % of its traced runs' inter-token latency (`muflow calibrate`
/// prints both), against 16–28 % with the kernel rows alone. Async converges less (the
/// second refinement still moved rows by 70–100 µs) and its replay stays 9–17 % fast
/// (32–41 % with the kernel rows alone): its runs are bistable (bench/README.md).
///
/// Statistics: the sim adds run times up, so a row is a mean. The median of the right-skewed
/// excess, which calibration used before, was up to 30 µs below the mean for 4–63-token
/// expert runs in traces of the 2-core VM, where the sim ran those runs 6–9 % fast. The
/// slowest and fastest fiftieth (at least one sample each from ten up) are trimmed (a page
/// fault, a preemption), not a tenth: the excess has a long tail that runs pay too, and
/// trimming a tenth left the calibration's own replays 3.2–3.4 % fast on inter-token latency
/// (three calibrations) against 2.3–2.8 % with a fiftieth (two).
///
/// Signs: stage rows (attention, expert, sampler) are corrections and keep their sign
/// (host_time_signed): the kernel rows time every device running the same call, and 1-token
/// expert and attention runs took 25–69 µs less in runs on the 2-core VM than they say.
/// Barrier and grant rows are gaps, clamped at 0.
///
/// Not thread-safe; calibration builds one on its thread.

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kernels/sim/measured_kernels.hpp"

namespace muflow::kernels::sim {

/// The middle element of `v` sorted (the upper median for an even size). v not empty
/// (asserted).
double median(std::vector<double> v);

/// The mean of `v` without its k lowest and k highest elements, k = max(1, ⌊size/50⌋) from 10
/// elements up, else 0. v not empty (asserted).
double trimmed_mean(std::vector<double> v);

/// The size bucket of a sample of `n` >= 1 tokens (stage runs) or rows (barriers): each size
/// up to 8 its own bucket (decode sizes, where samples are many and the kernel rows do not lie
/// on one line: a cpu expert's 1- and 2-token runs take another path than 3 and 4), then one
/// bucket per power of two (9–15, 16–31, ...). Increasing in n. n < 1 gives bucket 0.
int host_time_bucket(int64_t n);

/// One `host_<kind>,n,0,0,s` row of the CSV (9 significant digits; clamped at 0 unless
/// host_time_signed(kind)).
std::string host_time_row(MeasuredKernels::RunKind kind, int64_t n, double seconds);

/// The run spread of one stage kind (the `# spread_<kind>=σ` metadata of measured_kernels.hpp)
/// from `log_ratios`: per size bucket, log(measured span / modeled span) of matched runs, the
/// modeled span charging the host rows. Each bucket with at least HostTimeTable::kMinSamples
/// finite samples gives the deviations from its trimmed mean (what the rows model is the mean;
/// the spread is what is left); σ is the root mean square of the pooled deviations without
/// the largest fiftieth by size (at least one from ten up: a preemption of milliseconds is not
/// the runs' spread), clamped to [0, MeasuredKernels::kMaxRunSpread]; 0 without such a bucket.
/// A trimmed RMS: for normal noise about 0.94 of its standard deviation (the trim), so the sim
/// errs on the side of less spread than measured.
double run_spread_of(const std::map<int, std::vector<double>>& log_ratios);

/// The host_* rows of one calibration: one (size, seconds) row per (kind, bucket), built from
/// the excess over the kernel rows (round 0) and moved by refine(). Seconds of host time per
/// stage run, barrier or grant; size in tokens (stage runs) or rows (barriers), 1 for grants.
class HostTimeTable {
 public:
  using Kind = MeasuredKernels::RunKind;
  /// Samples by (kind, host_time_bucket): (tokens or rows, seconds measured minus modeled).
  using Samples = std::map<std::pair<Kind, int>, std::vector<std::pair<int64_t, double>>>;
  /// Fewest samples that make a row (or move one) unless the constructor is given another
  /// count; also the fewest that make a bucket of run_spread_of.
  static constexpr size_t kMinSamples = 5;

  /// Round 0, from the excess over the kernel rows alone: one row per (kind, bucket) with at
  /// least `min_samples` samples (0 is taken as 1), at the bucket's median size, of
  /// the samples' trimmed mean (clamped at 0 unless host_time_signed). A bucket with fewer has
  /// no row, so the sim interpolates its neighbours' rows there (measured_kernels.hpp).
  /// Calibration asks for two samples per traced run (actors/calibration.cpp): its traced runs
  /// repeat one closed batch, scheduled alike each time, so a bucket with fewer holds the same
  /// run or two over and over, and their excess is not the size's.
  explicit HostTimeTable(const Samples& excess, size_t min_samples = kMinSamples);

  /// One refinement, from the residuals (measured minus modeled) of a replay that charged
  /// rows(): each row whose (kind, bucket) has at least the constructor's `min_samples`
  /// residuals moves by their trimmed mean (clamped at 0 unless host_time_signed); rows without
  /// enough residuals stay. Buckets without a row stay without one. Returns the largest move,
  /// seconds (>= 0).
  double refine(const Samples& residual);

  /// The rows as CSV lines, by kind then size.
  std::string rows() const;
  size_t size() const { return rows_.size(); }
  /// The row of (kind, bucket): (size, seconds); nullptr without one.
  const std::pair<int64_t, double>* row(Kind kind, int bucket) const;

 private:
  size_t min_samples_;
  std::map<std::pair<Kind, int>, std::pair<int64_t, double>> rows_;
};

}  // namespace muflow::kernels::sim
