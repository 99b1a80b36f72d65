// The throughput hook: per-step communication (metrics comm_wait_s, comm_bytes) and, over the
// steps after the warm-up step, mean tokens/s and the share of time blocked on collectives.
#include "deepshard/monitor/process_memory.h"
#include "train/training_run.h"

namespace deepshard::train {
namespace {

class ThroughputHook : public StepHook {
 public:
  explicit ThroughputHook(const TrainingRun& run) : before_(run.group.log().total()) {}

  void after_step(TrainingRun& run, StepRecord& step) override {
    const comm::CommStats now = run.group.log().total();
    const double comm_wait = now.wait_seconds - before_.wait_seconds;
    if (!step.first) {
      tokens_per_s_sum_ += step.tokens_per_s;
      ++timed_steps_;
      timed_wait_ += comm_wait;
      timed_time_ += step.step_time;
    }
    step.metrics["comm_wait_s"] = comm_wait;
    step.metrics["comm_bytes"] = now.bytes - before_.bytes;
    step.metrics["rss_bytes"] = monitor::current_rss_bytes();
    before_ = now;
  }

  void finish(TrainingRun& run) override {
    run.summary.mean_tokens_per_s = timed_steps_ > 0 ? tokens_per_s_sum_ / timed_steps_ : 0.0;
    run.summary.comm_wait_share = timed_time_ > 0 ? timed_wait_ / timed_time_ : 0.0;
  }

 private:
  comm::CommStats before_;
  double tokens_per_s_sum_ = 0.0;
  int64_t timed_steps_ = 0;
  double timed_wait_ = 0.0, timed_time_ = 0.0;  // comm wait and wall time of the timed steps
};

}  // namespace

std::unique_ptr<StepHook> make_throughput_hook(const TrainingRun& run) {
  return std::make_unique<ThroughputHook>(run);
}

}  // namespace deepshard::train
