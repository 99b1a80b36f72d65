// Helpers shared by the config tests: parse a JSON text as a DeepSpeed config or run file and get
// the result, the warnings, or the ConfigError message.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "deepshard/config/loader.h"
#include "deepshard/util/error.h"
#include "util/strings.h"

namespace deepshard::config::testing {

inline ResolveContext context(int64_t world = 1) {
  ResolveContext c;
  c.dp_world_size = world;
  c.origin = "test.json";
  return c;
}

struct Parsed {
  DsConfig config;
  std::vector<std::string> warnings;
};

inline Parsed parse_ok(const nlohmann::json& json, const ResolveContext& ctx = context()) {
  Parsed out;
  try {
    out.config = parse_ds_config(json, ctx, &out.warnings);
  } catch (const ConfigError& e) {
    ADD_FAILURE() << "unexpected ConfigError:\n" << e.what() << "\nfor " << json.dump();
  }
  return out;
}

// The ConfigError message (all errors, one per line); fails the test when parsing succeeds.
inline std::string parse_error(const nlohmann::json& json, const ResolveContext& ctx = context()) {
  std::vector<std::string> warnings;
  try {
    parse_ds_config(json, ctx, &warnings);
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a ConfigError for " << json.dump();
  return "";
}

// A config whose batch triple is valid at world size 1, with `extra` merged in.
inline nlohmann::json with_batch(const nlohmann::json& extra) {
  nlohmann::json j = {{"train_batch_size", 8}};
  merge_json(j, extra);
  return j;
}

// The names of the .json files in `dir`, sorted.
inline std::vector<std::string> json_files_in(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path().filename());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// What deepshard makes of a config file under a context: the parsed config with its warnings and
// unsupported features, or the errors (one per line).
struct Outcome {
  DsConfig config;
  std::vector<std::string> warnings;
  std::vector<std::string> unsupported;
  std::vector<std::string> errors;  // empty when the file parsed
};

inline Outcome load_outcome(const std::string& path, const ResolveContext& ctx) {
  Outcome out;
  try {
    out.config = parse_ds_config(read_json_file(path), ctx, &out.warnings);
    out.unsupported = unsupported_features(out.config);
  } catch (const ConfigError& e) {
    out.errors = strings::split(e.what(), '\n');
  }
  return out;
}

}  // namespace deepshard::config::testing
