// Tensor parallelism through `deepshard train` (docs/parallel.md): the tiny GPT split over 2
// tensor ranks reproduces the single-rank losses for 20 steps within 1e-4 relative (fp32, the same
// global batch, clipping active, so the gradient norm must add the tensor axis and count the
// replicated parameters once): tensor 2 alone with ZeRO stage 0 and 1, and tensor 2 x data 2
// with ZeRO stages 1, 2 and 3 (the gradients, and at stage 3 the parameters, partitioned over the
// data group; stage 3 also with the optimizer and parameters offloaded to the CPU and to NVMe), and
// with activation checkpointing (blocks recomputed in backward; with partition_activations the kept
// inputs split over the tensor ranks), and with dropout (the one-rank masks); the tiny Llama
// likewise, tensor 2 at ZeRO stage 1 and tensor 2 x data 2 at stages 1, 2 and 3. What a
// tensor-parallel run does not do yet is refused at start, naming the key.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "train/llama_run.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace tensor_parallel_train_test {

constexpr int64_t kGlobalBatch = 8;

// The run's extra config: tensor size, ZeRO stage, (stage 3) optimizer and parameters on the
// offload device `offload` ("cpu", or "nvme" in `nvme_path`; "" none), and any other keys.
std::string tensor_parallel(int size, int stage, const std::string& offload,
                            const std::string& nvme_path, const nlohmann::json& more) {
  nlohmann::json zero = {{"stage", stage}};
  if (!offload.empty()) {
    zero["offload_optimizer"] = {{"device", offload}, {"nvme_path", nvme_path}};
    zero["offload_param"] = {{"device", offload}, {"nvme_path", nvme_path}};
  }
  if (offload == "nvme") {
    // Every block's slice swapped out between uses (none kept in host memory).
    zero["stage3_param_persistence_threshold"] = 0;
    zero["offload_param"]["max_in_cpu"] = 0;
    zero["offload_param"]["buffer_size"] = 100000;
  }
  nlohmann::json out = {{"tensor_parallel", {{"enabled", true}, {"size", size}}},
                        {"zero_optimization", zero}};
  out.merge_patch(more);
  return out.dump();
}

struct Layout {
  int ranks, stage;
  std::string name, what;
  std::string offload = "";  // "", "cpu", "nvme"
  nlohmann::json more = nlohmann::json::object();
};

// The single-rank run (ZeRO stage 0) and each layout's run of the model `model_extra` selects
// (merged over the run's config): the same losses (1e-4) and gradient norms (1e-3) every step.
// Returns the single-rank run.
RunLosses expect_layouts_reproduce_single_rank(const std::vector<Layout>& layouts,
                                               const std::string& model_extra = "{}") {
  TempDir dir;
  const std::string data = make_token_file(dir);
  std::filesystem::create_directories(dir.file("nvme"));
  auto with_model = [&](const std::string& extra) {
    nlohmann::json j = nlohmann::json::parse(extra);
    j.merge_patch(nlohmann::json::parse(model_extra));
    return j.dump();
  };
  auto reference = train_and_read_losses(dir, data, 1, kGlobalBatch, 1, "ref", with_model("{}"));
  EXPECT_EQ(reference.losses.size(), 20u);
  EXPECT_TRUE(reference.clipped) << "gradient clipping never took effect";
  const auto ref_norms = grad_norms(dir, "ref");
  for (const Layout& l : layouts) {
    const int dp = l.ranks / 2;
    auto run = train_and_read_losses(
        dir, data, l.ranks, kGlobalBatch / dp, 1, l.name,
        with_model(tensor_parallel(2, l.stage, l.offload, dir.file("nvme"), l.more)));
    expect_same_losses(run, reference, l.what);
    expect_same_norms(grad_norms(dir, l.name), ref_norms, l.what);
    if (l.more.contains("train")) {
      // Both blocks checkpointed; each keeps its input [micro, 32, 64] fp32, split over the 2
      // tensor ranks with partition_activations.
      const auto metrics = read_metrics(dir.file("run_" + l.name));
      if (metrics.size() < 2) {
        ADD_FAILURE() << l.what << ": " << metrics.size() << " metrics records";
        continue;
      }
      const int64_t split = l.more.contains("activation_checkpointing") ? 2 : 1;
      EXPECT_EQ(metrics.at(1).at("checkpointed_regions").get<int64_t>(), 2) << l.what;
      EXPECT_EQ(metrics.at(1).at("checkpoint_kept_bytes").get<int64_t>(),
                2 * (kGlobalBatch / dp) * 32 * 64 * 4 / split)
          << l.what;
    }
    // The communication of the grid's axes is counted: the tensor all-reduces every step, the
    // engine's reduction over the data axis (with 2 replicas).
    const auto summary =
        nlohmann::json::parse(read_file(dir.file("run_" + l.name) + "/summary.json"));
    const auto& by_group = summary.at("comm_by_group");
    EXPECT_GT(by_group.at("tensor").at("ops").at("all_reduce").at("calls").get<int64_t>(), 0)
        << l.what << ": " << by_group.dump();
    EXPECT_EQ(by_group.contains("data"), dp > 1) << l.what << ": " << by_group.dump();
    if (dp > 1) {
      EXPECT_GT(by_group.at("data").at("ops").size(), 0u) << l.what;
    }
    EXPECT_TRUE(read_metrics(dir.file("run_" + l.name)).back().contains("comm_wait_s_tensor"))
        << l.what;
    // The blocks are split as they are built; at stage 3 zero.Init partitions the slices.
    const std::string built = "blocks split over the 2 tensor ranks as they were built";
    EXPECT_NE(run.output.find(built), std::string::npos) << l.what << "\n" << run.output;
    EXPECT_EQ(run.output.find("partitioned over the " + std::to_string(dp) +
                              " data-parallel ranks (zero.Init)") != std::string::npos,
              l.stage == 3)
        << l.what << "\n"
        << run.output;
    EXPECT_NE(run.output.find("rank grid: world " + std::to_string(l.ranks) + " = data " +
                              std::to_string(dp) + " x pipeline 1 x tensor 2"),
              std::string::npos)
        << run.output;
  }
  return reference;
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
       Layout{4, 3, "tp2_dp2_s3_offload", "tensor 2 x data 2, ZeRO stage 3, CPU offload", "cpu"},
       Layout{4, 3, "tp2_dp2_s3_nvme", "tensor 2 x data 2, ZeRO stage 3, NVMe offload", "nvme"},
       Layout{2, 1, "tp2_s1_ckpt", "tensor 2, ZeRO stage 1, activation checkpointing", "",
              checkpointing},
       Layout{4, 3, "tp2_dp2_s3_ckpt_part",
              "tensor 2 x data 2, ZeRO stage 3, activation checkpointing, partition_activations",
              "", partitioned}});
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

// Dropout (model.dropout 0.1) on the embedding, the attention weights and both residual branches:
// every tensor rank draws the one-rank run's masks from its generator (same seed, same state) and
// applies its heads' part of the attention mask (models::dropout_slice), so tensor 2 reproduces the
// one-rank run step by step, also when activation checkpointing recomputes the blocks (each region
// replays its generator state). The one-rank losses with dropout differ from those without.
TEST(TensorParallelTrain, DropoutReproducesTheSingleRankMasks) {
  const nlohmann::json dropout = {{"model", {{"dropout", 0.1}}}};
  const nlohmann::json checkpointing = {{"train", {{"activation_checkpointing", true}}}};
  const RunLosses reference = expect_layouts_reproduce_single_rank(
      {Layout{2, 1, "tp2_s1_dropout", "tensor 2, ZeRO stage 1, dropout 0.1"},
       Layout{2, 0, "tp2_s0_dropout_ckpt",
              "tensor 2, ZeRO stage 0, dropout 0.1, activation checkpointing", "", checkpointing}},
      dropout.dump());
  TempDir dir;
  const auto without =
      train_and_read_losses(dir, make_token_file(dir), 1, kGlobalBatch, 1, "nodrop");
  ASSERT_EQ(without.losses.size(), reference.losses.size());
  double largest = 0.0;
  for (size_t i = 0; i < without.losses.size(); ++i)
    largest = std::max(largest, std::abs(without.losses[i] - reference.losses[i]));
  EXPECT_GT(largest, 1e-3) << "dropout 0.1 did not change the one-rank losses";
  std::printf("dropout 0.1 changes the one-rank losses by up to %.4f\n", largest);
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
       {Case{with({{"compression",
                    {{"type", "powerSGD"}, {"params", {{"matrix_approximation_rank", 1}}}}}}),
             "not supported yet: tensor_parallel.size=2 with compression"}}) {
    const std::string config = dir.file("refused.json");
    write_file(config, tiny_run_config(data, dir.file("run_refused"), 4, 1, 2, c.extra));
    auto r = run_ranks(2, deepshard_exe(), {"train", "--config", config}, 120);
    EXPECT_NE(r.exit_status, 0) << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.extra << "\n" << r.output;
  }
}

}  // namespace tensor_parallel_train_test
}  // namespace deepshard::testing
