// Shard files: CRC-32 check value, round trip of float32/bfloat16 tensors with rank and world
// size, and an IoError naming file and tensor for every truncation, every flipped byte, a wrong
// magic and an unknown version.
#include "checkpoint/shard_file.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "checkpoint/crc32.h"
#include "deepshard/util/error.h"
#include "support/test_support.h"

namespace deepshard::checkpoint {
namespace shard_file_test {

namespace fs = std::filesystem;

class ShardFileTest : public ::testing::Test {
 protected:
  ShardFile sample() const {
    torch::manual_seed(0);
    ShardFile s;
    s.rank = 1;
    s.world_size = 4;
    s.tensors = {{"fp32_master", torch::randn({5, 3})},
                 {"exp_avg", torch::randn({6}).to(torch::kBFloat16)},
                 {"step_scale", torch::tensor(0.5f)},
                 {"empty", torch::empty({0})}};
    return s;
  }
  std::string read_bytes() const {
    std::ifstream in(file_, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  void write_bytes(const std::string& bytes) const {
    std::ofstream(file_, std::ios::binary | std::ios::trunc) << bytes;
  }
  std::string read_error() const {
    try {
      read_shard_file(file_);
    } catch (const IoError& e) {
      return e.what();
    }
    return "no IoError";
  }

  testing::TempDir dir_;
  std::string file_ = dir_.file("rank1.shard");
};

TEST(Crc32Test, MatchesTheStandardCheckValueAndIsIncremental) {
  EXPECT_EQ(crc32("123456789", 9), 0xCBF43926u);
  EXPECT_EQ(crc32("", 0), 0u);
  EXPECT_EQ(crc32("6789", 4, crc32("12345", 5)), 0xCBF43926u);
}

TEST_F(ShardFileTest, RoundTrips) {
  const ShardFile s = sample();
  write_shard_file(file_, s);
  EXPECT_FALSE(fs::exists(file_ + ".tmp"));
  const ShardFile back = read_shard_file(file_);
  EXPECT_EQ(back.rank, 1);
  EXPECT_EQ(back.world_size, 4);
  ASSERT_EQ(back.tensors.size(), s.tensors.size());
  for (size_t i = 0; i < s.tensors.size(); ++i) {
    EXPECT_EQ(back.tensors[i].first, s.tensors[i].first);
    EXPECT_EQ(back.tensors[i].second.scalar_type(), s.tensors[i].second.scalar_type());
    EXPECT_EQ(back.tensors[i].second.sizes(), s.tensors[i].second.sizes());
    EXPECT_TRUE(torch::equal(back.tensors[i].second, s.tensors[i].second));
  }
}

TEST_F(ShardFileTest, RefusesOtherDtypesAndDuplicateNamesWithoutLeavingFiles) {
  ShardFile s;
  s.tensors = {{"ids", torch::arange(3)}};
  EXPECT_THROW(write_shard_file(file_, s), IoError);
  s.tensors = {{"a", torch::ones({1})}, {"a", torch::ones({1})}};
  EXPECT_THROW(write_shard_file(file_, s), IoError);
  EXPECT_TRUE(fs::is_empty(dir_.path()));
}

TEST_F(ShardFileTest, EveryTruncationIsReported) {
  write_shard_file(file_, sample());
  const std::string bytes = read_bytes();
  for (size_t size = 0; size < bytes.size(); ++size) {
    write_bytes(bytes.substr(0, size));
    const std::string message = read_error();
    EXPECT_NE(message.find(file_), std::string::npos) << size << ": " << message;
  }
  // Cut inside the first tensor's data: the message names it.
  write_bytes(bytes.substr(0, 100));  // header 28, record metadata 44, data 60
  EXPECT_NE(
      read_error().find(
          "truncated file (100 bytes): tensor 'fp32_master' (#0) needs 60 bytes at offset 72"),
      std::string::npos)
      << read_error();
  write_bytes(bytes + "x");
  EXPECT_NE(read_error().find("1 trailing bytes"), std::string::npos) << read_error();
}

TEST_F(ShardFileTest, EveryFlippedByteIsReported) {
  write_shard_file(file_, sample());
  const std::string bytes = read_bytes();
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string flipped = bytes;
    flipped[i] = static_cast<char>(flipped[i] ^ 0x10);
    write_bytes(flipped);
    EXPECT_NE(read_error().find(file_), std::string::npos) << "byte " << i << ": " << read_error();
  }
  // A flipped byte in the bfloat16 tensor's data (after its name, dtype code, ndim, one dim and
  // byte count): a CRC mismatch naming that tensor.
  std::string flipped = bytes;
  const size_t exp_avg = bytes.find("exp_avg");
  flipped[exp_avg + 7 + 1 + 4 + 8 + 8 + 3] ^= 0x01;
  write_bytes(flipped);
  EXPECT_NE(read_error().find("corrupt file: tensor 'exp_avg' (#1): CRC32 mismatch"),
            std::string::npos)
      << read_error();
}

TEST_F(ShardFileTest, WrongMagicAndVersionAreReported) {
  write_shard_file(file_, sample());
  std::string bytes = read_bytes();
  std::string wrong = bytes;
  wrong[0] = 'X';
  write_bytes(wrong);
  EXPECT_NE(read_error().find("not a deepshard shard file (bad magic)"), std::string::npos);

  // Version 2 with a consistent header CRC.
  const uint32_t version = 2;
  std::memcpy(bytes.data() + 8, &version, 4);
  const uint32_t crc = crc32(bytes.data(), 24);
  std::memcpy(bytes.data() + 24, &crc, 4);
  write_bytes(bytes);
  EXPECT_NE(read_error().find("shard format version 2; this build reads version 1"),
            std::string::npos)
      << read_error();
}

}  // namespace shard_file_test
}  // namespace deepshard::checkpoint
