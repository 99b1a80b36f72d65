// parse_model_json: a run config's "model" section parsed as `deepshard train` parses it (presets,
// architecture keys, checks), for the architectures' config tests.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "deepshard/config/loader.h"
#include "models/registry.h"

namespace deepshard::models {

inline config::ModelConfig parse_model_json(const std::string& model_json) {
  const auto json = nlohmann::json::parse(R"({"train_micro_batch_size_per_gpu": 1, "model": )" +
                                          model_json + "}");
  return config::parse_run_config(json, 1, nullptr, "test", arch_schemas()).model;
}

}  // namespace deepshard::models
