// The kernel paths of a test process, forced from the environment as the deepshard executable
// forces them (src/cli/process_options.cpp): DEEPSHARD_KERNEL_ISA=avx512|avx2|scalar (the
// instruction-set level of deepshard's kernels, platform/kernel_isa.h) and
// DEEPSHARD_BF16_COMPUTE=auto|native|fp32 (how bf16 models multiply, kernels/bf16_compute.h). Read
// once by the main of every test binary that uses libtorch (test_main.cpp) and of every multi-rank
// test worker (workers/worker_main.cpp), so that the whole suite runs on one path
// (`scripts/test.sh --isa avx2`).
#pragma once

#include <string>

namespace deepshard::testing {

// Forces what the environment asks. Returns a line saying what was forced ("" for nothing);
// throws UsageError naming the variable when its value is not a path or the CPU cannot run it.
std::string apply_forced_kernel_paths();

}  // namespace deepshard::testing
