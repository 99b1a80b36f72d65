// TensorParallelGpt: the in-place sharding of a whole models::Gpt, its tensor-parallel forward
// (column-parallel QKV and MLP up projection behind f, row-parallel attention output and MLP down
// projection before g, the vocabulary-parallel embedding, head and cross-entropy), and its dropout
// (the one-rank run's masks: models::dropout_slice).
#include "models/gpt/tensor_parallel.h"

#include <torch/torch.h>

#include "activation/checkpoint.h"
#include "deepshard/util/error.h"
#include "kernels/fused_ops.h"
#include "kernels/linear.h"
#include "models/attention.h"
#include "models/layer_norm_call.h"
#include "models/tensor_ops.h"

namespace deepshard::models {
namespace {

// x Wᵀ (+ b) as libtorch computes it for fp32 (the tensor-parallel blocks' products); bf16 goes
// through kernels::linear, which multiplies in fp32 when bf16 models compute in fp32
// (kernels/bf16_compute.h) and is torch::linear otherwise.
at::Tensor project(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias = {}) {
  return x.scalar_type() == at::kBFloat16 ? kernels::linear(x, weight, bias)
                                          : torch::linear(x, weight, bias);
}

}  // namespace

TensorParallelGpt::TensorParallelGpt(models::Gpt model, comm::Group& tensor,
                                     const TensorSliceBuild* built)
    : TensorParallelModel(tensor, model->config().vocab_size, model->sharding_plan().tensor_plan(),
                          built),
      model_(std::move(model)) {
  const auto& c = model_->config();
  require_divisible(tensor, "n_head", c.n_head, "heads are split over the tensor ranks");
  keep_slices();
  model_->set_layer_runner([this](int64_t i, const at::Tensor& x) {
    return checkpointed_block(model_->blocks[size_t(i)], x);
  });
}

// Each block is one activation-checkpoint region, as in models::Gpt (recomputed in backward when
// a Checkpointer is active; the recompute repeats the tensor group's all-reduces, in the same order
// on every tensor rank).
at::Tensor TensorParallelGpt::checkpointed_block(models::Block& block, const at::Tensor& x) {
  models::Block held = block;
  return activation::checkpoint(
      [this, held](const at::Tensor& in) mutable { return block_forward(held, in); }, x);
}

at::Tensor TensorParallelGpt::block_forward(models::Block& block, const at::Tensor& x) {
  const auto& c = model_->config();
  const int64_t local_heads = c.n_head / tensor_group().size();
  auto& attn = *block->attn;
  auto& mlp = *block->mlp;
  // Dropout draws what the one-rank block draws, in its order, from the generator every tensor
  // rank holds in the same state: the attention weights' mask for all heads (this rank applies
  // its heads' part), then the whole residual branches' masks (applied alike on every rank).
  const bool training = block->is_training();
  const models::HeadSlice heads{tensor_group().rank() * local_heads, c.n_head};
  // Attention: f, column-parallel QKV of this rank's heads, attention over them, row-parallel
  // output projection, g, then the (whole) bias and the residual dropout.
  const bool fused = c.fused_kernels;
  const at::Tensor a =
      copy_to_tensor_region(apply_layer_norm(block->ln_1, x, fused), tensor_group());
  auto qkv = project(a, attn.c_attn->weight, attn.c_attn->bias).chunk(3, 2);
  const at::Tensor y = models::causal_attention(qkv[0], qkv[1], qkv[2], local_heads, c.dropout,
                                                training, fused, heads);
  at::Tensor out = reduce_from_tensor_region(project(y, attn.c_proj->weight), tensor_group());
  if (attn.c_proj->bias.defined()) out = out + attn.c_proj->bias;
  const at::Tensor h = x + torch::dropout(out, c.dropout, training);
  // MLP: f, column-parallel up projection and GELU, row-parallel down projection, g, bias.
  const at::Tensor m =
      copy_to_tensor_region(apply_layer_norm(block->ln_2, h, fused), tensor_group());
  const at::Tensor pre = project(m, mlp.c_fc->weight, mlp.c_fc->bias);
  const at::Tensor up = fused ? kernels::gelu_tanh(pre) : torch::gelu(pre, "tanh");
  at::Tensor down = reduce_from_tensor_region(project(up, mlp.c_proj->weight), tensor_group());
  if (mlp.c_proj->bias.defined()) down = down + mlp.c_proj->bias;
  return h + torch::dropout(down, c.dropout, training);
}

at::Tensor TensorParallelGpt::embed(const at::Tensor& idx) {
  auto& gpt = *model_;
  const at::Tensor pos = torch::arange(idx.size(1), idx.options());
  return torch::dropout(
      vocab_parallel_embedding(idx, gpt.wte->weight, vocab_start(), tensor_group()) + gpt.wpe(pos),
      gpt.config().dropout, gpt.is_training());
}

at::Tensor TensorParallelGpt::head_loss(const at::Tensor& hidden, const at::Tensor& targets) {
  auto& gpt = *model_;
  // The head is tied to this rank's vocabulary rows: logits [B, T, V/T], never gathered.
  const at::Tensor logits =
      project(copy_to_tensor_region(apply_layer_norm(gpt.ln_f, hidden, gpt.config().fused_kernels),
                                    tensor_group()),
              gpt.wte->weight);
  return vocab_parallel_cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}),
                                      vocab_start(), tensor_group());
}

}  // namespace deepshard::models
