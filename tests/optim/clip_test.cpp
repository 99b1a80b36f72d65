// The fused unscale-and-clip factor (DeepSpeed §4.3).
#include "optim/clip.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "deepshard/util/error.h"

namespace deepshard::optim {
namespace clip_test {

TEST(UnscaleAndClip, BelowThresholdOnlyUnscales) {
  EXPECT_FLOAT_EQ(unscale_and_clip_factor(0.5 * 1024, 1024, 1.0), 1.0f / 1024);
  EXPECT_FLOAT_EQ(unscale_and_clip_factor(0.3, 1.0, 1.0), 1.0f);
}

TEST(UnscaleAndClip, DisabledClipOnlyUnscales) {
  EXPECT_FLOAT_EQ(unscale_and_clip_factor(1e6, 8.0, 0.0), 1.0f / 8);
}

TEST(UnscaleAndClip, AboveThresholdUsesDeepSpeedsFormula) {
  // norm / scale = 5, clip 1: combined = 2 * (5 + 1e-6) / 1.
  EXPECT_FLOAT_EQ(unscale_and_clip_factor(10.0, 2.0, 1.0), float(1.0 / (2.0 * (5.0 + 1e-6))));
}

TEST(UnscaleAndClip, ClippedGradientHasTheClipNorm) {
  for (double clip : {0.5, 1.0, 3.0}) {
    const double loss_scale = 8.0;
    const at::Tensor scaled = torch::randn({10'000}) * 10.0 * loss_scale;
    const double norm = scaled.norm().item<double>();
    const at::Tensor clipped = scaled * unscale_and_clip_factor(norm, loss_scale, clip);
    EXPECT_NEAR(clipped.norm().item<double>(), clip, 1e-5 * clip);
    EXPECT_LT(clipped.norm().item<double>(), clip * (1 + 1e-6));
  }
}

TEST(UnscaleAndClip, RejectsNonPositiveLossScale) {
  EXPECT_THROW(unscale_and_clip_factor(1.0, 0.0, 1.0), Error);
}

}  // namespace clip_test
}  // namespace deepshard::optim
