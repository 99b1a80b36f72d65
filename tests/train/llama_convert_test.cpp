// The Llama model's weights outside deepshard: a checkpoint saved by N = 2 ranks at ZeRO stage 3
// becomes, with `deepshard convert --to safetensors`, one file with Hugging Face Llama names
// (model.embed_tokens.weight, model.layers.N.self_attn.q_proj.weight, ..., model.norm.weight,
// lm_head.weight) whose weights give the checkpoint's loss (in process, and as a run's
// model.init_from); `deepshard generate` from the checkpoint and from the file produce the same
// tokens, and greedy generation (temperature 0) is deterministic.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "data/sampler.h"
#include "data/token_file.h"
#include "deepshard/checkpoint/engine_checkpoint.h"
#include "deepshard/checkpoint/safetensors.h"
#include "deepshard/config/loader.h"
#include "deepshard/train/model_factory.h"
#include "models/hf_weights.h"
#include "models/registry.h"
#include "train/llama_run.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace llama_convert_test {

TEST(LlamaConvert, HfNamedSafetensorsGiveTheCheckpointsLossAndGenerate) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const std::string ckpt = dir.file("ckpt");
  const std::string config = dir.file("a.json");
  write_file(config, tiny_run_config(data, dir.file("run_a"), 2, 2, 5,
                                     tiny_llama_section("{}", R"({"zero_optimization": {"stage": 3},
                                         "train": {"save_interval": 5, "checkpoint_dir": ")" +
                                                                  ckpt + R"("}})")));
  auto trained = run_ranks(2, deepshard_exe(), {"train", "--config", config}, 300);
  ASSERT_EQ(trained.exit_status, 0) << trained.output;

  const std::string out = dir.file("llama.safetensors");
  auto converted = run_deepshard({"convert", ckpt, "--to", "safetensors", out}, 60);
  ASSERT_EQ(converted.exit_status, 0) << converted.output;
  EXPECT_NE(converted.output.find("(llama)"), std::string::npos) << converted.output;
  const config::ModelConfig model_cfg =
      config::parse_run_config(config::read_json_file(config), 1, nullptr, config,
                               models::arch_schemas())
          .model;
  const auto from_checkpoint = train::make_model(model_cfg, 1);
  const auto from_file = train::make_model(model_cfg, 2);
  std::set<std::string> names;
  for (const auto& p : from_checkpoint->named_parameters()) names.insert(p.key());
  std::set<std::string> file_names;
  for (const auto& [name, t] : checkpoint::load_safetensors(out).tensors) file_names.insert(name);
  EXPECT_EQ(file_names, names);
  for (const char* hf :
       {"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
        "model.layers.1.self_attn.k_proj.weight", "model.layers.1.mlp.down_proj.weight",
        "model.layers.0.post_attention_layernorm.weight", "model.norm.weight", "lm_head.weight"})
    EXPECT_EQ(file_names.count(hf), 1u) << hf;

  // The checkpoint's weights and the file's, on the batch a one-rank run's first step uses.
  std::map<std::string, at::Tensor> params;
  for (const auto& p : from_checkpoint->named_parameters()) params.emplace(p.key(), p.value());
  checkpoint::CheckpointReader reader(checkpoint::resolve_tag(ckpt, ""));
  checkpoint::load_consolidated_weights(reader, params);
  models::load_hf_safetensors(*from_file, out);
  data::TokenFile tokens(data, model_cfg.vocab_size);
  data::DistributedSampler sampler(tokens, model_cfg.block_size, 4, 1, 0, 1, 42);
  const auto batch = sampler.batch(0, 0);
  double want = 0;
  {
    torch::NoGradGuard no_grad;
    want = from_checkpoint->loss(batch.inputs, batch.targets).item<double>();
    EXPECT_EQ(from_file->loss(batch.inputs, batch.targets).item<double>(), want);
  }

  // A run starting from the file (model.init_from): its first loss is the checkpoint's.
  const std::string run_b = dir.file("run_b");
  const std::string config_b = dir.file("b.json");
  write_file(config_b, tiny_run_config(data, run_b, 4, 1, 1,
                                       tiny_llama_section(R"({"init_from": ")" + out + R"("})")));
  auto fine_tune = run_deepshard({"train", "--config", config_b}, 120);
  ASSERT_EQ(fine_tune.exit_status, 0) << fine_tune.output;
  const double first = read_metrics(run_b).at(0).at("loss").get<double>();
  EXPECT_NEAR(first, want, 1e-6 * want);
  std::printf("llama checkpoint loss %.9f, init_from run's first loss %.9f\n", want, first);

  // generate: from the checkpoint (architecture and sizes saved with it), twice, and from the
  // converted file with the run's model section; greedy decoding gives the same text each time.
  const std::vector<std::string> greedy = {"--prompt", "The ",          "--max-new-tokens",
                                           "24",       "--temperature", "0"};
  auto generate = [&](std::vector<std::string> args) {
    args.insert(args.begin(), "generate");
    args.insert(args.end(), greedy.begin(), greedy.end());
    auto r = run_deepshard(args, 60);
    EXPECT_EQ(r.exit_status, 0) << r.output;
    return r.output;
  };
  const std::string a = generate({"--checkpoint", ckpt});
  EXPECT_EQ(a.rfind("The ", 0), 0u) << a;
  EXPECT_GT(a.size(), std::string("The \n").size()) << a;
  EXPECT_EQ(generate({"--checkpoint", ckpt}), a);
  EXPECT_EQ(generate({"--weights", out, "--config", config}), a);
  std::printf("greedy llama sample: %s", a.c_str());
}

}  // namespace llama_convert_test
}  // namespace deepshard::testing
