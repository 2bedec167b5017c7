#include "kernels/sim/measured_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "kernels/assert.hpp"

namespace muflow::kernels::sim {
namespace {

constexpr char kHeader[] = "op,tokens,context,width,seconds";

struct Row {
  std::string op;
  int64_t tokens = 0;
  int64_t context = 0;
  int64_t width = 0;
  double seconds = 0;
};

absl::Status row_error(const std::string& path, int line, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ":", line, ": ", what));
}

/// Least-squares slope through the origin of y over x (0 when no x > 0), clamped at 0.
double slope_through_origin(const std::vector<std::pair<double, double>>& xy) {
  double sxx = 0, sxy = 0;
  for (const auto& [x, y] : xy) {
    sxx += x * x;
    sxy += x * y;
  }
  return sxx > 0 ? std::max(0.0, sxy / sxx) : 0.0;
}

}  // namespace

InterpolatedTimes::InterpolatedTimes(std::vector<std::pair<double, double>> points,
                                     bool signed_values)
    : signed_(signed_values) {
  MUFLOW_ASSERT(!points.empty(), "InterpolatedTimes needs at least one point");
  std::sort(points.begin(), points.end());
  for (size_t i = 0; i < points.size();) {
    size_t j = i;
    double sum = 0;
    while (j < points.size() && points[j].first == points[i].first) sum += points[j++].second;
    points_.emplace_back(points[i].first, sum / static_cast<double>(j - i));
    i = j;
  }
  if (signed_) {
    for (const auto& [x, v] : points_) floor_ = std::min(floor_, v);
  }
}

double InterpolatedTimes::at(double x) const {
  if (points_.empty()) return 0.0;
  if (points_.size() == 1 || x <= points_.front().first) return points_.front().second;
  auto hi = std::lower_bound(points_.begin(), points_.end(), std::pair{x, -1e300});
  if (hi == points_.end()) hi = points_.end() - 1;  // extrapolate from the last two points
  const auto lo = hi - 1;
  const double f = (x - lo->first) / (hi->first - lo->first);
  return std::max(signed_ ? floor_ : 0.0, lo->second + f * (hi->second - lo->second));
}

MeasuredKernels::MeasuredKernels(std::map<std::string, std::string> meta,
                                 InterpolatedTimes attention_t0, double k_decode, double k_prefill,
                                 std::map<int64_t, InterpolatedTimes> expert,
                                 InterpolatedTimes lm_head, double stage_overhead_s)
    : meta_(std::move(meta)),
      attention_t0_(std::move(attention_t0)),
      k_decode_(k_decode),
      k_prefill_(k_prefill),
      expert_(std::move(expert)),
      full_ffn_(expert_.empty() ? 0 : expert_.rbegin()->first),
      lm_head_(std::move(lm_head)),
      stage_overhead_s_(stage_overhead_s) {}

std::string MeasuredKernels::kind() const {
  auto it = meta_.find("kind");
  return it == meta_.end() ? "" : it->second;
}

double MeasuredKernels::attention_seconds(std::span<const AttentionSequence> sequences) const {
  int64_t n = 0;
  double decode_pairs = 0, prefill_time = 0;
  for (const AttentionSequence& s : sequences) {
    MUFLOW_ASSERT(s.num_tokens >= 0 && s.num_tokens <= s.context_len, "bad attention sequence");
    if (s.num_tokens == 0) continue;
    n += s.num_tokens;
    // Pairs beyond the token's own position: Σ over new tokens of (context it sees − 1).
    const double p = static_cast<double>(s.num_tokens);
    const double pairs =
        p * static_cast<double>(s.context_len) - p * (p - 1) / 2 - p;  // causal, minus self
    if (s.num_tokens == 1) {
      decode_pairs += pairs;
    } else {
      // Per prefill sequence: the measured core time at that many pairs (one sequence per
      // `prefill` row), else the fitted slope.
      prefill_time += prefill_core_.size() >= 2 ? prefill_core_.at(pairs) : k_prefill_ * pairs;
    }
  }
  if (n == 0) return 0.0;
  return attention_t0_.at(static_cast<double>(n)) + k_decode_ * decode_pairs + prefill_time;
}

namespace {

// Time at width `ffn` from tables by width: that width's row, or the widest one scaled.
double at_width(const std::map<int64_t, InterpolatedTimes>& tables, int64_t num_tokens,
                int64_t ffn) {
  if (auto it = tables.find(ffn); it != tables.end()) {
    return it->second.at(static_cast<double>(num_tokens));
  }
  const auto& [widest, table] = *tables.rbegin();
  return table.at(static_cast<double>(num_tokens)) * static_cast<double>(ffn) /
         static_cast<double>(widest);
}

}  // namespace

double MeasuredKernels::expert_seconds(int64_t num_tokens, int64_t ffn, double busy_share) const {
  if (num_tokens <= 0 || expert_.empty()) return 0.0;
  const double together = at_width(expert_, num_tokens, ffn);
  if (expert_alone_.empty()) return together;
  const double alone = at_width(expert_alone_, num_tokens, ffn);
  const double s = std::clamp(busy_share, 0.0, 1.0);
  return alone + s * (together - alone);
}

double MeasuredKernels::lm_head_seconds(int64_t num_rows) const {
  return num_rows <= 0 ? 0.0 : lm_head_.at(static_cast<double>(num_rows));
}

double MeasuredKernels::host_seconds(RunKind kind, int64_t num_tokens) const {
  if (num_tokens <= 0) return 0.0;
  auto it = host_.find(kind);
  return it == host_.end() ? 0.0 : it->second.at(static_cast<double>(num_tokens));
}

double MeasuredKernels::run_spread(RunKind kind) const {
  auto it = spread_.find(kind);
  return it == spread_.end() ? 0.0 : it->second;
}

const char* run_spread_key(MeasuredKernels::RunKind kind) {
  using K = MeasuredKernels::RunKind;
  switch (kind) {
    case K::kAttention:
      return "spread_attention";
    case K::kExpert:
      return "spread_expert";
    case K::kSampler:
      return "spread_sampler";
    default:
      return nullptr;
  }
}

bool host_time_signed(MeasuredKernels::RunKind kind) {
  using K = MeasuredKernels::RunKind;
  return kind == K::kAttention || kind == K::kExpert || kind == K::kSampler;
}

const char* host_op_name(MeasuredKernels::RunKind kind) {
  // Indexed by the enum's value, in kRunKinds' (declaration) order.
  static constexpr const char* kNames[] = {"host_attention", "host_expert",  "host_sampler",
                                           "host_dispatch",  "host_combine", "host_grant"};
  static_assert(std::size(kNames) == std::size(MeasuredKernels::kRunKinds));
  const auto i = static_cast<size_t>(kind);
  MUFLOW_ASSERT(i < std::size(kNames), "host_op_name: RunKind out of range");
  return kNames[i];
}

absl::StatusOr<MeasuredKernels> MeasuredKernels::read_csv(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::error_code ec;
  const uintmax_t bytes = std::filesystem::file_size(path, ec);
  if (!ec && bytes > static_cast<uintmax_t>(kMaxFileBytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": ", bytes, " bytes; a kernel table is at most ", kMaxFileBytes, " bytes"));
  }
  std::map<std::string, std::string> meta;
  std::vector<Row> rows;
  bool header = false;
  std::string raw;
  int line = 0;
  while (std::getline(in, raw)) {
    ++line;
    absl::string_view text = absl::StripTrailingAsciiWhitespace(raw);
    if (text.empty()) continue;
    if (text.front() == '#') {
      for (absl::string_view word : absl::StrSplit(text.substr(1), ' ', absl::SkipEmpty())) {
        const size_t eq = word.find('=');
        if (eq != absl::string_view::npos && eq > 0) {
          meta[std::string(word.substr(0, eq))] = std::string(word.substr(eq + 1));
        }
      }
      continue;
    }
    if (!header) {
      if (text != kHeader) {
        return row_error(path, line, absl::StrCat("expected the header '", kHeader, "'"));
      }
      header = true;
      continue;
    }
    if (static_cast<int64_t>(rows.size()) >= kMaxRows) {
      return row_error(path, line, absl::StrCat("more than ", kMaxRows, " rows"));
    }
    std::vector<absl::string_view> f = absl::StrSplit(text, ',');
    if (f.size() != 5) return row_error(path, line, "expected 5 fields");
    Row r;
    r.op = std::string(f[0]);
    if (!absl::SimpleAtoi(f[1], &r.tokens) || !absl::SimpleAtoi(f[2], &r.context) ||
        !absl::SimpleAtoi(f[3], &r.width) || r.tokens < 0 || r.context < 0 || r.width < 0) {
      return row_error(path, line, "tokens, context and width must be non-negative integers");
    }
    // An in-run stage row is a correction and may be negative (measured_kernels.hpp).
    const bool signed_row = std::any_of(std::begin(kRunKinds), std::end(kRunKinds), [&](RunKind k) {
      return host_time_signed(k) && r.op == host_op_name(k);
    });
    const double low = signed_row ? -kMaxRowSeconds : 0.0;
    if (!absl::SimpleAtod(f[4], &r.seconds) || !std::isfinite(r.seconds) || r.seconds < low ||
        r.seconds > kMaxRowSeconds) {
      return row_error(path, line,
                       absl::StrCat("seconds must be a number in [", low, ", ", kMaxRowSeconds, "]",
                                    signed_row ? ""
                                               : " (only host_attention, host_expert "
                                                 "and host_sampler may be negative)"));
    }
    const bool host = std::any_of(std::begin(kRunKinds), std::end(kRunKinds),
                                  [&](RunKind k) { return r.op == host_op_name(k); });
    const bool sized = r.op == "attention" || r.op == "prefill" || r.op == "expert" ||
                       r.op == "expert_alone" || r.op == "lm_head" || host;
    if (!sized && r.op != "stage_overhead") {
      return row_error(path, line,
                       absl::StrCat("unknown op '", r.op,
                                    "'; expected attention, prefill, expert, expert_alone, "
                                    "lm_head, stage_overhead, host_attention, host_expert, "
                                    "host_sampler, host_dispatch, host_combine or host_grant"));
    }
    if (sized && r.tokens < 1) return row_error(path, line, "tokens must be >= 1");
    if ((r.op == "attention" || r.op == "prefill") &&
        r.context < (r.op == "prefill" ? r.tokens : 1)) {
      return row_error(path, line, "context must be >= 1 (attention) or >= tokens (prefill)");
    }
    if ((r.op == "expert" || r.op == "expert_alone") && r.width < 1) {
      return row_error(path, line, "expert width must be >= 1");
    }
    rows.push_back(std::move(r));
  }
  if (!header) return row_error(path, line, absl::StrCat("no header '", kHeader, "'"));
  if (meta.find("kind") == meta.end()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no '# kind=...' metadata line"));
  }
  int64_t ffn = 0;
  if (auto it = meta.find("ffn");
      it == meta.end() || !absl::SimpleAtoi(it->second, &ffn) || ffn < 1) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no '# ... ffn=N' metadata"));
  }

  std::vector<std::pair<double, double>> t0, lm;
  std::map<int64_t, std::vector<std::pair<double, double>>> expert, expert_alone;
  std::map<RunKind, std::vector<std::pair<double, double>>> host;
  double overhead = 0;
  int64_t overhead_rows = 0;
  for (const Row& r : rows) {
    if (r.op == "attention" && r.context == 1) t0.emplace_back(r.tokens, r.seconds);
    if (r.op == "expert") expert[r.width].emplace_back(r.tokens, r.seconds);
    if (r.op == "expert_alone") expert_alone[r.width].emplace_back(r.tokens, r.seconds);
    if (r.op == "lm_head") lm.emplace_back(r.tokens, r.seconds);
    for (RunKind k : kRunKinds) {
      if (r.op == host_op_name(k)) host[k].emplace_back(r.tokens, r.seconds);
    }
    if (r.op == "stage_overhead") {
      overhead += r.seconds;
      ++overhead_rows;
    }
  }
  auto distinct = [](const std::vector<std::pair<double, double>>& v) {
    std::set<double> xs;
    for (const auto& p : v) xs.insert(p.first);
    return xs.size();
  };
  if (distinct(t0) < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": need attention rows at context 1 for at least 2 token counts"));
  }
  if (distinct(expert[ffn]) < 2) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": need expert rows at the model's width ",
                                                   ffn, " for at least 2 token counts"));
  }
  if (distinct(lm) < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": need lm_head rows for at least 2 token counts"));
  }
  InterpolatedTimes attention_t0(t0);
  std::vector<std::pair<double, double>> decode_xy, prefill_xy;
  for (const Row& r : rows) {
    if (r.op == "attention" && r.context > 1) {
      const double n = static_cast<double>(r.tokens);
      decode_xy.emplace_back(n * static_cast<double>(r.context - 1),
                             r.seconds - attention_t0.at(n));
    }
    if (r.op == "prefill") {
      const double p = static_cast<double>(r.tokens);
      prefill_xy.emplace_back(p * static_cast<double>(r.context) - p * (p - 1) / 2 - p,
                              r.seconds - attention_t0.at(p));
    }
  }
  std::map<int64_t, InterpolatedTimes> expert_tables;
  for (auto& [width, pts] : expert) {
    if (!pts.empty()) expert_tables.emplace(width, InterpolatedTimes(pts));
  }
  MeasuredKernels out(std::move(meta), std::move(attention_t0), slope_through_origin(decode_xy),
                      slope_through_origin(prefill_xy), std::move(expert_tables),
                      InterpolatedTimes(lm),
                      overhead_rows > 0 ? overhead / static_cast<double>(overhead_rows) : 0.0);
  if (prefill_xy.size() >= 2) {
    // The measured prefill curve (b16a1be described it but never stored it: every prefill
    // used the one slope, dominated by the longest row).
    std::vector<std::pair<double, double>> core = prefill_xy;
    core.emplace_back(0.0, 0.0);
    for (auto& [x, y] : core) y = std::max(0.0, y);
    out.prefill_core_ = InterpolatedTimes(std::move(core));
  }
  for (auto& [width, pts] : expert_alone) {
    out.expert_alone_.emplace(width, InterpolatedTimes(std::move(pts)));
  }
  if (auto it = out.meta_.find("concurrent"); it != out.meta_.end()) {
    int64_t c = 0;
    if (!absl::SimpleAtoi(it->second, &c) || c < 1 || c > 1024) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": metadata 'concurrent=", it->second,
                                                     "': expected an integer in [1, 1024]"));
    }
    out.concurrent_ = c;
  }
  for (RunKind k : kRunKinds) {
    const char* key = run_spread_key(k);
    if (key == nullptr) continue;
    auto it = out.meta_.find(key);
    if (it == out.meta_.end()) continue;
    double v = 0;
    if (!absl::SimpleAtod(it->second, &v) || !std::isfinite(v) || v < 0 || v > kMaxRunSpread) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": metadata '", key, "=", it->second,
                                                     "': expected a number in [0, ", kMaxRunSpread,
                                                     "]"));
    }
    out.spread_[k] = v;
  }
  std::map<RunKind, InterpolatedTimes> host_tables;
  for (auto& [kind, pts] : host) {
    host_tables.emplace(kind, InterpolatedTimes(std::move(pts), host_time_signed(kind)));
  }
  out.set_host_times(std::move(host_tables));
  return out;
}

}  // namespace muflow::kernels::sim
