// docs/config.md's key table says what the code does: one row per key of the schema (the resolved
// default config), its default as the code's, and its status as its row in
// src/config/key_status.cpp (supported = kDoes, "refused when set" = kRefused, "only with X" =
// kWithFeature, "warns when set: <why>" = kWarned with the same why). The rank grid's sections
// (pipeline, tensor_parallel) are read apart from the DeepSpeed schema (parallel_config.h) and
// only need their rows to exist.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "config/config_test_helpers.h"
#include "config/key_status.h"

namespace deepshard::config {
namespace config_doc_test {

using nlohmann::json;

struct DocRow {
  std::string default_value;
  std::string status;
  int line = 0;
};

// The rows "| `key` | `default` | status | notes |" of the "## Keys" table.
std::map<std::string, DocRow> doc_rows() {
  const std::string file = std::string(DS_SOURCE_DIR) + "/docs/config.md";
  std::ifstream in(file);
  EXPECT_TRUE(in.good()) << file;
  std::map<std::string, DocRow> rows;
  bool in_keys = false;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.rfind("## ", 0) == 0) in_keys = line == "## Keys";
    if (!in_keys || line.rfind("| `", 0) != 0) continue;
    std::vector<std::string> cells;
    size_t start = 1;
    for (size_t bar = line.find(" | ", start); bar != std::string::npos;
         bar = line.find(" | ", start)) {
      cells.push_back(line.substr(start, bar - start));
      start = bar + 3;
    }
    cells.push_back(line.substr(start));
    for (auto& c : cells) {
      while (!c.empty() && (c.front() == ' ')) c.erase(0, 1);
      while (!c.empty() && (c.back() == ' ' || c.back() == '|')) c.pop_back();
    }
    if (cells.size() < 3) continue;
    auto unquote = [](std::string c) {
      return c.size() >= 2 && c.front() == '`' && c.back() == '`' ? c.substr(1, c.size() - 2) : c;
    };
    rows[unquote(cells[0])] = {unquote(cells[1]), cells[2], number};
  }
  return rows;
}

std::string expected_status(const KeyRow& row) {
  switch (row.status) {
    case KeyStatus::kDoes:
      return "supported";
    case KeyStatus::kRefused:
      return "refused when set";
    case KeyStatus::kWithFeature:
      return std::string("only with `") + row.why + "` (refused)";
    case KeyStatus::kWarned:
      return std::string("warns when set: ") + row.why;
  }
  return "";
}

TEST(ConfigDoc, TheKeyTableSaysWhatTheCodeDoes) {
  const auto rows = doc_rows();
  ASSERT_GT(rows.size(), 100u) << "docs/config.md: no key table under \"## Keys\"";
  const json defaults = to_json(DsConfig{});
  std::set<std::string> schema;
  for (const std::string& path : key_paths(defaults)) {
    schema.insert(path);
    auto it = rows.find(path);
    if (it == rows.end()) {
      ADD_FAILURE() << "docs/config.md has no row for " << path;
      continue;
    }
    const DocRow& doc = it->second;
    const std::string where = "docs/config.md:" + std::to_string(doc.line) + ": " + path + ": ";
    // The batch triple has no default (each is derived from the others, §1.2).
    const bool batch = path == "train_batch_size" || path == "train_micro_batch_size_per_gpu" ||
                       path == "gradient_accumulation_steps";
    if (!batch) {
      EXPECT_EQ(doc.default_value, value_at(defaults, path)->dump()) << where << "default";
    }
    const KeyRow* row = key_status(path);
    ASSERT_NE(row, nullptr) << path;
    const std::string status = expected_status(*row);
    // "supported" may say where ("supported (GPT and Llama, ...)").
    EXPECT_EQ(doc.status.substr(0, status.size()), status) << where << "status";
    if (row->status != KeyStatus::kDoes) {
      EXPECT_EQ(doc.status, status) << where << "status";
    }
  }
  for (const auto& [key, doc] : rows) {
    const bool grid = key.rfind("pipeline.", 0) == 0 || key.rfind("tensor_parallel.", 0) == 0;
    EXPECT_TRUE(schema.count(key) || grid)
        << "docs/config.md:" << doc.line << ": " << key << " is not a key of the schema";
  }
}

}  // namespace config_doc_test
}  // namespace deepshard::config
