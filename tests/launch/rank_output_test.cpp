// RankOutput (launch/rank_output.h): whole lines with one "[rank R] " prefix each, also for lines
// that carry the prefix already (deepshard's own log lines).
#include "launch/rank_output.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace deepshard::launch {
namespace rank_output_test {

// What `feeds` come out as through a RankOutput of rank 3.
std::string relay(std::initializer_list<std::string_view> feeds) {
  std::FILE* sink = std::tmpfile();
  EXPECT_NE(sink, nullptr);
  RankOutput out(3, sink);
  for (std::string_view f : feeds) out.feed(f);
  out.finish();
  std::rewind(sink);
  std::string text;
  for (int c; (c = std::fgetc(sink)) != EOF;) text += static_cast<char>(c);
  std::fclose(sink);
  return text;
}

TEST(RankOutput, PrefixesWholeLines) {
  EXPECT_EQ(relay({"a\nb", "c\n", "d"}), "[rank 3] a\n[rank 3] bc\n[rank 3] d\n");
}

TEST(RankOutput, ALineWithThePrefixKeepsItsOne) {
  EXPECT_EQ(relay({"[rank 3] info: step 1\nplain\n"}), "[rank 3] info: step 1\n[rank 3] plain\n");
  // Another rank's tag is the line's text, not this rank's prefix.
  EXPECT_EQ(relay({"[rank 1] x\n"}), "[rank 3] [rank 1] x\n");
}

TEST(RankOutput, TheTailHoldsTheLinesWithoutThePrefix) {
  std::FILE* sink = std::tmpfile();
  ASSERT_NE(sink, nullptr);
  RankOutput out(3, sink, 2);
  out.feed("one\n[rank 3] two\nthree\n");
  EXPECT_EQ(out.tail(), (std::deque<std::string>{"two", "three"}));
  std::fclose(sink);
}

}  // namespace rank_output_test
}  // namespace deepshard::launch
