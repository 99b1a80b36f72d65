// A Llama-style decoder (Touvron et al. 2023; Hugging Face's LlamaForCausalLM): RMSNorm before
// attention and MLP, rotary position embeddings on queries and keys (rotate-half form, base
// rope_theta), grouped-query attention (n_kv_head key/value heads, each shared by n_head /
// n_kv_head consecutive query heads), the SwiGLU MLP down(silu(gate(x)) * up(x)), no biases, a
// final RMSNorm and an lm_head that is untied (HF's default) or tied to the embeddings
// (tie_word_embeddings). Parameter names are Hugging Face's (model.embed_tokens,
// model.layers.{i}.input_layernorm, .self_attn.{q,k,v,o}_proj, .post_attention_layernorm,
// .mlp.{gate,up,down}_proj, model.norm, lm_head), in torch's [out, in] layout, so an HF Llama
// safetensors file maps one to one. Every projection is its own named Linear (a tensor-parallel
// split can shard q/k/v/gate/up by columns and o/down by rows).
// Sharding (deepshard/sharding/sharding_plan.h): one unit per decoder layer, in forward order;
// the root holds the embeddings, the final norm and the head.
// Initialisation (HF's _init_weights): Linear and Embedding weights normal(0, 0.02), RMSNorm
// weights 1, drawn in fp32 part by part from a CPU generator seeded by `seed` (the same values
// on every rank, with or without a unit hook).
#pragma once

#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include <cstdint>
#include <string>
#include <vector>

#include "deepshard/models/causal_lm.h"
#include "deepshard/sharding/sharding_plan.h"

namespace deepshard::config {
struct ModelConfig;
}

namespace deepshard::models {

struct LlamaConfig {
  int64_t n_layer = 2;    // HF num_hidden_layers
  int64_t n_head = 4;     // num_attention_heads
  int64_t n_kv_head = 2;  // num_key_value_heads: divides n_head
  int64_t n_embd = 64;    // hidden_size: n_head times an even head size
  int64_t intermediate_size = 176;
  int64_t block_size = 64;  // max_position_embeddings: the longest sequence
  int64_t vocab_size = 256;
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-5;
  bool tie_word_embeddings = false;
  // The fused cross-entropy kernel for the loss (kernels/fused_ops.h) and oneDNN's sgemm for the
  // fp32 projections and head (kernels/linear.h); false: libtorch's.
  bool fused_kernels = true;
};

// The Llama's sizes from a run's model section (presets applied; LlamaConfig's defaults for the
// fields it leaves unset).
LlamaConfig llama_config(const config::ModelConfig& model);

// How the Llama's parameters split over tensor-parallel ranks (models/llama/tensor_plan.cpp).
sharding::TensorPlan llama_tensor_plan();

// Parameters of a Llama with `config` (a tied head counted once).
int64_t llama_parameter_count(const LlamaConfig& config);

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

// Grouped-query causal attention with rotary embeddings on already projected q [B, T, n_head d]
// and k, v [B, T, n_kv_head d] (key/value head j serves query heads j g .. (j + 1) g - 1,
// g = n_head / n_kv_head); returns [B, T, n_head d], heads concatenated, before o_proj. Shared
// by LlamaAttention and the tensor-parallel Llama (n_head / T and n_kv_head / T heads per rank).
at::Tensor llama_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           int64_t n_head, int64_t n_kv_head, double rope_theta);

class LlamaAttentionImpl : public torch::nn::Module {
 public:
  explicit LlamaAttentionImpl(const LlamaConfig& config);
  at::Tensor forward(const at::Tensor& x);  // [B, T, C] -> [B, T, C], causal
  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};

 private:
  int64_t n_head_, n_kv_head_, head_dim_;
  double rope_theta_;
  bool fused_;
};
TORCH_MODULE(LlamaAttention);

class LlamaMlpImpl : public torch::nn::Module {
 public:
  explicit LlamaMlpImpl(const LlamaConfig& config);
  at::Tensor forward(const at::Tensor& x);
  torch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};

 private:
  bool fused_;
};
TORCH_MODULE(LlamaMlp);

class LlamaBlockImpl : public torch::nn::Module {
 public:
  explicit LlamaBlockImpl(const LlamaConfig& config);
  // forward_region through activation::checkpoint (recomputed when checkpointing is active).
  at::Tensor forward(const at::Tensor& x);
  at::Tensor forward_region(const at::Tensor& x);
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
  // before the next one exists (zero::PartitionedBuild partitions it there).
  LlamaImpl(const LlamaConfig& config, uint64_t seed,
            const sharding::UnitBuilt& on_block_built = nullptr);

  // forward (causal_lm.h) = head(layers(embed(idx))): model.embed_tokens; the decoder layers;
  // model.norm and lm_head (or embed_tokens' weight with tie_word_embeddings).
  at::Tensor embed(const at::Tensor& idx) override;
  at::Tensor head(const at::Tensor& hidden) override;
  int64_t num_layers() const override { return config_.n_layer; }
  int64_t hidden_size() const override { return config_.n_embd; }
  std::vector<std::string> embedding_parameters() const override {
    return {"model.embed_tokens.weight"};
  }
  int64_t context_length() const override { return config_.block_size; }
  int64_t vocab_size() const override { return config_.vocab_size; }
  std::string arch() const override { return "llama"; }

  // Unit i is model.layers.i; with tie_word_embeddings, model.embed_tokens.weight is tied to the
  // head; the tensor-parallel split is llama_tensor_plan().
  sharding::ShardingPlan sharding_plan() override;

  const LlamaConfig& config() const { return config_; }

  LlamaBody model{nullptr};
  torch::nn::Linear lm_head{nullptr};  // null with tie_word_embeddings (embed_tokens is the head)

 protected:
  // model.blocks[i]->forward(x) (run_layer runs it inside the unit calls, or the layer runner
  // instead).
  at::Tensor layer_forward(int64_t i, const at::Tensor& x) override;
  bool fused_loss() const override { return config_.fused_kernels; }

 private:
  LlamaConfig config_;
};
TORCH_MODULE(Llama);

}  // namespace deepshard::models
