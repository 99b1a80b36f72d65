// The model's Linear layers (y = x Wᵀ + b) on the fused kernels' fp32 GEMM (platform/sgemm.h:
// oneDNN's or OpenBLAS's sgemm, chosen per process): an autograd function whose forward and
// backward (dX = dY W, dW = dYᵀ X, db = sum of dY over the rows) are one sgemm each, with nothing
// of libtorch's dispatch between them. Contiguous fp32 CPU tensors only; anything else (another
// device, strided views, empty inputs, no verified sgemm) falls back to torch::linear, which is
// also what `model.fused_kernels: false` runs. The sgemm runs on torch's intra-op thread count
// (gemm_threads.h). bf16 operands take it too when bf16 models compute in fp32 (bf16_compute.h):
// each product reads fp32 copies of its bf16 operands (converted on the fly; the tensors kept for
// backward stay bf16) and rounds its result to bf16 once; without a verified sgemm, libtorch's
// fp32 matmul on fp32 copies. The backward is not itself differentiable (no double backward).
#pragma once

#include <ATen/core/Tensor.h>

namespace deepshard::kernels {

// True when linear(x, weight, bias) runs on the fused sgemm for these tensors (bias may be
// undefined): fp32, or bf16 computed in fp32.
bool fused_linear_supported(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// x [..., in], weight [out, in], bias [out] or undefined -> [..., out].
// Reference: torch::linear(x, weight, bias).
at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias = {});

}  // namespace deepshard::kernels
