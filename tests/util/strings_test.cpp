// Tests of the small string helpers (util/strings.h).
#include "util/strings.h"

#include <gtest/gtest.h>

namespace deepshard::strings {
namespace strings_test {

TEST(Strings, ParseIntTakesWholeDecimalIntegersOnly) {
  EXPECT_EQ(parse_int("0"), 0);
  EXPECT_EQ(parse_int("29500"), 29500);
  EXPECT_EQ(parse_int("-3"), -3);
  EXPECT_EQ(parse_int(""), std::nullopt);
  EXPECT_EQ(parse_int("-"), std::nullopt);
  EXPECT_EQ(parse_int("4x"), std::nullopt);
  EXPECT_EQ(parse_int(" 4"), std::nullopt);
  EXPECT_EQ(parse_int("1.5"), std::nullopt);
  EXPECT_EQ(parse_int("99999999999"), std::nullopt);  // out of int range
}

TEST(Strings, TrimSplitAndClosestMatch) {
  EXPECT_EQ(trim("  a b \t\n"), "a b");
  EXPECT_EQ(split("a,,b", ','), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(edit_distance("stage", "stgae"), 2u);
  EXPECT_EQ(closest_match("overlap_com", {"overlap_comm", "reduce_scatter"}), "overlap_comm");
  EXPECT_EQ(closest_match("xyz", {"overlap_comm", "reduce_scatter"}), "");
}

TEST(Strings, FirstLineDropsABacktrace) {
  EXPECT_EQ(first_line("bad shape\nException raised from foo at bar.cpp:1"), "bad shape");
  EXPECT_EQ(first_line("one line"), "one line");
  EXPECT_EQ(first_line(""), "");
  EXPECT_EQ(first_line("\nsecond"), "");
}

}  // namespace strings_test
}  // namespace deepshard::strings
