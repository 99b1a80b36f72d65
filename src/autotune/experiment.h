// One experiment of the tuner (a configuration: the user's with overrides) and its outcome, the
// row results_dir keeps for it. Private to the autotune layer.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "autotune/user_job.h"

namespace deepshard::autotune {

struct Experiment {
  // DeepSpeed's naming: z<stage>_gas<G>_tmbspg<B>, then the knobs that differ from the stage's
  // defaults ("_ob5e7" ...); "baseline" is the user's config as given, "profile_model_info" the
  // profile run.
  std::string name;
  std::string space;    // the tuning space: "z0".."z3", or the name for baseline / profile
  Overrides overrides;  // what differs from the user's config
  int stage = 0;
  int64_t micro_batch = 1;
  int64_t accumulation = 1;
  int64_t train_batch = 1;  // micro_batch x accumulation x data-parallel ranks
};

enum class TrialStatus { kRan, kOutOfMemory, kPruned, kFailed };
const char* to_string(TrialStatus status);  // "ran" | "out of memory" | "pruned" | "failed"
TrialStatus trial_status_from(const std::string& text);  // throws Error for another text

struct ExperimentResult {
  TrialStatus status = TrialStatus::kFailed;
  std::string reason;  // why it was pruned or failed ("" when it ran)
  // Over the measured steps (start_profile_step..end_profile_step), as DeepSpeed's metrics.json:
  double latency_ms = 0;        // mean optimizer-step time
  double throughput = 0;        // samples per second: train_batch / latency
  double flops = 0;             // FLOP/s per rank: training FLOPs of the step / latency
  double compute_s = 0;         // mean step time minus the time blocked on collectives, per step
  double comm_wait_s = 0;       // mean time blocked on collectives per step
  double comm_bytes = 0;        // bytes handed to collectives per step by rank 0
  int64_t peak_rss = 0;         // the largest rank's peak resident memory (bytes)
  int64_t memory_estimate = 0;  // the predicted peak per rank (bytes; 0: none)
  double wall_s = 0;            // the trial's wall time, start to exit
  bool reused = false;          // read back from an earlier tuning's results_dir
};

// The metric the tuner ranks by ("throughput", "latency", "FLOPS"), and whether a beats b.
double metric_value(const ExperimentResult& r, const std::string& metric);
bool better(double a, double b, const std::string& metric);

nlohmann::json to_json(const Experiment& e);
Experiment experiment_from_json(const nlohmann::json& j);
nlohmann::json to_json(const ExperimentResult& r);
ExperimentResult result_from_json(const nlohmann::json& j);

}  // namespace deepshard::autotune
