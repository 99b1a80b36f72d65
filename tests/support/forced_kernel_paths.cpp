// DEEPSHARD_KERNEL_ISA and DEEPSHARD_BF16_COMPUTE for test processes (forced_kernel_paths.h).
#include "support/forced_kernel_paths.h"

#include <cstdlib>

#include "kernels/bf16_compute.h"
#include "kernels/libtorch_bf16.h"
#include "platform/cpu_info.h"
#include "platform/kernel_isa.h"

namespace deepshard::testing {
namespace {

const char* env_or_null(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

}  // namespace

std::string apply_forced_kernel_paths() {
  std::string forced;
  if (const char* isa = env_or_null("DEEPSHARD_KERNEL_ISA")) {
    platform::force_kernel_isa_setting("DEEPSHARD_KERNEL_ISA", isa);
    kernels::follow_forced_kernel_isa_in_libtorch();
    forced += std::string("kernels: ") + platform::kernel_isa_status();
    if (!kernels::libtorch_onednn_enabled()) forced += ", libtorch's bf16 products without oneDNN";
  }
  if (const char* compute = env_or_null("DEEPSHARD_BF16_COMPUTE")) {
    const kernels::Bf16ComputeChoice choice =
        kernels::choose_bf16_compute(compute, platform::detect_cpu(), "DEEPSHARD_BF16_COMPUTE");
    kernels::set_bf16_compute(choice);
    if (!forced.empty()) forced += "; ";
    forced += std::string("bf16 compute: ") + kernels::to_string(choice.compute) + " (" +
              choice.reason + ")";
  }
  return forced;
}

}  // namespace deepshard::testing
