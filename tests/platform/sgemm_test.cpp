// The fused kernels' GEMM (platform/sgemm.h): the backend auto picks from oneDNN's ISA and
// OpenBLAS's core, the row-major product on it, and the settings DEEPSHARD_SGEMM takes.
#include "platform/sgemm.h"

#include <gtest/gtest.h>

#include "deepshard/util/error.h"
#include "platform/blas_kernels.h"
#include "platform/dnnl_sgemm.h"

namespace deepshard::platform {
namespace sgemm_test {

TEST(Sgemm, AutoPicksOneDnnAtAvx512AndOpenBlasBelowIt) {
  if (!sgemm_usable()) GTEST_SKIP() << sgemm_status();
  const bool openblas_core =
      !openblas_corename().empty() && !is_generic_openblas_core(openblas_corename());
  const SgemmBackend expected =
      dnnl_runs_avx512() || !openblas_core ? SgemmBackend::kOneDnn : SgemmBackend::kOpenBlas;
  EXPECT_EQ(sgemm_backend(), expected) << sgemm_status();
  EXPECT_NE(sgemm_status().find("verified numerically"), std::string::npos) << sgemm_status();
}

TEST(Sgemm, RowMajorProductsWithEveryTransposition) {
  if (!sgemm_usable()) GTEST_SKIP() << sgemm_status();
  // A [2, 3], B [3, 2], C = 1 + A B, with A and B given plain or transposed.
  const float a[] = {1, 2, 3, 4, 5, 6}, at[] = {1, 4, 2, 5, 3, 6};
  const float b[] = {1, 0, 0, 1, 1, 1}, bt[] = {1, 0, 1, 0, 1, 1};
  const float expected[] = {5, 6, 11, 12};
  for (const bool ta : {false, true})
    for (const bool tb : {false, true}) {
      float c[] = {1, 1, 1, 1};
      sgemm_row_major(ta, tb, 2, 2, 3, 1.0f, ta ? at : a, ta ? 2 : 3, tb ? bt : b, tb ? 3 : 2, 1.0f,
                      c, 2);
      for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(c[i], expected[i]) << ta << tb << " " << i;
    }
}

TEST(Sgemm, ASettingOtherThanAutoOnednnOrOpenblasIsRefused) {
  EXPECT_THROW(set_sgemm_setting("mkl"), UsageError);
  EXPECT_NO_THROW(set_sgemm_setting("auto"));
}

}  // namespace sgemm_test
}  // namespace deepshard::platform
