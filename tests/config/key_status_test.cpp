// No silently ignored key: every key path of the schema (the resolved default config) has a row in
// src/config/key_status.cpp, and a non-default value of each key does what its row says: a kWarned
// key draws a warning naming it, a kRefused key is refused naming it, a kWithFeature key belongs
// to a refused feature. Data-driven: a key added to the schema, or a row flipped by the helper who
// implements the key, needs no change here.
#include "config/key_status.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "config/config_test_helpers.h"

namespace deepshard::config {
namespace key_status_test {

using namespace deepshard::config::testing;
using nlohmann::json;

struct Leaf {
  std::string path;
  json value;
};

std::vector<Leaf> schema_leaves() {
  const json resolved = to_json(parse_ok(with_batch(json::object())).config);
  std::vector<Leaf> leaves;
  for (const std::string& path : key_paths(resolved))
    leaves.push_back({path, *value_at(resolved, path)});
  return leaves;
}

// A value other than the default of the same type, or null when none is obvious.
json other_value(const json& v) {
  if (v.is_boolean()) return !v.get<bool>();
  if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    return i > (int64_t(1) << 50) ? i / 2 : i >= 0 ? i + 1 : 2;
  }
  if (v.is_number_float()) return v.get<double>() > 0 ? v.get<double>() / 2 : 0.5;
  return json();
}

json with_leaf(const std::string& path, const json& value) {
  std::string pointer = "/" + path;
  for (char& c : pointer) c = c == '.' ? '/' : c;
  json j = with_batch(json::object());
  j[json::json_pointer(pointer)] = value;
  return j;
}

TEST(KeyStatus, EveryKeyOfTheSchemaHasARow) {
  const auto leaves = schema_leaves();
  ASSERT_GT(leaves.size(), 140u);
  for (const Leaf& leaf : leaves) {
    EXPECT_NE(key_status(leaf.path), nullptr)
        << leaf.path << " has no row in src/config/key_status.cpp: say what deepshard does with it";
  }
}

TEST(KeyStatus, EveryRowNamesKeysOfTheSchema) {
  const auto leaves = schema_leaves();
  for (const KeyRow& row : key_status_table()) {
    const std::string p = row.path;
    bool used = false;
    for (const Leaf& leaf : leaves) {
      used = used || leaf.path == p || (p.back() == '.' && leaf.path.rfind(p, 0) == 0);
    }
    EXPECT_TRUE(used) << "row " << p << " matches no key of the schema";
    if (row.status == KeyStatus::kWithFeature) {
      const KeyRow* feature = key_status(row.why);
      ASSERT_NE(feature, nullptr) << p << ": no row for its feature " << row.why;
      EXPECT_EQ(feature->status, KeyStatus::kRefused) << p << ": its feature " << row.why;
    }
    if (row.status == KeyStatus::kWarned) {
      EXPECT_GT(std::string(row.why).size(), 10u) << p;
    }
  }
}

TEST(KeyStatus, ANonDefaultValueDoesWhatTheRowSays) {
  int warned = 0, refused = 0;
  for (const Leaf& leaf : schema_leaves()) {
    const KeyRow* row = key_status(leaf.path);
    if (row == nullptr) continue;
    const json value = other_value(leaf.value);
    if (value.is_null()) continue;
    const json config = with_leaf(leaf.path, value);
    std::vector<std::string> warnings;
    std::string error;
    DsConfig parsed;
    try {
      parsed = parse_ds_config(config, context(), &warnings);
    } catch (const ConfigError& e) {
      error = e.what();
    }
    const std::string what = leaf.path + "=" + value.dump();
    if (row->status == KeyStatus::kWarned) {
      if (!error.empty()) continue;  // out of range for this key: nothing accepted
      bool named = false;
      for (const auto& w : warnings) {
        named = named || (w.find(leaf.path) != std::string::npos &&
                          w.find("accepted but ignored") != std::string::npos);
      }
      EXPECT_TRUE(named) << what << " was accepted without a warning naming it";
      ++warned;
    } else if (row->status == KeyStatus::kRefused) {
      bool named = error.find(leaf.path) != std::string::npos;
      if (error.empty()) {
        for (const auto& m : unsupported_features(parsed)) {
          named = named || m.find(leaf.path) != std::string::npos;
        }
      }
      // A refused key's other value may still be one the engine runs (e.g. a supported
      // optimizer type); then it must not warn as ignored either.
      if (!named) {
        for (const auto& w : warnings) EXPECT_EQ(w.find("ignored"), std::string::npos) << w;
      } else {
        ++refused;
      }
    }
  }
  std::printf("%d warned and %d refused keys checked with a non-default value\n", warned, refused);
  EXPECT_GT(warned, 20);
  // The table's refused keys that take a non-default value (hpZ, MiCS, quantized weights and
  // quantized gradients act; zero_quantized_nontrainable_weights warns).
  EXPECT_GE(refused, 12);
}

TEST(KeyStatus, DefaultsDrawNoIgnoredKeyWarning) {
  auto parsed = parse_ok(with_batch(json::object()));
  for (const auto& w : parsed.warnings)
    EXPECT_EQ(w.find("accepted but ignored"), std::string::npos) << w;
}

}  // namespace key_status_test
}  // namespace deepshard::config
