// NumPy .npy writer (engine/model/npy.hpp): the file's bytes checked against the format spec
// (magic, version, header dict, 64-byte alignment, data), size mismatches, unwritable paths,
// and (when python3 with numpy is installed) a load by numpy itself.

#include "engine/model/npy.hpp"
#include "scratch_path.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace muflow::engine {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

fs::path temp_path(const std::string& name) {
  const fs::path dir = muflow::testing::scratch_path("npy_test");
  fs::create_directories(dir);
  return dir / name;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<float> values_3x5() {
  std::vector<float> v(15);
  for (int i = 0; i < 15; ++i) v[i] = 0.25f * static_cast<float>(i) - 1.5f;
  v[7] = -0.0f;
  v[14] = 3.0e38f;
  return v;
}

TEST(Npy, WritesVersion1HeaderAndData) {
  const fs::path path = temp_path("a.npy");
  const std::vector<float> v = values_3x5();
  ASSERT_TRUE(model::write_npy_f32(path.string(), v, 3, 5).ok());
  const std::string bytes = read_bytes(path);
  ASSERT_GE(bytes.size(), 10u);
  EXPECT_EQ(bytes.substr(0, 6), std::string("\x93NUMPY", 6));
  EXPECT_EQ(static_cast<uint8_t>(bytes[6]), 1);  // major
  EXPECT_EQ(static_cast<uint8_t>(bytes[7]), 0);  // minor
  const size_t header_len =
      static_cast<uint8_t>(bytes[8]) | (static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8);
  const size_t data_offset = 10 + header_len;
  EXPECT_EQ(data_offset % 64, 0u) << "header_len " << header_len;
  ASSERT_EQ(bytes.size(), data_offset + 15 * sizeof(float));
  const std::string header = bytes.substr(10, header_len);
  EXPECT_EQ(header.back(), '\n');
  EXPECT_EQ(header.front(), '{');
  EXPECT_THAT(header, HasSubstr("'descr': '<f4'"));
  EXPECT_THAT(header, HasSubstr("'fortran_order': False"));
  EXPECT_THAT(header, HasSubstr("'shape': (3, 5)"));
  // Between the dict's closing brace and the newline there is only space padding.
  const size_t close = header.rfind('}');
  ASSERT_NE(close, std::string::npos);
  EXPECT_EQ(header.find_first_not_of(' ', close + 1), header_len - 1);
  // Data: little-endian f32 in C order (this test runs on little-endian hosts).
  std::vector<float> back(15);
  std::memcpy(back.data(), bytes.data() + data_offset, 15 * sizeof(float));
  EXPECT_EQ(std::memcmp(back.data(), v.data(), 15 * sizeof(float)), 0);
}

TEST(Npy, HeaderAlignedForManyShapes) {
  // Shapes whose dict lengths differ, including ones that land exactly on a boundary.
  for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {0, 4}, {12, 345}, {1000, 1}, {123456, 7}, {2, 0}}) {
    const fs::path path = temp_path("shape.npy");
    ASSERT_TRUE(
        model::write_npy_f32(path.string(), std::vector<float>(rows * cols, 1.f), rows, cols).ok());
    const std::string bytes = read_bytes(path);
    const size_t header_len =
        static_cast<uint8_t>(bytes[8]) | (static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8);
    EXPECT_EQ((10 + header_len) % 64, 0u) << rows << "x" << cols;
    EXPECT_EQ(bytes.size(), 10 + header_len + rows * cols * sizeof(float));
    EXPECT_THAT(bytes.substr(10, header_len),
                HasSubstr("'shape': (" + std::to_string(rows) + ", " + std::to_string(cols) + ")"));
  }
}

TEST(Npy, SizeMismatchIsInvalidArgument) {
  const fs::path path = temp_path("bad.npy");
  fs::remove(path);
  absl::Status s = model::write_npy_f32(path.string(), std::vector<float>(14), 3, 5);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("14"));
  EXPECT_FALSE(fs::exists(path)) << "nothing is written on a size mismatch";
  EXPECT_EQ(model::write_npy_f32(path.string(), std::vector<float>(16), 3, 5).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Npy, UnwritablePathIsInternalNamingPath) {
  // The parent "directory" is a regular file, so neither creating it nor opening works
  // (even as root).
  const fs::path blocker = temp_path("plain_file");
  { std::ofstream(blocker) << "x"; }
  const std::string path = blocker.string() + "/sub/x.npy";
  absl::Status s = model::write_npy_f32(path, std::vector<float>(4), 2, 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr(path));
}

TEST(Npy, NumpyLoadsIt) {
  if (!fs::exists("/usr/bin/python3") ||
      std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3 with numpy not available";
  }
  const fs::path path = temp_path("np.npy");
  const std::vector<float> v = values_3x5();
  ASSERT_TRUE(model::write_npy_f32(path.string(), v, 3, 5).ok());
  // numpy checks shape, dtype and every value against the expected formula.
  const std::string script =
      "import numpy as np, sys\n"
      "a = np.load(sys.argv[1])\n"
      "e = (0.25 * np.arange(15, dtype=np.float32) - 1.5).astype(np.float32)\n"
      "e[7] = -0.0; e[14] = np.float32(3.0e38)\n"
      "ok = a.shape == (3, 5) and a.dtype == np.dtype('<f4') and a.flags['C_CONTIGUOUS'] and \\\n"
      "     np.array_equal(a.reshape(-1).view(np.uint32), e.view(np.uint32))\n"
      "sys.exit(0 if ok else 1)\n";
  const fs::path script_path = temp_path("check.py");
  {
    std::ofstream out(script_path);
    out << script;
  }
  const std::string cmd = "/usr/bin/python3 " + script_path.string() + " " + path.string();
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

}  // namespace
}  // namespace muflow::engine
