// The top-level sections around training itself (deepspeed-behavior.md §1.4, §1.5, §7):
// activation_checkpointing, data_types, the monitors, comms_logger, flops_profiler, checkpoint,
// aio, torch_autocast, compression (PowerSGD), autotuning (validated: autotuning_section.cpp), and
// the sections deepshard recognises only by name (amp, elasticity, ...; pipeline and
// tensor_parallel are parallel_section.cpp's): those are recorded in DsConfig::other_features when
// present and enabled.
#include "config/sections.h"

namespace deepshard::config::detail {

namespace {

// Sections recognised by name only; their contents are passed on unchecked.
const char* const kOpaqueSections[] = {"amp",
                                       "elasticity",
                                       "sparse_attention",
                                       "compression_training",
                                       "data_efficiency",
                                       "curriculum_learning",
                                       "nebula",
                                       "datastates_ckpt",
                                       "hybrid_engine",
                                       "compile",
                                       "expert_parallel",
                                       "weight_quantization",
                                       "quantize_training",
                                       "eigenvalue",
                                       "progressive_layer_drop"};

// Present and switched on: {"enabled": true}, a non-empty object without "enabled", or true.
bool requested(const nlohmann::json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_object()) {
    auto it = v.find("enabled");
    if (it == v.end()) return !v.empty();
    return !(it->is_boolean() && !it->get<bool>());
  }
  return true;
}

template <typename S, typename C>
void visit_activation_checkpointing(S& s, C& c) {
  s.field("partition_activations", c.partition_activations);
  s.field("contiguous_memory_optimization", c.contiguous_memory_optimization);
  s.field("cpu_checkpointing", c.cpu_checkpointing);
  s.field("number_checkpoints", c.number_checkpoints, Check::at_least(1));
  s.field("synchronize_checkpoint_boundary", c.synchronize_checkpoint_boundary);
  s.field("profile", c.profile);
}

template <typename S, typename C>
void visit_data_types(S& s, C& c) {
  s.field("grad_accum_dtype", c.grad_accum_dtype);
  s.field("param_dtype", c.param_dtype);
  s.field("buffer_dtype", c.buffer_dtype);
}

template <typename S, typename C>
void visit_sink(S& s, C& c) {
  s.field("enabled", c.enabled);
  s.field("output_path", c.output_path);
  s.field("job_name", c.job_name);
}

template <typename S, typename C>
void visit_wandb(S& s, C& c) {
  s.field("enabled", c.enabled);
  s.field("group", c.group);
  s.field("team", c.team);
  s.field("project", c.project);
}

template <typename S, typename C>
void visit_comet(S& s, C& c) {
  s.field("enabled", c.enabled);
  s.field("samples_log_interval", c.samples_log_interval, Check::at_least(1));
  s.field("project", c.project);
  s.field("workspace", c.workspace);
  s.field("api_key", c.api_key);
  s.field("experiment_name", c.experiment_name);
  s.field("experiment_key", c.experiment_key);
  s.field("online", c.online);
  s.field("mode", c.mode);
}

template <typename S, typename C>
void visit_trackio(S& s, C& c) {
  s.field("enabled", c.enabled);
  s.field("project", c.project);
}

template <typename S, typename C>
void visit_comms_logger(S& s, C& c) {
  s.field("enabled", c.enabled);
  s.field("verbose", c.verbose);
  s.field("prof_all", c.prof_all);
  s.field("debug", c.debug);
  s.field("prof_ops", c.prof_ops);
}

template <typename S, typename C>
void visit_flops_profiler(S& s, C& c) {
  s.field("enabled", c.enabled);
  s.field("recompute_fwd_factor", c.recompute_fwd_factor, Check::at_least(0.0));
  s.field("profile_step", c.profile_step, Check::at_least(1));
  s.field("module_depth", c.module_depth);
  s.field("top_modules", c.top_modules, Check::at_least(1));
  s.field("detailed", c.detailed);
  s.field("output_file", c.output_file);
}

template <typename S, typename C>
void visit_checkpoint(S& s, C& c) {
  s.field("tag_validation", c.tag_validation, Check::one_of({"Ignore", "Warn", "Fail"}, true));
  s.field("load_universal", c.load_universal);
  s.field("use_node_local_storage", c.use_node_local_storage);
  s.field("checkpoint_serialization", c.checkpoint_serialization);
  s.declare("writer");  // a pluggable checkpoint engine: recognised by name only
  auto parallel_write = s.child("parallel_write");
  parallel_write.field("pipeline_stage", c.parallel_write_pipeline_stage);
  parallel_write.finish();
}

template <typename S, typename C>
void visit_aio(S& s, C& c) {
  s.field("block_size", c.block_size, Check::at_least(1));
  s.field("queue_depth", c.queue_depth, Check::at_least(1));
  s.field_alias("intra_op_parallelism", "thread_count", c.intra_op_parallelism, Check::at_least(1));
  s.field("single_submit", c.single_submit);
  s.field("overlap_events", c.overlap_events);
  s.field("use_gds", c.use_gds);
}

template <typename S, typename C>
void visit_torch_autocast(S& s, C& c) {
  s.field("enabled", c.enabled);
  s.field("dtype", c.dtype);
  s.field("lower_precision_safe_modules", c.lower_precision_safe_modules);
}

template <typename S, typename C>
void visit_compression(S& s, C& c) {
  s.field("type", c.type, Check::one_of({"powerSGD"}));
  auto params = s.child("params");
  params.field("matrix_approximation_rank", c.matrix_approximation_rank, Check::at_least(1));
  params.field("start_compressing_after_step", c.start_compressing_after_step, Check::at_least(0));
  params.field("min_compression_rate", c.min_compression_rate, Check::at_least(0.0));
  params.field("use_error_feedback", c.use_error_feedback);
  params.field("warm_start", c.warm_start);
  params.field("orthogonalization_epsilon", c.orthogonalization_epsilon, Check::at_least(0.0));
  params.field("random_seed", c.random_seed);
  params.finish();
}

// Calls visit(section, config) for every section of this file, readers or writers alike.
template <typename S, typename C, typename Visit>
void visit_sections(S& root, C& c, Visit&& visit) {
  visit(root.child("activation_checkpointing"), c.activation_checkpointing,
        [](auto& s, auto& v) { visit_activation_checkpointing(s, v); });
  visit(root.child("data_types"), c.data_types, [](auto& s, auto& v) { visit_data_types(s, v); });
  visit(root.child("tensorboard"), c.monitor.tensorboard,
        [](auto& s, auto& v) { visit_sink(s, v); });
  visit(root.child("csv_monitor"), c.monitor.csv_monitor,
        [](auto& s, auto& v) { visit_sink(s, v); });
  visit(root.child("wandb"), c.monitor.wandb, [](auto& s, auto& v) { visit_wandb(s, v); });
  visit(root.child("comet"), c.monitor.comet, [](auto& s, auto& v) { visit_comet(s, v); });
  visit(root.child("trackio"), c.monitor.trackio, [](auto& s, auto& v) { visit_trackio(s, v); });
  visit(root.child("comms_logger"), c.comms_logger,
        [](auto& s, auto& v) { visit_comms_logger(s, v); });
  visit(root.child("flops_profiler"), c.flops_profiler,
        [](auto& s, auto& v) { visit_flops_profiler(s, v); });
  visit(root.child("checkpoint"), c.checkpoint, [](auto& s, auto& v) { visit_checkpoint(s, v); });
  visit(root.child("aio"), c.aio, [](auto& s, auto& v) { visit_aio(s, v); });
  visit(root.child("torch_autocast"), c.torch_autocast,
        [](auto& s, auto& v) { visit_torch_autocast(s, v); });
  visit(root.child("compression"), c.compression,
        [](auto& s, auto& v) { visit_compression(s, v); });
}

}  // namespace

void parse_features(Section& root, DsConfig& config) {
  visit_sections(root, config, [](Section&& s, auto& value, auto&& visit_one) {
    visit_one(s, value);
    s.finish();
  });
  // Read by `deepshard launch --autotuning` (src/autotune/); a run validates it only.
  AutotuningConfig autotuning;
  parse_autotuning(root, autotuning);
  if (const nlohmann::json* a = root.get("autotuning"); a != nullptr && !a->empty()) {
    root.diag().warn("autotuning",
                     "read by `deepshard launch --autotuning tune|run` (docs/autotuning.md); this "
                     "run trains with its config as given");
  }
  if (const nlohmann::json* checkpoint = root.get("checkpoint"); checkpoint != nullptr) {
    auto writer = checkpoint->find("writer");
    if (writer != checkpoint->end() && requested(*writer)) {
      config.other_features.emplace_back("checkpoint.writer");
    }
  }
  // {"type": null} is how the resolved config writes "off"; a block without "type" is a mistake.
  if (const nlohmann::json* c = root.get("compression");
      c != nullptr && c->is_object() && !c->contains("type")) {
    root.diag().error("compression.type", "required: the compression method (\"powerSGD\")");
  }
  for (const char* key : kOpaqueSections) {
    root.declare(key);
    const nlohmann::json* value = root.get(key);
    if (value != nullptr && requested(*value)) config.other_features.emplace_back(key);
  }
}

void write_features(Writer& root, const DsConfig& config) {
  visit_sections(root, config,
                 [](Writer&& w, const auto& value, auto&& visit_one) { visit_one(w, value); });
}

}  // namespace deepshard::config::detail
