// Data parallelism reproduces single-process training: `deepshard train` with N = 2, 3 and 4 real
// ranks (stage 0, fp32, same seed, same global batch) gives the losses of the single-rank run for
// 20 steps within 1e-4 relative, with gradient accumulation 1 and 2 and with clipping on.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "support/test_support.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace stage0_equivalence_test {

class Stage0Equivalence : public ::testing::TestWithParam<int> {};

TEST_P(Stage0Equivalence, ReproducesSingleRankLosses) {
  const int ranks = GetParam();
  TempDir dir;
  const std::string data = make_token_file(dir);
  // Global batch 24 = micro * accumulation * ranks for every case below.
  auto reference = train_and_read_losses(dir, data, 1, 24, 1, "ref");
  ASSERT_EQ(reference.losses.size(), 20u);
  EXPECT_LT(reference.losses.back(), reference.losses.front()) << "the loss did not fall";
  EXPECT_TRUE(reference.clipped)
      << "gradient clipping never took effect; the test would not cover it";
  for (int gas : {1, 2}) {
    auto run = train_and_read_losses(dir, data, ranks, 24 / (ranks * gas), gas,
                                     "n" + std::to_string(ranks) + "_gas" + std::to_string(gas));
    ASSERT_EQ(run.losses.size(), reference.losses.size());
    double max_rel = 0;
    for (size_t i = 0; i < run.losses.size(); ++i) {
      max_rel = std::max(
          max_rel, std::abs(run.losses[i] - reference.losses[i]) / std::abs(reference.losses[i]));
      EXPECT_NEAR(run.losses[i], reference.losses[i], 1e-4 * std::abs(reference.losses[i]))
          << "step " << i + 1 << ", " << ranks << " ranks, accumulation " << gas;
    }
    std::printf("%d ranks, accumulation %d: max relative loss difference %.2e over 20 steps\n",
                ranks, gas, max_rel);
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, Stage0Equivalence, ::testing::Values(2, 3, 4));

}  // namespace stage0_equivalence_test
}  // namespace deepshard::testing
