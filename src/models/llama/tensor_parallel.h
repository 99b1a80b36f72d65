// Megatron-LM's tensor parallelism (Shoeybi et al. 2019) for deepshard's Llama-style model
// (models::Llama). As TensorParallelGpt (tensor_parallel_model.h), every rank of a tensor group
// builds the whole model with the same seed and keeps in place only its slices (tensor rank t of
// T; the rule is models::llama_tensor_plan()):
//  - self_attn.q_proj (column-parallel): the rows of query heads [t H/T, (t+1) H/T);
//  - self_attn.k_proj, v_proj (column-parallel): the rows of key/value heads [t K/T, (t+1) K/T),
//    exactly the ones those query heads use (grouped-query attention: query head j reads kv head
//    j / (H/K));
//  - self_attn.o_proj (row-parallel): the matching input columns;
//  - mlp.gate_proj, up_proj (column-parallel): rows [t I/T, (t+1) I/T); mlp.down_proj
//    (row-parallel): those input columns;
//  - model.embed_tokens and the untied lm_head (vocabulary-parallel rows [t V/T, (t+1) V/T)); with
//    tie_word_embeddings the head is embed_tokens' slice.
// The RMSNorms are replicated. No biases, no dropout (the Llama has neither).
// REQUIRES: n_head, n_kv_head, intermediate_size and vocab_size divisible by T (else Error naming
// the model key; Megatron would replicate kv heads when T > n_kv_head, not built here).
#pragma once

#include <ATen/core/Tensor.h>

#include "deepshard/comm/group.h"
#include "deepshard/models/llama.h"
#include "models/tensor_parallel_model.h"

namespace deepshard::models {

class TensorParallelLlama : public TensorParallelModel {
 public:
  // Shards `model` (whole, the same on every tensor rank) for this rank of `tensor` and installs
  // its tensor-parallel layer runner. `built`: the hook that split its blocks as they were built
  // (they are left as they are).
  TensorParallelLlama(models::Llama model, comm::Group& tensor,
                      const TensorSliceBuild* built = nullptr);

  models::CausalLmImpl& causal_lm() override { return *model_; }
  // The loss's parts (the layers run through the model's layer runner, installed here): the
  // vocabulary-parallel embed_tokens; model.norm, the head on this rank's vocabulary rows (the
  // untied lm_head's, or embed_tokens' with tie_word_embeddings) and the vocabulary-parallel
  // cross-entropy.
  at::Tensor embed(const at::Tensor& idx) override;
  at::Tensor head_loss(const at::Tensor& hidden, const at::Tensor& targets) override;
  models::Llama& model() { return model_; }

 private:
  at::Tensor block_forward(models::LlamaBlock& block, const at::Tensor& x);

  models::Llama model_;
};

}  // namespace deepshard::models
