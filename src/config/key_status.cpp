// The status of every DeepSpeed key (see key_status.h). Owners of features in progress flip a
// row when their key starts doing what DeepSpeed says.
#include "config/key_status.h"

#include <nlohmann/json.hpp>

#include "deepshard/config/loader.h"

namespace deepshard::config {
namespace {

using S = KeyStatus;

// clang-format off
const std::vector<KeyRow> kTable = {
    // batch, accumulation, clipping
    {"train_batch_size", S::kDoes, ""},
    {"train_micro_batch_size_per_gpu", S::kDoes, ""},
    {"gradient_accumulation_steps", S::kDoes, ""},
    {"gradient_clipping", S::kDoes, ""},
    {"gradient_allreduce_op", S::kRefused, ""},
    {"gradient_predivide_factor", S::kDoes, ""},
    {"prescale_gradients", S::kDoes, ""},
    {"sparse_gradients", S::kRefused, ""},
    {"managed_gradient_accumulation", S::kRefused, ""},
    {"sequence_parallel_size", S::kRefused, ""},
    {"communication_data_type", S::kDoes, ""},
    {"seq_parallel_communication_data_type", S::kWarned, "no sequence parallelism (sequence_parallel_size > 1 is refused)"},
    {"disable_allgather", S::kWarned, "DeepSpeed reads it and uses it nowhere; the ZeRO engines always all-gather updated parameters"},
    {"use_data_before_expert_parallelism", S::kWarned, "it orders mixture-of-experts process groups, and deepshard has no expert parallelism"},
    {"vocabulary_size", S::kWarned, "DeepSpeed only uses it to warn about GPU tensor-core alignment in fp16; the model's vocabulary comes from model.vocab_size"},
    {"data_types.", S::kRefused, ""},
    // optimizer and schedule
    {"optimizer.type", S::kRefused, ""},
    {"optimizer.params.amsgrad", S::kRefused, ""},
    {"optimizer.legacy_fusion", S::kWarned, "it selects DeepSpeed's old fused-Adam FP16 optimizer; deepshard has one fused AdamW"},
    {"optimizer.params.", S::kDoes, ""},
    {"optimizer.params.torch_adam", S::kWarned, "deepshard always runs its own fused AdamW (the same update as torch.optim.Adam/AdamW)"},
    {"scheduler", S::kDoes, ""},
    // gradient compression
    {"compression.", S::kDoes, ""},  // PowerSGD at stages 0-1 (comm.md); refused elsewhere
    {"zero_allow_untested_optimizer", S::kWarned, "deepshard's only optimizers (Adam, AdamW) are the ones ZeRO supports"},
    {"zero_force_ds_cpu_optimizer", S::kWarned, "offload_optimizer always steps deepshard's own CPU Adam (no client optimizer to allow)"},
    // precision
    {"fp16.", S::kDoes, ""},
    {"fp16.auto_cast", S::kRefused, ""},
    {"fp16.fp16_master_weights_and_grads", S::kRefused, ""},
    {"bf16.enabled", S::kDoes, ""},
    {"bf16.check_grad_overflow", S::kDoes, ""},
    {"bf16.bf16_master_weights_and_grads", S::kRefused, ""},
    {"bf16.bf16_optimizer_states", S::kRefused, ""},
    {"bf16.immediate_grad_update", S::kWarned, "gradients are accumulated in fp32 as they are reduced, with or without it"},
    {"torch_autocast.enabled", S::kRefused, ""},
    {"torch_autocast.", S::kWithFeature, "torch_autocast.enabled"},
    {"graph_harvesting", S::kWarned, "it captures CUDA graphs of the bf16 optimizer's kernels; there is no GPU here"},
    // ZeRO
    {"zero_optimization.stage", S::kDoes, ""},
    {"zero_optimization.allgather_bucket_size", S::kDoes, ""},
    {"zero_optimization.reduce_bucket_size", S::kDoes, ""},  // stages 0-2; stage 3 warns (zero_section.cpp)
    {"zero_optimization.reduce_scatter", S::kDoes, ""},
    {"zero_optimization.overlap_comm", S::kDoes, ""},
    {"zero_optimization.contiguous_gradients", S::kDoes, ""},
    {"zero_optimization.elastic_checkpoint", S::kWarned, "deepshard's checkpoints always reshard on load, at every stage, with or without it"},
    {"zero_optimization.stage3_max_live_parameters", S::kDoes, ""},
    {"zero_optimization.stage3_max_reuse_distance", S::kDoes, ""},
    {"zero_optimization.stage3_prefetch_bucket_size", S::kDoes, ""},
    {"zero_optimization.stage3_param_persistence_threshold", S::kDoes, ""},
    {"zero_optimization.stage3_model_persistence_threshold", S::kDoes, ""},
    {"zero_optimization.stage3_gather_16bit_weights_on_model_save", S::kDoes, ""},
    {"zero_optimization.allgather_partitions", S::kWarned, "deepshard always all-gathers the partitions (DeepSpeed's false broadcasts them: the same values)"},
    {"zero_optimization.enable_sanity_checks", S::kWarned, "not implemented; the ranks' unit order is always checked at stage 3"},
    {"zero_optimization.ignore_unused_parameters", S::kWarned, "unused parameters always get zero gradients (DeepSpeed's false would raise instead)"},
    {"zero_optimization.load_from_fp32_weights", S::kWarned, "checkpoints always load the fp32 master weights"},
    {"zero_optimization.log_trace_cache_warnings", S::kWarned, "a departure from the stage-3 trace is always logged once"},
    {"zero_optimization.memory_efficient_linear", S::kWarned, "the model's linear layers are libtorch's (no extra copies either way)"},
    {"zero_optimization.override_module_apply", S::kWarned, "deepshard's zero.Init does not wrap Module.apply"},
    {"zero_optimization.pipeline_loading_checkpoint", S::kWarned, "no pipeline parallelism"},
    {"zero_optimization.round_robin_gradients", S::kWarned, "it only spreads DeepSpeed's CPU-offload gradient copies across ranks; deepshard's offload copies each rank's own shard either way"},
    {"zero_optimization.save_muon_momentum_buffer_in_memory", S::kWarned, "no Muon optimizer"},
    {"zero_optimization.stage3_allgather_sequential", S::kWarned, "each unit is gathered with one collective (zero_optimization.allgather_sequential is the same key)"},
    {"zero_optimization.stage3_module_granularity_threshold", S::kWarned, "stage-3 units are the model's blocks (the sharding plan), not leaf modules (zero_optimization.module_granularity_threshold is the same key)"},
    {"zero_optimization.stage3_partition_stream_chunk_size", S::kWarned, "no CUDA streams on this engine (zero_optimization.partition_stream_chunk_size is the same key)"},
    {"zero_optimization.stage3_use_all_reduce_for_fetch_params", S::kWarned, "units are fetched with all-gathers (zero_optimization.use_all_reduce_for_fetch_params is the same key)"},
    {"zero_optimization.sub_group_size", S::kDoes, ""},  // offload_optimizer: elements per sub-group (offload.md)
    {"zero_optimization.use_multi_rank_bucket_allreduce", S::kWarned, "buckets are reduced with one collective each"},
    {"zero_optimization.offload_optimizer.", S::kDoes, ""},  // cpu, nvme (offload.md)
    {"zero_optimization.offload_optimizer.cpuadam_cores_perc", S::kWarned, "it tunes SuperOffload, which deepshard does not have"},
    {"zero_optimization.offload_optimizer.fast_init", S::kWarned, "the offloaded optimizer state is always initialised directly"},
    {"zero_optimization.offload_optimizer.super_offload", S::kWarned, "SuperOffload (the Grace-Hopper variant) is not implemented; the usual offload runs"},
    {"zero_optimization.offload_param.", S::kDoes, ""},  // cpu, nvme at stage 3 (offload.md)
    {"zero_optimization.zero_hpz_partition_size", S::kDoes, ""},  // stage 3's hpZ (zero.md); other stages warn
    {"zero_optimization.zero_quantized_weights", S::kDoes, ""},  // stage 3's qwZ (zero.md); other stages warn
    {"zero_optimization.zero_quantized_nontrainable_weights", S::kWarned, "frozen parameters are not partitioned at stage 3 (every rank keeps them whole, as module state): no gather of theirs to quantize"},
    {"zero_optimization.zero_quantized_gradients", S::kDoes, ""},  // stage 3's qgZ (zero.md); other stages warn
    {"zero_optimization.mics_shard_size", S::kDoes, ""},  // MiCS at stage 3 (zero.md)
    {"zero_optimization.mics_hierarchical_params_gather", S::kWarned, "the shard group's parameter gather is not 2-hop yet"},
    {"aio.", S::kDoes, ""},  // NVMe swapping (io layer)
    {"aio.use_gds", S::kWarned, "GPUDirect Storage needs a GPU; swapping goes through host memory"},
    // activation checkpointing
    {"activation_checkpointing.", S::kDoes, ""},  // with train.activation_checkpointing (activation.md)
    // checkpoints
    {"checkpoint.tag_validation", S::kDoes, ""},
    {"checkpoint.load_universal", S::kRefused, ""},
    {"checkpoint.checkpoint_serialization", S::kWarned, "it chooses torch.save's file format; deepshard writes its own shard files"},
    {"checkpoint.use_node_local_storage", S::kWarned, "every rank writes its own shard files under the run folder"},
    {"checkpoint.parallel_write.", S::kWarned, "no pipeline parallelism"},
    // monitoring and debugging
    {"steps_per_print", S::kDoes, ""},  // the progress-line interval unless train.log_interval is given
    {"wall_clock_breakdown", S::kDoes, ""},
    {"timers.throughput.enabled", S::kWarned, "every step is timed for the progress line and metrics.jsonl either way"},
    {"timers.throughput.synchronized", S::kWarned, "there is no device to synchronise: the step's CPU time is exact"},
    {"log_level", S::kDoes, ""},  // Engine::initialize sets the log level, as DeepSpeed's engine
    {"memory_breakdown", S::kDoes, ""},
    {"dump_state", S::kWarned, "not implemented (deepshard config check prints the resolved config)"},
    {"dataloader_drop_last", S::kWarned, "deepshard's sampler draws whole windows: there is no partial batch to drop"},
    {"tensorboard.", S::kDoes, ""},
    {"csv_monitor.", S::kDoes, ""},
    {"wandb.enabled", S::kRefused, ""},
    {"wandb.", S::kWithFeature, "wandb.enabled"},
    {"comet.enabled", S::kRefused, ""},
    {"comet.", S::kWithFeature, "comet.enabled"},
    {"trackio.enabled", S::kRefused, ""},
    {"trackio.", S::kWithFeature, "trackio.enabled"},
    {"comms_logger.", S::kDoes, ""},
    {"comms_logger.debug", S::kRefused, ""},
    {"flops_profiler.", S::kDoes, ""},
    {"flops_profiler.recompute_fwd_factor", S::kRefused, ""},
};
// clang-format on

void collect(const nlohmann::json& j, const std::string& path, std::vector<std::string>& out) {
  if (j.is_object() && !j.empty()) {
    for (const auto& item : j.items()) {
      collect(item.value(), path.empty() ? item.key() : path + "." + item.key(), out);
    }
    return;
  }
  out.push_back(path);
}

}  // namespace

const nlohmann::json* value_at(const nlohmann::json& j, const std::string& path) {
  const nlohmann::json* cur = &j;
  size_t start = 0;
  for (;;) {
    const size_t dot = path.find('.', start);
    const std::string key = path.substr(start, dot == std::string::npos ? dot : dot - start);
    if (!cur->is_object() || !cur->contains(key)) return nullptr;
    cur = &(*cur)[key];
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

std::vector<std::string> key_paths(const nlohmann::json& config) {
  std::vector<std::string> out;
  collect(config, "", out);
  return out;
}

const std::vector<KeyRow>& key_status_table() { return kTable; }

const KeyRow* key_status(const std::string& path) {
  const KeyRow* best = nullptr;
  size_t best_length = 0;
  for (const KeyRow& row : kTable) {
    const std::string p = row.path;
    if (p == path) return &row;
    if (!p.empty() && p.back() == '.' && path.compare(0, p.size(), p) == 0 &&
        p.size() > best_length) {
      best = &row;
      best_length = p.size();
    }
  }
  return best;
}

std::vector<std::pair<std::string, std::string>> ignored_key_warnings(const DsConfig& config) {
  static const nlohmann::json defaults = to_json(DsConfig{});
  const nlohmann::json resolved = to_json(config);
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& path : key_paths(resolved)) {
    const KeyRow* row = key_status(path);
    if (row == nullptr || row->status != KeyStatus::kWarned) continue;
    const nlohmann::json* value = value_at(resolved, path);
    const nlohmann::json* default_value = value_at(defaults, path);
    if (value == nullptr || (default_value != nullptr && *value == *default_value)) continue;
    out.emplace_back(path, value->dump() + " is accepted but ignored: " + row->why);
  }
  return out;
}

}  // namespace deepshard::config
