// Checkpoint save/load are collective: misuse (and module state they cannot save in a
// model-parallel layout) is an error on every rank, never a hang (workers in
// tests/workers/checkpoint_worker.cpp, started as real ranks).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "support/test_support.h"

namespace deepshard::testing {
namespace checkpoint_collective_test {

std::string worker() { return binary_dir() + "/tests/ds_checkpoint_worker"; }

launch::RunResult run_scenario(const std::string& scenario, int stage, const TempDir& dir,
                               int timeout_ms = 60000) {
  return run_ranks(2, worker(), {scenario, std::to_string(stage), dir.file("ckpt")}, 120,
                   {{"DS_TEST_TIMEOUT_MS", std::to_string(timeout_ms)}});
}

TEST(CheckpointCollective, RanksCallingDifferentOperationsAllFailNamingThem) {
  for (int stage : {0, 3}) {
    TempDir dir;
    auto r = run_scenario("save_vs_load", stage, dir);
    EXPECT_EQ(r.exit_status, 0) << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir.file("ckpt/latest")));
  }
}

TEST(CheckpointCollective, SaveOnRankZeroOnlyIsAnErrorNotAHang) {
  TempDir dir;
  const auto t0 = std::chrono::steady_clock::now();
  auto r = run_scenario("save_on_rank0_only", 1, dir, /*timeout_ms=*/5000);
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60));
  EXPECT_FALSE(std::filesystem::exists(dir.file("ckpt/latest")));
}

TEST(CheckpointCollective, SaveInsideAccumulationWindowIsRefused) {
  TempDir dir;
  auto r = run_scenario("save_inside_window", 2, dir);
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir.file("ckpt/t3/manifest.json")));
}

TEST(CheckpointCollective, TagValidationFailsWarnsOrIgnoresAsConfigured) {
  TempDir dir;
  auto r = run_scenario("tag_validation", 1, dir);
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_NE(r.output.find("every rank saves under rank 0's tag 't0' "
                          "(checkpoint.tag_validation=Warn)"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("checkpoint.tag_validation=Ignore)"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.file("ckpt/Fail/latest")));
  EXPECT_TRUE(std::filesystem::exists(dir.file("ckpt/Ignore/t0/manifest.json")));
}

// Module state (buffers, frozen parameters) in a pipeline, or a frozen split parameter with
// tensor parallelism, is refused on every rank at save, naming the tensor (rank 0 alone would
// write its own, stale or sliced, copy); nothing is published.
TEST(CheckpointCollective, ModuleStateOfModelParallelLayoutsIsRefused) {
  TempDir dir;
  auto r = run_scenario("model_parallel_module_state", 1, dir);
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.file("ckpt/latest")));
}

}  // namespace checkpoint_collective_test
}  // namespace deepshard::testing
