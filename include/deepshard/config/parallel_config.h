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

// pipeline: the model's layers split over `stages` ranks, DeepSpeed's "pipeline" dict
// (docs/parallel.md, "Config"). Without "enabled" a pipeline is on when stages > 1.
struct PipelineConfig {
  bool enabled = false;
  int64_t stages = 1;
  // DeepSpeed's partition method, normalised as DeepSpeed reads it (lower case; "type:<regex>"
  // keeps the text up to the next ':'): "parameters" (PipelineModule's default) | "uniform" |
  // "type:<regex>". The deprecated key partition_method is read as this.
  std::string partition = "parameters";
  bool seed_layers = false;                    // warned: no effect (docs/parallel.md)
  int64_t activation_checkpoint_interval = 0;  // >= 1: every block recomputed (interval 1)
  bool pipe_partitioned = true;  // warned with tensor_parallel: whole activations sent
  bool grad_partitioned = true;  // likewise for the activation gradients
  int64_t effective_stages() const { return enabled ? stages : 1; }
};

// DeepSpeed's reading of a partition method (PipelineModule._partition_layers): lower-cased, then
// "uniform", "parameters" or "type:<regex>" with the regex the text after "type:" up to the next
// ':' (it must compile). Returns "" and sets `normalized`, or says what is wrong.
std::string read_partition_method(const std::string& text, std::string& normalized);

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
