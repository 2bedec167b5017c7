#include "engine/topology/topology_override.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/model/model_limits.hpp"

namespace muflow::engine::topology {
namespace {

absl::Status bad(const std::string& key, const std::string& value, const char* expected) {
  return absl::InvalidArgumentError(
      absl::StrFormat("--sweep %s=%s: expected %s", key, value, expected));
}

absl::Status set_double(const std::string& key, const std::string& v, double* out, double lo,
                        double hi) {
  double x = 0;
  if (!absl::SimpleAtod(v, &x) || !std::isfinite(x) || x < lo || x > hi) {
    return bad(key, v, absl::StrFormat("a number in [%g, %g]", lo, hi).c_str());
  }
  *out = x;
  return absl::OkStatus();
}

absl::Status set_int(const std::string& key, const std::string& v, int64_t* out, int64_t lo,
                     int64_t hi = std::numeric_limits<int64_t>::max()) {
  int64_t x = 0;
  if (!absl::SimpleAtoi(v, &x) || x < lo || x > hi) {
    return bad(key, v,
               (hi == std::numeric_limits<int64_t>::max()
                    ? absl::StrFormat("an integer >= %d", lo)
                    : absl::StrFormat("an integer in [%d, %d]", lo, hi))
                   .c_str());
  }
  *out = x;
  return absl::OkStatus();
}

// "LO:HI" (inclusive token range, 1 <= LO <= HI <= max: the parser's bound of the same key).
absl::Status set_range(const std::string& key, const std::string& v, int64_t* lo, int64_t* hi,
                       int64_t max) {
  const size_t colon = v.find(':');
  int64_t a = 0, b = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(v.substr(0, colon), &a) ||
      !absl::SimpleAtoi(v.substr(colon + 1), &b) || a < 1 || b < a || b > max) {
    return bad(key, v, absl::StrFormat("LO:HI with 1 <= LO <= HI <= %d", max).c_str());
  }
  *lo = a;
  *hi = b;
  return absl::OkStatus();
}

// The [cost] keys model the sim's host time; the parser refuses [cost] on other backends (a cpu
// or cuda run measures its time), and so does a sweep.
absl::Status sim_only(const Topology& t, const std::string& key, const std::string& value) {
  if (t.backend == "sim") return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrFormat("--sweep %s=%s: [cost] applies to backend = \"sim\" only (this topology's "
                      "backend is \"%s\")",
                      key, value, t.backend));
}

using Setter = std::function<absl::Status(Topology&, const std::string&, const std::string&)>;

const std::map<std::string, Setter>& setters() {
  static const std::map<std::string, Setter> table = {
      {"router.kind",
       [](Topology& t, const std::string& k, const std::string& v) {
         t.router.kind = v;
         return absl::OkStatus();
       }},
      {"router.skew",
       [](Topology& t, const std::string& k, const std::string& v) {
         return set_double(k, v, &t.router.skew, 0, 1);
       }},
      {"router.skew_mode",
       [](Topology& t, const std::string& k, const std::string& v) {
         if (v != "code" && v != "share") return bad(k, v, "code or share");
         t.router.skew_mode = v;
         return absl::OkStatus();
       }},
      {"router.hot_experts",
       [](Topology& t, const std::string& k, const std::string& v) {
         return set_int(k, v, &t.router.hot_experts, 0);
       }},
      {"router.seed",
       [](Topology& t, const std::string& k, const std::string& v) {
         int64_t s = 0;
         absl::Status st = set_int(k, v, &s, 0);
         t.router.seed = static_cast<uint64_t>(s);
         return st;
       }},
      {"workload.rate",
       [](Topology& t, const std::string& k, const std::string& v) {
         if (absl::Status s = set_double(k, v, &t.workload.rate_per_s, 1e-9, 1e12); !s.ok()) {
           return s;
         }
         // As the parser: arrivals must fall within 10^6 s on average.
         if (static_cast<double>(t.workload.num_requests) / t.workload.rate_per_s > 1e6) {
           return bad(k, v, "at least num_requests / 10^6 requests per second");
         }
         return absl::OkStatus();
       }},
      {"workload.num_requests",
       [](Topology& t, const std::string& k, const std::string& v) {
         return set_int(k, v, &t.workload.num_requests, 1, kMaxWorkloadRequests);
       }},
      {"scheduler.policy",
       [](Topology& t, const std::string& k, const std::string& v) {
         t.scheduler.policy = v;
         return absl::OkStatus();
       }},
      {"scheduler.defrag_lookahead",
       [](Topology& t, const std::string& k, const std::string& v) {
         return set_int(k, v, &t.scheduler.defrag_lookahead, 0, 1024);
       }},
      {"scheduler.defrag_decay",
       [](Topology& t, const std::string& k, const std::string& v) {
         return set_double(k, v, &t.scheduler.defrag_decay, 0, 1);
       }},
      {"scheduler.max_batch_requests",
       [](Topology& t, const std::string& k, const std::string& v) {
         return set_int(k, v, &t.scheduler.max_batch_requests, 1);
       }},
      {"scheduler.max_queued_requests",
       [](Topology& t, const std::string& k, const std::string& v) {
         return set_int(k, v, &t.scheduler.max_queued_requests, 0, kMaxWorkloadRequests);
       }},
      {"scheduler.max_prefill_tokens",
       [](Topology& t, const std::string& k, const std::string& v) {
         return set_int(k, v, &t.scheduler.max_prefill_tokens, 1, kMaxBatchTokens);
       }},
      {"scheduler.max_batch_tokens",
       [](Topology& t, const std::string& k, const std::string& v) {
         return set_int(k, v, &t.scheduler.max_batch_tokens, 1, kMaxBatchTokens);
       }},
      {"scheduler.hold_min_tokens",
       [](Topology& t, const std::string& k, const std::string& v) {
         return set_int(k, v, &t.scheduler.hold_min_tokens, 0);
       }},
      {"scheduler.merge",
       [](Topology& t, const std::string& k, const std::string& v) {
         if (v != "request" && v != "wave") return bad(k, v, "request or wave");
         t.scheduler.merge = v;
         return absl::OkStatus();
       }},
      {"scheduler.hold_max_ms",
       [](Topology& t, const std::string& k, const std::string& v) {
         return set_double(k, v, &t.scheduler.hold_max_ms, 0, 1e4);
       }},
      {"placement.attention_devices",
       [](Topology& t, const std::string& k, const std::string& v) {
         if (absl::Status s = set_int(k, v, &t.attention_devices, 1); !s.ok()) return s;
         if (t.attention_devices >= static_cast<int64_t>(t.devices.size())) {
           return bad(k, v, "fewer than the cluster's devices");
         }
         return absl::OkStatus();
       }},
      {"placement.replicas",
       [](Topology& t, const std::string& k, const std::string& v) {
         if (absl::Status s = set_int(k, v, &t.expert_replicas, 0); !s.ok()) return s;
         if (t.expert_replicas > kMaxExpertReplicas) return bad(k, v, "at most 4096");
         t.replica_experts.clear();
         return absl::OkStatus();
       }},
      {"cluster.num_devices",
       [](Topology& t, const std::string& k, const std::string& v) {
         int64_t n = 0;
         if (absl::Status s = set_int(k, v, &n, 1, kMaxDevices); !s.ok()) return s;
         const DeviceSpec first = t.devices.empty() ? DeviceSpec{} : t.devices.front();
         t.devices.clear();
         for (int64_t d = 0; d < n; ++d) {
           t.devices.push_back({absl::StrFormat("%s%d", first.kind, d), first.kind,
                                t.devices_per_node > 0
                                    ? absl::StrFormat("node%d", d / t.devices_per_node)
                                    : first.node});
         }
         return absl::OkStatus();
       }},
      {"cluster.threads_per_device",
       [](Topology& t, const std::string& k, const std::string& v) {
         return set_int(k, v, &t.threads_per_device, 0, kMaxThreadsPerDevice);
       }},
      {"model.topk",
       [](Topology& t, const std::string& k, const std::string& v) {
         if (!t.model.synthetic) return bad(k, v, "a topology whose model gives dims or a preset");
         int64_t topk = 0;
         if (absl::Status s = set_int(k, v, &topk, 1); !s.ok()) return s;
         if (topk > t.model.synthetic->num_experts) return bad(k, v, "at most the expert count");
         t.model.synthetic->num_topk = topk;
         return absl::OkStatus();
       }},
      {"workload.input",
       [](Topology& t, const std::string& k, const std::string& v) {
         return set_range(k, v, &t.workload.input_min, &t.workload.input_max,
                          model::kMaxPositions);
       }},
      {"workload.output",
       [](Topology& t, const std::string& k, const std::string& v) {
         return set_range(k, v, &t.workload.output_min, &t.workload.output_max,
                          model::kMaxPositions);
       }},
      {"wiring",
       [](Topology& t, const std::string& k, const std::string& v) {
         if (std::find(kKnownWirings.begin(), kKnownWirings.end(), v) == kKnownWirings.end()) {
           static const std::string known = [] {
             std::string names;
             for (std::string_view w : kKnownWirings) {
               names += (names.empty() ? "" : ", ") + std::string(w);
             }
             return names;
           }();
           return bad(k, v, known.c_str());
         }
         t.wiring = v;
         return absl::OkStatus();
       }},
      {"harmoeny.q",
       [](Topology& t, const std::string& k, const std::string& v) {
         return set_int(k, v, &t.harmoeny.q, 0);
       }},
      {"harmoeny.slots",
       [](Topology& t, const std::string& k, const std::string& v) {
         return set_int(k, v, &t.harmoeny.slots, 0);
       }},
      {"harmoeny.rebalance",
       [](Topology& t, const std::string& k, const std::string& v) {
         if (v != "paper" && v != "code") return bad(k, v, "paper or code");
         t.harmoeny.rebalance = v;
         return absl::OkStatus();
       }},
      {"harmoeny.prefetch",
       [](Topology& t, const std::string& k, const std::string& v) {
         if (v != "true" && v != "false") return bad(k, v, "true or false");
         t.harmoeny.prefetch = v == "true";
         return absl::OkStatus();
       }},
      {"network.a2a_order",
       [](Topology& t, const std::string& k, const std::string& v) {
         if (std::find(kKnownA2aOrders.begin(), kKnownA2aOrders.end(), v) ==
             kKnownA2aOrders.end()) {
           return bad(k, v, "row_major, random, sjf, aurora, aurora_chunked or aurora_unsplit");
         }
         t.network.a2a_order = v;
         return absl::OkStatus();
       }},
      {"network.model",
       [](Topology& t, const std::string& k, const std::string& v) {
         if (std::find(kKnownNetworkModels.begin(), kKnownNetworkModels.end(), v) ==
             kKnownNetworkModels.end()) {
           return bad(k, v, "serial or fair-share");
         }
         t.network.model = v;
         return absl::OkStatus();
       }},
      {"cost.stage_overhead_us",
       [](Topology& t, const std::string& k, const std::string& v) {
         if (absl::Status s = sim_only(t, k, v); !s.ok()) return s;
         return set_double(k, v, &t.cost.overheads.stage_us, 0, 1e6);
       }},
      {"cost.scheduler_overhead_us",
       [](Topology& t, const std::string& k, const std::string& v) {
         if (absl::Status s = sim_only(t, k, v); !s.ok()) return s;
         return set_double(k, v, &t.cost.overheads.scheduler_us, 0, 1e6);
       }},
      {"cost.attention_overhead_us",
       [](Topology& t, const std::string& k, const std::string& v) {
         if (absl::Status s = sim_only(t, k, v); !s.ok()) return s;
         return set_double(k, v, &t.cost.overheads.attention_us, 0, 1e6);
       }},
      {"cost.expert_overhead_us",
       [](Topology& t, const std::string& k, const std::string& v) {
         if (absl::Status s = sim_only(t, k, v); !s.ok()) return s;
         return set_double(k, v, &t.cost.overheads.expert_us, 0, 1e6);
       }},
      {"cost.spread_seed",
       [](Topology& t, const std::string& k, const std::string& v) {
         if (absl::Status st = sim_only(t, k, v); !st.ok()) return st;
         int64_t s = 0;
         if (absl::Status st = set_int(k, v, &s, 0); !st.ok()) return st;
         t.cost.spread_seed = static_cast<uint64_t>(s);
         return absl::OkStatus();
       }},
      {"model.dtype",
       [](Topology& t, const std::string& k, const std::string& v) {
         if (v != "f32" && v != "bf16") return bad(k, v, "f32 or bf16");
         t.model.dtype = v;
         return absl::OkStatus();
       }},
  };
  return table;
}

}  // namespace

std::vector<std::string> topology_override_keys() {
  std::vector<std::string> keys;
  for (const auto& [k, setter] : setters()) keys.push_back(k);
  return keys;
}

absl::Status apply_topology_override(Topology& topology, const std::string& key,
                                     const std::string& value) {
  auto it = setters().find(key);
  if (it == setters().end()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--sweep: unknown key '%s'; expected one of: %s", key,
                        absl::StrJoin(topology_override_keys(), ", ")));
  }
  return it->second(topology, key, value);
}

}  // namespace muflow::engine::topology
