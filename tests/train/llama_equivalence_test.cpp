// The Llama model at every ZeRO stage reproduces single-process training: `deepshard train` of the
// tiny Llama (2 layers, 4 query heads sharing 2 key/value heads, SwiGLU, RMSNorm, rotary
// embeddings) with N = 2 and 3 real ranks at stages 0, 1, 2 and 3 (fp32, same seed, global batch
// 72) gives the losses of the single-rank stage-0 run for 20 steps within 1e-4 relative, clipping
// on. Stage 3 builds the model under zero.Init (each decoder layer partitioned as it is built) and
// gathers it through the model's unit calls (the public sharding API). A Llama with its head tied
// to the embeddings (tie_word_embeddings: the tied weight in the root unit) does the same at N = 2
// stage 3. Activation checkpointing (each decoder layer recomputed in backward) keeps the losses at
// N = 2 stage 0 and N = 3 stage 3 with a stage3_max_live_parameters below one layer.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/test_support.h"
#include "train/llama_run.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace llama_equivalence_test {

constexpr int64_t kGlobalBatch = 72;  // divisible by N * accumulation for N in {1, 2, 3}, {1, 2}

std::string stage_section(int stage, const std::string& model = "{}") {
  return tiny_llama_section(model,
                            nlohmann::json{{"zero_optimization", {{"stage", stage}}}}.dump());
}

TEST(LlamaEquivalence, EveryStageReproducesSingleRankLosses) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  auto reference = train_and_read_losses(dir, data, 1, kGlobalBatch, 1, "ref", stage_section(0));
  ASSERT_EQ(reference.losses.size(), 20u) << reference.output;
  EXPECT_LT(reference.losses.back(), reference.losses.front()) << "the loss did not fall";
  EXPECT_TRUE(reference.clipped) << "gradient clipping never took effect";
  EXPECT_NE(reference.output.find("model llama"), std::string::npos) << reference.output;
  const int64_t params = read_summary(dir, "ref").at("num_parameters");
  // 2 layers of (4 + 2 * 2 heads of 16) x 64 attention, 3 x 64 x 176 MLP, 2 norms; embeddings,
  // final norm, untied head.
  EXPECT_EQ(params, 2 * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 176 + 2 * 64) + 2 * 256 * 64 + 64);
  for (int ranks : {2, 3}) {
    const int gas = ranks == 2 ? 1 : 2;
    for (int stage : {0, 1, 2, 3}) {
      const std::string name = "s" + std::to_string(stage) + "_n" + std::to_string(ranks);
      auto run = train_and_read_losses(dir, data, ranks, kGlobalBatch / (ranks * gas), gas, name,
                                       stage_section(stage));
      expect_same_losses(run, reference,
                         "llama, stage " + std::to_string(stage) + ", " + std::to_string(ranks) +
                             " ranks, accumulation " + std::to_string(gas));
      const auto summary = read_summary(dir, name);
      EXPECT_EQ(summary.at("num_parameters"), params) << name;
      if (stage < 3) continue;
      // Stage 3 partitions the parameters: rank 0 holds about 1/N of them.
      const int64_t shard = summary.at("ledger_bytes_rank0").at("parameters");
      EXPECT_LT(shard * ranks, 4 * (params + 3 * ranks)) << name;
      EXPECT_GE(shard * ranks, 4 * params) << name;
    }
  }
}

TEST(LlamaEquivalence, TiedEmbeddingsAtStage3) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const std::string tied = R"({"tie_word_embeddings": true})";
  auto reference =
      train_and_read_losses(dir, data, 1, kGlobalBatch, 1, "ref", stage_section(0, tied));
  ASSERT_EQ(reference.losses.size(), 20u) << reference.output;
  auto run =
      train_and_read_losses(dir, data, 2, kGlobalBatch / 2, 1, "tied_s3", stage_section(3, tied));
  expect_same_losses(run, reference, "llama, tied head, stage 3, 2 ranks");
  // The head adds no parameters of its own.
  const int64_t params = read_summary(dir, "tied_s3").at("num_parameters");
  EXPECT_EQ(params, 2 * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 176 + 2 * 64) + 256 * 64 + 64);
}

TEST(LlamaEquivalence, ActivationCheckpointingKeepsTheLosses) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  auto reference = train_and_read_losses(dir, data, 1, kGlobalBatch, 1, "ref", stage_section(0));
  ASSERT_EQ(reference.losses.size(), 20u) << reference.output;
  for (auto [ranks, stage] : {std::pair{2, 0}, std::pair{3, 3}}) {
    const int gas = ranks == 2 ? 1 : 2;
    nlohmann::json more = {{"zero_optimization", {{"stage", stage}}},
                           {"train", {{"activation_checkpointing", true}}}};
    if (stage == 3) more["zero_optimization"]["stage3_max_live_parameters"] = 1000;
    const std::string name = "ckpt_s" + std::to_string(stage) + "_n" + std::to_string(ranks);
    auto run = train_and_read_losses(dir, data, ranks, kGlobalBatch / (ranks * gas), gas, name,
                                     tiny_llama_section("{}", more.dump()));
    expect_same_losses(run, reference,
                       "llama, activation checkpointing, stage " + std::to_string(stage) + ", " +
                           std::to_string(ranks) + " ranks");
  }
}

}  // namespace llama_equivalence_test
}  // namespace deepshard::testing
