// The six config blocks of the article describing the system deepshard follows
// (tests/data/seed_article/, written as JSON unchanged; SOURCES.md there) run 3 steps each through
// `deepshard train --config RUN --deepspeed BLOCK` with real ranks, the run file giving only the
// model, the data, the steps and the micro-batch a block's train_batch_size asks for. zero_config
// is a zero_optimization section: it runs as {"zero_optimization": zero_config}, as the article's
// combined configs use it. The hybrid block (pipeline 4 x tensor 2, 8 ranks) is read whole,
// pipeline.partition included, and trains with its ZeRO stage 3 and CPU offload inside the
// pipeline stages. A case may instead expect one refusal (`refused`).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace seed_blocks_run_test {

const std::string kDir = source_dir() + "/tests/data/seed_article/";

nlohmann::json block(const std::string& file) {
  return nlohmann::json::parse(read_file(kDir + file));
}

struct BlockCase {
  const char* file;
  int ranks;
  // The run's train section beside steps, seed and run_dir (what the block's features need).
  const char* train;
  // Empty: the block trains 3 steps. Else the one refusal the ranks print (and nothing else).
  const char* refused;
};

class SeedBlockRuns : public ::testing::TestWithParam<BlockCase> {};

TEST_P(SeedBlockRuns, RunsThreeSteps) {
  const BlockCase c = GetParam();
  nlohmann::json ds = block(c.file);
  if (std::string(c.file) == "zero_config.json") ds = {{"zero_optimization", ds}};
  TempDir dir;
  const std::string data = make_token_file(dir);
  const std::string run_dir = dir.file("run");
  const std::string ds_file = dir.file("ds_config.json");
  write_file(ds_file, ds.dump(2));
  // The data-parallel ranks: the job's over the pipeline stages and tensor ranks.
  int64_t model_ranks = 1;
  if (ds.contains("pipeline")) model_ranks *= ds["pipeline"].value("stages", 1);
  if (ds.contains("tensor_parallel")) model_ranks *= ds["tensor_parallel"].value("size", 1);
  const int64_t dp = c.ranks / model_ranks;
  int64_t micro = 2;
  if (ds.contains("train_batch_size"))
    micro =
        ds["train_batch_size"].get<int64_t>() / (dp * ds.value("gradient_accumulation_steps", 1));
  nlohmann::json train = nlohmann::json::parse(c.train);
  train.merge_patch({{"steps", 3}, {"seed", 1}, {"run_dir", run_dir}, {"micro_batch_size", micro}});
  const nlohmann::json run = {
      {"model",
       {{"preset", "tiny"}, {"n_layer", 2}, {"n_embd", 64}, {"n_head", 4}, {"block_size", 32}}},
      {"data", {{"train", data}}},
      {"train", train},
      {"comm", {{"timeout_s", 120}}}};
  const std::string run_file = dir.file("run.json");
  write_file(run_file, run.dump(2));
  auto r = run_ranks(c.ranks, deepshard_exe(),
                     {"train", "--config", run_file, "--deepspeed", ds_file}, 300);
  if (c.refused[0] != '\0') {
    EXPECT_NE(r.exit_status, 0) << r.output;
    const std::string message = c.refused;
    size_t refusals = 0, matching = 0;
    for (size_t at = r.output.find("not supported yet"); at != std::string::npos;
         at = r.output.find("not supported yet", at + 1)) {
      ++refusals;
      matching += r.output.compare(at, message.size(), message) == 0;
    }
    // The launcher stops the other ranks once the first exits, so not every rank may get to
    // print it; every refusal printed is this one, and nothing else.
    EXPECT_GE(matching, 1u) << r.output;
    EXPECT_EQ(refusals, matching) << r.output;
    EXPECT_EQ(r.output.find("unknown key"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("step 1/"), std::string::npos) << r.output;
    std::printf("%s on %d ranks: refused only with \"%s\"\n", c.file, c.ranks, c.refused);
    return;
  }
  ASSERT_EQ(r.exit_status, 0) << r.output;
  const auto metrics = read_metrics(run_dir);
  ASSERT_EQ(metrics.size(), 3u) << r.output;
  for (const auto& m : metrics) EXPECT_TRUE(std::isfinite(m.at("loss").get<double>())) << m.dump();
  std::printf("%s on %d ranks: 3 steps, losses %.4f %.4f %.4f\n", c.file, c.ranks,
              metrics[0].at("loss").get<double>(), metrics[1].at("loss").get<double>(),
              metrics[2].at("loss").get<double>());
}

INSTANTIATE_TEST_SUITE_P(
    Blocks, SeedBlockRuns,
    ::testing::Values(
        BlockCase{"zero_config.json", 2, "{}", ""}, BlockCase{"training_config.json", 2, "{}", ""},
        // Its activation_checkpointing section configures the recompute the run turns on.
        BlockCase{"initialize_config.json", 2, R"({"activation_checkpointing": true})", ""},
        BlockCase{"case_study_ds_config.json", 2, "{}", ""},
        BlockCase{"compression_config.json", 2, "{}", ""},
        // ZeRO stage 3 with CPU offload inside tensor-parallel pipeline stages.
        BlockCase{"hybrid_config.json", 8, "{}", ""}),
    [](const auto& info) {
      std::string name = info.param.file;
      return name.substr(0, name.find('.'));
    });

// The blocks that embed zero_config hold it unchanged, and the files are the six blocks.
TEST(SeedBlocks, CombinedBlocksEmbedZeroConfig) {
  const nlohmann::json zero = block("zero_config.json");
  EXPECT_EQ(block("initialize_config.json").at("zero_optimization"), zero);
  EXPECT_EQ(block("hybrid_config.json").at("zero_optimization"), zero);
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(kDir)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"case_study_ds_config.json", "compression_config.json",
                                             "hybrid_config.json", "initialize_config.json",
                                             "training_config.json", "zero_config.json"}));
}

}  // namespace seed_blocks_run_test
}  // namespace deepshard::testing
