#include "engine/routing/routing_record.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "engine/serving/sampling.hpp"

namespace muflow::engine::routing {

void RoutingRecorder::add(int64_t request_id, int64_t position, int32_t block,
                          const int32_t* experts, const float* weights, int64_t num_topk) {
  num_topk = std::max<int64_t>(0, num_topk);
  std::lock_guard<std::mutex> lock(mutex_);
  rows_.push_back({request_id, position, block, static_cast<int32_t>(num_topk), experts_.size()});
  experts_.insert(experts_.end(), experts, experts + num_topk);
  weights_.insert(weights_.end(), weights, weights + num_topk);
}

std::vector<size_t> RoutingRecorder::last_rows() const {
  std::vector<size_t> order(rows_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  const auto key = [this](size_t i) {
    return std::tuple(rows_[i].request_id, rows_[i].position, rows_[i].block);
  };
  // By key, equal keys in the order they were added; the last of each run of equal keys wins.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) < key(b); });
  std::vector<size_t> last;
  last.reserve(order.size());
  for (size_t j = 0; j < order.size(); ++j) {
    if (j + 1 < order.size() && key(order[j]) == key(order[j + 1])) continue;
    last.push_back(order[j]);
  }
  return last;
}

RoutingTable RoutingRecorder::table() const {
  std::lock_guard<std::mutex> lock(mutex_);
  RoutingTable out;
  for (const size_t i : last_rows()) {
    const Row& r = rows_[i];
    const auto e = experts_.begin() + static_cast<std::ptrdiff_t>(r.offset);
    const auto w = weights_.begin() + static_cast<std::ptrdiff_t>(r.offset);
    out.emplace_hint(out.end(), std::tuple(r.request_id, r.position, r.block),
                     RoutingChoice{std::vector<int32_t>(e, e + r.num_topk),
                                   std::vector<float>(w, w + r.num_topk)});
  }
  return out;
}

absl::Status RoutingRecorder::write_csv(const std::string& path) const {
  const auto parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  std::ofstream out(path);
  if (!out) return absl::InternalError(absl::StrFormat("cannot write routing record '%s'", path));
  out << "request_id,position,block,experts,weights\n";
  std::lock_guard<std::mutex> lock(mutex_);
  for (const size_t i : last_rows()) {
    const Row& r = rows_[i];
    out << r.request_id << ',' << r.position << ',' << r.block << ',';
    for (int32_t j = 0; j < r.num_topk; ++j) out << (j ? " " : "") << experts_[r.offset + j];
    out << ',';
    for (int32_t j = 0; j < r.num_topk; ++j) {
      out << (j ? " " : "") << absl::StrFormat("%.9g", weights_[r.offset + j]);
    }
    out << '\n';
  }
  if (!out) return absl::InternalError(absl::StrFormat("failed writing '%s'", path));
  return absl::OkStatus();
}

absl::StatusOr<RoutingTable> read_routing_csv(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrFormat("routing record '%s' not found", path));
  RoutingTable table;
  std::string line;
  int64_t line_no = 0;
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrFormat("%s:%d: %s", path, line_no, what));
  };
  size_t topk = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line_no == 1) {
      if (line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);  // UTF-8 byte-order mark
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line != "request_id,position,block,experts,weights") {
        return bad("expected the header request_id,position,block,experts,weights");
      }
      continue;
    }
    if (line.empty()) continue;
    std::vector<std::string> cells = absl::StrSplit(line, ',');
    if (cells.size() != 5) return bad("expected 5 comma-separated fields");
    int64_t request = 0, position = 0;
    int32_t block = 0;
    if (!absl::SimpleAtoi(cells[0], &request) || !absl::SimpleAtoi(cells[1], &position) ||
        !absl::SimpleAtoi(cells[2], &block) || request < 0 || position < 0 || block < 0) {
      return bad("request_id, position and block must be integers >= 0");
    }
    RoutingChoice c;
    for (const std::string& e :
         std::vector<std::string>(absl::StrSplit(cells[3], ' ', absl::SkipEmpty()))) {
      int32_t id = 0;
      if (!absl::SimpleAtoi(e, &id)) return bad("expert '" + e + "' is not an integer");
      c.experts.push_back(id);
    }
    for (const std::string& w :
         std::vector<std::string>(absl::StrSplit(cells[4], ' ', absl::SkipEmpty()))) {
      float x = 0;
      if (!absl::SimpleAtof(w, &x)) return bad("weight '" + w + "' is not a number");
      c.weights.push_back(x);
    }
    if (c.experts.empty() || c.experts.size() != c.weights.size()) {
      return bad("experts and weights must be non-empty lists of the same length");
    }
    // Recorded choices are replayed as router outputs: k distinct expert ids >= 0 with
    // finite, non-negative weights (#15: NaN, inf, negative weights and repeats were taken).
    for (size_t i = 0; i < c.experts.size(); ++i) {
      if (c.experts[i] < 0) return bad("expert ids must be >= 0");
      for (size_t j = 0; j < i; ++j) {
        if (c.experts[j] == c.experts[i]) {
          return bad("expert " + std::to_string(c.experts[i]) + " appears twice in one row");
        }
      }
      if (!std::isfinite(c.weights[i]) || c.weights[i] < 0.0f) {
        return bad("weights must be finite and >= 0");
      }
    }
    if (topk == 0) topk = c.experts.size();
    if (c.experts.size() != topk) return bad("every row must have the same top-k");
    if (!table.emplace(std::make_tuple(request, position, block), std::move(c)).second) {
      return bad("duplicate (request_id, position, block)");
    }
  }
  return table;
}

namespace {

class RecordedRouter final : public RouterModel {
 public:
  RecordedRouter(std::string path, RoutingTable table, int64_t num_experts, int64_t num_topk,
                 int64_t num_layers, uint64_t seed)
      : RouterModel(num_experts, num_topk, num_layers),
        path_(std::move(path)),
        table_(std::move(table)),
        seed_(seed) {}

  void route(int32_t block, int64_t request_id, int64_t position, int32_t* expert_ids,
             float* weights) const override {
    auto it = table_.find({request_id, position, block});
    if (it != table_.end()) {
      for (int64_t j = 0; j < num_topk(); ++j) {
        expert_ids[j] = it->second.experts[j];
        weights[j] = it->second.weights[j];
      }
      return;
    }
    fallbacks_.fetch_add(1, std::memory_order_relaxed);
    // Uniform without replacement, keyed by the token (batch independent).
    int64_t chosen = 0;
    for (uint64_t draw = 0; chosen < num_topk(); ++draw) {
      const uint64_t key = (static_cast<uint64_t>(request_id) << 20) ^
                           (static_cast<uint64_t>(position) << 8) ^ static_cast<uint64_t>(block);
      const auto e = static_cast<int32_t>(serving::counter_uniform(seed_, key, draw) *
                                          static_cast<double>(num_experts()));
      bool seen = false;
      for (int64_t j = 0; j < chosen; ++j) seen = seen || expert_ids[j] == e;
      if (seen) continue;
      expert_ids[chosen] = e;
      weights[chosen] = 1.0f / static_cast<float>(num_topk());
      ++chosen;
    }
  }

  std::string describe() const override {
    return absl::StrFormat("recorded(%s, %d tokens x blocks)", path_, table_.size());
  }

 private:
  std::string path_;
  RoutingTable table_;
  uint64_t seed_;
  mutable std::atomic<int64_t> fallbacks_{0};
};

}  // namespace

absl::StatusOr<std::unique_ptr<RouterModel>> make_recorded_router(const std::string& path,
                                                                  int64_t num_experts,
                                                                  int64_t num_topk,
                                                                  int64_t num_layers,
                                                                  uint64_t seed) {
  absl::StatusOr<RoutingTable> table = read_routing_csv(path);
  if (!table.ok()) return table.status();
  for (const auto& [key, c] : *table) {
    if (static_cast<int64_t>(c.experts.size()) != num_topk) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: recorded top-%d, but the model routes top-%d", path, c.experts.size(), num_topk));
    }
    if (std::get<2>(key) >= num_layers) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: block %d outside the model's %d layers", path, std::get<2>(key), num_layers));
    }
    for (int32_t e : c.experts) {
      if (e < 0 || e >= num_experts) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: expert %d outside [0, %d)", path, e, num_experts));
      }
    }
  }
  return std::unique_ptr<RouterModel>(
      new RecordedRouter(path, std::move(*table), num_experts, num_topk, num_layers, seed));
}

}  // namespace muflow::engine::routing
