#pragma once
/// \file
/// Router models for simulation (ARCHITECTURE.md §5; issue 3 item 5): with no weights and no
/// activations, a router model decides each token's top-k experts and their weights.
///
/// Every router is a pure function of (seed, block, request id, position): a token's choice
/// never depends on which other tokens share its batch, on call order or on the wiring, so
/// every wiring sees the same routing (ARCHITECTURE.md invariant 1) and runs are
/// reproducible. Random draws come from `counter_uniform` (splitmix64 finaliser over the
/// inputs), never from std:: distributions (implementation-defined).
///
/// Kinds (formulas and sources in each router's header):
/// | kind                   | header                       | source |
/// |------------------------|------------------------------|--------|
/// | `uniform`              | router_distributions.hpp     | — |
/// | `harmoeny-skew`        | router_distributions.hpp     | HarMoEny §3 and its generator |
/// | `moeshard-multinomial` | router_distributions.hpp     | MoEShard's skew generator |
/// | `exponential`          | router_distributions.hpp     | AsyncMoE's exponential popularity fit
/// | | `replay-npy`           | router_replay.hpp            | HarMoEny's Switch BookCorpus trace |
/// | `replay-per-rank`      | router_replay.hpp            | HarMoEny's per-rank Switch trace |
/// | `recorded`             | routing_record.hpp           | a run's own paths (`--record-routing`) |

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace muflow::engine::routing {

/// Decides each token's top-k experts. Implementations are immutable after construction:
/// `route` is const and may be called concurrently from any thread or actor.
class RouterModel {
 public:
  virtual ~RouterModel() = default;

  /// Routes one token of MoE block `block` ∈ [0, num_layers) (aborts through MUFLOW_ASSERT
  /// outside that range: callers pass a block of the model they built the router for).
  ///
  /// Writes `num_topk` distinct expert ids ∈ [0, num_experts) to `expert_ids[0..k)` in draw
  /// order (slot 0 = the first draw, the "top-1"), and their weights to `weights[0..k)`:
  /// each chosen expert's probability in the router's distribution for this block,
  /// renormalised over the k chosen ones (a stand-in for a softmax gate renormalised over
  /// its top-k), so the weights are ≥ 0 and sum to 1 (to float rounding); 1/k where the
  /// chosen probabilities are all zero. Pure: the result depends only on the router's
  /// parameters and (block, request_id, position).
  virtual void route(int32_t block, int64_t request_id, int64_t position, int32_t* expert_ids,
                     float* weights) const = 0;

  /// One line naming the kind and its effective parameters (defaults resolved), e.g.
  /// `harmoeny-skew(E=128, k=1, s=0.9, mode=code, hot share=0.922, seed=7)`.
  virtual std::string describe() const = 0;

  int64_t num_experts() const { return num_experts_; }
  int64_t num_topk() const { return num_topk_; }
  int64_t num_layers() const { return num_layers_; }

 protected:
  RouterModel(int64_t num_experts, int64_t num_topk, int64_t num_layers)
      : num_experts_(num_experts), num_topk_(num_topk), num_layers_(num_layers) {}

 private:
  int64_t num_experts_;
  int64_t num_topk_;
  int64_t num_layers_;
};

/// Which router to build and its parameters. Fields a kind does not use are ignored.
struct RouterSpec {
  /// One of router_kind_names().
  std::string kind = "uniform";
  /// Seed of every draw (and of the per-layer permutations of `exponential` and the row
  /// shuffles of `replay-npy`). Same seed → same routing; different seeds → different.
  uint64_t seed = 0;
  /// `harmoeny-skew`: skew s ∈ [0, 1]. In `skew_mode` "share" it is exactly the fraction of
  /// tokens routed to the hot experts; in "code" it is HarMoEny's generator parameter (see
  /// harmoeny_skew_probabilities). HarMoEny §3's setup is s = 0.9 to 10 experts.
  double skew = 0.9;
  /// `harmoeny-skew`: "code" (default: the large-batch limit of HarMoEny's own generator) or
  /// "share" (fraction `skew` to the hot experts, uniform within each group).
  std::string skew_mode = "code";
  /// `harmoeny-skew`, `moeshard-multinomial`: number of hot experts k_hot (experts
  /// 0..k_hot-1). 0 = the kind's default: 1 for harmoeny-skew, ⌈0.1·E⌉ for
  /// moeshard-multinomial (MoEShard's paper).
  int64_t hot_experts = 0;
  /// `moeshard-multinomial`: α ≥ 0 added to the hot experts' 1/E (MoEShard's paper: 0.6).
  double alpha = 0.6;
  /// `exponential`: decay rate λ ≥ 0 per popularity rank; negative = default 2/E (the
  /// hottest expert then gets ≈ 2.3× the mean load, see exponential_probabilities).
  double exp_rate = -1.0;
  /// `replay-npy`: path of the `[num_tokens, num_layers]` int64 `.npy` trace; `replay-per-rank`:
  /// path of the per-rank CSV. `{E}` is replaced by num_experts. Empty = the shared data's
  /// `../shared/data/routing/switch-base-{E}-bookcorpus.npy` resp.
  /// `../shared/data/routing/switch-base-per-rank-bookcorpus.csv` (relative to the working
  /// directory; a missing file is a NotFound error naming it).
  std::string trace_file;
  /// `replay-npy`: P, the token stride of a request: token (r, p) is trace token
  /// (r·P + p) mod num_rows. Default 60, the trace's tokens per sample (680 samples × 60).
  int64_t replay_tokens_per_request = 60;
  /// `replay-npy`: shuffle the rows with a seeded bijection per block (default), because the
  /// trace's columns are sorted (its rows carry no real token identity, see
  /// ../shared/data/README.md); false = read row t of every column directly.
  bool replay_shuffle = true;
  /// `replay-per-rank`: use the CSV's layers 0..trace_layers-1; block b samples from layer
  /// b mod trace_layers. Default 6, the Switch encoder MoE layers (the CSV's layers 6–11 are
  /// decoder layers with 85 tokens per rank, see ../shared/data/README.md).
  int64_t trace_layers = 6;
};

/// The kinds make_router_model accepts, in the order of the table above.
std::vector<std::string> router_kind_names();

/// Builds the router `spec.kind` for a model with `num_experts` experts, `num_topk` experts
/// per token and `num_layers` MoE blocks.
///
/// Errors: InvalidArgument for an unknown kind (the message lists the kinds), num_experts < 1,
/// num_topk < 1 or > num_experts, num_layers < 1, a parameter out of range (skew ∉ [0, 1],
/// alpha < 0, hot_experts ∉ [0, E), a skew_mode other than code/share, HarMoEny's "code"
/// mode with E ≤ 2·k_hot where its formula is undefined, replay_tokens_per_request < 1),
/// replay-npy with num_topk ≠ 1 or a trace whose largest expert id is not num_experts − 1,
/// replay-per-rank with trace_layers outside [1, the CSV's layers];
/// NotFound / InvalidArgument from the trace loaders (messages name the file).
/// The caller owns the result; it is immutable and thread-safe.
absl::StatusOr<std::unique_ptr<RouterModel>> make_router_model(const RouterSpec& spec,
                                                               int64_t num_experts,
                                                               int64_t num_topk,
                                                               int64_t num_layers);

}  // namespace muflow::engine::routing
