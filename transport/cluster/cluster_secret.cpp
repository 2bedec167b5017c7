#include "transport/cluster/cluster_secret.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "spdlog/spdlog.h"

namespace muflow::transport::cluster {
namespace {

constexpr std::string_view kContext = "muflow-cluster-v1";

}  // namespace

absl::StatusOr<Nonce> make_nonce() {
  Nonce n{};
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1) {
    return absl::InternalError("RAND_bytes failed: no nonce for the cluster handshake");
  }
  return n;
}

absl::StatusOr<ClusterSecret> ClusterSecret::from_string(std::string_view secret) {
  std::string_view s = secret;
  while (!s.empty() && absl::ascii_isspace(static_cast<unsigned char>(s.back()))) {
    s.remove_suffix(1);
  }
  if (s.size() < kMinSecretBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cluster secret of %d bytes: expected at least %d (e.g. `openssl rand -hex 32`)", s.size(),
        kMinSecretBytes));
  }
  return ClusterSecret(std::string(s));
}

absl::StatusOr<ClusterSecret> ClusterSecret::load(const std::string& token_file) {
  if (!token_file.empty()) {
    struct stat st {};
    if (::stat(token_file.c_str(), &st) != 0) {
      return absl::NotFoundError(absl::StrFormat("--token-file %s: not found", token_file));
    }
    if (!S_ISREG(st.st_mode)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--token-file %s: not a regular file", token_file));
    }
    if (static_cast<size_t>(st.st_size) > kMaxTokenFileBytes) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--token-file %s: %d bytes, expected at most %d", token_file, st.st_size,
                          kMaxTokenFileBytes));
    }
    if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
      spdlog::warn("--token-file {}: readable by group or others (chmod 600 it)", token_file);
    }
    std::ifstream in(token_file, std::ios::binary);
    if (!in) {
      return absl::PermissionDeniedError(
          absl::StrFormat("--token-file %s: cannot be read", token_file));
    }
    std::string content;
    content.resize(kMaxTokenFileBytes + 1);
    in.read(content.data(), static_cast<std::streamsize>(content.size()));
    content.resize(static_cast<size_t>(in.gcount()));
    if (content.size() > kMaxTokenFileBytes) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--token-file %s: longer than %d bytes", token_file, kMaxTokenFileBytes));
    }
    auto secret = from_string(content);
    if (!secret.ok()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--token-file %s: %s", token_file, secret.status().message()));
    }
    return secret;
  }
  const char* env = std::getenv(kClusterTokenEnv);
  if (env == nullptr || *env == '\0') {
    return absl::FailedPreconditionError(absl::StrFormat(
        "no cluster secret: set %s, or give a token file (`--token-file FILE` of muflow "
        "worker, `[cluster] token_file` in the topology); the same secret on every process of "
        "the cluster, at least %d bytes",
        kClusterTokenEnv, kMinSecretBytes));
  }
  auto secret = from_string(env);
  if (!secret.ok()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %s", kClusterTokenEnv, secret.status().message()));
  }
  return secret;
}

Proof ClusterSecret::prove(const Nonce& nonce, std::string_view role) const {
  std::vector<uint8_t> msg;
  msg.reserve(kContext.size() + role.size() + 2 + nonce.size());
  msg.insert(msg.end(), kContext.begin(), kContext.end());
  msg.push_back(0);
  msg.insert(msg.end(), role.begin(), role.end());
  msg.push_back(0);
  msg.insert(msg.end(), nonce.begin(), nonce.end());
  Proof out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()), msg.data(), msg.size(),
       out.data(), &len);
  return out;
}

bool ClusterSecret::verify(const Nonce& nonce, std::string_view role,
                           std::span<const uint8_t> proof) const {
  if (proof.size() != Proof{}.size()) return false;
  const Proof expected = prove(nonce, role);
  return CRYPTO_memcmp(expected.data(), proof.data(), expected.size()) == 0;
}

}  // namespace muflow::transport::cluster
