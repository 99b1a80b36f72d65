// The process's environment knobs, read once by the executable at start: the libraries read no
// environment variable (the rendezvous's and the launcher's aside). DEEPSHARD_LOG_LEVEL,
// DEEPSHARD_KERNEL_ISA (DEEPSHARD_ADAM_ISA, its older name, still accepted),
// DEEPSHARD_BF16_COMPUTE, DEEPSHARD_LINEAR, DEEPSHARD_SGEMM, DEEPSHARD_HEAP, the C library's own
// heap settings and OPENBLAS_CORETYPE (with the marker deepshard sets beside it when it chose the
// value).
#pragma once

#include <optional>
#include <string>

#include "kernels/bf16_compute.h"
#include "platform/blas_kernels.h"
#include "platform/cpu_info.h"
#include "platform/heap_policy.h"

namespace deepshard::cli {

struct ProcessOptions {
  std::optional<std::string> log_level;  // DEEPSHARD_LOG_LEVEL: debug, info, warn, error
  // DEEPSHARD_KERNEL_ISA: avx512, avx2, scalar (platform/kernel_isa.h); kernel_isa_variable names
  // the variable it came from (DEEPSHARD_ADAM_ISA is the older name of the same setting).
  std::optional<std::string> kernel_isa;
  std::string kernel_isa_variable;
  // DEEPSHARD_BF16_COMPUTE: auto, native, fp32 (kernels/bf16_compute.h); the default of `deepshard
  // train --bf16-compute`, so that a whole test suite can run on one path.
  std::optional<std::string> bf16_compute;
  std::optional<std::string> linear;  // DEEPSHARD_LINEAR: dnnl (default), torch
  std::optional<std::string> sgemm;   // DEEPSHARD_SGEMM: auto (default), onednn, openblas
  std::optional<std::string> heap;    // DEEPSHARD_HEAP: retain (default), system
  // The variable by which the user chose a heap policy already (MALLOC_MMAP_THRESHOLD_,
  // MALLOC_TRIM_THRESHOLD_, MALLOC_TOP_PAD_, a glibc.malloc GLIBC_TUNABLES entry), or "".
  std::string users_heap_setting;
  platform::BlasEnvironment blas;  // OPENBLAS_CORETYPE, DEEPSHARD_OPENBLAS_CORETYPE_AUTO

  platform::HeapRequest heap_request() const {
    return {heap ? heap->c_str() : nullptr, users_heap_setting};
  }
};

// The environment's knobs, read on the first call (empty values count as unset).
const ProcessOptions& process_options();

// Hands the log level, the kernels' instruction-set level, the Linear layers' and sgemm's backends,
// the BLAS environment and the user's own heap settings (stage 3's malloc thresholds leave them
// alone) to their layers (the heap policy and the bf16 compute are `deepshard train`'s). A bad
// value throws UsageError naming the variable and what it takes.
void apply_process_options(const ProcessOptions& options);

// How bf16 models multiply without a --bf16-compute flag: DEEPSHARD_BF16_COMPUTE, else auto
// (kernels/bf16_compute.h), as `deepshard doctor` reports it and `import deepshard` applies it.
kernels::Bf16ComputeChoice bf16_compute_from_environment(const ProcessOptions& options,
                                                         const platform::CpuInfo& cpu);

}  // namespace deepshard::cli
