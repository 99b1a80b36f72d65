// GPT-2 decoder in libtorch with Hugging Face GPT-2 parameter names (wte, wpe, h.{i}.ln_1,
// h.{i}.attn.c_attn, h.{i}.attn.c_proj, h.{i}.ln_2, h.{i}.mlp.c_fc, h.{i}.mlp.c_proj, ln_f; the
// output head is tied to wte). Linear weights use torch's [out, in] layout (HF's Conv1D stores
// [in, out]; converters transpose). GPT-2 initialisation, deterministic for a seed.
// The model declares its sharding units through the public sharding API like any user model
// (deepshard/sharding/sharding_plan.h): one unit per transformer block, wte tied to the head; its
// blocks run through the model's unit calls (causal_lm.h), which engines wrap (ZeRO-3 gathers,
// ...). Loss, sampling and the parameter count are the shared causal-LM ones (causal_lm.h).
#pragma once

#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <cstdint>
#include <string>
#include <vector>

#include "deepshard/models/causal_lm.h"
#include "deepshard/sharding/sharding_plan.h"

namespace deepshard::config {
struct ModelConfig;
}

namespace deepshard::models {

struct GptConfig {
  int64_t n_layer = 2;
  int64_t n_head = 2;
  int64_t n_embd = 64;
  int64_t block_size = 64;
  int64_t vocab_size = 256;
  double dropout = 0.0;
  bool bias = true;
  // Fused CPU kernels (kernels/fused_ops.h) for layer norm, GELU, the causal softmax and the loss,
  // and oneDNN's sgemm for the fp32 Linear layers and head (kernels/linear.h); false runs the
  // libtorch sequences they replace (same results within rounding).
  bool fused_kernels = true;
};

// The GPT's sizes from a run's model section (presets applied; bias defaults to true).
GptConfig gpt_config(const config::ModelConfig& model);

// How the GPT's parameters split over tensor-parallel ranks (models/gpt/tensor_plan.cpp).
sharding::TensorPlan gpt_tensor_plan();

class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  explicit CausalSelfAttentionImpl(const GptConfig& config);
  at::Tensor forward(const at::Tensor& x);  // [B, T, C] -> [B, T, C]
  torch::nn::Linear c_attn{nullptr}, c_proj{nullptr};

 private:
  int64_t n_head_, n_embd_;
  double dropout_;
  bool fused_;
};
TORCH_MODULE(CausalSelfAttention);

class MlpImpl : public torch::nn::Module {
 public:
  explicit MlpImpl(const GptConfig& config);
  at::Tensor forward(const at::Tensor& x);
  torch::nn::Linear c_fc{nullptr}, c_proj{nullptr};

 private:
  double dropout_;
  bool fused_;
};
TORCH_MODULE(Mlp);

class BlockImpl : public torch::nn::Module {
 public:
  explicit BlockImpl(const GptConfig& config);
  // forward_region through activation::checkpoint (recomputed when checkpointing is active).
  at::Tensor forward(const at::Tensor& x);
  at::Tensor forward_region(const at::Tensor& x);
  torch::nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  CausalSelfAttention attn{nullptr};
  Mlp mlp{nullptr};

 private:
  bool fused_;
};
TORCH_MODULE(Block);

class GptImpl : public CausalLmImpl {
 public:
  // Builds and initialises the model with GPT-2's scheme (normal(0, 0.02) weights, c_proj scaled
  // by 1/sqrt(2 n_layer), zero biases, unit LayerNorms), drawn from a generator seeded by `seed`.
  // `on_block_built` (optional) is called with each block as soon as it is built and initialised,
  // before the next one exists (DeepSpeed's zero.Init: zero::PartitionedBuild partitions it).
  using BlockBuilt = sharding::UnitBuilt;
  GptImpl(const GptConfig& config, uint64_t seed, const BlockBuilt& on_block_built = nullptr);

  // forward (causal_lm.h) = head(blocks(embed(idx))): wte(idx) + wpe(positions) then dropout;
  // the blocks; ln_f and the head tied to wte (logits = ln_f(x) wte^T).
  at::Tensor embed(const at::Tensor& idx) override;
  at::Tensor head(const at::Tensor& hidden) override;
  int64_t num_layers() const override { return int64_t(blocks.size()); }
  int64_t hidden_size() const override { return config_.n_embd; }
  std::vector<std::string> embedding_parameters() const override {
    return {"wte.weight", "wpe.weight"};
  }
  int64_t context_length() const override { return config_.block_size; }
  int64_t vocab_size() const override { return config_.vocab_size; }
  std::string arch() const override { return "gpt"; }

  // The sharding plan: unit i is block h.i, the root holds wte, wpe and ln_f; wte is tied to the
  // output head (logits = ln_f(x) wte^T); the tensor-parallel split is gpt_tensor_plan().
  sharding::ShardingPlan sharding_plan() override;

  const GptConfig& config() const { return config_; }

  torch::nn::Embedding wte{nullptr}, wpe{nullptr};
  torch::nn::ModuleList h{nullptr};
  std::vector<Block> blocks;  // the same modules as h, typed
  torch::nn::LayerNorm ln_f{nullptr};

 protected:
  // blocks[i]->forward(x) (run_layer runs it inside the unit calls, or the layer runner instead).
  at::Tensor layer_forward(int64_t i, const at::Tensor& x) override;
  bool fused_loss() const override { return config_.fused_kernels; }

 private:
  GptConfig config_;
};
TORCH_MODULE(Gpt);

}  // namespace deepshard::models
