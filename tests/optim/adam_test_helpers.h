// Shared by the Adam tests: the AdamW config they use and the relative max-norm difference.
#pragma once

#include <ATen/ATen.h>

#include "deepshard/config/ds_config.h"

namespace deepshard::optim::test {

inline config::OptimizerConfig adamw_config() {
  config::OptimizerConfig c;
  c.type = "AdamW";
  c.lr = 1e-3;
  c.betas = {0.9, 0.95};
  c.eps = 1e-8;
  c.weight_decay = 0.1;
  return c;
}

// Relative difference of two tensors in the max norm, computed in double.
inline double rel_diff(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor a64 = a.to(at::kDouble), b64 = b.to(at::kDouble);
  return (a64 - b64).abs().max().item<double>() / b64.abs().max().item<double>();
}

}  // namespace deepshard::optim::test
