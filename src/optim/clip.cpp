// The fused unscale-and-clip factor (§4.3 of docs/deepspeed-behavior.md).
#include "optim/clip.h"

#include "deepshard/util/error.h"

namespace deepshard::optim {

float unscale_and_clip_factor(double scaled_norm, double loss_scale, double clip) {
  DS_CHECK(loss_scale > 0.0, Error, "unscale_and_clip_factor: loss scale must be positive, got ",
           loss_scale);
  double combined_scale = loss_scale;
  if (clip > 0.0) {
    // As DeepSpeed: the 1e-6 keeps the clipped norm just under `clip`. A non-finite norm gives a
    // non-finite factor (the step is skipped on overflow before the factor is used).
    const double ratio = ((scaled_norm / loss_scale) + 1e-6) / clip;
    combined_scale = (ratio > 1.0 || ratio != ratio ? ratio : 1.0) * loss_scale;
  }
  return static_cast<float>(1.0 / combined_scale);
}

}  // namespace deepshard::optim
