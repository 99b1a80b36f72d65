// torch::matmul for the models' attention products (q kᵀ, P v), except that bf16 operands are
// multiplied in fp32 when bf16 models compute in fp32 (bf16_compute.h): fp32 copies of both
// operands (which autograd keeps for backward), one fp32 product, the result rounded to bf16 once.
// Every other case is torch::matmul itself.
#pragma once

#include <ATen/core/Tensor.h>

namespace deepshard::kernels {

at::Tensor matmul(const at::Tensor& a, const at::Tensor& b);

}  // namespace deepshard::kernels
