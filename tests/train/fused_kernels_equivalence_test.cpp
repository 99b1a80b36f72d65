// model.fused_kernels (the fused CPU kernels of src/kernels, on by default) does not change
// training: `deepshard train` with N = 2 real ranks, fp32, same seed and global batch, gives for
// ZeRO stages 0, 1, 2 and 3 with the fused kernels the losses of the unfused stage-0 run (the
// libtorch sequences the kernels replace) for 20 steps within 1e-4 relative, with clipping on.
// (The kernels themselves are compared with libtorch within 1e-5 in tests/kernels.)
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/test_support.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace fused_kernels_equivalence_test {

constexpr int kRanks = 2;
constexpr int64_t kMicro = 8;  // per rank: global batch 16

std::string extra(int stage, bool fused) {
  return nlohmann::json{{"zero_optimization", {{"stage", stage}}},
                        {"model", {{"fused_kernels", fused}}}}
      .dump();
}

TEST(FusedKernelsEquivalence, StagesZeroToThreeMatchTheUnfusedRun) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const auto reference =
      train_and_read_losses(dir, data, kRanks, kMicro, 1, "unfused_s0", extra(0, false));
  ASSERT_EQ(reference.losses.size(), 20u);
  EXPECT_LT(reference.losses.back(), reference.losses.front()) << "the loss did not fall";
  for (int stage = 0; stage <= 3; ++stage) {
    const std::string name = "fused_s" + std::to_string(stage);
    const auto run = train_and_read_losses(dir, data, kRanks, kMicro, 1, name, extra(stage, true));
    expect_same_losses(run, reference, name + " vs unfused stage 0");  // prints the largest
  }
}

}  // namespace fused_kernels_equivalence_test
}  // namespace deepshard::testing
