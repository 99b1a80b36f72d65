// No DeepSpeed key is silent: every key of DeepSpeed's own config schema (tests/data/
// deepspeed_config_keys.tsv, read from DeepSpeed's sources, with a probe value other than its
// default) is fed through `deepshard config check`'s parse path (parse_ds_config,
// unsupported_features, parse_parallel_config) and must be
//  - implemented: the resolved config changes at a key whose row in src/config/key_status.cpp says
//    deepshard does what DeepSpeed does (or the strict rank-grid parser, parallel_config.h,
//    accepts a key of pipeline or tensor_parallel);
//  - refused naming it (or the section it belongs to): an error, or "not supported yet";
//  - warned naming it: a warning no config without the key draws;
//  - or read only by a feature refused unless off (kWithFeature): refused naming that feature
//    once the feature is switched on.
// An error calling a DeepSpeed key "unknown" counts as a refusal (the run does not start, and the
// message names the key); a warning "unknown key, ignored" fails: DeepSpeed's keys are known.
// tests/config/key_status_test.cpp walks deepshard's own schema; this walks DeepSpeed's.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "config/config_test_helpers.h"
#include "config/key_status.h"
#include "deepshard/config/parallel_config.h"

namespace deepshard::config {
namespace deepspeed_keys_test {

using namespace deepshard::config::testing;
using nlohmann::json;

constexpr int64_t kRanks = 4;

struct Probe {
  std::string path;
  json value;
  json context = json::object();
  int line = 0;
};

std::vector<Probe> read_probes() {
  const std::string file = std::string(DS_SOURCE_DIR) + "/tests/data/deepspeed_config_keys.tsv";
  std::ifstream in(file);
  EXPECT_TRUE(in.good()) << "cannot read " << file;
  std::vector<Probe> probes;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> columns;
    std::stringstream ss(line);
    for (std::string column; std::getline(ss, column, '\t');) columns.push_back(column);
    EXPECT_GE(columns.size(), 2u) << file << ":" << number << ": expected key<TAB>probe";
    if (columns.size() < 2) continue;
    Probe p;
    p.path = columns[0];
    p.value = json::parse(columns[1]);
    if (columns.size() > 2) p.context = json::parse(columns[2]);
    p.line = number;
    probes.push_back(std::move(p));
  }
  return probes;
}

json set_at(json config, const std::string& path, const json& value) {
  std::string pointer = "/" + path;
  for (char& c : pointer) c = c == '.' ? '/' : c;
  config[json::json_pointer(pointer)] = value;
  return config;
}

bool is_key_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// `message` names `key` as a whole key path (not as part of a longer one).
bool names_exactly(const std::string& message, const std::string& key) {
  for (size_t at = message.find(key); at != std::string::npos; at = message.find(key, at + 1)) {
    const size_t end = at + key.size();
    const bool starts = at == 0 || (!is_key_char(message[at - 1]) && message[at - 1] != '.');
    const bool ends = end == message.size() || (!is_key_char(message[end]) && message[end] != '.');
    if (starts && ends) return true;
  }
  return false;
}

// `message` names `path` or one of the sections it lies in ("amp" for amp.opt_level).
bool names(const std::string& message, std::string path) {
  for (;;) {
    if (names_exactly(message, path)) return true;
    const size_t dot = path.rfind('.');
    if (dot == std::string::npos) return false;
    path.resize(dot);
  }
}

// The row of a resolved key path: its own (or a prefix row's), else the nearest enclosing key's
// ("scheduler" for scheduler.params.warmup_min_lr).
const KeyRow* row_of(std::string path) {
  for (;;) {
    if (const KeyRow* row = key_status(path)) return row;
    const size_t dot = path.rfind('.');
    if (dot == std::string::npos) return nullptr;
    path.resize(dot);
  }
}

struct Parse {
  std::string error;  // the ConfigError, or ""
  std::vector<std::string> warnings;
  std::vector<std::string> refusals;  // unsupported_features
  json resolved;
};

Parse parse(const json& config) {
  Parse out;
  try {
    const DsConfig parsed = parse_ds_config(config, context(kRanks), &out.warnings);
    out.refusals = unsupported_features(parsed);
    out.resolved = to_json(parsed);
    parse_parallel_config(config);
  } catch (const ConfigError& e) {
    out.error = e.what();
  }
  return out;
}

// The key paths whose resolved values differ.
std::vector<std::string> changed(const json& before, const json& after) {
  std::set<std::string> paths;
  for (const auto* side : {&before, &after}) {
    for (const std::string& path : key_paths(*side)) {
      const json* a = value_at(before, path);
      const json* b = value_at(after, path);
      if (a == nullptr || b == nullptr || *a != *b) paths.insert(path);
    }
  }
  return {paths.begin(), paths.end()};
}

enum class Outcome {
  kImplemented,
  kRefused,
  kRefusedAsUnknown,  // an error naming it "unknown key": the run does not start
  kWarned,
  kRefusedWithFeature,
  kUnknown,  // accepted with "unknown key, ignored": silent in effect, and untrue for DeepSpeed's
             // key
  kSilent
};

struct Verdict {
  Outcome outcome;
  std::string why;  // the message or row that decided it
};

Verdict judge(const Probe& probe) {
  const json base_config = with_batch(probe.context);
  const Parse base = parse(base_config);
  if (!base.error.empty()) return {Outcome::kSilent, "its context fails alone: " + base.error};
  const Parse got = parse(set_at(base_config, probe.path, probe.value));

  std::vector<std::string> messages;
  if (!got.error.empty()) messages.push_back(got.error);
  messages.insert(messages.end(), got.refusals.begin(), got.refusals.end());
  for (const std::string& w : got.warnings) {
    if (std::find(base.warnings.begin(), base.warnings.end(), w) == base.warnings.end()) {
      messages.push_back(w);
    }
  }
  for (const std::string& m : messages) {
    std::stringstream lines(m);
    for (std::string line; std::getline(lines, line);) {
      if (!names(line, probe.path)) continue;
      const bool unknown = line.find("unknown key") != std::string::npos;
      if (!got.error.empty() && m == got.error) {
        return {unknown ? Outcome::kRefusedAsUnknown : Outcome::kRefused, line};
      }
      if (unknown) return {Outcome::kUnknown, line};
      const bool refusal =
          std::find(got.refusals.begin(), got.refusals.end(), m) != got.refusals.end();
      return {refusal ? Outcome::kRefused : Outcome::kWarned, line};
    }
  }
  if (!got.error.empty()) return {Outcome::kSilent, "refused without naming it: " + got.error};

  // The rank grid's sections are read strictly (parallel_section.cpp: a key deepshard does not
  // read is an error), apart from the DeepSpeed schema: a key they accept is one they read.
  if (probe.path.rfind("pipeline.", 0) == 0 || probe.path.rfind("tensor_parallel.", 0) == 0) {
    return {Outcome::kImplemented, "read by the rank grid's parser (parallel_config.h)"};
  }
  const KeyRow* with_feature = nullptr;
  for (const std::string& path : changed(base.resolved, got.resolved)) {
    const KeyRow* row = row_of(path);
    if (row == nullptr) continue;
    if (row->status == KeyStatus::kDoes)
      return {Outcome::kImplemented, "row " + std::string(row->path)};
    if (row->status == KeyStatus::kWithFeature) with_feature = row;
  }
  if (with_feature != nullptr) {
    // Switched on, the feature it belongs to is refused naming the feature's key.
    const Parse on =
        parse(set_at(set_at(base_config, probe.path, probe.value), with_feature->why, true));
    std::string all = on.error;
    for (const std::string& r : on.refusals) all += "\n" + r;
    if (names_exactly(all, with_feature->why)) {
      return {Outcome::kRefusedWithFeature, with_feature->why};
    }
    return {Outcome::kSilent, std::string("its feature ") + with_feature->why + " is not refused"};
  }
  return {Outcome::kSilent, "accepted without effect or a word"};
}

TEST(DeepSpeedKeys, TheListIsReadable) {
  const auto probes = read_probes();
  EXPECT_GT(probes.size(), 300u);
  std::set<std::string> seen;
  for (const Probe& p : probes) {
    EXPECT_TRUE(seen.insert(p.path).second) << "line " << p.line << ": " << p.path << " twice";
    EXPECT_TRUE(p.context.is_object()) << "line " << p.line;
  }
}

TEST(DeepSpeedKeys, NoneIsSilent) {
  int counts[7] = {};
  for (const Probe& probe : read_probes()) {
    const Verdict v = judge(probe);
    ++counts[static_cast<int>(v.outcome)];
    const std::string where = "tests/data/deepspeed_config_keys.tsv:" + std::to_string(probe.line) +
                              ": " + probe.path + "=" + probe.value.dump() + ": ";
    EXPECT_NE(v.outcome, Outcome::kSilent) << where << v.why;
    EXPECT_NE(v.outcome, Outcome::kUnknown)
        << where << "DeepSpeed's key is called unknown; say what deepshard does with it: " << v.why;
  }
  std::printf(
      "DeepSpeed keys: %d implemented, %d refused (%d of them as unknown keys), %d warned, %d "
      "refused with their feature, %d ignored as unknown, %d silent\n",
      counts[0], counts[1] + counts[2], counts[2], counts[3], counts[4], counts[5], counts[6]);
  EXPECT_GT(counts[0], 80);
}

}  // namespace deepspeed_keys_test
}  // namespace deepshard::config
