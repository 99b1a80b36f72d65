// The BERT model (bert.h): HF's bert (embeddings, encoder layers, the pooler when classifying),
// cls.predictions (the masked-LM head, its decoder tied to the word embeddings) and the
// classifier; the seeded initialisation, the sharding plan and the masked-LM objective.
#include "deepshard/models/bert.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "deepshard/util/error.h"
#include "kernels/linear.h"
#include "models/linear_call.h"

namespace deepshard::models {
namespace {

constexpr double kInitStd = 0.02;  // Hugging Face's initializer_range

// Initialises every parameter of `part` (HF's BertPreTrainedModel._init_weights): Linear and
// Embedding weights normal(0, 0.02) drawn in fp32 from `gen` in named_parameters() order and
// copied in; biases (the Linear layers' and the masked-LM decoder's) 0; LayerNorm weights 1.
void init_part(torch::nn::Module& part, at::Generator& gen) {
  torch::NoGradGuard no_grad;
  auto init_own = [&](torch::nn::Module& m) {
    const bool drawn =
        m.as<torch::nn::Linear>() != nullptr || m.as<torch::nn::Embedding>() != nullptr;
    const bool norm = m.as<torch::nn::LayerNorm>() != nullptr;
    for (auto& p : m.named_parameters(/*recurse=*/false)) {
      const bool bias = p.key() == "bias";
      DS_CHECK(drawn || norm || bias, Error, "BERT init: no initialisation rule for parameter ",
               p.key(), " of module ", m.name());
      if (bias) {
        p.value().zero_();
      } else if (norm) {
        p.value().fill_(1.0);
      } else {
        at::Tensor values = at::empty(p.value().sizes(), at::TensorOptions().dtype(at::kFloat));
        values.normal_(0.0, kInitStd, gen);
        p.value().copy_(values);
      }
    }
  };
  init_own(part);
  for (auto& m : part.modules(/*include_self=*/false)) init_own(*m);
}

}  // namespace

BertImpl::BertImpl(const BertConfig& config, uint64_t seed,
                   const sharding::UnitBuilt& on_layer_built)
    : config_(config) {
  DS_CHECK(config.n_layer > 0 && config.n_embd > 0 && config.intermediate_size > 0 &&
               config.block_size > 0 && config.type_vocab_size > 0,
           Error,
           "BERT config: n_layer, n_embd, intermediate_size, block_size and type_vocab_size must "
           "be positive (got ",
           config.n_layer, ", ", config.n_embd, ", ", config.intermediate_size, ", ",
           config.block_size, ", ", config.type_vocab_size, ")");
  DS_CHECK(config.vocab_size >= 2, Error, "BERT config: vocab_size ", config.vocab_size,
           " must hold at least one token and the mask token (its last id)");
  DS_CHECK(config.dropout >= 0.0 && config.dropout < 1.0, Error, "BERT config: dropout ",
           config.dropout, " is outside [0, 1)");
  DS_CHECK(config.mask_probability > 0.0 && config.mask_probability <= 1.0, Error,
           "BERT config: mask_probability ", config.mask_probability, " is outside (0, 1]");
  DS_CHECK(config.num_labels >= 0, Error, "BERT config: num_labels ", config.num_labels,
           " is negative");
  // Registration (and initialisation) order is Hugging Face's: bert.embeddings,
  // bert.encoder.layer.0 ... {n-1}, bert.pooler, cls.predictions, classifier.
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  bert = register_module("bert", BertBody());
  bert->embeddings = bert->register_module("embeddings", BertEmbeddings(config));
  init_part(*bert->embeddings, gen);
  bert->encoder = bert->register_module("encoder", BertEncoder());
  bert->encoder->layer = bert->encoder->register_module("layer", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.n_layer; ++i) {
    bert->encoder->layers.emplace_back(config);
    bert->encoder->layer->push_back(bert->encoder->layers.back());
    init_part(*bert->encoder->layers.back(), gen);
    if (on_layer_built) on_layer_built(size_t(i), *bert->encoder->layers.back());
  }
  if (config.num_labels > 0) {
    bert->pooler = bert->register_module("pooler", BertPooler(config));
    init_part(*bert->pooler, gen);
  }
  cls = register_module("cls", BertCls());
  cls->predictions = cls->register_module("predictions", BertLmPrediction(config));
  init_part(*cls, gen);
  if (config.num_labels > 0) {
    classifier = register_module(
        "classifier",
        torch::nn::Linear(torch::nn::LinearOptions(config.n_embd, config.num_labels).bias(true)));
    init_part(*classifier, gen);
  }
}

std::vector<std::string> BertImpl::embedding_parameters() const {
  return {"bert.embeddings.word_embeddings.weight", "bert.embeddings.position_embeddings.weight",
          "bert.embeddings.token_type_embeddings.weight", "bert.embeddings.LayerNorm.weight",
          "bert.embeddings.LayerNorm.bias"};
}

at::Tensor BertImpl::embed(const at::Tensor& idx) {
  check_tokens(idx);
  return bert->embeddings(idx);
}

at::Tensor BertImpl::layer_forward(int64_t i, const at::Tensor& x) {
  return bert->encoder->layers[size_t(i)]->forward(x);
}

at::Tensor BertImpl::head(const at::Tensor& hidden) {
  // The decoder: the word embeddings' weight ([vocab, C]) and cls.predictions.bias.
  const at::Tensor t = cls->predictions->transform(hidden);
  const at::Tensor& weight = bert->embeddings->word_embeddings->weight;
  return config_.fused_kernels ? kernels::linear(t, weight, cls->predictions->bias)
                               : torch::linear(t, weight, cls->predictions->bias);
}

at::Tensor BertImpl::classify(const at::Tensor& idx) {
  DS_CHECK(classifier, Error, "bert classify: the model has no classification head (num_labels 0)");
  at::Tensor x = embed(idx);
  for (int64_t i = 0; i < num_layers(); ++i) x = run_layer(i, x);
  // HF's BertForSequenceClassification: dropout on the pooled output, then the classifier.
  const at::Tensor pooled = torch::dropout(bert->pooler(x), config_.dropout, is_training());
  return apply_linear(classifier, pooled, config_.fused_kernels);
}

void BertImpl::make_objective(at::Tensor& inputs, at::Tensor& targets,
                              const at::Tensor& sample_keys) const {
  MaskedBatch masked = mask_tokens(config_, inputs, sample_keys);
  inputs = std::move(masked.inputs);
  targets = std::move(masked.labels);
}

sharding::ShardingPlan BertImpl::sharding_plan() {
  sharding::ShardingPlan plan(unit_calls());
  for (size_t i = 0; i < bert->encoder->layers.size(); ++i)
    plan.unit("bert.encoder.layer." + std::to_string(i), bert->encoder->layers[i].ptr());
  plan.tie("bert.embeddings.word_embeddings.weight", "the masked-LM decoder (cls.predictions)");
  return plan;
}

}  // namespace deepshard::models
