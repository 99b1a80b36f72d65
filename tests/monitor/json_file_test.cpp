// JSON files and JSON-lines records: a string with bytes that are not UTF-8 (a text sample decoded
// from byte tokens) is written with U+FFFD in their place instead of failing the write.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "monitor/jsonl_writer.h"
#include "support/test_support.h"

namespace deepshard::monitor {
namespace json_file_test {

TEST(JsonFile, InvalidUtf8IsReplacedNotFatal) {
  testing::TempDir dir;
  const nlohmann::json value = {{"sample", std::string("The \x9e end")}};
  const std::string path = dir.file("summary.json");
  write_json_file(path, value);
  EXPECT_EQ(nlohmann::json::parse(testing::read_file(path)).at("sample"), "The \xEF\xBF\xBD end");
  const std::string lines = dir.file("metrics.jsonl");
  {
    JsonlWriter writer(lines);
    writer.write(value);
  }
  EXPECT_EQ(nlohmann::json::parse(testing::read_file(lines)).at("sample"), "The \xEF\xBF\xBD end");
}

}  // namespace json_file_test
}  // namespace deepshard::monitor
