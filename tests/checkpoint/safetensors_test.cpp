// safetensors: round trips of F32/F16/BF16 tensors of several shapes (0-d, empty), the byte layout
// of the reference format, and an IoError naming file, problem and tensor for each corruption.
#include "deepshard/checkpoint/safetensors.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "deepshard/util/error.h"
#include "support/test_support.h"

namespace deepshard::checkpoint {
namespace safetensors_test {

namespace fs = std::filesystem;

class SafetensorsTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return dir_.file(name); }
  testing::TempDir dir_;
};

// A safetensors file from a raw JSON header and data section.
void write_raw(const std::string& path, const std::string& header, const std::string& data) {
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << data;
}

// The IoError message of loading `path`; fails the test if nothing is thrown.
std::string load_error(const std::string& path) {
  try {
    load_safetensors(path);
  } catch (const IoError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no IoError for " << path;
  return "";
}

TEST_F(SafetensorsTest, RoundTripsDtypesAndShapes) {
  torch::manual_seed(0);
  TensorMap tensors = {
      {"b.matrix", torch::randn({3, 5})},
      {"a.half", torch::randn({2, 3, 4}).to(torch::kHalf)},
      {"c.bf16", torch::randn({7}).to(torch::kBFloat16)},
      {"d.scalar", torch::tensor(3.25f)},
      {"e.empty", torch::empty({0, 4})},
      {"f.strided", torch::randn({4, 6}).t()},  // non-contiguous input
  };
  save_safetensors(path("m.safetensors"), tensors, {{"format", "pt"}});
  EXPECT_FALSE(fs::exists(path("m.safetensors.tmp")));
  const SafetensorsContent back = load_safetensors(path("m.safetensors"));
  ASSERT_EQ(back.tensors.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    SCOPED_TRACE(name);
    const at::Tensor& r = back.tensors.at(name);
    EXPECT_EQ(r.scalar_type(), t.scalar_type());
    EXPECT_EQ(r.sizes(), t.sizes());
    EXPECT_TRUE(torch::equal(r, t));
  }
  EXPECT_EQ(back.tensors.at("d.scalar").dim(), 0);
  EXPECT_EQ(back.metadata, (Metadata{{"format", "pt"}}));
}

TEST_F(SafetensorsTest, LayoutFollowsTheReferenceFormat) {
  save_safetensors(path("x.safetensors"),
                   {{"z", torch::tensor({1.0f, 2.0f})}, {"a", torch::tensor({3.0f})}});
  std::ifstream in(path("x.safetensors"), std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  EXPECT_EQ(n % 8, 0u);  // padded with spaces so the data is aligned
  std::string header(n, '\0');
  in.read(header.data(), n);
  EXPECT_NE(header.find(R"("a":{"data_offsets":[0,4],"dtype":"F32","shape":[1]})"),
            std::string::npos)
      << header;
  EXPECT_NE(header.find(R"("z":{"data_offsets":[4,12],"dtype":"F32","shape":[2]})"),
            std::string::npos)
      << header;
  float data[3];
  in.read(reinterpret_cast<char*>(data), sizeof data);
  EXPECT_EQ(data[0], 3.0f);  // "a" first: sorted by name
  EXPECT_EQ(data[1], 1.0f);
  EXPECT_EQ(data[2], 2.0f);
  EXPECT_EQ(in.peek(), EOF);
}

TEST_F(SafetensorsTest, RefusesUnsupportedDtypeOnWrite) {
  try {
    save_safetensors(path("i.safetensors"), {{"ids", torch::zeros({3}, torch::kComplexFloat)}});
    FAIL() << "complex64 accepted";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("'ids'"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(path("i.safetensors")));
  EXPECT_FALSE(fs::exists(path("i.safetensors.tmp")));
}

TEST_F(SafetensorsTest, ReportsEachCorruption) {
  const std::string ok_entry = R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string eight(8, '\0');
  struct Case {
    std::string name, header, data, expected;
  };
  const Case cases[] = {
      {"json", "{\"w\":", eight, "not valid JSON"},
      {"dtype", R"({"w":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}})", eight,
       "tensor 'w': unsupported dtype 'C64'"},
      {"range", R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", eight,
       "tensor 'w': data_offsets [0, 16] beyond the data section of 8 bytes"},
      {"size", R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight,
       "tensor 'w': data_offsets [0, 8] hold 8 bytes but shape x F32 needs 12"},
      {"order", R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", eight,
       "end before begin"},
      {"overlap", "{" + ok_entry + R"(,"v":{"dtype":"F16","shape":[2],"data_offsets":[4,8]}})",
       eight, "tensor 'v' data_offsets [4, 8] overlap tensor 'w' [0, 8]"},
      {"shape", R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,8]}})", eight,
       "tensor 'w': shape entry -1"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string p = path(c.name + ".safetensors");
    write_raw(p, c.header, c.data);
    const std::string message = load_error(p);
    EXPECT_NE(message.find(p), std::string::npos) << message;
    EXPECT_NE(message.find(c.expected), std::string::npos) << message;
  }
}

TEST_F(SafetensorsTest, ReportsShortFiles) {
  const std::string p = path("short.safetensors");
  std::ofstream(p, std::ios::binary) << "abc";
  EXPECT_NE(load_error(p).find("short file (3 bytes)"), std::string::npos);

  // A header length beyond the file.
  write_raw(p, "{}", "");
  std::fstream f(p, std::ios::binary | std::ios::in | std::ios::out);
  const uint64_t huge = 1000;
  f.write(reinterpret_cast<const char*>(&huge), 8);
  f.close();
  EXPECT_NE(load_error(p).find("header length 1000 goes beyond the end of the file (10 bytes)"),
            std::string::npos);

  // A valid file cut inside its data section.
  save_safetensors(p, {{"w", torch::ones({4})}});
  fs::resize_file(p, fs::file_size(p) - 1);
  EXPECT_NE(load_error(p).find("tensor 'w': data_offsets [0, 16] beyond the data section of 15"),
            std::string::npos);
}

}  // namespace safetensors_test
}  // namespace deepshard::checkpoint
