// Fuzzes what a muflow process does with a data-plane message from a peer (#18): the frame
// prefix (transport/cluster/frame.hpp: `parse_frame`, checked against the message length and
// the limits) and, under it, an actor message's header and payload
// (actors/cluster/actor_codec.hpp: `decode_actor_message`, every count checked against the
// bytes that hold it and the limits before anything is allocated).
//
// The input is one whole message. When its prefix parses, the frame's header and payload go
// to the decoder; when it does not (a mutation changed the length), the decoder still gets
// the bytes after the prefix, split where the prefix's header-bytes field says (clamped), so
// mutations reach the decoder without having to keep the prefix consistent.
//
// Property checked (abort on failure): a message the decoder accepts re-encodes, and that
// encoding decodes and re-encodes to the same bytes (the wire form is canonical after one
// round; the first round may normalize, e.g. a dtype).
//
// Seeds: `MUFLOW_FUZZ_WRITE_SEEDS=DIR fuzz_cluster_frame` writes one frame per message kind
// that crosses processes into DIR and exits (how corpus/cluster_frame/ was made).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "actors/cluster/actor_codec.hpp"
#include "actors/cluster/frame_kinds.hpp"
#include "actors/collective.hpp"
#include "actors/messages.hpp"
#include "transport/cluster/frame.hpp"

namespace {

using muflow::actors::ActorAddress;
using muflow::actors::ActorRole;
using muflow::actors::cluster::ActorMessageLimits;
using muflow::actors::cluster::decode_actor_message;
using muflow::actors::cluster::encode_actor_message;
using muflow::actors::cluster::EncodedMessage;
using muflow::actors::cluster::FrameKind;
using muflow::engine::dataflow::Activations;
using muflow::engine::dataflow::StageKind;
using muflow::engine::dataflow::TokenBatch;
using muflow::engine::dataflow::TokenBatchPtr;
namespace cl = muflow::transport::cluster;

// Small bounds, as a run sets them from a small model: a bound the decoder ignores shows up
// as an out-of-memory finding (run.sh: -malloc_limit_mb=2048) long before the defaults would.
ActorMessageLimits fuzz_limits() {
  ActorMessageLimits l;
  l.batch.max_tokens = 1024;
  l.batch.max_width = 1024;
  l.batch.max_segments = 256;
  l.batch.max_payload_bytes = int64_t{1} << 22;
  l.max_parts = 64;
  l.max_rows = 4096;
  l.max_logits = 4096;
  l.max_kv_width = 1024;
  l.max_text_bytes = 4096;
  l.max_devices = 64;
  return l;
}

cl::FrameLimits fuzz_frame_limits() {
  cl::FrameLimits l;
  l.max_header_bytes = int64_t{1} << 20;
  l.max_payload_bytes = int64_t{1} << 22;
  return l;
}

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_cluster_frame: %s: %s\n", what, detail.c_str());
  std::abort();
}

void check_round_trip(std::span<const char> header, std::span<const char> payload) {
  const ActorMessageLimits limits = fuzz_limits();
  auto first = decode_actor_message(header, payload, limits);
  if (!first.ok()) {
    if (first.status().message().empty()) fail("a rejection without a reason", "");
    return;
  }
  auto e1 = encode_actor_message(first->to, first->message.content());
  if (!e1.ok()) fail("an accepted message does not re-encode", e1.status().ToString());
  auto second = decode_actor_message(e1->header, e1->payload, limits);
  if (!second.ok()) fail("a re-encoded message does not decode", second.status().ToString());
  auto e2 = encode_actor_message(second->to, second->message.content());
  if (!e2.ok()) fail("a decoded re-encoding does not encode", e2.status().ToString());
  if (e1->header != e2->header || e1->payload != e2->payload) {
    fail("the wire form is not canonical", "encode(decode(encode(m))) != encode(m)");
  }
}

// --- Seeds -----------------------------------------------------------------------------------

TokenBatchPtr seed_batch(int rows, int width) {
  auto b = std::make_shared<TokenBatch>();
  b->layer = {StageKind::kExpert, 1, 2};
  b->payload = muflow::engine::dataflow::Payload::kExpertInputs;
  b->iteration = 3;
  b->act = std::make_shared<Activations>(rows, width);
  for (int r = 0; r < rows; ++r) {
    muflow::engine::dataflow::TokenMeta m;
    m.request_id = 10 + r;
    m.position = r;
    m.token_id = 5 * r;
    m.topk_rank = r % 2;
    m.topk_weight = 0.5f;
    b->tokens.push_back(m);
    for (int c = 0; c < width; ++c) b->act->row(r)[c] = 0.25f * r - 0.5f * c;
  }
  return b;
}

void write_seed(const std::string& dir, const std::string& name, const ActorAddress& to,
                const caf::message& m) {
  auto enc = encode_actor_message(to, m.content());
  if (!enc.ok()) fail("seed does not encode", name + ": " + enc.status().ToString());
  cl::FramePrefix p;
  p.kind = static_cast<uint16_t>(FrameKind::kActorMessage);
  p.source = 1;
  p.header_bytes = static_cast<uint32_t>(enc->header.size());
  p.payload_bytes = enc->payload.size();
  std::vector<char> bytes = cl::encode_frame_prefix(p);
  bytes.insert(bytes.end(), enc->header.begin(), enc->header.end());
  bytes.insert(bytes.end(), enc->payload.begin(), enc->payload.end());
  std::ofstream out(dir + "/" + name, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) fail("cannot write seed", dir + "/" + name);
}

void write_seeds(const std::string& dir) {
  using namespace muflow::actors;
  write_seed(dir, "batch", {ActorRole::kExpert, 1, 2},
             caf::make_message(batch_atom::value, seed_batch(2, 4)));
  auto built = std::make_shared<Contribution>();  // parts in ascending destination order
  built->iteration = 4;
  built->source = 1;
  built->dests = {0, 2};
  built->parts = {seed_batch(2, 4), seed_batch(1, 4)};
  const ContributionPtr contribution = std::move(built);
  write_seed(dir, "contribution", {ActorRole::kDispatch, 0, 0},
             caf::make_message(contrib_atom::value, contribution));
  auto bundle = std::make_shared<ContributionBundle>();
  bundle->contributions = {contribution, contribution};
  write_seed(dir, "contribution_bundle", {ActorRole::kCombine, 0, 0},
             caf::make_message(contrib_atom::value, ContributionBundlePtr(bundle)));
  auto s = std::make_shared<SampledBatch>();
  s->iteration = 2;
  s->rank = 1;
  s->rows.push_back({10, 3, 7, {0.5f, -1.0f, 2.0f}});
  s->rows.push_back({11, 4, 8, {}});
  s->requests = {10, 11};
  write_seed(dir, "sampled", {ActorRole::kCoordinator, 0, 0},
             caf::make_message(sampled_atom::value, SampledBatchPtr(s)));
  auto kv = std::make_shared<KvRows>();
  kv->width = 2;
  kv->request_ids = {10, 11};
  kv->positions = {0, 1};
  kv->k = {1, 2, 3, 4};
  kv->v = {5, 6, 7, 8};
  write_seed(dir, "kv_rows", {ActorRole::kAttention, 0, 1},
             caf::make_message(kvrows_atom::value, KvRowsPtr(kv)));
  write_seed(dir, "busy", {ActorRole::kCoordinator, 0, 0},
             caf::make_message(busy_atom::value, int64_t{1}, 0.25, 0.75));
  write_seed(dir, "rows", {ActorRole::kCoordinator, 0, 0},
             caf::make_message(rows_atom::value, true, int64_t{12}, int64_t{40}));
  write_seed(dir, "load", {ActorRole::kCoordinator, 0, 0},
             caf::make_message(load_atom::value, int64_t{1}, int64_t{2},
                               std::vector<int64_t>{3, 0, 5}, 0.5, int64_t{1}));
  write_seed(dir, "layer", {ActorRole::kCoordinator, 0, 0},
             caf::make_message(layer_atom::value, int64_t{1}, int64_t{2}, 0.5,
                               std::vector<double>{0.25, -1.0}));
  write_seed(
      dir, "reports", {ActorRole::kCoordinator, 0, 0},
      caf::make_message(muflow::actors::cluster::reports_atom::value,
                        std::vector<caf::message>{
                            caf::make_message(busy_atom::value, int64_t{0}, 0.25, 0.5),
                            caf::make_message(rows_atom::value, false, int64_t{1}, int64_t{2})}));
  write_seed(dir, "fetch", {ActorRole::kCoordinator, 0, 0},
             caf::make_message(fetch_atom::value, int64_t{1}, int64_t{3}, 0.5));
  write_seed(dir, "release", {ActorRole::kSampler, 0, 0},
             caf::make_message(release_atom::value, int64_t{10}));
  write_seed(dir, "failed", {ActorRole::kCoordinator, 0, 0},
             caf::make_message(failed_atom::value, std::string("expert(b=1): out of memory")));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("MUFLOW_FUZZ_WRITE_SEEDS"); dir != nullptr && *dir) {
    write_seeds(dir);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const char> message(reinterpret_cast<const char*>(data), size);
  auto frame = cl::parse_frame(message, fuzz_frame_limits());
  if (frame.ok()) {
    if (frame->header.size() != frame->prefix.header_bytes ||
        frame->payload.size() != frame->prefix.payload_bytes) {
      fail("a parsed frame's parts disagree with its prefix", "");
    }
    check_round_trip(frame->header, frame->payload);
    return 0;
  }
  if (frame.status().message().empty()) fail("a rejected frame without a reason", "");
  if (size < static_cast<size_t>(cl::kFramePrefixBytes)) return 0;
  uint32_t announced = 0;
  std::memcpy(&announced, data + 12, sizeof announced);  // prefix: header bytes (LE)
  const std::span<const char> body = message.subspan(cl::kFramePrefixBytes);
  const size_t cut = std::min<size_t>(announced, body.size());
  check_round_trip(body.first(cut), body.subspan(cut));
  return 0;
}
