// DeepSpeed's DynamicLossScaler and static LossScaler (§4.1 of docs/deepspeed-behavior.md):
// the update rule, construction from the fp16 section, and checkpoint state.
#include "optim/loss_scaler.h"

#include <algorithm>
#include <cmath>

#include "deepshard/util/error.h"
#include "util/log.h"

namespace deepshard::optim {

LossScaler LossScaler::fixed(double scale) {
  DS_CHECK(scale > 0.0 && std::isfinite(scale), ConfigError,
           "fp16.loss_scale: a static loss scale must be positive and finite, got ", scale);
  DynamicScaleParams params;
  params.init_scale = scale;
  params.min_scale = scale;
  params.delayed_shift = 1;
  return LossScaler(/*dynamic=*/false, params, LossScalerState{.cur_scale = scale});
}

LossScaler LossScaler::dynamic(const DynamicScaleParams& p) {
  DS_CHECK(p.init_scale > 0.0 && std::isfinite(p.init_scale), ConfigError,
           "fp16.initial_scale_power: the initial loss scale must be positive and finite, got ",
           p.init_scale);
  DS_CHECK(p.scale_window > 0, ConfigError, "fp16.loss_scale_window must be positive, got ",
           p.scale_window);
  DS_CHECK(p.min_scale > 0.0, ConfigError, "fp16.min_loss_scale must be positive, got ",
           p.min_scale);
  DS_CHECK(p.delayed_shift >= 1, ConfigError, "fp16.hysteresis must be at least 1, got ",
           p.delayed_shift);
  DS_CHECK(p.scale_factor > 1.0, Error, "LossScaler: scale_factor must be above 1, got ",
           p.scale_factor);
  return LossScaler(/*dynamic=*/true, p,
                    LossScalerState{.cur_scale = p.init_scale,
                                    .cur_iter = 0,
                                    .last_overflow_iter = -1,
                                    .cur_hysteresis = p.delayed_shift});
}

LossScaler LossScaler::from_config(const config::Fp16Config& fp16) {
  if (!fp16.enabled) return fixed(1.0);
  if (!fp16.dynamic()) return fixed(fp16.loss_scale);
  DynamicScaleParams p;
  p.init_scale = std::ldexp(1.0, fp16.initial_scale_power);
  p.scale_window = fp16.loss_scale_window;
  p.min_scale = fp16.min_loss_scale;
  p.delayed_shift = fp16.hysteresis;
  p.consecutive_hysteresis = fp16.consecutive_hysteresis;
  return dynamic(p);
}

void LossScaler::update_scale(bool overflow, bool log_overflow) {
  if (!dynamic_) return;
  LossScalerState& s = state_;
  if (overflow) {
    if (params_.delayed_shift == 1 || s.cur_hysteresis == 1) {
      if (s.cur_scale == params_.min_scale && params_.raise_error_at_min_scale) {
        // DeepSpeed's exact text.
        throw Error(
            "Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.");
      }
      const double next_scale = std::max(s.cur_scale / params_.scale_factor, params_.min_scale);
      if (log_overflow) {
        log::info("OVERFLOW! Skipping step. Attempted loss scale: ", s.cur_scale, ", reducing to ",
                  next_scale);
      }
      s.cur_scale = next_scale;
    } else {
      if (log_overflow) {
        log::info("OVERFLOW! Skipping step. Attempted loss scale: ", s.cur_scale,
                  ", but hysteresis is ", s.cur_hysteresis, ". Reducing hysteresis to ",
                  s.cur_hysteresis - 1);
      }
      s.cur_hysteresis -= 1;
    }
    s.last_overflow_iter = s.cur_iter;
  } else {
    if (params_.consecutive_hysteresis) s.cur_hysteresis = params_.delayed_shift;
    const int64_t stable = s.cur_iter - s.last_overflow_iter - 1;
    if (stable > 0 && stable % params_.scale_window == 0) {
      if (!params_.consecutive_hysteresis) s.cur_hysteresis = params_.delayed_shift;
      s.cur_scale *= params_.scale_factor;
    }
  }
  s.cur_iter += 1;
}

void LossScaler::set_state(const LossScalerState& state) {
  DS_CHECK(state.cur_scale > 0.0 && std::isfinite(state.cur_scale), Error,
           "LossScaler::set_state: loss scale must be positive and finite, got ", state.cur_scale);
  DS_CHECK(state.cur_iter >= 0, Error, "LossScaler::set_state: negative cur_iter ", state.cur_iter);
  DS_CHECK(state.last_overflow_iter >= -1 && state.last_overflow_iter < state.cur_iter, Error,
           "LossScaler::set_state: last_overflow_iter ", state.last_overflow_iter,
           " must lie in [-1, cur_iter = ", state.cur_iter, ")");
  DS_CHECK(state.cur_hysteresis >= 1 && state.cur_hysteresis <= params_.delayed_shift, Error,
           "LossScaler::set_state: cur_hysteresis ", state.cur_hysteresis,
           " must lie in [1, hysteresis = ", params_.delayed_shift, "]");
  state_ = state;
}

}  // namespace deepshard::optim
