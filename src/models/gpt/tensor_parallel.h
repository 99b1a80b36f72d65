// Megatron-LM's tensor-parallel GPT (Shoeybi et al. 2019) over deepshard's models::Gpt. Every rank
// of a tensor group builds the whole model with the same seed (so the initialisation is the
// single-rank run's), then TensorParallelGpt keeps in place only this rank's slices of the split
// parameters (tensor rank t of T; the rule is models::gpt_tensor_plan()):
//  - attn.c_attn (QKV, column-parallel): the rows of heads [t H/T, (t+1) H/T) of each of q, k, v;
//  - attn.c_proj (row-parallel): the matching input columns; its bias stays whole (added once,
//    after the all-reduce);
//  - mlp.c_fc (column-parallel): rows [t 4C/T, (t+1) 4C/T); mlp.c_proj (row-parallel): those
//    input columns, whole bias;
//  - wte (vocabulary-parallel, tied to the output head): rows [t V/T, (t+1) V/T).
// LayerNorms and wpe are replicated; their gradients are equal on every tensor rank (every input
// gradient of a column-parallel layer is all-reduced by f), so an engine over the data-parallel
// group treats the model like any other. Parameter names and the module tree are models::Gpt's.
// REQUIRES: dropout 0 (dropout inside the tensor region needs Megatron's model-parallel RNG
// tracker, not built yet), n_head, 4 n_embd and vocab_size divisible by T.
#pragma once

#include <ATen/core/Tensor.h>

#include "deepshard/comm/group.h"
#include "deepshard/models/gpt.h"
#include "models/tensor_parallel_model.h"

namespace deepshard::models {

class TensorParallelGpt : public TensorParallelModel {
 public:
  // Shards `model` (whole, the same on every tensor rank) for this rank of `tensor` and installs
  // its tensor-parallel layer runner. Throws Error naming the size that does not divide.
  // `built`: the hook that split its blocks as they were built (they are left as they are).
  TensorParallelGpt(models::Gpt model, comm::Group& tensor,
                    const TensorSliceBuild* built = nullptr);

  models::CausalLmImpl& causal_lm() override { return *model_; }
  // The loss's parts (the blocks run through the model's layer runner, installed here): the
  // vocabulary-parallel embedding plus wpe; ln_f, the head on this rank's vocabulary rows (wte's
  // slice) and the vocabulary-parallel cross-entropy.
  at::Tensor embed(const at::Tensor& idx) override;
  at::Tensor head_loss(const at::Tensor& hidden, const at::Tensor& targets) override;
  models::Gpt& model() { return model_; }

 private:
  at::Tensor block_forward(models::Block& block, const at::Tensor& x);
  at::Tensor checkpointed_block(models::Block& block, const at::Tensor& x);

  models::Gpt model_;
};

}  // namespace deepshard::models
