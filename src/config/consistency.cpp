// DeepSpeed's checks that span several keys (its assertions and validators in config.py,
// zero/config.py, stage_1_and_2.py, activation_checkpointing), kept with DeepSpeed's texts where
// it has one. Runs on the parsed config, after every section.
#include <algorithm>

#include "config/sections.h"

namespace deepshard::config::detail {

namespace {

bool has_feature(const DsConfig& c, const char* key) {
  return std::find(c.other_features.begin(), c.other_features.end(), key) != c.other_features.end();
}

void check_offload(const OffloadConfig& o, const std::string& path, Diagnostics& diag) {
  if (o.device == OffloadDevice::kNvme && o.nvme_path.empty()) {
    diag.error(path + ".nvme_path", "required when device is \"nvme\"");
  }
}

}  // namespace

void check_consistency(const DsConfig& c, Diagnostics& diag) {
  const int stage = c.zero.stage;
  if (c.fp16.enabled && c.bf16.enabled) {
    diag.error("bf16.enabled", "bfloat16 and fp16 modes cannot be simultaneously enabled");
  }
  if (c.fp16.fp16_master_weights_and_grads && stage == 0) {
    diag.error("fp16.fp16_master_weights_and_grads",
               "Fp16_master_weights_and_grads is only supported with ZeRO Stage 1, 2, or 3.");
  }
  if (c.bf16.bf16_master_weights_and_grads && stage == 0) {
    diag.error("bf16.bf16_master_weights_and_grads",
               "Bf16_master_weights_and_grads is only supported with ZeRO Stage 1, 2, or 3.");
  }
  if (c.bf16.bf16_optimizer_states) {
    if (stage == 0) {
      diag.error("bf16.bf16_optimizer_states",
                 "bf16_optimizer_states is only supported with ZeRO Stage 1, 2, or 3.");
    }
    if (!c.bf16.bf16_master_weights_and_grads) {
      diag.error("bf16.bf16_optimizer_states",
                 "bf16_optimizer_states requires bf16_master_weights_and_grads to be enabled.");
    }
  }

  check_offload(c.zero.offload_param, "zero_optimization.offload_param", diag);
  check_offload(c.zero.offload_optimizer, "zero_optimization.offload_optimizer", diag);
  if (c.zero.offload_optimizer.ratio < 1.0 && stage != 3) {
    diag.error("zero_optimization.offload_optimizer.ratio",
               "Partial offloading only supported for ZeRO Stage 3.");
  }
  if (c.zero.offload_param.enabled() && stage != 3) {
    diag.warn("zero_optimization.offload_param",
              "only used by ZeRO stage 3; ignored at stage " + std::to_string(stage));
  }

  // DeepSpeed asserts these in its stage 1/2 optimizer and at stage 3 (reduce_scatter is true).
  if ((c.zero.reduce_scatter && stage >= 1) || stage == 3) {
    if (c.gradient_predivide_factor != 1.0) {
      diag.error("gradient_predivide_factor",
                 "gradient_predivide_factor != 1.0 is not yet supported with ZeRO-" +
                     std::to_string(stage) + " with reduce scatter enabled");
    }
    if (c.prescale_gradients) {
      diag.error("prescale_gradients", "pre-scale gradients is not yet supported with ZeRO-" +
                                           std::to_string(stage) + " with reduce scatter enabled");
    }
  }
  if (c.gradient_allreduce_op == "sum" && stage == 3) {
    diag.error("gradient_allreduce_op",
               "gradient_allreduce_op='sum' is not supported with ZeRO stage 3");
  }
  if (has_feature(c, "amp") && stage > 0) {
    diag.error("amp",
               "Amp and ZeRO are not currently compatible, please use (legacy) fp16 mode "
               "which performs similar to amp opt_mode=O2");
  }

  // PowerSGD compresses an all-reduce of the whole fp32 gradient (comm/powersgd.h): stages 2 and 3
  // reduce-scatter it, and the wire knobs would be silently bypassed.
  if (c.compression.enabled()) {
    if (stage >= 2) {
      diag.error("compression",
                 "PowerSGD compresses the all-reduce of the whole gradient: "
                 "ZeRO stages 0 and 1 only, not stage " +
                     std::to_string(stage) + " (which reduce-scatters it)");
    }
    if (c.communication_data_type && *c.communication_data_type != DType::kFp32) {
      diag.error("communication_data_type",
                 "PowerSGD (compression) all-reduces fp32 P and Q matrices; set \"fp32\" or "
                 "leave it out");
    }
    if (c.gradient_predivide_factor != 1.0 || c.prescale_gradients) {
      diag.error(c.prescale_gradients ? "prescale_gradients" : "gradient_predivide_factor",
                 "not supported together with compression (PowerSGD averages itself)");
    }
  }

  const ActivationCheckpointingConfig& ac = c.activation_checkpointing;
  if (ac.contiguous_memory_optimization && !ac.partition_activations) {
    diag.error("activation_checkpointing.contiguous_memory_optimization",
               "requires partition_activations");
  }
  // DeepSpeed also asserts number_checkpoints here; deepshard's trainer sizes the contiguous buffer
  // from the model's layer count when it is absent (train/activation_tracker.cpp).
}

}  // namespace deepshard::config::detail
