// `deepshard generate`: samples from safetensors weights; errors name the file.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "deepshard/config/loader.h"
#include "deepshard/models/gpt.h"
#include "deepshard/train/trainer.h"
#include "models/hf_weights.h"
#include "models/registry.h"
#include "support/test_support.h"

namespace deepshard::testing {
namespace generate_cmd_test {

std::string save_preset_weights(const TempDir& dir, const std::string& preset, uint64_t seed) {
  config::ModelConfig m;
  m.preset = preset;
  config::apply_model_preset(m, models::arch_schemas());
  models::Gpt model(models::gpt_config(m), seed);
  const std::string path = dir.file(preset + ".safetensors");
  models::save_hf_safetensors(*model, path);
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

// A model with GPT-2's vocabulary reads and writes GPT-2's BPE (before: "ByteTokenizer::decode:
// token ... outside the vocabulary (256)").
TEST(GenerateCommand, Gpt2VocabularyUsesTheBpeTokenizer) {
  TempDir dir;
  config::ModelConfig m;
  m.preset = "tiny";
  m.vocab_size = 50257;
  config::apply_model_preset(m, models::arch_schemas());
  models::Gpt model(models::gpt_config(m), 3);
  const std::string weights = dir.file("bpe.safetensors");
  models::save_hf_safetensors(*model, weights);
  const std::string run = dir.file("run.json");
  write_file(run, R"({"model": {"preset": "tiny", "vocab_size": 50257}, "train_batch_size": 1})");
  auto r = run_deepshard({"generate", "--weights", weights, "--config", run, "--prompt",
                          "Hello, world", "--max-new-tokens", "8", "--top-k", "1"},
                         120);
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_EQ(r.output.rfind("Hello, world", 0), 0u) << r.output;
  EXPECT_GE(r.output.size(), std::string("Hello, world\n").size() + 8) << r.output;
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

}  // namespace generate_cmd_test
}  // namespace deepshard::testing
