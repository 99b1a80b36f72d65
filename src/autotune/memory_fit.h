// Whether an experiment fits the memory budget, decided before it runs: the model states and comm
// buffers as `deepshard estimate` counts them for the experiment's config (zero/estimator.h), the
// activations of its micro-batch (per sample, as the profile run's activation meter measured them;
// with activation checkpointing scaled by the checkpointed/plain ratio of the architecture's own
// activation estimate, models/registry.h), and the process's own memory (libtorch, the allocator's
// cache, the comm layer: the profile run's peak RSS minus what the ledger and the meter counted in
// it). Private to the autotune layer.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "deepshard/config/run_config.h"

namespace deepshard::autotune {

// What the profile run measured (model_info.json in results_dir/profile_model_info).
struct ModelInfo {
  int64_t num_params = 0;
  int64_t activation_bytes_per_sample = 0;  // the meter's peak (transient) / the micro-batch
  int64_t gathered_bytes = 0;               // stage 3's gathered units at the peak
  int64_t baseline_bytes = 0;               // resident memory not counted by ledger and meter
  int64_t peak_rss = 0;                     // rank 0's
  double step_s = 0;                        // measured step time (mean of the measured steps)
  double compute_s = 0;                     // of it, not blocked on collectives
};

// Reads the profile run's folder (summary.json's memory_profile, metrics.jsonl's steps).
ModelInfo model_info_from_run(const std::string& run_dir, int64_t micro_batch, int64_t start_step,
                              int64_t end_step);
nlohmann::json to_json(const ModelInfo& info);
ModelInfo model_info_from_json(const nlohmann::json& j);

struct MemoryPrediction {
  int64_t model_states = 0;  // resident parts of parameters, gradients, master, optimizer state
  int64_t buffers = 0;       // comm buffers, swap buffers, stage 3's gathered units
  int64_t activations = 0;
  int64_t baseline = 0;
  int64_t total() const { return model_states + buffers + activations + baseline; }
};

// The predicted peak resident memory per rank of `run` (a resolved run config) on `ranks` ranks.
MemoryPrediction predict_memory(const ModelInfo& info, const config::RunConfig& run, int64_t ranks);

// A micro-batch size that ran and the largest rank's peak resident memory measured in it.
struct MeasuredPeak {
  int64_t micro_batch = 0;
  int64_t peak_rss = 0;
};

// Headroom left under the budget when sizing by measured peaks: resident memory is sampled every
// 50 ms and the peak of one size varies by about 1 % from run to run.
inline constexpr double kMeasuredFitHeadroom = 0.03;

// The largest micro-batch whose peak, extrapolated linearly from the two largest distinct sizes
// measured, stays under (1 - kMeasuredFitHeadroom) x budget; none without two sizes, with a peak
// that does not grow, or when not even one more sample fits. Sizing from runs corrects the
// prediction where it is low (activations per sample are measured at one sample).
std::optional<int64_t> largest_fit_by_measured_peaks(const std::vector<MeasuredPeak>& peaks,
                                                     int64_t budget);

}  // namespace deepshard::autotune
