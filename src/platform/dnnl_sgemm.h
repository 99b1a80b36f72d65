// oneDNN's fp32 GEMM (dnnl_sgemm), one of the two backends of the fused kernels' GEMM (sgemm.h).
// Built in when CMake finds oneDNN's headers (Debian libdnnl-dev; DS_HAVE_DNNL), else everything
// here reports "not built". Like OpenBLAS's kernels (blas_kernels.h), dnnl_sgemm is checked
// against a double-precision reference once per process before it is used.
#pragma once

#include <cstdint>
#include <string>

namespace deepshard::platform {

// True when deepshard was built with oneDNN (DS_HAVE_DNNL).
bool dnnl_sgemm_built();

// dnnl_sgemm on the shapes of blas_numerically_correct against a double reference. False (with
// `detail` saying which case) on a wrong result, a oneDNN error, or without oneDNN.
bool dnnl_sgemm_numerically_correct(std::string* detail);

// Whether dnnl_sgemm can be used: built with it and the numeric check passed (run once on the
// first call, thread-safe).
bool dnnl_sgemm_usable();

// The oneDNN version and whether its sgemm passed the check, or why not.
std::string dnnl_sgemm_status();

// "oneDNN 2.6.3" ("" without oneDNN).
std::string dnnl_version_string();

// Whether oneDNN's kernels run at AVX-512 or above in this process (the CPU has it and
// ONEDNN_MAX_CPU_ISA does not cap it); false without oneDNN.
bool dnnl_runs_avx512();

// Row-major C = alpha op(A) op(B) + beta C (A m×k, B k×n after the transpositions) through
// dnnl_sgemm, on the calling thread's OpenMP thread count. Only when dnnl_sgemm_usable(); throws
// Error if oneDNN reports a failure.
void dnnl_sgemm_row_major(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                          const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                          float* c, int64_t ldc);

}  // namespace deepshard::platform
