// Fused CPU kernels for the memory-bound operations of the GPT model, each an autograd function
// that computes its forward and its backward in one pass over memory (instead of libtorch's chain
// of elementwise kernels), with AVX-512 / AVX2 / baseline variants picked for the CPU at load time.
// fp32 and bf16 tensors (bf16 is computed in fp32 and rounded once, as libtorch rounds); any other
// dtype or a non-CPU device falls back to the libtorch sequence the kernel replaces (the reference
// the tests compare with, and what `model.fused_kernels: false` runs).
#pragma once

#include <ATen/core/Tensor.h>

namespace deepshard::kernels {

// True when the fused kernels handle `t` (a CPU tensor of fp32 or bf16).
bool fused_supported(const at::Tensor& t);

// GPT-2's GELU with the tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// Reference: torch::gelu(x, "tanh").
at::Tensor gelu_tanh(const at::Tensor& x);

// softmax(scale · scores + causal mask) over the last dimension of scores [..., T, T] (query i sees
// keys 0..i). Reference: torch::softmax(scores * scale + triu(-inf, 1), -1).
at::Tensor causal_softmax(const at::Tensor& scores, double scale);

// Layer norm over the last dimension with affine weight and bias [C] (statistics in fp32).
// Reference: torch::layer_norm(x, {C}, weight, bias, eps).
at::Tensor layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                      double eps);

// Mean cross-entropy of logits [N, V] (fp32 or bf16) against int64 targets [N], computed in fp32.
// Reference: cross_entropy(logits.to(kFloat), targets).
at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& targets);

}  // namespace deepshard::kernels
