// Where libtorch's own bf16 products run when deepshard's kernels are forced to a lower
// instruction-set level (platform/kernel_isa.h). libtorch 1.13 sends bf16 matmuls to oneDNN only on
// a CPU with AVX-512 BW/VL/DQ; on any other CPU its generic bf16 GEMM runs (about 19x slower than
// fp32, and accumulating two of a Linear layer's three products in bf16: bf16_compute.h). A
// process forced below avx512 on an AVX-512 CPU does the same, so that the forced path is the one
// such a CPU runs: with ONEDNN_MAX_CPU_ISA=AVX2 (scripts/isa_env.sh) oneDNN has no bf16 matmul
// and libtorch's bf16 products would throw instead. fp32 products are not affected (libtorch
// runs them on the BLAS).
#pragma once

namespace deepshard::kernels {

// Turns libtorch's oneDNN use off (at::Context::setUserEnabledMkldnn(false)) when the kernel ISA
// is forced below avx512; otherwise leaves libtorch as it is. Call once at start, after the level
// is forced and before anything runs a model.
void follow_forced_kernel_isa_in_libtorch();

// Whether libtorch may send bf16 products to oneDNN in this process (false after the above
// turned it off, or when the user did).
bool libtorch_onednn_enabled();

}  // namespace deepshard::kernels
