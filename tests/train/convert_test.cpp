// `deepshard convert` and `generate --checkpoint`: a checkpoint saved by N = 2 ranks at ZeRO stage
// 3 becomes one Hugging Face GPT-2 safetensors file whose weights give the checkpoint's loss on the
// same batch (in process, and as a run's model.init_from).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "data/sampler.h"
#include "data/token_file.h"
#include "deepshard/checkpoint/engine_checkpoint.h"
#include "deepshard/checkpoint/safetensors.h"
#include "deepshard/config/loader.h"
#include "deepshard/models/gpt.h"
#include "deepshard/train/trainer.h"
#include "models/hf_weights.h"
#include "models/registry.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace convert_test {

models::GptConfig run_model(const std::string& data) {
  const auto json = nlohmann::json::parse(tiny_run_config(data, "unused", 4, 1, 1, "{}"));
  return models::gpt_config(
      config::parse_run_config(json, 1, nullptr, "test run", models::arch_schemas()).model);
}

std::map<std::string, at::Tensor> params_of(models::Gpt& model) {
  std::map<std::string, at::Tensor> out;
  for (const auto& p : model->named_parameters()) out.emplace(p.key(), p.value());
  return out;
}

TEST(Convert, SafetensorsFromACheckpointGiveItsLoss) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const std::string ckpt = dir.file("ckpt");
  const std::string config = dir.file("a.json");
  write_file(config, tiny_run_config(data, dir.file("run_a"), 2, 2, 5,
                                     R"({"zero_optimization": {"stage": 3},
                                         "train": {"save_interval": 5, "checkpoint_dir": ")" +
                                         ckpt + R"("}})"));
  auto trained = run_ranks(2, deepshard_exe(), {"train", "--config", config}, 300);
  ASSERT_EQ(trained.exit_status, 0) << trained.output;

  const std::string out = dir.file("w.safetensors");
  auto converted = run_deepshard({"convert", ckpt, "--to", "safetensors", out}, 60);
  ASSERT_EQ(converted.exit_status, 0) << converted.output;
  EXPECT_NE(converted.output.find("saved by 2 rank(s), ZeRO stage 3"), std::string::npos)
      << converted.output;
  const auto file = checkpoint::load_safetensors(out);
  EXPECT_EQ(file.tensors.count("transformer.h.0.attn.c_attn.weight"), 1u);
  EXPECT_EQ(file.tensors.count("lm_head.weight"), 0u);

  // The checkpoint's weights and the file's, on the batch a one-rank run's first step uses.
  const models::GptConfig cfg = run_model(data);
  models::Gpt from_checkpoint(cfg, 1), from_file(cfg, 2), from_bf16(cfg, 3);
  checkpoint::CheckpointReader reader(checkpoint::resolve_tag(ckpt, ""));
  checkpoint::load_consolidated_weights(reader, params_of(from_checkpoint));
  models::load_hf_safetensors(*from_file, out);
  data::TokenFile tokens(data, cfg.vocab_size);
  data::DistributedSampler sampler(tokens, cfg.block_size, 4, 1, 0, 1, 42);
  const auto batch = sampler.batch(0, 0);
  torch::NoGradGuard no_grad;
  const double want = from_checkpoint->loss(batch.inputs, batch.targets).item<double>();
  EXPECT_EQ(from_file->loss(batch.inputs, batch.targets).item<double>(), want);

  const std::string out16 = dir.file("w16.safetensors");
  auto converted16 =
      run_deepshard({"convert", ckpt + "/step5", "--to", "safetensors", out16, "--dtype", "bf16"});
  ASSERT_EQ(converted16.exit_status, 0) << converted16.output;
  EXPECT_EQ(checkpoint::load_safetensors(out16).tensors.begin()->second.scalar_type(),
            at::kBFloat16);
  models::load_hf_safetensors(*from_bf16, out16);
  EXPECT_NEAR(from_bf16->loss(batch.inputs, batch.targets).item<double>(), want, 1e-2 * want);

  // A run starting from the file: its first loss is the checkpoint's on that batch.
  const std::string run_b = dir.file("run_b");
  const std::string config_b = dir.file("b.json");
  write_file(config_b, tiny_run_config(data, run_b, 4, 1, 1,
                                       R"({"model": {"init_from": ")" + out + R"("}})"));
  auto fine_tune = run_deepshard({"train", "--config", config_b}, 120);
  ASSERT_EQ(fine_tune.exit_status, 0) << fine_tune.output;
  const double first = read_metrics(run_b).at(0).at("loss").get<double>();
  EXPECT_NEAR(first, want, 1e-6 * want);
  std::printf("checkpoint loss %.9f, init_from run's first loss %.9f\n", want, first);

  // generate --checkpoint takes the model sizes from the checkpoint.
  auto sampled = run_deepshard({"generate", "--checkpoint", ckpt, "--prompt", "The ",
                                "--max-new-tokens", "8", "--top-k", "1"},
                               60);
  ASSERT_EQ(sampled.exit_status, 0) << sampled.output;
  EXPECT_EQ(sampled.output.rfind("The ", 0), 0u) << sampled.output;
}

}  // namespace convert_test
}  // namespace deepshard::testing
