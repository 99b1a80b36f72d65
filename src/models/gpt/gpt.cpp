// The GPT-2 model: embeddings, the block stack (each block as layer_forward), the final LayerNorm
// and the head tied to wte (on kernels::linear with fused_kernels).
#include "deepshard/models/gpt.h"

#include <torch/torch.h>

#include "deepshard/util/error.h"
#include "kernels/linear.h"
#include "models/gpt/init.h"
#include "models/layer_norm_call.h"

namespace deepshard::models {

GptImpl::GptImpl(const GptConfig& config, uint64_t seed, const BlockBuilt& on_block_built)
    : config_(config) {
  DS_CHECK(
      config.n_layer > 0 && config.n_embd > 0 && config.block_size > 0 && config.vocab_size > 0,
      Error, "GPT config: n_layer, n_embd, block_size and vocab_size must be positive (got ",
      config.n_layer, ", ", config.n_embd, ", ", config.block_size, ", ", config.vocab_size, ")");
  DS_CHECK(config.dropout >= 0.0 && config.dropout < 1.0, Error, "GPT config: dropout ",
           config.dropout, " is outside [0, 1)");
  // Registration order is Hugging Face's: wte, wpe, h.0 ... h.{n-1}, ln_f; each part is
  // initialised as it is built, in that order (the draws of init_gpt2_weights on the whole model).
  Gpt2Init init(config.n_layer, seed);
  wte = register_module("wte", torch::nn::Embedding(config.vocab_size, config.n_embd));
  init.init(*wte, "wte");
  wpe = register_module("wpe", torch::nn::Embedding(config.block_size, config.n_embd));
  init.init(*wpe, "wpe");
  h = register_module("h", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.n_layer; ++i) {
    blocks.emplace_back(config);
    h->push_back(blocks.back());
    init.init(*blocks.back(), "h." + std::to_string(i));
    if (on_block_built) on_block_built(size_t(i), *blocks.back());
  }
  ln_f = register_module(
      "ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.n_embd}).eps(1e-5)));
  init.init(*ln_f, "ln_f");
}

at::Tensor GptImpl::layer_forward(int64_t i, const at::Tensor& x) { return blocks[i]->forward(x); }

at::Tensor GptImpl::embed(const at::Tensor& idx) {
  check_tokens(idx);
  const at::Tensor pos = torch::arange(idx.size(1), idx.options());
  return torch::dropout(wte(idx) + wpe(pos), config_.dropout, is_training());
}

at::Tensor GptImpl::head(const at::Tensor& hidden) {
  // The head reuses wte's weight ([vocab, C]): logits = ln_f(x) wte^T.
  const at::Tensor xf = apply_layer_norm(ln_f, hidden, config_.fused_kernels);
  return config_.fused_kernels ? kernels::linear(xf, wte->weight) : torch::linear(xf, wte->weight);
}

sharding::ShardingPlan GptImpl::sharding_plan() {
  sharding::ShardingPlan plan(unit_calls());
  for (size_t i = 0; i < blocks.size(); ++i) plan.unit("h." + std::to_string(i), blocks[i].ptr());
  plan.tie("wte.weight", "the output head (logits = ln_f(x) wte^T)");
  plan.tensor_parallel(gpt_tensor_plan());
  return plan;
}

}  // namespace deepshard::models
