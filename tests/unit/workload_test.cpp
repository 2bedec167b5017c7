// Request sources: text and id prompts, Poisson arrivals and the Azure trace reader.

#include "engine/serving/workload.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/serving/azure_trace.hpp"
#include "engine/serving/request_source.hpp"
#include "engine/splitmix64.hpp"

namespace muflow::engine {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string workload_msg(const absl::Status& status) { return std::string(status.message()); }

fs::path scratch_file(const std::string& name, const std::string& text) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const fs::path dir =
      fs::temp_directory_path() / (std::string("muflow_workload_test_") + info->name());
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << text;
  return dir / name;
}

// A stand-in tokenizer: BOS then one id per byte (byte + 3).
std::vector<int32_t> byte_encode(const std::string& text) {
  std::vector<int32_t> ids = {1};
  for (unsigned char c : text) ids.push_back(static_cast<int32_t>(c) + 3);
  return ids;
}

topology::WorkloadSpec poisson_spec(uint64_t seed, int64_t num_requests) {
  topology::WorkloadSpec spec;
  spec.kind = "poisson";
  spec.num_requests = num_requests;
  spec.rate_per_s = 4.0;
  spec.input_min = 8;
  spec.input_max = 10;
  spec.output_min = 5;
  spec.output_max = 40;
  spec.max_new_tokens = 0;
  spec.seed = seed;
  return spec;
}

TEST(Workload, IdPrompts) {
  topology::WorkloadSpec spec;
  spec.kind = "ids";
  spec.prompt_ids = {{1, 5, 6}, {1, 7}};
  spec.max_new_tokens = 4;
  absl::StatusOr<std::vector<serving::Request>> reqs = serving::make_requests(spec, 16, nullptr);
  ASSERT_TRUE(reqs.ok()) << reqs.status();
  ASSERT_EQ(reqs->size(), 2u);
  EXPECT_EQ((*reqs)[1].id, 1);
  EXPECT_EQ((*reqs)[1].prompt, (std::vector<int32_t>{1, 7}));
  EXPECT_EQ((*reqs)[0].max_new_tokens, 4);
  EXPECT_DOUBLE_EQ((*reqs)[0].arrival_s, 0.0);

  spec.prompt_ids = {{1, 2}, {1, 5, 16}};
  absl::StatusOr<std::vector<serving::Request>> bad = serving::make_requests(spec, 16, nullptr);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(workload_msg(bad.status()),
              HasSubstr("workload.prompts[1]: position 2: token id 16 is outside the "
                        "vocabulary [0, 16)"));
}

TEST(Workload, TextPromptsFromFileSkipEmptyLines) {
  const fs::path file = scratch_file("p.txt", "In the beginning\r\n\n   \nAnd God said\n");
  topology::WorkloadSpec spec;
  spec.kind = "prompts";
  spec.prompts_file = file.string();
  spec.max_new_tokens = 3;
  absl::StatusOr<std::vector<serving::Request>> reqs =
      serving::make_requests(spec, 300, byte_encode);
  ASSERT_TRUE(reqs.ok()) << reqs.status();
  ASSERT_EQ(reqs->size(), 2u);
  EXPECT_EQ((*reqs)[0].prompt_text, "In the beginning");
  EXPECT_EQ((*reqs)[1].prompt_text, "And God said");
  EXPECT_EQ((*reqs)[1].prompt, byte_encode("And God said"));
  EXPECT_EQ((*reqs)[1].max_new_tokens, 3);

  // An id outside the vocabulary names the file and line of the prompt.
  absl::StatusOr<std::vector<serving::Request>> small =
      serving::make_requests(spec, 50, byte_encode);
  ASSERT_FALSE(small.ok());
  EXPECT_THAT(workload_msg(small.status()),
              HasSubstr(file.string() + ":1: position 1: token id 76"));
}

TEST(Workload, TextPromptsNeedATokenizer) {
  topology::WorkloadSpec spec;
  spec.kind = "prompts";
  spec.prompts = {"hello"};
  absl::StatusOr<std::vector<serving::Request>> reqs = serving::make_requests(spec, 300, nullptr);
  ASSERT_FALSE(reqs.ok());
  EXPECT_THAT(workload_msg(reqs.status()),
              HasSubstr("model has no tokenizer.model; give token ids"));
}

TEST(Workload, MissingPromptsFile) {
  topology::WorkloadSpec spec;
  spec.kind = "prompts";
  spec.prompts_file = "/nonexistent/prompts.txt";
  absl::StatusOr<std::vector<serving::Request>> reqs =
      serving::make_requests(spec, 300, byte_encode);
  ASSERT_FALSE(reqs.ok());
  EXPECT_EQ(reqs.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(workload_msg(reqs.status()), HasSubstr("/nonexistent/prompts.txt"));
}

// Seed for the statistical test: 12345, or MUFLOW_TEST_SEED when set. Printed.
uint64_t test_seed() {
  const char* env = std::getenv("MUFLOW_TEST_SEED");
  const uint64_t seed = env != nullptr ? std::strtoull(env, nullptr, 10) : 12345;
  std::printf("poisson seed %llu (override with MUFLOW_TEST_SEED)\n",
              static_cast<unsigned long long>(seed));
  return seed;
}

TEST(Workload, PoissonRateLengthsAndIds) {
  const uint64_t seed = test_seed();
  const int64_t n = 20000;
  absl::StatusOr<std::vector<serving::Request>> reqs =
      serving::make_requests(poisson_spec(seed, n), 64, nullptr);
  ASSERT_TRUE(reqs.ok()) << reqs.status();
  ASSERT_EQ(static_cast<int64_t>(reqs->size()), n);
  std::vector<double> gaps;
  double prev = 0.0;
  bool saw_min = false, saw_max = false;
  for (size_t i = 0; i < reqs->size(); ++i) {
    const serving::Request& r = (*reqs)[i];
    EXPECT_EQ(r.id, static_cast<int64_t>(i));
    ASSERT_GE(r.arrival_s, prev);
    gaps.push_back(r.arrival_s - prev);
    prev = r.arrival_s;
    ASSERT_GE(r.prompt.size(), 8u);
    ASSERT_LE(r.prompt.size(), 10u);
    saw_min |= r.prompt.size() == 8u;
    saw_max |= r.prompt.size() == 10u;
    ASSERT_GE(r.max_new_tokens, 5);
    ASSERT_LE(r.max_new_tokens, 40);
    for (int32_t id : r.prompt) {
      ASSERT_GE(id, 3);
      ASSERT_LT(id, 64);
    }
  }
  EXPECT_TRUE(saw_min && saw_max);
  // Exponential gaps with mean 0.25 s: the sample mean has sd 0.25 / sqrt(n) = 0.0018, so
  // +-5% is about 7 sd; the sample sd of an exponential equals its mean (+-10% is > 8 sd).
  const double mean = std::accumulate(gaps.begin(), gaps.end(), 0.0) / n;
  double var = 0.0;
  for (double g : gaps) var += (g - mean) * (g - mean);
  const double sd = std::sqrt(var / (n - 1));
  EXPECT_NEAR(mean, 0.25, 0.25 * 0.05);
  EXPECT_NEAR(sd, 0.25, 0.25 * 0.10);
}

TEST(Workload, PoissonIsDeterministicPerSeed) {
  absl::StatusOr<std::vector<serving::Request>> a =
      serving::make_requests(poisson_spec(7, 50), 512, nullptr);
  absl::StatusOr<std::vector<serving::Request>> b =
      serving::make_requests(poisson_spec(7, 50), 512, nullptr);
  absl::StatusOr<std::vector<serving::Request>> c =
      serving::make_requests(poisson_spec(8, 50), 512, nullptr);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  bool any_difference = false;
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i].arrival_s, (*b)[i].arrival_s);
    EXPECT_EQ((*a)[i].prompt, (*b)[i].prompt);
    EXPECT_EQ((*a)[i].max_new_tokens, (*b)[i].max_new_tokens);
    any_difference |= (*a)[i].arrival_s != (*c)[i].arrival_s || (*a)[i].prompt != (*c)[i].prompt;
  }
  EXPECT_TRUE(any_difference);
}

TEST(Workload, PoissonClampsOutputsAndNeedsARealVocab) {
  topology::WorkloadSpec spec = poisson_spec(3, 200);
  spec.max_new_tokens = 10;
  absl::StatusOr<std::vector<serving::Request>> reqs = serving::make_requests(spec, 512, nullptr);
  ASSERT_TRUE(reqs.ok());
  for (const serving::Request& r : *reqs) EXPECT_LE(r.max_new_tokens, 10);
  absl::StatusOr<std::vector<serving::Request>> tiny = serving::make_requests(spec, 3, nullptr);
  ASSERT_FALSE(tiny.ok());
  EXPECT_THAT(workload_msg(tiny.status()), HasSubstr("vocab_size 3 is too small"));
}

TEST(AzureTrace, TimestampParsing) {
  absl::StatusOr<int64_t> ns = serving::parse_trace_timestamp_ns("2023-11-16 18:15:46.6805900");
  ASSERT_TRUE(ns.ok()) << ns.status();
  EXPECT_EQ(*ns, int64_t{1700158546680590000});  // from Python's datetime, UTC
  absl::StatusOr<int64_t> leap = serving::parse_trace_timestamp_ns("2024-02-29T00:00:00");
  ASSERT_TRUE(leap.ok());
  EXPECT_EQ(*leap, int64_t{1709164800} * 1000000000);
  EXPECT_FALSE(serving::parse_trace_timestamp_ns("2023-02-29 00:00:00").ok());
  EXPECT_FALSE(serving::parse_trace_timestamp_ns("2023-11-16 18:15").ok());
  EXPECT_FALSE(serving::parse_trace_timestamp_ns("2023-11-16 18:15:46.").ok());
  EXPECT_THAT(workload_msg(serving::parse_trace_timestamp_ns("yesterday").status()),
              HasSubstr("expected YYYY-MM-DD HH:MM:SS[.fraction]"));
  // #15: nanoseconds since 1970 overflow int64 in 2262; such dates are refused, not wrapped.
  absl::StatusOr<int64_t> last = serving::parse_trace_timestamp_ns("2261-12-31 23:59:59");
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_GT(*last, 0);
  EXPECT_THAT(workload_msg(serving::parse_trace_timestamp_ns("2263-01-01 00:00:00").status()),
              HasSubstr("date or time out of range (years 1970 to 2261)"));
}

// #15: a CSV saved by a spreadsheet starts with a UTF-8 byte-order mark; the header still reads.
TEST(AzureTrace, ByteOrderMarkBeforeTheHeader) {
  absl::StatusOr<std::vector<serving::TraceRow>> rows = serving::parse_azure_trace(
      "\xEF\xBB\xBFTIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,48,10\n",
      "t.csv", 0);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].context_tokens, 48);
}

// #15: a row's token counts become prompts: bounded before anything is built for them.
TEST(AzureTrace, HugeTokenCountsAreRefusedWithTheirLine) {
  const std::string header = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
  absl::StatusOr<std::vector<serving::TraceRow>> rows = serving::parse_azure_trace(
      header + "2023-11-16 18:17:03.9799600,1000000000000000,10\n", "t.csv", 0);
  ASSERT_FALSE(rows.ok());
  EXPECT_THAT(workload_msg(rows.status()),
              HasSubstr("t.csv:2: column ContextTokens: expected at most 16777216 tokens, got "
                        "'1000000000000000'"));
}

TEST(AzureTrace, MalformedRowNamesFileAndLine) {
  const std::string header = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
  const std::string good = "2023-11-16 18:17:03.9799600,4808,10\n";
  absl::StatusOr<std::vector<serving::TraceRow>> fields =
      serving::parse_azure_trace(header + good + "2023-11-16 18:17:04.0,12\n", "t.csv", 0);
  ASSERT_FALSE(fields.ok());
  EXPECT_EQ(workload_msg(fields.status()),
            "t.csv:3: expected 3 comma-separated fields, got 2 in '2023-11-16 18:17:04.0,12'");
  absl::StatusOr<std::vector<serving::TraceRow>> count =
      serving::parse_azure_trace(header + good + "\n2023-11-16 18:17:04.0,x12,3\n", "t.csv", 0);
  ASSERT_FALSE(count.ok());
  EXPECT_THAT(workload_msg(count.status()),
              HasSubstr("t.csv:4: column ContextTokens: expected a positive integer, got 'x12'"));
  absl::StatusOr<std::vector<serving::TraceRow>> stamp =
      serving::parse_azure_trace(header + "2023-13-16 18:17:04.0,1,3\n", "t.csv", 0);
  ASSERT_FALSE(stamp.ok());
  EXPECT_THAT(workload_msg(stamp.status()), HasSubstr("t.csv:2: column TIMESTAMP"));
  absl::StatusOr<std::vector<serving::TraceRow>> no_header =
      serving::parse_azure_trace(good, "t.csv", 0);
  ASSERT_FALSE(no_header.ok());
  EXPECT_THAT(workload_msg(no_header.status()), HasSubstr("t.csv:1: header must name the columns"));

  // Through make_requests the message names the real file.
  const fs::path file = scratch_file("bad.csv", header + good + good + "2023-11-16,1\n");
  topology::WorkloadSpec spec;
  spec.kind = "trace";
  spec.trace_file = file.string();
  absl::StatusOr<std::vector<serving::Request>> reqs = serving::make_requests(spec, 512, nullptr);
  ASSERT_FALSE(reqs.ok());
  EXPECT_THAT(workload_msg(reqs.status()), HasSubstr(file.string() + ":4: expected 3"));
}

TEST(AzureTrace, ArrivalsAreRelativeToTheEarliestRow) {
  const std::string text =
      "ContextTokens,TIMESTAMP,GeneratedTokens\r\n"
      "5,2023-11-16 18:00:01.5,7\r\n"
      "6,2023-11-16 18:00:00.5,8\r\n"
      "9,2023-11-16 18:00:03,2";  // no final newline
  absl::StatusOr<std::vector<serving::TraceRow>> rows =
      serving::parse_azure_trace(text, "t.csv", 0);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_DOUBLE_EQ((*rows)[0].arrival_s, 1.0);
  EXPECT_DOUBLE_EQ((*rows)[1].arrival_s, 0.0);
  EXPECT_DOUBLE_EQ((*rows)[2].arrival_s, 2.5);
  EXPECT_EQ((*rows)[2].context_tokens, 9);
  EXPECT_EQ((*rows)[2].line, 4);

  const fs::path file = scratch_file("t.csv", text);
  topology::WorkloadSpec spec;
  spec.kind = "trace";
  spec.trace_file = file.string();
  spec.time_scale = 2.0;
  spec.max_new_tokens = 0;
  absl::StatusOr<std::vector<serving::Request>> reqs = serving::make_requests(spec, 512, nullptr);
  ASSERT_TRUE(reqs.ok()) << reqs.status();
  ASSERT_EQ(reqs->size(), 3u);
  EXPECT_EQ((*reqs)[0].prompt.size(), 6u);  // sorted by arrival
  EXPECT_DOUBLE_EQ((*reqs)[1].arrival_s, 2.0);
  EXPECT_DOUBLE_EQ((*reqs)[2].arrival_s, 5.0);
  EXPECT_EQ((*reqs)[2].max_new_tokens, 2);
}

// A trace's prompts are drawn from one SplitMix64(seed) stream in file order, whatever order
// the rows arrive in: the source, which makes each request when taken (by arrival), must draw
// row i's prompt at the stream position after the rows before it in the file.
TEST(RequestSource, TracePromptsFollowFileOrderWhenRowsArriveOutOfOrder) {
  const std::string text =
      "TIMESTAMP,ContextTokens,GeneratedTokens\n"
      "2023-11-16 18:00:03,4,7\n"
      "2023-11-16 18:00:01,3,8\n"
      "2023-11-16 18:00:02,5,2\n"
      "2023-11-16 18:00:01,2,1\n";
  const fs::path file = scratch_file("t.csv", text);
  topology::WorkloadSpec spec;
  spec.kind = "trace";
  spec.trace_file = file.string();
  spec.time_scale = 1.0;
  spec.max_new_tokens = 0;
  spec.seed = 99;
  const int64_t vocab = 1000;
  // Expected prompts, row by row in file order from one stream.
  SplitMix64 rng(spec.seed);
  std::vector<std::vector<int32_t>> by_row;
  for (int64_t len : {4, 3, 5, 2}) {
    std::vector<int32_t> ids;
    for (int64_t j = 0; j < len; ++j) ids.push_back(static_cast<int32_t>(rng.uniform_int(3, vocab - 1)));
    by_row.push_back(ids);
  }
  absl::StatusOr<serving::RequestSourcePtr> source = serving::make_request_source(spec, vocab, nullptr);
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ((*source)->remaining(), 4);
  // Arrival order, ties in file order: rows 1 and 3 (t = 0), row 2 (1 s), row 0 (2 s).
  const std::vector<size_t> order = {1, 3, 2, 0};
  for (size_t k = 0; k < order.size(); ++k) {
    std::optional<serving::Request> r = (*source)->next();
    ASSERT_TRUE(r.has_value()) << k;
    EXPECT_EQ(r->id, static_cast<int64_t>(k));
    EXPECT_EQ(r->prompt, by_row[order[k]]) << "request " << k << " (file row " << order[k] << ")";
  }
  EXPECT_EQ((*source)->remaining(), 0);
  EXPECT_FALSE((*source)->next().has_value());
}

// A Poisson source holds no requests: the largest workload a topology may declare is a source
// at once, and its first requests are those of a small workload with the same seed (each
// request's draws come after those of the requests before it).
TEST(RequestSource, PoissonMakesEachRequestWhenTaken) {
  absl::StatusOr<serving::RequestSourcePtr> big = serving::make_request_source(
      poisson_spec(7, topology::kMaxWorkloadRequests), 512, nullptr);
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ((*big)->remaining(), topology::kMaxWorkloadRequests);
  absl::StatusOr<std::vector<serving::Request>> small =
      serving::make_requests(poisson_spec(7, 50), 512, nullptr);
  ASSERT_TRUE(small.ok()) << small.status();
  for (const serving::Request& want : *small) {
    std::optional<serving::Request> got = (*big)->next();
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->id, want.id);
    EXPECT_EQ(got->arrival_s, want.arrival_s);
    EXPECT_EQ(got->prompt, want.prompt);
    EXPECT_EQ(got->max_new_tokens, want.max_new_tokens);
  }
  EXPECT_EQ((*big)->remaining(), topology::kMaxWorkloadRequests - 50);
  // One request more as a list is refused before anything is allocated; the source takes it.
  EXPECT_THAT(workload_msg(serving::make_requests(
                               poisson_spec(7, topology::kMaxWorkloadRequests + 1), 512, nullptr)
                               .status()),
              HasSubstr("a list holds at most 10000000"));
  EXPECT_TRUE(serving::make_request_source(poisson_spec(7, topology::kMaxWorkloadRequests + 1),
                                           512, nullptr)
                  .ok());
  // Bad parameters fail when the source is made, before any request.
  topology::WorkloadSpec bad = poisson_spec(7, 10);
  bad.input_min = 0;
  EXPECT_THAT(workload_msg(serving::make_request_source(bad, 512, nullptr).status()),
              HasSubstr("1 <= min <= max"));
}

TEST(AzureTrace, RealCodeTrace) {
  const fs::path file = fs::path(MUFLOW_DATA_DIR) / "requests" /
                        "azure-llm-inference-2023-code.csv";
  if (!fs::exists(file)) GTEST_SKIP() << "needs " << file << " (shared data is absent)";
  absl::StatusOr<std::vector<serving::TraceRow>> rows = serving::read_azure_trace(file.string(), 0);
  ASSERT_TRUE(rows.ok()) << rows.status();
  // 8,819 data rows after the header (the data README says 8,818; Python's csv module
  // counts 8,819 too).
  ASSERT_EQ(rows->size(), 8819u);
  EXPECT_DOUBLE_EQ(rows->front().arrival_s, 0.0);
  EXPECT_EQ(rows->front().context_tokens, 4808);
  EXPECT_EQ(rows->front().generated_tokens, 10);
  for (size_t i = 1; i < rows->size(); ++i) {
    ASSERT_GE((*rows)[i].arrival_s, (*rows)[i - 1].arrival_s) << "row " << i;
  }
  // 18:17:03.9799600 to 19:14:19.9280160: 57 min 15.948056 s.
  EXPECT_NEAR(rows->back().arrival_s, 3435.948056, 1e-6);

  topology::WorkloadSpec spec;
  spec.kind = "trace";
  spec.trace_file = file.string();
  spec.time_scale = 0.1;
  spec.max_requests = 100;
  spec.max_prompt_tokens = 256;
  spec.max_new_tokens = 8;
  spec.seed = 5;
  absl::StatusOr<std::vector<serving::Request>> reqs = serving::make_requests(spec, 4096, nullptr);
  ASSERT_TRUE(reqs.ok()) << reqs.status();
  ASSERT_EQ(reqs->size(), 100u);
  EXPECT_EQ((*reqs)[0].prompt.size(), 256u);  // 4808 clamped
  EXPECT_EQ((*reqs)[0].max_new_tokens, 8);    // 10 clamped
  EXPECT_NEAR((*reqs)[99].arrival_s, (*rows)[99].arrival_s * 0.1, 1e-12);
}

}  // namespace
}  // namespace muflow::engine
