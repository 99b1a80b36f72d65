// The BERT encoder trained with masked-LM on the token files through `deepshard train` reproduces
// single-process training at every ZeRO stage: the tiny BERT (2 post-LayerNorm layers, 4 heads, 64
// wide, MLP 128, block 32, byte vocabulary with 0xFF as the mask token) with N = 2 and 3 real ranks
// at stages 0, 1, 2 and 3 (fp32, same seed, global batch 72) gives the losses of the single-rank
// stage-0 run for 20 steps within 1e-4 relative, clipping on. Every layout masks the same
// positions (drawn from each sample's key: seed, step and index in the global batch) and predicts
// 5 per sample, so the loss over the masked positions splits evenly over ranks and micro-steps.
// Stage 3 builds the model under zero.Init (each encoder layer partitioned as it is built) with the
// word embeddings tied to the decoder in the root. Activation checkpointing (each layer recomputed
// in backward) keeps the losses at N = 2 stage 0 and N = 3 stage 3 with a
// stage3_max_live_parameters below one layer, and a 2-stage pipeline (the tied embedding on both
// ends) at N = 2 does too.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/test_support.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace bert_equivalence_test {

constexpr int64_t kGlobalBatch = 72;  // divisible by N * accumulation for N in {1, 2, 3}, {1, 2}

// The tiny run file's model as a BERT, `more` merged over the whole.
std::string bert_section(const nlohmann::json& more) {
  nlohmann::json j = {{"model", {{"arch", "bert"}, {"intermediate_size", 128}}}};
  j.merge_patch(more);
  return j.dump();
}

std::string stage_section(int stage) {
  return bert_section({{"zero_optimization", {{"stage", stage}}}});
}

TEST(BertEquivalence, EveryStageReproducesSingleRankLosses) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  auto reference = train_and_read_losses(dir, data, 1, kGlobalBatch, 1, "ref", stage_section(0));
  ASSERT_EQ(reference.losses.size(), 20u) << reference.output;
  EXPECT_LT(reference.losses.back(), reference.losses.front()) << "the loss did not fall";
  EXPECT_TRUE(reference.clipped) << "gradient clipping never took effect";
  EXPECT_NE(reference.output.find("model bert"), std::string::npos) << reference.output;
  const int64_t params = read_summary(dir, "ref").at("num_parameters");
  // Embeddings (256 words, 32 positions, 2 types, LayerNorm); 2 layers of 4 64x64 projections,
  // the 64x128 MLP and 2 LayerNorms, with biases; the head's transform, LayerNorm and bias.
  const int64_t layer = 4 * (64 * 64 + 64) + (64 * 128 + 128) + (128 * 64 + 64) + 4 * 64;
  EXPECT_EQ(params, (256 + 32 + 2 + 2) * 64 + 2 * layer + 64 * 64 + 64 + 2 * 64 + 256);
  for (int ranks : {2, 3}) {
    const int gas = ranks == 2 ? 1 : 2;
    for (int stage : {0, 1, 2, 3}) {
      const std::string name = "s" + std::to_string(stage) + "_n" + std::to_string(ranks);
      auto run = train_and_read_losses(dir, data, ranks, kGlobalBatch / (ranks * gas), gas, name,
                                       stage_section(stage));
      expect_same_losses(run, reference,
                         "bert, stage " + std::to_string(stage) + ", " + std::to_string(ranks) +
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

TEST(BertEquivalence, ActivationCheckpointingAndPipelineKeepTheLosses) {
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
                                     bert_section(more));
    expect_same_losses(run, reference,
                       "bert, activation checkpointing, stage " + std::to_string(stage) + ", " +
                           std::to_string(ranks) + " ranks");
  }
  // Two pipeline stages of one layer each, 4 micro-batches of 18.
  auto piped = train_and_read_losses(
      dir, data, 2, kGlobalBatch / 4, 4, "pipe2",
      bert_section({{"pipeline", {{"enabled", true}, {"stages", 2}, {"partition", "uniform"}}}}));
  expect_same_losses(piped, reference, "bert, pipeline 2");
}

}  // namespace bert_equivalence_test
}  // namespace deepshard::testing
