// DeepSpeed's LR schedules (WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle, LRRangeTest) as pure
// functions of the step (docs/deepspeed-behavior.md §1.6). lr(t) is the rate used for
// optimizer step t (0-based, counting applied steps only). DeepSpeed's schedulers start with
// last_batch_iteration = -1, apply the rate for iteration -1 at construction (the minimum lr for
// WarmupLR/WarmupDecayLR/OneCycle/LRRangeTest, 0 for WarmupCosineLR) and are stepped after every
// applied optimizer step, so step t runs with the rate of iteration t - 1; lr(t) reproduces that
// sequence exactly (e.g. WarmupLR uses warmup_min_lr for both steps 0 and 1).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "deepshard/config/ds_config.h"

namespace deepshard::optim {

class LrSchedule {
 public:
  // Throws ConfigError (naming scheduler.params.<key>) for missing required parameters.
  static std::unique_ptr<LrSchedule> create(const config::SchedulerConfig& scheduler,
                                            const config::OptimizerConfig& optimizer);
  virtual ~LrSchedule() = default;
  virtual double lr(int64_t step) const = 0;
  // OneCycle with cycle_momentum also cycles beta1; others return nullopt.
  virtual std::optional<double> beta1(int64_t step) const { return std::nullopt; }
  // OneCycle with cycle_momentum also sets beta2 to 0.99 (DeepSpeed writes the betas pair
  // (momentum, 0.99) into the optimizer); others return nullopt.
  virtual std::optional<double> beta2(int64_t step) const { return std::nullopt; }
};

}  // namespace deepshard::optim
