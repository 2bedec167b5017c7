// The cluster secret's challenge–response (transport/cluster/cluster_secret.hpp): a proof
// verifies only with the same secret, nonce and role; secrets load from the environment or a
// token file with clear errors.

#include "transport/cluster/cluster_secret.hpp"

#include <gtest/gtest.h>
#include <openssl/hmac.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <string>

#include "scratch_path.hpp"

namespace muflow::transport::cluster {
namespace {

const char* kSecret = "correct horse battery staple";

TEST(ClusterSecret, ProofVerifiesOnlyForTheSameSecretNonceAndRole) {
  auto a = ClusterSecret::from_string(kSecret);
  auto b = ClusterSecret::from_string("another secret of enough length");
  ASSERT_TRUE(a.ok() && b.ok());
  auto n1 = make_nonce();
  auto n2 = make_nonce();
  ASSERT_TRUE(n1.ok() && n2.ok());
  EXPECT_NE(*n1, *n2);  // 256 random bits twice
  const Proof p = a->prove(*n1, "connector");
  EXPECT_TRUE(a->verify(*n1, "connector", p));
  EXPECT_FALSE(b->verify(*n1, "connector", p));  // wrong secret
  EXPECT_FALSE(a->verify(*n2, "connector", p));  // replayed on another nonce
  EXPECT_FALSE(a->verify(*n1, "acceptor", p));   // reflected in the other role
  EXPECT_FALSE(a->verify(*n1, "connector", std::span<const uint8_t>(p.data(), 31)));
  Proof flipped = p;
  flipped[31] ^= 0x80;
  EXPECT_FALSE(a->verify(*n1, "connector", flipped));
}

TEST(ClusterSecret, ProofIsHmacSha256OfTheDocumentedMessage) {
  // Independent of the implementation: HMAC over "muflow-cluster-v1\0role\0nonce".
  auto s = ClusterSecret::from_string(kSecret);
  ASSERT_TRUE(s.ok());
  Nonce n{};
  for (size_t i = 0; i < n.size(); ++i) n[i] = static_cast<uint8_t>(i * 7 + 1);
  std::string msg = std::string("muflow-cluster-v1") + '\0' + "acceptor" + '\0';
  msg.append(reinterpret_cast<const char*>(n.data()), n.size());
  unsigned char expected[32];
  unsigned int len = 0;
  HMAC(EVP_sha256(), kSecret, static_cast<int>(std::string(kSecret).size()),
       reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), expected, &len);
  ASSERT_EQ(len, 32u);
  const Proof p = s->prove(n, "acceptor");
  EXPECT_EQ(0, std::memcmp(p.data(), expected, 32));
}

TEST(ClusterSecret, RejectsShortSecretsAndStripsTrailingNewline) {
  EXPECT_EQ(ClusterSecret::from_string("short").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ClusterSecret::from_string("fifteen chars!!\n\n").status().code(),
            absl::StatusCode::kInvalidArgument);
  auto with_newline = ClusterSecret::from_string(std::string(kSecret) + "\n");
  auto without = ClusterSecret::from_string(kSecret);
  ASSERT_TRUE(with_newline.ok() && without.ok());
  Nonce n{};
  EXPECT_TRUE(without->verify(n, "r", with_newline->prove(n, "r")));
}

TEST(ClusterSecret, LoadsFromTokenFileOrEnvironmentWithClearErrors) {
  const std::string path = muflow::testing::scratch_path("cluster-token").string();
  {
    std::ofstream out(path);
    out << kSecret << "\n";
  }
  ::chmod(path.c_str(), 0600);
  ::unsetenv(kClusterTokenEnv);
  auto from_file = ClusterSecret::load(path);
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  Nonce n{};
  auto reference = ClusterSecret::from_string(kSecret);
  EXPECT_TRUE(reference->verify(n, "x", from_file->prove(n, "x")));

  auto missing = ClusterSecret::load(path + ".absent");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(".absent"), std::string::npos);

  auto none = ClusterSecret::load("");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(none.status().message().find(kClusterTokenEnv), std::string::npos);

  ::setenv(kClusterTokenEnv, kSecret, 1);
  auto from_env = ClusterSecret::load("");
  ASSERT_TRUE(from_env.ok()) << from_env.status();
  EXPECT_TRUE(reference->verify(n, "x", from_env->prove(n, "x")));
  ::setenv(kClusterTokenEnv, "tiny", 1);
  EXPECT_NE(ClusterSecret::load("").status().message().find(kClusterTokenEnv), std::string::npos);
  ::unsetenv(kClusterTokenEnv);

  {
    std::ofstream out(path);
    out << std::string(kMaxTokenFileBytes + 1, 'a');
  }
  auto big = ClusterSecret::load(path);
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(big.status().message().find("at most"), std::string::npos);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace muflow::transport::cluster
