#pragma once
/// \file
/// The hand-offs of a barrier-free wiring's device from one stage run to the next queued one,
/// as `muflow calibrate` reads them from a Chrome trace (actors/calibration.hpp, host_grant;
/// issue #19 item 3): the done → device actor → grant round trip, which on the 2-core VM left
/// the cpu backend's async expert device idle ~53 µs per run (busy 90.3–90.9 %) where the sim
/// had none. Header-only and pure: calibration feeds it the runs and μ-queue depth counters of
/// its own traces (actors/stage.cpp writes both).

#include <algorithm>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace muflow::actors {

/// One stage run of a trace on its device: [start_us, end_us] in µs of the trace's clock, its
/// block and iteration (-1 in barrier-free wirings), and its stage's name ("expert b e", ...).
struct DeviceRun {
  double start_us = 0, end_us = 0;
  int64_t block = 0, iteration = 0;
  std::string name;
};

/// μ-queue depth counters of one device's stages: stage name → (µs, tokens), in time order
/// (the trace's `queue <stage>` counters).
using QueueDepths = std::map<std::string, std::vector<std::pair<double, int64_t>>, std::less<>>;

/// Appends to `out` the hand-offs among `runs` (one device's stage runs, any order; sorted
/// here by start): each pair of consecutive runs, both of iteration -1 (barrier-free), the
/// second starting at or after the first's end, whose second stage's last depth written
/// strictly before the first's end was above 0 (it waited for the device, not for input); the
/// value is the gap in µs. Strictly before, so that the first run's own outputs, which reach
/// the second stage at the first's end in the sim and just after it on cpu, count on neither
/// side. A stage without counters has no hand-offs. Never fails; O(runs · log counters).
inline void add_queued_handoffs(std::vector<DeviceRun>& runs, const QueueDepths& depths,
                                std::vector<double>& out) {
  std::sort(runs.begin(), runs.end(),
            [](const DeviceRun& a, const DeviceRun& b) { return a.start_us < b.start_us; });
  for (size_t i = 1; i < runs.size(); ++i) {
    const DeviceRun& a = runs[i - 1];
    const DeviceRun& b = runs[i];
    if (a.iteration >= 0 || b.iteration >= 0 || b.start_us < a.end_us) continue;
    const auto d = depths.find(b.name);
    if (d == depths.end()) continue;
    const auto after =
        std::lower_bound(d->second.begin(), d->second.end(), a.end_us,
                         [](const std::pair<double, int64_t>& c, double t) { return c.first < t; });
    if (after == d->second.begin() || std::prev(after)->second <= 0) continue;
    out.push_back(b.start_us - a.end_us);
  }
}

}  // namespace muflow::actors
