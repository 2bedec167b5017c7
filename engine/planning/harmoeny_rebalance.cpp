#include "engine/planning/harmoeny_rebalance.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/assert.hpp"

namespace muflow::engine::planning {
namespace {

// Index of the largest (or smallest) value; ties go to the lowest index.
int64_t argmax(const std::vector<int64_t>& v) {
  return std::max_element(v.begin(), v.end()) - v.begin();  // first maximum
}
int64_t argmin(const std::vector<int64_t>& v) {
  return std::min_element(v.begin(), v.end()) - v.begin();  // first minimum
}

// Upper bound on the number of transfers either loop can make. Every transfer moves
// min(entry, capacity) tokens with entry = S[src, e, g_max] and capacity = avg − load[g_min]
// ≥ q ≥ 1, so it either empties an entry of a donor's column or fills g_min up to avg. A rank
// only ever gains load up to avg and donors are above avg, so a rank that has received never
// donates again and a donor's column only shrinks: at most G·E entries per donor column can be
// emptied, and each rank fills at most once (a rank at avg cannot take q ≥ 1 more).
int64_t max_moves(int64_t num_ranks, int64_t num_experts) {
  return num_ranks * (num_ranks * num_experts + 1);
}

absl::Status validate(const RebalanceSchedule& s, int64_t q) {
  if (q < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("harmoeny rebalance: threshold q must be >= 1 token, got ", q,
                     " (q <= 0 lets Algorithm 2 move 0 tokens forever)"));
  }
  if (s.num_ranks < 1 || s.num_experts < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "harmoeny rebalance: schedule needs >= 1 rank and >= 1 expert, got num_ranks=", s.num_ranks,
        " num_experts=", s.num_experts));
  }
  if (s.num_ranks > (int64_t{1} << 20) || s.num_experts > (int64_t{1} << 20) ||
      static_cast<uint64_t>(s.tokens.size()) !=
          static_cast<uint64_t>(s.num_ranks * s.num_experts * s.num_ranks)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "harmoeny rebalance: schedule has ", s.tokens.size(), " entries, expected num_ranks * ",
        "num_experts * num_ranks = ", s.num_ranks, " * ", s.num_experts, " * ", s.num_ranks));
  }
  int64_t total = 0;
  for (size_t i = 0; i < s.tokens.size(); ++i) {
    if (s.tokens[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("harmoeny rebalance: schedule entry ", i,
                                                     " is negative (", s.tokens[i], ")"));
    }
    if (s.tokens[i] > std::numeric_limits<int64_t>::max() - total) {
      return absl::InvalidArgumentError("harmoeny rebalance: total token count overflows int64");
    }
    total += s.tokens[i];
  }
  return absl::OkStatus();
}

RebalanceResult start(const RebalanceSchedule& initial) {
  RebalanceResult r;
  r.schedule = initial;       // paper line 4: S ← S_initial
  r.loads = initial.loads();  // line 6: t_g ← S.sum(dim=(0,1))
  const int64_t total = std::accumulate(r.loads.begin(), r.loads.end(), int64_t{0});
  r.avg_tokens = total / initial.num_ranks;  // line 5: t_avg ← ⌊S.sum() / |G|⌋
  return r;
}

bool any_above(const std::vector<int64_t>& loads, int64_t avg) {
  return std::any_of(loads.begin(), loads.end(), [avg](int64_t l) { return l > avg; });
}

void transfer(RebalanceResult& r, int64_t src, int64_t e, int64_t from, int64_t to,
              int64_t num_tokens) {
  MUFLOW_ASSERT(num_tokens >= 1, "a rebalancing transfer must move at least one token");
  MUFLOW_ASSERT(r.schedule.at(src, e, from) >= num_tokens, "transfer exceeds the entry");
  r.schedule.at(src, e, from) -= num_tokens;
  r.schedule.at(src, e, to) += num_tokens;
  r.loads[static_cast<size_t>(from)] -= num_tokens;
  r.loads[static_cast<size_t>(to)] += num_tokens;
  MUFLOW_ASSERT(r.loads[static_cast<size_t>(to)] <= r.avg_tokens, "receiver exceeds average");
  ++r.num_moves;
  r.tokens_moved += num_tokens;
  MUFLOW_ASSERT(r.num_moves <= max_moves(r.schedule.num_ranks, r.schedule.num_experts),
                "rebalancing exceeded its move bound");
}

}  // namespace

std::vector<int64_t> RebalanceSchedule::loads() const {
  std::vector<int64_t> out(static_cast<size_t>(num_ranks), 0);
  for (int64_t src = 0; src < num_ranks; ++src) {
    for (int64_t e = 0; e < num_experts; ++e) {
      for (int64_t dst = 0; dst < num_ranks; ++dst)
        out[static_cast<size_t>(dst)] += at(src, e, dst);
    }
  }
  return out;
}

absl::StatusOr<RebalanceSchedule> harmoeny_initial_schedule(
    const std::vector<std::vector<int64_t>>& counts, const std::vector<int64_t>& expert_home) {
  if (counts.empty() || expert_home.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("harmoeny_initial_schedule: need >= 1 rank and >= 1 expert, got counts with ",
                     counts.size(), " rows and expert_home with ", expert_home.size(), " entries"));
  }
  RebalanceSchedule s;
  s.num_ranks = static_cast<int64_t>(counts.size());
  s.num_experts = static_cast<int64_t>(expert_home.size());
  for (size_t src = 0; src < counts.size(); ++src) {
    if (counts[src].size() != expert_home.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("harmoeny_initial_schedule: counts row ", src, " has ", counts[src].size(),
                       " experts, expert_home has ", expert_home.size()));
    }
  }
  for (size_t e = 0; e < expert_home.size(); ++e) {
    if (expert_home[e] < 0 || expert_home[e] >= s.num_ranks) {
      return absl::InvalidArgumentError(absl::StrCat("harmoeny_initial_schedule: expert ", e,
                                                     " has home rank ", expert_home[e],
                                                     ", outside [0, ", s.num_ranks, ")"));
    }
  }
  if (s.num_ranks > (int64_t{1} << 20) || s.num_experts > (int64_t{1} << 20)) {
    return absl::InvalidArgumentError("harmoeny_initial_schedule: more than 2^20 ranks or experts");
  }
  s.tokens.assign(static_cast<size_t>(s.num_ranks * s.num_experts * s.num_ranks), 0);
  for (int64_t src = 0; src < s.num_ranks; ++src) {
    for (int64_t e = 0; e < s.num_experts; ++e) {
      const int64_t c = counts[static_cast<size_t>(src)][static_cast<size_t>(e)];
      if (c < 0) {
        return absl::InvalidArgumentError(absl::StrCat("harmoeny_initial_schedule: counts[", src,
                                                       "][", e, "] is negative (", c, ")"));
      }
      s.at(src, e, expert_home[static_cast<size_t>(e)]) = c;
    }
  }
  if (absl::Status st = validate(s, 1); !st.ok()) return st;  // total overflow check
  return s;
}

absl::StatusOr<RebalanceResult> harmoeny_rebalance_paper(const RebalanceSchedule& initial,
                                                         int64_t q) {
  if (absl::Status st = validate(initial, q); !st.ok()) return st;
  RebalanceResult r = start(initial);  // lines 4–6
  const int64_t G = initial.num_ranks;
  const int64_t E = initial.num_experts;
  RebalanceSchedule& S = r.schedule;
  std::vector<int64_t>& t_g = r.loads;
  const int64_t t_avg = r.avg_tokens;
  for (int64_t iter = 0;; ++iter) {
    MUFLOW_ASSERT(iter <= max_moves(G, E), "Algorithm 2 loop exceeded its iteration bound");
    // line 8: while any(t_g > t_avg)
    if (!any_above(t_g, t_avg)) {
      r.stop = RebalanceStop::kBalanced;
      return r;
    }
    // line 9: g_max ← argmax(t_g)
    const int64_t g_max = argmax(t_g);
    // line 10: g_from ← argmax(sum(S[:, :, g_max], dim=1)), the source sending most to g_max
    std::vector<int64_t> from_src(static_cast<size_t>(G), 0);
    for (int64_t src = 0; src < G; ++src) {
      for (int64_t e = 0; e < E; ++e) from_src[static_cast<size_t>(src)] += S.at(src, e, g_max);
    }
    const int64_t g_from = argmax(from_src);
    // line 11: e_max ← argmax(S[g_from, :, g_max])
    int64_t e_max = 0;
    for (int64_t e = 1; e < E; ++e) {
      if (S.at(g_from, e, g_max) > S.at(g_from, e_max, g_max)) e_max = e;
    }
    // line 13: t_move ← S[g_from, e_max, g_max]
    const int64_t t_move = S.at(g_from, e_max, g_max);
    // lines 14–15: if t_move < q then return S (insufficient tokens to move)
    if (t_move < q) {
      r.stop = RebalanceStop::kBelowThreshold;
      return r;
    }
    // line 17: g_min ← argmin(t_g)
    const int64_t g_min = argmin(t_g);
    // lines 19–20: if g_min = g_max or t_g[g_min] + q > t_avg then return S (no feasible transfer)
    if (g_min == g_max) {
      r.stop = RebalanceStop::kSameRank;
      return r;
    }
    if (t_g[static_cast<size_t>(g_min)] + q > t_avg) {
      r.stop = RebalanceStop::kNoReceiver;
      return r;
    }
    // line 22: t_s ← min(t_move, t_avg − t_g[g_min]); lines 23–26: update S and t_g
    const int64_t t_s = std::min(t_move, t_avg - t_g[static_cast<size_t>(g_min)]);
    transfer(r, g_from, e_max, g_max, g_min, t_s);
  }
}

absl::StatusOr<RebalanceResult> harmoeny_rebalance_code(const RebalanceSchedule& initial,
                                                        int64_t q) {
  if (absl::Status st = validate(initial, q); !st.ok()) return st;
  RebalanceResult r = start(initial);
  const int64_t G = initial.num_ranks;
  const int64_t E = initial.num_experts;
  RebalanceSchedule& S = r.schedule;
  std::vector<int64_t>& load = r.loads;
  const int64_t avg = r.avg_tokens;
  std::vector<int64_t> senders(static_cast<size_t>(G));
  for (int64_t iter = 0;; ++iter) {
    // Each iteration makes at least one transfer (capacity ≥ q ≥ 1 and e has ≥ q tokens on
    // g_max), so the move bound also bounds the iterations.
    MUFLOW_ASSERT(iter <= max_moves(G, E), "code-variant loop exceeded its iteration bound");
    if (!any_above(load, avg)) {  // while some GPU is above average
      r.stop = RebalanceStop::kBalanced;
      return r;
    }
    const int64_t g_max = argmax(load);
    const int64_t g_min = argmin(load);
    if (g_min == g_max) {
      r.stop = RebalanceStop::kSameRank;
      return r;
    }
    if (load[static_cast<size_t>(g_min)] + q > avg) {
      r.stop = RebalanceStop::kNoReceiver;
      return r;
    }
    // The expert with the most tokens on g_max, summed over sources (ties: lowest expert).
    int64_t e_hot = 0;
    int64_t e_hot_tokens = -1;
    for (int64_t e = 0; e < E; ++e) {
      int64_t sum = 0;
      for (int64_t src = 0; src < G; ++src) sum += S.at(src, e, g_max);
      if (sum > e_hot_tokens) {
        e_hot = e;
        e_hot_tokens = sum;
      }
    }
    if (e_hot_tokens < q) {
      r.stop = RebalanceStop::kBelowThreshold;
      return r;
    }
    // Largest senders first (stable sort keeps the lowest src first among equals).
    std::iota(senders.begin(), senders.end(), int64_t{0});
    std::stable_sort(senders.begin(), senders.end(), [&](int64_t a, int64_t b) {
      return S.at(a, e_hot, g_max) > S.at(b, e_hot, g_max);
    });
    // HarMoEny's public code (sacs-epfl/HarMoEny 563b5a6, src/harmonymoe/scheduler.py,
    // schedule_harmony): move while g_max is still above the average AND g_min has room; a
    // move is min(sender's tokens, room), so the last one may take g_max below avg.
    int64_t overloaded = load[static_cast<size_t>(g_max)] - avg;
    for (int64_t src : senders) {
      const int64_t capacity = avg - load[static_cast<size_t>(g_min)];
      const int64_t have = S.at(src, e_hot, g_max);
      if (overloaded <= 0 || capacity <= 0) break;  // g_max at avg, or g_min full
      if (have <= 0) break;                         // e has no tokens left on g_max
      const int64_t send = std::min(have, capacity);
      transfer(r, src, e_hot, g_max, g_min, send);
      overloaded -= send;
    }
  }
}

absl::StatusOr<RebalanceResult> harmoeny_rebalance_paper(
    const std::vector<std::vector<int64_t>>& counts, const std::vector<int64_t>& expert_home,
    int64_t q) {
  absl::StatusOr<RebalanceSchedule> s = harmoeny_initial_schedule(counts, expert_home);
  if (!s.ok()) return s.status();
  return harmoeny_rebalance_paper(*s, q);
}

absl::StatusOr<RebalanceResult> harmoeny_rebalance_code(
    const std::vector<std::vector<int64_t>>& counts, const std::vector<int64_t>& expert_home,
    int64_t q) {
  absl::StatusOr<RebalanceSchedule> s = harmoeny_initial_schedule(counts, expert_home);
  if (!s.ok()) return s.status();
  return harmoeny_rebalance_code(*s, q);
}

absl::StatusOr<int64_t> harmoeny_default_q(double flops_per_s, double host_bytes_per_s,
                                           double dtype_bytes) {
  for (double v : {flops_per_s, host_bytes_per_s, dtype_bytes}) {
    if (!std::isfinite(v) || v <= 0.0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "harmoeny_default_q: FLOP/s, host bytes/s and dtype bytes must be finite and > 0, got ",
          flops_per_s, ", ", host_bytes_per_s, ", ", dtype_bytes));
    }
  }
  const double bound = flops_per_s * dtype_bytes / (2.0 * host_bytes_per_s);  // Eq. 4
  if (!(bound < 9.0e18)) {
    return absl::InvalidArgumentError(
        absl::StrCat("harmoeny_default_q: q bound ", bound, " tokens does not fit in int64"));
  }
  // Smallest integer strictly greater than the bound (Eq. 4 is a strict inequality).
  return std::max<int64_t>(1, static_cast<int64_t>(std::floor(bound)) + 1);
}

}  // namespace muflow::engine::planning
