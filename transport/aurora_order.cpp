#include "transport/aurora_order.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/assert.hpp"

// Why serving a plan in planned-start order keeps every transfer on time.
//
// `BigSwitchNetwork` serves a list without backfill: a transfer starts at
// max(ready, egress(src) free, ingress(dst) free), where "free" is the finish of the last
// transfer served before it on that port. Take a conflict-free plan (on each port the
// planned intervals [start, start + seconds) are disjoint) and serve it sorted by planned
// start, all ready at r, from ports idle at r. Claim: every transfer finishes no later than
// planned. Induction over the list: the transfers served before x on x's two ports have
// planned starts <= x's, so (disjoint intervals on a shared port) planned finishes <= x's
// planned start, and by induction they really finish by then; so x starts no later than
// planned and, holding the ports for the same `seconds`, finishes no later than planned
// (float addition is monotone, so this holds for the computed times too). Hence the
// makespan is at most the plan's. Both orders below are such plans.
//
// Preemptive plan (Aurora Appx. A, with Birkhoff-von Neumann for the permutations). Let
// T[i][j] be the latency-free holding time of i -> j and L the largest row or column sum
// of T (= port_load_lower_bound with zero latency). Pad T with dummy time so that every row
// and column sums to L (Appx. A step 1: the deficits of rows and of columns have the same
// total, so a north-west-corner fill does it). A non-negative matrix with equal row and
// column sums L > 0 has a perfect matching on its positive entries (Hall / Koenig), so we
// can repeatedly take one, subtract its smallest entry w from each matched entry (which
// zeroes at least one entry and keeps all sums equal) and call it a round of length w.
// Round k occupies [S_k, S_k + w_k) with S_k the sum of the earlier rounds' lengths, each
// device sends to one device and receives from one device in it, and the rounds end at
// L. Each matched pair's real (non-dummy) traffic is put first in its slot. That plan is
// conflict-free and ends by L, so served in round order the makespan is <= L, and no order
// beats L: it equals L.
//
// Exactness. When every pair with traffic has the same path bandwidth the decomposition
// runs on the byte matrix itself (times are bytes / one rate), all in int64: every chunk
// holds whole bytes and the plan is exact. Otherwise it runs on integer ticks of L / 2^50
// and chunk boundaries are rounded to whole bytes per pair (cumulatively, so the chunks of
// a pair sum exactly to its bytes); a chunk may then exceed its slot by under one byte's
// time, which can delay later chunks of a chain: at most one byte's time per round.

namespace muflow::transport {
namespace {

constexpr int64_t kTicksPerBound = int64_t{1} << 50;

void check_shape(const BigSwitchNetwork& network, const TrafficMatrix& bytes) {
  MUFLOW_ASSERT(bytes.size() == static_cast<size_t>(network.num_devices()),
                "traffic matrix size differs from the network");
  for (const auto& row : bytes) {
    MUFLOW_ASSERT(row.size() == bytes.size(), "traffic matrix is not square");
    for (int64_t b : row) {
      MUFLOW_ASSERT(b >= 0, "traffic matrix entry is negative");
    }
  }
}

/// One planned, real piece of the preemptive plan: `units` of pair (src, dst) starting at
/// planned time `start` (units).
struct Piece {
  int64_t start = 0;
  int32_t src = 0;
  int32_t dst = 0;
  int64_t units = 0;
};

/// Kuhn's augmenting path from free row `i` over positive entries of `padded`.
bool augment(size_t i, const std::vector<std::vector<int64_t>>& padded,
             std::vector<int32_t>& row_match, std::vector<int32_t>& col_match,
             std::vector<char>& seen) {
  for (size_t j = 0; j < padded.size(); ++j) {
    if (padded[i][j] <= 0 || seen[j] != 0) {
      continue;
    }
    seen[j] = 1;
    if (col_match[j] < 0 ||
        augment(static_cast<size_t>(col_match[j]), padded, row_match, col_match, seen)) {
      row_match[i] = static_cast<int32_t>(j);
      col_match[j] = static_cast<int32_t>(i);
      return true;
    }
  }
  return false;
}

/// Birkhoff-von Neumann plan of `units` ([n][n], >= 0, zero diagonal): real pieces in
/// planned-start order, consecutive pieces of one pair merged. Exact integer arithmetic.
std::vector<Piece> decompose(const std::vector<std::vector<int64_t>>& units, int64_t& num_rounds) {
  const size_t n = units.size();
  num_rounds = 0;
  std::vector<int64_t> row_sum(n, 0);
  std::vector<int64_t> col_sum(n, 0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      MUFLOW_ASSERT(!__builtin_add_overflow(row_sum[i], units[i][j], &row_sum[i]) &&
                        !__builtin_add_overflow(col_sum[j], units[i][j], &col_sum[j]),
                    "traffic matrix row or column sum overflows int64");
    }
  }
  int64_t bound = 0;
  for (size_t i = 0; i < n; ++i) {
    bound = std::max({bound, row_sum[i], col_sum[i]});
  }
  if (bound == 0) {
    return {};
  }

  // Step 1 of Appx. A: dummy traffic X so that every row and column of D + X sums to L.
  std::vector<std::vector<int64_t>> padded = units;
  {
    size_t i = 0;
    size_t j = 0;
    while (i < n && j < n) {
      const int64_t row_deficit = bound - row_sum[i];
      const int64_t col_deficit = bound - col_sum[j];
      if (row_deficit == 0) {
        ++i;
        continue;
      }
      if (col_deficit == 0) {
        ++j;
        continue;
      }
      const int64_t x = std::min(row_deficit, col_deficit);
      padded[i][j] += x;
      row_sum[i] += x;
      col_sum[j] += x;
    }
  }

  std::vector<std::vector<int64_t>> real_left = units;
  std::vector<int32_t> row_match(n, -1);
  std::vector<int32_t> col_match(n, -1);
  std::vector<char> seen(n, 0);
  std::vector<int64_t> last_piece(n * n, -1);  // index into pieces of the pair's last piece
  std::vector<Piece> pieces;
  int64_t start = 0;
  while (start < bound) {
    for (size_t i = 0; i < n; ++i) {
      if (row_match[i] < 0) {
        std::fill(seen.begin(), seen.end(), 0);
        const bool found = augment(i, padded, row_match, col_match, seen);
        MUFLOW_ASSERT(found, "no perfect matching in a matrix with equal row/column sums");
      }
    }
    int64_t w = std::numeric_limits<int64_t>::max();
    for (size_t i = 0; i < n; ++i) {
      w = std::min(w, padded[i][static_cast<size_t>(row_match[i])]);
    }
    MUFLOW_ASSERT(w > 0 && w <= bound - start, "round length out of range");
    for (size_t i = 0; i < n; ++i) {
      const auto j = static_cast<size_t>(row_match[i]);
      const int64_t take = std::min(w, real_left[i][j]);
      if (take > 0) {
        int64_t& last = last_piece[i * n + j];
        if (last >= 0 &&
            pieces[static_cast<size_t>(last)].start + pieces[static_cast<size_t>(last)].units ==
                start) {
          pieces[static_cast<size_t>(last)].units += take;  // the pair runs on: one chunk
        } else {
          last = static_cast<int64_t>(pieces.size());
          pieces.push_back({start, static_cast<int32_t>(i), static_cast<int32_t>(j), take});
        }
        real_left[i][j] -= take;
      }
      padded[i][j] -= w;
      if (padded[i][j] == 0) {
        row_match[i] = -1;
        col_match[j] = -1;
      }
    }
    start += w;
    ++num_rounds;
  }
  return pieces;
}

/// Planned interval of one unsplit transfer.
struct Slot {
  double start = 0.0;
  double seconds = 0.0;
  size_t job = 0;
};

struct Job {
  int32_t src = 0;
  int32_t dst = 0;
  int64_t bytes = 0;
  double seconds = 0.0;
};

/// Aurora Algorithm 1's priority: repeatedly the device with the largest remaining load
/// (max of its egress and ingress holding time over unplaced transfers; ties: lowest index),
/// then its unplaced transfers, busiest partner port first, then longest (ties: (src, dst)).
/// (The paper leaves the order at a device free; on the random set of the unit test this
/// choice gave a smaller mean gap to the bound than longest-first or shortest-first.)
std::vector<size_t> algorithm1_priority(const std::vector<Job>& jobs, size_t n) {
  std::vector<char> placed(jobs.size(), 0);
  std::vector<size_t> order;
  order.reserve(jobs.size());
  while (order.size() < jobs.size()) {
    std::vector<double> egress(n, 0.0);
    std::vector<double> ingress(n, 0.0);
    for (size_t k = 0; k < jobs.size(); ++k) {
      if (placed[k] == 0) {
        egress[static_cast<size_t>(jobs[k].src)] += jobs[k].seconds;
        ingress[static_cast<size_t>(jobs[k].dst)] += jobs[k].seconds;
      }
    }
    size_t bottleneck = 0;
    double load = -1.0;
    for (size_t d = 0; d < n; ++d) {
      if (std::max(egress[d], ingress[d]) > load) {
        load = std::max(egress[d], ingress[d]);
        bottleneck = d;
      }
    }
    std::vector<size_t> mine;
    for (size_t k = 0; k < jobs.size(); ++k) {
      if (placed[k] == 0 && (static_cast<size_t>(jobs[k].src) == bottleneck ||
                             static_cast<size_t>(jobs[k].dst) == bottleneck)) {
        mine.push_back(k);
        placed[k] = 1;
      }
    }
    // A device with zero remaining load but unplaced zero-second transfers still has some.
    MUFLOW_ASSERT(!mine.empty() || load == 0.0, "bottleneck device has no transfer");
    if (mine.empty()) {
      for (size_t k = 0; k < jobs.size(); ++k) {
        if (placed[k] == 0) {
          mine.push_back(k);
          placed[k] = 1;
        }
      }
    }
    // The partner port's own remaining load (its ingress for a send, its egress for a
    // receive): the busier partner is the harder to fit later, so it goes first.
    const auto partner_load = [&](size_t k) {
      return static_cast<size_t>(jobs[k].src) == bottleneck
                 ? ingress[static_cast<size_t>(jobs[k].dst)]
                 : egress[static_cast<size_t>(jobs[k].src)];
    };
    std::stable_sort(mine.begin(), mine.end(), [&](size_t a, size_t b) {
      return std::pair{partner_load(a), jobs[a].seconds} >
             std::pair{partner_load(b), jobs[b].seconds};
    });
    order.insert(order.end(), mine.begin(), mine.end());
  }
  return order;
}

/// Earliest t >= 0 such that [t, t + seconds) meets no interval of `a` or `b` (each sorted,
/// disjoint, as (start, end)).
double earliest_fit(const std::vector<std::pair<double, double>>& a,
                    const std::vector<std::pair<double, double>>& b, double seconds) {
  double t = 0.0;
  for (bool moved = true; moved;) {
    moved = false;
    for (const auto* port : {&a, &b}) {
      const auto it = std::partition_point(port->begin(), port->end(),
                                           [t](const auto& iv) { return iv.second <= t; });
      if (it != port->end() && it->first < t + seconds) {
        t = it->second;
        moved = true;
      }
    }
  }
  return t;
}

void insert_interval(std::vector<std::pair<double, double>>& port, double start, double end) {
  const auto it = std::lower_bound(port.begin(), port.end(), std::pair{start, end});
  port.insert(it, {start, end});
}

/// Algorithm 1 proper: each transfer in priority order at its earliest conflict-free time.
std::vector<Slot> plan_insertion(const std::vector<Job>& jobs, const std::vector<size_t>& order,
                                 size_t n) {
  std::vector<std::vector<std::pair<double, double>>> egress(n);
  std::vector<std::vector<std::pair<double, double>>> ingress(n);
  std::vector<Slot> slots;
  slots.reserve(order.size());
  for (size_t k : order) {
    const Job& job = jobs[k];
    auto& e = egress[static_cast<size_t>(job.src)];
    auto& in = ingress[static_cast<size_t>(job.dst)];
    const double t = earliest_fit(e, in, job.seconds);
    if (job.seconds > 0.0) {
      insert_interval(e, t, t + job.seconds);
      insert_interval(in, t, t + job.seconds);
    }
    slots.push_back({t, job.seconds, k});
  }
  return slots;
}

/// Dense priority list schedule: at each event time, every waiting transfer whose two ports
/// are free starts, in priority order. The last transfer (i, j) to finish found one of its
/// ports busy at all earlier times, so it ends by load(i egress) + load(j ingress).
std::vector<Slot> plan_dense(const std::vector<Job>& jobs, const std::vector<size_t>& order,
                             size_t n) {
  std::vector<double> egress_free(n, 0.0);
  std::vector<double> ingress_free(n, 0.0);
  std::vector<size_t> waiting = order;
  std::vector<Slot> slots;
  slots.reserve(order.size());
  double t = 0.0;
  while (!waiting.empty()) {
    std::vector<size_t> still;
    for (size_t k : waiting) {
      const Job& job = jobs[k];
      double& e = egress_free[static_cast<size_t>(job.src)];
      double& in = ingress_free[static_cast<size_t>(job.dst)];
      if (e <= t && in <= t) {
        slots.push_back({t, job.seconds, k});
        e = t + job.seconds;
        in = t + job.seconds;
      } else {
        still.push_back(k);
      }
    }
    waiting = std::move(still);
    if (waiting.empty()) {
      break;
    }
    double next = std::numeric_limits<double>::infinity();
    for (size_t d = 0; d < n; ++d) {
      for (double f : {egress_free[d], ingress_free[d]}) {
        if (f > t) {
          next = std::min(next, f);
        }
      }
    }
    MUFLOW_ASSERT(next > t && std::isfinite(next), "dense schedule made no progress");
    t = next;
  }
  return slots;
}

double plan_end(const std::vector<Slot>& slots) {
  double end = 0.0;
  for (const Slot& s : slots) {
    end = std::max(end, s.start + s.seconds);
  }
  return end;
}

OrderPlan finish_plan(const BigSwitchNetwork& network, const TrafficMatrix& bytes,
                      std::vector<Transfer> transfers, double ready_s, int64_t num_rounds) {
  OrderPlan plan;
  plan.predicted_s = makespan(network.finish_times(transfers, ready_s), ready_s);
  plan.lower_bound_s = port_load_lower_bound(network, bytes);
  plan.num_chunks = static_cast<int64_t>(transfers.size());
  plan.num_rounds = num_rounds;
  plan.transfers = std::move(transfers);
  return plan;
}

}  // namespace

OrderPlan order_aurora_preemptive(const BigSwitchNetwork& network, const TrafficMatrix& bytes,
                                  double ready_s) {
  check_shape(network, bytes);
  const size_t n = bytes.size();
  const auto dev = [](size_t d) { return static_cast<int32_t>(d); };

  // Uniform when every pair with traffic has one finite path bandwidth: work in bytes.
  double rate = 0.0;
  bool uniform = true;
  std::vector<std::vector<double>> seconds(n, std::vector<double>(n, 0.0));
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      if (i == j || bytes[i][j] == 0) {
        continue;
      }
      const double bw = network.path(dev(i), dev(j)).bandwidth_bytes_per_s;
      seconds[i][j] = static_cast<double>(bytes[i][j]) / bw;  // 0 on an ideal (infinite) link
      if (rate == 0.0) {
        rate = bw;
      }
      uniform = uniform && bw == rate && std::isfinite(bw);
    }
  }

  std::vector<std::vector<int64_t>> units(n, std::vector<int64_t>(n, 0));
  if (uniform) {
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < n; ++j) {
        units[i][j] = i == j ? 0 : bytes[i][j];
      }
    }
  } else {
    double bound_s = 0.0;
    for (size_t i = 0; i < n; ++i) {
      double row = 0.0;
      double col = 0.0;
      for (size_t j = 0; j < n; ++j) {
        row += seconds[i][j];
        col += seconds[j][i];
      }
      bound_s = std::max({bound_s, row, col});
    }
    if (bound_s > 0.0) {
      const double tick = bound_s / static_cast<double>(kTicksPerBound);
      for (size_t i = 0; i < n; ++i) {
        for (size_t j = 0; j < n; ++j) {
          units[i][j] = std::llround(seconds[i][j] / tick);
        }
      }
    }
  }

  // Pairs that take no planned time (ideal links, or under half a tick) go first, whole.
  std::vector<Transfer> transfers;
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      if (i != j && bytes[i][j] > 0 && units[i][j] == 0) {
        transfers.push_back({dev(i), dev(j), bytes[i][j], ready_s});
      }
    }
  }

  int64_t num_rounds = 0;
  const std::vector<Piece> pieces = decompose(units, num_rounds);
  std::vector<int64_t> done_units(n * n, 0);  // real units already emitted per pair
  std::vector<int64_t> done_bytes(n * n, 0);
  for (const Piece& p : pieces) {
    const auto i = static_cast<size_t>(p.src);
    const auto j = static_cast<size_t>(p.dst);
    const int64_t total_units = units[i][j];
    const int64_t total_bytes = bytes[i][j];
    int64_t& du = done_units[i * n + j];
    du += p.units;
    // Byte boundary nearest to du / total_units of the pair; equals du when units are bytes.
    const auto boundary = static_cast<int64_t>(
        (2 * static_cast<__int128>(total_bytes) * du + total_units) / (2 * total_units));
    const int64_t chunk = boundary - done_bytes[i * n + j];
    done_bytes[i * n + j] = boundary;
    if (chunk > 0) {
      transfers.push_back({p.src, p.dst, chunk, ready_s});
    }
  }
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      MUFLOW_ASSERT(units[i][j] == 0 || done_bytes[i * n + j] == bytes[i][j],
                    "preemptive order lost bytes of a pair");
    }
  }
  return finish_plan(network, bytes, std::move(transfers), ready_s, num_rounds);
}

OrderPlan order_aurora_unsplit(const BigSwitchNetwork& network, const TrafficMatrix& bytes,
                               double ready_s) {
  check_shape(network, bytes);
  const size_t n = bytes.size();
  std::vector<Job> jobs;
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      if (i != j && bytes[i][j] > 0) {
        const auto src = static_cast<int32_t>(i);
        const auto dst = static_cast<int32_t>(j);
        jobs.push_back({src, dst, bytes[i][j], network.transfer_seconds(src, dst, bytes[i][j])});
      }
    }
  }
  const std::vector<size_t> priority = algorithm1_priority(jobs, n);
  std::vector<Slot> slots = plan_insertion(jobs, priority, n);
  std::vector<Slot> dense = plan_dense(jobs, priority, n);
  if (plan_end(dense) < plan_end(slots)) {
    slots = std::move(dense);
  }
  // Sort by planned start; ties keep priority order (slots were made in that order).
  std::stable_sort(slots.begin(), slots.end(),
                   [](const Slot& a, const Slot& b) { return a.start < b.start; });
  std::vector<Transfer> transfers;
  transfers.reserve(slots.size());
  for (const Slot& s : slots) {
    const Job& job = jobs[s.job];
    transfers.push_back({job.src, job.dst, job.bytes, ready_s});
  }
  return finish_plan(network, bytes, std::move(transfers), ready_s, 0);
}

OrderPlan order_aurora(const BigSwitchNetwork& network, const TrafficMatrix& bytes,
                       double ready_s) {
  OrderPlan unsplit = order_aurora_unsplit(network, bytes, ready_s);
  // Already at the bound (common on real traffic): chunking cannot help, skip its O(D^4).
  if (unsplit.predicted_s <= unsplit.lower_bound_s) return unsplit;
  OrderPlan chunked = order_aurora_preemptive(network, bytes, ready_s);
  return chunked.predicted_s < unsplit.predicted_s ? std::move(chunked) : std::move(unsplit);
}

absl::StatusOr<A2aOrder> parse_a2a_order(std::string_view name) {
  for (A2aOrder order : {A2aOrder::kRowMajor, A2aOrder::kRandom, A2aOrder::kSjf, A2aOrder::kAurora,
                         A2aOrder::kAuroraChunked, A2aOrder::kAuroraUnsplit}) {
    if (name == a2a_order_name(order)) {
      return order;
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown all-to-all order '", std::string(name),
                   "'; accepted: row_major, random, sjf, aurora, aurora_chunked, aurora_unsplit"));
}

std::string_view a2a_order_name(A2aOrder order) {
  switch (order) {
    case A2aOrder::kRowMajor:
      return "row_major";
    case A2aOrder::kRandom:
      return "random";
    case A2aOrder::kSjf:
      return "sjf";
    case A2aOrder::kAurora:
      return "aurora";
    case A2aOrder::kAuroraChunked:
      return "aurora_chunked";
    case A2aOrder::kAuroraUnsplit:
      return "aurora_unsplit";
  }
  MUFLOW_ASSERT(false, "unknown A2aOrder value");
  return "";
}

std::vector<Transfer> order_all_to_all(A2aOrder order, const BigSwitchNetwork& network,
                                       const TrafficMatrix& bytes, double ready_s, uint64_t seed) {
  check_shape(network, bytes);
  switch (order) {
    case A2aOrder::kRowMajor:
    case A2aOrder::kRandom:
    case A2aOrder::kSjf:
      return order_all_to_all(order, network, sparse_traffic(bytes), ready_s, seed);
    case A2aOrder::kAurora:
      return order_aurora(network, bytes, ready_s).transfers;
    case A2aOrder::kAuroraChunked:
      return order_aurora_preemptive(network, bytes, ready_s).transfers;
    case A2aOrder::kAuroraUnsplit:
      return order_aurora_unsplit(network, bytes, ready_s).transfers;
  }
  MUFLOW_ASSERT(false, "unknown A2aOrder value");
  return {};
}

std::vector<Transfer> order_all_to_all(A2aOrder order, const BigSwitchNetwork& network,
                                       const SparseTraffic& traffic, double ready_s,
                                       uint64_t seed) {
  MUFLOW_ASSERT(traffic.num_devices == network.num_devices(),
                "traffic matrix size differs from the network");
  // The order functions check `traffic` (well_formed) themselves: once per all-to-all.
  switch (order) {
    case A2aOrder::kRowMajor:
      return order_row_major(traffic, ready_s);
    case A2aOrder::kRandom:
      return order_random(traffic, seed, ready_s);
    case A2aOrder::kSjf:
      return order_sjf(traffic, ready_s);
    case A2aOrder::kAurora:
    case A2aOrder::kAuroraChunked:
    case A2aOrder::kAuroraUnsplit:
      MUFLOW_ASSERT(well_formed(traffic), "sparse traffic is not well formed");
      return order_all_to_all(order, network, dense_traffic(traffic), ready_s, seed);
  }
  MUFLOW_ASSERT(false, "unknown A2aOrder value");
  return {};
}

}  // namespace muflow::transport
