// The Llama model: Hugging Face parameter names and shapes (untied and tied head), the parameter
// count, its forward against a plain re-derivation written independently here (rotary embeddings
// as complex rotations of (x_i, x_{i+d/2}) pairs, grouped-query attention head by head, RMSNorm
// and SwiGLU from their formulas), causality, seeded initialisation (the same with a unit hook),
// the sharding plan, and the config checks of model.arch "llama".
#include "deepshard/models/llama.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <complex>
#include <string>
#include <vector>

#include "deepshard/config/loader.h"
#include "deepshard/train/model_factory.h"
#include "deepshard/util/error.h"
#include "models/model_config_json.h"
#include "models/registry.h"

namespace deepshard::models {
namespace llama_test {

LlamaConfig tiny_llama_config() {
  LlamaConfig c;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_kv_head = 2;
  c.n_embd = 32;
  c.intermediate_size = 40;
  c.block_size = 16;
  c.vocab_size = 50;
  c.rope_theta = 500.0;  // not the default, so a wrong base shows
  return c;
}

at::Tensor rms(const at::Tensor& x, const at::Tensor& w, double eps) {
  return x / torch::sqrt(x.pow(2).mean(-1, true) + eps) * w;
}

// Rotates pairs (x_i, x_{i+d/2}) of x [T, d] at position t by t * theta^(-2i/d).
at::Tensor rotate(const at::Tensor& x, double theta) {
  const int64_t seq = x.size(0), d = x.size(1), half = d / 2;
  at::Tensor out = x.clone();
  for (int64_t t = 0; t < seq; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = double(t) * std::pow(theta, -2.0 * double(i) / double(d));
      const auto z = std::complex<double>(x[t][i].item<double>(), x[t][i + half].item<double>()) *
                     std::polar(1.0, angle);
      out[t][i] = z.real();
      out[t][i + half] = z.imag();
    }
  }
  return out;
}

// Logits [T, V] of one sequence, from the model's weights by name.
at::Tensor reference_logits(LlamaImpl& model, const at::Tensor& ids) {
  const LlamaConfig& c = model.config();
  std::map<std::string, at::Tensor> w;
  for (const auto& p : model.named_parameters()) w[p.key()] = p.value().detach();
  const int64_t seq = ids.size(0), d = c.n_embd / c.n_head, group = c.n_head / c.n_kv_head;
  at::Tensor x = w["model.embed_tokens.weight"].index_select(0, ids);  // [T, C]
  const at::Tensor future = torch::ones({seq, seq}).triu(1).to(torch::kBool);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const at::Tensor h = rms(x, w[p + "input_layernorm.weight"], c.rms_norm_eps);
    const at::Tensor q = h.matmul(w[p + "self_attn.q_proj.weight"].t());
    const at::Tensor k = h.matmul(w[p + "self_attn.k_proj.weight"].t());
    const at::Tensor v = h.matmul(w[p + "self_attn.v_proj.weight"].t());
    std::vector<at::Tensor> outs;
    for (int64_t head = 0; head < c.n_head; ++head) {
      const int64_t kv = head / group;
      const at::Tensor qh = rotate(q.narrow(1, head * d, d), c.rope_theta);
      const at::Tensor kh = rotate(k.narrow(1, kv * d, d), c.rope_theta);
      at::Tensor scores = qh.matmul(kh.t()) / std::sqrt(double(d));
      scores = scores.masked_fill(future, -INFINITY);
      outs.push_back(torch::softmax(scores, -1).matmul(v.narrow(1, kv * d, d)));
    }
    x = x + torch::cat(outs, 1).matmul(w[p + "self_attn.o_proj.weight"].t());
    const at::Tensor m = rms(x, w[p + "post_attention_layernorm.weight"], c.rms_norm_eps);
    const at::Tensor gate = m.matmul(w[p + "mlp.gate_proj.weight"].t());
    const at::Tensor up = m.matmul(w[p + "mlp.up_proj.weight"].t());
    x = x + (gate * torch::sigmoid(gate) * up).matmul(w[p + "mlp.down_proj.weight"].t());
  }
  x = rms(x, w["model.norm.weight"], c.rms_norm_eps);
  const at::Tensor head =
      c.tie_word_embeddings ? w["model.embed_tokens.weight"] : w["lm_head.weight"];
  return x.matmul(head.t());
}

TEST(Llama, ParameterNamesAndShapesAreHuggingFaces) {
  const LlamaConfig c = tiny_llama_config();
  Llama model(c, 1);
  std::vector<std::pair<std::string, std::vector<int64_t>>> expected = {
      {"model.embed_tokens.weight", {50, 32}}};
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    for (auto item : std::vector<std::pair<std::string, std::vector<int64_t>>>{
             {p + "input_layernorm.weight", {32}},
             {p + "self_attn.q_proj.weight", {32, 32}},
             {p + "self_attn.k_proj.weight", {16, 32}},  // 2 kv heads of 8
             {p + "self_attn.v_proj.weight", {16, 32}},
             {p + "self_attn.o_proj.weight", {32, 32}},
             {p + "post_attention_layernorm.weight", {32}},
             {p + "mlp.gate_proj.weight", {40, 32}},
             {p + "mlp.up_proj.weight", {40, 32}},
             {p + "mlp.down_proj.weight", {32, 40}}})
      expected.push_back(item);
  }
  expected.push_back({"model.norm.weight", {32}});
  expected.push_back({"lm_head.weight", {50, 32}});
  const auto params = model->named_parameters();
  ASSERT_EQ(params.size(), expected.size());
  int64_t total = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(params[i].key(), expected[i].first);
    EXPECT_EQ(params[i].value().sizes().vec(), expected[i].second) << expected[i].first;
    total += params[i].value().numel();
  }
  EXPECT_EQ(model->num_parameters(), total);
  EXPECT_EQ(llama_parameter_count(c), total);

  LlamaConfig tied = c;
  tied.tie_word_embeddings = true;
  Llama tied_model(tied, 1);
  EXPECT_EQ(tied_model->named_parameters().find("lm_head.weight"), nullptr);
  EXPECT_EQ(tied_model->num_parameters(), total - 50 * 32);
  EXPECT_EQ(llama_parameter_count(tied), total - 50 * 32);
}

TEST(Llama, ForwardMatchesAPlainDerivation) {
  torch::manual_seed(0);
  for (bool tied : {false, true}) {
    LlamaConfig c = tiny_llama_config();
    c.tie_word_embeddings = tied;
    Llama model(c, 3);
    {
      // Norm weights away from 1, so a missing norm weight shows.
      torch::NoGradGuard no_grad;
      for (auto& p : model->named_parameters())
        if (p.key().ends_with("norm.weight")) p.value().uniform_(0.5, 1.5);
    }
    const at::Tensor ids = torch::randint(0, c.vocab_size, {2, 11}, torch::kLong);
    const at::Tensor logits = model->forward(ids).detach();
    ASSERT_EQ(logits.sizes().vec(), (std::vector<int64_t>{2, 11, 50}));
    for (int64_t b = 0; b < 2; ++b) {
      const at::Tensor want = reference_logits(*model, ids[b]);
      EXPECT_TRUE(torch::allclose(logits[b], want, 1e-4, 1e-5))
          << "tied " << tied << ", max diff " << (logits[b] - want).abs().max().item<double>();
    }
  }
}

TEST(Llama, IsCausal) {
  Llama model(tiny_llama_config(), 5);
  at::Tensor ids = torch::randint(0, 50, {1, 12}, torch::kLong);
  const at::Tensor before = model->forward(ids).detach();
  ids[0][8] = (ids[0][8].item<int64_t>() + 1) % 50;
  const at::Tensor after = model->forward(ids).detach();
  EXPECT_TRUE(torch::equal(before.narrow(1, 0, 8), after.narrow(1, 0, 8)));
  EXPECT_FALSE(torch::equal(before.narrow(1, 8, 1), after.narrow(1, 8, 1)));
}

TEST(Llama, SeededInitSameWithAUnitHook) {
  const LlamaConfig c = tiny_llama_config();
  Llama a(c, 11), b(c, 11), other(c, 12);
  std::vector<size_t> built;
  Llama hooked(c, 11, [&](size_t unit, torch::nn::Module& module) {
    built.push_back(unit);
    // The unit is built and initialised: its parameters are already the final values.
    EXPECT_EQ(module.named_parameters().size(), 9u);
  });
  EXPECT_EQ(built, (std::vector<size_t>{0, 1}));
  const auto pa = a->named_parameters(), pb = b->named_parameters(),
             ph = hooked->named_parameters();
  for (const auto& p : pa) {
    EXPECT_TRUE(torch::equal(p.value(), pb[p.key()])) << p.key();
    EXPECT_TRUE(torch::equal(p.value(), ph[p.key()])) << p.key();
    if (p.key().ends_with("norm.weight")) {
      EXPECT_TRUE(torch::equal(p.value(), torch::ones_like(p.value()))) << p.key();
    } else {
      EXPECT_FALSE(torch::equal(p.value(), other->named_parameters()[p.key()])) << p.key();
      EXPECT_NEAR(p.value().std().item<double>(), 0.02, 0.006) << p.key();
    }
  }
}

TEST(Llama, ShardingPlanHasOneUnitPerLayer) {
  LlamaConfig c = tiny_llama_config();
  Llama model(c, 1);
  auto plan = model->sharding_plan();
  ASSERT_EQ(plan.units().size(), 2u);
  EXPECT_EQ(plan.units()[1].name, "model.layers.1");
  EXPECT_EQ(plan.units()[1].module.get(), model->model->blocks[1].ptr().get());
  EXPECT_TRUE(plan.tied().empty());
  c.tie_word_embeddings = true;
  Llama tied(c, 1);
  auto tied_plan = tied->sharding_plan();
  ASSERT_EQ(tied_plan.tied().size(), 1u);
  EXPECT_EQ(tied_plan.tied()[0].param, "model.embed_tokens.weight");
}

TEST(Llama, BadSizesAreErrors) {
  LlamaConfig c = tiny_llama_config();
  c.n_kv_head = 3;
  EXPECT_THROW(Llama(c, 1), Error);
  c = tiny_llama_config();
  c.n_embd = 36;  // head size 9: odd
  EXPECT_THROW(Llama(c, 1), Error);
}

TEST(LlamaConfig, PresetsAndArchitectureKeys) {
  const auto tiny = parse_model_json(R"({"arch": "llama"})");
  EXPECT_EQ(tiny.n_layer, 4);
  EXPECT_EQ(tiny.n_kv_head, 2);
  EXPECT_EQ(tiny.intermediate_size, 344);
  const auto built = train::make_model(tiny, 1);
  EXPECT_EQ(built->arch(), "llama");
  EXPECT_EQ(built->num_parameters(), train::parameter_count(tiny));
  EXPECT_LT(built->num_parameters(), 1'000'000);  // tiny
  const auto small = parse_model_json(R"({"arch": "llama", "preset": "small", "rope_theta": 5e5})");
  EXPECT_EQ(small.n_embd, 384);
  EXPECT_EQ(models::llama_config(small).rope_theta, 5e5);
  // Keys of the other architecture, and sizes rotary embeddings cannot use.
  for (const char* bad :
       {R"({"arch": "llama", "preset": "gpt2"})", R"({"arch": "llama", "bias": true})",
        R"({"arch": "llama", "dropout": 0.1})", R"({"arch": "llama", "n_kv_head": 3})",
        R"({"arch": "llama", "n_embd": 36, "n_head": 4})", R"({"n_kv_head": 2})",
        R"({"rope_theta": 1e4})", R"({"tie_word_embeddings": false})", R"({"arch": "t5"})"}) {
    try {
      parse_model_json(bad);
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("model."), std::string::npos) << bad << ": " << e.what();
    }
  }
  // Saved with a checkpoint and read back.
  const auto back = train::model_from_saved_json(train::saved_model_json(small));
  EXPECT_EQ(back.arch, "llama");
  EXPECT_EQ(models::llama_config(back).rope_theta, 5e5);
  EXPECT_EQ(models::llama_config(back).intermediate_size, small.intermediate_size);
}

}  // namespace llama_test
}  // namespace deepshard::models
