// The Llama model (llama.h): the body (embeddings, the decoder layers, final norm), the head
// (untied, or the embeddings with tie_word_embeddings), the sharding plan and the seeded
// initialisation.
#include "deepshard/models/llama.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "deepshard/util/error.h"
#include "kernels/linear.h"
#include "models/linear_call.h"

namespace deepshard::models {
namespace {

constexpr double kInitStd = 0.02;  // Hugging Face's initializer_range

// Initialises every parameter of `part` (HF's _init_weights): RMSNorm weights 1, Linear and
// Embedding weights normal(0, 0.02) drawn in fp32 from `gen` in named_parameters() order and
// copied in (whatever the parameter's dtype and device).
void init_part(torch::nn::Module& part, at::Generator& gen) {
  torch::NoGradGuard no_grad;
  std::vector<std::shared_ptr<torch::nn::Module>> modules = part.modules(/*include_self=*/false);
  auto init_own = [&](torch::nn::Module& m) {
    const bool norm = m.as<RmsNormImpl>() != nullptr;
    const bool normal =
        m.as<torch::nn::Linear>() != nullptr || m.as<torch::nn::Embedding>() != nullptr;
    for (auto& p : m.named_parameters(/*recurse=*/false)) {
      DS_CHECK(norm || normal, Error, "Llama init: no initialisation rule for parameter ", p.key(),
               " of module ", m.name());
      if (norm) {
        p.value().fill_(1.0);
      } else {
        at::Tensor values = at::empty(p.value().sizes(), at::TensorOptions().dtype(at::kFloat));
        values.normal_(0.0, kInitStd, gen);
        p.value().copy_(values);
      }
    }
  };
  init_own(part);
  for (auto& m : modules) init_own(*m);
}

}  // namespace

int64_t llama_parameter_count(const LlamaConfig& c) {
  const int64_t C = c.n_embd, head_dim = c.n_embd / c.n_head;
  const int64_t attn = C * c.n_head * head_dim * 2 + C * c.n_kv_head * head_dim * 2;
  const int64_t mlp = 3 * C * c.intermediate_size;
  const int64_t head = c.tie_word_embeddings ? 0 : c.vocab_size * C;
  return c.vocab_size * C + c.n_layer * (attn + mlp + 2 * C) + C + head;
}

LlamaImpl::LlamaImpl(const LlamaConfig& config, uint64_t seed,
                     const sharding::UnitBuilt& on_block_built)
    : config_(config) {
  DS_CHECK(config.n_layer > 0 && config.n_embd > 0 && config.block_size > 0 &&
               config.vocab_size > 0 && config.intermediate_size > 0,
           Error,
           "Llama config: n_layer, n_embd, intermediate_size, block_size and vocab_size must be "
           "positive (got ",
           config.n_layer, ", ", config.n_embd, ", ", config.intermediate_size, ", ",
           config.block_size, ", ", config.vocab_size, ")");
  DS_CHECK(config.rope_theta > 0 && config.rms_norm_eps > 0, Error,
           "Llama config: rope_theta and rms_norm_eps must be positive (got ", config.rope_theta,
           ", ", config.rms_norm_eps, ")");
  // Registration (and initialisation) order is Hugging Face's: model.embed_tokens,
  // model.layers.0 ... model.layers.{n-1}, model.norm, lm_head.
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  model = register_module("model", LlamaBody());
  model->embed_tokens = model->register_module(
      "embed_tokens", torch::nn::Embedding(config.vocab_size, config.n_embd));
  init_part(*model->embed_tokens, gen);
  model->layers = model->register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.n_layer; ++i) {
    model->blocks.emplace_back(config);
    model->layers->push_back(model->blocks.back());
    init_part(*model->blocks.back(), gen);
    if (on_block_built) on_block_built(size_t(i), *model->blocks.back());
  }
  model->norm = model->register_module("norm", RmsNorm(config.n_embd, config.rms_norm_eps));
  if (!config.tie_word_embeddings) {
    lm_head = register_module(
        "lm_head",
        torch::nn::Linear(torch::nn::LinearOptions(config.n_embd, config.vocab_size).bias(false)));
    init_part(*lm_head, gen);
  }
}

at::Tensor LlamaImpl::embed(const at::Tensor& idx) {
  check_tokens(idx);
  return model->embed_tokens(idx);
}

at::Tensor LlamaImpl::layer_forward(int64_t i, const at::Tensor& x) {
  return model->blocks[i]->forward(x);
}

at::Tensor LlamaImpl::head(const at::Tensor& hidden) {
  const at::Tensor x = model->norm(hidden);
  if (lm_head) return apply_linear(lm_head, x, config_.fused_kernels);
  return config_.fused_kernels ? kernels::linear(x, model->embed_tokens->weight)
                               : torch::linear(x, model->embed_tokens->weight);
}

sharding::ShardingPlan LlamaImpl::sharding_plan() {
  sharding::ShardingPlan plan(unit_calls());
  for (size_t i = 0; i < model->blocks.size(); ++i)
    plan.unit("model.layers." + std::to_string(i), model->blocks[i].ptr());
  if (config_.tie_word_embeddings)
    plan.tie("model.embed_tokens.weight", "the output head (tie_word_embeddings)");
  plan.tensor_parallel(llama_tensor_plan());
  return plan;
}

}  // namespace deepshard::models
