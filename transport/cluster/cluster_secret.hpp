#pragma once
/// \file
/// The cluster secret and the challenge–response every muflow connection between processes
/// must pass before any actor handle, address or tensor is exchanged (#18 item 4).
///
/// Protocol (both directions, so each side proves it knows the secret):
/// 1. the acceptor sends a fresh 32-byte nonce `n_a` (`make_nonce`: OpenSSL `RAND_bytes`);
/// 2. the connector answers `prove(n_a, "connector")` and its own nonce `n_c`;
/// 3. the acceptor checks the proof (`verify`, constant time) and answers
///    `prove(n_c, "acceptor")`, which the connector checks.
/// A proof is HMAC-SHA256(secret, "muflow-cluster-v1" || 0x00 || role || 0x00 || nonce)
/// (RFC 2104 through OpenSSL's `HMAC`): the role string stops a proof from being reflected
/// back, the fresh nonces stop replays. The secret never crosses the wire.
///
/// Why OpenSSL: a well-kept, audited HMAC and CSPRNG (the brief's standard); libssl is already
/// on every machine that runs CAF's openssl module.

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace muflow::transport::cluster {

/// Environment variable that holds the cluster secret when no token file is given.
inline constexpr const char* kClusterTokenEnv = "MUFLOW_CLUSTER_TOKEN";
/// Shortest secret accepted (bytes); a shorter one is an error, not a warning.
inline constexpr size_t kMinSecretBytes = 16;
/// Longest token file read (bytes); bounded before reading.
inline constexpr size_t kMaxTokenFileBytes = 4096;

using Nonce = std::array<uint8_t, 32>;
using Proof = std::array<uint8_t, 32>;

/// A 32-byte nonce from OpenSSL's CSPRNG. Errors: absl::Internal when RAND_bytes fails.
/// Any thread.
absl::StatusOr<Nonce> make_nonce();

/// The shared secret of a cluster. Immutable after construction; any thread.
class ClusterSecret {
 public:
  /// From a string (trailing whitespace and newlines removed). Errors (InvalidArgument):
  /// fewer than kMinSecretBytes bytes left.
  static absl::StatusOr<ClusterSecret> from_string(std::string_view secret);

  /// From `token_file` when it is non-empty, else from $MUFLOW_CLUSTER_TOKEN. Errors name the
  /// source: file missing or unreadable (NotFound / PermissionDenied), larger than
  /// kMaxTokenFileBytes, secret too short, neither given (FailedPrecondition, saying how to
  /// set one). Logs a warning when the file is readable by group or others.
  static absl::StatusOr<ClusterSecret> load(const std::string& token_file);

  /// HMAC-SHA256 proof of knowing the secret for `nonce` in `role`.
  Proof prove(const Nonce& nonce, std::string_view role) const;

  /// True when `proof` is `prove(nonce, role)` (constant-time comparison, CRYPTO_memcmp).
  bool verify(const Nonce& nonce, std::string_view role, std::span<const uint8_t> proof) const;

 private:
  explicit ClusterSecret(std::string secret) : secret_(std::move(secret)) {}
  std::string secret_;
};

}  // namespace muflow::transport::cluster
