// The model of a run's `model` section: the architecture model.arch names (models/registry.h)
// with its sizes (presets applied), built as a models::CausalLmImpl that the trainer, `generate`
// and the converters use without knowing the architecture.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>

#include "deepshard/config/run_config.h"
#include "deepshard/models/causal_lm.h"
#include "deepshard/sharding/sharding_plan.h"

namespace deepshard::train {

// Builds and initialises the model of `model.arch`, drawn from `seed`. `on_unit_built`
// (optional): called with each sharding unit as soon as it is built (zero.Init). Throws
// ConfigError for an unknown architecture (naming the known ones).
std::shared_ptr<models::CausalLmImpl> make_model(
    const config::ModelConfig& model, uint64_t seed,
    const sharding::UnitBuilt& on_unit_built = nullptr);

// The model section as a checkpoint's client state saves it ("model": architecture and sizes,
// presets applied), and back (a checkpoint without "arch" holds the default architecture's model:
// models::find_arch("")).
nlohmann::json saved_model_json(const config::ModelConfig& model);
config::ModelConfig model_from_saved_json(const nlohmann::json& saved);

// Parameters of the model of `model` (a tied head counted once), without building it.
int64_t parameter_count(const config::ModelConfig& model);

// Training FLOPs (forward + backward matmuls) per token of the model at its block_size
// (models/flops.h), what summary.json's MFU divides by.
double training_flops_per_token(const config::ModelConfig& model);

}  // namespace deepshard::train
