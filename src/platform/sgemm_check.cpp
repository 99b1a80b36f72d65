// The numeric sgemm check (sgemm_check.h).
#include "platform/sgemm_check.h"

#include <cmath>

#include "deepshard/util/error.h"

namespace deepshard::platform::sgemm_check {

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (auto& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(static_cast<int32_t>(seed >> 8) % 2001) / 1000.0f - 1.0f;
  }
  return v;
}

bool check(const ColMajorSgemm& sgemm, int m, int n, int k, bool ta, bool tb, float beta,
           std::string* detail) {
  const int lda = ta ? k : m, ldb = tb ? n : k, ldc = m;
  const auto a = random_values(size_t(lda) * (ta ? m : k), 1u + m * 7u + k);
  const auto b = random_values(size_t(ldb) * (tb ? k : n), 2u + n * 13u + k);
  constexpr float kC0 = 0.5f;
  std::vector<float> c(size_t(ldc) * n, kC0);
  sgemm(ta, tb, m, n, k, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      double sum = beta * double(kC0), scale = std::fabs(sum);
      for (int p = 0; p < k; ++p) {
        const double x = ta ? a[size_t(i) * lda + p] : a[size_t(p) * lda + i];
        const double y = tb ? b[size_t(p) * ldb + j] : b[size_t(j) * ldb + p];
        sum += x * y;
        scale += std::fabs(x * y);
      }
      const double got = c[size_t(j) * ldc + i];
      if (!(std::fabs(got - sum) <= 1e-4 * scale + 1e-6)) {
        *detail =
            detail::concat("sgemm ", ta ? 'T' : 'N', tb ? 'T' : 'N', " m=", m, " n=", n, " k=", k,
                           " beta=", beta, ": C[", i, ",", j, "] = ", got, ", expected ", sum);
        return false;
      }
    }
  }
  return true;
}

bool check_all(const ColMajorSgemm& sgemm, std::string* detail) {
  struct Case {
    int m, n, k;
    bool ta, tb;
    float beta;
  };
  static const Case kCases[] = {{1, 1, 1, false, false, 0},      {7, 13, 5, false, false, 0},
                                {64, 64, 64, false, true, 0},    {67, 45, 129, true, false, 0},
                                {128, 96, 256, false, false, 0}, {33, 257, 70, true, true, 0},
                                {256, 16, 384, false, true, 0},  {96, 80, 48, false, true, 1}};
  for (const auto& c : kCases) {
    if (!check(sgemm, c.m, c.n, c.k, c.ta, c.tb, c.beta, detail)) return false;
  }
  return true;
}

}  // namespace deepshard::platform::sgemm_check
