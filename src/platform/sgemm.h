// The fp32 GEMM the fused kernels run on (the Linear layers, the blocked causal attention):
// oneDNN's dnnl_sgemm (dnnl_sgemm.h) or the sgemm_ of the OpenBLAS libtorch loads
// (blas_kernels.h), one backend per process. `auto` picks oneDNN where its kernels run at AVX-512
// and OpenBLAS below it (a CPU with AVX2 only, or oneDNN capped by ONEDNN_MAX_CPU_ISA) unless
// OpenBLAS runs a generic core: one thread, the GPT's Linear shapes, OpenBLAS's Haswell sgemm
// measured 1.27x oneDNN's AVX2 one (oneDNN's dW products of the MLP at half speed), and oneDNN's
// AVX-512 one 1.09x OpenBLAS's AVX-512 core (docs/performance.md). The chosen backend is checked
// against a double-precision reference before its first use; a backend that fails falls back to
// the other, and with neither the kernels keep libtorch's matmul. The choice depends only on the
// CPU and the environment, so every rank of a job on one kind of machine makes the same one.
#pragma once

#include <cstdint>
#include <string>

namespace deepshard::platform {

enum class SgemmBackend { kOneDnn, kOpenBlas };

// The executable's DEEPSHARD_SGEMM: "auto" (the default), "onednn" or "openblas". Throws
// UsageError on another value. Call before the first sgemm_usable(), which decides once.
void set_sgemm_setting(const std::string& setting);
// Keeps libtorch's matmul for the Linear layers (the executable's DEEPSHARD_LINEAR=torch): then
// sgemm_usable() is false. Call before the first sgemm_usable().
void keep_torch_linear();

// Whether the fused kernels have a verified fp32 GEMM in this process (decided once, thread-safe;
// a backend refused by its check is logged once as an info line).
bool sgemm_usable();
// The backend sgemm_row_major runs on; only meaningful when sgemm_usable().
SgemmBackend sgemm_backend();
// One line for `deepshard doctor` and the Python module: the backend, why, and its check.
std::string sgemm_status();

// Row-major C = alpha op(A) op(B) + beta C (A m×k, B k×n after the transpositions) on the chosen
// backend. Only when sgemm_usable(); throws Error if the backend reports a failure.
void sgemm_row_major(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                     const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                     int64_t ldc);

// OpenBLAS's own thread count (openblas_get_num_threads), 0 without OpenBLAS; the setter is a no-op
// without it. The kernels keep it at torch's intra-op thread count, and at 1 inside their own
// parallel loops.
int openblas_threads();
void set_openblas_threads(int threads);

}  // namespace deepshard::platform
