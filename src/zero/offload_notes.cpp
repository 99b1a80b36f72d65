// log_offload_notes (offload_notes.h).
#include "zero/offload_notes.h"

#include "util/log.h"

namespace deepshard::zero {

void log_offload_notes(const config::DsConfig& config, const c10::Device& compute, int rank) {
  if (rank != 0) return;
  const auto& opt = config.zero.offload_optimizer;
  const auto& param = config.zero.offload_param;
  const bool params_offloaded = param.enabled() && config.zero.stage == 3;
  if (!opt.enabled() && !params_offloaded) return;
  if (compute.is_cpu()) {
    if (opt.device == config::OffloadDevice::kCpu)
      log::info(
          "zero_optimization.offload_optimizer.device cpu: the compute device is the CPU, "
          "so gradients, fp32 master and Adam state are already in host memory: no copies "
          "between devices");
    if (opt.device == config::OffloadDevice::kNvme)
      log::info(
          "zero_optimization.offload_optimizer.device nvme: the compute device is the CPU, "
          "so gradients are already in host memory (no copies between devices); Adam state "
          "is swapped through host buffers");
    if (params_offloaded && param.device == config::OffloadDevice::kCpu)
      log::info(
          "zero_optimization.offload_param.device cpu: the compute device is the CPU, so "
          "parameter partitions are already in host memory: no copies between devices");
    if ((opt.device == config::OffloadDevice::kCpu && opt.pin_memory) ||
        (params_offloaded && param.device == config::OffloadDevice::kCpu && param.pin_memory))
      log::info(
          "zero_optimization.offload_*.pin_memory: no effect with a CPU compute device "
          "(nothing is copied to a device)");
  } else {
    log::info("offload: compute device ", compute.str(),
              ", offload device cpu: gradients are copied to host memory bucket by bucket");
  }
  if (opt.enabled() && opt.fast_init)
    log::info(
        "zero_optimization.offload_optimizer.fast_init: no effect: the optimizer state is "
        "always initialised directly (zeros, and the parameters' values), without an "
        "optimizer step");
  if (opt.device == config::OffloadDevice::kCpu && (opt.pipeline_read || opt.pipeline_write))
    log::info(
        "zero_optimization.offload_optimizer.pipeline_read/pipeline_write: no effect with "
        "device cpu (nothing is swapped)");
}

}  // namespace deepshard::zero
