// TinyLm: a small language model of the user's own, sharded by deepshard through the public
// sharding API only (deepshard/sharding/sharding_plan.h). Token embedding (tied to the output
// head), a frozen positional table (requires_grad false: no gradient, no optimizer state), a
// buffer (a fixed per-channel scale), and residual MLP blocks, each a ZeRO-3 unit.
#pragma once

#include <deepshard/sharding/sharding_plan.h>
#include <torch/torch.h>

#include <cstdint>
#include <vector>

struct TinyLmOptions {
  int64_t vocab = 64, dim = 32, context = 16, blocks = 3;
};

class MlpBlockImpl : public torch::nn::Module {
 public:
  explicit MlpBlockImpl(int64_t dim);
  at::Tensor forward(const at::Tensor& x);  // x + fc2(gelu(fc1(norm(x))))
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(MlpBlock);

class TinyLmImpl : public torch::nn::Module, public deepshard::sharding::Shardable {
 public:
  // `on_block_built` (optional): called with each block as soon as it exists (zero.Init).
  TinyLmImpl(const TinyLmOptions& options, uint64_t seed,
             const deepshard::sharding::UnitBuilt& on_block_built = nullptr);

  at::Tensor forward(const at::Tensor& tokens);  // [B, T] int64 -> logits [B, T, vocab]
  at::Tensor loss(const at::Tensor& tokens, const at::Tensor& targets);

  // The units: one per block; the embedding is tied to the head.
  deepshard::sharding::ShardingPlan sharding_plan() override;

  torch::nn::Embedding embed{nullptr};
  at::Tensor positions;      // [context, dim], frozen
  at::Tensor channel_scale;  // [dim], a buffer
  torch::nn::ModuleList block_list{nullptr};  // registers the blocks as "blocks.<i>"
  std::vector<MlpBlock> blocks;               // the same, typed

 private:
  deepshard::sharding::UnitCalls unit_calls_;  // the engine wraps every block call
};
TORCH_MODULE(TinyLm);
