// The experiments of a tuning, as DeepSpeed's autotuner lays them out: ZeRO stages 0-3 (or the
// user's list in zero_optimization.stage), for each stage the micro-batch sizes between the
// smallest (the user's train_micro_batch_size_per_gpu, else min_train_micro_batch_size_per_gpu) and
// the largest allowed (max_train_micro_batch_size_per_gpu, max_train_batch_size) — DeepSpeed's
// list of num_tuning_micro_batch_sizes sizes in the upper half plus the smallest — each with the
// gradient accumulation that keeps the per-replica batch of the largest; and in the non-fast mode
// each stage's own knobs (tuning_knobs.h). Private to the autotune layer.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "autotune/experiment.h"
#include "config/autotuning_config.h"

namespace deepshard::autotune {

struct SpaceContext {
  const nlohmann::json* user_config = nullptr;
  config::AutotuningConfig autotuning;
  int64_t data_parallel = 1;  // ranks / (pipeline stages x tensor size)
};

// The stages to explore: a list in zero_optimization.stage, else 0-3.
std::vector<int> stages_to_tune(const SpaceContext& c);

// The user's micro-batch list (train_micro_batch_size_per_gpu: [1, 4, 16]), if given.
std::optional<std::vector<int64_t>> user_micro_batch_list(const SpaceContext& c);
// The smallest micro-batch to tune: the user's integer value, else
// min_train_micro_batch_size_per_gpu.
int64_t min_micro_batch(const SpaceContext& c);
// The user's gradient_accumulation_steps (an integer; 1 otherwise).
int64_t user_accumulation(const SpaceContext& c);
// The largest micro-batch allowed: max_train_micro_batch_size_per_gpu, and max_train_batch_size
// over the data-parallel replicas.
int64_t max_micro_batch(const SpaceContext& c);

// DeepSpeed's list between `lo` and `hi`: num sizes from max(lo, hi/2) with a constant stride
// (those with the same accumulation as `hi` left out), then hi; `lo` itself first.
std::vector<int64_t> micro_batch_candidates(int64_t lo, int64_t hi, int64_t num);

// Samples per replica and optimizer step that every micro-batch of a stage shares:
// max_train_batch_size / replicas, else `largest` x the user's accumulation.
int64_t batch_per_replica(const SpaceContext& c, int64_t largest);

// The experiment of `stage` at `micro_batch` (accumulation = per_replica / micro_batch, at least 1)
// with `knobs` (more overrides) and its DeepSpeed name.
Experiment make_experiment(const SpaceContext& c, int stage, int64_t micro_batch,
                           int64_t per_replica, const Overrides& knobs = {});

// The user's config as given, lists replaced by their first value (DeepSpeed's get_first_config).
Experiment baseline_experiment(const SpaceContext& c);

}  // namespace deepshard::autotune
