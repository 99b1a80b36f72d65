// The GPT's Hugging Face GPT-2 safetensors layout (models/gpt/hf_names.cpp through
// models/hf_weights.h): HF names and Conv1D layout in the file, save -> load into a model of
// another seed gives identical logits, bf16 files, and errors naming the tensor.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <string>

#include "deepshard/checkpoint/safetensors.h"
#include "deepshard/models/gpt.h"
#include "deepshard/util/error.h"
#include "models/hf_weights.h"
#include "support/test_support.h"

namespace deepshard::checkpoint {
namespace gpt_hf_weights_test {

namespace fs = std::filesystem;

models::GptConfig small_config() {
  models::GptConfig c;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 32;
  c.block_size = 16;
  c.vocab_size = 64;
  return c;
}

class HfGpt2Test : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return dir_.file(name); }
  testing::TempDir dir_;
};

at::Tensor tokens() { return torch::arange(24, torch::kLong).remainder(64).view({2, 12}); }

std::string load_error(models::Gpt& model, const std::string& p) {
  try {
    models::load_hf_safetensors(*model, p);
  } catch (const IoError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no IoError loading " << p;
  return "";
}

TEST_F(HfGpt2Test, FileHasHuggingFaceNamesAndLayout) {
  models::Gpt model(small_config(), 1);
  models::save_hf_safetensors(*model, path("m.safetensors"));
  const SafetensorsContent file = load_safetensors(path("m.safetensors"));
  EXPECT_EQ(file.tensors.size(), model->named_parameters().size());
  EXPECT_EQ(file.tensors.count("lm_head.weight"), 0u);  // tied to wte, omitted as HF does
  EXPECT_EQ(file.metadata.at("format"), "pt");
  const auto& c_attn = file.tensors.at("transformer.h.1.attn.c_attn.weight");
  EXPECT_EQ(c_attn.sizes(), (at::IntArrayRef{32, 96}));  // Conv1D [in, out]
  EXPECT_TRUE(torch::equal(c_attn, model->blocks[1]->attn->c_attn->weight.t()));
  EXPECT_EQ(file.tensors.at("transformer.h.0.mlp.c_fc.weight").sizes(), (at::IntArrayRef{32, 128}));
  EXPECT_EQ(file.tensors.at("transformer.h.0.mlp.c_proj.weight").sizes(),
            (at::IntArrayRef{128, 32}));
  EXPECT_EQ(file.tensors.at("transformer.wte.weight").sizes(), (at::IntArrayRef{64, 32}));
  EXPECT_TRUE(file.tensors.count("transformer.ln_f.bias"));
}

TEST_F(HfGpt2Test, SaveLoadIntoAnotherSeedGivesIdenticalLogits) {
  models::Gpt source(small_config(), 1);
  models::Gpt target(small_config(), 2);
  const at::Tensor expected = source->forward(tokens()).detach();
  ASSERT_FALSE(torch::equal(target->forward(tokens()), expected));
  models::save_hf_safetensors(*source, path("m.safetensors"));
  models::load_hf_safetensors(*target, path("m.safetensors"));
  EXPECT_TRUE(torch::equal(target->forward(tokens()), expected));
}

TEST_F(HfGpt2Test, Bf16FileLoadsTheRoundedWeights) {
  models::Gpt source(small_config(), 1);
  models::Gpt target(small_config(), 2);
  models::save_hf_safetensors(*source, path("bf16.safetensors"), at::kBFloat16);
  const SafetensorsContent file = load_safetensors(path("bf16.safetensors"));
  for (const auto& [name, t] : file.tensors) EXPECT_EQ(t.scalar_type(), at::kBFloat16) << name;
  EXPECT_LT(fs::file_size(path("bf16.safetensors")) * 2, 4 * source->num_parameters() + 8192u);

  models::load_hf_safetensors(*target, path("bf16.safetensors"));
  const auto src = source->named_parameters();
  for (const auto& p : target->named_parameters()) {
    EXPECT_EQ(p.value().scalar_type(), at::kFloat);
    EXPECT_TRUE(torch::equal(p.value(), src[p.key()].to(at::kBFloat16).to(at::kFloat))) << p.key();
  }
  const at::Tensor diff = (target->forward(tokens()) - source->forward(tokens())).abs().max();
  EXPECT_LT(diff.item<float>(), 0.05f);
}

TEST_F(HfGpt2Test, AcceptsGpt2ModelNamesAndIgnoresHfBuffers) {
  models::Gpt source(small_config(), 1);
  TensorMap tensors;
  for (const auto& p : source->named_parameters()) {
    const bool conv = p.key().find("c_") != std::string::npos && p.key().ends_with(".weight");
    tensors[p.key()] = conv ? p.value().detach().t() : p.value().detach();  // no prefix
  }
  tensors["h.0.attn.bias"] = torch::ones({1, 1, 16, 16});
  tensors["lm_head.weight"] = source->wte->weight.detach();
  save_safetensors(path("gpt2model.safetensors"), tensors);
  models::Gpt target(small_config(), 2);
  models::load_hf_safetensors(*target, path("gpt2model.safetensors"));
  EXPECT_TRUE(torch::equal(target->forward(tokens()), source->forward(tokens())));
}

TEST_F(HfGpt2Test, ErrorsNameTheTensor) {
  models::Gpt model(small_config(), 1);
  models::save_hf_safetensors(*model, path("m.safetensors"));

  models::GptConfig longer = small_config();
  longer.block_size = 32;
  models::Gpt wrong_shape(longer, 1);
  EXPECT_NE(load_error(wrong_shape, path("m.safetensors"))
                .find("tensor 'transformer.wpe.weight' has shape [16, 32] but the model needs "
                      "[32, 32]"),
            std::string::npos);

  models::GptConfig deeper = small_config();
  deeper.n_layer = 3;
  models::Gpt missing(deeper, 1);
  EXPECT_NE(load_error(missing, path("m.safetensors"))
                .find("missing tensor 'transformer.h.2.ln_1.weight'"),
            std::string::npos);

  models::GptConfig shallower = small_config();
  shallower.n_layer = 1;
  models::Gpt fewer(shallower, 1);
  EXPECT_NE(load_error(fewer, path("m.safetensors")).find("unexpected tensor 'transformer.h.1."),
            std::string::npos);
}

}  // namespace gpt_hf_weights_test
}  // namespace deepshard::checkpoint
