// Tests of reading config files (syntax errors with line:column, duplicate keys by path), merging
// and --set overrides.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "deepshard/config/loader.h"
#include "deepshard/util/error.h"
#include "support/test_support.h"

namespace deepshard::config {
namespace json_io_test {

using deepshard::testing::TempDir;
using deepshard::testing::write_file;
using nlohmann::json;

std::string read_error(const std::string& path) {
  try {
    read_json_file(path);
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a ConfigError reading " << path;
  return "";
}

TEST(ReadJsonFile, ParsesAndAllowsComments) {
  TempDir dir;
  write_file(dir.file("a.json"), "// a comment\n{\"zero_optimization\": {\"stage\": 2}}\n");
  json j = read_json_file(dir.file("a.json"));
  EXPECT_EQ(j["zero_optimization"]["stage"], 2);
}

TEST(ReadJsonFile, SyntaxErrorNamesFileLineAndColumn) {
  TempDir dir;
  const std::string path = dir.file("bad.json");
  write_file(path, "{\n  \"a\": 1,\n  \"b\": tru\n}\n");
  std::string message = read_error(path);
  EXPECT_EQ(message.rfind(path + ":3:", 0), 0u) << message;
  EXPECT_NE(message.find("JSON syntax error"), std::string::npos) << message;
  EXPECT_NE(message.find("invalid literal"), std::string::npos) << message;

  write_file(path, "{\"a\": 1,}");
  message = read_error(path);
  EXPECT_EQ(message.rfind(path + ":1:9: JSON syntax error:", 0), 0u) << message;

  write_file(path, "");
  message = read_error(path);
  EXPECT_EQ(message.rfind(path + ":1:1: JSON syntax error:", 0), 0u) << message;
  EXPECT_NE(message.find("unexpected end of input"), std::string::npos) << message;
}

TEST(ReadJsonFile, DuplicateKeysAreErrorsNamingTheirPath) {
  TempDir dir;
  const std::string path = dir.file("dup.json");
  write_file(path,
             "{\"zero_optimization\": {\"stage\": 1, \"stage\": 2},\n"
             " \"list\": [{\"x\": 1}, {\"y\": 1, \"y\": 2}],\n"
             " \"train_batch_size\": 8, \"train_batch_size\": 16}");
  EXPECT_EQ(read_error(path), path + ": zero_optimization.stage: duplicate key\n" + path +
                                  ": list[1].y: duplicate key\n" + path +
                                  ": train_batch_size: duplicate key");
}

TEST(ReadJsonFile, MissingFileIsAnIoError) {
  TempDir dir;
  EXPECT_THROW(read_json_file(dir.file("missing.json")), IoError);
}

TEST(MergeJson, MergesObjectsAndReplacesOtherValues) {
  json base = {{"a", {{"x", 1}, {"y", 2}}}, {"b", {1, 2}}};
  merge_json(base, {{"a", {{"y", 3}, {"z", 4}}}, {"b", {5}}, {"c", true}});
  EXPECT_EQ(base, json({{"a", {{"x", 1}, {"y", 3}, {"z", 4}}}, {"b", {5}}, {"c", true}}));
}

TEST(ApplyOverride, ParsesJsonValuesAndCreatesObjects) {
  json j = json::object();
  apply_override(j, "zero_optimization.stage=2");
  apply_override(j, "zero_optimization.offload_optimizer.device=cpu");
  apply_override(j, "fp16.enabled=true");
  apply_override(j, "optimizer.params.betas=[0.8, 0.99]");
  apply_override(j, "optimizer.params.lr=auto");
  apply_override(j, "data.train=\"x=y.bin\"");
  EXPECT_EQ(j["zero_optimization"]["stage"], 2);
  EXPECT_EQ(j["zero_optimization"]["offload_optimizer"]["device"], "cpu");
  EXPECT_EQ(j["fp16"]["enabled"], true);
  EXPECT_EQ(j["optimizer"]["params"]["betas"], json({0.8, 0.99}));
  EXPECT_EQ(j["optimizer"]["params"]["lr"], "auto");
  EXPECT_EQ(j["data"]["train"], "x=y.bin");
}

TEST(ApplyOverride, RejectsMalformedAssignments) {
  json j = {{"zero_optimization", 3}};
  EXPECT_THROW(apply_override(j, "zero_optimization.stage"), ConfigError);
  EXPECT_THROW(apply_override(j, "=2"), ConfigError);
  EXPECT_THROW(apply_override(j, "a..b=2"), ConfigError);
  try {
    apply_override(j, "zero_optimization.stage=2");
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("zero_optimization is not an object"), std::string::npos)
        << e.what();
  }
}

}  // namespace json_io_test
}  // namespace deepshard::config
