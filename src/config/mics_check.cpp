// The checks of MiCS's keys (zero_optimization.mics_shard_size, mics_hierarchical_params_gather;
// zero/stage3/mics_groups.h) against the rest of the config and the job's size: DeepSpeed's
// assertion that the shard size divides the data-parallel ranks, its keys ignored outside stage 3
// (warned here), and the combinations deepshard does not build yet (refused, naming the keys).
// Whether mics_hierarchical_params_gather fits the nodes is known only from the launcher's ranks
// per node: the engine checks it (MicsGroups::create).
#include "config/sections.h"

namespace deepshard::config::detail {

void check_mics(const DsConfig& c, int64_t dp_world_size, int64_t model_ranks, Diagnostics& diag) {
  const ZeroConfig& z = c.zero;
  const std::string shard_key = "zero_optimization.mics_shard_size";
  if (z.mics_shard_size <= 0) {
    if (z.mics_hierarchical_params_gather) {
      diag.warn("zero_optimization.mics_hierarchical_params_gather",
                "only used with zero_optimization.mics_shard_size > 0 (MiCS); ignored");
    }
    return;
  }
  if (z.stage != 3) {
    diag.warn(shard_key,
              "MiCS partitions ZeRO stage 3 only; ignored at stage " + std::to_string(z.stage));
    return;
  }
  if (model_ranks > 1) {
    diag.error(shard_key,
               "MiCS with pipeline or tensor parallelism (pipeline.stages x tensor_parallel.size "
               "= " +
                   std::to_string(model_ranks) + "): not supported yet");
    return;
  }
  if (z.mics_shard_size > dp_world_size || dp_world_size % z.mics_shard_size != 0) {
    diag.error(shard_key, std::to_string(z.mics_shard_size) + " does not divide the job's " +
                              std::to_string(dp_world_size) +
                              " data-parallel ranks (MiCS cuts them into shard groups of that "
                              "many consecutive ranks)");
  }
  const auto refuse_with = [&](bool on, const std::string& key) {
    if (on) diag.error(shard_key, "MiCS with zero_optimization." + key + ": not supported yet");
  };
  refuse_with(z.zero_hpz_partition_size > 1, "zero_hpz_partition_size");
  refuse_with(z.zero_quantized_weights, "zero_quantized_weights");
  refuse_with(z.zero_quantized_nontrainable_weights, "zero_quantized_nontrainable_weights");
  refuse_with(z.zero_quantized_gradients, "zero_quantized_gradients");
  refuse_with(z.offload_param.enabled(), "offload_param");
  refuse_with(z.offload_optimizer.enabled(), "offload_optimizer");
  if (z.mics_hierarchical_params_gather) {
    diag.warn("zero_optimization.mics_hierarchical_params_gather",
              "the shard group's parameter gather is not 2-hop yet: measured on 2 emulated nodes "
              "x 2 ranks, shard size 4 sends the same cross-node bytes with and without it");
  }
}

}  // namespace deepshard::config::detail
