// Log levels by name (util/log.h): DEEPSHARD_LOG_LEVEL's and DeepSpeed's log_level's.
#include "util/log.h"

#include <gtest/gtest.h>

namespace deepshard::log {
namespace log_test {

TEST(Log, LevelsByName) {
  EXPECT_EQ(parse_level("debug"), Level::kDebug);
  EXPECT_EQ(parse_level("info"), Level::kInfo);
  EXPECT_EQ(parse_level("warn"), Level::kWarn);
  EXPECT_EQ(parse_level("warning"), Level::kWarn);
  EXPECT_EQ(parse_level("error"), Level::kError);
  EXPECT_EQ(parse_level("critical"), Level::kError);
  EXPECT_EQ(parse_level("loud"), std::nullopt);
  EXPECT_EQ(parse_level(""), std::nullopt);
}

}  // namespace log_test
}  // namespace deepshard::log
