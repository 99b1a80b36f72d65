// The zero_optimization section (deepspeed-behavior.md §1.3, §1.4): every key with its DeepSpeed
// default, the stage3_* aliases, offload_param / offload_optimizer, the deprecated keys and the
// legacy `"zero_optimization": true` form.
#include "config/sections.h"

namespace deepshard::config::detail {

namespace {

const Check kSize = Check::at_least(0);

template <typename S, typename C>
void visit_offload(S& s, C& o, bool optimizer) {
  s.field("device", o.device);
  s.field("nvme_path", o.nvme_path);
  s.field("pin_memory", o.pin_memory);
  s.field("buffer_count", o.buffer_count, kSize);
  if (optimizer) {
    s.field("pipeline_read", o.pipeline_read);
    s.field("pipeline_write", o.pipeline_write);
    s.field("fast_init", o.fast_init);
    s.field("ratio", o.ratio, Check::between(0.0, 1.0));
    s.field("super_offload", o.super_offload);
    s.field("cpuadam_cores_perc", o.cpuadam_cores_perc, Check::between(0.0, 1.0));
  } else {
    s.field("buffer_size", o.buffer_size, kSize);
    s.field("max_in_cpu", o.max_in_cpu, kSize);
  }
}

template <typename S, typename C>
void visit_zero(S& s, C& z, const AutoValues& av) {
  s.field("stage", z.stage, Check::between(0, 3));
  s.field("contiguous_gradients", z.contiguous_gradients);
  s.field("reduce_scatter", z.reduce_scatter);
  s.field("reduce_bucket_size", z.reduce_bucket_size, kSize, av.reduce_bucket_size);
  s.field("use_multi_rank_bucket_allreduce", z.use_multi_rank_bucket_allreduce);
  s.field("allgather_partitions", z.allgather_partitions);
  s.field("allgather_bucket_size", z.allgather_bucket_size, kSize);
  s.field("load_from_fp32_weights", z.load_from_fp32_weights);
  s.field("elastic_checkpoint", z.elastic_checkpoint);
  {
    auto offload = s.child("offload_param");
    visit_offload(offload, z.offload_param, false);
    offload.finish();
  }
  {
    auto offload = s.child("offload_optimizer");
    visit_offload(offload, z.offload_optimizer, true);
    offload.finish();
  }
  s.field("sub_group_size", z.sub_group_size, kSize);
  s.field_alias("stage3_prefetch_bucket_size", "prefetch_bucket_size", z.prefetch_bucket_size,
                kSize, av.prefetch_bucket_size);
  s.field_alias("stage3_param_persistence_threshold", "param_persistence_threshold",
                z.param_persistence_threshold, kSize, av.param_persistence_threshold);
  s.field_alias("stage3_model_persistence_threshold", "model_persistence_threshold",
                z.model_persistence_threshold, kSize);
  s.field_alias("stage3_max_live_parameters", "max_live_parameters", z.max_live_parameters, kSize);
  s.field_alias("stage3_max_reuse_distance", "max_reuse_distance", z.max_reuse_distance, kSize);
  s.field_alias("stage3_gather_16bit_weights_on_model_save", "gather_16bit_weights_on_model_save",
                z.gather_16bit_weights_on_model_save);
  s.field_alias("stage3_module_granularity_threshold", "module_granularity_threshold",
                z.module_granularity_threshold);
  s.field_alias("stage3_use_all_reduce_for_fetch_params", "use_all_reduce_for_fetch_params",
                z.use_all_reduce_for_fetch_params);
  s.field_alias("stage3_allgather_sequential", "allgather_sequential", z.allgather_sequential);
  s.field_alias("stage3_partition_stream_chunk_size", "partition_stream_chunk_size",
                z.partition_stream_chunk_size, kSize);
  s.field("ignore_unused_parameters", z.ignore_unused_parameters);
  s.field("round_robin_gradients", z.round_robin_gradients);
  s.field("zero_hpz_partition_size", z.zero_hpz_partition_size, kSize);
  s.field("zero_quantized_weights", z.zero_quantized_weights);
  s.field("zero_quantized_nontrainable_weights", z.zero_quantized_nontrainable_weights);
  s.field("zero_quantized_gradients", z.zero_quantized_gradients);
  s.field("mics_shard_size", z.mics_shard_size);
  s.field("mics_hierarchical_params_gather", z.mics_hierarchical_params_gather);
  s.field("memory_efficient_linear", z.memory_efficient_linear);
  s.field("pipeline_loading_checkpoint", z.pipeline_loading_checkpoint);
  s.field("override_module_apply", z.override_module_apply);
  s.field("log_trace_cache_warnings", z.log_trace_cache_warnings);
  s.field("enable_sanity_checks", z.enable_sanity_checks);
  s.field("save_muon_momentum_buffer_in_memory", z.save_muon_momentum_buffer_in_memory);
}

// A deprecated boolean that stands for `new_key` = {device: cpu}.
void map_cpu_offload(Section& s, const char* old_key, const char* new_key, OffloadConfig& target) {
  s.declare(old_key);
  if (!s.has(old_key)) return;
  if (s.has(new_key)) {
    s.diag().error(s.path_of(old_key), std::string("deprecated key and its replacement ") +
                                           s.path_of(new_key) + " are both given; keep only " +
                                           new_key);
    return;
  }
  bool enabled = false;
  s.field(old_key, enabled);
  s.diag().warn(s.path_of(old_key), std::string("deprecated; use ") + s.path_of(new_key) +
                                        (enabled ? " {\"device\": \"cpu\"} (mapped)" : ""));
  if (enabled) target.device = OffloadDevice::kCpu;
}

void map_deprecated(Section& s, ZeroConfig& z) {
  map_cpu_offload(s, "cpu_offload", "offload_optimizer", z.offload_optimizer);
  map_cpu_offload(s, "cpu_offload_param", "offload_param", z.offload_param);

  s.declare("cpu_offload_use_pin_memory");
  if (s.has("cpu_offload_use_pin_memory")) {
    bool ignored = false;
    s.field("cpu_offload_use_pin_memory", ignored);
    s.diag().warn(s.path_of("cpu_offload_use_pin_memory"),
                  "deprecated and ignored; set pin_memory in offload_param / offload_optimizer");
  }

  const char* old_gather = "stage3_gather_fp16_weights_on_model_save";
  s.declare(old_gather);
  if (s.has(old_gather)) {
    if (s.has("stage3_gather_16bit_weights_on_model_save") ||
        s.has("gather_16bit_weights_on_model_save")) {
      s.diag().error(s.path_of(old_gather),
                     "deprecated key and its replacement "
                     "zero_optimization.stage3_gather_16bit_weights_on_model_save are both given; "
                     "keep only stage3_gather_16bit_weights_on_model_save");
    } else {
      s.field(old_gather, z.gather_16bit_weights_on_model_save);
      s.diag().warn(s.path_of(old_gather),
                    "deprecated; use zero_optimization.stage3_gather_16bit_weights_on_model_save "
                    "(mapped)");
    }
  }

  s.declare("legacy_stage1");
  bool legacy_stage1 = false;
  s.field("legacy_stage1", legacy_stage1);
  if (legacy_stage1) {
    s.diag().error(s.path_of("legacy_stage1"),
                   "the legacy stage 1 implementation was removed from DeepSpeed; remove the key");
  }
}

// Sub-configs recognised only by name: present (and not empty) means the feature is requested.
void note_opaque(Section& s, std::vector<std::string>& other_features) {
  for (const char* key : {"zenflow", "zeropp_loco_param", "leaf_module"}) {
    s.declare(key);
    const nlohmann::json* value = s.get(key);
    if (value != nullptr && !(value->is_object() && value->empty())) {
      other_features.push_back(s.path_of(key));
    }
  }
}

}  // namespace

void parse_zero(Section& root, DsConfig& config, const AutoValues& av) {
  ZeroConfig& zero = config.zero;
  const nlohmann::json* value = root.get("zero_optimization");
  if (value != nullptr && value->is_boolean()) {
    // Legacy form: true = stage 1 with the top-level allgather_size as allgather_bucket_size.
    root.declare("zero_optimization");
    root.diag().warn("zero_optimization", "deprecated boolean form; write {\"stage\": " +
                                              std::string(value->get<bool>() ? "1" : "0") +
                                              "} (mapped)");
    zero.stage = value->get<bool>() ? 1 : 0;
    if (zero.stage > 0) {
      root.field("allgather_size", zero.allgather_bucket_size, kSize);
      return;
    }
  }
  // allgather_size is read only by the legacy form above (as in DeepSpeed).
  root.declare("allgather_size");
  if (root.has("allgather_size")) {
    root.diag().warn("allgather_size",
                     "accepted but ignored: read only with the legacy form "
                     "\"zero_optimization\": true; write zero_optimization.allgather_bucket_size");
  }
  if (value != nullptr && value->is_boolean()) return;
  Section s = root.child("zero_optimization");
  visit_zero(s, zero, av);
  map_deprecated(s, zero);
  note_opaque(s, config.other_features);
  std::optional<bool> overlap_comm;
  s.field("overlap_comm", overlap_comm);
  zero.overlap_comm = overlap_comm.value_or(zero.stage == 3);
  // Like a kWarned key (key_status.h), a value other than the default warns; "auto" does not.
  if (zero.stage == 3 && !s.is_auto("reduce_bucket_size") &&
      zero.reduce_bucket_size != ZeroConfig{}.reduce_bucket_size) {
    s.diag().warn(s.path_of("reduce_bucket_size"),
                  format_value(zero.reduce_bucket_size) +
                      " is accepted but ignored at stage 3: each unit's gradients are "
                      "reduce-scattered whole when the unit's backward ends (the unit is the "
                      "bucket)");
  }
  if (zero.stage < 3 && zero.zero_hpz_partition_size > 1) {
    s.diag().warn(s.path_of("zero_hpz_partition_size"),
                  std::to_string(zero.zero_hpz_partition_size) +
                      " is accepted but ignored below stage 3: hpZ's secondary partition is of "
                      "stage 3's gathered parameters");
  }
  if (zero.stage < 3 && zero.zero_quantized_weights) {
    s.diag().warn(s.path_of("zero_quantized_weights"),
                  "true is accepted but ignored below stage 3: it quantizes stage 3's parameter "
                  "all-gathers (below stage 3 every rank holds the whole parameters)");
  }
  if (zero.stage < 3 && zero.zero_quantized_gradients) {
    s.diag().warn(s.path_of("zero_quantized_gradients"),
                  "true is accepted but ignored below stage 3: it quantizes stage 3's gradient "
                  "reduce-scatter (stages 1 and 2 reduce in fp32)");
  }
  s.finish();
}

void write_zero(Writer& root, const ZeroConfig& zero) {
  Writer w = root.child("zero_optimization");
  visit_zero(w, zero, AutoValues{});
  w.field("overlap_comm", zero.overlap_comm);
}

}  // namespace deepshard::config::detail
