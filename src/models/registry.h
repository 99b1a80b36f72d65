// The architectures a run's model.arch names, each as one entry of functions: everything the layers
// above the models (the trainer, checkpoints, the estimator, `convert`, `generate`) need of an
// architecture, so that none of them names one. An architecture lives in its own folder,
// src/models/<arch>/, and is registered by one line in src/models/registry.cpp (docs/models.md,
// "Adding an architecture").
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "deepshard/checkpoint/hf_weights.h"
#include "deepshard/config/run_config.h"
#include "deepshard/models/causal_lm.h"
#include "deepshard/models/flops.h"
#include "deepshard/models/parameter_shapes.h"
#include "deepshard/sharding/sharding_plan.h"

namespace deepshard::comm {
class Group;
}

namespace deepshard::models {

class TensorParallelModel;
class TensorSliceBuild;

// Activation memory one rank keeps for backward at the peak of a training pass (bytes).
struct ActivationEstimate {
  int64_t plain = 0;         // no activation checkpointing
  int64_t checkpointed = 0;  // the first `regions` layers checkpointed
  int64_t regions = 0;
};

// Every function takes the run's model section with its preset applied (config::ModelConfig).
struct ArchEntry {
  // model.arch's value.
  const char* name;
  // The class of its layers as pipeline.partition's type:REGEX sees it (the layer module's class
  // name without namespace or "Impl").
  const char* layer_type;
  // Its presets (model.preset) and its checks of a model section (preset applied): the keys it
  // needs, those of another architecture's model it refuses, as (key path, message).
  std::vector<config::ModelPreset> (*presets)();
  void (*check_model)(const config::ModelConfig& model,
                      std::vector<std::pair<std::string, std::string>>& problems);
  // Builds and initialises the model, drawn from `seed`. `on_unit_built` (may be null) gets each
  // sharding unit as soon as it is built, before the next exists (zero.Init).
  std::shared_ptr<CausalLmImpl> (*make_model)(const config::ModelConfig& model, uint64_t seed,
                                              const sharding::UnitBuilt& on_unit_built);
  // Parameters (a tied weight counted once), without building the model.
  int64_t (*parameter_count)(const config::ModelConfig& model);
  // Every parameter as (name, shape) in the model's named_parameters() order (a tied one once).
  std::vector<NamedShape> (*parameter_shapes)(const config::ModelConfig& model);
  // The name of the parameter the output head is tied to, "" when the head is its own.
  std::string (*tied_parameter)(const config::ModelConfig& model);
  // Matmul FLOPs per token of a sequence of `seq_len` tokens (0: block_size).
  FlopsPerToken (*flops_per_token)(const config::ModelConfig& model, int64_t seq_len);
  // The activations of a micro-batch of `batch` sequences of `seq` tokens whose elements take
  // `dtype_bytes`, without checkpointing and with the first `checkpointed` layers (absent: all)
  // recomputed (`deepshard estimate`, docs/activation.md); null: not modelled.
  ActivationEstimate (*estimate_activations)(const config::ModelConfig& model, int64_t batch,
                                             int64_t seq, int64_t dtype_bytes,
                                             std::optional<int64_t> checkpointed);
  // The architecture's own fields of the model section as a checkpoint's client state saves them
  // (added to `saved`), and read back into `model` from such a record.
  void (*save_fields)(const config::ModelConfig& model, nlohmann::json& saved);
  void (*load_fields)(const nlohmann::json& saved, config::ModelConfig& model);
  // How its parameters appear in a Hugging Face safetensors file (models/hf_weights.h).
  checkpoint::HfLayout (*hf_layout)();
  // How its parameters split over tensor-parallel ranks (the plan its sharding_plan() declares).
  sharding::TensorPlan (*tensor_plan)();
  // Its tensor-parallel model (tensor_parallel_model.h) over `model` (built whole by make_model,
  // the same on every rank of `tensor`), which keeps this rank's slices of it; `built` (may be
  // null): the hook that split its layers as they were built. Null: not split over tensor ranks.
  std::unique_ptr<TensorParallelModel> (*make_tensor_parallel)(std::shared_ptr<CausalLmImpl> model,
                                                               comm::Group& tensor,
                                                               const TensorSliceBuild* built);
};

// The entry of model.arch `name` ("": the first registered, the default architecture). Throws
// ConfigError naming it and listing the known ones.
const ArchEntry& find_arch(const std::string& name);
// The registered architectures' names, in registration order.
std::vector<std::string> arch_names();
// What a run file's model section is parsed with (config::parse_run_config): every registered
// architecture's name, presets and checks.
const config::ArchSchemas& arch_schemas();

}  // namespace deepshard::models
