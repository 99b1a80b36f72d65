// `deepshard config check`, run as a real process: reports per file, exit status, options.
#include <gtest/gtest.h>

#include <filesystem>

#include "support/test_support.h"

namespace deepshard::config {
namespace config_cmd_test {

using deepshard::testing::run_deepshard;
using deepshard::testing::TempDir;
using deepshard::testing::write_file;

class ConfigCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(deepshard::testing::deepshard_exe())) {
      GTEST_SKIP() << "deepshard executable not built: " << deepshard::testing::deepshard_exe();
    }
  }
  bool contains(const std::string& output, const std::string& text) {
    return output.find(text) != std::string::npos;
  }
  TempDir dir_;
};

TEST_F(ConfigCheck, RunnableFileExitsZero) {
  const std::string path = dir_.file("ok.json");
  write_file(path, R"({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2})");
  auto result = run_deepshard({"config", "check", path, "--world-size", "3"}, 60);
  EXPECT_EQ(result.exit_status, 0) << result.output;
  EXPECT_TRUE(contains(result.output, "parsed as a DeepSpeed config, data-parallel world size 3"))
      << result.output;
  EXPECT_TRUE(contains(result.output, "\"train_batch_size\": 24")) << result.output;
  EXPECT_TRUE(contains(result.output, path + ": valid and runnable")) << result.output;
}

TEST_F(ConfigCheck, ReportsUnsupportedFeaturesAndErrorsOfEveryFile) {
  const std::string shared = deepshard::testing::source_dir() + "/tests/data/ds_configs/";
  const std::string bad = dir_.file("bad.json");
  write_file(bad, R"({"train_batch_size": 8, "zero_optimization": {"reduce_bucket_sise": 5e8}})");
  auto result = run_deepshard(
      {"config", "check", shared + "dsexamples_cifar.json", bad, "--world-size", "2"}, 60);
  EXPECT_EQ(result.exit_status, 1) << result.output;
  EXPECT_TRUE(contains(result.output, "warning: " + shared +
                                          "dsexamples_cifar.json: zero_optimization.cpu_offload: "
                                          "deprecated"))
      << result.output;
  EXPECT_TRUE(contains(result.output, "not supported yet: fp16.fp16_master_weights_and_grads\n"))
      << result.output;
  EXPECT_TRUE(contains(result.output, "valid, but not runnable yet (1 unsupported feature"))
      << result.output;
  EXPECT_TRUE(contains(result.output, "error: " + bad +
                                          ": zero_optimization.reduce_bucket_sise: unknown key "
                                          "(did you mean 'reduce_bucket_size'?)\n" +
                                          bad + ": invalid"))
      << result.output;
}

TEST_F(ConfigCheck, OverridesAndRunFiles) {
  const std::string path = dir_.file("run.json");
  write_file(path, R"({"train": {"micro_batch_size": 2, "lr": 1e-3},
                      "optimizer": {"type": "AdamW", "params": {"lr": "auto"}},
                      "zero_optimization": {"stage": 3,
                          "offload_optimizer": {"device": "cpu"}},
                      "wandb": {"enabled": true}})");
  auto result = run_deepshard({"config", "check", path}, 60);
  EXPECT_EQ(result.exit_status, 1) << result.output;
  EXPECT_TRUE(contains(result.output, "parsed as a run file")) << result.output;
  EXPECT_TRUE(contains(result.output, "not supported yet: wandb.enabled"));

  result = run_deepshard(
      {"config", "check", path, "--set", "zero_optimization.stage=0", "--set",
       "zero_optimization.offload_optimizer.device=none", "--set", "wandb.enabled=false"},
      60);
  EXPECT_EQ(result.exit_status, 0) << result.output;
  EXPECT_TRUE(contains(result.output, "\"n_embd\": 128")) << result.output;  // tiny preset

  // --run: a file without run sections is parsed as a run file (train values fill "auto").
  const std::string ds = dir_.file("ds.json");
  write_file(ds, R"({"train_micro_batch_size_per_gpu": "auto"})");
  result = run_deepshard({"config", "check", ds, "--run", "--set", "train.micro_batch_size=3"}, 60);
  EXPECT_EQ(result.exit_status, 0) << result.output;
  EXPECT_TRUE(contains(result.output, "\"train_micro_batch_size_per_gpu\": 3")) << result.output;
}

TEST_F(ConfigCheck, UsageAndBadOptions) {
  auto help = run_deepshard({"config", "--help"}, 60);
  EXPECT_EQ(help.exit_status, 0);
  EXPECT_TRUE(contains(help.output, "usage: deepshard config check FILE...")) << help.output;

  auto unknown = run_deepshard({"config", "check", "x.json", "--wrold-size", "2"}, 60);
  EXPECT_EQ(unknown.exit_status, 2);
  EXPECT_TRUE(contains(unknown.output, "unknown option --wrold-size (did you mean --world-size?)"))
      << unknown.output;

  auto no_file = run_deepshard({"config", "check"}, 60);
  EXPECT_EQ(no_file.exit_status, 2);

  auto bad_world = run_deepshard({"config", "check", "x.json", "--world-size", "0"}, 60);
  EXPECT_EQ(bad_world.exit_status, 2);
  EXPECT_TRUE(contains(bad_world.output, "option --world-size: must be >= 1, got 0"))
      << bad_world.output;

  auto missing = run_deepshard({"config", "check", dir_.file("missing.json")}, 60);
  EXPECT_EQ(missing.exit_status, 1);
  EXPECT_TRUE(contains(missing.output, "error: cannot read " + dir_.file("missing.json")))
      << missing.output;
}

}  // namespace config_cmd_test
}  // namespace deepshard::config
