// Tests of engine/model/safetensors: byte-exact writer output, round trips, and every malformed
// input the reader must reject with a message naming the file and the tensor.

#include "engine/model/safetensors.hpp"
#include "scratch_path.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace muflow::engine {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string temp_path(const std::string& name) {
  const fs::path dir = muflow::testing::scratch_path("safetensors_test");
  fs::create_directories(dir);
  return (dir / name).string();
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A raw file: 8-byte little-endian header length, the header text, then `data`.
std::string raw_file(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

model::WeightTensor f32_tensor(const std::string& name, std::vector<int64_t> shape, float start) {
  model::WeightTensor t;
  t.name = name;
  t.dtype = model::DType::kF32;
  t.shape = std::move(shape);
  t.f32.resize(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < t.f32.size(); ++i) t.f32[i] = start + 0.25f * static_cast<float>(i);
  return t;
}

model::WeightTensor bf16_tensor(const std::string& name, std::vector<int64_t> shape) {
  model::WeightTensor t;
  t.name = name;
  t.dtype = model::DType::kBF16;
  t.shape = std::move(shape);
  t.bf16.resize(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < t.bf16.size(); ++i)
    t.bf16[i] = model::f32_to_bf16(-1.5f * static_cast<float>(i));
  return t;
}

TEST(SafetensorsTest, WriteThenReadRoundTripsBothDtypes) {
  const std::string path = temp_path("roundtrip.safetensors");
  model::WeightTensor a = f32_tensor("a.weight", {2, 3}, 1.0f);
  model::WeightTensor b = bf16_tensor("b.weight", {3});
  ASSERT_TRUE(model::write_safetensors(path, {&a, &b}, {{"format", "pt"}}).ok());

  absl::StatusOr<model::SafetensorsFile> file = model::open_safetensors(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->metadata().at("format"), "pt");
  EXPECT_EQ(file->entries().size(), 2u);
  EXPECT_EQ(file->entries().at("a.weight").dtype, "F32");
  EXPECT_EQ(file->entries().at("b.weight").begin, 24u);  // packed after a's 6 x 4 bytes

  absl::StatusOr<model::WeightTensor> ra = file->read_tensor("a.weight");
  ASSERT_TRUE(ra.ok()) << ra.status();
  EXPECT_EQ(ra->dtype, model::DType::kF32);
  EXPECT_EQ(ra->shape, a.shape);
  EXPECT_EQ(ra->f32, a.f32);
  absl::StatusOr<model::WeightTensor> rb = file->read_tensor("b.weight");
  ASSERT_TRUE(rb.ok()) << rb.status();
  EXPECT_EQ(rb->dtype, model::DType::kBF16);
  EXPECT_EQ(rb->bf16, b.bf16);
  EXPECT_EQ(rb->name, "b.weight");
}

TEST(SafetensorsTest, HeaderIsSpacePaddedToMultipleOfEight) {
  const std::string path = temp_path("padded.safetensors");
  model::WeightTensor a = f32_tensor("x", {1}, 3.0f);
  ASSERT_TRUE(model::write_safetensors(path, {&a}).ok());
  const std::string bytes = read_bytes(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + n + 4);
  const std::string header = bytes.substr(8, n);
  EXPECT_EQ(header.find_last_not_of(' '), header.find_last_of('}'));
  EXPECT_EQ(header.rfind("{\"x\":{\"data_offsets\":[0,4],\"dtype\":\"F32\",\"shape\":[1]}}", 0),
            0u)
      << header;
  float v = 0;
  std::memcpy(&v, bytes.data() + 8 + n, 4);
  EXPECT_EQ(v, 3.0f);
}

TEST(SafetensorsTest, ReadsAHandWrittenFileWithGapsAndUnusedDtypes) {
  // Hand-made per the spec: an I64 tensor the engine never reads must not stop the file
  // from opening; reading it names the tensor and the dtype.
  const float values[2] = {0.5f, -2.0f};
  std::string data(reinterpret_cast<const char*>(values), 8);
  data += std::string(8, '\x07');  // one I64
  const std::string path = temp_path("handwritten.safetensors");
  write_bytes(path, raw_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("pos":{"dtype":"I64","shape":[1],"data_offsets":[8,16]}})",
                             data));
  absl::StatusOr<model::SafetensorsFile> file = model::open_safetensors(path);
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<model::WeightTensor> w = file->read_tensor("w");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->f32, std::vector<float>({0.5f, -2.0f}));
  absl::StatusOr<model::WeightTensor> pos = file->read_tensor("pos");
  ASSERT_FALSE(pos.ok());
  EXPECT_THAT(std::string(pos.status().message()), HasSubstr(path));
  EXPECT_THAT(std::string(pos.status().message()),
              HasSubstr("tensor 'pos' has dtype I64; dtype I64 not supported; expected F32 or BF16"));
}

TEST(SafetensorsTest, F16TensorIsRejectedWithDtypeMessage) {
  const std::string path = temp_path("f16.safetensors");
  write_bytes(path, raw_file(R"({"h.weight":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]}})",
                             std::string(8, '\0')));
  absl::StatusOr<model::SafetensorsFile> file = model::open_safetensors(path);
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<model::WeightTensor> t = file->read_tensor("h.weight");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()),
              HasSubstr("'h.weight' has dtype F16; dtype F16 not supported; expected F32 or BF16"));
}

TEST(SafetensorsTest, MissingTensorIsNotFound) {
  const std::string path = temp_path("one.safetensors");
  model::WeightTensor a = f32_tensor("a", {2}, 0.0f);
  ASSERT_TRUE(model::write_safetensors(path, {&a}).ok());
  absl::StatusOr<model::SafetensorsFile> file = model::open_safetensors(path);
  ASSERT_TRUE(file.ok());
  absl::StatusOr<model::WeightTensor> t = file->read_tensor("b");
  EXPECT_TRUE(absl::IsNotFound(t.status()));
  EXPECT_THAT(std::string(t.status().message()), HasSubstr(path + ": tensor 'b' not found"));
}

TEST(SafetensorsTest, MissingFileIsNotFound) {
  absl::StatusOr<model::SafetensorsFile> file =
      model::open_safetensors(temp_path("does-not-exist.safetensors"));
  EXPECT_TRUE(absl::IsNotFound(file.status()));
  EXPECT_THAT(std::string(file.status().message()), HasSubstr("does-not-exist.safetensors"));
}

// Cuts a valid two-tensor file at many points; every prefix must be rejected with the file
// name and a reason, never crash.
TEST(SafetensorsTest, TruncatedFilesAreRejectedAtEveryCut) {
  const std::string path = temp_path("full.safetensors");
  model::WeightTensor a = f32_tensor("layer.a", {4, 4}, 0.0f);
  model::WeightTensor b = bf16_tensor("layer.b", {8});
  ASSERT_TRUE(model::write_safetensors(path, {&a, &b}).ok());
  const std::string bytes = read_bytes(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  const std::string cut_path = temp_path("cut.safetensors");
  struct Cut {
    size_t size;
    const char* expect;
  };
  const Cut cuts[] = {
      {0, "shorter than the 8-byte header length prefix"},
      {5, "shorter than the 8-byte header length prefix"},
      {8, "header length"},
      {8 + n / 2, "header length"},
      {8 + n + 10, "tensor 'layer.a'"},     // inside a's data
      {8 + n + 64, "tensor 'layer.b'"},     // a complete, b missing
      {bytes.size() - 1, "tensor 'layer.b'"},  // one byte short
  };
  for (const Cut& cut : cuts) {
    SCOPED_TRACE(cut.size);
    write_bytes(cut_path, bytes.substr(0, cut.size));
    absl::StatusOr<model::SafetensorsFile> file = model::open_safetensors(cut_path);
    ASSERT_FALSE(file.ok());
    const std::string msg(file.status().message());
    EXPECT_THAT(msg, HasSubstr(cut_path));
    EXPECT_THAT(msg, HasSubstr(cut.expect));
  }
  write_bytes(cut_path, bytes.substr(0, 8 + n + 10));
  EXPECT_THAT(std::string(model::open_safetensors(cut_path).status().message()),
              HasSubstr("exceed the data buffer of 10 bytes (file truncated?)"));
}

TEST(SafetensorsTest, HeaderLengthLargerThanFile) {
  std::string bytes = raw_file("{}", "");
  const uint64_t huge = 1ull << 40;
  std::memcpy(bytes.data(), &huge, 8);
  const std::string path = temp_path("hugelen.safetensors");
  write_bytes(path, bytes);
  absl::StatusOr<model::SafetensorsFile> file = model::open_safetensors(path);
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(std::string(file.status().message()),
              HasSubstr(path + ": header length 1099511627776 exceeds the 2 bytes"));
}

struct BadHeaderCase {
  const char* label;
  std::string header;
  size_t data_bytes;
  std::string expect;
};

class SafetensorsBadHeaderTest : public ::testing::TestWithParam<BadHeaderCase> {};

TEST_P(SafetensorsBadHeaderTest, RejectedWithFileAndReason) {
  const BadHeaderCase& c = GetParam();
  const std::string path = temp_path(std::string("bad_") + c.label + ".safetensors");
  write_bytes(path, raw_file(c.header, std::string(c.data_bytes, '\0')));
  absl::StatusOr<model::SafetensorsFile> file = model::open_safetensors(path);
  ASSERT_FALSE(file.ok()) << c.label;
  const std::string msg(file.status().message());
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr(c.expect));
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, SafetensorsBadHeaderTest,
    ::testing::Values(
        BadHeaderCase{"json", R"({"a":{"dtype":"F32",)", 0, "header is not valid JSON"},
        BadHeaderCase{"array", R"([1,2])", 0, "header must be a JSON object, got array"},
        BadHeaderCase{"entry", R"({"a":3})", 0, "tensor 'a': header entry must be an object"},
        BadHeaderCase{"nodtype", R"({"a":{"shape":[1],"data_offsets":[0,4]}})", 4,
                      "tensor 'a': key 'dtype' missing"},
        BadHeaderCase{"unknowndtype", R"({"a":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})",
                      4, "tensor 'a': unknown dtype 'F33'"},
        BadHeaderCase{"negshape", R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4,
                      "tensor 'a': shape [-1] must hold non-negative integers"},
        BadHeaderCase{"nooffsets", R"({"a":{"dtype":"F32","shape":[1]}})", 4,
                      "tensor 'a': key 'data_offsets' missing"},
        BadHeaderCase{"reversed", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", 4,
                      "tensor 'a': data_offsets [4,0] have begin > end"},
        BadHeaderCase{"outofrange",
                      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 8,
                      "tensor 'a': data_offsets [4,12] exceed the data buffer of 8 bytes"},
        BadHeaderCase{"sizemismatch",
                      R"({"a":{"dtype":"BF16","shape":[3],"data_offsets":[0,8]}})", 8,
                      "tensor 'a': data_offsets [0,8] span 8 bytes, expected 6 (BF16 shape [3]"},
        BadHeaderCase{"overlap",
                      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                      12, "tensor 'b' data_offsets [4,12] overlap tensor 'a' [0,8]"},
        BadHeaderCase{"metadata", R"({"__metadata__":{"format":1}})", 0,
                      "'__metadata__' key 'format' must be a string"}),
    [](const ::testing::TestParamInfo<BadHeaderCase>& info) { return info.param.label; });

TEST(SafetensorsTest, WriterRejectsInconsistentTensors) {
  const std::string path = temp_path("reject.safetensors");
  model::WeightTensor a = f32_tensor("a", {2, 2}, 0.0f);
  a.f32.pop_back();
  absl::Status s = model::write_safetensors(path, {&a});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("tensor 'a' has shape [2,2] (4 elements) but holds 3 F32 elements"));
  EXPECT_FALSE(fs::exists(path));

  model::WeightTensor b = f32_tensor("b", {1}, 0.0f);
  model::WeightTensor b2 = f32_tensor("b", {1}, 1.0f);
  EXPECT_THAT(std::string(model::write_safetensors(path, {&b, &b2}).message()),
              HasSubstr("tensor 'b' given twice"));
  model::WeightTensor absent;
  absent.name = "c";
  EXPECT_THAT(std::string(model::write_safetensors(path, {&absent}).message()),
              HasSubstr("tensor 'c' has no shape"));
}

}  // namespace
}  // namespace muflow::engine
