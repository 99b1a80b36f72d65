// Implementation of the dtype contract (see dtype_contract.h).
#include "zero/dtype_contract.h"

#include <torch/torch.h>

#include "deepshard/util/error.h"
#include "util/log.h"

namespace deepshard::zero {
namespace {

const char* keys_for(at::ScalarType type) {
  switch (type) {
    case at::kBFloat16:
      return "bf16.enabled";
    case at::kHalf:
      return "fp16.enabled";
    default:
      return "neither bf16.enabled nor fp16.enabled";
  }
}

bool released(const at::Tensor& t) {
  return t.numel() > 0 && (!t.has_storage() || t.storage().nbytes() == 0);
}

}  // namespace

at::ScalarType training_dtype(const config::DsConfig& config, torch::nn::Module& model) {
  if (config.bf16.enabled) return at::kBFloat16;
  if (!config.fp16.enabled) return at::kFloat;
  for (const auto& p : model.parameters()) {
    if (p.device().is_cpu() && p.scalar_type() == at::kFloat) return at::kFloat;  // see header
    break;
  }
  return at::kHalf;
}

void apply_dtype_contract(torch::nn::Module& model, const config::DsConfig& config, bool warn) {
  const at::ScalarType want = training_dtype(config, model);
  if (config.fp16.enabled && want == at::kFloat && warn) {
    log::warn("fp16.enabled on CPU: libtorch 1.13 has no fp16 CPU kernels; the model computes ",
              "in fp32 with fp16's dynamic loss scaling");
  }
  const char* keys = config.fp16.enabled && want == at::kFloat ? "fp16.enabled (on CPU: fp32)"
                                                               : keys_for(want);
  torch::NoGradGuard no_grad;
  // Trainable parameters: fp32 (cast) or already `want`. Under mixed precision frozen parameters
  // and floating buffers are cast too (module.bfloat16() casts every floating tensor); an fp32
  // run leaves them alone.
  for (auto& item : model.named_parameters(/*recurse=*/true)) {
    at::Tensor& t = item.value();
    if (!at::isFloatingType(t.scalar_type()) || t.scalar_type() == want) continue;
    DS_CHECK(!t.requires_grad() || t.scalar_type() == at::kFloat, ConfigError, "parameter ",
             item.key(), " is ", t.scalar_type(), " but the config has ", keys, " (", want,
             "); give an fp32 model (the engine casts it) or one in ", want);
    if (want == at::kFloat) continue;
    DS_CHECK(!released(t), ConfigError, "parameter ", item.key(), " was partitioned under ",
             "zero.Init in ", t.scalar_type(), " but the config has ", keys,
             ": build it with zero::PartitionedBuild(group, ", want, ")");
    t.set_data(t.to(want));
  }
  if (want == at::kFloat) return;
  for (auto& item : model.named_buffers(/*recurse=*/true)) {
    at::Tensor& t = item.value();
    if (t.defined() && at::isFloatingType(t.scalar_type()) && t.scalar_type() != want)
      t.set_data(t.to(want));
  }
}

}  // namespace deepshard::zero
