// What deepshard does with every DeepSpeed key of the schema (no key is silently ignored):
//  - kDoes: what DeepSpeed does with it;
//  - kRefused: a value asking for the feature is refused at start (support.cpp's table);
//  - kWithFeature: only read by a feature that is itself refused unless off (e.g. the sub-keys of
//    tensorboard, offload_param), as DeepSpeed ignores them then too;
//  - kWarned: accepted, but a value other than the default draws a warning naming the key and
//    why it changes nothing here.
// The table is data: a helper implementing a key changes its row (kWarned -> kDoes) and nothing
// else; tests/config/key_status_test.cpp walks every key of the schema against it.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "deepshard/config/ds_config.h"

namespace deepshard::config {

enum class KeyStatus { kDoes, kRefused, kWithFeature, kWarned };

struct KeyRow {
  const char* path;  // a key path of the resolved config ("zero_optimization.sub_group_size");
                     // a path ending in "." covers every key under it
  KeyStatus status;
  const char* why;  // kWarned: the warning's reason; kWithFeature: the refused feature's key
};

const std::vector<KeyRow>& key_status_table();
// The row of a key path (exact match first, else the longest prefix row), or nullptr.
const KeyRow* key_status(const std::string& path);

// Every key path of `config` (a resolved config as JSON): the paths of its non-object values and
// empty objects, "a.b.c".
std::vector<std::string> key_paths(const nlohmann::json& config);
// The value at a key path, or nullptr.
const nlohmann::json* value_at(const nlohmann::json& config, const std::string& path);

// Warnings for the kWarned keys whose resolved value differs from the default, one per key:
// "<key>: <value> is accepted but ignored: <why>".
std::vector<std::pair<std::string, std::string>> ignored_key_warnings(const DsConfig& config);

}  // namespace deepshard::config
