// The wall-clock hook. With wall_clock_breakdown (DeepSpeed's timers): each step's forward,
// backward and optimizer-step wall time (train_one_step measures them) in metrics.jsonl, a line
// with their means every steps_per_print steps (default train.log_interval), and their means over
// the steps after the warm-up step in summary.json. Always: summary.json's platform section, FLOPs
// per token and achieved GFLOP/s; with wall_clock_breakdown also the matmul peak and MFU
// (train/throughput_report.h).
#include <algorithm>
#include <cstdio>

#include "deepshard/train/model_factory.h"
#include "train/platform_report.h"
#include "train/throughput_report.h"
#include "train/training_run.h"

namespace deepshard::train {
namespace {

enum Phase { kForward, kBackward, kStep, kCommWait, kPhases };

class WallClockHook : public StepHook {
 public:
  explicit WallClockHook(const TrainingRun& run)
      : enabled_(run.ds.wall_clock_breakdown),
        interval_(
            std::max<int64_t>(1, run.ds.steps_per_print.value_or(run.config.train.log_interval))) {}

  void after_step(TrainingRun& run, StepRecord& step) override {
    if (!enabled_) return;
    step.metrics["forward_s"] = step.forward_s;
    step.metrics["backward_s"] = step.backward_s;
    step.metrics["optimizer_s"] = step.optimizer_s;
    if (step.first) return;  // the warm-up step is not timed
    const double times[kPhases] = {step.forward_s, step.backward_s, step.optimizer_s,
                                   step.metrics.value("comm_wait_s", 0.0)};
    for (int p = 0; p < kPhases; ++p) {
      window_[p] += times[p];
      total_[p] += times[p];
    }
    ++window_steps_;
    ++total_steps_;
    if (run.rank0 && (step.step % interval_ == 0 || step.last)) {
      const double n = double(window_steps_);
      std::printf(
          "step %lld | time (ms) | fwd: %.2f | bwd: %.2f | step: %.2f | comm wait: %.2f "
          "(mean of %lld steps)\n",
          static_cast<long long>(step.step), 1e3 * window_[kForward] / n,
          1e3 * window_[kBackward] / n, 1e3 * window_[kStep] / n, 1e3 * window_[kCommWait] / n,
          static_cast<long long>(window_steps_));
      std::fflush(stdout);
    }
    if (step.step % interval_ == 0 || step.last) {
      for (double& w : window_) w = 0.0;
      window_steps_ = 0;
    }
  }

  void add_to_summary(const TrainingRun& run, nlohmann::json& out) const override {
    out["platform"] = platform_json();
    out.update(throughput_json(training_flops_per_token(run.config.model),
                               run.summary.mean_tokens_per_s, run.group.size(),
                               run.model->parameters().front().scalar_type(), enabled_));
    if (!enabled_) return;
    const double n = total_steps_ > 0 ? double(total_steps_) : 1.0;
    out["wall_clock_breakdown"] = {{"steps", total_steps_},
                                   {"forward_s", total_[kForward] / n},
                                   {"backward_s", total_[kBackward] / n},
                                   {"optimizer_s", total_[kStep] / n},
                                   {"comm_wait_s", total_[kCommWait] / n}};
  }

 private:
  bool enabled_;
  int64_t interval_;
  double window_[kPhases] = {}, total_[kPhases] = {};
  int64_t window_steps_ = 0, total_steps_ = 0;
};

}  // namespace

std::unique_ptr<StepHook> make_wall_clock_hook(const TrainingRun& run) {
  return std::make_unique<WallClockHook>(run);
}

}  // namespace deepshard::train
