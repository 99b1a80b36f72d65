// The BERT encoder: Hugging Face parameter names (with and without the classification head), its
// forward against a plain re-derivation written independently here (post-LayerNorm layers,
// attention head by head without a mask, erf GELU, the tied decoder with its bias), attention in
// both directions, seeded initialisation (the same with a unit hook), the sharding plan, the
// masked-LM objective (fixed count per sample, 80/10/10, drawn from the sample key only, labels of
// the chosen positions, the loss over them), the classification head, and the config checks of
// model.arch "bert".
#include "deepshard/models/bert.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "deepshard/config/loader.h"
#include "deepshard/train/model_factory.h"
#include "deepshard/util/error.h"
#include "models/model_config_json.h"
#include "models/registry.h"

namespace deepshard::models {
namespace bert_test {

BertConfig tiny_bert_config() {
  BertConfig c;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_embd = 32;
  c.intermediate_size = 48;
  c.block_size = 16;
  c.vocab_size = 50;
  return c;
}

at::Tensor layer_norm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, double eps) {
  const at::Tensor mean = x.mean(-1, true);
  const at::Tensor var = (x - mean).pow(2).mean(-1, true);
  return (x - mean) / torch::sqrt(var + eps) * w + b;
}

at::Tensor gelu_erf(const at::Tensor& x) {
  return 0.5 * x * (1.0 + torch::erf(x / std::sqrt(2.0)));
}

// Logits [T, V] of one sequence, from the model's weights by name.
at::Tensor reference_logits(BertImpl& model, const at::Tensor& ids) {
  const BertConfig& c = model.config();
  std::map<std::string, at::Tensor> w;
  for (const auto& p : model.named_parameters()) w[p.key()] = p.value().detach();
  auto dense = [&](const at::Tensor& x, const std::string& name) {
    return x.matmul(w[name + ".weight"].t()) + w[name + ".bias"];
  };
  auto norm = [&](const at::Tensor& x, const std::string& name) {
    return layer_norm(x, w[name + ".weight"], w[name + ".bias"], c.layer_norm_eps);
  };
  const int64_t seq = ids.size(0), d = c.n_embd / c.n_head;
  const std::string e = "bert.embeddings.";
  at::Tensor x = w[e + "word_embeddings.weight"].index_select(0, ids) +
                 w[e + "position_embeddings.weight"].narrow(0, 0, seq) +
                 w[e + "token_type_embeddings.weight"][0];
  x = norm(x, e + "LayerNorm");
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "bert.encoder.layer." + std::to_string(l) + ".";
    const at::Tensor q = dense(x, p + "attention.self.query");
    const at::Tensor k = dense(x, p + "attention.self.key");
    const at::Tensor v = dense(x, p + "attention.self.value");
    std::vector<at::Tensor> outs;
    for (int64_t head = 0; head < c.n_head; ++head) {
      const at::Tensor scores =
          q.narrow(1, head * d, d).matmul(k.narrow(1, head * d, d).t()) / std::sqrt(double(d));
      outs.push_back(torch::softmax(scores, -1).matmul(v.narrow(1, head * d, d)));
    }
    const at::Tensor h = norm(x + dense(torch::cat(outs, 1), p + "attention.output.dense"),
                              p + "attention.output.LayerNorm");
    const at::Tensor m = gelu_erf(dense(h, p + "intermediate.dense"));
    x = norm(h + dense(m, p + "output.dense"), p + "output.LayerNorm");
  }
  const at::Tensor t = norm(gelu_erf(dense(x, "cls.predictions.transform.dense")),
                            "cls.predictions.transform.LayerNorm");
  return t.matmul(w[e + "word_embeddings.weight"].t()) + w["cls.predictions.bias"];
}

TEST(Bert, ParameterNamesAndShapesAreHuggingFaces) {
  const BertConfig c = tiny_bert_config();
  Bert model(c, 1);
  const auto params = model->named_parameters();
  const std::map<std::string, std::vector<int64_t>> some = {
      {"bert.embeddings.word_embeddings.weight", {50, 32}},
      {"bert.embeddings.position_embeddings.weight", {16, 32}},
      {"bert.embeddings.token_type_embeddings.weight", {2, 32}},
      {"bert.embeddings.LayerNorm.bias", {32}},
      {"bert.encoder.layer.1.attention.self.query.weight", {32, 32}},
      {"bert.encoder.layer.1.attention.self.value.bias", {32}},
      {"bert.encoder.layer.0.attention.output.dense.weight", {32, 32}},
      {"bert.encoder.layer.0.attention.output.LayerNorm.weight", {32}},
      {"bert.encoder.layer.0.intermediate.dense.weight", {48, 32}},
      {"bert.encoder.layer.0.output.dense.weight", {32, 48}},
      {"bert.encoder.layer.1.output.LayerNorm.bias", {32}},
      {"cls.predictions.bias", {50}},
      {"cls.predictions.transform.dense.weight", {32, 32}},
      {"cls.predictions.transform.LayerNorm.weight", {32}}};
  for (const auto& [name, shape] : some) {
    ASSERT_NE(params.find(name), nullptr) << name;
    EXPECT_EQ(params[name].sizes().vec(), shape) << name;
  }
  // 4 embedding tensors + 16 per layer + 5 of the head; no decoder weight of its own, no pooler.
  EXPECT_EQ(params.size(), 5u + 16u * 2 + 5u);
  EXPECT_EQ(params.find("bert.pooler.dense.weight"), nullptr);
  const int64_t C = 32, I = 48, V = 50;
  const int64_t layer = 4 * (C * C + C) + (C * I + I) + (I * C + C) + 4 * C;
  const int64_t total = V * C + 16 * C + 2 * C + 2 * C + 2 * layer + V + C * C + C + 2 * C;
  EXPECT_EQ(model->num_parameters(), total);
  EXPECT_EQ(bert_parameter_count(c), total);

  BertConfig classifying = c;
  classifying.num_labels = 3;
  Bert with_head(classifying, 1);
  const auto more = with_head->named_parameters();
  EXPECT_EQ(more["bert.pooler.dense.weight"].sizes().vec(), (std::vector<int64_t>{32, 32}));
  EXPECT_EQ(more["classifier.weight"].sizes().vec(), (std::vector<int64_t>{3, 32}));
  EXPECT_EQ(bert_parameter_count(classifying), total + C * C + C + 3 * C + 3);
}

TEST(Bert, ForwardMatchesAPlainDerivation) {
  torch::manual_seed(0);
  for (bool fused : {true, false}) {
    BertConfig c = tiny_bert_config();
    c.fused_kernels = fused;
    Bert model(c, 3);
    {
      // Norm weights and biases away from 1 and 0, so a missing one shows.
      torch::NoGradGuard no_grad;
      for (auto& p : model->named_parameters())
        if (p.key().find("LayerNorm") != std::string::npos || p.key().ends_with("bias"))
          p.value().uniform_(0.5, 1.5);
    }
    const at::Tensor ids = torch::randint(0, c.vocab_size - 1, {2, 11}, torch::kLong);
    const at::Tensor logits = model->forward(ids).detach();
    ASSERT_EQ(logits.sizes().vec(), (std::vector<int64_t>{2, 11, 50}));
    for (int64_t b = 0; b < 2; ++b) {
      const at::Tensor want = reference_logits(*model, ids[b]);
      EXPECT_TRUE(torch::allclose(logits[b], want, 1e-4, 1e-4))
          << "fused " << fused << ", max diff " << (logits[b] - want).abs().max().item<double>();
    }
  }
}

TEST(Bert, AttendsInBothDirections) {
  Bert model(tiny_bert_config(), 5);
  at::Tensor ids = torch::randint(0, 49, {1, 12}, torch::kLong);
  const at::Tensor before = model->forward(ids).detach();
  ids[0][10] = (ids[0][10].item<int64_t>() + 1) % 49;
  const at::Tensor after = model->forward(ids).detach();
  // The first position sees the change of a later token (a causal model's would not).
  EXPECT_FALSE(torch::allclose(before.narrow(1, 0, 1), after.narrow(1, 0, 1)));
}

TEST(Bert, SeededInitSameWithAUnitHook) {
  const BertConfig c = tiny_bert_config();
  Bert a(c, 11), other(c, 12);
  std::vector<size_t> built;
  Bert hooked(c, 11, [&](size_t unit, torch::nn::Module& module) {
    built.push_back(unit);
    EXPECT_EQ(module.named_parameters().size(), 16u);
  });
  EXPECT_EQ(built, (std::vector<size_t>{0, 1}));
  const auto ph = hooked->named_parameters(), po = other->named_parameters();
  for (const auto& p : a->named_parameters()) {
    EXPECT_TRUE(torch::equal(p.value(), ph[p.key()])) << p.key();
    if (p.key().ends_with("bias")) {
      EXPECT_TRUE(torch::equal(p.value(), torch::zeros_like(p.value()))) << p.key();
    } else if (p.key().ends_with("LayerNorm.weight")) {
      EXPECT_TRUE(torch::equal(p.value(), torch::ones_like(p.value()))) << p.key();
    } else {
      EXPECT_FALSE(torch::equal(p.value(), po[p.key()])) << p.key();
      EXPECT_NEAR(p.value().std().item<double>(), 0.02, 0.01) << p.key();
    }
  }
}

TEST(Bert, ShardingPlanHasOneUnitPerLayerAndTiesTheDecoder) {
  Bert model(tiny_bert_config(), 1);
  auto plan = model->sharding_plan();
  ASSERT_EQ(plan.units().size(), 2u);
  EXPECT_EQ(plan.units()[1].name, "bert.encoder.layer.1");
  EXPECT_EQ(plan.units()[1].module.get(), model->bert->encoder->layers[1].ptr().get());
  ASSERT_EQ(plan.tied().size(), 1u);
  EXPECT_EQ(plan.tied()[0].param, "bert.embeddings.word_embeddings.weight");
}

TEST(BertMasking, ChoosesAFixedCountPerSampleFromItsKeyOnly) {
  const BertConfig c = tiny_bert_config();  // mask token 49
  const int64_t seq = 16, k = c.masked_per_sample(seq);
  EXPECT_EQ(k, 2);  // round(0.15 * 16)
  const at::Tensor ids = torch::randint(0, 49, {3, seq}, torch::kLong);
  const at::Tensor keys = torch::tensor({7, 8, 7}, torch::kLong);
  const MaskedBatch m = mask_tokens(c, ids, keys);
  for (int64_t b = 0; b < 3; ++b) {
    const at::Tensor chosen = m.labels[b].ne(-100);
    EXPECT_EQ(chosen.sum().item<int64_t>(), k);
    // Labels are the original tokens; unchosen inputs are untouched.
    EXPECT_TRUE(torch::equal(m.labels[b].masked_select(chosen), ids[b].masked_select(chosen)));
    EXPECT_TRUE(torch::equal(m.inputs[b].masked_select(~chosen), ids[b].masked_select(~chosen)));
  }
  // The same key chooses the same positions whatever the rest of the batch; another key others.
  EXPECT_TRUE(torch::equal(m.labels[0].ne(-100), m.labels[2].ne(-100)));
  const MaskedBatch alone = mask_tokens(c, ids.narrow(0, 2, 1), keys.narrow(0, 2, 1));
  EXPECT_TRUE(torch::equal(alone.inputs[0], m.inputs[2]));
  EXPECT_TRUE(torch::equal(alone.labels[0], m.labels[2]));
  const at::Tensor many_keys = torch::arange(400, torch::kLong);
  const MaskedBatch many = mask_tokens(c, ids[0].repeat({400, 1}), many_keys);
  EXPECT_FALSE(torch::equal(many.labels[0].ne(-100), many.labels[1].ne(-100)) &&
               torch::equal(many.labels[1].ne(-100), many.labels[2].ne(-100)));
}

TEST(BertMasking, ReplacesEightyTenTen) {
  BertConfig c = tiny_bert_config();
  c.vocab_size = 1000;                     // a random replacement rarely equals the original
  const int64_t samples = 2000, seq = 20;  // 3 chosen per sample: 6000 positions
  const at::Tensor ids = torch::randint(0, 999, {samples, seq}, torch::kLong);
  const MaskedBatch m = mask_tokens(c, ids, torch::arange(samples, torch::kLong) * 977);
  const at::Tensor chosen = m.labels.ne(-100);
  const double n = double(chosen.sum().item<int64_t>());
  EXPECT_EQ(n, double(samples * 3));
  const double masked = double(m.inputs.eq(999).sum().item<int64_t>());
  const double kept = double((chosen & m.inputs.eq(ids)).sum().item<int64_t>());
  const double replaced = n - masked - kept;
  // Binomial standard deviations: 0.8: 0.0052, 0.1: 0.0039 over 6000 positions.
  EXPECT_NEAR(masked / n, 0.8, 0.025);
  EXPECT_NEAR(kept / n, 0.1, 0.02);
  EXPECT_NEAR(replaced / n, 0.1, 0.02);
  EXPECT_FALSE(m.inputs.masked_select(~chosen).eq(999).any().item<bool>());
}

TEST(BertMasking, DataHoldingTheMaskTokenIsAnError) {
  const BertConfig c = tiny_bert_config();
  at::Tensor ids = torch::zeros({1, 8}, torch::kLong);
  ids[0][3] = 49;
  try {
    mask_tokens(c, ids, torch::tensor({1}, torch::kLong));
    FAIL() << "the mask token in the data was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mask token"), std::string::npos) << e.what();
  }
  EXPECT_THROW(mask_tokens(c, torch::zeros({2, 8}, torch::kLong), torch::tensor({1}, torch::kLong)),
               Error);  // one key for two samples
}

TEST(Bert, ObjectiveLossIsTheMeanOverMaskedPositions) {
  const BertConfig c = tiny_bert_config();
  Bert model(c, 2);
  at::Tensor inputs = torch::randint(0, 49, {3, 16}, torch::kLong);
  at::Tensor targets = torch::randint(0, 49, {3, 16}, torch::kLong);  // next tokens: replaced
  model->make_objective(inputs, targets, torch::tensor({1, 2, 3}, torch::kLong));
  const at::Tensor loss = model->loss(inputs, targets);
  const at::Tensor logits = model->forward(inputs).detach().view({-1, 50});
  const at::Tensor flat = targets.reshape({-1});
  const at::Tensor chosen = flat.ne(-100).nonzero().squeeze(1);
  EXPECT_EQ(chosen.size(0), 3 * 2);
  const at::Tensor logp = torch::log_softmax(logits.index_select(0, chosen), -1);
  const double want =
      -logp.gather(1, flat.index_select(0, chosen).unsqueeze(1)).mean().item<double>();
  EXPECT_NEAR(loss.item<double>(), want, 1e-5);
  EXPECT_NEAR(loss.item<double>(), std::log(50.0), 0.5);  // at initialisation
}

TEST(Bert, ClassificationHeadPoolsTheFirstToken) {
  BertConfig c = tiny_bert_config();
  c.num_labels = 3;
  Bert model(c, 4);
  const at::Tensor ids = torch::randint(0, 49, {2, 10}, torch::kLong);
  const at::Tensor logits = model->classify(ids);
  ASSERT_EQ(logits.sizes().vec(), (std::vector<int64_t>{2, 3}));
  // Pooler: tanh(dense(hidden[:, 0])), then the classifier.
  at::Tensor x = model->embed(ids);
  for (int64_t i = 0; i < 2; ++i) x = model->run_layer(i, x);
  const auto w = model->named_parameters();
  const at::Tensor pooled = torch::tanh(x.select(1, 0).matmul(w["bert.pooler.dense.weight"].t()) +
                                        w["bert.pooler.dense.bias"]);
  const at::Tensor want = pooled.matmul(w["classifier.weight"].t()) + w["classifier.bias"];
  EXPECT_TRUE(torch::allclose(logits, want, 1e-5, 1e-5));
  const at::Tensor loss = model->classification_loss(ids, torch::tensor({0, 2}, torch::kLong));
  loss.backward();
  EXPECT_GT(w["classifier.weight"].grad().abs().sum().item<double>(), 0.0);
  EXPECT_GT(w["bert.encoder.layer.0.attention.self.query.weight"].grad().abs().sum().item<double>(),
            0.0);
  Bert plain(tiny_bert_config(), 4);
  EXPECT_THROW(plain->classify(ids), Error);
}

// model.pooling "mean": the same pooler and classifier on the positions' mean hidden state.
TEST(Bert, MeanPoolingPoolsThePositionsMean) {
  BertConfig c = tiny_bert_config();
  c.num_labels = 3;
  c.mean_pooling = true;
  Bert model(c, 4);
  const at::Tensor ids = torch::randint(0, 49, {2, 10}, torch::kLong);
  at::Tensor x = model->embed(ids);
  for (int64_t i = 0; i < 2; ++i) x = model->run_layer(i, x);
  const auto w = model->named_parameters();
  const at::Tensor pooled = torch::tanh(x.mean(1).matmul(w["bert.pooler.dense.weight"].t()) +
                                        w["bert.pooler.dense.bias"]);
  const at::Tensor want = pooled.matmul(w["classifier.weight"].t()) + w["classifier.bias"];
  EXPECT_TRUE(torch::allclose(model->classify(ids), want, 1e-5, 1e-5));
  EXPECT_FALSE(
      torch::allclose(torch::tanh(x.select(1, 0).matmul(w["bert.pooler.dense.weight"].t()) +
                                  w["bert.pooler.dense.bias"])
                              .matmul(w["classifier.weight"].t()) +
                          w["classifier.bias"],
                      want, 1e-5, 1e-5));
}

TEST(Bert, DoesNotGenerateText) {
  Bert model(tiny_bert_config(), 1);
  EXPECT_FALSE(model->generates_text());
  EXPECT_THROW(model->generate({1, 2, 3}, 4, 1.0, 0, 1), Error);
}

TEST(BertConfigKeys, PresetsAndArchitectureKeys) {
  const auto tiny = parse_model_json(R"({"arch": "bert"})");
  EXPECT_EQ(tiny.n_layer, 4);
  EXPECT_EQ(tiny.intermediate_size, 512);
  const auto built = train::make_model(tiny, 1);
  EXPECT_EQ(built->arch(), "bert");
  EXPECT_EQ(built->num_parameters(), train::parameter_count(tiny));
  EXPECT_LT(built->num_parameters(), 1'000'000);
  const auto small = parse_model_json(R"({"arch": "bert", "preset": "small", "dropout": 0.1})");
  EXPECT_EQ(small.n_embd, 384);
  EXPECT_EQ(bert_config(small).intermediate_size, 1536);
  EXPECT_EQ(bert_config(small).dropout, 0.1);
  for (const char* bad :
       {R"({"arch": "bert", "preset": "gpt2"})", R"({"arch": "bert", "bias": false})",
        R"({"arch": "bert", "n_kv_head": 2})", R"({"arch": "bert", "rope_theta": 1e4})",
        R"({"arch": "bert", "rms_norm_eps": 1e-6})",
        R"({"arch": "bert", "tie_word_embeddings": false})",
        R"({"arch": "bert", "n_embd": 36, "n_head": 8})", R"({"arch": "bert", "pooling": "max"})",
        R"({"arch": "gpt", "pooling": "mean"})", R"({"arch": "llama", "pooling": "first"})"}) {
    try {
      parse_model_json(bad);
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("model."), std::string::npos) << bad << ": " << e.what();
    }
  }
  const auto back = train::model_from_saved_json(train::saved_model_json(small));
  EXPECT_EQ(back.arch, "bert");
  EXPECT_EQ(bert_config(back).intermediate_size, 1536);
  EXPECT_FALSE(bert_config(back).mean_pooling);
  const auto mean = parse_model_json(R"({"arch": "bert", "pooling": "mean"})");
  EXPECT_TRUE(bert_config(mean).mean_pooling);
  EXPECT_TRUE(
      bert_config(train::model_from_saved_json(train::saved_model_json(mean))).mean_pooling);
}

}  // namespace bert_test
}  // namespace deepshard::models
