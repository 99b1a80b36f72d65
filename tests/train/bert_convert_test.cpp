// The BERT encoder's weights outside deepshard: a checkpoint saved by N = 2 ranks at ZeRO stage 3
// (masked-LM training) becomes, with `deepshard convert --to safetensors`, one file with Hugging
// Face BERT names (bert.embeddings.word_embeddings.weight,
// bert.encoder.layer.N.attention.self.query.weight, ..., cls.predictions.bias) whose weights give
// the checkpoint's masked-LM loss (in process, and as a run's model.init_from); `deepshard
// generate` refuses the encoder, naming it.
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
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace bert_convert_test {

std::string bert_section(const nlohmann::json& more) {
  nlohmann::json j = {{"model", {{"arch", "bert"}, {"intermediate_size", 128}}}};
  j.merge_patch(more);
  return j.dump();
}

TEST(BertConvert, HfNamedSafetensorsGiveTheCheckpointsLoss) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const std::string ckpt = dir.file("ckpt");
  const std::string config = dir.file("a.json");
  write_file(
      config,
      tiny_run_config(data, dir.file("run_a"), 2, 2, 5,
                      bert_section({{"zero_optimization", {{"stage", 3}}},
                                    {"train", {{"save_interval", 5}, {"checkpoint_dir", ckpt}}}})));
  auto trained = run_ranks(2, deepshard_exe(), {"train", "--config", config}, 300);
  ASSERT_EQ(trained.exit_status, 0) << trained.output;

  const std::string out = dir.file("bert.safetensors");
  auto converted = run_deepshard({"convert", ckpt, "--to", "safetensors", out}, 60);
  ASSERT_EQ(converted.exit_status, 0) << converted.output;
  EXPECT_NE(converted.output.find("(bert)"), std::string::npos) << converted.output;
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
       {"bert.embeddings.word_embeddings.weight", "bert.embeddings.token_type_embeddings.weight",
        "bert.encoder.layer.0.attention.self.query.weight",
        "bert.encoder.layer.1.attention.output.LayerNorm.bias",
        "bert.encoder.layer.1.intermediate.dense.weight", "bert.encoder.layer.0.output.dense.bias",
        "cls.predictions.bias", "cls.predictions.transform.dense.weight"})
    EXPECT_EQ(file_names.count(hf), 1u) << hf;

  // The checkpoint's weights and the file's, on the masked batch a one-rank run's first step uses.
  std::map<std::string, at::Tensor> params;
  for (const auto& p : from_checkpoint->named_parameters()) params.emplace(p.key(), p.value());
  checkpoint::CheckpointReader reader(checkpoint::resolve_tag(ckpt, ""));
  checkpoint::load_consolidated_weights(reader, params);
  models::load_hf_safetensors(*from_file, out);
  data::TokenFile tokens(data, model_cfg.vocab_size);
  data::DistributedSampler sampler(tokens, model_cfg.block_size, 4, 1, 0, 1, 42);
  sampler.set_objective(
      [&](data::Batch& b) { from_checkpoint->make_objective(b.inputs, b.targets, b.sample_keys); });
  const auto batch = sampler.batch(0, 0);
  EXPECT_EQ(batch.targets.ne(-100).sum().item<int64_t>(), 4 * 5);  // round(0.15 * 32) each
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
                                       bert_section({{"model", {{"init_from", out}}}})));
  auto fine_tune = run_deepshard({"train", "--config", config_b}, 120);
  ASSERT_EQ(fine_tune.exit_status, 0) << fine_tune.output;
  const double first = read_metrics(run_b).at(0).at("loss").get<double>();
  EXPECT_NEAR(first, want, 1e-6 * want);
  std::printf("bert checkpoint loss %.9f, init_from run's first loss %.9f\n", want, first);

  // An encoder does not continue text.
  auto generate = run_deepshard({"generate", "--checkpoint", ckpt, "--prompt", "The "}, 60);
  EXPECT_NE(generate.exit_status, 0) << generate.output;
  EXPECT_NE(generate.output.find("does not generate text"), std::string::npos) << generate.output;
}

}  // namespace bert_convert_test
}  // namespace deepshard::testing
