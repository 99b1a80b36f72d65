// The sections of a DeepSpeed config, each owned by one file that holds its schema (key names,
// types, ranges, "auto" rules) once and instantiates it to parse and to write: zero_section.cpp,
// precision_section.cpp, optimizer_section.cpp, feature_sections.cpp. ds_config.cpp ties them
// together with the top-level keys and the batch triple. Private to the config layer.
#pragma once

#include <optional>

#include "config/autotuning_config.h"
#include "config/reader.h"
#include "deepshard/config/ds_config.h"
#include "deepshard/config/loader.h"

namespace deepshard::config::detail {

// parse_ds_config (loader.h) reporting into `diag` instead of throwing, so that a run file's
// own sections and its DeepSpeed keys are reported together.
DsConfig parse_ds_config(const nlohmann::json& json, const ResolveContext& context,
                         Diagnostics& diag, bool run_file);

// What each "auto" becomes, derived once from the ResolveContext (auto_values.cpp).
struct AutoValues {
  Auto<int64_t> train_batch_size;
  Auto<int64_t> micro_batch_size;
  Auto<int64_t> gradient_accumulation_steps;
  Auto<double> gradient_clipping;
  Auto<bool> fp16_enabled;
  Auto<bool> bf16_enabled;
  Auto<double> lr;
  Auto<double> weight_decay;
  Auto<std::array<double, 2>> betas;
  Auto<double> eps;
  Auto<double> warmup_min_lr;
  Auto<double> warmup_max_lr;  // also OneCycle's cycle_max_lr
  Auto<int64_t> warmup_num_steps;
  Auto<int64_t> total_num_steps;
  Auto<int64_t> reduce_bucket_size;
  Auto<int64_t> prefetch_bucket_size;
  Auto<int64_t> param_persistence_threshold;
};
AutoValues make_auto_values(const ResolveContext& context);

// zero_optimization (with offload_param / offload_optimizer, the legacy boolean form and the
// deprecated keys). `root` is the top-level section.
void parse_zero(Section& root, DsConfig& config, const AutoValues& av);
void write_zero(Writer& root, const ZeroConfig& zero);

// fp16 and bf16 (or legacy bfloat16).
void parse_precision(Section& root, DsConfig& config, const AutoValues& av);
void write_precision(Writer& root, const DsConfig& config);

// optimizer and scheduler.
void parse_optimizer(Section& root, DsConfig& config, const AutoValues& av);
void write_optimizer(Writer& root, const DsConfig& config);

// activation_checkpointing, data_types, monitors, comms_logger, flops_profiler, checkpoint, aio,
// torch_autocast and the sections recognised only by name (DsConfig::other_features).
void parse_features(Section& root, DsConfig& config);
void write_features(Writer& root, const DsConfig& config);

// autotuning (autotuning_section.cpp): DeepSpeed's keys of the tuner, validated; the keys that
// change nothing here warned.
void parse_autotuning(Section& root, AutotuningConfig& config);

// The batch triple of §1.2: derives the missing values and checks them with DeepSpeed's messages.
struct BatchInputs {
  std::optional<int64_t> train_batch_size;
  std::optional<int64_t> micro_batch_size;
  std::optional<int64_t> gradient_accumulation_steps;
  bool any_auto = false;  // some of them were "auto" without a value to fill them
};
void resolve_batch(const BatchInputs& in, int64_t dp_world_size, DsConfig& config,
                   Diagnostics& diag);

// DeepSpeed's cross-section assertions (fp16 with bf16, offload ratio and stage, ...).
void check_consistency(const DsConfig& config, Diagnostics& diag);

// MiCS's keys against the stage, the job's data-parallel ranks and the other ZeRO features
// (mics_check.cpp).
void check_mics(const DsConfig& config, int64_t dp_world_size, int64_t model_ranks,
                Diagnostics& diag);

}  // namespace deepshard::config::detail
