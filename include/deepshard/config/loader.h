// Reading and resolving configs. Every error names the file and the full key path; all errors of
// a file are reported together. DeepSpeed semantics: docs/deepspeed-behavior.md §1.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "deepshard/config/ds_config.h"
#include "deepshard/config/run_config.h"

namespace deepshard::config {

// Reads a JSON file. Syntax errors name the file, line and column; duplicate keys are an error
// (as in DeepSpeed).
nlohmann::json read_json_file(const std::string& path);

// Deep-merges `overlay` into `base` (objects merge key by key, other values replace).
void merge_json(nlohmann::json& base, const nlohmann::json& overlay);

// Applies one `--set key.path=value` override. The value is parsed as JSON when it is valid JSON
// (numbers, true/false, "strings", [lists]) and taken as a plain string otherwise.
void apply_override(nlohmann::json& config, const std::string& assignment);

// What the run provides to resolve DeepSpeed "auto" values and the batch triple.
struct ResolveContext {
  int64_t dp_world_size = 1;
  int64_t hidden_size = 0;        // model n_embd, for "auto" bucket sizes (0 = unknown)
  TrainConfig train;              // its optional fields fill "auto"
  std::string origin = "config";  // file name used in messages
};

// Parses and validates DeepSpeed keys of `json` (other top-level keys of a run file are skipped
// when `run_file` is true). Throws ConfigError listing every problem found. Warnings (deprecated
// keys, ignored keys) are appended to `warnings`.
DsConfig parse_ds_config(const nlohmann::json& json, const ResolveContext& context,
                         std::vector<std::string>* warnings, bool run_file = false);

// A plain DeepSpeed config file (what deepspeed.initialize(config=PATH) reads) for
// `dp_world_size` ranks: read_json_file + parse_ds_config; its warnings are logged (rank 0 only
// when log::set_rank was called). Throws ConfigError naming the file and keys.
DsConfig load_ds_config(const std::string& path, int64_t dp_world_size);

// The resolved DeepSpeed config as JSON: every key with its value (defaults filled, "auto"
// resolved, deprecated keys under their current names). parse_ds_config of it gives `config` back.
nlohmann::json to_json(const DsConfig& config);

// Parses a whole run file (DeepSpeed keys + model/data/train/comm). Throws ConfigError.
RunConfig parse_run_config(const nlohmann::json& json, int64_t dp_world_size,
                           std::vector<std::string>* warnings, const std::string& origin);

// Features the engine does not implement yet, as "not supported yet: <key path>" messages.
// Empty when the config can run. Kept in one table (src/config/support.cpp) that grows as
// features land.
std::vector<std::string> unsupported_features(const DsConfig& config);
// Throws ConfigError listing unsupported_features(config), one a line, unless there are none.
void check_supported(const DsConfig& config);

// Model size presets: "tiny" (~1M parameters), "small" (~10-20M), "gpt2" (124M). Fills the zero
// fields of `model` from the preset; throws ConfigError for an unknown preset.
void apply_model_preset(ModelConfig& model);

}  // namespace deepshard::config
