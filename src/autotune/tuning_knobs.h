// The non-fast mode's knobs per ZeRO stage, after DeepSpeed's DEFAULT_TUNING_SPACE_ZERO_0..3 with
// what changes a deepshard run: the bucket sizes (DeepSpeed's 5e7, 5e8, 1e9, and a quarter of the
// model, since every size at or above the parameter count is the same single bucket), overlap_comm,
// reduce_scatter and contiguous_gradients (stage 2), prefetch and persistence (stage 3), optimizer
// offload to host memory (stages 1-3) and activation checkpointing. A key the user's config sets
// is not tuned; a list there replaces the default values (DeepSpeed's tuning-space override).
// Private to the autotune layer.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "autotune/user_job.h"

namespace deepshard::autotune {

// The key paths the tuner may take as lists in the user's config (the knobs, the stage, the
// micro-batch size).
std::vector<std::string> tunable_paths();

// Every combination of the stage's knob values (the cartesian product), each as overrides.
std::vector<Overrides> knob_space(int stage, const nlohmann::json& user_config, int64_t num_params);

}  // namespace deepshard::autotune
