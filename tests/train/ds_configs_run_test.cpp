// Real DeepSpeed configs (tests/data/ds_configs/, copied from the public repositories named in its
// SOURCES.md) run unchanged for 3 steps through `deepshard train --config RUN --deepspeed FILE`
// with 2 real ranks, the run file supplying only the model, the data and the values the configs'
// "auto" keys ask for. One test each. A config that needs a feature deepshard does not have yet
// must be refused at start with the precise `not supported yet:` line (the test names the feature).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace ds_configs_run_test {

struct ConfigCase {
  const char* file;
  // Empty: the config trains. Else the refusal it must get (a feature deepshard lacks).
  const char* refused;
};

class DsConfigRuns : public ::testing::TestWithParam<ConfigCase> {};

TEST_P(DsConfigRuns, RunsUnchangedOrIsRefusedPrecisely) {
  const ConfigCase c = GetParam();
  const std::string file = source_dir() + "/tests/data/ds_configs/" + c.file;
  ASSERT_TRUE(std::filesystem::exists(file)) << file;
  const nlohmann::json ds = nlohmann::json::parse(read_file(file));
  TempDir dir;
  const std::string data = make_token_file(dir);
  const std::string run_dir = dir.file("run");
  // The run file: model, data, and the train values "auto" keys resolve from. A config that
  // fixes train_batch_size gets the micro batch that makes it with 2 ranks.
  int64_t micro = 2;
  if (ds.contains("train_batch_size") && ds.at("train_batch_size").is_number_integer()) {
    int64_t gas = 1;
    if (ds.contains("gradient_accumulation_steps") &&
        ds.at("gradient_accumulation_steps").is_number_integer())
      gas = ds.at("gradient_accumulation_steps").get<int64_t>();
    micro = ds.at("train_batch_size").get<int64_t>() / (2 * gas);
  }
  nlohmann::json run = {
      {"model",
       {{"preset", "tiny"}, {"n_layer", 2}, {"n_embd", 64}, {"n_head", 4}, {"block_size", 32}}},
      {"data", {{"train", data}}},
      {"train", {{"steps", 3}, {"seed", 1}, {"run_dir", run_dir}, {"micro_batch_size", micro}}},
      {"comm", {{"timeout_s", 60}}}};
  // What "auto" learning-rate keys resolve from (a config with fixed values gets none: a run value
  // that differs from the config's is an error).
  if (read_file(file).find("\"auto\"") != std::string::npos) {
    run["train"]["lr"] = 1e-3;
    run["train"]["warmup_steps"] = 2;
  }
  const std::string run_file = dir.file("run.json");
  write_file(run_file, run.dump(2));
  auto r = run_ranks(2, deepshard_exe(), {"train", "--config", run_file, "--deepspeed", file}, 300);
  if (c.refused[0] != '\0') {
    EXPECT_NE(r.exit_status, 0) << r.output;
    EXPECT_NE(r.output.find(c.refused), std::string::npos)
        << c.file << " should be refused with \"" << c.refused << "\":\n"
        << r.output;
    std::printf("%s: refused as expected: %s\n", c.file, c.refused);
    return;
  }
  ASSERT_EQ(r.exit_status, 0) << r.output;
  const auto metrics = read_metrics(run_dir);
  ASSERT_EQ(metrics.size(), 3u) << r.output;
  for (const auto& m : metrics) EXPECT_TRUE(std::isfinite(m.at("loss").get<double>())) << m.dump();
  std::printf("%s: 3 steps, losses %.4f %.4f %.4f\n", c.file, metrics[0].at("loss").get<double>(),
              metrics[1].at("loss").get<double>(), metrics[2].at("loss").get<double>());
}

INSTANTIATE_TEST_SUITE_P(
    Configs, DsConfigRuns,
    ::testing::Values(
        ConfigCase{"transformers_zero2_auto.json", ""},  // stage 2, offload_optimizer cpu, autos
        ConfigCase{"transformers_zero3.json", ""},       // stage 3 fp16, optimizer + params on cpu
        ConfigCase{"dsexamples_autotuning_fp16_z3.json", ""},  // stage 3 fp16
        // fp16 master weights and gradients (DeepSpeed's fp16 optimizer states): not built.
        ConfigCase{"dsexamples_cifar.json",
                   "not supported yet: fp16.fp16_master_weights_and_grads"},
        // Stage 2 fp16 with cpu_offload and activation partitioning.
        ConfigCase{"dsexamples_megatron_zero2_offload.json", ""}),
    [](const auto& info) {
      std::string name = info.param.file;
      name = name.substr(0, name.find('.'));
      return name;
    });

}  // namespace ds_configs_run_test
}  // namespace deepshard::testing
