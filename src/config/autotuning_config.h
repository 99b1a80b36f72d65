// DeepSpeed's `autotuning` section: what `deepshard launch --autotuning tune|run` searches and how
// (docs/autotuning.md). Defaults are DeepSpeed's code defaults (deepspeed/autotuning/constants.py).
// A plain `deepshard train` run only validates the section (it is not part of DsConfig, nor of the
// resolved config); the tuner (src/autotune/) acts on it.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

namespace deepshard::config {

struct AutotuningConfig {
  bool enabled = false;
  bool fast = true;  // stage x micro-batch only; false adds each stage's knobs
  std::string results_dir = "autotuning_results";
  std::string exps_dir = "autotuning_exps";
  bool overwrite = true;              // false: experiments with results in results_dir are reused
  std::string metric = "throughput";  // "throughput" | "latency" | "FLOPS"
  int64_t start_profile_step = 3;     // first measured optimizer step (1-based)
  int64_t end_profile_step = 5;       // last measured step; a trial runs this many steps
  std::optional<std::string> metric_path;      // DeepSpeed's per-experiment metric file
  std::optional<std::string> model_info_path;  // DeepSpeed's profile-run output file
  std::string tuner_type = "gridsearch";       // "gridsearch" | "random" | "model_based"
  int64_t tuner_early_stopping = 5;
  int64_t tuner_num_trials = 50;
  std::map<std::string, std::string> arg_mappings;  // DeepSpeed key -> the command's own flag
  std::optional<int64_t> max_train_batch_size;
  int64_t min_train_batch_size = 1;
  int64_t max_train_micro_batch_size_per_gpu = 1024;
  int64_t min_train_micro_batch_size_per_gpu = 1;
  int64_t num_tuning_micro_batch_sizes = 3;
  int64_t mp_size = 1;
  bool model_info_given = false;  // a `model_info` block was present (not used: see the docs)
};

// The `autotuning` section of a whole config (DeepSpeed keys, possibly with the tuner's lists in
// other sections, which are not read here). Throws ConfigError naming `origin` and the key; the
// warnings (keys accepted without effect: metric_path, model_info_path, model_info, arg_mappings)
// are appended to `warnings`.
AutotuningConfig parse_autotuning_config(const nlohmann::json& config, const std::string& origin,
                                         std::vector<std::string>* warnings);

}  // namespace deepshard::config
