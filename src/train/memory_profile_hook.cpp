// The memory profile hook: per step, the activation fields and the memory profile (ledger by
// category, activations kept, RSS) in metrics.jsonl, the memory_breakdown line (rank 0, every
// steps_per_print steps, default train.log_interval), and the run's peaks in summary.json.
#include <cstdio>

#include "monitor/process_memory.h"
#include "train/memory_profile.h"
#include "train/training_run.h"

namespace deepshard::train {
namespace {

class MemoryProfileHook : public StepHook {
 public:
  void after_step(TrainingRun& run, StepRecord& step) override {
    nlohmann::json& record = step.metrics;
    record.update(run.activations->end_step());
    record["memory"] = memory_profile_json(run.engine->ledger(), run.activations->last_step(),
                                           record["rss_bytes"].get<int64_t>());
    const int64_t interval = run.ds.steps_per_print.value_or(run.config.train.log_interval);
    if (run.ds.memory_breakdown && run.rank0 && step.step % interval == 0) {
      std::printf("%s", format_memory_breakdown(step.step, record["memory"]).c_str());
      std::fflush(stdout);
    }
  }

  void add_to_summary(const TrainingRun& run, nlohmann::json& out) const override {
    out["memory_profile"] = memory_peak_json(run.engine->ledger(), run.activations->run_peak(),
                                             run.summary.peak_rss_bytes.at(0));
  }
};

}  // namespace

std::unique_ptr<StepHook> make_memory_profile_hook() {
  return std::make_unique<MemoryProfileHook>();
}

}  // namespace deepshard::train
