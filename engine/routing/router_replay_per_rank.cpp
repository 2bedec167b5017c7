#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/routing/router_categorical.hpp"
#include "engine/routing/router_replay.hpp"
#include "kernels/assert.hpp"

namespace muflow::engine::routing {

int64_t PerRankRoutingCounts::count(int64_t rank, int64_t layer, int64_t iteration,
                                    int64_t expert) const {
  MUFLOW_ASSERT(rank >= 0 && rank < num_ranks && layer >= 0 && layer < num_layers &&
                    iteration >= 0 && iteration < num_iterations && expert >= 0 &&
                    expert < num_experts,
                "per-rank count index out of range");
  return counts[static_cast<size_t>(
      ((rank * num_layers + layer) * num_iterations + iteration) * num_experts + expert)];
}

int64_t PerRankRoutingCounts::tokens(int64_t rank, int64_t layer, int64_t iteration) const {
  MUFLOW_ASSERT(rank >= 0 && rank < num_ranks && layer >= 0 && layer < num_layers &&
                    iteration >= 0 && iteration < num_iterations,
                "per-rank tokens index out of range");
  return tokens_sent[static_cast<size_t>((rank * num_layers + layer) * num_iterations + iteration)];
}

std::vector<int64_t> PerRankRoutingCounts::layer_histogram(int64_t layer, int64_t iteration) const {
  std::vector<int64_t> hist(static_cast<size_t>(num_experts), 0);
  for (int64_t r = 0; r < num_ranks; ++r) {
    for (int64_t it = 0; it < num_iterations; ++it) {
      if (iteration >= 0 && it != iteration) continue;
      for (int64_t e = 0; e < num_experts; ++e)
        hist[static_cast<size_t>(e)] += count(r, layer, it, e);
    }
  }
  return hist;
}

namespace {

struct Row {
  int64_t line = 0;
  int64_t layer = 0, iteration = 0, rank = 0, tokens = 0;
  std::vector<int64_t> counts;
};

}  // namespace

absl::StatusOr<PerRankRoutingCounts> load_per_rank_routing_csv(const std::string& path,
                                                               int64_t num_experts) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open per-rank routing CSV"));
  auto invalid = [&](int64_t line, const std::string& msg) {
    return absl::InvalidArgumentError(absl::StrCat(path, ":", line, ": ", msg));
  };
  const char* kColumns[] = {"model",     "num_experts", "world_size",  "layer",
                            "iteration", "src_rank",    "tokens_sent", "expert_counts"};
  std::string text;
  int64_t line_no = 0;
  std::map<std::string, size_t> col;
  if (!std::getline(in, text)) return invalid(1, "empty file (expected a header)");
  ++line_no;
  if (!text.empty() && text.back() == '\r') text.pop_back();
  {
    std::vector<std::string> names = absl::StrSplit(text, ',');
    for (size_t i = 0; i < names.size(); ++i) {
      // A repeated name would leave col.size() below the field count rows are checked against.
      if (!col.emplace(names[i], i).second) {
        return invalid(1, absl::StrCat("duplicate column '", names[i], "'"));
      }
    }
    for (const char* c : kColumns) {
      if (!col.count(c)) return invalid(1, absl::StrCat("missing column '", c, "'"));
    }
  }
  PerRankRoutingCounts out;
  out.num_experts = num_experts;
  std::vector<Row> rows;
  int64_t max_layer = 0, max_iteration = 0;
  std::set<int64_t> other_counts;
  while (std::getline(in, text)) {
    ++line_no;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (text.empty()) continue;
    std::vector<std::string> f = absl::StrSplit(text, ',');
    if (f.size() != col.size()) {
      return invalid(line_no, absl::StrFormat("expected %d fields, got %d", col.size(), f.size()));
    }
    auto integer = [&](const char* name, int64_t* v) -> absl::Status {
      if (!absl::SimpleAtoi(f[col[name]], v) || *v < 0) {
        return invalid(line_no, absl::StrCat("column '", name, "': '", f[col[name]],
                                             "' is not a non-negative integer"));
      }
      return absl::OkStatus();
    };
    int64_t e = 0, world = 0;
    Row row;
    row.line = line_no;
    for (auto [name, dst] : {std::pair<const char*, int64_t*>{"num_experts", &e},
                             {"world_size", &world},
                             {"layer", &row.layer},
                             {"iteration", &row.iteration},
                             {"src_rank", &row.rank},
                             {"tokens_sent", &row.tokens}}) {
      if (absl::Status s = integer(name, dst); !s.ok()) return s;
    }
    if (e != num_experts) {
      other_counts.insert(e);
      continue;
    }
    const std::string& model = f[col["model"]];
    if (out.num_ranks == 0) {
      out.num_ranks = world;
      out.model = model;
    } else if (world != out.num_ranks || model != out.model) {
      return invalid(line_no,
                     absl::StrFormat("model/world_size '%s'/%d differ from the first row's '%s'/%d",
                                     model, world, out.model, out.num_ranks));
    }
    if (row.rank >= world) {
      return invalid(line_no,
                     absl::StrFormat("src_rank %d is not below world_size %d", row.rank, world));
    }
    for (absl::string_view tok : absl::StrSplit(f[col["expert_counts"]], ' ', absl::SkipEmpty())) {
      int64_t v = 0;
      if (!absl::SimpleAtoi(tok, &v) || v < 0) {
        return invalid(line_no,
                       absl::StrCat("expert_counts: '", tok, "' is not a non-negative integer"));
      }
      row.counts.push_back(v);
    }
    if (static_cast<int64_t>(row.counts.size()) != num_experts) {
      return invalid(line_no, absl::StrFormat("expert_counts has %d values, expected %d",
                                              row.counts.size(), num_experts));
    }
    int64_t sum = 0;
    for (int64_t v : row.counts) {
      if (v > std::numeric_limits<int64_t>::max() - sum) {
        return invalid(line_no, "expert_counts sum overflows a 64-bit integer");
      }
      sum += v;
    }
    if (sum != row.tokens) {
      return invalid(line_no, absl::StrFormat("expert_counts sum to %d, but tokens_sent is %d", sum,
                                              row.tokens));
    }
    max_layer = std::max(max_layer, row.layer);
    max_iteration = std::max(max_iteration, row.iteration);
    rows.push_back(std::move(row));
  }
  if (rows.empty()) {
    return absl::NotFoundError(absl::StrFormat("%s: no rows with num_experts=%d (the file has %s)",
                                               path, num_experts,
                                               absl::StrJoin(other_counts, ", ")));
  }
  // Every (rank, layer, iteration) needs a row of its own, so a grid with more cells than rows
  // has holes. Name the first one without sizing anything by indices read from the file (the
  // scan stops within rows.size() + 1 cells).
  const auto num_rows = static_cast<int64_t>(rows.size());
  if (out.num_ranks > num_rows || max_layer >= num_rows || max_iteration >= num_rows ||
      out.num_ranks * (max_layer + 1) > num_rows ||
      out.num_ranks * (max_layer + 1) * (max_iteration + 1) > num_rows) {
    std::set<std::tuple<int64_t, int64_t, int64_t>> present;
    for (const Row& row : rows) present.insert({row.rank, row.layer, row.iteration});
    for (int64_t r = 0; r < out.num_ranks; ++r) {
      for (int64_t l = 0; l <= max_layer; ++l) {
        for (int64_t it = 0; it <= max_iteration; ++it) {
          if (present.count({r, l, it}) == 0) {
            return absl::InvalidArgumentError(
                absl::StrFormat("%s: no row for rank %d, layer %d, iteration %d (num_experts=%d)",
                                path, r, l, it, num_experts));
          }
        }
      }
    }
  }
  out.num_layers = max_layer + 1;
  out.num_iterations = max_iteration + 1;
  const int64_t cells = out.num_ranks * out.num_layers * out.num_iterations;
  out.counts.assign(static_cast<size_t>(cells * num_experts), 0);
  out.tokens_sent.assign(static_cast<size_t>(cells), -1);
  for (const Row& row : rows) {
    const int64_t cell =
        (row.rank * out.num_layers + row.layer) * out.num_iterations + row.iteration;
    if (out.tokens_sent[static_cast<size_t>(cell)] >= 0) {
      return invalid(row.line, absl::StrFormat("duplicate row for rank %d, layer %d, iteration %d",
                                               row.rank, row.layer, row.iteration));
    }
    out.tokens_sent[static_cast<size_t>(cell)] = row.tokens;
    std::copy(row.counts.begin(), row.counts.end(),
              out.counts.begin() + static_cast<std::ptrdiff_t>(cell * num_experts));
  }
  for (int64_t r = 0; r < out.num_ranks; ++r) {
    for (int64_t l = 0; l < out.num_layers; ++l) {
      for (int64_t it = 0; it < out.num_iterations; ++it) {
        if (out.tokens_sent[static_cast<size_t>((r * out.num_layers + l) * out.num_iterations +
                                                it)] < 0) {
          return absl::InvalidArgumentError(
              absl::StrFormat("%s: no row for rank %d, layer %d, iteration %d (num_experts=%d)",
                              path, r, l, it, num_experts));
        }
      }
    }
  }
  return out;
}

absl::StatusOr<std::unique_ptr<RouterModel>> make_per_rank_router(
    const PerRankRoutingCounts& counts, const std::string& path, int64_t num_topk,
    int64_t num_layers, uint64_t seed, int64_t trace_layers) {
  if (trace_layers < 1 || trace_layers > counts.num_layers) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: trace_layers must be in [1, %d], got %d",
                                                      path, counts.num_layers, trace_layers));
  }
  std::vector<TopkSampler> samplers;
  for (int64_t b = 0; b < num_layers; ++b) {
    const int64_t layer = b % trace_layers;
    const std::vector<int64_t> hist = counts.layer_histogram(layer);
    std::vector<double> p(hist.begin(), hist.end());
    double total = 0.0;
    for (double v : p) total += v;
    if (total <= 0.0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: layer %d has no tokens (num_experts=%d)", path, layer, counts.num_experts));
    }
    samplers.emplace_back(std::move(p));
  }
  std::string desc = absl::StrFormat(
      "replay-per-rank(%s, %s, %d ranks x %d iterations, layers 0..%d, E=%d, k=%d, seed=%d)", path,
      counts.model, counts.num_ranks, counts.num_iterations, trace_layers - 1, counts.num_experts,
      num_topk, seed);
  return std::make_unique<CategoricalRouter>(counts.num_experts, num_topk, num_layers, seed,
                                             std::move(samplers), std::move(desc));
}

}  // namespace muflow::engine::routing
