// Tag directories: a tag appears complete under its name and `latest` follows it; a leftover or
// failed .tmp directory is ignored and leaves `latest` at the previous tag.
#include "checkpoint/tag_directory.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

#include "deepshard/util/error.h"
#include "support/test_support.h"

namespace deepshard::checkpoint {
namespace tag_directory_test {

namespace fs = std::filesystem;

class TagDirectoryTest : public ::testing::Test {
 protected:
  // A fill function writing one file `name` with `content`.
  static auto file(const std::string& name, const std::string& content) {
    return [=](const std::string& tmp) { std::ofstream(fs::path(tmp) / name) << content; };
  }
  static std::string slurp(const fs::path& p) { return testing::read_file(p.string()); }
  testing::TempDir tmp_;
  std::string dir_ = tmp_.file("checkpoints");  // not created: write_tag creates it
};

TEST_F(TagDirectoryTest, WritesTagThenLatest) {
  EXPECT_EQ(read_latest(dir_), std::nullopt);
  write_tag(dir_, "global_step1", file("model.safetensors", "one"));
  EXPECT_EQ(read_latest(dir_), "global_step1");
  EXPECT_EQ(slurp(fs::path(dir_) / "latest"), "global_step1");  // DeepSpeed's format
  EXPECT_EQ(slurp(fs::path(tag_path(dir_, "global_step1")) / "model.safetensors"), "one");
  EXPECT_FALSE(fs::exists(fs::path(dir_) / "global_step1.tmp"));
  EXPECT_FALSE(fs::exists(fs::path(dir_) / "latest.tmp"));
}

TEST_F(TagDirectoryTest, LeftoverTmpIsIgnoredAndLatestKeepsThePreviousTag) {
  write_tag(dir_, "step1", file("a", "1"));
  // A crash while writing step2: its .tmp directory is left behind, half written.
  fs::create_directories(fs::path(dir_) / "step2.tmp");
  std::ofstream(fs::path(dir_) / "step2.tmp" / "partial") << "x";
  EXPECT_EQ(read_latest(dir_), "step1");
  EXPECT_FALSE(fs::exists(fs::path(dir_) / "step2"));

  // A failing fill: latest unchanged, its .tmp removed.
  EXPECT_THROW(
      write_tag(dir_, "step3", [](const std::string&) { throw std::runtime_error("disk full"); }),
      std::runtime_error);
  EXPECT_EQ(read_latest(dir_), "step1");
  EXPECT_FALSE(fs::exists(fs::path(dir_) / "step3.tmp"));

  // Writing step2 again replaces the leftover: only the new files are published.
  write_tag(dir_, "step2", file("b", "2"));
  EXPECT_EQ(read_latest(dir_), "step2");
  EXPECT_FALSE(fs::exists(fs::path(dir_) / "step2" / "partial"));
  EXPECT_EQ(slurp(fs::path(dir_) / "step2" / "b"), "2");
  EXPECT_FALSE(fs::exists(fs::path(dir_) / "step2.tmp"));
}

TEST_F(TagDirectoryTest, RewritingATagReplacesItsContent) {
  write_tag(dir_, "best", file("a", "old"));
  write_tag(dir_, "best", file("b", "new"));
  EXPECT_EQ(read_latest(dir_), "best");
  EXPECT_FALSE(fs::exists(fs::path(dir_) / "best" / "a"));
  EXPECT_EQ(slurp(fs::path(dir_) / "best" / "b"), "new");
  EXPECT_FALSE(fs::exists(fs::path(dir_) / "best.old.tmp"));
}

TEST_F(TagDirectoryTest, RejectsBadTagsAndADanglingLatest) {
  for (const std::string tag : {"", "a/b", "latest", "x.tmp", ".."})
    EXPECT_THROW(write_tag(dir_, tag, file("a", "")), IoError) << tag;
  fs::create_directories(dir_);
  std::ofstream(fs::path(dir_) / "latest") << "gone\n";
  try {
    read_latest(dir_);
    FAIL() << "dangling latest accepted";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("names tag 'gone'"), std::string::npos) << e.what();
  }
}

}  // namespace tag_directory_test
}  // namespace deepshard::checkpoint
