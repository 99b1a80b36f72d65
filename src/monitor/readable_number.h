// Numbers as a person reads them in a report: a few significant digits, thousands separated, a
// share as a percentage. Private to the monitor layer.
#pragma once

#include <string>

namespace deepshard::monitor {

// 2.383156418800354 -> "2.383", 0.000123456 -> "0.0001235", 2060.8006 -> "2,061",
// 1234567 -> "1,234,567", -0.5 -> "-0.5": four significant digits below 1000, whole numbers with
// thousands separators from 1000 on.
std::string readable_number(double value);
// 0.023608288552514733 -> "2.4 %" (one decimal).
std::string readable_share(double share);

}  // namespace deepshard::monitor
