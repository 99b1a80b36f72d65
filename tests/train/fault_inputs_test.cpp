// Faults from outside the ranks, each a clear error naming what and where, and nothing lost: a
// loss that turns NaN (a learning rate of 1e6), a truncated and a corrupted token file, a data file
// changed between a save and the resume (the checkpoint's data fingerprint), and a disk that fills
// up during a checkpoint (a 2 MiB tmpfs, where the machine lets the test mount one): the save fails
// naming the file and the previous `latest` still resumes.
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <filesystem>
#include <fstream>

#include "train/run_helpers.h"

namespace deepshard::testing {
namespace fault_inputs_test {

namespace fs = std::filesystem;

launch::RunResult train(const TempDir& dir, const std::string& data, const std::string& name,
                        int64_t steps, const std::string& extra) {
  const std::string config = dir.file(name + ".json");
  write_file(config, tiny_run_config(data, dir.file(name), 2, 1, steps, extra));
  return run_ranks(2, deepshard_exe(), {"train", "--config", config}, 300);
}

void patch_file(const std::string& path, std::streamoff at, const std::string& bytes) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(at);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

TEST(FaultInputs, ANanLossStopsTheRunNamingTheStep) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  auto r = train(dir, data, "nan", 30,
                 R"({"optimizer": {"params": {"lr": 1e6}}, "gradient_clipping": 0,
                     "scheduler": {"params": {"warmup_max_lr": 1e6}}})");
  EXPECT_NE(r.exit_status, 0) << r.output;
  EXPECT_NE(r.output.find(": the training loss is "), std::string::npos) << r.output;
}

TEST(FaultInputs, TruncatedOrCorruptedTokenFilesAreErrorsNamingTheFile) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  fs::resize_file(data, fs::file_size(data) - 101);
  auto truncated = train(dir, data, "truncated", 2, "{}");
  EXPECT_NE(truncated.exit_status, 0) << truncated.output;
  EXPECT_NE(truncated.output.find(data), std::string::npos) << truncated.output;

  TempDir dir2;
  const std::string data2 = make_token_file(dir2);
  patch_file(data2, 64 + 2 * 10, std::string("\xff\xff", 2));  // token 10 = 65535 >= vocab
  auto corrupted = train(dir2, data2, "corrupted", 2, "{}");
  EXPECT_NE(corrupted.exit_status, 0) << corrupted.output;
  EXPECT_NE(corrupted.output.find(data2), std::string::npos) << corrupted.output;
}

TEST(FaultInputs, DataChangedBetweenSaveAndResumeIsRefused) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const std::string ckpt = dir.file("ckpt");
  const std::string extra =
      R"({"train": {"save_interval": 2, "resume": "auto", "checkpoint_dir": ")" + ckpt + R"("}})";
  auto first = train(dir, data, "first", 4, extra);
  ASSERT_EQ(first.exit_status, 0) << first.output;
  const std::string before = read_file(data);
  const auto token = static_cast<unsigned char>(before[64 + 2 * 100]);
  patch_file(data, 64 + 2 * 100, std::string(1, char((token + 1) % 200)));  // another valid token
  auto resumed = train(dir, data, "resumed", 8, extra);
  EXPECT_NE(resumed.exit_status, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resume: the training data " + data + " changed since"),
            std::string::npos)
      << resumed.output;
}

TEST(FaultInputs, DiskFullDuringACheckpointKeepsThePreviousLatest) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const std::string disk = dir.file("disk");
  fs::create_directories(disk);
  if (::mount("tmpfs", disk.c_str(), "tmpfs", 0, "size=2m") != 0) {
    GTEST_SKIP() << "cannot mount a size-limited tmpfs here (needs root)";
  }
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{disk};
  // A tiny-model checkpoint takes ~1.4 MB: the first fits, the second (written beside it) not.
  const std::string extra =
      R"({"train": {"save_interval": 2, "resume": "auto", "checkpoint_dir": ")" + disk + R"("}})";
  auto full = train(dir, data, "full", 4, extra);
  EXPECT_NE(full.exit_status, 0) << full.output;
  EXPECT_NE(full.output.find(disk), std::string::npos) << full.output;
  EXPECT_NE(full.output.find("No space left on device"), std::string::npos) << full.output;
  EXPECT_EQ(read_file(disk + "/latest"), "step2");
  EXPECT_FALSE(fs::exists(disk + "/step4"));
  // The previous latest resumes (to a roomier disk nothing else changes).
  auto resumed =
      train(dir, data, "resumed", 3, R"({"train": {"resume": ")" + disk + R"(/step2"}})");
  EXPECT_EQ(resumed.exit_status, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("at step 2"), std::string::npos) << resumed.output;
}

}  // namespace fault_inputs_test
}  // namespace deepshard::testing
