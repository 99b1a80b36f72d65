// Offloaded state in checkpoints and the faults of NVMe offload, end to end with real ranks:
// - a checkpoint written with offload_optimizer nvme resumes bit for bit with nvme, without
//   offload, and the other way round; and at another world size and stage (stage 3 with optimizer
//   and parameters on NVMe, N = 3);
// - before training: a missing nvme_path, a filesystem refusing O_DIRECT (ramfs) and one too small
//   for the swap files (a 256 KiB tmpfs) are clear errors naming the path and the bytes needed;
// - mid-run: swap writes that fail with ENOSPC on rank 1 (deepshard_faults'
//   DEEPSHARD_TEST_SWAP_WRITE_FAIL) stop
// every
//   rank with an error naming rank 1's swap file, and the last checkpoint stays intact: the run
//   resumes from it.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "io/io_test_helpers.h"
#include "support/test_support.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace offload_checkpoint_test {

namespace fs = std::filesystem;

struct TrainRun {
  int status = 0;
  std::string output;
  std::vector<nlohmann::json> metrics;
};

class OffloadCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = make_token_file(dir_);
    nvme_ = dir_.file("nvme");
    fs::create_directories(nvme_);
  }

  TrainRun train(const std::string& name, int ranks, int64_t steps, const nlohmann::json& extra,
                 const std::map<std::string, std::string>& env = {}) {
    const std::string run_dir = dir_.file("run_" + name);
    const std::string config = dir_.file(name + ".json");
    write_file(config, tiny_run_config(data_, run_dir, 12 / ranks, 1, steps, extra.dump()));
    // Faults come through the test executable (tests/workers/fault_main.cpp), never deepshard.
    auto r = run_ranks(ranks, env.empty() ? deepshard_exe() : faults_exe(),
                       {"train", "--config", config}, 300, env);
    TrainRun out{r.exit_status, r.output, {}};
    if (fs::exists(run_dir + "/metrics.jsonl")) out.metrics = read_metrics(run_dir);
    return out;
  }

  nlohmann::json zero(int stage, const std::string& opt, const std::string& param = "none") {
    nlohmann::json z = {{"stage", stage}, {"sub_group_size", 3000}};
    if (stage == 3) z["stage3_param_persistence_threshold"] = 0;  // blocks' slices swappable
    if (opt != "none") z["offload_optimizer"] = {{"device", opt}, {"nvme_path", nvme_}};
    if (param != "none")
      z["offload_param"] = {
          {"device", param}, {"nvme_path", nvme_}, {"max_in_cpu", 0}, {"buffer_size", 100000}};
    return z;
  }

  nlohmann::json with_ckpt(nlohmann::json z, const std::string& ckpt, int64_t interval,
                           const std::string& resume) {
    return {{"zero_optimization", z},
            {"train", {{"checkpoint_dir", ckpt}, {"save_interval", interval}, {"resume", resume}}}};
  }

  static void expect_tail_equal(const TrainRun& full, const TrainRun& resumed,
                                const std::string& what) {
    ASSERT_EQ(full.metrics.size(), 20u) << full.output;
    ASSERT_EQ(resumed.metrics.size(), 10u) << what << "\n" << resumed.output;
    for (size_t i = 0; i < 10; ++i) {
      EXPECT_EQ(resumed.metrics[i].at("loss").get<double>(),
                full.metrics[10 + i].at("loss").get<double>())
          << what << ", step " << 11 + i;
    }
  }

  TempDir dir_;
  std::string data_, nvme_;
};

TEST_F(OffloadCheckpoint, ResumesWithAndWithoutOffloadAndAtAnotherWorldSize) {
  const TrainRun full = train("full", 2, 20, {{"zero_optimization", zero(2, "none")}});
  ASSERT_EQ(full.status, 0) << full.output;
  // Saved with nvme at step 10.
  const std::string a = dir_.file("ckpt_nvme");
  const TrainRun first = train("a", 2, 10, with_ckpt(zero(2, "nvme"), a, 10, ""));
  ASSERT_EQ(first.status, 0) << first.output;
  ASSERT_TRUE(fs::exists(a + "/step10/manifest.json"));
  for (const std::string resume_with : {"nvme", "none"}) {
    fs::remove_all(dir_.file("ckpt_copy"));
    fs::copy(a, dir_.file("ckpt_copy"), fs::copy_options::recursive);
    const TrainRun second =
        train("b_" + resume_with, 2, 20,
              with_ckpt(zero(2, resume_with), dir_.file("ckpt_copy"), 0, "auto"));
    ASSERT_EQ(second.status, 0) << second.output;
    expect_tail_equal(full, second, "saved with nvme, resumed with " + resume_with);
  }
  // Saved without offload, resumed with nvme.
  const std::string b = dir_.file("ckpt_plain");
  ASSERT_EQ(train("c", 2, 10, with_ckpt(zero(2, "none"), b, 10, "")).status, 0);
  const TrainRun third = train("d", 2, 20, with_ckpt(zero(2, "nvme"), b, 0, "auto"));
  ASSERT_EQ(third.status, 0) << third.output;
  expect_tail_equal(full, third, "saved without offload, resumed with nvme");
  // Another world size and stage: N = 3, stage 3 with optimizer and parameters on NVMe.
  const TrainRun other = train("e", 3, 14, with_ckpt(zero(3, "nvme", "nvme"), a, 0, "auto"));
  ASSERT_EQ(other.status, 0) << other.output;
  ASSERT_EQ(other.metrics.size(), 4u) << other.output;
  EXPECT_EQ(other.metrics.front().at("step").get<int64_t>(), 11);
  // The same data, another partitioning: the loss continues where it was (within 2 %).
  EXPECT_NEAR(other.metrics.front().at("loss").get<double>(),
              full.metrics[10].at("loss").get<double>(),
              0.02 * full.metrics[10].at("loss").get<double>());
  EXPECT_TRUE(fs::is_empty(nvme_)) << "swap files left in " << nvme_;
}

TEST_F(OffloadCheckpoint, StartUpChecksNameThePathAndTheBytesNeeded) {
  auto nvme_at = [&](const std::string& path) {
    nlohmann::json z = zero(2, "nvme");
    z["offload_optimizer"]["nvme_path"] = path;
    return nlohmann::json{{"zero_optimization", z}};
  };
  const std::string missing = dir_.file("no_such_dir");
  TrainRun r = train("missing", 2, 2, nvme_at(missing));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("nvme_path " + missing + ": no such folder"), std::string::npos)
      << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("on a disk with [0-9]+ bytes"))) << r.output;

  io::testing::ScopedMount small("tmpfs", "size=256k");
  if (small.mounted()) {
    r = train("full_disk", 2, 2, nvme_at(small.path()));
    EXPECT_NE(r.status, 0);
    EXPECT_TRUE(std::regex_search(
        r.output,
        std::regex("nvme_path " + small.path() +
                   ": the swap files of rank [01] need [0-9]+ bytes .* has [0-9]+ bytes")))
        << r.output;
  } else {
    std::printf(
        "cannot mount a small tmpfs here (%s): the too-small disk case is covered by "
        "io_tests only\n",
        small.why().c_str());
  }
  io::testing::ScopedMount ramfs("ramfs", "");
  if (ramfs.mounted()) {
    r = train("ramfs", 2, 2, nvme_at(ramfs.path()));
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.output.find("refuses direct I/O"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(ramfs.path()), std::string::npos) << r.output;
  }
}

TEST_F(OffloadCheckpoint, ADiskFullMidRunStopsEveryRankAndTheLastCheckpointResumes) {
  // Writes per step: two arrays per swapped sub-group (the start-up line gives the count).
  const TrainRun probe = train("probe", 2, 1, {{"zero_optimization", zero(2, "nvme")}});
  ASSERT_EQ(probe.status, 0) << probe.output;
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(probe.output, m, std::regex("nvme: ([0-9]+) of ([0-9]+) sub-groups")))
      << probe.output;
  const int64_t writes_per_step = 2 * std::stoll(m[1]);
  // Initialisation and 6 steps succeed; step 7 fails (checkpoints at 3 and 6).
  const std::string ckpt = dir_.file("ckpt_fault");
  const TrainRun failed =
      train("fault", 2, 20, with_ckpt(zero(2, "nvme"), ckpt, 3, ""),
            {{"DEEPSHARD_TEST_SWAP_WRITE_FAIL", std::to_string(writes_per_step * 7 + 1) + ":1"}});
  EXPECT_NE(failed.status, 0) << failed.output;
  EXPECT_EQ(failed.metrics.size(), 6u) << failed.output;
  // Both ranks report rank 1's failed file with its errno.
  const std::regex named(
      "rank 1: write of [0-9]+ bytes at offset [0-9]+ of \\S+/rank1/"
      "optimizer_subgroup[0-9]+\\.swp failed: No space left on device");
  int reports = 0;
  for (auto it = std::sregex_iterator(failed.output.begin(), failed.output.end(), named);
       it != std::sregex_iterator(); ++it)
    ++reports;
  EXPECT_GE(reports, 2) << failed.output;
  EXPECT_EQ(read_file(ckpt + "/latest"), "step6");
  // The last checkpoint is intact: the run resumes from it.
  const TrainRun resumed = train("resume", 2, 8, with_ckpt(zero(2, "nvme"), ckpt, 0, "auto"));
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  ASSERT_EQ(resumed.metrics.size(), 2u) << resumed.output;
  EXPECT_EQ(resumed.metrics.front().at("step").get<int64_t>(), 7);
  EXPECT_TRUE(fs::is_empty(nvme_)) << "swap files left in " << nvme_;
}

}  // namespace offload_checkpoint_test
}  // namespace deepshard::testing
