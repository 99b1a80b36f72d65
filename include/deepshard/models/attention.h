// Causal multi-head attention, shared by models::CausalSelfAttention and the tensor-parallel
// attention of deepshard/parallel/ (n_head / T heads per tensor rank).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace deepshard::models {

// q, k, v: [B, T, n_head * head_size] each; dropout on the attention weights when `training`;
// `fused`: the scaled causal softmax as kernels::causal_softmax (else mask + torch::softmax).
// Returns [B, T, n_head * head_size] (heads concatenated).
at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            int64_t n_head, double dropout, bool training, bool fused);

}  // namespace deepshard::models
