// oneDNN's sgemm and the numeric check that admits it (platform/dnnl_sgemm.h): the installed
// oneDNN passes, a wrong sgemm is refused with the case it failed.
#include "platform/dnnl_sgemm.h"

#include <gtest/gtest.h>

#include "platform/sgemm_check.h"

namespace deepshard::platform {
namespace dnnl_sgemm_test {

TEST(DnnlSgemm, TheInstalledOneDnnPassesTheNumericCheck) {
  if (!dnnl_sgemm_built()) GTEST_SKIP() << "built without oneDNN: " << dnnl_sgemm_status();
  std::string detail;
  EXPECT_TRUE(dnnl_sgemm_numerically_correct(&detail)) << detail;
  EXPECT_TRUE(dnnl_sgemm_usable());
  EXPECT_NE(dnnl_sgemm_status().find("verified numerically"), std::string::npos)
      << dnnl_sgemm_status();
}

TEST(DnnlSgemm, RowMajorProductWithBetaOne) {
  if (!dnnl_sgemm_usable()) GTEST_SKIP() << dnnl_sgemm_status();
  // C [2, 3] = 1 + A [2, 2] B [2, 3] with B given transposed ([3, 2]).
  const float a[] = {1, 2, 3, 4};
  const float bt[] = {1, 0, 0, 1, 1, 1};
  float c[] = {1, 1, 1, 1, 1, 1};
  dnnl_sgemm_row_major(false, true, 2, 3, 2, 1.0f, a, 2, bt, 2, 1.0f, c, 3);
  const float expected[] = {2, 3, 4, 4, 5, 8};
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(c[i], expected[i]) << i;
}

TEST(DnnlSgemm, AWrongSgemmIsRefused) {
  // A correct column-major reference, then the same with one element off and with beta ignored.
  const auto reference = [](bool ta, bool tb, int m, int n, int k, const float* a, int lda,
                            const float* b, int ldb, float beta, float* c, int ldc) {
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        double s = beta * c[j * ldc + i];
        for (int p = 0; p < k; ++p)
          s +=
              double(ta ? a[i * lda + p] : a[p * lda + i]) * (tb ? b[p * ldb + j] : b[j * ldb + p]);
        c[j * ldc + i] = float(s);
      }
  };
  std::string detail;
  EXPECT_TRUE(sgemm_check::check_all(reference, &detail)) << detail;
  const auto off_by_one = [&](bool ta, bool tb, int m, int n, int k, const float* a, int lda,
                              const float* b, int ldb, float beta, float* c, int ldc) {
    reference(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
    if (m * n > 10) c[m * n / 2] += 0.01f;
  };
  EXPECT_FALSE(sgemm_check::check_all(off_by_one, &detail));
  EXPECT_NE(detail.find("sgemm"), std::string::npos) << detail;
  const auto ignores_beta = [&](bool ta, bool tb, int m, int n, int k, const float* a, int lda,
                                const float* b, int ldb, float, float* c, int ldc) {
    reference(ta, tb, m, n, k, a, lda, b, ldb, 0.0f, c, ldc);
  };
  EXPECT_FALSE(sgemm_check::check_all(ignores_beta, &detail));
  EXPECT_NE(detail.find("beta=1"), std::string::npos) << detail;
}

}  // namespace dnnl_sgemm_test
}  // namespace deepshard::platform
