// A Llama-style decoder (Touvron et al. 2023; Hugging Face's LlamaForCausalLM): RMSNorm before
// attention and MLP, rotary position embeddings on queries and keys (rotate-half form), grouped-
// query attention (n_kv_head key/value heads shared by n_head / n_kv_head query heads each), the
// SwiGLU MLP down(silu(gate(x)) * up(x)), no biases, a final RMSNorm and an untied lm_head.
// Parameter names are Hugging Face's (model.embed_tokens, model.layers.{i}.input_layernorm,
// .self_attn.{q,k,v,o}_proj, .post_attention_layernorm, .mlp.{gate,up,down}_proj, model.norm,
// lm_head), in torch's [out, in] layout, so a Hugging Face Llama safetensors file maps one to one.
// Initialisation: normal(0, 0.02) for linear and embedding weights, RMSNorm weights 1, drawn
// part by part from a generator seeded by `seed` (deterministic, and the same with a block hook).
#pragma once

#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "deepshard/models/causal_lm.h"

namespace deepshard::models {

struct LlamaConfig {
  int64_t n_layer = 2;
  int64_t n_head = 4;
  int64_t n_kv_head = 2;  // divides n_head
  int64_t n_embd = 64;    // multiple of n_head; head size n_embd / n_head is even (rotary pairs)
  int64_t intermediate_size = 176;
  int64_t block_size = 64;  // longest sequence (rotary positions 0 .. block_size - 1)
  int64_t vocab_size = 256;
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-5;
};

// y = x / sqrt(mean(x^2) + eps) * weight, computed in fp32 and returned in x's dtype.
class RmsNormImpl : public torch::nn::Module {
 public:
  RmsNormImpl(int64_t dim, double eps);
  at::Tensor forward(const at::Tensor& x);
  at::Tensor weight;

 private:
  double eps_;
};
TORCH_MODULE(RmsNorm);

class LlamaAttentionImpl : public torch::nn::Module {
 public:
  explicit LlamaAttentionImpl(const LlamaConfig& config);
  at::Tensor forward(const at::Tensor& x);  // [B, T, C] -> [B, T, C]
  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};

 private:
  int64_t n_head_, n_kv_head_, head_dim_;
  double rope_theta_;
};
TORCH_MODULE(LlamaAttention);

class LlamaMlpImpl : public torch::nn::Module {
 public:
  explicit LlamaMlpImpl(const LlamaConfig& config);
  at::Tensor forward(const at::Tensor& x);
  torch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
};
TORCH_MODULE(LlamaMlp);

class LlamaBlockImpl : public torch::nn::Module {
 public:
  explicit LlamaBlockImpl(const LlamaConfig& config);
  at::Tensor forward(const at::Tensor& x);
  RmsNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
  LlamaAttention self_attn{nullptr};
  LlamaMlp mlp{nullptr};
};
TORCH_MODULE(LlamaBlock);

// The body Hugging Face calls "model": embeddings, decoder layers, final norm.
class LlamaBodyImpl : public torch::nn::Module {
 public:
  torch::nn::Embedding embed_tokens{nullptr};
  torch::nn::ModuleList layers{nullptr};
  std::vector<LlamaBlock> blocks;  // the same modules as layers, typed
  RmsNorm norm{nullptr};
};
TORCH_MODULE(LlamaBody);

class LlamaImpl : public CausalLmImpl {
 public:
  // `on_block_built` (optional) gets each decoder layer as soon as it is built and initialised,
  // before the next one exists (zero.Init partitions it there).
  using BlockBuilt = std::function<void(int64_t index, torch::nn::Module& block)>;
  LlamaImpl(const LlamaConfig& config, uint64_t seed, const BlockBuilt& on_block_built = nullptr);

  at::Tensor forward(const at::Tensor& idx) override;
  int64_t context_length() const override { return config_.block_size; }
  int64_t vocab_size() const override { return config_.vocab_size; }
  std::string arch() const override { return "llama"; }

  // Runs decoder layer i on x; the engine may replace it (ZeRO-3 gathers, activation
  // checkpointing) without the model knowing.
  using BlockRunner =
      std::function<at::Tensor(int64_t index, LlamaBlock& block, const at::Tensor& x)>;
  void set_block_runner(BlockRunner runner) { block_runner_ = std::move(runner); }

  const LlamaConfig& config() const { return config_; }

  LlamaBody model{nullptr};
  torch::nn::Linear lm_head{nullptr};

 private:
  LlamaConfig config_;
  BlockRunner block_runner_;
};
TORCH_MODULE(Llama);

}  // namespace deepshard::models
