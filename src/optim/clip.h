// Gradient clipping by global norm, fused with loss-scale removal as DeepSpeed does (§4.3).
#pragma once

namespace deepshard::optim {

// The factor every gradient is multiplied by: 1 / combined_scale, where
// combined_scale = loss_scale * max(1, ((norm / loss_scale) + 1e-6) / clip) when clip > 0,
// and loss_scale otherwise. `scaled_norm` is the global L2 norm of the (still scaled) gradient.
float unscale_and_clip_factor(double scaled_norm, double loss_scale, double clip);

}  // namespace deepshard::optim
