// Tensor parallelism through `deepshard train` (docs/parallel.md): the tiny GPT split over 2
// tensor ranks reproduces the single-rank losses for 20 steps within 1e-4 relative (fp32, the same
// global batch, clipping active, so the gradient norm must add the tensor axis and count the
// replicated parameters once): tensor 2 alone with ZeRO stage 0 and 1, and tensor 2 x data 2
// with ZeRO stages 1, 2 and 3 (the gradients, and at stage 3 the parameters, partitioned over the
// data group; stage 3 also with the optimizer and parameters offloaded to the CPU), and with
// activation checkpointing (blocks recomputed in backward; with partition_activations the kept
// inputs split over the tensor ranks); the tiny Llama likewise, tensor 2 at ZeRO stage 1 and
// tensor 2 x data 2 at stages 1, 2 and 3. What a tensor-parallel run does not do yet is refused at
// start, naming the key.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "train/llama_run.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace {

constexpr int64_t kGlobalBatch = 8;

// The run's extra config: tensor size, ZeRO stage, (stage 3) optimizer and parameters on the CPU
// offload device, and any other keys.
std::string tensor_parallel(int size, int stage, bool offload = false,
                            const nlohmann::json& more = nlohmann::json::object()) {
  nlohmann::json zero = {{"stage", stage}};
  if (offload) {
    zero["offload_optimizer"] = {{"device", "cpu"}};
    zero["offload_param"] = {{"device", "cpu"}};
  }
  nlohmann::json out = {{"tensor_parallel", {{"enabled", true}, {"size", size}}},
                        {"zero_optimization", zero}};
  out.merge_patch(more);
  return out.dump();
}

struct Layout {
  int ranks, stage;
  std::string name, what;
  bool offload = false;
  nlohmann::json more = nlohmann::json::object();
};

// The single-rank run (ZeRO stage 0) and each layout's run of the model `model_extra` selects
// (merged over the run's config): the same losses (1e-4) and gradient norms (1e-3) every step.
void expect_layouts_reproduce_single_rank(const std::vector<Layout>& layouts,
                                          const std::string& model_extra = "{}") {
  TempDir dir;
  const std::string data = make_token_file(dir);
  auto with_model = [&](const std::string& extra) {
    nlohmann::json j = nlohmann::json::parse(extra);
    j.merge_patch(nlohmann::json::parse(model_extra));
    return j.dump();
  };
  auto reference = train_and_read_losses(dir, data, 1, kGlobalBatch, 1, "ref", with_model("{}"));
  ASSERT_EQ(reference.losses.size(), 20u);
  EXPECT_TRUE(reference.clipped) << "gradient clipping never took effect";
  const auto ref_norms = grad_norms(dir, "ref");
  for (const Layout& l : layouts) {
    const int dp = l.ranks / 2;
    auto run = train_and_read_losses(dir, data, l.ranks, kGlobalBatch / dp, 1, l.name,
                                     with_model(tensor_parallel(2, l.stage, l.offload, l.more)));
    expect_same_losses(run, reference, l.what);
    expect_same_norms(grad_norms(dir, l.name), ref_norms, l.what);
    if (l.more.contains("train")) {
      // Both blocks checkpointed; each keeps its input [micro, 32, 64] fp32, split over the 2
      // tensor ranks with partition_activations.
      const auto metrics = read_metrics(dir.file("run_" + l.name));
      ASSERT_GT(metrics.size(), 1u) << l.what;
      const int64_t split = l.more.contains("activation_checkpointing") ? 2 : 1;
      EXPECT_EQ(metrics.at(1).at("checkpointed_regions").get<int64_t>(), 2) << l.what;
      EXPECT_EQ(metrics.at(1).at("checkpoint_kept_bytes").get<int64_t>(),
                2 * (kGlobalBatch / dp) * 32 * 64 * 4 / split)
          << l.what;
    }
    EXPECT_NE(run.output.find("rank grid: world " + std::to_string(l.ranks) + " = data " +
                              std::to_string(dp) + " x pipeline 1 x tensor 2"),
              std::string::npos)
        << run.output;
  }
}

TEST(TensorParallelTrain, ReproducesSingleRankLosses) {
  // Activation checkpointing: every block recomputed in backward (its tensor all-reduces again);
  // partition_activations keeps 1/2 of each block's input per tensor rank and all-gathers it for
  // the recompute.
  const nlohmann::json checkpointing = {{"train", {{"activation_checkpointing", true}}}};
  const nlohmann::json partitioned = {
      {"train", {{"activation_checkpointing", true}}},
      {"activation_checkpointing", {{"partition_activations", true}}}};
  expect_layouts_reproduce_single_rank(
      {Layout{2, 0, "tp2_s0", "tensor 2, ZeRO stage 0"},
       Layout{2, 1, "tp2_s1", "tensor 2, ZeRO stage 1"},
       Layout{4, 1, "tp2_dp2_s1", "tensor 2 x data 2, ZeRO stage 1"},
       Layout{4, 2, "tp2_dp2_s2", "tensor 2 x data 2, ZeRO stage 2"},
       Layout{4, 3, "tp2_dp2_s3", "tensor 2 x data 2, ZeRO stage 3"},
       Layout{4, 3, "tp2_dp2_s3_offload", "tensor 2 x data 2, ZeRO stage 3, CPU offload", true},
       Layout{2, 1, "tp2_s1_ckpt", "tensor 2, ZeRO stage 1, activation checkpointing", false,
              checkpointing},
       Layout{4, 3, "tp2_dp2_s3_ckpt_part",
              "tensor 2 x data 2, ZeRO stage 3, activation checkpointing, partition_activations",
              false, partitioned}});
}

// The tiny Llama (2 key/value heads: one per tensor rank; untied head, vocabulary-parallel).
TEST(TensorParallelTrain, LlamaReproducesSingleRankLosses) {
  expect_layouts_reproduce_single_rank(
      {Layout{2, 1, "llama_tp2_s1", "Llama, tensor 2, ZeRO stage 1"},
       Layout{4, 1, "llama_tp2_dp2_s1", "Llama, tensor 2 x data 2, ZeRO stage 1"},
       Layout{4, 2, "llama_tp2_dp2_s2", "Llama, tensor 2 x data 2, ZeRO stage 2"},
       Layout{4, 3, "llama_tp2_dp2_s3", "Llama, tensor 2 x data 2, ZeRO stage 3"}},
      tiny_llama_section());
}

// Refused at start with the key named, on every rank, before any training.
TEST(TensorParallelTrain, RefusesWhatItDoesNotDoYet) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  struct Case {
    std::string extra, message;
  };
  const nlohmann::json tp = {{"tensor_parallel", {{"size", 2}}}};
  auto with = [&](nlohmann::json extra) {
    extra.merge_patch(tp);
    return extra.dump();
  };
  for (const Case& c :
       {Case{with({{"train", {{"sample_tokens", 8}}}}),
             "not supported yet: tensor_parallel.size=2 with train.sample_tokens=8"}}) {
    const std::string config = dir.file("refused.json");
    write_file(config, tiny_run_config(data, dir.file("run_refused"), 4, 1, 2, c.extra));
    auto r = run_ranks(2, deepshard_exe(), {"train", "--config", config}, 120);
    EXPECT_NE(r.exit_status, 0) << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.extra << "\n" << r.output;
  }
}

}  // namespace
}  // namespace deepshard::testing
