// The OpenBLAS core choice: the decision table, the numeric check of the loaded BLAS, and the
// environment `deepshard launch` gives its ranks when OpenBLAS's detection is stubbed (preloaded
// tests/support/fake_openblas_core.cpp) to report the generic `Prescott` core.
#include "platform/blas_kernels.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "support/test_support.h"

namespace deepshard::platform {
namespace blas_kernels_test {

CpuInfo cpu_with(bool avx2, bool avx512) {
  CpuInfo c;
  c.avx2 = avx2;
  c.avx512 = avx512;
  return c;
}

TEST(BlasChoice, GenericCoreOnAVX512OrAVX2GetsTheMatchingCore) {
  EXPECT_EQ(
      choose_openblas_coretype("Prescott", cpu_with(true, true), nullptr, nullptr).coretype_to_set,
      "SkylakeX");
  EXPECT_EQ(
      choose_openblas_coretype("Nehalem", cpu_with(true, false), nullptr, nullptr).coretype_to_set,
      "Haswell");
  // Nothing better to offer a CPU without AVX2.
  EXPECT_EQ(choose_openblas_coretype("Prescott", cpu_with(false, false), nullptr, nullptr)
                .coretype_to_set,
            "");
}

TEST(BlasChoice, AKnownCoreIsKept) {
  for (const char* core : {"Haswell", "SkylakeX", "Cooperlake", "Zen", "SapphireRapids"}) {
    EXPECT_EQ(
        choose_openblas_coretype(core, cpu_with(true, true), nullptr, nullptr).coretype_to_set, "")
        << core;
  }
}

TEST(BlasChoice, TheUsersSettingIsNeverReplaced) {
  const auto c = choose_openblas_coretype("Prescott", cpu_with(true, true), "Haswell", nullptr);
  EXPECT_TRUE(c.user_set);
  EXPECT_EQ(c.coretype_to_set, "");
  EXPECT_TRUE(blas_env_for_ranks(c).empty());
  // A value deepshard set (marker equal to it) is recognised as deepshard's, and not set again.
  const auto ours =
      choose_openblas_coretype("Prescott", cpu_with(true, true), "SkylakeX", "SkylakeX");
  EXPECT_FALSE(ours.user_set);
  EXPECT_EQ(ours.coretype_to_set, "");
  // After a failed numeric check deepshard does not try again.
  EXPECT_EQ(choose_openblas_coretype("Prescott", cpu_with(true, true), nullptr, "rejected:SkylakeX")
                .coretype_to_set,
            "");
}

TEST(BlasChoice, TheLoadedBlasPassesTheNumericCheck) {
  ASSERT_TRUE(torch::mm(torch::ones({2, 2}), torch::ones({2, 2})).defined());  // BLAS is loaded
  std::string detail;
  EXPECT_TRUE(blas_numerically_correct(&detail)) << detail;
}

// Runs `deepshard launch -n 2 -- sh -c 'echo ...'` with OpenBLAS's detection stubbed to Prescott
// and OPENBLAS_CORETYPE removed from (or set in) the environment; returns the launcher's output.
std::string ranks_environment(const char* user_coretype) {
  std::vector<std::string> args = {"-u", "OPENBLAS_CORETYPE", "-u", kAutoCoretypeVar,
                                   std::string("LD_PRELOAD=") + DS_FAKE_OPENBLAS_CORE};
  if (user_coretype) args.push_back(std::string("OPENBLAS_CORETYPE=") + user_coretype);
  args.push_back(testing::deepshard_exe());
  for (const char* a :
       {"launch", "-n", "2", "--", "/bin/sh", "-c", "echo \"coretype=<${OPENBLAS_CORETYPE}>\""})
    args.emplace_back(a);
  const auto r = testing::run_exe("/usr/bin/env", args, 120);
  EXPECT_EQ(r.exit_status, 0) << r.output;
  return r.output;
}

TEST(BlasChoiceLaunch, RanksOfAGenericCoreGetTheMatchingCoretype) {
  const std::string expected = matching_openblas_coretype(detect_cpu());
  const std::string out = ranks_environment(nullptr);
  for (const char* rank : {"[rank 0] ", "[rank 1] "}) {
    EXPECT_NE(out.find(std::string(rank) + "coretype=<" + expected + ">"), std::string::npos)
        << "want OPENBLAS_CORETYPE=" << expected << " in every rank; output:\n"
        << out;
  }
  if (!expected.empty()) {
    EXPECT_NE(out.find("generic core Prescott"), std::string::npos) << out;
  }
}

TEST(BlasChoiceLaunch, ACoretypeTheUserSetReachesTheRanksUnchanged) {
  const std::string out = ranks_environment("Sandybridge");
  EXPECT_NE(out.find("[rank 0] coretype=<Sandybridge>"), std::string::npos) << out;
  EXPECT_NE(out.find("[rank 1] coretype=<Sandybridge>"), std::string::npos) << out;
}

}  // namespace blas_kernels_test
}  // namespace deepshard::platform
