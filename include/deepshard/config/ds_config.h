// Typed DeepSpeed configuration. The JSON (DeepSpeed's schema, see docs/deepspeed-behavior.md
// §1) is parsed once by load_ds_config() into these structs; each component receives only its own
// struct. Defaults are DeepSpeed's code defaults (§1.3-1.5, §11.5); every field names its key.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace deepshard::config {

enum class OffloadDevice { kNone, kCpu, kNvme };
enum class DType { kFp32, kFp16, kBf16 };

const char* to_string(OffloadDevice d);  // "none" | "cpu" | "nvme"
const char* to_string(DType d);          // "fp32" | "fp16" | "bf16"

// zero_optimization.offload_param / zero_optimization.offload_optimizer (§1.4).
struct OffloadConfig {
  OffloadDevice device = OffloadDevice::kNone;  // device
  std::string nvme_path;                        // nvme_path (required for nvme)
  bool pin_memory = true;                       // pin_memory
  int64_t buffer_count = 4;                     // buffer_count (5 for offload_param)
  int64_t buffer_size = 100'000'000;            // buffer_size (offload_param only)
  int64_t max_in_cpu = 1'000'000'000;           // max_in_cpu (offload_param only)
  bool pipeline_read = false;                   // pipeline_read (offload_optimizer only)
  bool pipeline_write = false;                  // pipeline_write (offload_optimizer only)
  bool fast_init = false;                       // fast_init (offload_optimizer only)
  double ratio = 1.0;                           // ratio (offload_optimizer only)
  bool super_offload = false;                   // super_offload (offload_optimizer only)
  double cpuadam_cores_perc = 0.8;              // cpuadam_cores_perc (offload_optimizer only)
  bool enabled() const { return device != OffloadDevice::kNone; }
};

// offload_param differs from offload_optimizer in one default: buffer_count 5.
inline OffloadConfig offload_param_defaults() {
  OffloadConfig config;
  config.buffer_count = 5;
  return config;
}

// zero_optimization (§1.3). Sizes are element counts, not bytes.
struct ZeroConfig {
  int stage = 0;
  bool contiguous_gradients = true;
  bool reduce_scatter = true;
  int64_t reduce_bucket_size = 500'000'000;
  bool use_multi_rank_bucket_allreduce = true;
  bool allgather_partitions = true;
  int64_t allgather_bucket_size = 500'000'000;
  bool overlap_comm = false;  // resolved: absent -> (stage == 3)
  bool load_from_fp32_weights = true;
  bool elastic_checkpoint = false;
  OffloadConfig offload_param = offload_param_defaults();  // stage 3 only
  OffloadConfig offload_optimizer;                         // stages 1-3
  int64_t sub_group_size = 1'000'000'000;
  int64_t prefetch_bucket_size = 50'000'000;        // stage3_prefetch_bucket_size
  int64_t param_persistence_threshold = 100'000;    // stage3_param_persistence_threshold
  int64_t model_persistence_threshold = INT64_MAX;  // stage3_model_persistence_threshold
  int64_t max_live_parameters = 1'000'000'000;      // stage3_max_live_parameters
  int64_t max_reuse_distance = 1'000'000'000;       // stage3_max_reuse_distance
  bool gather_16bit_weights_on_model_save = false;  // stage3_gather_16bit_weights_on_model_save
  int64_t module_granularity_threshold = 0;         // stage3_module_granularity_threshold
  bool use_all_reduce_for_fetch_params = false;     // stage3_use_all_reduce_for_fetch_params
  bool allgather_sequential = false;                // stage3_allgather_sequential
  int64_t partition_stream_chunk_size = 0;          // stage3_partition_stream_chunk_size
  bool ignore_unused_parameters = true;
  bool round_robin_gradients = false;
  int64_t zero_hpz_partition_size = 1;
  bool zero_quantized_weights = false;
  bool zero_quantized_nontrainable_weights = false;
  bool zero_quantized_gradients = false;
  int64_t mics_shard_size = -1;
  bool mics_hierarchical_params_gather = false;
  bool memory_efficient_linear = true;
  bool pipeline_loading_checkpoint = false;
  bool override_module_apply = true;
  bool log_trace_cache_warnings = false;
  bool enable_sanity_checks = false;
  bool save_muon_momentum_buffer_in_memory = false;
};

// fp16 (§1.5, §4.1). loss_scale 0 means dynamic loss scaling.
struct Fp16Config {
  bool enabled = false;
  double loss_scale = 0.0;
  int initial_scale_power = 16;
  int loss_scale_window = 1000;
  int hysteresis = 2;
  bool consecutive_hysteresis = false;
  double min_loss_scale = 1.0;
  bool auto_cast = false;
  bool fp16_master_weights_and_grads = false;
  bool dynamic() const { return enabled && loss_scale == 0.0; }
};

// bf16 (or legacy "bfloat16").
struct Bf16Config {
  bool enabled = false;
  bool immediate_grad_update = false;
  bool check_grad_overflow = true;
  bool bf16_master_weights_and_grads = false;
  bool bf16_optimizer_states = false;
};

// optimizer {type, params}. Type names are matched case-insensitively and stored canonical
// ("Adam", "AdamW", ...). "Adam" with adam_w_mode true (DeepSpeed's default) decays decoupled.
struct OptimizerConfig {
  std::string type = "AdamW";
  double lr = 1e-3;
  std::array<double, 2> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool adam_w_mode = true;
  bool torch_adam = false;
  bool bias_correction = true;
  bool amsgrad = false;
  bool legacy_fusion = false;  // optimizer.legacy_fusion (DeepSpeed's FP16 fused-Adam variant)
  bool decoupled_weight_decay() const { return type == "AdamW" || adam_w_mode; }
};

// scheduler {type, params} (§1.6). type "" means no scheduler (constant lr).
struct SchedulerConfig {
  // "" | "WarmupLR" | "WarmupDecayLR" | "WarmupCosineLR" | "OneCycle" | "LRRangeTest", or the
  // name of a torch.optim.lr_scheduler class (recognised, not supported).
  std::string type;
  // WarmupLR / WarmupDecayLR
  double warmup_min_lr = 0.0;
  std::optional<double> warmup_max_lr;  // absent: the optimizer's lr (WarmupDecayLR: 0.001)
  int64_t warmup_num_steps = 1000;
  std::string warmup_type = "log";  // "log" | "linear"
  int64_t total_num_steps = 0;      // WarmupDecayLR, WarmupCosineLR (required there)
  // WarmupCosineLR
  double warmup_min_ratio = 0.0;
  double cos_min_ratio = 1e-4;
  // OneCycle
  double cycle_min_lr = 0.0;
  double cycle_max_lr = 0.0;
  double decay_lr_rate = 0.0;
  int64_t cycle_first_step_size = 2000;
  std::optional<int64_t> cycle_second_step_size;
  int64_t cycle_first_stair_count = 0;
  std::optional<int64_t> cycle_second_stair_count;  // absent: cycle_first_stair_count (DeepSpeed)
  int64_t decay_step_size = 0;
  bool cycle_momentum = true;
  double cycle_min_mom = 0.8;
  double cycle_max_mom = 0.9;
  double decay_mom_rate = 0.0;
  // LRRangeTest
  double lr_range_test_min_lr = 1e-3;
  int64_t lr_range_test_step_size = 2000;
  double lr_range_test_step_rate = 1.0;
  bool lr_range_test_staircase = false;
};

// activation_checkpointing (§7).
struct ActivationCheckpointingConfig {
  bool partition_activations = false;
  bool contiguous_memory_optimization = false;
  bool cpu_checkpointing = false;
  std::optional<int64_t> number_checkpoints;
  bool synchronize_checkpoint_boundary = false;
  bool profile = false;
};

// data_types.
struct DataTypesConfig {
  std::optional<DType> grad_accum_dtype;  // absent: the model dtype
  std::optional<DType> param_dtype;
  std::optional<DType> buffer_dtype;
};

// tensorboard / csv_monitor.
struct MonitorSinkConfig {
  bool enabled = false;
  std::string output_path;
  std::string job_name = "DeepSpeedJobName";
};

struct WandbConfig {
  bool enabled = false;
  std::optional<std::string> group;
  std::optional<std::string> team;
  std::string project = "deepspeed";
};

struct CometConfig {
  bool enabled = false;
  int64_t samples_log_interval = 100;
  std::optional<std::string> project, workspace, api_key, experiment_name, experiment_key, mode;
  std::optional<bool> online;
};

struct TrackioConfig {
  bool enabled = false;
  std::string project = "deepspeed";
};

// The monitors (top-level tensorboard, csv_monitor, wandb, comet, trackio).
struct MonitorConfig {
  MonitorSinkConfig tensorboard;
  MonitorSinkConfig csv_monitor;
  WandbConfig wandb;
  CometConfig comet;
  TrackioConfig trackio;
};

// comms_logger.
struct CommsLoggerConfig {
  bool enabled = false;
  bool verbose = false;
  bool prof_all = true;
  bool debug = false;
  std::vector<std::string> prof_ops;
};

// flops_profiler.
struct FlopsProfilerConfig {
  bool enabled = false;
  double recompute_fwd_factor = 0.0;
  int64_t profile_step = 1;
  int64_t module_depth = -1;
  int64_t top_modules = 1;
  bool detailed = true;
  std::optional<std::string> output_file;
};

// checkpoint (its `writer` sub-dict is recognised only as present, see DsConfig::other_features).
struct CheckpointConfig {
  std::string tag_validation = "Warn";  // Ignore | Warn | Fail (case-insensitive)
  bool load_universal = false;
  bool use_node_local_storage = false;
  bool checkpoint_serialization = true;        // torch.save's zip serialization
  bool parallel_write_pipeline_stage = false;  // parallel_write.pipeline_stage
};

// aio (NVMe swapping).
struct AioConfig {
  int64_t block_size = 1'048'576;
  int64_t queue_depth = 8;
  int64_t intra_op_parallelism = 1;
  bool single_submit = false;
  bool overlap_events = true;
  bool use_gds = false;
};

// torch_autocast.
struct TorchAutocastConfig {
  bool enabled = false;
  std::optional<DType> dtype;
  std::vector<std::string> lower_precision_safe_modules;
};

// compression: gradient compression of the data-parallel all-reduce, in the form
// {"type": "powerSGD", "params": {...}} (PyTorch's PowerSGDState options; comm/powersgd.h).
// Stages 0 and 1 only (where the whole gradient is all-reduced).
struct CompressionConfig {
  std::optional<std::string> type;  // absent: off; "powerSGD"
  int64_t matrix_approximation_rank = 1;
  int64_t start_compressing_after_step = 1000;
  double min_compression_rate = 2.0;
  bool use_error_feedback = true;
  bool warm_start = true;
  double orthogonalization_epsilon = 0.0;
  int64_t random_seed = 0;
  bool enabled() const { return type.has_value(); }
};

// timers.throughput (DeepSpeed's throughput timer; deepshard times every step either way).
struct TimersConfig {
  bool throughput_enabled = true;
  bool throughput_synchronized = true;
};

// The whole DeepSpeed config, resolved: the batch triple is consistent and every "auto" filled.
struct DsConfig {
  int64_t train_batch_size = 0;
  int64_t train_micro_batch_size_per_gpu = 0;
  int64_t gradient_accumulation_steps = 0;
  double gradient_clipping = 1.0;  // 0 disables
  std::optional<int64_t> steps_per_print;
  bool wall_clock_breakdown = false;
  bool prescale_gradients = false;
  double gradient_predivide_factor = 1.0;
  std::optional<DType> communication_data_type;  // absent: model dtype
  ZeroConfig zero;
  Fp16Config fp16;
  Bf16Config bf16;
  OptimizerConfig optimizer;
  SchedulerConfig scheduler;
  ActivationCheckpointingConfig activation_checkpointing;
  DataTypesConfig data_types;
  CompressionConfig compression;

  // Keys deepshard reads and validates; most of them it does not act on yet (see
  // unsupported_features() in loader.h, which lists those that would change the run).
  std::string gradient_allreduce_op = "mean";  // "mean" | "sum"
  bool sparse_gradients = false;
  bool managed_gradient_accumulation = true;
  bool memory_breakdown = false;
  bool dump_state = false;
  bool dataloader_drop_last = false;
  bool zero_allow_untested_optimizer = false;
  bool zero_force_ds_cpu_optimizer = true;
  int64_t sequence_parallel_size = 1;
  std::optional<std::string> log_level;  // the engine sets the process's log level from it
  // Keys of features deepshard does not have (key_status.cpp says why each changes nothing):
  DType seq_parallel_communication_data_type = DType::kFp32;  // sequence parallelism
  std::optional<int64_t> vocabulary_size;  // DeepSpeed only checks GPU tensor-core alignment
  bool disable_allgather = false;
  bool graph_harvesting = false;                    // CUDA graphs
  bool use_data_before_expert_parallelism = false;  // mixture of experts
  TimersConfig timers;
  MonitorConfig monitor;
  CommsLoggerConfig comms_logger;
  FlopsProfilerConfig flops_profiler;
  CheckpointConfig checkpoint;
  AioConfig aio;
  TorchAutocastConfig torch_autocast;
  // Key paths of sections deepshard recognises only by name and that are present and enabled
  // (amp, elasticity, pipeline, sparse_attention, zero_optimization.zenflow, ...).
  std::vector<std::string> other_features;

  DType model_dtype() const {
    return fp16.enabled ? DType::kFp16 : bf16.enabled ? DType::kBf16 : DType::kFp32;
  }
};

}  // namespace deepshard::config
