// TensorParallelLlama: the in-place sharding of a whole models::Llama and its tensor-parallel
// forward (column-parallel q/k/v and gate/up projections behind f, row-parallel o and down
// projections before g, the vocabulary-parallel embedding, head and cross-entropy).
#include "models/llama/tensor_parallel.h"

#include <torch/torch.h>

#include "activation/checkpoint.h"
#include "deepshard/util/error.h"
#include "kernels/linear.h"
#include "models/tensor_ops.h"

namespace deepshard::models {
namespace {

// x W^T as models::Llama computes it (oneDNN's sgemm when config.fused_kernels).
at::Tensor project(const at::Tensor& x, const at::Tensor& weight, bool fused) {
  return fused ? kernels::linear(x, weight, at::Tensor()) : torch::linear(x, weight);
}

}  // namespace

TensorParallelLlama::TensorParallelLlama(models::Llama model, comm::Group& tensor,
                                         const TensorSliceBuild* built)
    : TensorParallelModel(tensor, model->config().vocab_size, model->sharding_plan().tensor_plan(),
                          built),
      model_(std::move(model)) {
  const auto& c = model_->config();
  require_divisible(tensor, "n_head", c.n_head, "query heads are split over the tensor ranks");
  require_divisible(tensor, "n_kv_head", c.n_kv_head,
                    "key/value heads are split over the tensor ranks with their query heads");
  require_divisible(tensor, "intermediate_size", c.intermediate_size,
                    "the MLP's gate/up rows are split over the tensor ranks");
  keep_slices();
  // Each layer is one activation-checkpoint region (as in TensorParallelGpt).
  model_->set_layer_runner([this](int64_t i, const at::Tensor& x) {
    models::LlamaBlock held = model_->model->blocks[size_t(i)];
    return activation::checkpoint(
        [this, held](const at::Tensor& in) mutable { return block_forward(held, in); }, x);
  });
}

at::Tensor TensorParallelLlama::block_forward(models::LlamaBlock& block, const at::Tensor& x) {
  const auto& c = model_->config();
  comm::Group& tensor = tensor_group();
  const bool fused = c.fused_kernels;
  auto& attn = *block->self_attn;
  auto& mlp = *block->mlp;
  // Attention: f, column-parallel q/k/v of this rank's heads, rotary grouped-query attention over
  // them, row-parallel output projection, g.
  const at::Tensor a = copy_to_tensor_region(block->input_layernorm(x), tensor);
  const at::Tensor y = models::llama_attention(
      project(a, attn.q_proj->weight, fused), project(a, attn.k_proj->weight, fused),
      project(a, attn.v_proj->weight, fused), c.n_head / tensor.size(), c.n_kv_head / tensor.size(),
      c.rope_theta);
  const at::Tensor h =
      x + reduce_from_tensor_region(project(y, attn.o_proj->weight, fused), tensor);
  // SwiGLU MLP: f, column-parallel gate and up, row-parallel down, g.
  const at::Tensor m = copy_to_tensor_region(block->post_attention_layernorm(h), tensor);
  const at::Tensor gated = torch::silu(project(m, mlp.gate_proj->weight, fused)) *
                           project(m, mlp.up_proj->weight, fused);
  return h + reduce_from_tensor_region(project(gated, mlp.down_proj->weight, fused), tensor);
}

at::Tensor TensorParallelLlama::embed(const at::Tensor& idx) {
  return vocab_parallel_embedding(idx, model_->model->embed_tokens->weight, vocab_start(),
                                  tensor_group());
}

at::Tensor TensorParallelLlama::head_loss(const at::Tensor& hidden, const at::Tensor& targets) {
  auto& llama = *model_;
  // The head (untied, or embed_tokens' rows) holds this rank's vocabulary rows: logits
  // [B, T, V/T], never gathered.
  const at::Tensor& head =
      llama.lm_head ? llama.lm_head->weight : llama.model->embed_tokens->weight;
  const at::Tensor logits =
      project(copy_to_tensor_region(llama.model->norm(hidden), tensor_group()), head,
              llama.config().fused_kernels);
  return vocab_parallel_cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}),
                                      vocab_start(), tensor_group());
}

}  // namespace deepshard::models
