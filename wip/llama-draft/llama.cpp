// The Llama model (llama.h): the body (embeddings, decoder layers through the engine's block
// runner when one is installed, final norm), the untied head, and the seeded initialisation.
#include "deepshard/models/llama.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "deepshard/util/error.h"

namespace deepshard::models {
namespace {

constexpr double kInitStd = 0.02;  // Hugging Face's initializer_range

// Initialises every parameter of `module`: RMSNorm weights 1, every other weight normal(0, 0.02)
// drawn in fp32 from `gen` in named_parameters() order and copied in (any dtype and device).
void init_part(torch::nn::Module& module, at::Generator& gen) {
  torch::NoGradGuard no_grad;
  for (const auto& item : module.named_modules("", /*include_self=*/true)) {
    const bool norm = item.value()->as<RmsNormImpl>() != nullptr;
    for (auto& p : item.value()->named_parameters(/*recurse=*/false)) {
      at::Tensor value = norm ? torch::ones(p.value().sizes())
                              : at::normal(0.0, kInitStd, p.value().sizes(), gen);
      p.value().copy_(value);
    }
  }
}

}  // namespace

LlamaImpl::LlamaImpl(const LlamaConfig& config, uint64_t seed, const BlockBuilt& on_block_built)
    : config_(config) {
  DS_CHECK(config.n_layer > 0 && config.n_embd > 0 && config.block_size > 0 &&
               config.vocab_size > 0 && config.intermediate_size > 0,
           Error,
           "Llama config: n_layer, n_embd, intermediate_size, block_size and vocab_size must be "
           "positive (got ",
           config.n_layer, ", ", config.n_embd, ", ", config.intermediate_size, ", ",
           config.block_size, ", ", config.vocab_size, ")");
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
    if (on_block_built) on_block_built(i, *model->blocks.back());
  }
  model->norm = model->register_module("norm", RmsNorm(config.n_embd, config.rms_norm_eps));
  lm_head = register_module(
      "lm_head",
      torch::nn::Linear(torch::nn::LinearOptions(config.n_embd, config.vocab_size).bias(false)));
  init_part(*lm_head, gen);
}

at::Tensor LlamaImpl::forward(const at::Tensor& idx) {
  DS_CHECK(idx.dim() == 2 && idx.scalar_type() == at::kLong, Error,
           "Llama forward: idx must be [B, T] int64, got ", idx.sizes(), " ", idx.scalar_type());
  DS_CHECK(idx.size(1) <= config_.block_size, Error, "Llama forward: sequence length ",
           idx.size(1), " exceeds block_size ", config_.block_size);
  at::Tensor x = model->embed_tokens(idx);
  auto& blocks = model->blocks;
  for (int64_t i = 0; i < int64_t(blocks.size()); ++i) {
    x = block_runner_ ? block_runner_(i, blocks[i], x) : blocks[i]->forward(x);
  }
  return lm_head(model->norm(x));
}

}  // namespace deepshard::models
