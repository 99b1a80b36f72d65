// model.init_from: a run starts from Hugging Face GPT-2 safetensors weights instead of its fresh
// init.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "deepshard/config/loader.h"
#include "deepshard/models/gpt.h"
#include "deepshard/train/trainer.h"
#include "models/hf_weights.h"
#include "models/registry.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace init_from_test {

// Saves the weights of the test runs' model built with `seed` (as the trainer builds it).
std::string save_weights(const TempDir& dir, const std::string& data, uint64_t seed) {
  const auto json = nlohmann::json::parse(tiny_run_config(data, dir.file("unused"), 4, 1, 1, "{}"));
  const config::RunConfig run =
      config::parse_run_config(json, 1, nullptr, "test run", models::arch_schemas());
  models::Gpt model(models::gpt_config(run.model), seed);
  const std::string path = dir.file("seed" + std::to_string(seed) + ".safetensors");
  models::save_hf_safetensors(*model, path);
  return path;
}

TEST(InitFrom, StartsFromTheFileExactly) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const RunLosses fresh = train_and_read_losses(dir, data, 1, 4, 1, "fresh");
  // The weights the run would have built itself (train.seed 42): the same losses bit for bit.
  const std::string same = save_weights(dir, data, 42);
  const RunLosses loaded = train_and_read_losses(dir, data, 1, 4, 1, "loaded",
                                                 R"({"model": {"init_from": ")" + same + R"("}})");
  ASSERT_EQ(loaded.losses.size(), fresh.losses.size());
  for (size_t i = 0; i < fresh.losses.size(); ++i) EXPECT_EQ(loaded.losses[i], fresh.losses[i]);
  // Other weights: another first loss, so the file was really used.
  const std::string other = save_weights(dir, data, 7);
  const RunLosses moved = train_and_read_losses(dir, data, 1, 4, 1, "other",
                                                R"({"model": {"init_from": ")" + other + R"("}})");
  ASSERT_FALSE(moved.losses.empty());
  EXPECT_NE(moved.losses[0], fresh.losses[0]);
}

TEST(InitFrom, AMissingFileIsAnErrorNamingIt) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const std::string run_dir = dir.file("run");
  const std::string config = dir.file("run.json");
  write_file(config, tiny_run_config(data, run_dir, 4, 1, 2,
                                     R"({"model": {"init_from": "/nonexistent/w.safetensors"}})"));
  auto r = run_deepshard({"train", "--config", config}, 120);
  EXPECT_NE(r.exit_status, 0);
  EXPECT_NE(r.output.find("/nonexistent/w.safetensors"), std::string::npos) << r.output;
}

}  // namespace init_from_test
}  // namespace deepshard::testing
