// `deepshard generate`: samples from safetensors weights; errors name the file.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "deepshard/checkpoint/hf_gpt2.h"
#include "deepshard/config/loader.h"
#include "deepshard/train/trainer.h"
#include "support/test_support.h"

namespace deepshard::testing {
namespace {

std::string save_preset_weights(const TempDir& dir, const std::string& preset, uint64_t seed) {
  config::ModelConfig m;
  m.preset = preset;
  config::apply_model_preset(m);
  models::Gpt model(train::gpt_config(m), seed);
  const std::string path = dir.file(preset + ".safetensors");
  checkpoint::save_gpt2_safetensors(model, path);
  return path;
}

TEST(GenerateCommand, TopOneSamplingIsDeterministicAndContinuesThePrompt) {
  TempDir dir;
  const std::string weights = save_preset_weights(dir, "tiny", 5);
  const std::vector<std::string> args = {"generate", "--weights", weights,
                                         "--prompt", "Hello",     "--max-new-tokens",
                                         "12",       "--top-k",   "1"};
  auto a = run_deepshard(args, 60);
  auto b = run_deepshard(args, 60);
  ASSERT_EQ(a.exit_status, 0) << a.output;
  EXPECT_EQ(a.output.rfind("Hello", 0), 0u) << a.output;
  EXPECT_EQ(a.output.size(), std::string("Hello").size() + 12 + 1) << a.output;  // + newline
  EXPECT_EQ(a.output, b.output);
}

TEST(GenerateCommand, BadWeightsFailNamingTheFile) {
  TempDir dir;
  auto missing =
      run_deepshard({"generate", "--weights", dir.file("none.safetensors"), "--prompt", "x"}, 60);
  EXPECT_NE(missing.exit_status, 0);
  EXPECT_NE(missing.output.find("none.safetensors"), std::string::npos) << missing.output;
  // tiny weights into the small preset: a shape mismatch naming file and tensor.
  const std::string weights = save_preset_weights(dir, "tiny", 5);
  auto mismatch =
      run_deepshard({"generate", "--weights", weights, "--model", "small", "--prompt", "x"}, 60);
  EXPECT_NE(mismatch.exit_status, 0);
  EXPECT_NE(mismatch.output.find("tiny.safetensors"), std::string::npos) << mismatch.output;
  auto checkpoint = run_deepshard({"generate", "--checkpoint", dir.path(), "--prompt", "x"}, 60);
  EXPECT_NE(checkpoint.exit_status, 0);
  EXPECT_NE(checkpoint.output.find("no checkpoint in"), std::string::npos) << checkpoint.output;
}

}  // namespace
}  // namespace deepshard::testing
