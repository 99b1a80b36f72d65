// Causal self-attention of the GPT as one fp32 kernel: from the packed projection qkv [B, T, 3C]
// (q | k | v, each n_head heads of C / n_head) to y [B, T, C] (heads concatenated), with
// softmax(scale · q kᵀ + causal mask) v per head. Per head, queries are taken in row blocks: block
// r (rows s..e) needs only keys 0..e, so the score and value products skip the masked upper blocks
// (5/8 of the full products' FLOPs at T = 256 in blocks of 64), every product is one sgemm
// (platform/sgemm.h) reading q, k, v in place (no head transposes, no copies), and the scaled,
// masked softmax runs on the block's rows while they are in cache (the rows of
// kernels/causal_softmax). The backward recomputes nothing: it keeps the probabilities
// [B, n_head, T, T] (as the unfused path does) and computes dq, dk, dv by blocks the same way.
// A bf16 qkv runs it on an fp32 copy (y rounded to bf16) when bf16 models compute in fp32
// (bf16_compute.h); the probabilities kept for backward are then fp32, as are the copy of qkv.
// Only for contiguous fp32 CPU qkv with a verified sgemm (blocked_attention_supported; the
// caller keeps its libtorch sequence otherwise — matmul, causal_softmax, matmul — which is also
// the reference) and without attention dropout (the caller's to check).
#pragma once

#include <ATen/core/Tensor.h>

namespace deepshard::kernels {

// True when causal_attention(qkv, n_head) runs the blocked kernel for this qkv.
bool blocked_attention_supported(const at::Tensor& qkv, int64_t n_head);

// qkv [B, T, 3C] -> y [B, T, C]; scale 1/sqrt(C / n_head). Differentiable (once). Throws Error
// when !blocked_attention_supported(qkv, n_head).
at::Tensor causal_attention(const at::Tensor& qkv, int64_t n_head);

}  // namespace deepshard::kernels
