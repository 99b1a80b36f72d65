// Saving the model weights (train.save_weights) at ZeRO stage 3: with
// stage3_gather_16bit_weights_on_model_save every rank gathers the full parameters and rank 0
// writes them; the file equals the single-rank stage-0 run's after the same 20 steps. Without the
// option the run is refused before training with an error naming it, and no file is written.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "deepshard/checkpoint/safetensors.h"
#include "support/test_support.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace stage3_save_weights_test {

TEST(Stage3SaveWeights, GathersFullWeightsOrRefuses) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const std::string save = R"({"train": {"save_weights": true}})";
  auto reference = train_and_read_losses(dir, data, 1, 72, 1, "ref", save);
  const nlohmann::json stage3 = {{"train", {{"save_weights", true}}},
                                 {"zero_optimization",
                                  {{"stage", 3},
                                   {"stage3_param_persistence_threshold", 0},
                                   {"stage3_max_reuse_distance", 0},
                                   {"stage3_gather_16bit_weights_on_model_save", true}}}};
  auto run = train_and_read_losses(dir, data, 2, 36, 1, "s3", stage3.dump());
  expect_same_losses(run, reference, "stage 3, 2 ranks, saving weights");
  const auto ref = checkpoint::load_safetensors(dir.file("run_ref") + "/model.safetensors");
  const auto ours = checkpoint::load_safetensors(dir.file("run_s3") + "/model.safetensors");
  ASSERT_EQ(ours.tensors.size(), ref.tensors.size());
  for (const auto& [name, tensor] : ref.tensors) {
    ASSERT_TRUE(ours.tensors.count(name)) << name;
    const at::Tensor& mine = ours.tensors.at(name);
    ASSERT_EQ(mine.sizes(), tensor.sizes()) << name;
    EXPECT_TRUE(mine.allclose(tensor, 1e-3, 1e-4))
        << name << ": max difference " << (mine - tensor).abs().max().item<double>();
  }

  nlohmann::json refused = stage3;
  refused["zero_optimization"].erase("stage3_gather_16bit_weights_on_model_save");
  const std::string config = dir.file("refused.json");
  write_file(config, tiny_run_config(data, dir.file("run_refused"), 36, 1, 20, refused.dump()));
  auto r = run_ranks(2, deepshard_exe(), {"train", "--config", config}, 120);
  EXPECT_NE(r.exit_status, 0) << r.output;
  EXPECT_NE(r.output.find("stage3_gather_16bit_weights_on_model_save"), std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.file("run_refused") + "/model.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(dir.file("run_refused") + "/metrics.jsonl"))
      << "the run trained before refusing";
}

}  // namespace stage3_save_weights_test
}  // namespace deepshard::testing
