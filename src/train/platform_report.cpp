// summary.json's "platform" section (platform_report.h).
#include "train/platform_report.h"

#include <ATen/Parallel.h>

#include "kernels/bf16_compute.h"
#include "platform/blas_kernels.h"
#include "platform/cpu_info.h"
#include "platform/heap_policy.h"
#include "platform/kernel_isa.h"
#include "train/matmul_peak.h"

namespace deepshard::train {

nlohmann::json platform_json() {
  const auto cpu = platform::detect_cpu();
  const auto blas = platform::current_blas_choice();
  return {{"cpu", cpu.model_name},
          {"isa", cpu.isa()},
          {"openblas_core", blas.detected_core},
          {"openblas_coretype", blas.env_coretype},
          {"blas", blas.reason},
          {"intra_op_threads", at::get_num_threads()},
          {"onednn", onednn_version()},
          {"heap", platform::heap_policy_status()},
          {"kernel_isa", platform::to_string(platform::kernel_isa())},
          {"kernel_isa_status", platform::kernel_isa_status()},
          {"bf16_compute", kernels::to_string(kernels::bf16_compute_choice().compute)},
          {"bf16_compute_reason", kernels::bf16_compute_choice().reason}};
}

}  // namespace deepshard::train
