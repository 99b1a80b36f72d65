// End-to-end tests of `deepshard prepare-data`: the real executable on text files.
#include <gtest/gtest.h>

#include <filesystem>

#include "data/token_file.h"
#include "support/test_support.h"

namespace deepshard::data {
namespace prepare_data_cmd_test {

using testing::run_deepshard;
using testing::TempDir;
using testing::write_file;

TEST(PrepareDataCommand, WritesBothFilesAndPrintsTheSummary) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("text"));
  for (int i = 0; i < 4; ++i)
    write_file(dir.file("text/doc" + std::to_string(i) + ".txt"), std::string(100 + i, 'x'));
  auto r = run_deepshard({"prepare-data", dir.file("text"), "-o", dir.file("out.bin"),
                          "--valid-output", dir.file("val.bin"), "--valid-fraction=0.25"});
  ASSERT_EQ(r.exit_status, 0) << r.output;
  // 3 training documents: 100 + 101 + 102 bytes and 2 separators; 1 validation document.
  EXPECT_NE(r.output.find("documents: 4 (3 train, 1 valid)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("train: " + dir.file("out.bin") + ": 305 tokens"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("valid: " + dir.file("val.bin") + ": 103 tokens"), std::string::npos)
      << r.output;
  EXPECT_EQ(TokenFile(dir.file("out.bin")).size(), 305);
  EXPECT_EQ(TokenFile(dir.file("val.bin")).size(), 103);
}

// --tokenizer gpt2: GPT-2's BPE ids (those of "Hello, world!" are 15496, 11, 995, 0 in the
// reference encoder), vocabulary 50257 in the header.
TEST(PrepareDataCommand, Gpt2Tokenizer) {
  TempDir dir;
  write_file(dir.file("a.txt"), "Hello, world!");
  write_file(dir.file("b.txt"), "Hello, world!");
  auto r = run_deepshard({"prepare-data", dir.file("a.txt"), dir.file("b.txt"), "-o",
                          dir.file("out.bin"), "--tokenizer", "gpt2"});
  ASSERT_EQ(r.exit_status, 0) << r.output;
  TokenFile train(dir.file("out.bin"));
  EXPECT_EQ(train.vocab_size(), 50257);
  ASSERT_EQ(train.size(), 4);
  const std::vector<int64_t> expected = {15496, 11, 995, 0};
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(train.token(i), expected[size_t(i)]) << i;
  auto bad = run_deepshard({"prepare-data", dir.file("a.txt"), dir.file("b.txt"), "-o",
                            dir.file("x.bin"), "--tokenizer", "gpt3"});
  EXPECT_NE(bad.exit_status, 0);
  EXPECT_NE(bad.output.find("unknown tokenizer \"gpt3\" (byte or gpt2)"), std::string::npos)
      << bad.output;
}

TEST(PrepareDataCommand, Help) {
  auto r = run_deepshard({"prepare-data", "--help"});
  EXPECT_EQ(r.exit_status, 0);
  EXPECT_NE(r.output.find("usage: deepshard prepare-data TEXT..."), std::string::npos) << r.output;
}

TEST(PrepareDataCommand, BadArgumentsAreUsageErrors) {
  TempDir dir;
  write_file(dir.file("a.txt"), "text");
  auto typo = run_deepshard({"prepare-data", dir.file("a.txt"), "--valid-fractoin", "0.1"});
  EXPECT_EQ(typo.exit_status, 2);
  EXPECT_NE(typo.output.find("unknown option '--valid-fractoin' (did you mean --valid-fraction?)"),
            std::string::npos)
      << typo.output;
  auto no_output = run_deepshard({"prepare-data", dir.file("a.txt")});
  EXPECT_EQ(no_output.exit_status, 2);
  EXPECT_NE(no_output.output.find("no output file"), std::string::npos) << no_output.output;
  auto bad_fraction = run_deepshard(
      {"prepare-data", dir.file("a.txt"), "-o", dir.file("o.bin"), "--valid-fraction", "half"});
  EXPECT_EQ(bad_fraction.exit_status, 2);
  EXPECT_NE(bad_fraction.output.find("not a number: 'half'"), std::string::npos);
  auto missing_value = run_deepshard({"prepare-data", dir.file("a.txt"), "-o"});
  EXPECT_EQ(missing_value.exit_status, 2);
  EXPECT_FALSE(std::filesystem::exists(dir.file("o.bin")));
}

TEST(PrepareDataCommand, MissingInputFails) {
  TempDir dir;
  auto r = run_deepshard({"prepare-data", dir.file("nope.txt"), "-o", dir.file("o.bin")});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_NE(r.output.find(dir.file("nope.txt") + ": no such file"), std::string::npos) << r.output;
}

}  // namespace prepare_data_cmd_test
}  // namespace deepshard::data
