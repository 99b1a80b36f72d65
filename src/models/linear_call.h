// Applies a Linear module through kernels::linear (oneDNN's sgemm for fp32; same parameters, same
// math) or, with fused = false, through the module itself. Used by the GPT and Llama blocks.
#pragma once

#include <torch/nn/modules/linear.h>

#include "kernels/linear.h"

namespace deepshard::models {

inline at::Tensor apply_linear(torch::nn::Linear& linear, const at::Tensor& x, bool fused) {
  return fused ? kernels::linear(x, linear->weight, linear->bias) : linear(x);
}

}  // namespace deepshard::models
