// GPT structure: Hugging Face parameter names and shapes, the tied head, deterministic
// initialisation with GPT-2's laws, and preset sizes.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "deepshard/config/loader.h"
#include "deepshard/models/gpt.h"
#include "deepshard/train/trainer.h"
#include "deepshard/util/error.h"
#include "models/registry.h"

namespace deepshard::models {
namespace gpt_structure_test {

GptConfig small_config() {
  GptConfig c;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 32;
  c.block_size = 16;
  c.vocab_size = 256;
  return c;
}

// The model sizes of a named preset, through the run-config layer that owns the preset table.
GptConfig gpt_preset(const std::string& name) {
  config::ModelConfig m;
  m.preset = name;
  config::apply_model_preset(m, models::arch_schemas());
  return models::gpt_config(m);
}

// Parameter count of a GPT-2 with biases: embeddings, n_layer blocks of 12 C^2 + 13 C, ln_f.
int64_t expected_count(const GptConfig& c) {
  const int64_t C = c.n_embd;
  return c.vocab_size * C + c.block_size * C + c.n_layer * (12 * C * C + 13 * C) + 2 * C;
}

TEST(GptStructure, ParameterNamesAndShapesAreHuggingFaces) {
  const GptConfig c = small_config();
  Gpt model(c, 1);
  const int64_t C = c.n_embd;
  std::vector<std::pair<std::string, std::vector<int64_t>>> expected = {
      {"wte.weight", {c.vocab_size, C}}, {"wpe.weight", {c.block_size, C}}};
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string p = "h." + std::to_string(i) + ".";
    std::vector<std::pair<std::string, std::vector<int64_t>>> block = {
        {p + "ln_1.weight", {C}},
        {p + "ln_1.bias", {C}},
        {p + "attn.c_attn.weight", {3 * C, C}},  // torch [out, in]; HF Conv1D stores [in, out]
        {p + "attn.c_attn.bias", {3 * C}},
        {p + "attn.c_proj.weight", {C, C}},
        {p + "attn.c_proj.bias", {C}},
        {p + "ln_2.weight", {C}},
        {p + "ln_2.bias", {C}},
        {p + "mlp.c_fc.weight", {4 * C, C}},
        {p + "mlp.c_fc.bias", {4 * C}},
        {p + "mlp.c_proj.weight", {C, 4 * C}},
        {p + "mlp.c_proj.bias", {C}}};
    expected.insert(expected.end(), block.begin(), block.end());
  }
  expected.push_back({"ln_f.weight", {C}});
  expected.push_back({"ln_f.bias", {C}});

  const auto params = model->named_parameters();
  ASSERT_EQ(params.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(params[i].key(), expected[i].first) << "at position " << i;
    EXPECT_EQ(params[i].value().sizes().vec(), expected[i].second) << expected[i].first;
  }
  EXPECT_EQ(model->named_buffers().size(), 0u);
  EXPECT_EQ(model->blocks.size(), size_t(c.n_layer));
  EXPECT_EQ(model->h->size(), size_t(c.n_layer));
}

TEST(GptStructure, BiasFalseDropsLinearBiases) {
  GptConfig c = small_config();
  c.bias = false;
  Gpt model(c, 1);
  for (const auto& p : model->named_parameters()) {
    const bool linear_bias =
        p.key().find("attn.c_") != std::string::npos || p.key().find("mlp.c_") != std::string::npos;
    if (linear_bias) {
      EXPECT_EQ(p.key().find(".bias"), std::string::npos) << p.key();
    }
  }
  EXPECT_EQ(model->num_parameters(), expected_count(c) - c.n_layer * (3 + 1 + 4 + 1) * c.n_embd);
}

TEST(GptStructure, HeadReusesTheEmbeddingStorage) {
  Gpt model(small_config(), 3);
  {
    torch::NoGradGuard no_grad;
    model->wte->weight[42].zero_();  // token 42's embedding row is also its output row
  }
  const at::Tensor idx = torch::randint(0, 256, {2, 8}, torch::kLong);
  const at::Tensor logits = model->forward(idx);
  EXPECT_EQ(logits.select(2, 42).abs().max().item<float>(), 0.0f);
  EXPECT_GT(logits.select(2, 41).abs().max().item<float>(), 0.0f);
}

TEST(GptStructure, SameSeedGivesBitIdenticalWeightsDifferentSeedDiffers) {
  torch::manual_seed(1);  // the global generator must not matter
  Gpt a(small_config(), 1234);
  torch::manual_seed(99);
  Gpt b(small_config(), 1234);
  Gpt c(small_config(), 1235);
  const auto pa = a->named_parameters(), pb = b->named_parameters(), pc = c->named_parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_TRUE(torch::equal(pa[i].value(), pb[i].value())) << pa[i].key();
  }
  EXPECT_FALSE(torch::equal(pa["wte.weight"], pc["wte.weight"]));
  EXPECT_FALSE(torch::equal(pa["h.1.mlp.c_fc.weight"], pc["h.1.mlp.c_fc.weight"]));
}

TEST(GptStructure, InitFollowsGpt2Laws) {
  GptConfig c = small_config();
  c.n_embd = 64;
  c.n_layer = 8;
  Gpt model(c, 7);
  const double proj_std = 0.02 / std::sqrt(2.0 * double(c.n_layer));
  for (const auto& p : model->named_parameters()) {
    const std::string& name = p.key();
    const at::Tensor& t = p.value();
    const bool is_ln = name.find("ln_") != std::string::npos;
    if (is_ln && name.ends_with(".weight")) {
      EXPECT_TRUE(torch::equal(t, torch::ones_like(t))) << name;
    } else if (name.ends_with(".bias")) {
      EXPECT_TRUE(torch::equal(t, torch::zeros_like(t))) << name;
    } else {
      const double want = name.ends_with("c_proj.weight") ? proj_std : 0.02;
      EXPECT_NEAR(t.std().item<double>(), want, 0.05 * want) << name;
      EXPECT_NEAR(t.mean().item<double>(), 0.0, 0.05 * want) << name;
    }
  }
}

TEST(GptStructure, PresetParameterCounts) {
  for (const std::string name : {"tiny", "small"}) {
    const GptConfig c = gpt_preset(name);
    Gpt model(c, 0);
    EXPECT_EQ(model->num_parameters(), expected_count(c)) << name;
    int64_t sum = 0;
    for (const auto& p : model->parameters()) sum += p.numel();
    EXPECT_EQ(model->num_parameters(), sum) << name;  // no lm_head duplicate
  }
  EXPECT_EQ(expected_count(gpt_preset("tiny")), 842'496);
  EXPECT_EQ(expected_count(gpt_preset("small")), 10'844'160);
  EXPECT_EQ(expected_count(gpt_preset("gpt2")), 86'039'040);
  EXPECT_THROW(gpt_preset("huge"), Error);
}

// GPT-2 small with its real vocabulary has the published 124,439,808 parameters.
TEST(GptStructure, Gpt2PresetWithBpeVocabularyHas124MParameters) {
  GptConfig c = gpt_preset("gpt2");
  c.vocab_size = 50257;
  Gpt model(c, 0);
  EXPECT_EQ(model->num_parameters(), 124'439'808);
}

}  // namespace gpt_structure_test
}  // namespace deepshard::models
