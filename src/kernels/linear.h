// The model's Linear layers (y = x Wᵀ + b) on oneDNN's sgemm (platform/dnnl_sgemm.h) for fp32:
// an autograd function whose forward and backward (dX = dY W, dW = dYᵀ X, db = sum of dY over the
// rows) are one dnnl_sgemm each. oneDNN's AVX2 sgemm is about 2x OpenBLAS's on this CPU for the
// GPT's shapes. Contiguous fp32 CPU tensors only; anything else (bf16, another device, strided
// views, empty inputs, a build without oneDNN, or a oneDNN that failed its numeric check) falls
// back to torch::linear, which is also what `model.fused_kernels: false` runs. The sgemm runs on
// torch's intra-op thread count (at::get_num_threads; Debian's oneDNN and libtorch share libgomp).
// bf16 operands take it too when bf16 models compute in fp32 (bf16_compute.h): each product reads
// fp32 copies of its bf16 operands (converted on the fly; the tensors kept for backward stay bf16)
// and rounds its result to bf16 once; without a usable oneDNN sgemm, libtorch's fp32 matmul on
// fp32 copies. The backward is not itself differentiable (no double backward).
#pragma once

#include <ATen/core/Tensor.h>

namespace deepshard::kernels {

// True when linear(x, weight, bias) runs on dnnl_sgemm for these tensors (bias may be undefined):
// fp32, or bf16 computed in fp32.
bool dnnl_linear_supported(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// x [..., in], weight [out, in], bias [out] or undefined -> [..., out].
// Reference: torch::linear(x, weight, bias).
at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias = {});

}  // namespace deepshard::kernels
