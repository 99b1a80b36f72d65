// oneDNN's fp32 GEMM (dnnl_sgemm), which kernels::linear runs the model's Linear layers on: on
// AVX2 CPUs it is about 2x OpenBLAS's Haswell sgemm for the GPT's shapes (docs/performance.md).
// Built in when CMake finds oneDNN's headers (Debian libdnnl-dev; DS_HAVE_DNNL), else everything
// here reports "not built" and callers keep libtorch's matmul. Like OpenBLAS's kernels
// (blas_kernels.h), dnnl_sgemm is checked against a double-precision reference once per process
// before it is used; a failed check refuses it with one info line.
#pragma once

#include <cstdint>
#include <string>

namespace deepshard::platform {

// True when deepshard was built with oneDNN (DS_HAVE_DNNL).
bool dnnl_sgemm_built();

// dnnl_sgemm on the shapes of blas_numerically_correct against a double reference. False (with
// `detail` saying which case) on a wrong result, a oneDNN error, or without oneDNN.
bool dnnl_sgemm_numerically_correct(std::string* detail);

// Keeps libtorch's matmul for the Linear layers (for before/after measurements; the executable's
// DEEPSHARD_LINEAR=torch). Call before the first dnnl_sgemm_usable(), which decides once.
void keep_torch_linear();
// Whether this process uses dnnl_sgemm: built with it, not switched off by keep_torch_linear(), and
// the numeric check passed (run once on the first call, thread-safe). A refusal is logged once as
// an info line.
bool dnnl_sgemm_usable();

// One line for `deepshard doctor`: the oneDNN version and whether its sgemm is used, or why not.
std::string dnnl_sgemm_status();

// Row-major C = alpha op(A) op(B) + beta C (A m×k, B k×n after the transpositions) through
// dnnl_sgemm, on the calling thread's OpenMP thread count. Only when dnnl_sgemm_usable(); throws
// Error if oneDNN reports a failure.
void dnnl_sgemm_row_major(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                          const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                          float* c, int64_t ldc);

}  // namespace deepshard::platform
