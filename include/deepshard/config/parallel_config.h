// The rank grid's config sections (docs/parallel.md): "pipeline" and "tensor_parallel". Kept out of
// DsConfig on purpose: parse_ds_config reads them (strictly) for the batch triple and refuses what
// no engine trains with them (a pipeline at ZeRO stages 2-3; compression; the flops profiler
// with a pipeline);
// RunConfig::parallel and the parallel layer read them with parse_parallel_config.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

namespace deepshard::config {

// pipeline: the model's layers split over `stages` ranks. Only these keys are read; DeepSpeed's
// other pipeline keys (seed_layers, activation_checkpoint_interval, ...) are unknown keys.
struct PipelineConfig {
  bool enabled = false;
  int64_t stages = 1;
  std::string partition_method = "parameters";  // "uniform" | "parameters" (PipelineModule's)
  int64_t effective_stages() const { return enabled ? stages : 1; }
};

// tensor_parallel: Megatron-style tensor parallelism over `size` adjacent ranks.
struct TensorParallelConfig {
  bool enabled = false;
  int64_t size = 1;
  int64_t effective_size() const { return enabled ? size : 1; }
};

struct ParallelConfig {
  PipelineConfig pipeline;
  TensorParallelConfig tensor_parallel;
  // The ranks one data-parallel replica spans: stages x tensor size.
  int64_t model_ranks() const {
    return pipeline.effective_stages() * tensor_parallel.effective_size();
  }
};

// The two sections of a DeepSpeed config or run file (absent: disabled; present without
// "enabled": enabled). Throws ConfigError naming
// `origin` and the key path of every bad value or unknown key.
ParallelConfig parse_parallel_config(const nlohmann::json& json,
                                     const std::string& origin = "config");

}  // namespace deepshard::config
