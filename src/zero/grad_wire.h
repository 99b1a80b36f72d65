// The gradient reduction every engine runs, from the DeepSpeed config: communication_data_type
// (absent: DeepSpeed's default, fp16 when fp16 is enabled, bf16 when bf16 is, fp32 otherwise),
// gradient_predivide_factor and prescale_gradients (see comm/grad_reduction.h).
#pragma once

#include <memory>

#include "comm/grad_reduction.h"
#include "deepshard/config/ds_config.h"

namespace deepshard::zero {

comm::GradReductionOptions grad_reduction_options(const config::DsConfig& config);

inline std::unique_ptr<comm::GradReduction> make_grad_reduction(comm::Group& group,
                                                                const config::DsConfig& config) {
  return std::make_unique<comm::GradReduction>(group, grad_reduction_options(config));
}

}  // namespace deepshard::zero
