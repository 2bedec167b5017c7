#include "kernels/sim/cost_model.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/assert.hpp"

namespace muflow::kernels::sim {
namespace {

constexpr int kExpertFfnKernels = 3;  // see expert_ffn_cost

void check_timing(const KernelTiming& t) {
  MUFLOW_ASSERT(t.launch_overhead_s >= 0 && t.curve.e_max > 0 && t.curve.e_max <= 1 &&
                    t.curve.n_half >= 0 && t.curve.mem_eff > 0 && t.curve.mem_eff <= 1,
                "KernelTiming out of range");
}

// Parameters of the calibration model t ≈ L + max(c0 + c1·n, M(n)).
struct FitParams {
  double fixed = 0;  // L
  double c0 = 0;
  double c1 = 0;
};

double predict(const FitParams& p, double n, double mem_s) {
  return p.fixed + std::max(p.c0 + p.c1 * n, mem_s);
}

// Σ ((prediction − t) / t)², the calibration objective.
double objective(const FitParams& p, const std::vector<double>& n, const std::vector<double>& t,
                 const std::vector<double>& mem) {
  double sum = 0;
  for (size_t i = 0; i < n.size(); ++i) {
    const double r = (predict(p, n[i], mem[i]) - t[i]) / t[i];
    sum += r * r;
  }
  return sum;
}

// Solves the weighted least squares of the linear model for rows i, where rows < k are
// memory-bound (t − M = L) and rows >= k compute-bound (t = L + c0 + c1·n), over the free
// parameters in `free` (L, c0, c1; fixed ones are 0). Returns false if singular.
bool solve_split(size_t k, std::array<bool, 3> free, const std::vector<double>& n,
                 const std::vector<double>& t, const std::vector<double>& mem, FitParams* out) {
  std::array<int, 3> index{};  // parameter -> column, -1 when fixed
  int num_free = 0;
  for (int j = 0; j < 3; ++j) index[j] = free[j] ? num_free++ : -1;
  double a[3][3] = {};
  double b[3] = {};
  for (size_t i = 0; i < n.size(); ++i) {
    const double w = 1.0 / (t[i] * t[i]);
    const bool compute = i >= k;
    const double row[3] = {1.0, compute ? 1.0 : 0.0, compute ? n[i] : 0.0};
    const double y = compute ? t[i] : t[i] - mem[i];
    double x[3] = {};
    for (int j = 0; j < 3; ++j) {
      if (index[j] >= 0) x[index[j]] = row[j];
    }
    for (int r = 0; r < num_free; ++r) {
      b[r] += w * x[r] * y;
      for (int c = 0; c < num_free; ++c) a[r][c] += w * x[r] * x[c];
    }
  }
  // Gaussian elimination with partial pivoting; a pivot below 1e-12 of the diagonal scale
  // means the split does not identify the parameters.
  double scale = 0;
  for (int r = 0; r < num_free; ++r) scale = std::max(scale, std::abs(a[r][r]));
  for (int col = 0; col < num_free; ++col) {
    int pivot = col;
    for (int r = col + 1; r < num_free; ++r) {
      if (std::abs(a[r][col]) > std::abs(a[pivot][col])) pivot = r;
    }
    if (std::abs(a[pivot][col]) <= 1e-12 * scale) return false;
    std::swap(a[pivot], a[col]);
    std::swap(b[pivot], b[col]);
    for (int r = col + 1; r < num_free; ++r) {
      const double f = a[r][col] / a[col][col];
      for (int c = col; c < num_free; ++c) a[r][c] -= f * a[col][c];
      b[r] -= f * b[col];
    }
  }
  double x[3] = {};
  for (int r = num_free - 1; r >= 0; --r) {
    double s = b[r];
    for (int c = r + 1; c < num_free; ++c) s -= a[r][c] * x[c];
    x[r] = s / a[r][r];
  }
  out->fixed = index[0] >= 0 ? x[index[0]] : 0;
  out->c0 = index[1] >= 0 ? x[index[1]] : 0;
  out->c1 = index[2] >= 0 ? x[index[2]] : 0;
  return true;
}

}  // namespace

double roofline_seconds(const DeviceKind& kind, const KernelTiming& timing, Precision precision,
                        const OpCost& op, int64_t num_tokens) {
  MUFLOW_ASSERT(num_tokens >= 0, "roofline_seconds: negative num_tokens");
  MUFLOW_ASSERT(kind.peak_flops(precision) > 0 && kind.hbm_bytes_per_s > 0,
                "roofline_seconds: device kind without peak or bandwidth");
  if (num_tokens == 0) return 0;
  const double n = static_cast<double>(num_tokens);
  const EfficiencyCurve& c = timing.curve;
  // flops / (peak · e_max · n / (n + n_half)), written to stay finite for n_half = 0.
  const double compute_s = op.flops * ((n + c.n_half) / n) / (kind.peak_flops(precision) * c.e_max);
  const double memory_s = op.bytes / (kind.hbm_bytes_per_s * c.mem_eff);
  return op.num_kernels * timing.launch_overhead_s + std::max(compute_s, memory_s);
}

KernelTiming CostModel::timing(const DeviceKind& kind, Precision precision) const {
  auto it = overrides_.find({kind.name, precision});
  if (it != overrides_.end()) return it->second;
  return KernelTiming{.launch_overhead_s = kind.launch_overhead_s, .curve = kind.efficiency};
}

void CostModel::set_timing(const std::string& kind_name, Precision precision,
                           const KernelTiming& timing) {
  check_timing(timing);
  overrides_[{kind_name, precision}] = timing;
}

double CostModel::seconds(const DeviceKind& kind, Precision precision, const OpCost& op,
                          int64_t num_tokens) const {
  return roofline_seconds(kind, timing(kind, precision), precision, op, num_tokens);
}

double seconds(const DeviceKind& kind, Precision precision, const OpCost& op, int64_t num_tokens) {
  return CostModel{}.seconds(kind, precision, op, num_tokens);
}

absl::StatusOr<CalibrationFit> CostModel::calibrate_expert_ffn(const std::string& csv_path,
                                                               int64_t hidden, int64_t ffn,
                                                               FfnKind ffn_kind,
                                                               const DeviceKind& kind,
                                                               Precision precision) {
  absl::StatusOr<std::vector<KernelTimeSample>> samples = read_kernel_times_csv(csv_path);
  if (!samples.ok()) return samples.status();
  return calibrate_expert_ffn(*samples, csv_path, hidden, ffn, ffn_kind, kind, precision);
}

absl::StatusOr<CalibrationFit> CostModel::calibrate_expert_ffn(
    std::span<const KernelTimeSample> samples, const std::string& source_name, int64_t hidden,
    int64_t ffn, FfnKind ffn_kind, const DeviceKind& kind, Precision precision) {
  if (hidden <= 0 || ffn <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(source_name,
                                                   ": calibration needs positive "
                                                   "hidden and ffn, got ",
                                                   hidden, " and ", ffn));
  }
  const KernelTiming base = timing(kind, precision);
  CalibrationFit fit;

  // Rows with tokens, sorted by token count (stable: file order among equal counts).
  std::vector<KernelTimeSample> rows;
  for (const KernelTimeSample& s : samples) {
    if (s.num_tokens == 0) {
      ++fit.num_skipped;
      continue;
    }
    if (!(s.seconds > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(source_name, ":", s.line, ": time 0 for ",
                                                     s.num_tokens,
                                                     " tokens; a call with "
                                                     "tokens takes positive time"));
    }
    rows.push_back(s);
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const KernelTimeSample& a, const KernelTimeSample& b) {
                     return a.num_tokens < b.num_tokens;
                   });
  std::set<int64_t> distinct;
  for (const KernelTimeSample& s : rows) distinct.insert(s.num_tokens);
  if (distinct.size() < 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        source_name, ": calibration needs at least 3 distinct positive token counts, got ",
        distinct.size()));
  }

  std::vector<double> n, t, mem;
  for (const KernelTimeSample& s : rows) {
    n.push_back(static_cast<double>(s.num_tokens));
    t.push_back(s.seconds);
    const OpCost op = expert_ffn_cost(s.num_tokens, hidden, ffn, precision, ffn_kind);
    mem.push_back(op.bytes / (kind.hbm_bytes_per_s * base.curve.mem_eff));
  }

  // Search every memory-bound prefix k and every active set of {L >= 0, c0 >= 0}.
  constexpr std::array<std::array<bool, 3>, 4> kActiveSets = {
      {{true, true, true}, {true, false, true}, {false, true, true}, {false, false, true}}};
  FitParams best;
  double best_obj = std::numeric_limits<double>::infinity();
  for (size_t k = 0; k < n.size(); ++k) {
    for (const std::array<bool, 3>& free : kActiveSets) {
      FitParams p;
      if (!solve_split(k, free, n, t, mem, &p)) continue;
      if (p.fixed < 0 || p.c0 < 0 || !(p.c1 > 0)) continue;
      const double obj = objective(p, n, t, mem);
      if (obj < best_obj) {
        best_obj = obj;
        best = p;
      }
    }
  }
  if (!std::isfinite(best_obj)) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_name,
                     ": measured times do not grow with the number of tokens; cannot fit a "
                     "compute rate"));
  }

  const double flops_per_token = expert_ffn_cost(1, hidden, ffn, precision, ffn_kind).flops;
  const double e_max = flops_per_token / (kind.peak_flops(precision) * best.c1);
  if (e_max > 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: fitted compute rate %.3g TFLOP/s exceeds the %s peak of %s (%.3g TFLOP/s); check "
        "hidden=%d, ffn=%d, the FFN kind and the device kind",
        source_name, flops_per_token / best.c1 / 1e12, precision_name(precision), kind.name,
        kind.peak_flops(precision) / 1e12, hidden, ffn));
  }
  fit.timing = KernelTiming{
      .launch_overhead_s = best.fixed / kExpertFfnKernels,
      .curve = {.e_max = e_max, .n_half = best.c0 / best.c1, .mem_eff = base.curve.mem_eff}};
  fit.fixed_overhead_s = best.fixed;
  fit.compute_s_per_token = best.c1;
  fit.num_samples = static_cast<int64_t>(rows.size());

  // Quality, measured through the same path the simulator uses.
  double sum_abs = 0;
  double sum_sq = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const OpCost op = expert_ffn_cost(rows[i].num_tokens, hidden, ffn, precision, ffn_kind);
    const double predicted = roofline_seconds(kind, fit.timing, precision, op, rows[i].num_tokens);
    const double r = std::abs(predicted - t[i]) / t[i];
    sum_abs += r;
    sum_sq += r * r;
    if (r > fit.max_rel_error) {
      fit.max_rel_error = r;
      fit.max_rel_error_tokens = rows[i].num_tokens;
    }
    if (best.c0 + best.c1 * n[i] < mem[i]) ++fit.num_memory_bound;
  }
  fit.mean_rel_error = sum_abs / static_cast<double>(rows.size());
  fit.rms_rel_error = std::sqrt(sum_sq / static_cast<double>(rows.size()));

  set_timing(kind.name, precision, fit.timing);
  return fit;
}

}  // namespace muflow::kernels::sim
