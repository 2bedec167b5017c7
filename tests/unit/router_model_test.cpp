// Router models (engine/routing/router_model.hpp): each router's empirical distribution against its
// formula (5-sigma bounds, fixed printed seeds), top-k inclusion probabilities, distinct
// experts and weights summing to 1, purity (any call order, threads, fresh instances give the
// same routing), seeds, replay of .npy traces (row mapping, exact per-layer histograms), the
// per-rank CSV loader, and malformed .npy / CSV files. Real-data tests skip without
// MUFLOW_DATA_DIR.

#include "engine/routing/router_model.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "engine/model/npy_reader.hpp"
#include "engine/routing/router_categorical.hpp"
#include "engine/routing/router_distributions.hpp"
#include "engine/routing/router_replay.hpp"
#include "kernels/reference/test_inputs.hpp"
#include "scratch_path.hpp"

namespace muflow::engine {
namespace {

using kernels::reference::test_seed;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

const fs::path kRoutingDir = fs::path(MUFLOW_DATA_DIR) / "routing";

fs::path router_temp_path(const std::string& name) {
  const fs::path dir = muflow::testing::scratch_path("router_model_test");
  fs::create_directories(dir);
  return dir / name;
}

std::unique_ptr<routing::RouterModel> make(const routing::RouterSpec& spec, int64_t e, int64_t k,
                                           int64_t layers) {
  absl::StatusOr<std::unique_ptr<routing::RouterModel>> r =
      routing::make_router_model(spec, e, k, layers);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : nullptr;
}

routing::RouterSpec spec_of(const std::string& kind, uint64_t seed) {
  routing::RouterSpec s;
  s.kind = kind;
  s.seed = seed;
  return s;
}

struct Token {
  int32_t block;
  int64_t request;
  int64_t position;
};

// Top-1 (slot 0) counts over `n` tokens of `block`: request i / 97, position i % 97.
std::vector<int64_t> slot0_counts(const routing::RouterModel& r, int32_t block, int64_t n) {
  std::vector<int64_t> counts(static_cast<size_t>(r.num_experts()), 0);
  std::vector<int32_t> ids(static_cast<size_t>(r.num_topk()));
  std::vector<float> w(static_cast<size_t>(r.num_topk()));
  for (int64_t i = 0; i < n; ++i) {
    r.route(block, i / 97, i % 97, ids.data(), w.data());
    ++counts[static_cast<size_t>(ids[0])];
  }
  return counts;
}

// |count − n·p| ≤ 5σ + 3 for each expert (binomial σ): a false failure has probability
// < E · 6e-7 for a fixed seed, and the seeds are fixed.
void expect_matches(const std::vector<int64_t>& counts, const std::vector<double>& p, int64_t n,
                    const std::string& what) {
  ASSERT_EQ(counts.size(), p.size());
  for (size_t e = 0; e < p.size(); ++e) {
    const double mean = static_cast<double>(n) * p[e];
    const double bound = 5.0 * std::sqrt(mean * (1.0 - p[e])) + 3.0;
    EXPECT_LE(std::abs(static_cast<double>(counts[e]) - mean), bound)
        << what << ": expert " << e << " count " << counts[e] << " expected " << mean;
  }
}

// ---------------------------------------------------------------------------------------
// Formulas

TEST(RouterDistributions, HarmoenyCodeFormulaLimit) {
  // k = 1: p_hot = (E·s + 1)/(E − 2), cold share the rest.
  auto p = routing::harmoeny_skew_probabilities(128, 1, 0.9, "code");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_NEAR((*p)[0], (128 * 0.9 + 1) / 126.0, 1e-12);
  EXPECT_NEAR((*p)[1], (1 - (*p)[0]) / 127.0, 1e-12);
  // The count formula for a large N agrees with the per-token probabilities.
  const double n = 1e9;
  const double n_hot = std::min(n / 1, std::floor((128 * n * 0.9 + 1 * n) / (1 * (128 - 2))));
  EXPECT_NEAR(n_hot / n, (*p)[0], 1e-8);
  // k = 10, s = 0.9: the formula caps at 1/k per hot expert, no cold tokens.
  p = routing::harmoeny_skew_probabilities(128, 10, 0.9, "code");
  ASSERT_TRUE(p.ok());
  EXPECT_DOUBLE_EQ((*p)[9], 0.1);
  EXPECT_DOUBLE_EQ((*p)[10], 0.0);
  // k = 10, s = 0.5: (64 + 10)/(10·108) per hot expert.
  p = routing::harmoeny_skew_probabilities(128, 10, 0.5, "code");
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR((*p)[0], 74.0 / 1080.0, 1e-12);
  EXPECT_NEAR((*p)[127], (1 - 740.0 / 1080.0) / 118.0, 1e-12);
  // share mode: exactly s to the hot group (the paper's §3 setup).
  p = routing::harmoeny_skew_probabilities(128, 10, 0.9, "share");
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR((*p)[0], 0.09, 1e-12);
  EXPECT_NEAR((*p)[10], 0.1 / 118.0, 1e-12);
  // Errors.
  EXPECT_FALSE(routing::harmoeny_skew_probabilities(8, 4, 0.5, "code").ok());  // E ≤ 2k
  EXPECT_FALSE(routing::harmoeny_skew_probabilities(8, 0, 0.5, "share").ok());
  EXPECT_FALSE(routing::harmoeny_skew_probabilities(8, 1, 1.5, "share").ok());
  EXPECT_THAT(routing::harmoeny_skew_probabilities(8, 1, 0.5, "paper").status().message(),
              HasSubstr("skew_mode"));
}

TEST(RouterDistributions, MoeshardAndExponential) {
  auto p = routing::moeshard_probabilities(128, 13, 0.6);
  ASSERT_TRUE(p.ok());
  const double total = 1.0 + 13 * 0.6;
  EXPECT_NEAR((*p)[12], (1.0 / 128 + 0.6) / total, 1e-15);
  EXPECT_NEAR((*p)[13], (1.0 / 128) / total, 1e-15);
  EXPECT_FALSE(routing::moeshard_probabilities(8, 1, -0.1).ok());
  EXPECT_FALSE(routing::moeshard_probabilities(8, 9, 0.1).ok());

  const std::vector<int32_t> order = routing::exponential_popularity_order(16, 5, 3);
  std::vector<int32_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 16; ++i) EXPECT_EQ(sorted[i], i);
  EXPECT_EQ(order, routing::exponential_popularity_order(16, 5, 3));
  EXPECT_NE(order, routing::exponential_popularity_order(16, 5, 4));
  auto q = routing::exponential_probabilities(0.25, order);
  ASSERT_TRUE(q.ok());
  for (int r = 0; r + 1 < 16; ++r) {
    EXPECT_NEAR((*q)[order[r + 1]] / (*q)[order[r]], std::exp(-0.25), 1e-12);
  }
  EXPECT_FALSE(routing::exponential_probabilities(-1, order).ok());
  EXPECT_FALSE(routing::exponential_probabilities(0.1, {0, 0, 1}).ok());
}

// ---------------------------------------------------------------------------------------
// Factory

TEST(RouterModel, FactoryErrors) {
  auto r = routing::make_router_model(spec_of("zipf", 0), 8, 2, 4);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("unknown router kind 'zipf'"));
  EXPECT_THAT(r.status().message(), HasSubstr("moeshard-multinomial"));
  EXPECT_FALSE(routing::make_router_model(spec_of("uniform", 0), 8, 9, 4).ok());
  EXPECT_FALSE(routing::make_router_model(spec_of("uniform", 0), 8, 0, 4).ok());
  EXPECT_FALSE(routing::make_router_model(spec_of("uniform", 0), 0, 1, 4).ok());
  EXPECT_FALSE(routing::make_router_model(spec_of("uniform", 0), 8, 1, 0).ok());
  routing::RouterSpec s = spec_of("harmoeny-skew", 0);
  s.skew = -0.1;
  EXPECT_THAT(routing::make_router_model(s, 8, 1, 4).status().message(), HasSubstr("skew"));
  s = spec_of("moeshard-multinomial", 0);
  s.alpha = -1;
  EXPECT_THAT(routing::make_router_model(s, 8, 1, 4).status().message(), HasSubstr("alpha"));
  s = spec_of("exponential", 0);
  s.exp_rate = NAN;
  EXPECT_FALSE(routing::make_router_model(s, 8, 1, 4).ok());
  s = spec_of("replay-npy", 0);
  s.trace_file = router_temp_path("does-not-exist-{E}.npy").string();
  r = routing::make_router_model(s, 8, 1, 4);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("does-not-exist-8.npy"));
  EXPECT_EQ(routing::router_kind_names().size(), 7u);
}

TEST(RouterModel, DescribeNamesKindAndResolvedDefaults) {
  EXPECT_THAT(make(spec_of("moeshard-multinomial", 3), 128, 1, 2)->describe(), HasSubstr("hot=13"));
  EXPECT_THAT(make(spec_of("exponential", 3), 64, 2, 2)->describe(), HasSubstr("lambda=0.03125"));
  EXPECT_THAT(make(spec_of("harmoeny-skew", 3), 128, 1, 2)->describe(),
              HasSubstr("hot share=0.9222"));
}

// ---------------------------------------------------------------------------------------
// Empirical distributions

TEST(RouterModel, UniformMatchesFormula) {
  const uint64_t seed = test_seed("router uniform", 11);
  auto r = make(spec_of("uniform", seed), 64, 1, 3);
  const int64_t n = 200000;
  expect_matches(slot0_counts(*r, 2, n), routing::uniform_probabilities(64), n, "uniform");
}

TEST(RouterModel, HarmoenySkewMatchesFormula) {
  const uint64_t seed = test_seed("router harmoeny-skew", 12);
  const int64_t n = 200000;
  for (const char* mode : {"code", "share"}) {
    routing::RouterSpec s = spec_of("harmoeny-skew", seed);
    s.skew_mode = mode;
    s.skew = 0.9;
    s.hot_experts = std::string(mode) == "code" ? 1 : 10;
    auto r = make(s, 128, 1, 6);
    auto p = routing::harmoeny_skew_probabilities(128, s.hot_experts, 0.9, mode);
    ASSERT_TRUE(p.ok());
    const std::vector<int64_t> c = slot0_counts(*r, 4, n);
    expect_matches(c, *p, n, std::string("harmoeny-skew ") + mode);
    int64_t hot = 0;
    for (int e = 0; e < s.hot_experts; ++e) hot += c[e];
    // Both settings send about 90% (code, k = 1: 92.2%) of the tokens to the hot experts.
    EXPECT_NEAR(static_cast<double>(hot) / n, std::string(mode) == "code" ? 0.9222 : 0.9, 0.005);
  }
}

TEST(RouterModel, MoeshardMatchesFormula) {
  const uint64_t seed = test_seed("router moeshard-multinomial", 13);
  auto r = make(spec_of("moeshard-multinomial", seed), 128, 1, 2);
  const int64_t n = 200000;
  auto p = routing::moeshard_probabilities(128, 13, 0.6);
  ASSERT_TRUE(p.ok());
  expect_matches(slot0_counts(*r, 1, n), *p, n, "moeshard");
}

TEST(RouterModel, ExponentialMatchesFormulaPerBlock) {
  const uint64_t seed = test_seed("router exponential", 14);
  auto r = make(spec_of("exponential", seed), 16, 1, 4);
  const auto* cat = dynamic_cast<const routing::CategoricalRouter*>(r.get());
  ASSERT_NE(cat, nullptr);
  const int64_t n = 200000;
  for (int32_t b : {0, 3}) {
    auto p = routing::exponential_probabilities(2.0 / 16,
                                                routing::exponential_popularity_order(16, seed, b));
    ASSERT_TRUE(p.ok());
    ASSERT_EQ(cat->probabilities(b).size(), p->size());
    for (size_t e = 0; e < p->size(); ++e) EXPECT_NEAR(cat->probabilities(b)[e], (*p)[e], 1e-15);
    expect_matches(slot0_counts(*r, b, n), *p, n, "exponential block " + std::to_string(b));
  }
  // Default λ = 2/E: the hottest expert gets (1 − e^{−λ})/(1 − e^{−2}) ≈ 2.2× the mean at E=16.
  const auto& p0 = cat->probabilities(0);
  EXPECT_NEAR(*std::max_element(p0.begin(), p0.end()) * 16,
              16 * (1 - std::exp(-0.125)) / (1 - std::exp(-2.0)), 1e-12);
}

// For top-2 without replacement from p, P(i chosen) = p_i + Σ_{j≠i} p_j · p_i / (1 − p_j).
TEST(RouterModel, TopkWithoutReplacementInclusionProbabilities) {
  const uint64_t seed = test_seed("router top-2 inclusion", 15);
  routing::RouterSpec s = spec_of("moeshard-multinomial", seed);
  s.hot_experts = 2;
  s.alpha = 0.3;
  auto r = make(s, 8, 2, 1);
  auto p = routing::moeshard_probabilities(8, 2, 0.3);
  ASSERT_TRUE(p.ok());
  const int64_t n = 200000;
  std::vector<int64_t> included(8, 0), first(8, 0);
  int32_t ids[2];
  float w[2];
  for (int64_t i = 0; i < n; ++i) {
    r->route(0, i, 7, ids, w);
    ++included[ids[0]];
    ++included[ids[1]];
    ++first[ids[0]];
  }
  expect_matches(first, *p, n, "top-2 slot 0");
  for (int i = 0; i < 8; ++i) {
    double pi = (*p)[i];
    for (int j = 0; j < 8; ++j) {
      if (j != i) pi += (*p)[j] * (*p)[i] / (1 - (*p)[j]);
    }
    const double mean = n * pi;
    EXPECT_LE(std::abs(included[i] - mean), 5 * std::sqrt(mean * (1 - pi)) + 3) << "expert " << i;
  }
}

// ---------------------------------------------------------------------------------------
// Invariants: distinct experts, weights, purity, seeds

std::vector<std::pair<routing::RouterSpec, std::tuple<int64_t, int64_t>>> synthetic_cases(
    uint64_t seed) {
  std::vector<std::pair<routing::RouterSpec, std::tuple<int64_t, int64_t>>> cases;
  for (const char* kind : {"uniform", "harmoeny-skew", "moeshard-multinomial", "exponential"}) {
    for (auto ek : {std::tuple<int64_t, int64_t>{8, 1}, {8, 2}, {8, 8}, {64, 6}, {256, 8}}) {
      cases.push_back({spec_of(kind, seed), ek});
    }
  }
  routing::RouterSpec all_hot = spec_of("harmoeny-skew", seed);  // the cold experts have zero mass
  all_hot.skew_mode = "share";
  all_hot.skew = 1.0;
  cases.push_back({all_hot, {16, 4}});
  routing::RouterSpec steep = spec_of("exponential", seed);  // exp underflows: most experts p = 0
  steep.exp_rate = 400;
  cases.push_back({steep, {16, 6}});
  return cases;
}

TEST(RouterModel, DistinctExpertsAndWeightsSumToOne) {
  const uint64_t seed = test_seed("router invariants", 16);
  for (const auto& [spec, ek] : synthetic_cases(seed)) {
    const auto [e, k] = ek;
    auto r = make(spec, e, k, 3);
    ASSERT_NE(r, nullptr);
    std::vector<int32_t> ids(k);
    std::vector<float> w(k);
    for (int64_t i = 0; i < 3000; ++i) {
      r->route(static_cast<int32_t>(i % 3), i, i * 7 % 13, ids.data(), w.data());
      std::vector<int32_t> sorted = ids;
      std::sort(sorted.begin(), sorted.end());
      ASSERT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << r->describe();
      ASSERT_GE(sorted.front(), 0);
      ASSERT_LT(sorted.back(), e);
      double sum = 0;
      for (float x : w) {
        ASSERT_GE(x, 0.0f);
        sum += x;
      }
      ASSERT_NEAR(sum, 1.0, 1e-5) << r->describe();
    }
  }
  auto u = make(spec_of("uniform", seed), 64, 4, 1);
  int32_t ids[4];
  float w[4];
  u->route(0, 1, 2, ids, w);
  for (float x : w) EXPECT_EQ(x, 0.25f);
}

std::vector<Token> token_list() {
  std::vector<Token> tokens;
  for (int32_t b = 0; b < 4; ++b) {
    for (int64_t r = 0; r < 30; ++r) {
      for (int64_t p = 0; p < 20; ++p) tokens.push_back({b, r * 1000003 - 7, p});
    }
  }
  return tokens;
}

std::vector<int32_t> route_all(const routing::RouterModel& r, const std::vector<Token>& tokens,
                               const std::vector<size_t>& order) {
  const int64_t k = r.num_topk();
  std::vector<int32_t> out(tokens.size() * k);
  std::vector<float> w(k);
  for (size_t i : order) {
    r.route(tokens[i].block, tokens[i].request, tokens[i].position, &out[i * k], w.data());
  }
  return out;
}

TEST(RouterModel, PureFunctionOfTokenNotOfBatchOrOrder) {
  const uint64_t seed = test_seed("router purity", 17);
  const std::vector<Token> tokens = token_list();
  std::vector<size_t> forward(tokens.size());
  for (size_t i = 0; i < forward.size(); ++i) forward[i] = i;
  std::vector<size_t> reversed(forward.rbegin(), forward.rend());
  std::vector<size_t> strided;  // "batches" of every 7th token
  for (size_t s = 0; s < 7; ++s) {
    for (size_t i = s; i < tokens.size(); i += 7) strided.push_back(i);
  }
  for (const auto& [spec, ek] : synthetic_cases(seed)) {
    const auto [e, k] = ek;
    auto r = make(spec, e, k, 4);
    const std::vector<int32_t> a = route_all(*r, tokens, forward);
    EXPECT_EQ(a, route_all(*r, tokens, reversed)) << r->describe();
    EXPECT_EQ(a, route_all(*r, tokens, strided)) << r->describe();
    // Alone: each token routed by itself on a fresh instance.
    auto fresh = make(spec, e, k, 4);
    std::vector<int32_t> ids(k);
    std::vector<float> w(k);
    for (size_t i = 0; i < tokens.size(); i += 37) {
      fresh->route(tokens[i].block, tokens[i].request, tokens[i].position, ids.data(), w.data());
      EXPECT_TRUE(std::equal(ids.begin(), ids.end(), a.begin() + i * k)) << r->describe();
    }
    // Concurrently from two threads.
    std::vector<int32_t> t1, t2;
    std::thread th1([&] { t1 = route_all(*r, tokens, forward); });
    std::thread th2([&] { t2 = route_all(*r, tokens, reversed); });
    th1.join();
    th2.join();
    EXPECT_EQ(a, t1);
    EXPECT_EQ(a, t2);
  }
}

TEST(RouterModel, SeedsChangeRouting) {
  const uint64_t seed = test_seed("router seeds", 18);
  const std::vector<Token> tokens = token_list();
  std::vector<size_t> order(tokens.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  for (const char* kind : {"uniform", "moeshard-multinomial", "exponential"}) {
    auto a = route_all(*make(spec_of(kind, seed), 64, 2, 4), tokens, order);
    auto b = route_all(*make(spec_of(kind, seed + 1), 64, 2, 4), tokens, order);
    size_t differ = 0;
    for (size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i];
    EXPECT_GT(differ, a.size() / 2) << kind;
  }
}

// ---------------------------------------------------------------------------------------
// .npy reader and replay on hand-written files

std::string npy_bytes(const std::string& dict, const std::vector<int64_t>& values,
                      const std::string& magic = "\x93NUMPY", char major = 1) {
  std::string header = dict;
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = magic;
  out += major;
  out += '\0';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  for (int64_t v : values) {
    for (int b = 0; b < 8; ++b)
      out += static_cast<char>((static_cast<uint64_t>(v) >> (8 * b)) & 0xff);
  }
  return out;
}

fs::path write_router_file(const std::string& name, const std::string& bytes) {
  const fs::path p = router_temp_path(name);
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}

std::string shape_dict(const std::string& shape, const std::string& descr = "<i8",
                       const std::string& fortran = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
}

TEST(NpyReader, ReadsInt64Arrays) {
  const std::vector<int64_t> v = {0, 1, -2, 3, 1LL << 40, -(1LL << 50)};
  auto a =
      model::read_npy_i64(write_router_file("ok.npy", npy_bytes(shape_dict("(3, 2)"), v)).string());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(a->data, v);
  a = model::read_npy_i64(write_router_file("one.npy", npy_bytes(shape_dict("(6,)"), v)).string());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->shape, (std::vector<int64_t>{6}));
}

TEST(NpyReader, MalformedFilesNameTheFile) {
  const std::vector<int64_t> v = {0, 1, 2, 3, 4, 5};
  const std::string good = npy_bytes(shape_dict("(3, 2)"), v);
  struct Case {
    std::string name, bytes, message;
  };
  const std::vector<Case> cases = {
      {"bad_magic.npy", npy_bytes(shape_dict("(3, 2)"), v, "\x93NUMPx"), "bad magic"},
      {"f4.npy", npy_bytes(shape_dict("(3, 2)", "<f4"), v), "dtype '<f4' not supported"},
      {"be.npy", npy_bytes(shape_dict("(3, 2)", ">i8"), v), "dtype '>i8' not supported"},
      {"fortran.npy", npy_bytes(shape_dict("(3, 2)", "<i8", "True"), v), "fortran_order"},
      {"truncated.npy", good.substr(0, good.size() - 5), "truncated"},
      {"trailing.npy", good + "xx", "trailing bytes"},
      {"short_header.npy", good.substr(0, 40), "truncated header"},
      {"v2.npy", npy_bytes(shape_dict("(3, 2)"), v, "\x93NUMPY", 2), "version 2.0"},
      {"no_shape.npy", npy_bytes("{'descr': '<i8', 'fortran_order': False, }", v), "'shape'"},
      {"neg_shape.npy", npy_bytes(shape_dict("(-3, 2)"), v), "non-negative"},
      {"tiny.npy", "\x93NU", "bad magic"},
  };
  for (const Case& c : cases) {
    const fs::path p = write_router_file(c.name, c.bytes);
    auto a = model::read_npy_i64(p.string());
    ASSERT_FALSE(a.ok()) << c.name;
    EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(a.status().message(), HasSubstr(p.string())) << c.name;
    EXPECT_THAT(a.status().message(), HasSubstr(c.message)) << c.name << ": " << a.status();
  }
  auto missing = model::read_npy_i64(router_temp_path("missing.npy").string());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("missing.npy"));
}

// A [rows, 3] trace: column c holds (row · (c + 1)) mod E, so every id 0..E-1 occurs.
fs::path small_trace(int64_t rows, int64_t e) {
  std::vector<int64_t> v;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < 3; ++c) v.push_back(r * (c + 1) % e);
  }
  return write_router_file("trace_" + std::to_string(rows) + "_" + std::to_string(e) + ".npy",
                           npy_bytes(shape_dict("(" + std::to_string(rows) + ", 3)"), v));
}

TEST(ReplayNpyRouter, MapsTokensToRowsAndCoversEveryRowOnce) {
  const uint64_t seed = test_seed("router replay-npy small", 19);
  const int64_t rows = 1000, e = 7;
  const fs::path path = small_trace(rows, e);
  auto trace = model::read_npy_i64(path.string());
  ASSERT_TRUE(trace.ok());
  for (bool shuffle : {false, true}) {
    auto r = routing::ReplayNpyRouter::load(path.string(), e, 1, 5, seed, 10, shuffle);
    ASSERT_TRUE(r.ok()) << r.status();
    const routing::ReplayNpyRouter& router = **r;
    EXPECT_EQ(router.trace_token(3, 4), 34);
    EXPECT_EQ(router.trace_token(100, 5), 5);  // (1000 + 5) mod 1000
    EXPECT_EQ(router.trace_token(-1, 0), 990);
    for (int32_t b = 0; b < 5; ++b) {
      std::vector<int64_t> hist(e, 0), file_hist(e, 0), rows_seen(rows, 0);
      for (int64_t req = 0; req < 100; ++req) {
        for (int64_t pos = 0; pos < 10; ++pos) {
          int32_t id;
          float w;
          router.route(b, req, pos, &id, &w);
          EXPECT_EQ(w, 1.0f);
          const int64_t row = router.trace_row(b, router.trace_token(req, pos));
          if (!shuffle) {
            EXPECT_EQ(row, req * 10 + pos);
          }
          ++rows_seen[row];
          EXPECT_EQ(id, trace->data[row * 3 + b % 3]);
          ++hist[id];
        }
      }
      for (int64_t row = 0; row < rows; ++row) {
        EXPECT_EQ(rows_seen[row], 1) << "row " << row;
        ++file_hist[trace->data[row * 3 + b % 3]];
      }
      EXPECT_EQ(hist, file_hist) << "block " << b;
    }
  }
  // Shuffled blocks 0 and 3 read the same column through different permutations.
  auto r = routing::ReplayNpyRouter::load(path.string(), e, 1, 5, seed, 10, true);
  int64_t same = 0;
  for (int64_t t = 0; t < rows; ++t) same += (*r)->trace_row(0, t) == (*r)->trace_row(3, t);
  EXPECT_LT(same, 20);
}

TEST(ReplayNpyRouter, Errors) {
  const fs::path path = small_trace(50, 7);
  auto r = routing::ReplayNpyRouter::load(path.string(), 8, 1, 2, 0, 10, true);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr(path.string()));
  EXPECT_THAT(r.status().message(), HasSubstr("expert ids up to 6 (recorded with 7 experts)"));
  r = routing::ReplayNpyRouter::load(path.string(), 7, 2, 2, 0, 10, true);
  EXPECT_THAT(r.status().message(), HasSubstr("top-1"));
  r = routing::ReplayNpyRouter::load(path.string(), 7, 1, 2, 0, 0, true);
  EXPECT_FALSE(r.ok());
  const fs::path flat = write_router_file("flat.npy", npy_bytes(shape_dict("(3,)"), {0, 1, 2}));
  r = routing::ReplayNpyRouter::load(flat.string(), 3, 1, 2, 0, 10, true);
  EXPECT_THAT(r.status().message(), HasSubstr("2-D"));
  const fs::path neg = write_router_file("neg.npy", npy_bytes(shape_dict("(1, 2)"), {-1, 1}));
  r = routing::ReplayNpyRouter::load(neg.string(), 2, 1, 2, 0, 10, true);
  EXPECT_THAT(r.status().message(), HasSubstr("negative"));
  // An id past the model's experts, up to INT64_MAX (fuzz_npy found max_id + 1 overflowing).
  const fs::path huge = write_router_file(
      "huge.npy", npy_bytes(shape_dict("(1, 2)"), {0, std::numeric_limits<int64_t>::max()}));
  r = routing::ReplayNpyRouter::load(huge.string(), 8, 1, 2, 0, 10, true);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(),
              HasSubstr("expert id 9223372036854775807, but the model has 8 experts"));
  const fs::path over = write_router_file("over.npy", npy_bytes(shape_dict("(1, 2)"), {0, 8}));
  r = routing::ReplayNpyRouter::load(over.string(), 8, 1, 2, 0, 10, true);
  EXPECT_THAT(r.status().message(), HasSubstr("expert id 8, but the model has 8 experts"));
}

// ---------------------------------------------------------------------------------------
// Per-rank CSV on hand-written files

const char kCsvHeader[] =
    "model,num_experts,world_size,layer,iteration,src_rank,tokens_sent,expert_counts\n";

fs::path write_router_csv(const std::string& name, const std::string& body) {
  return write_router_file(name, std::string(kCsvHeader) + body);
}

TEST(PerRankRoutingCsv, LoadsAndValidates) {
  std::string body;
  for (int rank = 0; rank < 2; ++rank) {
    for (int layer = 0; layer < 2; ++layer) {
      body += "m/x,3,2," + std::to_string(layer) + ",0," + std::to_string(rank) + ",6," +
              std::to_string(rank + 1) + " " + std::to_string(layer + 2) + " " +
              std::to_string(3 - rank - layer) + "\n";
    }
  }
  body += "m/y,4,2,0,0,0,1,1 0 0 0\n";  // another expert count: skipped
  auto c = routing::load_per_rank_routing_csv(write_router_csv("ok.csv", body).string(), 3);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_ranks, 2);
  EXPECT_EQ(c->num_layers, 2);
  EXPECT_EQ(c->num_iterations, 1);
  EXPECT_EQ(c->model, "m/x");
  EXPECT_EQ(c->count(1, 1, 0, 0), 2);
  EXPECT_EQ(c->count(1, 1, 0, 2), 1);
  EXPECT_EQ(c->tokens(0, 1, 0), 6);
  EXPECT_EQ(c->layer_histogram(0), (std::vector<int64_t>{3, 4, 5}));

  struct Case {
    std::string name, body, message;
    absl::StatusCode code = absl::StatusCode::kInvalidArgument;
  };
  const std::vector<Case> cases = {
      {"sum.csv", "m,3,1,0,0,0,5,1 2 3\n", ":2: expert_counts sum to 6, but tokens_sent is 5"},
      {"len.csv", "m,3,1,0,0,0,3,1 2\n", ":2: expert_counts has 2 values, expected 3"},
      {"rank.csv", "m,3,1,0,0,1,3,1 1 1\n", "src_rank 1 is not below world_size 1"},
      {"dup.csv", "m,3,1,0,0,0,3,1 1 1\nm,3,1,0,0,0,3,1 1 1\n", ":3: duplicate row"},
      {"gap.csv", "m,3,1,1,0,0,3,1 1 1\n", "no row for rank 0, layer 0, iteration 0"},
      {"word.csv", "m,3,1,zero,0,0,3,1 1 1\n", "column 'layer': 'zero'"},
      {"neg.csv", "m,3,1,0,0,0,3,1 -1 3\n", "'-1' is not a non-negative integer"},
      {"fields.csv", "m,3,1,0,0,0,3\n", "expected 8 fields"},
      {"world.csv", "m,3,1,0,0,0,3,1 1 1\nm,3,2,1,0,0,3,1 1 1\n", ":3: model/world_size"},
      {"none.csv", "m,4,1,0,0,0,1,1 0 0 0\n", "no rows with num_experts=3 (the file has 4)",
       absl::StatusCode::kNotFound},
  };
  for (const Case& k : cases) {
    const fs::path p = write_router_csv(k.name, k.body);
    auto r = routing::load_per_rank_routing_csv(p.string(), 3);
    ASSERT_FALSE(r.ok()) << k.name;
    EXPECT_EQ(r.status().code(), k.code) << k.name << ": " << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr(p.string())) << k.name;
    EXPECT_THAT(r.status().message(), HasSubstr(k.message)) << k.name << ": " << r.status();
  }
  const fs::path no_col = write_router_file("nocol.csv", "model,num_experts\nm,3\n");
  EXPECT_THAT(routing::load_per_rank_routing_csv(no_col.string(), 3).status().message(),
              HasSubstr(":1: missing column 'world_size'"));
}

// ---------------------------------------------------------------------------------------
// Real traces (../shared/data/routing)

bool have_routing_data() { return fs::exists(kRoutingDir / "switch-base-per-rank-bookcorpus.csv"); }

#define SKIP_WITHOUT_DATA()                                                     \
  do {                                                                          \
    if (!have_routing_data()) {                                                 \
      GTEST_SKIP() << "routing traces not found under " << kRoutingDir.string() \
                   << " (MUFLOW_DATA_DIR)";                                     \
    }                                                                           \
  } while (0)

TEST(RealTraces, PerRankCsvTotals) {
  SKIP_WITHOUT_DATA();
  for (int64_t e : {8, 16, 32, 64, 128}) {
    auto c = routing::load_per_rank_routing_csv(
        (kRoutingDir / "switch-base-per-rank-bookcorpus.csv").string(), e);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->model, "google/switch-base-" + std::to_string(e));
    EXPECT_EQ(c->num_ranks, 8);
    EXPECT_EQ(c->num_layers, 12);
    EXPECT_EQ(c->num_iterations, 2);
    for (int64_t r = 0; r < 8; ++r) {
      for (int64_t l = 0; l < 12; ++l) {
        for (int64_t it = 0; it < 2; ++it) {
          int64_t sum = 0;
          for (int64_t x = 0; x < e; ++x) sum += c->count(r, l, it, x);
          EXPECT_EQ(sum, c->tokens(r, l, it));
          // The data README: encoder layers 0-5 route 5,100 tokens per rank; 6-11 are decoder.
          EXPECT_EQ(c->tokens(r, l, it), l < 6 ? 5100 : 85) << e << " " << r << " " << l;
        }
      }
    }
  }
}

TEST(RealTraces, ReplayNpyReproducesPerLayerLoadsExactly) {
  SKIP_WITHOUT_DATA();
  const uint64_t seed = test_seed("router replay-npy real", 20);
  const int64_t e = 128;
  routing::RouterSpec s = spec_of("replay-npy", seed);
  s.trace_file = (kRoutingDir / "switch-base-{E}-bookcorpus.npy").string();
  auto r = make(s, e, 1, 12);
  ASSERT_NE(r, nullptr);
  const auto* replay = dynamic_cast<const routing::ReplayNpyRouter*>(r.get());
  ASSERT_NE(replay, nullptr);
  ASSERT_EQ(replay->num_rows(), 40800);
  ASSERT_EQ(replay->num_columns(), 6);
  auto csv = routing::load_per_rank_routing_csv(
      (kRoutingDir / "switch-base-per-rank-bookcorpus.csv").string(), e);
  ASSERT_TRUE(csv.ok());
  const model::NpyInt64Array& trace = replay->trace();
  for (int32_t b = 0; b < 12; ++b) {
    std::vector<int64_t> hist(e, 0), file_hist(e, 0);
    int32_t id;
    float w;
    for (int64_t req = 0; req < 680; ++req) {  // 680 samples × 60 tokens: every row once
      for (int64_t pos = 0; pos < 60; ++pos) {
        r->route(b, req, pos, &id, &w);
        ++hist[id];
        if (pos == 17) {
          const int64_t row = replay->trace_row(b, replay->trace_token(req, pos));
          EXPECT_EQ(id, trace.data[row * 6 + b % 6]);
        }
      }
    }
    for (int64_t row = 0; row < 40800; ++row) ++file_hist[trace.data[row * 6 + b % 6]];
    EXPECT_EQ(hist, file_hist) << "block " << b;
    // The .npy columns were rebuilt from the CSV's iteration 0, summed over the 8 ranks.
    EXPECT_EQ(hist, csv->layer_histogram(b % 6, 0)) << "block " << b;
  }
  // The Switch-8 trace with a 128-expert model is refused.
  absl::StatusOr<std::unique_ptr<routing::RouterModel>> wrong =
      routing::make_router_model(s, 8, 1, 6);
  ASSERT_TRUE(wrong.ok());  // {E} → 8: the Switch-8 file, consistent
  s.trace_file = (kRoutingDir / "switch-base-8-bookcorpus.npy").string();
  wrong = routing::make_router_model(s, 16, 1, 6);
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(wrong.status().message(), HasSubstr("switch-base-8-bookcorpus.npy"));
  EXPECT_THAT(wrong.status().message(), HasSubstr("recorded with 8 experts"));
}

TEST(RealTraces, PerRankRouterMatchesAggregatedDistribution) {
  SKIP_WITHOUT_DATA();
  const uint64_t seed = test_seed("router replay-per-rank", 21);
  const int64_t e = 64;
  routing::RouterSpec s = spec_of("replay-per-rank", seed);
  s.trace_file = (kRoutingDir / "switch-base-per-rank-bookcorpus.csv").string();
  auto r = make(s, e, 1, 6);
  ASSERT_NE(r, nullptr);
  auto csv = routing::load_per_rank_routing_csv(s.trace_file, e);
  ASSERT_TRUE(csv.ok());
  const int64_t n = 200000;
  for (int32_t b : {1, 3}) {
    const std::vector<int64_t> h = csv->layer_histogram(b);
    std::vector<double> p(h.begin(), h.end());
    for (double& x : p) x /= 81600.0;  // 8 ranks × 2 iterations × 5,100 tokens
    const std::vector<int64_t> c = slot0_counts(*r, b, n);
    expect_matches(c, p, n, "replay-per-rank block " + std::to_string(b));
    for (int64_t x = 0; x < e; ++x) {
      if (h[x] == 0) {
        EXPECT_EQ(c[x], 0) << "expert " << x << " never chosen in the trace";
      }
    }
  }
  // Top-4 from the same distribution: distinct experts.
  auto r4 = make(s, e, 4, 6);
  int32_t ids[4];
  float w[4];
  for (int64_t i = 0; i < 1000; ++i) {
    r4->route(static_cast<int32_t>(i % 6), i, 0, ids, w);
    std::sort(ids, ids + 4);
    ASSERT_EQ(std::adjacent_find(ids, ids + 4), ids + 4);
  }
  s.trace_layers = 13;
  EXPECT_THAT(routing::make_router_model(s, e, 1, 6).status().message(), HasSubstr("trace_layers"));
}

}  // namespace
}  // namespace muflow::engine
