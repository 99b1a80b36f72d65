// What the CPU this process runs on supports: model name, the vector ISA extensions that matter for
// deepshard's kernels and BLAS choice (cpuid, checked against what the OS enables), usable cores.
#pragma once

#include <string>

namespace deepshard::platform {

struct CpuInfo {
  std::string model_name;  // /proc/cpuinfo "model name" ("" if unknown)
  bool avx2 = false;       // with FMA
  bool avx512 = false;     // AVX-512 F + BW + DQ + VL (the Skylake-X set OpenBLAS's kernels use)
  bool avx512_bf16 = false;
  bool amx_bf16 = false;
  int cores = 1;  // usable by this process (affinity mask)

  std::string isa() const;  // e.g. "avx2 fma avx512f/bw/dq/vl avx512_bf16"
};

CpuInfo detect_cpu();

}  // namespace deepshard::platform
