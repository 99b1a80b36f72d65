// Applies a GPT LayerNorm module through the fused kernel (kernels::layer_norm: same parameters,
// same math) or, with fused = false, through the module itself. Defined in gpt_blocks.cpp.
#pragma once

#include <torch/nn/modules/normalization.h>

namespace deepshard::models {

at::Tensor apply_layer_norm(torch::nn::LayerNorm& ln, const at::Tensor& x, bool fused);

}  // namespace deepshard::models
