#include "actors/cluster/actor_codec.hpp"

#include <bit>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "actors/collective.hpp"
#include "actors/messages.hpp"
#include "caf/binary_deserializer.hpp"
#include "caf/binary_serializer.hpp"

namespace muflow::actors::cluster {
namespace {

using engine::dataflow::TokenBatchPtr;

static_assert(std::endian::native == std::endian::little,
              "actor message payloads are little-endian f32; add a byte swap for this target");

absl::Status bad(const std::string& what) {
  return absl::InvalidArgumentError("actor message: " + what);
}

// Writes fields through CAF's binary serializer into one buffer.
class Writer {
 public:
  explicit Writer(std::vector<char>& buf) : sink_(nullptr, buf) {}
  template <class... Ts>
  void put(Ts... xs) {
    (void)sink_(xs...);
  }
  void put_f64(double x) { put(std::bit_cast<uint64_t>(x)); }
  void put_raw(std::span<const char> bytes) {
    if (!bytes.empty()) (void)sink_.apply_raw(bytes.size(), const_cast<char*>(bytes.data()));
  }

 private:
  caf::binary_serializer sink_;
};

// Reads fields back; every read is range-checked by CAF (an error, never a read past the end).
class Reader {
 public:
  explicit Reader(std::span<const char> bytes) : source_(nullptr, bytes.data(), bytes.size()) {}
  template <class... Ts>
  bool get(Ts&... xs) {
    return !source_(xs...);
  }
  bool get_f64(double& x) {
    uint64_t bits = 0;
    if (!get(bits)) return false;
    x = std::bit_cast<double>(bits);
    return true;
  }
  size_t remaining() const { return source_.remaining(); }
  // The next `n` bytes as a view (advancing past them); false when fewer remain.
  bool take(size_t n, std::span<const char>& out) {
    if (n > remaining()) return false;
    const auto rest = source_.remainder();
    out = {reinterpret_cast<const char*>(rest.data()), n};
    source_.skip(n);
    return true;
  }

 private:
  caf::binary_deserializer source_;
};

// Serialized bytes of Ts (fixed width in CAF's binary format).
template <class... Ts>
size_t record_bytes() {
  std::vector<char> buf;
  Writer w(buf);
  w.put(Ts{}...);
  return buf.size();
}

void put_address(Writer& w, const ActorAddress& a) {
  w.put(static_cast<uint8_t>(a.role), a.block, a.index);
}

std::span<const char> float_bytes(const std::vector<float>& v) {
  return {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)};
}

// A message's payload while it is encoded: views of the message's own arrays (activation
// rows, logits, K/V rows), in order, copied once into whatever buffer is sent.
using PayloadViews = std::vector<std::span<const char>>;

// The header and the payload of one message.
struct Parts {
  std::vector<char> header;
  PayloadViews payload;
  uint64_t payload_bytes() const {
    uint64_t n = 0;
    for (const std::span<const char>& v : payload) n += v.size();
    return n;
  }
};

absl::StatusOr<transport::WireBatchView> encode_batch(const TokenBatchPtr& batch) {
  if (!batch) return bad("null token batch");
  return transport::encode_token_batch_f32_view(*batch);
}

// Copies `bytes` (a multiple of 4) into a new float vector.
std::vector<float> floats_of(std::span<const char> bytes) {
  std::vector<float> v(bytes.size() / sizeof(float));
  if (!v.empty()) std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

// A contribution's fields (header) and its parts' rows (appended to `payload`).
absl::Status encode_contribution(Writer& w, const ContributionPtr& c, PayloadViews& payload) {
  if (!c) return bad("null contribution");
  // The wire carries the split form (a collective replica splits a whole contribution before
  // it forwards it: split_whole); encoding a whole one here would drop its rows.
  if (c->is_whole()) return bad("whole contribution (split it first)");
  if (c->dests.size() != c->parts.size()) return bad("contribution with dests != parts");
  std::vector<transport::WireBatchView> wires;
  wires.reserve(c->parts.size());
  for (const TokenBatchPtr& part : c->parts) {
    absl::StatusOr<transport::WireBatchView> wire = encode_batch(part);
    if (!wire.ok()) return wire.status();
    wires.push_back(std::move(*wire));
  }
  w.put(c->iteration, c->source, static_cast<uint32_t>(wires.size()));
  for (size_t i = 0; i < wires.size(); ++i) {
    w.put(c->dests[i], static_cast<uint32_t>(wires[i].header.size()),
          static_cast<uint64_t>(wires[i].payload.size()));
  }
  for (const auto& wire : wires) w.put_raw(wire.header);
  for (const auto& wire : wires) {
    if (!wire.payload.empty()) payload.push_back(wire.payload);
  }
  return absl::OkStatus();
}

// Reads one contribution whose rows start at `payload`; `payload_used` gets their bytes.
absl::StatusOr<ContributionPtr> decode_contribution(Reader& r, std::span<const char> payload,
                                                    const ActorMessageLimits& limits,
                                                    uint64_t& payload_used) {
  auto c = std::make_shared<Contribution>();
  uint32_t parts = 0;
  if (!r.get(c->iteration, c->source, parts)) return bad("truncated contribution");
  static const size_t kPartRecord = record_bytes<int32_t, uint32_t, uint64_t>();
  if (parts > limits.max_parts || parts * kPartRecord > r.remaining()) {
    return bad(
        absl::StrFormat("contribution of %d parts (at most %d, and %d header bytes "
                        "left)",
                        parts, limits.max_parts, r.remaining()));
  }
  std::vector<uint32_t> header_bytes(parts);
  std::vector<uint64_t> payload_bytes(parts);
  c->dests.resize(parts);
  uint64_t payload_total = 0;
  for (uint32_t i = 0; i < parts; ++i) {
    if (!r.get(c->dests[i], header_bytes[i], payload_bytes[i])) {
      return bad("truncated contribution part");
    }
    if (i > 0 && c->dests[i] <= c->dests[i - 1]) {
      return bad("contribution parts not in ascending destination order");
    }
    if (payload_bytes[i] > payload.size() - payload_total) {
      return bad("contribution parts announce more payload than the frame has");
    }
    payload_total += payload_bytes[i];
  }
  c->parts.reserve(parts);
  uint64_t offset = 0;
  for (uint32_t i = 0; i < parts; ++i) {
    std::span<const char> part_header;
    if (!r.take(header_bytes[i], part_header)) return bad("truncated contribution part header");
    absl::StatusOr<TokenBatchPtr> part = transport::decode_token_batch(
        part_header, payload.subspan(offset, payload_bytes[i]), limits.batch);
    if (!part.ok()) return part.status();
    c->parts.push_back(std::move(*part));
    offset += payload_bytes[i];
  }
  payload_used = payload_total;
  return ContributionPtr(std::move(c));
}

}  // namespace

bool is_report(const caf::type_erased_tuple& m) {
  return m.match_elements<busy_atom, int64_t, double, double>() ||
         m.match_elements<fetch_atom, int64_t, int64_t, double>() ||
         m.match_elements<rows_atom, bool, int64_t, int64_t>() ||
         m.match_elements<load_atom, int64_t, int64_t, std::vector<int64_t>, double, int64_t>() ||
         m.match_elements<layer_atom, int64_t, int64_t, double, std::vector<double>>();
}

namespace {

absl::StatusOr<Parts> encode_parts(const ActorAddress& to, const caf::type_erased_tuple& m) {
  Parts out;
  Writer w(out.header);
  put_address(w, to);
  auto tag = [&](MessageTag t) { w.put(static_cast<uint8_t>(t)); };
  if (m.match_elements<batch_atom, TokenBatchPtr>()) {
    absl::StatusOr<transport::WireBatchView> wire = encode_batch(m.get_as<TokenBatchPtr>(1));
    if (!wire.ok()) return wire.status();
    tag(MessageTag::kBatch);
    w.put(static_cast<uint32_t>(wire->header.size()));
    w.put_raw(wire->header);
    if (!wire->payload.empty()) out.payload.push_back(wire->payload);
    return out;
  }
  if (m.match_elements<contrib_atom, ContributionPtr>()) {
    tag(MessageTag::kContribution);
    if (absl::Status s = encode_contribution(w, m.get_as<ContributionPtr>(1), out.payload);
        !s.ok()) {
      return s;
    }
    return out;
  }
  if (m.match_elements<contrib_atom, ContributionBundlePtr>()) {
    const ContributionBundlePtr& b = m.get_as<ContributionBundlePtr>(1);
    if (!b) return bad("null contribution bundle");
    tag(MessageTag::kContributionBundle);
    w.put(static_cast<uint32_t>(b->contributions.size()));
    for (const ContributionPtr& c : b->contributions) {
      if (absl::Status s = encode_contribution(w, c, out.payload); !s.ok()) return s;
    }
    return out;
  }
  if (m.match_elements<sampled_atom, SampledBatchPtr>()) {
    const SampledBatchPtr& s = m.get_as<SampledBatchPtr>(1);
    if (!s) return bad("null sampled batch");
    tag(MessageTag::kSampled);
    w.put(s->iteration, s->rank, static_cast<uint32_t>(s->rows.size()),
          static_cast<uint32_t>(s->requests.size()));
    for (const SampledToken& r : s->rows) {
      w.put(r.request_id, r.position, r.token, static_cast<uint32_t>(r.logits.size()));
      out.payload.push_back(float_bytes(r.logits));
    }
    for (int64_t id : s->requests) w.put(id);
    return out;
  }
  if (m.match_elements<kvrows_atom, KvRowsPtr>()) {
    const KvRowsPtr& kv = m.get_as<KvRowsPtr>(1);
    if (!kv) return bad("null K/V rows");
    const size_t n = kv->request_ids.size();
    const size_t floats = n * static_cast<size_t>(std::max<int64_t>(kv->width, 0));
    if (kv->positions.size() != n || kv->k.size() != floats || kv->v.size() != floats) {
      return bad("K/V rows whose ids, positions, K and V disagree in size");
    }
    tag(MessageTag::kKvRows);
    w.put(kv->width, static_cast<uint32_t>(n));
    for (size_t i = 0; i < n; ++i) w.put(kv->request_ids[i], kv->positions[i]);
    out.payload.push_back(float_bytes(kv->k));
    out.payload.push_back(float_bytes(kv->v));
    return out;
  }
  if (m.match_elements<busy_atom, int64_t, double, double>()) {
    tag(MessageTag::kBusy);
    w.put(m.get_as<int64_t>(1));
    w.put_f64(m.get_as<double>(2));
    w.put_f64(m.get_as<double>(3));
    return out;
  }
  if (m.match_elements<fetch_atom, int64_t, int64_t, double>()) {
    tag(MessageTag::kFetch);
    w.put(m.get_as<int64_t>(1), m.get_as<int64_t>(2));
    w.put_f64(m.get_as<double>(3));
    return out;
  }
  if (m.match_elements<rows_atom, bool, int64_t, int64_t>()) {
    tag(MessageTag::kRows);
    w.put(static_cast<uint8_t>(m.get_as<bool>(1) ? 1 : 0), m.get_as<int64_t>(2),
          m.get_as<int64_t>(3));
    return out;
  }
  if (m.match_elements<load_atom, int64_t, int64_t, std::vector<int64_t>, double, int64_t>()) {
    const auto& per_device = m.get_as<std::vector<int64_t>>(3);
    tag(MessageTag::kLoad);
    w.put(m.get_as<int64_t>(1), m.get_as<int64_t>(2), static_cast<uint32_t>(per_device.size()));
    for (int64_t v : per_device) w.put(v);
    w.put_f64(m.get_as<double>(4));
    w.put(m.get_as<int64_t>(5));
    return out;
  }
  if (m.match_elements<layer_atom, int64_t, int64_t, double, std::vector<double>>()) {
    const auto& finish = m.get_as<std::vector<double>>(4);
    tag(MessageTag::kLayer);
    w.put(m.get_as<int64_t>(1), m.get_as<int64_t>(2));
    w.put_f64(m.get_as<double>(3));
    w.put(static_cast<uint32_t>(finish.size()));
    for (double v : finish) w.put_f64(v);
    return out;
  }
  if (m.match_elements<reports_atom, std::vector<caf::message>>()) {
    const auto& reports = m.get_as<std::vector<caf::message>>(1);
    tag(MessageTag::kReports);
    w.put(static_cast<uint32_t>(reports.size()));
    for (const caf::message& report : reports) {
      if (!is_report(report.content())) {
        return bad(absl::StrFormat("a report bundle with %s, which is no report",
                                   report.content().stringify()));
      }
      absl::StatusOr<Parts> e = encode_parts(to, report.content());
      if (!e.ok()) return e.status();
      w.put(static_cast<uint32_t>(e->header.size()));
      w.put_raw(e->header);
    }
    return out;
  }
  if (m.match_elements<release_atom, int64_t>()) {
    tag(MessageTag::kRelease);
    w.put(m.get_as<int64_t>(1));
    return out;
  }
  if (m.match_elements<failed_atom, std::string>()) {
    const std::string& text = m.get_as<std::string>(1);
    tag(MessageTag::kFailed);
    w.put(static_cast<uint32_t>(text.size()));
    w.put_raw(text);
    return out;
  }
  return absl::UnimplementedError(absl::StrFormat("actor message for %s: %s has no data-plane form",
                                                  to_string(to), m.stringify()));
}

}  // namespace

absl::StatusOr<EncodedMessage> encode_actor_message(const ActorAddress& to,
                                                    const caf::type_erased_tuple& m) {
  absl::StatusOr<Parts> parts = encode_parts(to, m);
  if (!parts.ok()) return parts.status();
  EncodedMessage out;
  out.header = std::move(parts->header);
  out.payload.reserve(parts->payload_bytes());
  for (const std::span<const char>& v : parts->payload) {
    out.payload.insert(out.payload.end(), v.begin(), v.end());
  }
  return out;
}

absl::StatusOr<EncodedFrame> encode_actor_frame(const ActorAddress& to,
                                                const caf::type_erased_tuple& m, size_t front) {
  absl::StatusOr<Parts> parts = encode_parts(to, m);
  if (!parts.ok()) return parts.status();
  EncodedFrame out;
  out.header_bytes = parts->header.size();
  out.payload_bytes = parts->payload_bytes();
  out.bytes.reserve(front + out.header_bytes + out.payload_bytes);
  out.bytes.resize(front);
  out.bytes.insert(out.bytes.end(), parts->header.begin(), parts->header.end());
  for (const std::span<const char>& v : parts->payload) {
    out.bytes.insert(out.bytes.end(), v.begin(), v.end());
  }
  return out;
}

absl::StatusOr<DecodedMessage> decode_actor_message(std::span<const char> header,
                                                    std::span<const char> payload,
                                                    const ActorMessageLimits& limits) {
  Reader r(header);
  DecodedMessage out;
  uint8_t role = 0;
  uint8_t tag = 0;
  if (!r.get(role, out.to.block, out.to.index, tag)) return bad("truncated address");
  if (role < static_cast<uint8_t>(ActorRole::kCoordinator) ||
      role > static_cast<uint8_t>(ActorRole::kDevice)) {
    return bad(absl::StrFormat("unknown actor role %d", role));
  }
  out.to.role = static_cast<ActorRole>(role);
  // The header must be consumed exactly; the payload must be exactly what it announced.
  auto finish = [&](size_t payload_used) -> absl::StatusOr<DecodedMessage> {
    if (r.remaining() != 0) {
      return bad(absl::StrFormat("%d trailing header bytes after the message", r.remaining()));
    }
    if (payload_used != payload.size()) {
      return bad(absl::StrFormat("payload of %d bytes, the header announces %d", payload.size(),
                                 payload_used));
    }
    return std::move(out);
  };
  switch (static_cast<MessageTag>(tag)) {
    case MessageTag::kBatch: {
      uint32_t len = 0;
      std::span<const char> batch_header;
      if (!r.get(len) || !r.take(len, batch_header)) return bad("truncated token batch header");
      absl::StatusOr<TokenBatchPtr> batch =
          transport::decode_token_batch(batch_header, payload, limits.batch);
      if (!batch.ok()) return batch.status();
      out.message = caf::make_message(batch_atom::value, std::move(*batch));
      return finish(payload.size());
    }
    case MessageTag::kContribution: {
      uint64_t used = 0;
      absl::StatusOr<ContributionPtr> c = decode_contribution(r, payload, limits, used);
      if (!c.ok()) return c.status();
      out.message = caf::make_message(contrib_atom::value, std::move(*c));
      return finish(used);
    }
    case MessageTag::kContributionBundle: {
      uint32_t n = 0;
      if (!r.get(n)) return bad("truncated contribution bundle");
      // Each contribution takes at least its 16-byte record (iteration, source, parts).
      static const size_t kRecord = record_bytes<int64_t, int32_t, uint32_t>();
      if (n > limits.max_parts || n * kRecord > r.remaining()) {
        return bad(absl::StrFormat(
            "contribution bundle of %d contributions (at most %d, and %d header bytes left)", n,
            limits.max_parts, r.remaining()));
      }
      auto bundle = std::make_shared<ContributionBundle>();
      bundle->contributions.reserve(n);
      uint64_t offset = 0;
      for (uint32_t i = 0; i < n; ++i) {
        uint64_t used = 0;
        absl::StatusOr<ContributionPtr> c =
            decode_contribution(r, payload.subspan(offset), limits, used);
        if (!c.ok()) return c.status();
        bundle->contributions.push_back(std::move(*c));
        offset += used;
      }
      out.message =
          caf::make_message(contrib_atom::value, ContributionBundlePtr(std::move(bundle)));
      return finish(offset);
    }
    case MessageTag::kSampled: {
      auto s = std::make_shared<SampledBatch>();
      uint32_t rows = 0, requests = 0;
      if (!r.get(s->iteration, s->rank, rows, requests)) return bad("truncated sampled batch");
      static const size_t kRowRecord = record_bytes<int64_t, int64_t, int32_t, uint32_t>();
      static const size_t kIdRecord = record_bytes<int64_t>();
      if (rows > limits.max_rows || requests > limits.max_rows ||
          rows * kRowRecord + requests * kIdRecord > r.remaining()) {
        return bad(
            absl::StrFormat("sampled batch of %d rows and %d requests (at most %d each, "
                            "and %d header bytes left)",
                            rows, requests, limits.max_rows, r.remaining()));
      }
      s->rows.resize(rows);
      size_t offset = 0;
      for (SampledToken& row : s->rows) {
        uint32_t logits = 0;
        if (!r.get(row.request_id, row.position, row.token, logits)) {
          return bad("truncated sampled row");
        }
        const size_t bytes = size_t{logits} * sizeof(float);
        if (logits > limits.max_logits || bytes > payload.size() - offset) {
          return bad(
              absl::StrFormat("sampled row with %d logits (at most %d; %d payload bytes "
                              "left)",
                              logits, limits.max_logits, payload.size() - offset));
        }
        row.logits = floats_of(payload.subspan(offset, bytes));
        offset += bytes;
      }
      s->requests.resize(requests);
      for (int64_t& id : s->requests) {
        if (!r.get(id)) return bad("truncated request ids");
      }
      out.message = caf::make_message(sampled_atom::value, SampledBatchPtr(std::move(s)));
      return finish(offset);
    }
    case MessageTag::kKvRows: {
      auto kv = std::make_shared<KvRows>();
      uint32_t rows = 0;
      if (!r.get(kv->width, rows)) return bad("truncated K/V rows");
      static const size_t kRowRecord = record_bytes<int64_t, int64_t>();
      if (kv->width < 0 || kv->width > limits.max_kv_width || rows > limits.max_rows ||
          rows * kRowRecord > r.remaining()) {
        return bad(absl::StrFormat("K/V rows: width %d (at most %d), %d rows (at most %d)",
                                   kv->width, limits.max_kv_width, rows, limits.max_rows));
      }
      const size_t bytes = size_t{rows} * static_cast<size_t>(kv->width) * sizeof(float);
      if (payload.size() != 2 * bytes) {
        return bad(
            absl::StrFormat("K/V payload of %d bytes, expected %d", payload.size(), 2 * bytes));
      }
      kv->request_ids.resize(rows);
      kv->positions.resize(rows);
      for (uint32_t i = 0; i < rows; ++i) {
        if (!r.get(kv->request_ids[i], kv->positions[i])) return bad("truncated K/V row ids");
      }
      kv->k = floats_of(payload.subspan(0, bytes));
      kv->v = floats_of(payload.subspan(bytes, bytes));
      out.message = caf::make_message(kvrows_atom::value, KvRowsPtr(std::move(kv)));
      return finish(payload.size());
    }
    case MessageTag::kBusy: {
      int64_t device = 0;
      double begin = 0, end = 0;
      if (!r.get(device) || !r.get_f64(begin) || !r.get_f64(end)) return bad("truncated busy");
      out.message = caf::make_message(busy_atom::value, device, begin, end);
      return finish(0);
    }
    case MessageTag::kFetch: {
      int64_t fetches = 0, restores = 0;
      double stall = 0;
      if (!r.get(fetches, restores) || !r.get_f64(stall)) return bad("truncated fetch");
      out.message = caf::make_message(fetch_atom::value, fetches, restores, stall);
      return finish(0);
    }
    case MessageTag::kRows: {
      uint8_t dispatch = 0;
      int64_t remote = 0, rows = 0;
      if (!r.get(dispatch, remote, rows)) return bad("truncated all-to-all rows");
      if (dispatch > 1)
        return bad(absl::StrFormat("all-to-all rows: flag %d, expected 0 or 1", dispatch));
      out.message = caf::make_message(rows_atom::value, dispatch == 1, remote, rows);
      return finish(0);
    }
    case MessageTag::kLoad: {
      int64_t block = 0, iteration = 0, rebalanced = 0;
      uint32_t n = 0;
      double done = 0;
      if (!r.get(block, iteration, n)) return bad("truncated load");
      if (n > limits.max_devices || n * sizeof(int64_t) > r.remaining()) {
        return bad(absl::StrFormat("load over %d devices (at most %d, and %d header bytes left)", n,
                                   limits.max_devices, r.remaining()));
      }
      std::vector<int64_t> per_device(n);
      for (int64_t& v : per_device) {
        if (!r.get(v)) return bad("truncated load");
      }
      if (!r.get_f64(done) || !r.get(rebalanced)) return bad("truncated load");
      out.message = caf::make_message(load_atom::value, block, iteration, std::move(per_device),
                                      done, rebalanced);
      return finish(0);
    }
    case MessageTag::kLayer: {
      int64_t block = 0, iteration = 0;
      uint32_t n = 0;
      double done = 0;
      if (!r.get(block, iteration) || !r.get_f64(done) || !r.get(n)) return bad("truncated layer");
      if (n > limits.max_devices || n * sizeof(double) > r.remaining()) {
        return bad(
            absl::StrFormat("layer end over %d devices (at most %d, and %d header bytes left)", n,
                            limits.max_devices, r.remaining()));
      }
      std::vector<double> finish_s(n);
      for (double& v : finish_s) {
        if (!r.get_f64(v)) return bad("truncated layer");
      }
      out.message =
          caf::make_message(layer_atom::value, block, iteration, done, std::move(finish_s));
      return finish(0);
    }
    case MessageTag::kReports: {
      if (out.to.role != ActorRole::kCoordinator) {
        return bad(absl::StrFormat("a report bundle for %s (only the coordinator takes reports)",
                                   to_string(out.to)));
      }
      uint32_t n = 0;
      if (!r.get(n)) return bad("truncated report bundle");
      static const size_t kLength = record_bytes<uint32_t>();
      if (n > limits.max_rows || n * kLength > r.remaining()) {
        return bad(
            absl::StrFormat("report bundle of %d reports (at most %d, and %d header "
                            "bytes left)",
                            n, limits.max_rows, r.remaining()));
      }
      std::vector<caf::message> reports;
      reports.reserve(n);
      for (uint32_t i = 0; i < n; ++i) {
        uint32_t len = 0;
        std::span<const char> sub;
        if (!r.get(len) || !r.take(len, sub)) return bad("truncated report in a bundle");
        // One level only: the tag after the address (role u8, block i32, index i32) is
        // checked before decoding, so a bundle in a bundle never recurses.
        constexpr size_t kTagAt = 1 + 4 + 4;
        if (sub.size() <= kTagAt ||
            static_cast<uint8_t>(sub[kTagAt]) == static_cast<uint8_t>(MessageTag::kReports)) {
          return bad("a report bundle inside a report bundle, or a report without a tag");
        }
        absl::StatusOr<DecodedMessage> d = decode_actor_message(sub, {}, limits);
        if (!d.ok()) return d.status();
        if (!(d->to == out.to) || !is_report(d->message.content())) {
          return bad(absl::StrFormat(
              "a report bundle with %s for %s, which is no report for "
              "the bundle's %s",
              d->message.content().stringify(), to_string(d->to), to_string(out.to)));
        }
        reports.push_back(std::move(d->message));
      }
      out.message = caf::make_message(reports_atom::value, std::move(reports));
      return finish(0);
    }
    case MessageTag::kRelease: {
      int64_t id = 0;
      if (!r.get(id)) return bad("truncated release");
      out.message = caf::make_message(release_atom::value, id);
      return finish(0);
    }
    case MessageTag::kFailed: {
      uint32_t len = 0;
      std::span<const char> text;
      if (!r.get(len)) return bad("truncated failure");
      if (len > limits.max_text_bytes || !r.take(len, text)) {
        return bad(
            absl::StrFormat("failure text of %d bytes (at most %d)", len, limits.max_text_bytes));
      }
      out.message = caf::make_message(failed_atom::value, std::string(text.begin(), text.end()));
      return finish(0);
    }
  }
  return bad(absl::StrFormat("unknown message tag %d", tag));
}

}  // namespace muflow::actors::cluster
