#include "transport/fair_share.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "kernels/assert.hpp"

namespace muflow::transport {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

FairShareLinks::FairShareLinks(std::vector<double> capacity_bytes_per_s)
    : capacity_(std::move(capacity_bytes_per_s)), committed_(capacity_.size()) {
  for (double c : capacity_) {
    MUFLOW_ASSERT(c > 0.0, "fair-share resource capacity must be > 0");
  }
}

double FairShareLinks::residual(int32_t resource, double t_s) const {
  const double cap = capacity_[static_cast<size_t>(resource)];
  return std::isinf(cap) ? cap : std::max(0.0, cap - committed_rate(resource, t_s));
}

double FairShareLinks::committed_rate(int32_t resource, double t_s) const {
  MUFLOW_ASSERT(resource >= 0 && resource < num_resources(), "resource index out of range");
  double used = 0.0;
  for (const Segment& s : committed_[static_cast<size_t>(resource)]) {
    if (s.start_s <= t_s && t_s < s.end_s) used += s.rate;
  }
  return used;
}

double FairShareLinks::next_change(int32_t resource, double t_s) const {
  double next = kInf;
  for (const Segment& s : committed_[static_cast<size_t>(resource)]) {
    if (s.start_s > t_s) {
      next = std::min(next, s.start_s);
    } else if (s.end_s > t_s) {
      next = std::min(next, s.end_s);
    }
  }
  return next;
}

std::vector<double> FairShareLinks::solve(const std::vector<FairShareFlow>& flows,
                                          std::vector<std::vector<Segment>>* profile) const {
  const size_t num_flows = flows.size();
  const size_t num_res = capacity_.size();
  for (const FairShareFlow& f : flows) {
    MUFLOW_ASSERT(f.up >= 0 && static_cast<size_t>(f.up) < num_res && f.down >= 0 &&
                      static_cast<size_t>(f.down) < num_res,
                  "fair-share flow uses a resource out of range");
    MUFLOW_ASSERT(f.bytes > 0.0 && std::isfinite(f.bytes), "fair-share flow bytes must be > 0");
    MUFLOW_ASSERT(std::isfinite(f.ready_s) && f.latency_s >= 0.0,
                  "fair-share flow ready time or latency invalid");
  }
  std::vector<double> finish(num_flows, 0.0);
  if (num_flows == 0) return finish;
  if (profile != nullptr) profile->assign(num_flows, {});

  // Flows in order of readiness (stable: ties keep input order, so the solve is a function
  // of the call alone).
  std::vector<size_t> by_ready(num_flows);
  std::iota(by_ready.begin(), by_ready.end(), size_t{0});
  std::stable_sort(by_ready.begin(), by_ready.end(),
                   [&](size_t a, size_t b) { return flows[a].ready_s < flows[b].ready_s; });

  std::vector<double> remaining(num_flows);
  for (size_t f = 0; f < num_flows; ++f) remaining[f] = flows[f].bytes;
  std::vector<double> rate(num_flows, 0.0);
  std::vector<char> frozen(num_flows, 0);
  // Scratch per resource, valid for the resources the active flows touch.
  std::vector<double> cap(num_res, 0.0);
  std::vector<int64_t> unfrozen(num_res, 0);
  std::vector<std::vector<size_t>> through(num_res);
  std::vector<int32_t> touched;

  std::vector<size_t> active;
  size_t next = 0;
  double t = flows[by_ready[0]].ready_s;
  while (next < num_flows || !active.empty()) {
    while (next < num_flows && flows[by_ready[next]].ready_s <= t) {
      active.push_back(by_ready[next++]);
    }
    if (active.empty()) {
      t = flows[by_ready[next]].ready_s;
      continue;
    }
    // Progressive filling over the active flows (ties: the lowest resource index first).
    for (int32_t r : touched) through[static_cast<size_t>(r)].clear();
    touched.clear();
    for (size_t f : active) {
      frozen[f] = 0;
      for (int32_t r : {flows[f].up, flows[f].down}) {
        auto& list = through[static_cast<size_t>(r)];
        if (list.empty()) touched.push_back(r);
        if (list.empty() || list.back() != f) list.push_back(f);  // up == down: once
      }
    }
    std::sort(touched.begin(), touched.end());
    for (int32_t r : touched) {
      cap[static_cast<size_t>(r)] = residual(r, t);
      unfrozen[static_cast<size_t>(r)] =
          static_cast<int64_t>(through[static_cast<size_t>(r)].size());
    }
    for (;;) {
      int32_t best = -1;
      double best_share = kInf;
      for (int32_t r : touched) {
        const auto ri = static_cast<size_t>(r);
        if (unfrozen[ri] == 0) continue;
        const double share = cap[ri] / static_cast<double>(unfrozen[ri]);
        if (best < 0 || share < best_share) {
          best = r;
          best_share = share;
        }
      }
      if (best < 0) break;
      for (size_t f : through[static_cast<size_t>(best)]) {
        if (frozen[f] != 0) continue;
        frozen[f] = 1;
        rate[f] = best_share;
        for (int32_t r : {flows[f].up, flows[f].down}) {
          const auto ri = static_cast<size_t>(r);
          if (r == flows[f].down && flows[f].up == flows[f].down) break;  // one resource
          --unfrozen[ri];
          if (!std::isinf(best_share)) cap[ri] = std::max(0.0, cap[ri] - best_share);
        }
      }
    }
    // The next event: a flow becomes ready, drains, or committed use changes.
    double t_next = next < num_flows ? flows[by_ready[next]].ready_s : kInf;
    for (size_t f : active) {
      if (rate[f] > 0.0) t_next = std::min(t_next, t + remaining[f] / rate[f]);
    }
    for (int32_t r : touched) t_next = std::min(t_next, next_change(r, t));
    // t_next == t only when a flow drains at once (infinite rate), so every event ends a
    // flow, admits one or passes a commitment change: the loop terminates.
    MUFLOW_ASSERT(!std::isinf(t_next), "fair-share flows can never drain");
    const double dt = t_next - t;
    size_t kept = 0;
    for (size_t f : active) {
      bool done = false;
      if (rate[f] > 0.0) {
        done = t + remaining[f] / rate[f] <= t_next;  // the same expression as t_next's
        if (profile != nullptr && dt > 0.0 && !std::isinf(rate[f])) {
          std::vector<Segment>& segs = (*profile)[f];
          if (!segs.empty() && segs.back().end_s == t && segs.back().rate == rate[f]) {
            segs.back().end_s = t_next;
          } else {
            segs.push_back({t, t_next, rate[f]});
          }
        }
        remaining[f] = done ? 0.0 : remaining[f] - rate[f] * dt;
      }
      if (done) {
        finish[f] = t_next + flows[f].latency_s;
      } else {
        active[kept++] = f;
      }
    }
    active.resize(kept);
    t = t_next;
  }
  return finish;
}

std::vector<double> FairShareLinks::finish_times(const std::vector<FairShareFlow>& flows) const {
  return solve(flows, nullptr);
}

std::vector<double> FairShareLinks::schedule(const std::vector<FairShareFlow>& flows) {
  if (flows.empty()) return {};
  double earliest = kInf;
  for (const FairShareFlow& f : flows) earliest = std::min(earliest, f.ready_s);
  for (std::vector<Segment>& segs : committed_) {
    segs.erase(std::remove_if(segs.begin(), segs.end(),
                              [&](const Segment& s) { return s.end_s <= earliest; }),
               segs.end());
  }
  std::vector<std::vector<Segment>> profile;
  std::vector<double> finish = solve(flows, &profile);
  for (size_t f = 0; f < flows.size(); ++f) {
    for (const Segment& s : profile[f]) {
      committed_[static_cast<size_t>(flows[f].up)].push_back(s);
      if (flows[f].down != flows[f].up) committed_[static_cast<size_t>(flows[f].down)].push_back(s);
    }
  }
  return finish;
}

void FairShareLinks::reset() {
  for (std::vector<Segment>& segs : committed_) segs.clear();
}

}  // namespace muflow::transport
