// The report's numbers as a person reads them (monitor/readable_number.h).
#include "monitor/readable_number.h"

#include <gtest/gtest.h>

#include <cmath>

namespace deepshard::monitor {
namespace readable_number_test {

TEST(ReadableNumber, FourSignificantDigitsBelowAThousand) {
  EXPECT_EQ(readable_number(2.383156418800354), "2.383");
  EXPECT_EQ(readable_number(0.000123456), "0.0001235");
  EXPECT_EQ(readable_number(999.94), "999.9");
  EXPECT_EQ(readable_number(-0.5), "-0.5");
  EXPECT_EQ(readable_number(0.0), "0");
  EXPECT_EQ(readable_number(4.0), "4");
}

TEST(ReadableNumber, WholeNumbersWithSeparatorsFromAThousand) {
  EXPECT_EQ(readable_number(2060.8006098253927), "2,061");
  EXPECT_EQ(readable_number(1000.0), "1,000");
  EXPECT_EQ(readable_number(1234567.0), "1,234,567");
  EXPECT_EQ(readable_number(-98765.4), "-98,765");
}

TEST(ReadableNumber, NonFiniteValuesAreNamed) {
  EXPECT_EQ(readable_number(std::nan("")), "nan");
  EXPECT_EQ(readable_number(INFINITY), "inf");
  EXPECT_EQ(readable_number(-INFINITY), "-inf");
}

TEST(ReadableShare, APercentageWithOneDecimal) {
  EXPECT_EQ(readable_share(0.023608288552514733), "2.4 %");
  EXPECT_EQ(readable_share(1.0), "100.0 %");
  EXPECT_EQ(readable_share(0.0), "0.0 %");
}

}  // namespace readable_number_test
}  // namespace deepshard::monitor
