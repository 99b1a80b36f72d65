// Loss scaling for fp16 training: DeepSpeed's DynamicLossScaler and its static LossScaler
// (docs/deepspeed-behavior.md §4.1). The loss is multiplied by scale() before backward; at
// every optimizer boundary, skipped steps included, the engine calls update_scale(overflow) once.
// A static scaler (fp16 with a fixed loss_scale; 1.0 for bf16 and fp32) never changes.
#pragma once

#include <cstdint>

#include "deepshard/config/ds_config.h"

namespace deepshard::optim {

// DynamicLossScaler's constructor arguments, as ZeRO passes them from the fp16 section.
struct DynamicScaleParams {
  double init_scale = 65536.0;  // 2^fp16.initial_scale_power
  int64_t scale_window = 1000;  // fp16.loss_scale_window
  double min_scale = 1.0;       // fp16.min_loss_scale
  int delayed_shift = 2;        // fp16.hysteresis
  bool consecutive_hysteresis = false;
  double scale_factor = 2.0;
  bool raise_error_at_min_scale = true;
};

// What a checkpoint saves and restores (DeepSpeed pickles the scaler with these fields).
struct LossScalerState {
  double cur_scale = 1.0;
  int64_t cur_iter = 0;
  int64_t last_overflow_iter = -1;
  int cur_hysteresis = 1;
};

class LossScaler {
 public:
  // A fixed scale (> 0).
  static LossScaler fixed(double scale);
  // DynamicLossScaler. Throws ConfigError (naming the fp16 key) for out-of-range parameters.
  static LossScaler dynamic(const DynamicScaleParams& params);
  // From the fp16 section: dynamic when fp16 is enabled with loss_scale 0, fixed at loss_scale when
  // it is enabled with a positive loss_scale, fixed at 1.0 when fp16 is off (bf16, fp32).
  static LossScaler from_config(const config::Fp16Config& fp16);

  bool is_dynamic() const { return dynamic_; }
  double scale() const { return state_.cur_scale; }

  // Once per optimizer boundary, including skipped steps. With overflow: consume one unit of
  // hysteresis, or once it is used up divide the scale by scale_factor (not below min_scale; at
  // min_scale throws Error "Current loss scale already at minimum - cannot decrease scale anymore.
  // Exiting run." and changes nothing); the overflow iteration is remembered. Without overflow:
  // refill the hysteresis when consecutive_hysteresis is on, and multiply the scale by
  // scale_factor when cur_iter - last_overflow_iter - 1 is a positive multiple of scale_window
  // (refilling the hysteresis too). Then cur_iter advances. A fixed scaler ignores the call.
  // `log_overflow`: log the overflow message (DeepSpeed logs it on rank 0 only).
  void update_scale(bool overflow, bool log_overflow = true);

  const LossScalerState& state() const { return state_; }
  // Restores a checkpointed state; throws Error if it is inconsistent (scale <= 0, negative
  // iteration, last overflow not before cur_iter, hysteresis outside [1, delayed_shift]).
  void set_state(const LossScalerState& state);
  // The dynamic parameters (meaningless for a fixed scaler).
  const DynamicScaleParams& params() const { return params_; }

 private:
  LossScaler(bool dynamic, const DynamicScaleParams& params, const LossScalerState& state)
      : dynamic_(dynamic), params_(params), state_(state) {}

  bool dynamic_;
  DynamicScaleParams params_;
  LossScalerState state_;
};

}  // namespace deepshard::optim
