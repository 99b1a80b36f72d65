// Implementation of grad_wire.h: DeepSpeed's communication_data_type default and mapping.
#include "zero/grad_wire.h"

namespace deepshard::zero {
namespace {

at::ScalarType scalar_type(config::DType d) {
  switch (d) {
    case config::DType::kFp16:
      return at::kHalf;
    case config::DType::kBf16:
      return at::kBFloat16;
    case config::DType::kFp32:
      return at::kFloat;
  }
  return at::kFloat;
}

}  // namespace

comm::GradReductionOptions grad_reduction_options(const config::DsConfig& config) {
  comm::GradReductionOptions options;
  if (config.communication_data_type) {
    options.wire_dtype = scalar_type(*config.communication_data_type);
  } else if (config.fp16.enabled) {
    options.wire_dtype = at::kHalf;
  } else if (config.bf16.enabled) {
    options.wire_dtype = at::kBFloat16;
  }
  options.predivide_factor = config.gradient_predivide_factor;
  options.prescale = config.prescale_gradients;
  return options;
}

}  // namespace deepshard::zero
