// TinyLm (see tiny_lm.h).
#include "tiny_lm.h"

#include <string>

MlpBlockImpl::MlpBlockImpl(int64_t dim) {
  norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
  fc1 = register_module("fc1", torch::nn::Linear(dim, 4 * dim));
  fc2 = register_module("fc2", torch::nn::Linear(4 * dim, dim));
}

at::Tensor MlpBlockImpl::forward(const at::Tensor& x) {
  return x + fc2(torch::gelu(fc1(norm(x))));
}

TinyLmImpl::TinyLmImpl(const TinyLmOptions& options, uint64_t seed,
                       const deepshard::sharding::UnitBuilt& on_block_built) {
  torch::manual_seed(seed);
  embed = register_module("embed", torch::nn::Embedding(options.vocab, options.dim));
  positions = register_parameter("positions", 0.1 * torch::randn({options.context, options.dim}),
                                 /*requires_grad=*/false);
  channel_scale = register_buffer("channel_scale", 1.0 + 0.1 * torch::randn({options.dim}));
  block_list = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < options.blocks; ++i) {
    blocks.emplace_back(options.dim);
    block_list->push_back(blocks.back());
    if (on_block_built) on_block_built(size_t(i), *blocks.back());
  }
}

deepshard::sharding::ShardingPlan TinyLmImpl::sharding_plan() {
  deepshard::sharding::ShardingPlan plan(unit_calls_);
  for (size_t i = 0; i < blocks.size(); ++i)
    plan.unit("block " + std::to_string(i), blocks[i].ptr());
  plan.tie("embed.weight", "the output head");
  return plan;
}

at::Tensor TinyLmImpl::forward(const at::Tensor& tokens) {
  at::Tensor x = embed(tokens) + positions.narrow(0, 0, tokens.size(1));
  for (size_t i = 0; i < blocks.size(); ++i)
    x = unit_calls_(i, [&] { return blocks[i]->forward(x); });
  return torch::linear(x * channel_scale, embed->weight);  // the head: tied to the embedding
}

at::Tensor TinyLmImpl::loss(const at::Tensor& tokens, const at::Tensor& targets) {
  const at::Tensor logits = forward(tokens);
  return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}).to(at::kFloat),
                                              targets.reshape({-1}));
}
