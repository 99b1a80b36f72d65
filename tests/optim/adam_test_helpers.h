// Shared by the Adam tests: the AdamW config they use, the relative max-norm difference, and a
// scoped force_adam_isa that forces one kernel variant.
#pragma once

#include <ATen/ATen.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "deepshard/config/ds_config.h"
#include "deepshard/optim/adam.h"

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

// Every variant this CPU can run.
inline std::vector<AdamIsa> supported_isas() {
  std::vector<AdamIsa> isas;
  for (AdamIsa isa : {AdamIsa::kScalar, AdamIsa::kAvx2, AdamIsa::kAvx512}) {
    if (adam_isa_supported(isa)) isas.push_back(isa);
  }
  return isas;
}

// Forces an Adam variant for its lifetime (force_adam_isa; nullopt: the best supported one),
// restoring the previous choice.
class ScopedAdamIsa {
 public:
  explicit ScopedAdamIsa(std::optional<AdamIsa> isa) : previous_(forced_adam_isa()) {
    force_adam_isa(isa);
  }
  ~ScopedAdamIsa() { force_adam_isa(previous_); }
  ScopedAdamIsa(const ScopedAdamIsa&) = delete;
  ScopedAdamIsa& operator=(const ScopedAdamIsa&) = delete;

 private:
  std::optional<AdamIsa> previous_;
};

}  // namespace deepshard::optim::test
