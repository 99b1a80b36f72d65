// The one dtype contract between a model and the config (DeepSpeed's: under bf16.enabled or
// fp16.enabled the engine casts the module, module.bfloat16() / module.half()): the model's
// floating parameters and buffers are cast from fp32 to the config's dtype; a model already in
// that dtype is taken as it is; any other mismatch (a bf16 model under an fp32 config, an fp16
// model under bf16.enabled, ...) is a ConfigError naming the parameter and the keys. Never a
// silent run in another dtype than the config's. One exception, warned: libtorch 1.13 has no fp16
// CPU kernels (LayerNorm, matmul), so fp16.enabled with an fp32 model on the CPU keeps fp32
// compute and applies fp16's dynamic loss scaling only (docs/zero.md, "Mixed precision").
#pragma once

#include <torch/nn/module.h>

#include "deepshard/config/ds_config.h"

namespace deepshard::zero {

// The dtype the config asks the parameters to be in for `model` (see above).
at::ScalarType training_dtype(const config::DsConfig& config, torch::nn::Module& model);

// Casts `model` to training_dtype() or throws ConfigError. Parameters already partitioned under
// zero.Init (their storage released) must already be in that dtype. `warn`: log the CPU fp16
// warning (rank 0).
void apply_dtype_contract(torch::nn::Module& model, const config::DsConfig& config, bool warn);

}  // namespace deepshard::zero
