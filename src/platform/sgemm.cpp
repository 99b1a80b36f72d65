// The fused kernels' fp32 GEMM and its backend choice (sgemm.h).
#include "platform/sgemm.h"

#include <dlfcn.h>

#include <atomic>
#include <climits>

#include "deepshard/util/error.h"
#include "platform/blas_kernels.h"
#include "platform/dnnl_sgemm.h"
#include "util/log.h"

namespace deepshard::platform {
namespace {

// OpenBLAS's thread controls.
using GetThreadsFn = int (*)();
using SetThreadsFn = void (*)(int);

std::string g_setting = "auto";  // written before the decision, read once by it
std::atomic<bool> g_torch_linear{false};

struct BackendChoice {
  bool usable = false;
  SgemmBackend backend = SgemmBackend::kOneDnn;
  std::string status;
};

std::string openblas_candidate(std::string* why_not) {
  const std::string core = openblas_corename();
  if (core.empty()) {
    *why_not = "no OpenBLAS in this process";
    return {};
  }
  if (is_generic_openblas_core(core)) {
    *why_not = "OpenBLAS runs its generic core " + core;
    return {};
  }
  return core;
}

// Whether `backend` passes its numeric check (`why` says why not).
bool verified(SgemmBackend backend, std::string* why) {
  if (backend == SgemmBackend::kOneDnn)
    return dnnl_sgemm_usable() || (*why = dnnl_sgemm_status(), false);
  std::string core_why;
  if (openblas_candidate(&core_why).empty()) {
    *why = core_why;
    return false;
  }
  return blas_numerically_correct(why);
}

const char* name_of(SgemmBackend backend) {
  return backend == SgemmBackend::kOneDnn ? "oneDNN's sgemm" : "OpenBLAS's sgemm";
}

BackendChoice choose_backend() {
  BackendChoice d;
  if (g_torch_linear.load()) {
    d.status = "DEEPSHARD_LINEAR=torch: Linear layers use libtorch's matmul";
    return d;
  }
  std::string reason;
  if (g_setting == "onednn" || g_setting == "openblas") {
    d.backend = g_setting == "onednn" ? SgemmBackend::kOneDnn : SgemmBackend::kOpenBlas;
    reason = "DEEPSHARD_SGEMM=" + g_setting;
  } else if (dnnl_sgemm_built() && dnnl_runs_avx512()) {
    reason = "oneDNN's kernels run at AVX-512";
  } else {
    std::string why_not;
    const std::string core = openblas_candidate(&why_not);
    if (core.empty()) {
      reason = why_not;
    } else {
      d.backend = SgemmBackend::kOpenBlas;
      reason = "oneDNN's kernels run below AVX-512, OpenBLAS's core " + core;
    }
  }
  std::string why;
  if (!verified(d.backend, &why)) {
    const SgemmBackend other =
        d.backend == SgemmBackend::kOneDnn ? SgemmBackend::kOpenBlas : SgemmBackend::kOneDnn;
    std::string other_why;
    const std::string refused = std::string(name_of(d.backend)) + " refused (" + why + ")";
    if (!verified(other, &other_why)) {
      d.status = refused + ", " + name_of(other) + " too (" + other_why +
                 "): Linear layers use libtorch's matmul";
      log::info(d.status);
      return d;
    }
    reason = refused;
    d.backend = other;
    log::info(reason + ": the fused kernels use " + name_of(other));
  }
  d.usable = true;
  d.status = detail::concat(name_of(d.backend), " for fp32 Linear layers and attention (", reason,
                            "), verified numerically; ",
                            dnnl_sgemm_built() ? dnnl_version_string() : "built without oneDNN");
  return d;
}

const BackendChoice& backend_choice() {
  static const BackendChoice d = choose_backend();
  return d;
}

}  // namespace

void set_sgemm_setting(const std::string& setting) {
  DS_CHECK(setting == "auto" || setting == "onednn" || setting == "openblas", UsageError,
           "DEEPSHARD_SGEMM=", setting, ": expected auto (the default), onednn or openblas");
  g_setting = setting;
}

void keep_torch_linear() { g_torch_linear = true; }

bool sgemm_usable() { return backend_choice().usable; }

SgemmBackend sgemm_backend() { return backend_choice().backend; }

std::string sgemm_status() { return backend_choice().status; }

void sgemm_row_major(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                     const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                     int64_t ldc) {
  if (backend_choice().backend == SgemmBackend::kOneDnn) {
    dnnl_sgemm_row_major(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  for (const int64_t v : {m, n, k, lda, ldb, ldc})
    DS_CHECK(v >= 0 && v <= INT_MAX, Error, "sgemm (m=", m, " n=", n, " k=", k,
             "): a size or leading dimension above the BLAS's 32-bit int");
  // Row-major C is column-major Cᵀ = op(B)ᵀ op(A)ᵀ: the operands swap, the transpositions stay.
  const int mi = int(n), ni = int(m), ki = int(k), la = int(ldb), lb = int(lda), lc = int(ldc);
  loaded_blas_sgemm()(trans_b ? "T" : "N", trans_a ? "T" : "N", &mi, &ni, &ki, &alpha, b, &la, a,
                      &lb, &beta, c, &lc);
}

int openblas_threads() {
  static const auto get =
      reinterpret_cast<GetThreadsFn>(::dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  return get ? get() : 0;
}

void set_openblas_threads(int threads) {
  static const auto set =
      reinterpret_cast<SetThreadsFn>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (set && threads > 0) set(threads);
}

}  // namespace deepshard::platform
