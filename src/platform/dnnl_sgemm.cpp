// oneDNN's sgemm, checked once per process (dnnl_sgemm.h).
#include "platform/dnnl_sgemm.h"

#include "deepshard/util/error.h"
#include "platform/sgemm_check.h"

#if DS_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

namespace deepshard::platform {
namespace {

struct Decision {
  bool usable = false;
  std::string status;
};

const Decision& decision() {
  static const Decision d = [] {
    Decision r;
    if (!dnnl_sgemm_built()) {
      r.status = "not built with oneDNN (libdnnl-dev)";
      return r;
    }
    std::string why;
    r.usable = dnnl_sgemm_numerically_correct(&why);
    r.status = dnnl_version_string() +
               (r.usable ? " sgemm, verified numerically" : " sgemm refused (" + why + ")");
    return r;
  }();
  return d;
}

}  // namespace

bool dnnl_sgemm_built() { return DS_HAVE_DNNL != 0; }

bool dnnl_sgemm_numerically_correct(std::string* detail) {
  if (!dnnl_sgemm_built()) {
    *detail = "not built with oneDNN";
    return false;
  }
  // A column-major product is the row-major one of the transposes: C^T = op(B)^T op(A)^T.
  std::string error;
  const auto column_major = [&error](bool ta, bool tb, int m, int n, int k, const float* a, int lda,
                                     const float* b, int ldb, float beta, float* c, int ldc) {
    try {
      dnnl_sgemm_row_major(tb, ta, n, m, k, 1.0f, b, ldb, a, lda, beta, c, ldc);
    } catch (const Error& e) {
      if (error.empty()) error = e.what();
    }
  };
  const bool ok = sgemm_check::check_all(column_major, detail);
  if (!error.empty()) *detail = error;
  return ok && error.empty();
}

std::string dnnl_version_string() {
#if DS_HAVE_DNNL
  const dnnl_version_t* v = dnnl_version();
  return detail::concat("oneDNN ", v->major, ".", v->minor, ".", v->patch);
#else
  return {};
#endif
}

bool dnnl_runs_avx512() {
#if DS_HAVE_DNNL
  return dnnl_get_effective_cpu_isa() >= dnnl_cpu_isa_avx512_core;
#else
  return false;
#endif
}

bool dnnl_sgemm_usable() { return decision().usable; }

std::string dnnl_sgemm_status() { return decision().status; }

void dnnl_sgemm_row_major(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                          const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                          float* c, int64_t ldc) {
#if DS_HAVE_DNNL
  const dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha,
                                          a, lda, b, ldb, beta, c, ldc);
  DS_CHECK(status == dnnl_success, Error, "dnnl_sgemm (m=", m, " n=", n, " k=", k,
           ") failed with oneDNN status ", int(status));
#else
  throw Error("dnnl_sgemm: deepshard was built without oneDNN");
#endif
}

}  // namespace deepshard::platform
