// Causal multi-head attention, shared by models::CausalSelfAttention and the attention of the
// tensor-parallel GPT (n_head / T heads per tensor rank).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace deepshard::models {

// Which of the whole attention's heads q, k, v hold: a tensor-parallel rank holds heads
// [first, first + n_head) of `total` (total 0: every head).
struct HeadSlice {
  int64_t first = 0;
  int64_t total = 0;
};

// q, k, v: [B, T, n_head * head_size] each; dropout on the attention weights when `training`
// (with a head slice, the whole attention's mask is drawn and this slice of it applied:
// dropout_slice); `fused`: the scaled causal softmax as kernels::causal_softmax (else mask +
// torch::softmax). Returns [B, T, n_head * head_size] (heads concatenated).
at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            int64_t n_head, double dropout, bool training, bool fused,
                            HeadSlice heads = {});

// Dropout of `x` as the slice [first, first + x.size(dim)) along `dim` of a tensor `whole` long
// there: the mask is drawn for the whole tensor (the generator advances exactly as torch::dropout
// of the whole would) and its slice applied, so the tensor-parallel ranks, starting from the same
// generator state, together apply the one-rank run's mask. Costs the whole mask's draws on every
// rank (Megatron instead seeds the tensor region per rank: cheaper, not the one-rank run's masks).
at::Tensor dropout_slice(const at::Tensor& x, double p, bool training, int64_t dim, int64_t first,
                         int64_t whole);

}  // namespace deepshard::models
