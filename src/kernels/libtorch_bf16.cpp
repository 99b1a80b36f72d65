// libtorch's oneDNN use under a forced kernel ISA level (kernels/libtorch_bf16.h).
#include "kernels/libtorch_bf16.h"

#include <ATen/Context.h>

#include "platform/kernel_isa.h"

namespace deepshard::kernels {

void follow_forced_kernel_isa_in_libtorch() {
  const auto forced = platform::forced_kernel_isa();
  if (forced && *forced != platform::KernelIsa::kAvx512) {
    at::globalContext().setUserEnabledMkldnn(false);
  }
}

bool libtorch_onednn_enabled() { return at::globalContext().userEnabledMkldnn(); }

}  // namespace deepshard::kernels
