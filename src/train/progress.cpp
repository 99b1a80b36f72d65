// The reporting hooks: the progress line (rank 0, every train.log_interval steps, the first and
// last step, and after an evaluation) and metrics.jsonl (rank 0, one record per step).
#include <algorithm>
#include <cstdio>

#include "monitor/jsonl_writer.h"
#include "monitor/process_memory.h"
#include "train/training_run.h"

namespace deepshard::train {
namespace {

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

void print_progress(int64_t step, int64_t steps, double loss, double val_loss,
                    const zero::StepResult& result, double tokens_per_s, double step_time,
                    int64_t max_rss, int64_t model_state_bytes) {
  char val[32] = "";
  if (val_loss >= 0) std::snprintf(val, sizeof val, " | val %.4f", val_loss);
  std::printf(
      "step %lld/%lld | loss %.4f%s | lr %.3e | grad norm %.3f | %.0f tok/s | %.3f s/step"
      " | rss/rank max %.0f MiB | model states/rank %.1f MiB\n",
      static_cast<long long>(step), static_cast<long long>(steps), loss, val, result.lr,
      result.grad_norm, tokens_per_s, step_time, mib(max_rss), mib(model_state_bytes));
  std::fflush(stdout);
}

class ProgressHook : public StepHook {
 public:
  void after_step(TrainingRun& run, StepRecord& step) override {
    const int64_t interval = std::max<int64_t>(1, run.config.train.log_interval);
    const bool evaluated = step.val_loss >= 0;
    if (!(step.step % interval == 0 || step.step == 1 || step.last || evaluated)) return;
    auto rss = gather_over_ranks(run.group, monitor::current_rss_bytes());  // every rank
    if (run.rank0)
      print_progress(step.step, run.config.train.steps, step.loss, step.val_loss, step.result,
                     step.tokens_per_s, step.step_time, *std::max_element(rss.begin(), rss.end()),
                     run.engine->ledger().model_state_bytes());
  }
};

class MetricsFileHook : public StepHook {
 public:
  explicit MetricsFileHook(const TrainingRun& run) {
    if (run.rank0)
      writer_ = std::make_unique<monitor::JsonlWriter>(run.config.train.run_dir + "/metrics.jsonl",
                                                       /*append=*/run.start_step > 0);
  }
  void after_step(TrainingRun&, StepRecord& step) override {
    if (writer_) writer_->write(step.metrics);
  }

 private:
  std::unique_ptr<monitor::JsonlWriter> writer_;
};

}  // namespace

std::unique_ptr<StepHook> make_progress_hook() { return std::make_unique<ProgressHook>(); }
std::unique_ptr<StepHook> make_metrics_file_hook(const TrainingRun& run) {
  return std::make_unique<MetricsFileHook>(run);
}

}  // namespace deepshard::train
