// The job the tuner tunes: the `deepshard train` command after `deepshard launch ... --`, its
// config as train reads it (run file, --deepspeed merged, --set applied), and the same command
// with an experiment's overrides (more --set). Private to the autotune layer.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace deepshard::autotune {

// Key paths ("zero_optimization.stage") to the values an experiment sets.
using Overrides = std::map<std::string, nlohmann::json>;

class UserJob {
 public:
  // `command`: the per-rank command. Throws UsageError unless it is `<deepshard> train --config
  // RUN.json ...` (the tuner reads the runs' metrics.jsonl and summary.json).
  explicit UserJob(std::vector<std::string> command);

  // The merged config (possibly holding the tuner's lists: zero_optimization.stage: [1, 2]).
  const nlohmann::json& config() const { return config_; }
  const std::string& origin() const { return origin_; }
  const std::vector<std::string>& command() const { return command_; }

  // The command with `overrides` applied as `--set key=value` (after the user's own, so they win).
  std::vector<std::string> command_with(const Overrides& overrides) const;
  // The user's config with `overrides` applied (what the experiment's ranks read).
  nlohmann::json config_with(const Overrides& overrides) const;

 private:
  std::vector<std::string> command_;
  nlohmann::json config_;
  std::string origin_;
};

// The value at a key path of `config`, or null.
nlohmann::json value_at_path(const nlohmann::json& config, const std::string& path);

}  // namespace deepshard::autotune
