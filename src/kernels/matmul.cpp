// The models' attention products (matmul.h).
#include "kernels/matmul.h"

#include <torch/torch.h>

#include "kernels/bf16_compute.h"

namespace deepshard::kernels {

at::Tensor matmul(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() == at::kBFloat16 && b.scalar_type() == at::kBFloat16 &&
      bf16_compute() == Bf16Compute::kFp32) {
    return torch::matmul(a.to(at::kFloat), b.to(at::kFloat)).to(at::kBFloat16);
  }
  return torch::matmul(a, b);
}

}  // namespace deepshard::kernels
