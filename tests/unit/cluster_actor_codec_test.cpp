// The data-plane form of actor messages (actors/cluster/actor_codec.hpp): every message kind
// that crosses processes round-trips bit for bit (activations, logits and K/V rows as raw f32,
// -0.0 and NaN payloads included); every truncation and a flipped count are rejected with an
// error and never read past the buffers; limits hold before allocation; messages without a
// wire form are refused. The data plane's one-buffer form (`encode_actor_frame`) holds the
// same bytes.

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "actors/cluster/actor_codec.hpp"
#include "actors/collective.hpp"
#include "actors/messages.hpp"
#include "caf/binary_serializer.hpp"

namespace muflow::actors::cluster {
namespace {

using engine::dataflow::Activations;
using engine::dataflow::StageKind;
using engine::dataflow::TokenBatch;
using engine::dataflow::TokenBatchPtr;

// A batch of `rows` rows of `width` values whose bit patterns include -0, a NaN payload and
// a subnormal (what CAF's own float packing would not keep).
TokenBatchPtr batch(int rows, int width, int32_t block = 1) {
  auto b = std::make_shared<TokenBatch>();
  b->layer = {StageKind::kExpert, block, 2};
  b->payload = engine::dataflow::Payload::kExpertInputs;
  b->iteration = 7;
  b->act = std::make_shared<Activations>(rows, width);
  for (int r = 0; r < rows; ++r) {
    engine::dataflow::TokenMeta m;
    m.request_id = 100 + r;
    m.position = r;
    m.token_id = 3 * r;
    m.topk_rank = r % 2;
    m.topk_weight = 0.25f + r;
    b->tokens.push_back(m);
    for (int c = 0; c < width; ++c) b->act->row(r)[c] = 0.5f * r - 0.125f * c;
  }
  if (rows > 0 && width > 2) {
    b->act->row(0)[0] = -0.0f;
    b->act->row(0)[1] = std::bit_cast<float>(0x7fc00123u);
    b->act->row(0)[2] = std::numeric_limits<float>::denorm_min();
  }
  return b;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

void expect_same_batch(const TokenBatch& a, const TokenBatch& b) {
  EXPECT_EQ(a.layer.kind, b.layer.kind);
  EXPECT_EQ(a.layer.block, b.layer.block);
  EXPECT_EQ(a.layer.index, b.layer.index);
  EXPECT_EQ(a.iteration, b.iteration);
  ASSERT_EQ(a.tokens.size(), b.tokens.size());
  for (size_t i = 0; i < a.tokens.size(); ++i) {
    EXPECT_EQ(a.tokens[i].request_id, b.tokens[i].request_id);
    EXPECT_EQ(std::bit_cast<uint32_t>(a.tokens[i].topk_weight),
              std::bit_cast<uint32_t>(b.tokens[i].topk_weight));
  }
  ASSERT_EQ(static_cast<bool>(a.act), static_cast<bool>(b.act));
  if (a.act) {
    EXPECT_EQ(a.act->width, b.act->width);
    EXPECT_TRUE(same_bits(a.act->data, b.act->data));
  }
}

// Every cut of `enc`'s header or payload, a trailing header byte and a trailing payload byte
// are refused (each cut copied, so ASan sees any overread).
void expect_every_cut_refused(const EncodedMessage& enc) {
  for (size_t n = 0; n < enc.header.size(); ++n) {
    std::vector<char> h(enc.header.begin(), enc.header.begin() + static_cast<long>(n));
    EXPECT_FALSE(decode_actor_message(h, enc.payload).ok()) << "header cut at " << n;
  }
  for (size_t n = 0; n < enc.payload.size(); ++n) {
    std::vector<char> p(enc.payload.begin(), enc.payload.begin() + static_cast<long>(n));
    EXPECT_FALSE(decode_actor_message(enc.header, p).ok()) << "payload cut at " << n;
  }
  std::vector<char> longer = enc.header;
  longer.push_back(0);
  EXPECT_FALSE(decode_actor_message(longer, enc.payload).ok()) << "a trailing header byte";
  std::vector<char> more = enc.payload;
  more.push_back(0);
  EXPECT_FALSE(decode_actor_message(enc.header, more).ok()) << "a trailing payload byte";
}

DecodedMessage round_trip(const ActorAddress& to, const caf::message& m) {
  auto enc = encode_actor_message(to, m.content());
  EXPECT_TRUE(enc.ok()) << enc.status();
  if (!enc.ok()) return {};
  // The data plane's one-buffer form: the same header and payload bytes after `front` zeros.
  constexpr size_t kFront = 5;
  auto frame = encode_actor_frame(to, m.content(), kFront);
  EXPECT_TRUE(frame.ok()) << frame.status();
  if (frame.ok()) {
    EXPECT_EQ(frame->header_bytes, enc->header.size());
    EXPECT_EQ(frame->payload_bytes, enc->payload.size());
    std::vector<char> want(kFront, 0);
    want.insert(want.end(), enc->header.begin(), enc->header.end());
    want.insert(want.end(), enc->payload.begin(), enc->payload.end());
    EXPECT_TRUE(frame->bytes == want) << "the one-buffer frame differs from header + payload";
  }
  auto dec = decode_actor_message(enc->header, enc->payload);
  EXPECT_TRUE(dec.ok()) << dec.status();
  if (!dec.ok()) return {};
  EXPECT_EQ(dec->to, to);
  return *dec;
}

TEST(ClusterActorCodec, TokenBatchRoundTripsBitForBit) {
  TokenBatchPtr b = batch(3, 8);
  const ActorAddress to{ActorRole::kExpert, 1, 2};
  DecodedMessage d = round_trip(to, caf::make_message(batch_atom::value, b));
  ASSERT_TRUE((d.message.match_elements<batch_atom, TokenBatchPtr>()));
  expect_same_batch(*b, *d.message.get_as<TokenBatchPtr>(1));
}

// A contribution of `source` for `iteration`: `parts` in ascending destination order.
ContributionPtr contribution(int64_t iteration, int32_t source,
                             std::vector<std::pair<int32_t, TokenBatchPtr>> parts) {
  auto c = std::make_shared<Contribution>();
  c->iteration = iteration;
  c->source = source;
  for (auto& [dst, part] : parts) {
    c->dests.push_back(dst);
    c->parts.push_back(std::move(part));
  }
  return c;
}

TEST(ClusterActorCodec, ContributionRoundTripsItsParts) {
  ContributionPtr c = contribution(9, 1, {{0, batch(1, 4, 0)}, {3, batch(2, 4, 0)}});
  DecodedMessage d =
      round_trip({ActorRole::kDispatch, 0, 0}, caf::make_message(contrib_atom::value, c));
  ASSERT_TRUE((d.message.match_elements<contrib_atom, ContributionPtr>()));
  const Contribution& got = *d.message.get_as<ContributionPtr>(1);
  EXPECT_EQ(got.iteration, 9);
  EXPECT_EQ(got.source, 1);
  EXPECT_EQ(got.dests, (std::vector<int32_t>{0, 3}));
  ASSERT_EQ(got.parts.size(), 2u);
  expect_same_batch(*c->parts[0], *got.parts[0]);
  expect_same_batch(*c->parts[1], *got.parts[1]);
}

// The wire carries the split form only: a whole contribution (actors/contribution.hpp) would
// cross with no parts and lose its rows, so it is refused (a replica splits it first).
TEST(ClusterActorCodec, AWholeContributionIsRefused) {
  auto c = std::make_shared<Contribution>();
  c->iteration = 4;
  c->source = 2;
  c->whole = batch(3, 4, 0);
  c->row_dest = {0, 2, 0};
  auto enc =
      encode_actor_message({ActorRole::kDispatch, 0, 0},
                           caf::make_message(contrib_atom::value, ContributionPtr(c)).content());
  ASSERT_FALSE(enc.ok());
  EXPECT_NE(enc.status().message().find("whole contribution"), std::string::npos) << enc.status();
}

// A process's contributions to one iteration of a collective cross together (#18).
TEST(ClusterActorCodec, ContributionBundleRoundTripsEveryContribution) {
  auto bundle = std::make_shared<ContributionBundle>();
  bundle->contributions = {contribution(7, 2, {{0, batch(2, 4)}, {2, batch(1, 4)}}),
                           contribution(7, 3, {}),  // no parts: a source that sends nothing
                           contribution(7, 5, {{1, batch(3, 4)}})};
  DecodedMessage d =
      round_trip({ActorRole::kCombine, 1, 0},
                 caf::make_message(contrib_atom::value, ContributionBundlePtr(bundle)));
  ASSERT_TRUE((d.message.match_elements<contrib_atom, ContributionBundlePtr>()));
  const ContributionBundle& got = *d.message.get_as<ContributionBundlePtr>(1);
  ASSERT_EQ(got.contributions.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const Contribution& want = *bundle->contributions[i];
    const Contribution& c = *got.contributions[i];
    EXPECT_EQ(c.iteration, 7);
    EXPECT_EQ(c.source, want.source);
    EXPECT_EQ(c.dests, want.dests);
    ASSERT_EQ(c.parts.size(), want.parts.size());
    for (size_t p = 0; p < c.parts.size(); ++p) expect_same_batch(*want.parts[p], *c.parts[p]);
  }
  // Every cut of the header or payload, and a trailing byte, is refused.
  auto enc = encode_actor_message(
      {ActorRole::kCombine, 1, 0},
      caf::make_message(contrib_atom::value, ContributionBundlePtr(bundle)).content());
  ASSERT_TRUE(enc.ok());
  expect_every_cut_refused(*enc);
  // A count beyond the limit is refused before anything is allocated.
  ActorMessageLimits two;
  two.max_parts = 2;
  auto limited = decode_actor_message(enc->header, enc->payload, two);
  ASSERT_FALSE(limited.ok());
  EXPECT_NE(limited.status().message().find("bundle of 3 contributions (at most 2"),
            std::string::npos)
      << limited.status();
}

// An Outbox's batch of reports for the coordinator (#18) crosses as one frame, in order; it
// holds reports only, for its own destination, one level deep.
TEST(ClusterActorCodec, ReportBundlesRoundTripAndHoldOnlyReports) {
  const ActorAddress coordinator{ActorRole::kCoordinator, 0, 0};
  std::vector<caf::message> reports = {
      caf::make_message(busy_atom::value, int64_t{1}, 0.25, 0.5),
      caf::make_message(rows_atom::value, false, int64_t{3}, int64_t{9}),
      caf::make_message(layer_atom::value, int64_t{0}, int64_t{4}, 0.75,
                        std::vector<double>{0.5, -1.0}),
      caf::make_message(busy_atom::value, int64_t{0}, 0.5, 0.625),
  };
  DecodedMessage d = round_trip(coordinator, caf::make_message(reports_atom::value, reports));
  ASSERT_TRUE((d.message.match_elements<reports_atom, std::vector<caf::message>>()));
  const auto& got = d.message.get_as<std::vector<caf::message>>(1);
  ASSERT_EQ(got.size(), reports.size());
  EXPECT_EQ(got[0].get_as<double>(2), 0.25);
  EXPECT_EQ(got[1].get_as<int64_t>(3), 9);
  EXPECT_EQ(got[2].get_as<std::vector<double>>(4), (std::vector<double>{0.5, -1.0}));
  EXPECT_EQ(got[3].get_as<double>(3), 0.625);

  // Not a report: refused when encoding.
  auto sampled = std::make_shared<SampledBatch>();
  auto with_sampled = encode_actor_message(
      coordinator,
      caf::make_message(reports_atom::value, std::vector<caf::message>{caf::make_message(
                                                 sampled_atom::value, SampledBatchPtr(sampled))})
          .content());
  EXPECT_FALSE(with_sampled.ok());
  // A bundle inside a bundle, or a report for another actor, written by hand: refused when
  // decoding.
  auto inner =
      encode_actor_message(coordinator, caf::make_message(reports_atom::value, reports).content());
  ASSERT_TRUE(inner.ok());
  auto for_expert = encode_actor_message({ActorRole::kExpert, 0, 1}, reports[0].content());
  ASSERT_TRUE(for_expert.ok());
  const std::vector<std::pair<const std::vector<char>*, const char*>> subs = {
      {&inner->header, "a report bundle inside a report bundle"},  // refused before recursing
      {&for_expert->header, "which is no report"}};
  for (const auto& [sub, error] : subs) {
    std::vector<char> h;
    auto outer = encode_actor_message(
        coordinator,
        caf::make_message(reports_atom::value, std::vector<caf::message>{reports[0]}).content());
    ASSERT_TRUE(outer.ok());
    // outer = address, tag, count 1, length, the busy report's header: swap in `sub`.
    const size_t prefix = outer->header.size() - 4 - for_expert->header.size();
    h.assign(outer->header.begin(), outer->header.begin() + static_cast<long>(prefix));
    caf::binary_serializer sink(nullptr, h);  // the sub-header's length, as the codec writes it
    (void)sink(static_cast<uint32_t>(sub->size()));
    h.insert(h.end(), sub->begin(), sub->end());
    auto bad = decode_actor_message(h, {});
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find(error), std::string::npos) << bad.status();
  }
  // Cut anywhere: refused.
  auto enc =
      encode_actor_message(coordinator, caf::make_message(reports_atom::value, reports).content());
  ASSERT_TRUE(enc.ok());
  expect_every_cut_refused(*enc);
}

TEST(ClusterActorCodec, SampledBatchKvRowsAndScalarsRoundTrip) {
  auto s = std::make_shared<SampledBatch>();
  s->iteration = 4;
  s->rank = 1;
  s->rows.push_back({11, 5, 42, {1.5f, -0.0f, std::bit_cast<float>(0xffc00007u)}});
  s->rows.push_back({12, 9, -1, {}});
  s->requests = {11, 12, 13};
  DecodedMessage d =
      round_trip({ActorRole::kCoordinator, 0, 0}, caf::make_message(sampled_atom::value, s));
  ASSERT_TRUE((d.message.match_elements<sampled_atom, SampledBatchPtr>()));
  const SampledBatch& got = *d.message.get_as<SampledBatchPtr>(1);
  EXPECT_EQ(got.iteration, 4);
  EXPECT_EQ(got.requests, s->requests);
  ASSERT_EQ(got.rows.size(), 2u);
  EXPECT_EQ(got.rows[0].token, 42);
  EXPECT_TRUE(same_bits(got.rows[0].logits, s->rows[0].logits));
  EXPECT_TRUE(got.rows[1].logits.empty());

  auto kv = std::make_shared<KvRows>();
  kv->width = 2;
  kv->request_ids = {1, 2};
  kv->positions = {0, 3};
  kv->k = {1, 2, 3, -0.0f};
  kv->v = {5, 6, 7, 8};
  d = round_trip({ActorRole::kAttention, 1, 1},
                 caf::make_message(kvrows_atom::value, KvRowsPtr(kv)));
  ASSERT_TRUE((d.message.match_elements<kvrows_atom, KvRowsPtr>()));
  const KvRows& kv2 = *d.message.get_as<KvRowsPtr>(1);
  EXPECT_EQ(kv2.positions, kv->positions);
  EXPECT_TRUE(same_bits(kv2.k, kv->k));
  EXPECT_TRUE(same_bits(kv2.v, kv->v));

  d = round_trip({ActorRole::kCoordinator, 0, 0},
                 caf::make_message(busy_atom::value, int64_t{3}, 0.1, 0.30000000000000004));
  ASSERT_TRUE((d.message.match_elements<busy_atom, int64_t, double, double>()));
  EXPECT_EQ(d.message.get_as<double>(3), 0.30000000000000004);
  d = round_trip({ActorRole::kSampler, 0, 1}, caf::make_message(release_atom::value, int64_t{77}));
  EXPECT_EQ(d.message.get_as<int64_t>(1), 77);
  d = round_trip({ActorRole::kCoordinator, 0, 0},
                 caf::make_message(failed_atom::value, std::string("expert(b=0): boom")));
  EXPECT_EQ(d.message.get_as<std::string>(1), "expert(b=0): boom");
  d = round_trip({ActorRole::kCoordinator, 0, 0},
                 caf::make_message(fetch_atom::value, int64_t{2}, int64_t{1}, 0.5));
  EXPECT_EQ(d.message.get_as<int64_t>(2), 1);
}

// A barrier's metrics cross from its primary replica (a worker) to the coordinator (#18).
TEST(ClusterActorCodec, BarrierMetricsRoundTrip) {
  const ActorAddress coordinator{ActorRole::kCoordinator, 0, 0};
  DecodedMessage d = round_trip(
      coordinator, caf::make_message(rows_atom::value, true, int64_t{1518}, int64_t{2048}));
  ASSERT_TRUE((d.message.match_elements<rows_atom, bool, int64_t, int64_t>()));
  EXPECT_TRUE(d.message.get_as<bool>(1));
  EXPECT_EQ(d.message.get_as<int64_t>(2), 1518);
  EXPECT_EQ(d.message.get_as<int64_t>(3), 2048);
  d = round_trip(coordinator, caf::make_message(rows_atom::value, false, int64_t{0}, int64_t{-1}));
  EXPECT_FALSE(d.message.get_as<bool>(1));
  EXPECT_EQ(d.message.get_as<int64_t>(3), -1);

  const std::vector<int64_t> per_device{551, 0, 483, 475};
  d = round_trip(coordinator, caf::make_message(load_atom::value, int64_t{2}, int64_t{40},
                                                per_device, 0.1 + 0.2, int64_t{7}));
  ASSERT_TRUE(
      (d.message
           .match_elements<load_atom, int64_t, int64_t, std::vector<int64_t>, double, int64_t>()));
  EXPECT_EQ(d.message.get_as<int64_t>(1), 2);
  EXPECT_EQ(d.message.get_as<int64_t>(2), 40);
  EXPECT_EQ(d.message.get_as<std::vector<int64_t>>(3), per_device);
  EXPECT_EQ(d.message.get_as<double>(4), 0.1 + 0.2);  // bit for bit
  EXPECT_EQ(d.message.get_as<int64_t>(5), 7);

  const std::vector<double> finish{0.238121, -1.0, 0.232664, 1e-300};
  d = round_trip(coordinator,
                 caf::make_message(layer_atom::value, int64_t{3}, int64_t{0}, 0.24275, finish));
  ASSERT_TRUE(
      (d.message.match_elements<layer_atom, int64_t, int64_t, double, std::vector<double>>()));
  EXPECT_EQ(d.message.get_as<int64_t>(1), 3);
  EXPECT_EQ(d.message.get_as<double>(3), 0.24275);
  EXPECT_EQ(d.message.get_as<std::vector<double>>(4), finish);
  // Empty per-device vectors are valid.
  d = round_trip(coordinator, caf::make_message(layer_atom::value, int64_t{0}, int64_t{0}, 0.0,
                                                std::vector<double>{}));
  EXPECT_TRUE(d.message.get_as<std::vector<double>>(4).empty());
}

TEST(ClusterActorCodec, BarrierMetricsAreBoundedAndChecked) {
  const ActorAddress coordinator{ActorRole::kCoordinator, 0, 0};
  auto load = encode_actor_message(coordinator,
                                   caf::make_message(load_atom::value, int64_t{0}, int64_t{1},
                                                     std::vector<int64_t>(5, 1), 0.5, int64_t{0})
                                       .content());
  ASSERT_TRUE(load.ok()) << load.status();
  ActorMessageLimits four;
  four.max_devices = 4;
  auto d = decode_actor_message(load->header, load->payload, four);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("load over 5 devices (at most 4"), std::string::npos)
      << d.status();
  EXPECT_TRUE(decode_actor_message(load->header, load->payload).ok());
  // A device count of 2^32-1 in a short header: refused by the bytes left.
  std::vector<char> h = load->header;
  const size_t count_at = 1 + 4 + 4 + 1 + 8 + 8;  // address, tag, block, iteration
  for (size_t i = 0; i < 4; ++i) h[count_at + i] = static_cast<char>(0xff);
  d = decode_actor_message(h, load->payload);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("4294967295 devices"), std::string::npos) << d.status();

  auto layer =
      encode_actor_message(coordinator, caf::make_message(layer_atom::value, int64_t{0}, int64_t{1},
                                                          0.5, std::vector<double>(5, 0.25))
                                            .content());
  ASSERT_TRUE(layer.ok());
  EXPECT_FALSE(decode_actor_message(layer->header, layer->payload, four).ok());

  auto rows = encode_actor_message(
      coordinator, caf::make_message(rows_atom::value, true, int64_t{1}, int64_t{2}).content());
  ASSERT_TRUE(rows.ok());
  std::vector<char> flag = rows->header;
  flag[1 + 4 + 4 + 1] = 2;  // the dispatch flag
  d = decode_actor_message(flag, rows->payload);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("flag 2, expected 0 or 1"), std::string::npos) << d.status();
  for (const auto* enc : {&*load, &*layer, &*rows}) expect_every_cut_refused(*enc);
}

TEST(ClusterActorCodec, EveryTruncationAndTrailingByteIsRejected) {
  auto enc = encode_actor_message(
      {ActorRole::kCombine, 0, 0},
      caf::make_message(contrib_atom::value, contribution(1, 0, {{1, batch(2, 4)}})).content());
  ASSERT_TRUE(enc.ok()) << enc.status();
  expect_every_cut_refused(*enc);
}

TEST(ClusterActorCodec, CountsAndLimitsAreCheckedBeforeAllocating) {
  auto s = std::make_shared<SampledBatch>();
  s->rows.push_back({1, 0, 2, std::vector<float>(100, 1.0f)});
  auto enc = encode_actor_message({ActorRole::kCoordinator, 0, 0},
                                  caf::make_message(sampled_atom::value, s).content());
  ASSERT_TRUE(enc.ok());
  ActorMessageLimits tight;
  tight.max_logits = 99;
  auto d = decode_actor_message(enc->header, enc->payload, tight);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("100 logits (at most 99"), std::string::npos) << d.status();
  // A row count of 2^32-1 in a 60-byte header: refused by the bytes left, nothing allocated.
  std::vector<char> h = enc->header;
  const size_t rows_at = 1 + 4 + 4 + 1 + 8 + 4;  // address, tag, iteration, rank
  for (size_t i = 0; i < 4; ++i) h[rows_at + i] = static_cast<char>(0xff);
  d = decode_actor_message(h, enc->payload);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("4294967295 rows"), std::string::npos) << d.status();
  // A wider row than the limit (the model's) is refused by the token batch decoder.
  ActorMessageLimits narrow;
  narrow.batch.max_width = 4;
  auto wide = encode_actor_message({ActorRole::kExpert, 0, 0},
                                   caf::make_message(batch_atom::value, batch(1, 8)).content());
  ASSERT_TRUE(wide.ok());
  EXPECT_FALSE(decode_actor_message(wide->header, wide->payload, narrow).ok());
  // An unknown role or tag.
  std::vector<char> bad_role = wide->header;
  bad_role[0] = 9;
  EXPECT_FALSE(decode_actor_message(bad_role, wide->payload).ok());
  std::vector<char> bad_tag = wide->header;
  bad_tag[9] = 99;
  auto t = decode_actor_message(bad_tag, wide->payload);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("unknown message tag 99"), std::string::npos) << t.status();
}

TEST(ClusterActorCodec, MessagesWithoutAWireFormAreRefused) {
  auto enc = encode_actor_message({ActorRole::kAttention, 0, 0},
                                  caf::make_message(kv_atom::value).content());
  ASSERT_FALSE(enc.ok());
  EXPECT_TRUE(absl::IsUnimplemented(enc.status())) << enc.status();
  auto null_batch =
      encode_actor_message({ActorRole::kAttention, 0, 0},
                           caf::make_message(batch_atom::value, TokenBatchPtr{}).content());
  EXPECT_FALSE(null_batch.ok());
}

}  // namespace
}  // namespace muflow::actors::cluster
