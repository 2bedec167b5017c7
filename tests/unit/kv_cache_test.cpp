// Per-request KV cache (engine/serving/kv_cache.hpp): in-order appends, rejected gaps and repeats
// leave the cache unchanged, stored rows, byte accounting, release and unknown ids.

#include "engine/serving/kv_cache.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace muflow::engine {
namespace {

constexpr int64_t kWidth = 3;

// K row of (request r, position p) = {100r + 10p + 0, +1, +2}; V row = its negation.
std::vector<float> k_row(int64_t r, int64_t p) {
  return {100.f * r + 10.f * p, 100.f * r + 10.f * p + 1, 100.f * r + 10.f * p + 2};
}
std::vector<float> v_row(int64_t r, int64_t p) {
  std::vector<float> v = k_row(r, p);
  for (float& x : v) x = -x;
  return v;
}

bool append(serving::KvCache& kv, int64_t r, int64_t p) {
  const std::vector<float> k = k_row(r, p), v = v_row(r, p);
  return kv.append(r, p, k.data(), v.data());
}

void expect_rows(const serving::KvCache& kv, int64_t r, int64_t len) {
  ASSERT_EQ(kv.length(r), len);
  const float* keys = kv.keys(r);
  const float* values = kv.values(r);
  ASSERT_NE(keys, nullptr);
  ASSERT_NE(values, nullptr);
  for (int64_t p = 0; p < len; ++p) {
    const std::vector<float> k = k_row(r, p), v = v_row(r, p);
    for (int64_t j = 0; j < kWidth; ++j) {
      EXPECT_EQ(keys[p * kWidth + j], k[j]) << "request " << r << " pos " << p;
      EXPECT_EQ(values[p * kWidth + j], v[j]) << "request " << r << " pos " << p;
    }
  }
}

constexpr int64_t kBytesPerPosition = 2 * kWidth * sizeof(float);

TEST(KvCache, AppendsInOrderAndStoresRows) {
  serving::KvCache kv(kWidth);
  EXPECT_EQ(kv.bytes_used(), 0);
  EXPECT_EQ(kv.num_requests(), 0);
  for (int64_t p = 0; p < 4; ++p) ASSERT_TRUE(append(kv, 7, p)) << p;
  for (int64_t p = 0; p < 2; ++p) ASSERT_TRUE(append(kv, 2, p)) << p;
  ASSERT_TRUE(append(kv, 7, 4));  // interleaved requests keep separate rows
  expect_rows(kv, 7, 5);
  expect_rows(kv, 2, 2);
  EXPECT_EQ(kv.num_requests(), 2);
  EXPECT_EQ(kv.bytes_used(), 7 * kBytesPerPosition);
}

TEST(KvCache, RejectsGapsAndRepeatsWithoutChangingState) {
  serving::KvCache kv(kWidth);
  ASSERT_TRUE(append(kv, 1, 0));
  ASSERT_TRUE(append(kv, 1, 1));
  EXPECT_FALSE(append(kv, 1, 1));  // repeat
  EXPECT_FALSE(append(kv, 1, 0));  // older
  EXPECT_FALSE(append(kv, 1, 3));  // gap
  EXPECT_FALSE(append(kv, 1, -1));
  expect_rows(kv, 1, 2);
  EXPECT_EQ(kv.bytes_used(), 2 * kBytesPerPosition);
  EXPECT_EQ(kv.num_requests(), 1);
  ASSERT_TRUE(append(kv, 1, 2));  // still continues at 2
  expect_rows(kv, 1, 3);
}

// Regression (was a bug): append() inserts an entry for an unknown request before checking the
// position, so a rejected first append (position != 0) leaves an empty request behind
// (num_requests() grows although "nothing is appended").
TEST(KvCache, RejectedFirstAppendDoesNotCreateRequest) {
  serving::KvCache kv(kWidth);
  EXPECT_FALSE(append(kv, 5, 1));
  EXPECT_EQ(kv.length(5), 0);
  EXPECT_EQ(kv.bytes_used(), 0);
  EXPECT_EQ(kv.num_requests(), 0) << "a rejected append created an entry for request 5";
}

TEST(KvCache, ReleaseFreesBytesAndForgetsRequest) {
  serving::KvCache kv(kWidth);
  for (int64_t p = 0; p < 3; ++p) ASSERT_TRUE(append(kv, 10, p));
  for (int64_t p = 0; p < 5; ++p) ASSERT_TRUE(append(kv, 11, p));
  EXPECT_EQ(kv.bytes_used(), 8 * kBytesPerPosition);
  kv.release(10);
  EXPECT_EQ(kv.bytes_used(), 5 * kBytesPerPosition);
  EXPECT_EQ(kv.num_requests(), 1);
  EXPECT_EQ(kv.length(10), 0);
  EXPECT_EQ(kv.keys(10), nullptr);
  EXPECT_EQ(kv.values(10), nullptr);
  expect_rows(kv, 11, 5);
  // A released id starts again at position 0.
  EXPECT_FALSE(append(kv, 10, 3));
  ASSERT_TRUE(append(kv, 10, 0));
  expect_rows(kv, 10, 1);
  kv.release(10);
  kv.release(11);
  EXPECT_EQ(kv.bytes_used(), 0);
  EXPECT_EQ(kv.num_requests(), 0);
}

TEST(KvCache, UnknownIds) {
  serving::KvCache kv(kWidth);
  ASSERT_TRUE(append(kv, 1, 0));
  EXPECT_EQ(kv.length(99), 0);
  EXPECT_EQ(kv.keys(99), nullptr);
  EXPECT_EQ(kv.values(99), nullptr);
  kv.release(99);  // ignored
  EXPECT_EQ(kv.num_requests(), 1);
  EXPECT_EQ(kv.bytes_used(), kBytesPerPosition);
  expect_rows(kv, 1, 1);
}

// A request's entry keeps its generation while it grows; released and started again it gets a
// new one, unique across caches too (the cuda backend's device copy tells the two apart by it).
TEST(KvCache, GenerationIsPerLifeOfAnEntry) {
  serving::KvCache kv(kWidth), other(kWidth);
  EXPECT_EQ(kv.generation(5), 0u);
  ASSERT_TRUE(append(kv, 5, 0));
  const uint64_t first = kv.generation(5);
  EXPECT_GT(first, 0u);
  ASSERT_TRUE(append(kv, 5, 1));
  EXPECT_EQ(kv.generation(5), first);
  ASSERT_FALSE(append(kv, 5, 7));  // refused: no entry change
  EXPECT_EQ(kv.generation(5), first);
  kv.release(5);
  EXPECT_EQ(kv.generation(5), 0u);
  ASSERT_TRUE(append(kv, 5, 0));
  ASSERT_TRUE(append(kv, 5, 1));
  EXPECT_NE(kv.generation(5), first);
  ASSERT_TRUE(append(other, 5, 0));
  EXPECT_NE(other.generation(5), kv.generation(5));
  EXPECT_NE(other.generation(5), first);
}

}  // namespace
}  // namespace muflow::engine
