// Tests of the token file format: round trip, the exact header layout, atomic replacement, and
// every malformed-file error (each names the file and the problem).
#include "data/token_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "deepshard/util/error.h"
#include "support/test_support.h"

namespace deepshard::data {
namespace token_file_test {

using testing::read_file;
using testing::TempDir;
using testing::write_file;

std::vector<uint16_t> random_tokens(size_t n, int vocab, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(0, vocab - 1);
  std::vector<uint16_t> tokens(n);
  for (auto& t : tokens) t = static_cast<uint16_t>(dist(rng));
  return tokens;
}

template <typename T>
void put(std::string& bytes, size_t offset, T value) {
  std::memcpy(bytes.data() + offset, &value, sizeof value);
}

// The IoError message of opening `path`, or "" when it opens.
std::string open_error(const std::string& path, int64_t model_vocab = 0) {
  try {
    TokenFile file(path, model_vocab);
  } catch (const IoError& e) {
    return e.what();
  }
  return "";
}

TEST(TokenFile, RoundTrip) {
  TempDir dir;
  const std::string path = dir.file("sub/dir/tokens.bin");  // parent folders are created
  auto tokens = random_tokens(10007, 256, 1);
  write_token_file(path, tokens, 256);
  TokenFile file(path);
  EXPECT_EQ(file.path(), path);
  ASSERT_EQ(file.size(), 10007);
  EXPECT_EQ(file.vocab_size(), 256);
  for (size_t i = 0; i < tokens.size(); ++i) ASSERT_EQ(file.token(i), tokens[i]) << i;
  std::vector<int64_t> window(100);
  file.read(5000, 100, window.data());
  for (int i = 0; i < 100; ++i) EXPECT_EQ(window[i], tokens[5000 + i]);
}

TEST(TokenFile, HeaderLayoutIsAsDocumented) {
  TempDir dir;
  write_token_file(dir.file("t.bin"), {1, 2, 65535}, 65536);
  std::string bytes = read_file(dir.file("t.bin"));
  ASSERT_EQ(bytes.size(), 64u + 3 * 2);
  EXPECT_EQ(bytes.substr(0, 8), "DSTOKENS");
  uint32_t version, dtype;
  uint64_t count, vocab;
  std::memcpy(&version, bytes.data() + 8, 4);
  std::memcpy(&dtype, bytes.data() + 12, 4);
  std::memcpy(&count, bytes.data() + 16, 8);
  std::memcpy(&vocab, bytes.data() + 24, 8);
  EXPECT_EQ(version, 1u);
  EXPECT_EQ(dtype, 2u);
  EXPECT_EQ(count, 3u);
  EXPECT_EQ(vocab, 65536u);
  EXPECT_EQ(bytes.substr(32, 32), std::string(32, '\0'));
  EXPECT_EQ(bytes.substr(64), std::string("\x01\x00\x02\x00\xff\xff", 6));
}

TEST(TokenFile, ReadsUint32Tokens) {
  TempDir dir;
  std::string bytes(64 + 3 * 4, '\0');
  std::memcpy(bytes.data(), "DSTOKENS", 8);
  put<uint32_t>(bytes, 8, 1);
  put<uint32_t>(bytes, 12, 4);
  put<uint64_t>(bytes, 16, 3);
  put<uint64_t>(bytes, 24, 100000);
  put<uint32_t>(bytes, 64, 7);
  put<uint32_t>(bytes, 68, 99999);
  put<uint32_t>(bytes, 72, 70000);
  write_file(dir.file("u32.bin"), bytes);
  TokenFile file(dir.file("u32.bin"));
  EXPECT_EQ(file.size(), 3);
  EXPECT_EQ(file.vocab_size(), 100000);
  std::vector<int64_t> all(3);
  file.read(0, 3, all.data());
  EXPECT_EQ(all, (std::vector<int64_t>{7, 99999, 70000}));
  EXPECT_EQ(
      open_error(dir.file("u32.bin"), 50000),
      dir.file("u32.bin") + ": token 99999 at index 1 is outside the model's vocabulary (50000)");
}

TEST(TokenFile, RewriteReplacesTheFileAndLeavesNoTemporary) {
  TempDir dir;
  write_token_file(dir.file("t.bin"), random_tokens(50, 256, 2), 256);
  auto second = random_tokens(20, 256, 3);
  write_token_file(dir.file("t.bin"), second, 256);
  TokenFile file(dir.file("t.bin"));
  ASSERT_EQ(file.size(), 20);
  EXPECT_EQ(file.token(19), second[19]);
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_EQ(e.path().filename(), "t.bin");
    ++entries;
  }
  EXPECT_EQ(entries, 1);
}

TEST(TokenFile, WriterRejectsTokensOutsideTheVocabulary) {
  TempDir dir;
  try {
    write_token_file(dir.file("t.bin"), {1, 2, 256}, 256);
    FAIL() << "no error";
  } catch (const IoError& e) {
    EXPECT_EQ(std::string(e.what()),
              dir.file("t.bin") + ": token 256 at index 2 is outside the vocabulary (256)");
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("t.bin")));
}

class TokenFileErrors : public ::testing::Test {
 protected:
  // A valid file of 32 tokens (vocab 256) as bytes, to be damaged by each test.
  std::string valid_bytes() {
    write_token_file(dir_.file("good.bin"), random_tokens(32, 256, 4), 256);
    return read_file(dir_.file("good.bin"));
  }
  std::string write(const std::string& bytes) {
    write_file(dir_.file("x.bin"), bytes);
    return dir_.file("x.bin");
  }
  TempDir dir_;
};

TEST_F(TokenFileErrors, Missing) {
  EXPECT_EQ(open_error(dir_.file("none.bin")), dir_.file("none.bin") + ": no such file");
}

TEST_F(TokenFileErrors, Empty) {
  std::string path = write("");
  EXPECT_EQ(open_error(path), path + ": empty");
  // A well-formed header with no tokens is empty too.
  write_token_file(dir_.file("zero.bin"), {}, 256);
  EXPECT_EQ(open_error(dir_.file("zero.bin")),
            dir_.file("zero.bin") + ": empty (the header says 0 tokens)");
}

TEST_F(TokenFileErrors, BadMagic) {
  std::string bytes = valid_bytes();
  bytes[0] = 'X';
  std::string path = write(bytes);
  EXPECT_EQ(open_error(path), path + ": not a deepshard token file (bad magic)");
  path = write("hello, world\n");  // a text file given by mistake
  EXPECT_EQ(open_error(path), path + ": not a deepshard token file (bad magic)");
}

TEST_F(TokenFileErrors, TruncatedTokens) {
  std::string bytes = valid_bytes();
  std::string path = write(bytes.substr(0, bytes.size() - 5));
  EXPECT_EQ(open_error(path),
            path +
                ": truncated: header says 32 tokens (64 bytes) but the file has 59 bytes of "
                "tokens");
}

TEST_F(TokenFileErrors, TruncatedHeader) {
  std::string path = write(valid_bytes().substr(0, 40));
  EXPECT_EQ(open_error(path), path + ": truncated: the header needs 64 bytes but the file has 40");
}

TEST_F(TokenFileErrors, TrailingBytes) {
  std::string path = write(valid_bytes() + "xy");
  EXPECT_EQ(open_error(path),
            path +
                ": size mismatch: header says 32 tokens (64 bytes) but the file has 66 bytes "
                "of tokens");
}

TEST_F(TokenFileErrors, WrongVersion) {
  std::string bytes = valid_bytes();
  put<uint32_t>(bytes, 8, 2);
  std::string path = write(bytes);
  EXPECT_EQ(open_error(path), path + ": unsupported format version 2 (this build reads version 1)");
}

TEST_F(TokenFileErrors, BadDtypeAndVocabulary) {
  std::string bytes = valid_bytes();
  put<uint32_t>(bytes, 12, 3);
  std::string path = write(bytes);
  EXPECT_EQ(open_error(path), path + ": bad token dtype 3 (expected 2 = uint16 or 4 = uint32)");
  bytes = valid_bytes();
  put<uint64_t>(bytes, 24, 70000);  // more than uint16 tokens can hold
  path = write(bytes);
  EXPECT_EQ(open_error(path), path + ": bad vocabulary size 70000 for 2-byte tokens");
}

TEST_F(TokenFileErrors, TokenOutsideTheVocabulary) {
  std::string bytes = valid_bytes();
  put<uint16_t>(bytes, 64 + 2 * 17, 300);
  std::string path = write(bytes);
  EXPECT_EQ(open_error(path), path + ": token 300 at index 17 is outside the vocabulary (256)");
}

TEST_F(TokenFileErrors, TokenOutsideTheModelVocabulary) {
  std::vector<uint16_t> tokens(40, 5);
  tokens[23] = 300;
  write_token_file(dir_.file("big.bin"), tokens, 512);
  EXPECT_EQ(open_error(dir_.file("big.bin")), "");  // fine for the file's own vocabulary
  EXPECT_EQ(open_error(dir_.file("big.bin"), 512), "");
  EXPECT_EQ(
      open_error(dir_.file("big.bin"), 256),
      dir_.file("big.bin") + ": token 300 at index 23 is outside the model's vocabulary (256)");
}

}  // namespace token_file_test
}  // namespace deepshard::data
