// UserJob (user_job.h): reads the train command's options as `deepshard train` does.
#include "autotune/user_job.h"

#include <filesystem>

#include "config/key_status.h"
#include "deepshard/config/loader.h"
#include "deepshard/util/error.h"

namespace deepshard::autotune {
namespace {

// "--name value" or "--name=value" at args[i]; returns the value and advances i.
bool take_option(const std::vector<std::string>& args, size_t& i, const std::string& name,
                 std::string& value) {
  const std::string& a = args[i];
  if (a == name) {
    DS_CHECK(i + 1 < args.size(), UsageError, "the train command's ", name, " expects a value");
    value = args[++i];
    return true;
  }
  if (a.rfind(name + "=", 0) == 0) {
    value = a.substr(name.size() + 1);
    return true;
  }
  return false;
}

}  // namespace

UserJob::UserJob(std::vector<std::string> command) : command_(std::move(command)) {
  DS_CHECK(command_.size() >= 2 && command_[1] == "train", UsageError,
           "--autotuning tunes a `deepshard train --config RUN.json ...` job (it reads the runs' "
           "metrics.jsonl), got the command '",
           command_.empty() ? "" : command_[0], command_.size() > 1 ? " " + command_[1] : "", "'");
  std::string run_path, ds_path;
  std::vector<std::string> sets;
  for (size_t i = 2; i < command_.size(); ++i) {
    std::string value;
    if (take_option(command_, i, "--config", value))
      run_path = value;
    else if (take_option(command_, i, "--deepspeed", value))
      ds_path = value;
    else if (take_option(command_, i, "--set", value))
      sets.push_back(value);
  }
  DS_CHECK(!run_path.empty(), UsageError, "the train command has no --config RUN.json");
  config_ = config::read_json_file(run_path);
  origin_ = run_path;
  if (!ds_path.empty()) {
    config::merge_json(config_, config::read_json_file(ds_path));
    origin_ += " + " + ds_path;
  }
  for (const auto& s : sets) config::apply_override(config_, s);
}

std::vector<std::string> UserJob::command_with(const Overrides& overrides) const {
  std::vector<std::string> out = command_;
  for (const auto& [path, value] : overrides) {
    out.push_back("--set");
    out.push_back(path + "=" + value.dump());
  }
  return out;
}

nlohmann::json UserJob::config_with(const Overrides& overrides) const {
  nlohmann::json out = config_;
  for (const auto& [path, value] : overrides)
    config::apply_override(out, path + "=" + value.dump());
  return out;
}

nlohmann::json value_at_path(const nlohmann::json& config, const std::string& path) {
  const nlohmann::json* value = config::value_at(config, path);
  return value != nullptr ? *value : nlohmann::json();
}

}  // namespace deepshard::autotune
