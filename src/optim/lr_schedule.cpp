// DeepSpeed's LR schedules as pure functions of the optimizer step (§1.6 of
// docs/deepspeed-behavior.md, checked against deepspeed/runtime/lr_schedules.py). Each class
// evaluates DeepSpeed's get_lr() at last_batch_iteration = step - 1 (see lr_schedule.h).
#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "deepshard/util/error.h"
#include "util/log.h"

namespace deepshard::optim {
namespace {

// No scheduler: the optimizer's lr throughout.
class ConstantLr final : public LrSchedule {
 public:
  explicit ConstantLr(double lr) : lr_(lr) {}
  double lr(int64_t) const override { return lr_; }

 private:
  double lr_;
};

// The warmup shared by WarmupLR, WarmupDecayLR and WarmupCosineLR: N clamped to >= 2, gamma in
// [0, 1) over iterations 0..N-1, log (ln(it+1)/ln(N)) or linear (it/N).
class Warmup {
 public:
  Warmup(const config::SchedulerConfig& s) : num_steps_(std::max<int64_t>(2, s.warmup_num_steps)) {
    DS_CHECK(s.warmup_num_steps > 0, ConfigError,
             "scheduler.params.warmup_num_steps must be a positive integer, got ",
             s.warmup_num_steps);
    linear_ = s.warmup_type == "linear";
    if (!linear_ && s.warmup_type != "log") {
      log::warn("scheduler.params.warmup_type: unknown warmup type \"", s.warmup_type,
                "\", using \"log\" (as DeepSpeed)");
    }
  }
  int64_t num_steps() const { return num_steps_; }
  bool active(int64_t it) const { return it < num_steps_; }
  double gamma(int64_t it) const {
    return linear_ ? double(it) / double(num_steps_)
                   : std::log(double(it + 1)) / std::log(double(num_steps_));
  }

 private:
  int64_t num_steps_;
  bool linear_ = false;
};

int64_t require_total_steps(const config::SchedulerConfig& s) {
  DS_CHECK(s.total_num_steps > 0, ConfigError, "scheduler.params.total_num_steps is required for ",
           s.type, " (a positive step count), got ", s.total_num_steps);
  return s.total_num_steps;
}

void check_step(int64_t step) { DS_ASSERT(step >= 0, "negative optimizer step ", step); }

// WarmupLR, and WarmupDecayLR (decay = true): lr = min + (max - min) * gamma.
class WarmupLr final : public LrSchedule {
 public:
  WarmupLr(const config::SchedulerConfig& s, double max_lr, bool decay)
      : warmup_(s), min_lr_(s.warmup_min_lr), max_lr_(max_lr), decay_(decay) {
    if (decay_) total_ = require_total_steps(s);
    if (decay_ && total_ < warmup_.num_steps()) {
      log::warn("scheduler.params.total_num_steps ", total_, " is less than warmup_num_steps ",
                warmup_.num_steps());
    }
  }
  double lr(int64_t step) const override {
    check_step(step);
    const int64_t it = step - 1;
    if (it < 0) return min_lr_;
    return min_lr_ + (max_lr_ - min_lr_) * gamma(it);
  }

 private:
  double gamma(int64_t it) const {
    if (warmup_.active(it)) return warmup_.gamma(it);
    if (!decay_) return 1.0;
    return std::max(0.0, double(total_ - it) / std::max(1.0, double(total_ - warmup_.num_steps())));
  }
  Warmup warmup_;
  double min_lr_, max_lr_;
  bool decay_;
  int64_t total_ = 0;
};

// WarmupCosineLR: ratios of the optimizer's lr; 0 before the first scheduler step.
class WarmupCosineLr final : public LrSchedule {
 public:
  WarmupCosineLr(const config::SchedulerConfig& s, double base_lr)
      : warmup_(s),
        total_(require_total_steps(s)),
        base_lr_(base_lr),
        warmup_min_ratio_(s.warmup_min_ratio),
        cos_min_ratio_(s.cos_min_ratio) {
    if (total_ < warmup_.num_steps()) {
      log::warn("scheduler.params.total_num_steps ", total_, " is less than warmup_num_steps ",
                warmup_.num_steps());
    }
  }
  double lr(int64_t step) const override {
    check_step(step);
    const int64_t it = step - 1;
    if (it < 0) return 0.0;
    return base_lr_ * ratio(it);
  }

 private:
  double ratio(int64_t it) const {
    if (warmup_.active(it))
      return warmup_min_ratio_ + warmup_.gamma(it) * (1.0 - warmup_min_ratio_);
    const double progress =
        std::min(1.0, double(it - warmup_.num_steps() + 1) /
                          double(std::max<int64_t>(1, total_ - warmup_.num_steps())));
    const double cosine = (1.0 + std::cos(std::numbers::pi * progress)) / 2.0;
    return std::max(0.0, cos_min_ratio_ + (1.0 - cos_min_ratio_) * cosine);
  }
  Warmup warmup_;
  int64_t total_;
  double base_lr_, warmup_min_ratio_, cos_min_ratio_;
};

// OneCycle: one triangular cycle (rising s1 steps, falling s2 steps, optional stairs), then an
// inverse-time decay of the lr; momentum (beta1) moves against the lr.
class OneCycle final : public LrSchedule {
 public:
  explicit OneCycle(const config::SchedulerConfig& s) : s_(s) {
    DS_CHECK(s.cycle_max_lr > 0.0, ConfigError,
             "scheduler.params.cycle_max_lr is required for OneCycle (a positive rate), got ",
             s.cycle_max_lr);
    DS_CHECK(s.cycle_first_step_size > 0, ConfigError,
             "scheduler.params.cycle_first_step_size must be positive, got ",
             s.cycle_first_step_size);
    first_ = double(s.cycle_first_step_size);
    second_ = s.cycle_second_step_size ? double(*s.cycle_second_step_size) : first_;
    DS_CHECK(second_ > 0.0, ConfigError,
             "scheduler.params.cycle_second_step_size must be positive, got ", second_);
    total_ = first_ + second_;
    const bool no_decay_interval = s.decay_step_size == 0;
    skip_lr_decay_ = no_decay_interval || s.decay_lr_rate == 0.0;
    skip_mom_decay_ = no_decay_interval || s.decay_mom_rate == 0.0;
  }

  double lr(int64_t step) const override {
    check_step(step);
    if (in_cycle(step)) return s_.cycle_min_lr + (s_.cycle_max_lr - s_.cycle_min_lr) * scale(step);
    if (skip_lr_decay_) return s_.cycle_min_lr;
    return s_.cycle_min_lr / (1.0 + s_.decay_lr_rate * decay_interval(step));
  }

  std::optional<double> beta1(int64_t step) const override {
    check_step(step);
    if (!s_.cycle_momentum) return std::nullopt;
    if (step == 0) return s_.cycle_min_mom;  // DeepSpeed's constructor sets the minimum
    if (in_cycle(step)) {
      return s_.cycle_max_mom - (s_.cycle_max_mom - s_.cycle_min_mom) * scale(step);
    }
    if (skip_mom_decay_) return s_.cycle_max_mom;
    return s_.cycle_max_mom * (1.0 + s_.decay_mom_rate * decay_interval(step));
  }

  std::optional<double> beta2(int64_t step) const override {
    if (!s_.cycle_momentum) return std::nullopt;
    return 0.99;
  }

 private:
  // last_batch_iteration = step - 1 < total size.
  bool in_cycle(int64_t step) const { return double(step - 1) < total_; }
  double decay_interval(int64_t step) const {
    return (double(step) - total_) / double(s_.decay_step_size);
  }
  // Position in the cycle at batch iteration `step` (= last_batch_iteration + 1), 0 to 1 and back.
  double scale(int64_t step) const {
    const double it = double(step);
    const double ratio = first_ / total_;
    const double x = 1.0 + it / total_ - std::floor(1.0 + it / total_);
    const bool rising = x <= ratio;
    const double scale = rising ? x / ratio : (x - 1.0) / (ratio - 1.0);
    const int64_t stairs = rising
                               ? s_.cycle_first_stair_count
                               : s_.cycle_second_stair_count.value_or(s_.cycle_first_stair_count);
    if (stairs <= 0) return scale;
    // Stairs are counted from the integer offset in the cycle (as DeepSpeed), not from `scale`.
    const double in_cycle_it = std::fmod(it, total_);
    const double position = in_cycle_it <= first_
                                ? in_cycle_it * double(stairs) / first_
                                : (total_ - in_cycle_it) * double(stairs) / second_;
    return std::floor(position) / double(stairs);
  }

  config::SchedulerConfig s_;
  double first_, second_, total_;
  bool skip_lr_decay_, skip_mom_decay_;
};

// LRRangeTest: min_lr * (1 + rate * step / step_size), continuous or staircase.
class LrRangeTest final : public LrSchedule {
 public:
  explicit LrRangeTest(const config::SchedulerConfig& s) : s_(s) {
    DS_CHECK(s.lr_range_test_step_size > 0, ConfigError,
             "scheduler.params.lr_range_test_step_size must be positive, got ",
             s.lr_range_test_step_size);
  }
  double lr(int64_t step) const override {
    check_step(step);
    double interval = double(step) / double(s_.lr_range_test_step_size);
    if (s_.lr_range_test_staircase) interval = std::floor(interval);
    return s_.lr_range_test_min_lr * (1.0 + s_.lr_range_test_step_rate * interval);
  }

 private:
  config::SchedulerConfig s_;
};

}  // namespace

std::unique_ptr<LrSchedule> LrSchedule::create(const config::SchedulerConfig& scheduler,
                                               const config::OptimizerConfig& optimizer) {
  const std::string& type = scheduler.type;
  if (type.empty()) return std::make_unique<ConstantLr>(optimizer.lr);
  if (type == "WarmupLR") {
    return std::make_unique<WarmupLr>(scheduler, scheduler.warmup_max_lr.value_or(optimizer.lr),
                                      /*decay=*/false);
  }
  if (type == "WarmupDecayLR") {
    return std::make_unique<WarmupLr>(scheduler, scheduler.warmup_max_lr.value_or(0.001),
                                      /*decay=*/true);
  }
  if (type == "WarmupCosineLR") return std::make_unique<WarmupCosineLr>(scheduler, optimizer.lr);
  if (type == "OneCycle") return std::make_unique<OneCycle>(scheduler);
  if (type == "LRRangeTest") return std::make_unique<LrRangeTest>(scheduler);
  throw ConfigError(detail::concat("scheduler.type: unknown scheduler \"", type,
                                   "\" (supported: WarmupLR, WarmupDecayLR, WarmupCosineLR, "
                                   "OneCycle, LRRangeTest)"));
}

}  // namespace deepshard::optim
