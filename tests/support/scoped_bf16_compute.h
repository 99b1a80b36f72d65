// Sets the process-wide bf16 compute (kernels/bf16_compute.h) for one test and restores the test
// binary's after it (native, or the one DEEPSHARD_BF16_COMPUTE forced: forced_kernel_paths.h), for
// tests written for one of the two paths.
#pragma once

#include "kernels/bf16_compute.h"

namespace deepshard::testing {

class ScopedBf16Compute {
 public:
  explicit ScopedBf16Compute(kernels::Bf16Compute compute)
      : previous_(kernels::bf16_compute_choice()) {
    kernels::set_bf16_compute({compute, "set by the test"});
  }
  ~ScopedBf16Compute() { kernels::set_bf16_compute(previous_); }
  ScopedBf16Compute(const ScopedBf16Compute&) = delete;
  ScopedBf16Compute& operator=(const ScopedBf16Compute&) = delete;

 private:
  kernels::Bf16ComputeChoice previous_;
};

}  // namespace deepshard::testing
